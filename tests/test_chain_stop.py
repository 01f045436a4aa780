"""Stopping chains (`TreeConfig.stop_below`): a chain that stops growing after the first draft token whose path
probability is under the stop. The drafter follows that rule exactly, the replay predicts the same drafted and
accepted lengths as an engine run, and the output stays lossless (greedy, eager and static; sampling)."""

import dataclasses
import math
import sys
from pathlib import Path

import pytest
import torch

from eagle_demo.autotree.costs import Costs, Line
from eagle_demo.autotree.retune import ShapeTable
from eagle_demo.common.config import ConfigError, RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.drafter import Drafter
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.events import Round
from fixtures import OracleHead, random_eagle1, tiny_target
from test_engine import PROMPT, hf_greedy, model_of
from test_sampling import chi2_pvalue, enumerate_probs, sample_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))


def drafted_depths(events) -> list[int]:
    return [max(n.depth for n in ev.nodes) for ev in events if isinstance(ev, Round)]


def test_the_setting_is_checked_and_named():
    assert TreeConfig.chain(12, 0.01).label() == "chain k=12 (stops under p=0.01)"
    assert TreeConfig.chain(12).label() == "chain k=12" and not TreeConfig.chain(12).stops
    with pytest.raises(ConfigError, match="chains only"):
        TreeConfig(depth=4, top_k=2, total_tokens=8, stop_below=0.1)
    for bad in (-0.1, 1.0, True, "0.1"):
        with pytest.raises(ConfigError, match="chain stop"):
            TreeConfig.chain(4, bad) if not isinstance(bad, str) else TreeConfig(4, 1, 5, bad)


def test_the_command_line_and_the_scripts_name_it():
    import argparse

    from _shapes import parse_tree
    from eagle_demo.commands.args import add_tree_args, tree_from_args

    p = argparse.ArgumentParser()
    add_tree_args(p)
    assert tree_from_args(p.parse_args(["--chain", "12", "--chain-stop", "0.02"])) == TreeConfig.chain(12, 0.02)
    assert tree_from_args(p.parse_args(["--chain", "5"])) == TreeConfig.chain(5)
    assert parse_tree("chain16@0.005", None)[1] == TreeConfig.chain(16, 0.005)
    assert parse_tree("chain7", None)[1] == TreeConfig.chain(7)
    assert parse_tree("chain16@0.005h2048", None)[1] == TreeConfig.chain(16, 0.005, 2048)
    assert parse_tree("chain8h512", None)[1] == TreeConfig.chain(8, hot_vocab=512)
    assert tree_from_args(p.parse_args(["--chain", "9", "--hot-vocab", "300"])) == TreeConfig.chain(9, hot_vocab=300)


@pytest.mark.parametrize("static", [False, True])
def test_the_drafter_stops_where_the_path_probability_falls_under_the_stop(static):
    """The stopping chain is the fixed chain's prefix up to and including the first token whose path probability
    is under the stop (computed here from the fixed chain's own scores), never longer than its depth."""
    model = model_of("llama")
    head = random_eagle1(model, seed=3)
    features = torch.randn(len(PROMPT) - 1, model.config.hidden_size)  # [n, F]
    lengths = set()
    for stop in (0.5, 0.05, 0.01, 0.002, 1e-4):
        drafter = Drafter(head, static=static)
        drafter.reserve(64, 16)
        drafter.extend(features, torch.tensor(PROMPT[1:]))
        fixed = drafter.draft(PROMPT[-1], TreeConfig.chain(10))
        path = fixed.scores[1:]  # path probability at depths 1..10
        want = next((d for d, p in enumerate(path, 1) if p < stop), 10)
        got = drafter.draft(PROMPT[-1], TreeConfig.chain(10, stop))
        assert got.token_list == fixed.token_list[:want + 1], stop
        assert drafter.length == len(PROMPT) - 1  # the round's entries are dropped again
        lengths.add(want)
    assert len(lengths) >= 3  # the stops really cut the chain at different depths


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("draft", ["random", "oracle"])
def test_greedy_equals_target_generate(family, static, draft):
    """Random tiny targets are flat (every path probability near 1/96 per depth), so these chains stop at depth
    1 or 2; the shipped pair's test below sees the whole range."""
    model = model_of(family)
    head = random_eagle1(model) if draft == "random" else OracleHead(model, PROMPT[0])
    run = RunConfig(max_new_tokens=40, ignore_eos=True, tree=TreeConfig.chain(8, 0.015 if draft == "random" else 0.03))
    events = list(SpeculativeEngine(model, head, static=static).generate(PROMPT, run))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 40)


