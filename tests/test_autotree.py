"""Automatic tree: the tau model, the acceptance counts, the choice and its on-disk cache."""

import pytest
import torch

from eagle_demo import autotree
from eagle_demo.autotree import Acceptance, AutoChoice, auto_tree, predict_tau
from eagle_demo.config import RunConfig, TreeConfig
from eagle_demo.events import DraftNode, Round
from eagle_demo.session import load_session


def test_chain_tau_is_one_plus_the_survival_sum():
    stats = Acceptance(rank=((0.8, 0.1),) * 3, chain=(0.8, 0.64, 0.512), rounds=10)
    assert predict_tau(stats, TreeConfig.chain(2)) == pytest.approx(1 + 0.8 + 0.64)
    assert predict_tau(stats, TreeConfig.chain(3)) == pytest.approx(1 + 0.8 + 0.64 + 0.512)


def test_tree_tau_follows_eagle2_selection_over_expected_acceptance():
    stats = Acceptance(rank=((0.6, 0.3), (0.5, 0.2)), chain=(0.6, 0.3), rounds=10)
    # candidates: depth 1 -> .6, .3; depth 2 -> .3, .12 under .6 and .15, .06 under .3; keep the best 3
    assert predict_tau(stats, TreeConfig(depth=2, top_k=2, total_tokens=4)) == pytest.approx(1 + .6 + .3 + .3)
    wider = predict_tau(stats, TreeConfig(depth=2, top_k=2, total_tokens=7))
    assert wider == pytest.approx(1 + .6 + .3 + .3 + .12 + .15 + .06)


def _round(nodes, path):
    return Round(index=0, nodes=tuple(DraftNode(t, p, d, q, q) for t, p, d, q in nodes), accepted_path=path,
                 accepted_ids=(), bonus_id=0, committed_ids=(), target_probs=(), draft_seconds=0.0,
                 verify_seconds=0.0, host_seconds=0.0, elapsed=0.0, total_new_tokens=1)


def test_acceptance_counts_ranks_by_draft_probability():
    offered, accepted = [[0, 0], [0, 0]], [[0, 0], [0, 0]]
    # root -> (1: p .3), (2: p .6); node 2 -> (3: p .9); accepted root -> 2 -> 3: rank 0 at depth 1 and depth 2
    nodes = [(9, -1, 0, 1.0), (5, 0, 1, 0.3), (6, 0, 1, 0.6), (7, 2, 2, 0.9)]
    autotree._count(_round(nodes, (2, 3)), offered, accepted)
    assert offered == [[1, 1], [1, 0]] and accepted == [[1, 0], [1, 0]]
    autotree._count(_round(nodes, (1,)), offered, accepted)  # the rank-1 child this time, a leaf
    assert offered == [[2, 2], [1, 0]] and accepted == [[1, 1], [1, 0]]


def test_auto_tree_on_the_shipped_pair_is_cached_per_pair(tmp_path):
    session = load_session(threads=1, device="cpu", dtype="float32")
    choice = auto_tree(session, budget_s=1.0, cache_dir=tmp_path)
    assert isinstance(choice, AutoChoice) and not choice.from_cache
    assert choice.tree in autotree.candidates(torch.device("cpu"))
    assert choice.predicted_speedup == pytest.approx(choice.predicted_tau / choice.predicted_round_cost)
    assert 1.0 <= choice.predicted_tau <= choice.tree.depth + 1 and choice.predicted_round_cost > 0
    again = auto_tree(session, cache_dir=tmp_path)
    assert again.from_cache and again.tree == choice.tree
    assert len(list(tmp_path.iterdir())) == 1
    # the chosen shape runs, losslessly
    ids = session.encode("def add(a, b):\n")
    run = RunConfig(max_new_tokens=24, tree=choice.tree)
    from eagle_demo.metrics import summarize
    eagle, base = summarize(session.stream(ids, run)), summarize(session.stream(ids, run, mode="baseline"))
    assert eagle.token_ids == base.token_ids


# ---- the page and /generate: "auto" per loaded pair ------------------------------------------------------------

