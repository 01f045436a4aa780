"""One default draft tree: the page, `/generate` and the command line start from `config.default_tree`."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle_demo.common.config import TREE_PRESETS, TreeConfig, default_preset, default_tree, tree_from
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET

ROOT = Path(__file__).resolve().parent.parent
CASES = list(itertools.product(["cpu", "cuda", "cuda:1"], ["eagle1", "eagle3", ""]))


def test_default_tree_is_the_cpu_chain_on_cpu_and_the_family_preset_on_gpu():
    assert default_tree("cpu", "eagle3") == TREE_PRESETS["cpu"] == TreeConfig.chain(7)
    assert default_tree("cuda", "eagle1") == TREE_PRESETS["gpu-eagle2"]
    assert default_tree("cuda:0", "eagle3") == TREE_PRESETS["gpu-eagle3"] != TREE_PRESETS["gpu-eagle2"]


@pytest.mark.parametrize("device,family", CASES)
def test_page_api_and_command_line_defaults_agree(device, family):
    from eagle_demo.app.api import request_tree
    from eagle_demo.app.forms import make_tree, tree_values
    from eagle_demo.commands.args import tree_from_args
    from eagle_demo.commands.cli import build_parser

    want = default_tree(device, family)
    page = make_tree(*tree_values(default_preset(device, family)))  # the Draft panel after Load
    api = request_tree(device, family)  # /generate without tree settings
    cli = tree_from_args(build_parser().parse_args(["generate", "--prompt", "x"]), device, family)
    assert page == api == cli == want


def test_tree_settings_change_the_default():
    base = default_tree("cuda", "eagle1")
    assert tree_from(base, depth=3) == TreeConfig(depth=3, top_k=base.top_k, total_tokens=base.total_tokens)
    assert tree_from(base, chain=4) == TreeConfig.chain(4)
    assert tree_from(base, 5, 4, 16, 3, mode="tree") == TreeConfig(5, 4, 16)
    assert tree_from(base, 5, 4, 16, 3, mode="chain") == TreeConfig.chain(3)
    with pytest.raises(ValueError, match="depth"):
        tree_from(base, depth=0)


def test_the_page_starts_with_the_default_tree_of_this_machine():
    from gradio.components import Dropdown, Radio, Slider

    from eagle_demo.app import build_app
    from eagle_demo.app.forms import make_tree
    from eagle_demo.common.devices import resolve_device

    demo = build_app()
    by_label = {b.label: b for b in demo.blocks.values() if isinstance(b, (Dropdown, Radio, Slider))}
    # "auto" from the start (a Generate without Load runs the pair's automatic tree); the settings show the
    # machine's static default until a calibration has chosen, as after Load
    assert by_label["tree preset"].value == "auto"
    shown = make_tree(*(by_label[name].value for name in ("draft mode", "depth", "draft top-k", "total tokens",
                                                           "chain k", "chain stop")))
    assert shown == default_tree(resolve_device("auto").type, "")


def test_generate_endpoint_and_command_line_run_the_auto_tree(tmp_path, monkeypatch):
    """End to end on the shipped pair (CPU, EAGLE-1 head): without tree settings, /generate and the command line
    run the pair's automatic tree (one calibration, shared through the on-disk cache), and say so; the output
    equals plain decoding. Which shape the calibration picks does not matter here, only that all agree."""
    from eagle_demo.app import REGISTRY, build_app
    from eagle_demo.app.api import GenerateRequest, generate
    from eagle_demo.autotree.choose import auto_tree

    monkeypatch.setenv("EAGLE_DEMO_CACHE", str(tmp_path))
    build_app(SHIPPED_TARGET, SHIPPED_EAGLE1)  # the pair /generate falls back to
    REGISTRY.clear()
    try:
        _, stats = generate(GenerateRequest("def add(a, b):", 8, race=True))
        choice = auto_tree(REGISTRY.get(REGISTRY.current()))
    finally:
        REGISTRY.clear()
    assert choice.from_cache  # /generate calibrated once; this read its cached choice
    assert stats["tree"] == choice.tree.label() and stats["device"] == "cpu"
    assert stats["auto"] == choice.to_dict() and stats["identical_to_baseline"] is True
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "EAGLE_DEMO_CACHE": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "generate", "--target", SHIPPED_TARGET, "--prompt-ids",
                           "1,2,3", "--max-new-tokens", "4", "--device", "cpu", "--json", "--race"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    start, summary = lines[0], lines[-1]
    assert start["event"] == "runstart" and start["tree"] == choice.tree.label()
    assert summary["auto"] == choice.to_dict() and summary["identical_to_baseline"] is True
    assert "from the cache" in proc.stderr  # the command line re-measured nothing


def test_auto_is_used_exactly_when_no_tree_setting_is_given():
    from eagle_demo.app.autotune import AUTO
    from eagle_demo.app.playground import Playground
    from eagle_demo.commands.args import uses_auto
    from eagle_demo.commands.cli import build_parser

    parse = build_parser().parse_args
    assert uses_auto(parse(["generate", "--prompt", "x"])) and uses_auto(parse(["bench"]))
    assert uses_auto(parse(["generate", "--prompt", "x", "--auto-tree"]))  # still accepted
    for flag in (["--chain", "3"], ["--depth", "3"], ["--draft-top-k", "2"], ["--total-tokens", "8"]):
        assert not uses_auto(parse(["generate", "--prompt", "x", *flag]))
        assert not uses_auto(parse(["bench", *flag]))
    from gradio.components import Dropdown

    from eagle_demo.app import build_app

    presets = next(b for b in build_app().blocks.values() if isinstance(b, Dropdown) and b.label == "tree preset")
    assert [c[0] if isinstance(c, tuple) else c for c in presets.choices][0] == AUTO
    assert "tree_preset" in Playground.__dataclass_fields__