@pytest.mark.parametrize("static", [False, True])
def test_greedy_on_the_shipped_pair_with_chains_of_every_length(static):
    from eagle_demo.session import SHIPPED_TARGET, load_session

    session = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32", static=static)
    ids = session.encode("def parse_args(argv):\n    \"\"\"Parse the command line.\"\"\"\n")
    run = RunConfig(max_new_tokens=96, ignore_eos=True, tree=TreeConfig.chain(12, 0.01))
    events = list(session.eagle.generate(ids, run))
    assert list(events[-1].token_ids) == list(list(session.baseline.generate(ids, run))[-1].token_ids)
    assert len(set(drafted_depths(events))) >= 4


def test_seeded_sampling_equals_the_seeded_baseline():
    model = tiny_target("qwen2", seed=1)
    cfg = SamplingConfig(temperature=0.8, top_p=0.95, top_k=40, seed=1)
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig.chain(6, 0.02), sampling=cfg)
    prompt = [1, 4, 8, 15, 16, 23, 42]
    want = list(list(BaselineEngine(model).generate(prompt, run))[-1].token_ids)
    for static in (False, True):
        events = list(SpeculativeEngine(model, random_eagle1(model), static=static).generate(prompt, run))
        assert list(events[-1].token_ids) == want
        assert set(drafted_depths(events)) == {1, 2}  # the stop cut some rounds' chains, not all


@pytest.mark.slow
def test_sampling_is_the_target_distribution():
    small = tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)
    cfg = SamplingConfig(temperature=1.3)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5))
    counts = sample_counts(engine, cfg, TreeConfig.chain(3, 0.02), n=1000)  # rounds draft 2 or 3 tokens here
    assert chi2_pvalue(counts, enumerate_probs(small, cfg), n=1000) > 1e-3


def test_the_round_cost_of_a_stopping_chain_is_priced_at_its_mean_length():
    line = lambda at, slope: Line(at=at, x0=0.0, slope=slope)  # noqa: E731
    costs = Costs(plain=1.0, verify=line(1.0, 0.05), tree_extra=0.1, draft={1: line(0.0, 0.04)},
                  extend=line(0.1, 0.0), host=line(0.02, 0.0))
    fixed = costs.round(TreeConfig.chain(16), 5.0)
    assert fixed == pytest.approx(0.04 * 16 + 1.0 + 0.05 * 17 + 0.1 + 0.02)
    stopping = costs.round(TreeConfig.chain(16, 0.01), 5.0, drafted=6.5)
    assert stopping == pytest.approx(0.04 * 6.5 + 1.0 + 0.05 * 7.5 + 0.1 + 0.02)


def test_the_shape_table_keeps_the_stop_and_the_mean_length():
    line = Line(at=1.0, x0=0.0, slope=0.1)
    costs = Costs(plain=1.0, verify=line, tree_extra=0.0, draft={1: line}, extend=line, host=line)
    table = ShapeTable(shapes=(TreeConfig.chain(4), TreeConfig.chain(16, 0.005)), taus=(3.0, 4.5),
                       offered=((1.0,),), accepted=((1.0,),), lead=((1.0, 1.0),), costs=costs, drafted=(0.0, 6.2))
    again = ShapeTable.from_dict(table.to_dict())
    assert again == table
    scored = again.score((((0.5,),), (0.5,)), (((0.5,),), (0.5,)))
    assert scored[1][1] == pytest.approx(costs.round(TreeConfig.chain(16, 0.005), 4.5, 6.2))


