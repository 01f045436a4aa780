"""Retuning the automatic tree during a run (`retune`): no evidence keeps the calibration's choice, a run that
accepts more (less) than the calibration text moves to a deeper (cheaper) shape, the table survives the cache,
and runs that switch shapes keep every lossless promise (greedy on the eager and static paths, seeded sampling,
the enumerated chi-square test)."""

import dataclasses

import pytest
import torch

import eagle_demo.autotree.retune as retune_mod
from eagle_demo.autotree import choose as autotree
from eagle_demo.autotree.choose import Acceptance
from eagle_demo.autotree.retune import Retuner, ShapeTable
from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.events import DraftNode, Round
from fixtures import random_eagle1, tiny_target
from test_autotree import SHAPES, _costs
from test_engine import PROMPT, hf_greedy, model_of
from test_sampling import PROMPT as SMALL_PROMPT
from test_sampling import chi2_pvalue, enumerate_probs, sample_runs

CPU = torch.device("cpu")
DEPTH = 7


def counts(top1: float, second: float, n: int = 100):
    """Calibration counts: at every depth n parents, their top-1 child accepted at rate top1, the second at second."""
    offered = [[n, n] for _ in range(DEPTH)]
    accepted = [[round(top1 * n), round(second * n)] for _ in range(DEPTH)]
    lead = [[n, round(top1 * n)] for _ in range(DEPTH)]
    return offered, accepted, lead


def choice_for(taus, top1, second):
    stats = Acceptance(rank=((0.0,),), chain=(0.0,), rounds=100, measured=dict(zip(SHAPES, taus)),
                       counts=counts(top1, second))
    return autotree.choose(stats, _costs(), 1.0, CPU, SHAPES)


WEAK = ([1.6, 1.7, 1.72, 2.2, 2.45, 2.6], 0.45, 0.2)  # the calibration picks tree 8/2/4 (test_autotree's sums)
STRONG = ([2.8, 4.4, 6.2, 2.9, 2.95, 6.6], 0.9, 0.05)  # it picks chain 7


def chain_round(index: int, depth: int, accepted: int) -> Round:
    """A chain round of `depth` drafts whose first `accepted` were accepted."""
    nodes = (DraftNode(1, -1, 0, 1.0, 1.0),) + tuple(DraftNode(2 + d, d, d + 1, 0.8, 0.8) for d in range(depth))
    return Round(index=index, nodes=nodes, accepted_path=tuple(range(1, accepted + 1)), accepted_ids=(), bonus_id=0,
                 committed_ids=(0,) * (accepted + 1), target_probs=(), draft_seconds=0.0, verify_seconds=0.0,
                 host_seconds=0.0, elapsed=0.0, total_new_tokens=1)


def test_without_evidence_every_candidate_keeps_its_replayed_tau_and_the_calibrations_choice():
    for taus, top1, second in (WEAK, STRONG):
        choice = choice_for(taus, top1, second)
        r = Retuner(choice.table, choice.tree)
        scored = choice.table.score(r.base, r.base)
        assert [t for t, _, _ in scored] == pytest.approx([max(1.0, t) for t in taus])
        best = max(scored, key=lambda s: (s[0] / s[1], -s[1]))
        assert best[2] == choice.tree and best[1] == pytest.approx(choice.predicted_round_cost)
    assert choice_for(*WEAK).tree == TreeConfig(2, 4, 8) and choice_for(*STRONG).tree == TreeConfig.chain(7)


def test_a_run_that_accepts_more_moves_deeper_and_one_that_accepts_less_moves_cheaper():
    weak = choice_for(*WEAK)
    r = Retuner(weak.table, weak.tree)
    switches = [s for i in range(4 * retune_mod.EVERY) if (s := r.after_round(chain_round(i, 2, 2))) is not None]
    assert switches and switches[-1][0].depth > weak.tree.depth and r.changes
    assert r.changes[-1][1] == switches[-1][0].label() and r.changes[-1][0] % retune_mod.EVERY == 0
    strong = choice_for(*STRONG)
    r = Retuner(strong.table, strong.tree)
    got = [s for i in range(4 * retune_mod.EVERY) if (s := r.after_round(chain_round(i, 7, 1))) is not None]
    assert got and got[-1][0].total_tokens < strong.tree.total_tokens
    shape, cost = got[-1]
    assert cost < strong.predicted_round_cost and shape is r.tree


def test_rounds_as_the_calibration_predicted_never_switch():
    strong = choice_for(*STRONG)
    r = Retuner(strong.table, strong.tree)
    # the calibration's own rates (top-1 at 0.9 a depth): 6 of 7 drafts accepted, now and then all or fewer
    pattern = [7, 6, 7, 5, 7, 6, 7, 7, 4, 7]
    assert all(r.after_round(chain_round(i, 7, pattern[i % 10])) is None for i in range(6 * retune_mod.EVERY))


def test_the_table_survives_the_cache_and_sizes_the_widest_round():
    table = choice_for(*WEAK).table
    assert ShapeTable.from_dict(table.to_dict()) == table
    assert table.widest() == (24, (6 - 1) * 4)


def test_auto_run_config_carries_the_table():
    choice = choice_for(*WEAK)
    assert choice.run_config(RunConfig()).retune is None  # off unless asked for
    run = choice.run_config(RunConfig(), retune=True)
    assert run.retune is choice.table and run.tree == choice.tree
    assert autotree.choose(Acceptance(rank=((0.0,),), chain=(0.0,), rounds=1, measured=dict(zip(SHAPES, WEAK[0]))),
                           _costs(), 1.0, CPU, SHAPES).table is None  # no counts, no retuning


