"""The Diagnose tab's figures from code: `/generate` with `explore` and `generate --explore` take the run apart as the
tab does (`eagle_demo.diagnose.run`): tau by position and by kind of line, every draft shape replayed on the run's
text. Greedy, the shape that ran replays to the run's measured tau, in both. The shipped EAGLE-1 pair, 32 tokens."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eagle_demo.autotree.explore import KNOWN_ERROR
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET
from test_ui_api import CODE_PROMPT

ROOT = Path(__file__).resolve().parent.parent
RAN = re.compile(r"^\* (.+?)\s+(\d+\.\d\d)\s+(?:-|\d+\.\d\d)\s+(?:-|\d+\.\d\dx)\s+(?:best, )?ran: tau "
                 r"(\d+\.\d\d)$")


def _check(block: dict, tau: float, rounds: int) -> None:
    """The block's figures agree with the run's, and the ran shape's replay is its measured tau."""
    labels = {r["tree"]: r for r in block["shapes"]}
    assert block["ran"] in labels and block["best"] in labels and block["known_error"] == list(KNOWN_ERROR)
    assert block["measured_tau"] == pytest.approx(tau, abs=2e-4)
    assert labels[block["ran"]]["tau"] == pytest.approx(block["measured_tau"], abs=2e-4)
    assert sum(b["rounds"] for b in block["by_position"]) == rounds
    assert sum(k["rounds"] for k in block["by_kind"].values()) == rounds
    fields = {"depth", "top_k", "total_tokens", "stop_below", "hot_vocab", "round_cost", "speedup"}
    assert fields <= set(labels[block["ran"]])


def _cli(cache, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "EAGLE_DEMO_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "generate", "--target", SHIPPED_TARGET, "--draft",
                           SHIPPED_EAGLE1, "--prompt", CODE_PROMPT, "--max-new-tokens", "32", "--device", "cpu",
                           "--explore", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_generate_endpoint_and_command_line_return_the_diagnosis(tmp_path, monkeypatch):
    from eagle_demo.app import REGISTRY
    from eagle_demo.app.api import GenerateRequest, generate
    from eagle_demo.app.registry import make_key

    monkeypatch.setenv("EAGLE_DEMO_CACHE", str(tmp_path))  # one calibration, shared with the command line
    REGISTRY.load(make_key(SHIPPED_TARGET, SHIPPED_EAGLE1))
    try:
        _, stats = generate(GenerateRequest(CODE_PROMPT, 32, race=False, explore=True))
        _, plain = generate(GenerateRequest(CODE_PROMPT, 8, race=False))
        _, short = generate(GenerateRequest(CODE_PROMPT, 1, race=False, explore=True))
    finally:
        REGISTRY.clear()
    block = stats["diagnose"]
    _check(block, stats["tau"], stats["rounds"])
    assert block["ran"] == stats["tree"] and any(r["speedup"] > 0 for r in block["shapes"])  # the auto tree's costs
    assert "diagnose" not in plain
    assert short["diagnose"] is None and any("the shape explorer needs 2" in n for n in short["notes"])

    summary = json.loads(_cli(tmp_path, "--json").stdout.strip().splitlines()[-1])
    _check(summary["diagnose"], summary["tau"], summary["rounds"])
    assert summary["diagnose"]["ran"] == block["ran"]  # the same calibration, read from its cache

    text = _cli(tmp_path, "--chain", "5").stderr.splitlines()
    lines = [line.removeprefix("[explore] ") for line in text if line.startswith("[explore] ")]
    assert "by tau (no round costs" in lines[0]  # a tree by hand: no calibration, taus only
    ran = next(m for m in map(RAN.match, lines) if m)
    assert ran.group(1) == "chain 5" and ran.group(2) == ran.group(3)
    table = [line for line in text[text.index(next(t for t in text if "shapes replayed" in t)) + 1:]
             if line.startswith("[explore]   ") or line.startswith("[explore] * ")]
    assert table and max(map(len, table)) <= 80  # the rows fit a terminal with their prefix
    assert any(line.startswith("* ") and line.endswith("best") or "best, ran" in line for line in lines)
    assert any(line.startswith("tau by kind of line: ") for line in lines)
    assert any(line.startswith("tau by position (rounds starting in each 16 tokens): 0+ ") for line in lines)


def test_the_explore_table_fits_80_columns_and_the_json_keeps_full_labels():
    """The widest shapes the explorer prices (a stopping chain over a hot vocabulary, a tree) in compact labels; the
    JSON block keeps `TreeConfig.label()`."""
    from eagle_demo.autotree.explore import Exploration, ShapeRow
    from eagle_demo.common.config import TreeConfig
    from eagle_demo.diagnose.run import RunDiagnosis

    ran = TreeConfig.chain(16, 0.005, 2048)
    trees = [ran, TreeConfig.chain(12, 0.002, 2048), TreeConfig.chain(5), TreeConfig(depth=10, top_k=10,
                                                                                       total_tokens=120)]
    rows = tuple(ShapeRow(t, 3.13 + i, 1.55, (3.13 + i) / 1.55) for i, t in enumerate(trees))
    d = RunDiagnosis((), {}, Exploration(rows, ran, 3.13, 48), 0)
    lines = d.text().splitlines()
    table = lines[1:lines.index(next(x for x in lines if x.startswith("tau by kind")))]
    assert max(len("[explore] " + x) for x in table) <= 80, table
    assert any(x.startswith("* tree 120/10/10 ") and x.endswith("best") for x in table)
    assert any(x.startswith("* chain 16 @0.005 hot 2048 ") and x.endswith("ran: tau 3.13") for x in table)
    assert "  chain 5  " in "\n".join(table) and "@P: stop under p=P; hot N: first N ids; tree total/depth/top-k" \
        in table[2]
    assert d.to_dict()["ran"] == ran.label()
    assert {r["tree"] for r in d.to_dict()["shapes"]} == {t.label() for t in trees}