def test_the_replay_drafts_and_accepts_exactly_what_the_engine_does():
    """On the shipped pair, at each state an engine run with a stopping chain visits, the replay's drafted and
    accepted lengths equal that round's."""
    from eagle_demo.autotree.replay import Group, replay, walk_drafted
    from eagle_demo.session import SHIPPED_TARGET, load_session

    session = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32")
    engine = session.eagle
    ids = session.encode("class Stack:\n    \"\"\"A last-in, first-out stack of items.\"\"\"\n")
    shapes = [TreeConfig.chain(10, 0.01), TreeConfig.chain(6, 0.2)]
    group = Group(1, 10, stops=((10, 0.01), (6, 0.2)), fixed=3)
    got = replay(engine, [ids], [group], 64)
    assert set(got.accepted) == {TreeConfig.chain(d) for d in (1, 2, 3)} | set(shapes)
    assert set(got.drafted) == set(shapes)
    checked, seen = 0, set()
    for shape in shapes:
        by_state, drafted = got.accepted[shape][0], got.drafted[shape][0]
        m, total, rounds = len(ids), 0, 0
        for ev in engine.generate(ids, RunConfig(max_new_tokens=64, ignore_eos=True, tree=shape)):
            if isinstance(ev, Round) and m in by_state:
                depth = max(n.depth for n in ev.nodes)
                assert (drafted[m], by_state[m]) == (depth, len(ev.accepted_path)), (shape, m)
                m, total, rounds = m + len(ev.accepted_path) + 1, total + depth, rounds + 1
                seen.add(depth)
                checked += 1
        assert walk_drafted(got.accepted[shape], got.drafted[shape]) == pytest.approx(total / rounds)
    assert checked > 15 and len(seen) >= 3
    assert math.isfinite(walk_drafted([], []))


def test_the_gate_holds_each_round_of_a_stopping_chain_to_its_own_break_even():
    """A round that stopped after one draft token costs less than the chain's mean round: its 2 tokens pay at a
    break-even of 1.3 where the mean round's 2.5 would have paused; 1 token a round does not pay even then."""
    from eagle_demo.decoding.gate import DraftGate

    by_length = (1.3, 1.4, 1.5, 1.6)
    gate, flat = DraftGate(2.5, window=3, pause=2, by_length=by_length), DraftGate(2.5, window=3, pause=2)
    for _ in range(3):
        gate.after_draft(2, drafted=1)
        flat.after_draft(2, drafted=1)
    assert gate.drafting and not flat.drafting
    for _ in range(3):
        gate.after_draft(1, drafted=1)
    assert not gate.drafting
    assert DraftGate(2.5, by_length=by_length).break_even(9) == 1.6  # past the table: its longest
    assert DraftGate(2.5, by_length=by_length).break_even(0) == 2.5  # length not known: the mean round's


def test_the_automatic_choice_gives_the_gate_each_lengths_break_even():
    from eagle_demo.autotree.choose import AutoChoice

    line = Line(at=0.0, x0=0.0, slope=0.1)
    costs = Costs(plain=1.0, verify=Line(at=1.0, x0=0.0, slope=0.05), tree_extra=0.0, draft={1: line},
                  extend=Line(at=0.1, x0=0.0, slope=0.0), host=Line(at=0.0, x0=0.0, slope=0.0))
    table = ShapeTable(shapes=(TreeConfig.chain(4, 0.01),), taus=(3.0,), offered=((1.0,),), accepted=((1.0,),),
                       lead=((1.0, 1.0),), costs=costs, scale=1.1, drafted=(2.5,))
    choice = AutoChoice(tree=TreeConfig.chain(4, 0.01), predicted_tau=3.0, predicted_round_cost=1.5,
                        predicted_speedup=2.0, plain_step_ms=1.0, calibration_seconds=1.0, table=table)
    run = choice.run_config(RunConfig())
    want = tuple(round(1.1 * (0.1 * d + 1.0 + 0.05 * (d + 1) + 0.1), 3) for d in range(1, 5))
    assert run.pause_by_length == want and run.pause_below == 1.5
    fixed = dataclasses.replace(choice, tree=TreeConfig.chain(4))
    assert fixed.run_config(RunConfig()).pause_by_length == ()


@pytest.mark.parametrize("static", [False, True])
def test_paused_rounds_of_a_stopping_chain_keep_greedy_equality(static):
    """A break-even no stopping chain round reaches: the gate pauses and probes, the drafted lengths reach it."""
    model = model_of("llama")
    tree = TreeConfig.chain(6, 0.015)
    run = RunConfig(max_new_tokens=40, ignore_eos=True, tree=tree, pause_below=3.0, pause_by_length=(3.0,) * 6)
    events = list(SpeculativeEngine(model, random_eagle1(model), static=static).generate(PROMPT, run))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 40)
    rounds = [ev for ev in events if isinstance(ev, Round)]
    assert any(len(ev.nodes) == 1 for ev in rounds) and any(len(ev.nodes) > 1 for ev in rounds)