def strong_claim():
    """A table that promises chain 7 to a random head, which accepts next to nothing: the run moves off it."""
    return choice_for(*STRONG)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_a_run_that_switches_shapes_keeps_greedy_equality(static):
    model = model_of("llama")
    choice = strong_claim()
    engine = SpeculativeEngine(model, random_eagle1(model), static=static)
    run = dataclasses.replace(choice.run_config(RunConfig(max_new_tokens=48, ignore_eos=True), retune=True),
                              pause_below=0.0)
    events = list(engine.generate(PROMPT, run))  # never paused: every round drafts
    finish = events[-1]
    assert finish.extra.get("retuned"), "the random head should have moved the run off chain 7"
    assert list(finish.token_ids) == hf_greedy(model, PROMPT, 48)
    at, label = finish.extra["retuned"][0]
    after = [e for e in events if isinstance(e, Round) and e.index >= at and len(e.nodes) > 1]
    assert after and all(len(e.nodes) <= TreeConfig(*_shape(label)).total_tokens for e in after)


def _shape(label: str):
    return next((s.depth, s.top_k, s.total_tokens) for s in SHAPES if s.label() == label)


def flip_table():
    """Two shapes a hair apart: chain 1 while drafts fail, chain 2 once they are accepted. The shape of a round
    then hangs on the previous rounds' sampled tokens."""
    from eagle_demo.autotree.costs import Costs, Line

    ms = 1e-3
    costs = Costs(plain=10 * ms, verify=Line(10 * ms, 2.0, 0.5 * ms), tree_extra=0.0,
                  draft={1: Line(0.5 * ms, 1.0, 0.5 * ms)}, extend=Line(0.0, 1.0, 0.0), host=Line(0.0, 2.0, 0.0))
    offered, accepted, lead = ((1.0, 0.0), (1.0, 0.0)), ((0.5, 0.0), (0.5, 0.0)), ((1.0, 0.5), (1.0, 0.5))
    return ShapeTable(shapes=(TreeConfig.chain(1), TreeConfig.chain(2)), taus=(1.45, 1.6), offered=offered,
                      accepted=accepted, lead=lead, costs=costs)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_a_run_that_switches_shapes_keeps_seeded_sampling(static, monkeypatch):
    monkeypatch.setattr(retune_mod, "EVERY", 1)
    monkeypatch.setattr(retune_mod, "MARGIN", 1.0)
    model = tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)  # a small vocabulary: drafts get accepted
    engine, baseline = SpeculativeEngine(model, random_eagle1(model, seed=5), static=static), BaselineEngine(model)
    switched = 0
    for seed in range(10):
        cfg = SamplingConfig(temperature=1.3, top_p=0.95, top_k=40, seed=seed)
        run = RunConfig(max_new_tokens=12, ignore_eos=True, tree=TreeConfig.chain(1), sampling=cfg,
                        retune=flip_table())
        events = list(engine.generate(SMALL_PROMPT, run))
        switched += bool(events[-1].extra.get("retuned"))
        assert list(events[-1].token_ids) == list(list(baseline.generate(SMALL_PROMPT, run))[-1].token_ids)
    assert switched


@pytest.mark.slow
def test_shapes_chosen_from_past_draws_still_sample_the_target_distribution(monkeypatch):
    monkeypatch.setattr(retune_mod, "EVERY", 1)
    monkeypatch.setattr(retune_mod, "MARGIN", 1.0)
    monkeypatch.setattr(retune_mod, "PRIOR", 1.0)
    small = tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5))
    n, cfg = 800, SamplingConfig(temperature=1.3)
    tally, runs = sample_runs(engine, n, cfg, tree=TreeConfig.chain(1), retune=flip_table())
    switched = sum(1 for events in runs if events[-1].extra.get("retuned"))
    assert 0 < switched < n  # the shape hung on the draws in some runs and not in others
    assert chi2_pvalue(tally, enumerate_probs(small, cfg), n=n) > 1e-3


@pytest.mark.slow
def test_the_cli_takes_retune_beside_the_automatic_tree():
    from test_cli import cli

    proc = cli("generate", "--target", "assets/tiny-target", "--prompt", "def f(x):\n", "--max-new-tokens", "24",
                "--race", "--retune", "--threads", "1")
    assert "identical to baseline: yes" in proc.stderr and "[auto: " in proc.stderr


def test_the_auto_line_names_each_shape_the_run_moved_to():
    choice = choice_for(*WEAK)
    line = choice.versus(1.9, 3.1, [(16, "chain k=8"), (40, "chain k=4")])
    assert line.endswith("at tau 3.10 (this text); from round 16: chain k=8; from round 40: chain k=4")
    assert choice.versus(1.9, 3.1) == line.split("; from")[0]


def test_a_switch_to_a_stopping_chain_brings_its_break_evens_by_length():
    weak = choice_for(*WEAK)
    stop = TreeConfig.chain(12, 0.01)
    n = len(weak.table.shapes)
    table = dataclasses.replace(weak.table, shapes=weak.table.shapes + (stop,), taus=weak.table.taus + (6.0,),
                                drafted=(0.0,) * n + (5.0,))
    r = Retuner(table, weak.tree)
    assert r.by_length == () and table.by_length(weak.tree, 2.0) == ()
    switch = next(s for i in range(4 * retune_mod.EVERY) if (s := r.after_round(chain_round(i, 2, 2))) is not None)
    assert switch[0] == stop == r.tree
    tau = next(t for t, _, s in table.score(r.base, r.model()) if s == stop)
    assert r.by_length == table.by_length(stop, tau) and len(r.by_length) == 12
    assert list(r.by_length) == sorted(r.by_length) and r.by_length[0] < switch[1] < r.by_length[-1]
