"""Where acceptance falls (issue 45): by position, by kind of text (the documented line rule) and by context length,
in the bench report (JSON and CSV) and on the command line."""

from __future__ import annotations

import json

import pytest
import torch

from eagle_demo.bench.context_sweep import check_lengths, context_ids, filler_text, sweep_context
from eagle_demo.bench.run import load_suite, run_bench
from eagle_demo.common.config import ConfigError, RunConfig, TreeConfig
from eagle_demo.diagnose.falloff import by_kind, by_position, line_kinds, token_lines
from eagle_demo.session import SHIPPED_TARGET, load_session

torch.set_num_threads(1)
CODE = '''def merge(a, b):
    """Merge two sorted lists.

    Returns a list.
    """
    # walk both lists
    out = []
    while a and b:
        out.append(a.pop(0))

    return out
This merges two sorted lists in linear time.
```
x = merge([1], [2])
```'''


def test_each_line_gets_a_kind_by_the_documented_rule():
    assert line_kinds(CODE) == ["code", "docstring", "docstring", "docstring", "docstring", "comment", "code", "code",
                                "code", "code", "code", "prose", "code", "code", "code"]
    assert line_kinds("Plain words here.\n\nMore words.") == ["prose", "prose", "prose"]
    # an open docstring in the prompt carries into the output's lines
    lines, kinds = token_lines('def f():\n    """Do', [" it", "\n", '    """', "\n", "    return 1"])
    assert lines == [1, 1, 2, 2, 3] and kinds == ["code", "docstring", "docstring", "code"]


def test_rounds_by_position_and_by_kind():
    rounds = [(1, 4), (5, 1), (6, 5), (11, 1), (40, 2)]  # (first committed position, tokens)
    smoothed = dict(by_position(rounds, window=10))
    assert smoothed[1] == pytest.approx((4 + 1 + 5) / 3) and smoothed[40] == 2
    lines = [0] * 6 + [1] * 10 + [2] * 30
    got = by_kind(rounds, lines, ["code", "comment", "prose"])
    assert got["code"].tau == pytest.approx(5 / 2) and got["comment"].tau == 3 and got["prose"].rounds == 1


@pytest.fixture(scope="module")
def session():
    return load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32")


def test_the_bench_report_has_tau_by_kind_and_position(session):
    items = load_suite(categories=["code"])[:1]
    report = run_bench(session, items, RunConfig(max_new_tokens=48, ignore_eos=True, tree=TreeConfig.chain(5)))
    where = json.loads(report.to_json())["extra"]["where"]
    row = report.results[0]
    assert sum(v["rounds"] for v in where["by_kind"].values()) == row.rounds
    assert sum(b["rounds"] for b in where["by_position"]) == row.rounds
    assert all(b["from"] % 16 == 0 for b in where["by_position"])
    for kind, v in where["by_kind"].items():
        assert getattr(row, f"tau_{kind}") == pytest.approx(v["tau"], abs=1e-4)
    assert "tau_code" in report.to_csv().splitlines()[0] and report.where_line().startswith("tau by kind of text: ")


def test_context_lengths_are_real_text_of_the_prompts_kind_within_the_window(session):
    code, chat = load_suite(categories=["code"])[0], load_suite(categories=["chat"])[0]
    for item, length in ((code, 256), (chat, 300)):
        ids = context_ids(session, item, length, chat=False)
        assert len(ids) == length
        assert session.decode(ids).rstrip().endswith(item.prompt.strip()[-20:])
    assert "def " in filler_text("code") and "def " not in filler_text("prose")[:2000]
    run = RunConfig(max_new_tokens=64, tree=TreeConfig.chain(5))
    with pytest.raises(ConfigError, match="passes the target's window of 2048 positions; use lengths up to 1978"):
        check_lengths(session, [128, 2000], run)
    reports = sweep_context(session, [chat], RunConfig(max_new_tokens=16, ignore_eos=True, tree=TreeConfig.chain(4)),
                            [64, 200])
    assert [r.settings["context_tokens"] for r in reports] == [64, 200]
    assert [r.results[0].prompt_tokens for r in reports] == [64, 200]


def test_the_cli_refuses_two_sweeps_at_once(capsys):
    from eagle_demo.commands.cli import main

    code = main(["bench", "--temperatures", "0", "0.7", "--context-lengths", "128"])
    assert code != 0 and "sweep context lengths alone" in capsys.readouterr().err