@pytest.fixture
def counted(tmp_path, monkeypatch):
    """A fresh autotree cache, and a count of the cost measurements (the real ones, counted)."""
    from eagle_demo.app import REGISTRY

    monkeypatch.setenv("EAGLE_DEMO_CACHE", str(tmp_path))
    calls = []
    real = autotree.measure_costs
    monkeypatch.setattr(autotree, "measure_costs", lambda *a, **k: calls.append(1) or real(*a, **k))
    REGISTRY.clear()
    yield calls
    REGISTRY.clear()


def test_the_page_calibrates_once_per_pair_and_again_for_another(counted):
    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.autotune import AUTO, calibrate_ui, choice_for, tuning
    from eagle_demo.app.forms import make_tree
    from eagle_demo.app.playground import after_load

    first = make_key("assets/tiny-target", "assets/tiny-eagle1", device="cpu")
    REGISTRY.load(first)
    lines = list(calibrate_ui(first))  # what Load runs next, as a model event
    t = tuning(first)
    assert t.done.is_set() and t.choice is not None and not t.choice.from_cache and counted == [1]
    assert lines[-1].startswith(f"auto: {t.choice.tree.label()}") and "predicted speedup" in lines[-1]
    assert all(line.startswith("auto: ") for line in lines)
    chat, preset, *shown, line = after_load(first)  # a Load after the calibration: auto, its tree shown
    assert preset == AUTO and make_tree(*shown) == t.choice.tree and line == lines[-1]
    assert choice_for(first, REGISTRY.get(first)) == (t.choice, "") and counted == [1]  # nothing re-measured
    second = make_key("assets/tiny-target", "assets/tiny-eagle3", device="cpu")  # another pair: tuned again
    REGISTRY.load(second)
    assert tuning(second) is None
    list(calibrate_ui(second))
    assert tuning(second).choice is not None and counted == [1, 1]
    REGISTRY.clear()
    REGISTRY.load(first)  # the first pair again: a new session, tuned from the disk cache
    assert tuning(first) is None
    again, note = choice_for(first, REGISTRY.get(first))
    assert again.from_cache and again.tree == t.choice.tree and note == "" and counted == [1, 1]


def test_a_run_waits_for_the_calibration_and_auto_runs_losslessly(counted):
    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.autotune import AUTO, page_tree, start_tuning
    from eagle_demo.app.state import start_run
    from eagle_demo.config import default_tree
    from eagle_demo.metrics import RunView
    from eagle_demo.view.stats import stats_html, summary

    key = make_key("assets/tiny-target", "assets/tiny-eagle1", device="cpu")
    session = REGISTRY.load(key)
    ids = session.encode("def add(a, b):\n")
    static = default_tree("cpu", session.family)
    t = start_tuning(key, session)
    live = start_run(key, ids, RunConfig(max_new_tokens=8, tree=static), False)  # pressed while it calibrates
    live.done.wait()
    first = live.eagle.events[0]
    assert t.done.is_set() and live.error is None and first.mode == "eagle"  # the run waited for it
    tree, choice, note = page_tree(AUTO, static, key, session)  # the panel still shows the static default
    assert tree == t.choice.tree and choice == t.choice and note == ""
    by_hand = TreeConfig.chain(2) if t.choice.tree != TreeConfig.chain(2) else TreeConfig.chain(3)
    assert page_tree(AUTO, by_hand, key, session) == (by_hand, None, "")  # settings moved by hand win
    assert page_tree("cpu", static, key, session) == (static, None, "")
    live = start_run(key, ids, RunConfig(max_new_tokens=24, tree=tree), True, auto=choice)
    live.done.wait()
    eagle, baseline, _ = live.snapshot()
    base = RunView.of(list(session.stream(ids, RunConfig(max_new_tokens=24, tree=tree), mode="baseline")))
    assert eagle.token_ids == base.token_ids == baseline.token_ids
    stats = summary(eagle, baseline, True, "", choice)
    assert stats["auto"] == choice.to_dict() and stats["tree"] == choice.tree.label()
    assert set(stats["auto"]) == {"tree", "predicted_tau", "predicted_round_cost", "predicted_speedup"}
    strip = stats_html(eagle, baseline, True, "done", "", choice)
    measured = f"measured {stats['speedup']:.2f}x"
    assert f"auto: {choice.tree.label()}, predicted {choice.predicted_speedup:.2f}x, {measured}" in strip
    assert "stat-auto" not in stats_html(eagle, baseline, True, "done")  # a tree picked by hand: no auto line
