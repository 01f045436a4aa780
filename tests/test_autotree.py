"""Automatic tree: the tau model, the acceptance counts, the choice and its on-disk cache."""

import dataclasses

import gradio as gr
import pytest
import torch

from eagle_demo.autotree import choose as autotree
from eagle_demo.autotree.choose import Acceptance, AutoChoice, auto_tree, predict_tau
from eagle_demo.common.config import ConfigError, RunConfig, TreeConfig
from eagle_demo.decoding.events import DraftNode, Round
from eagle_demo.session import SHIPPED_TARGET, load_session


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


@pytest.mark.slow
def test_auto_tree_on_the_shipped_pair_is_cached_per_pair(tmp_path):
    session = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32")
    choice = auto_tree(session, budget_s=1.0, cache_dir=tmp_path)
    assert isinstance(choice, AutoChoice) and not choice.from_cache
    assert autotree.hot_sizes(session.eagle) == (2048,)  # a quarter of the shipped 8192 ids
    assert choice.tree in autotree.candidates(torch.device("cpu"), (2048,))
    gpu = autotree.candidates(torch.device("cuda"), (2048,))  # a GPU scores whole chains, over all ids and hot
    assert {TreeConfig.chain(8), TreeConfig.chain(8, hot_vocab=2048)} <= set(gpu)
    assert not any(t.stops for t in gpu)
    assert choice.predicted_speedup == pytest.approx(choice.predicted_tau / choice.predicted_round_cost)
    assert 1.0 <= choice.predicted_tau <= choice.tree.depth + 1 and choice.predicted_round_cost > 0
    again = auto_tree(session, cache_dir=tmp_path)
    assert again.from_cache and again.tree == choice.tree
    assert len(list(tmp_path.iterdir())) == 1
    # the chosen shape runs, losslessly
    ids = session.encode("def add(a, b):\n")
    run = RunConfig(max_new_tokens=24, tree=choice.tree)
    from eagle_demo.decoding.metrics import summarize
    eagle, base = summarize(session.stream(ids, run)), summarize(session.stream(ids, run, mode="baseline"))
    assert eagle.token_ids == base.token_ids
    # fixed-size caches price the round's parts otherwise: their own choice, in a file of their own
    static = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32", static=True)
    assert static.eagle.runner.static_mode and static.baseline.runner.static_mode
    assert static.with_draft(str(static.report.draft_path)).eagle.runner.static_mode
    key = autotree._cache_file(session, torch.device("cpu"), torch.float32, tmp_path)
    assert autotree._cache_file(static, torch.device("cpu"), torch.float32, tmp_path) != key
    fixed = auto_tree(static, budget_s=1.0, cache_dir=tmp_path)  # calibrates over the fixed pools too
    assert not fixed.from_cache and len(list(tmp_path.iterdir())) == 2
    assert autotree.hot_sizes(static.eagle) == (2048,)  # its fixed table takes the context ids as well
    run = RunConfig(max_new_tokens=24, tree=fixed.tree)
    assert summarize(static.stream(ids, run)).token_ids == base.token_ids


def test_the_calibration_times_the_engine_on_the_shape_it_chose(tmp_path, monkeypatch):
    """The overhead scale (what the engine's bookkeeping adds to a round) is measured on the chosen shape, so the
    predicted speedup shown and the gate's break-even are that shape's own."""
    session = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32")
    timed, real = [], autotree.timed_runs

    def record(engine, baseline, prompts, tree, clock):
        timed.append(tree)
        return real(engine, baseline, prompts, tree, clock)

    monkeypatch.setattr(autotree, "timed_runs", record)
    choice = auto_tree(session, budget_s=1.0, cache_dir=tmp_path)
    assert timed == [choice.tree] and 1.0 <= choice.table.scale <= autotree.OVERHEAD_CAP_CPU


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


@pytest.mark.slow
def test_the_page_calibrates_once_per_pair_and_again_for_another(counted):
    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.autotune import AUTO, calibrate_ui, choice_for, tuning
    from eagle_demo.app.draft_panel import after_load
    from eagle_demo.app.forms import make_tree

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


@pytest.mark.slow
def test_a_run_waits_for_the_calibration_and_auto_runs_losslessly(counted):
    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.autotune import AUTO, page_tree, start_tuning
    from eagle_demo.app.forms import make_tree, tree_settings
    from eagle_demo.app.state import start_run
    from eagle_demo.common.config import default_tree
    from eagle_demo.decoding.metrics import RunView
    from eagle_demo.prepare import RunRequest, prepare_run, race_phases
    from eagle_demo.view.stats import stats_html, summary

    key = make_key("assets/tiny-target", "assets/tiny-eagle1", device="cpu")
    session = REGISTRY.load(key)
    ids = session.encode("def add(a, b):\n")
    static = default_tree("cpu", session.family)
    t = start_tuning(key, session)
    live = start_run(key, prepare_run(session, RunRequest(tuple(ids), RunConfig(max_new_tokens=8, tree=static))))
    # pressed while it calibrates
    live.done.wait()
    first = live.eagle.events[0]
    assert t.done.is_set() and live.error is None and first.mode == "eagle"  # the run waited for it
    tree, choice, note = page_tree(AUTO, static, key, session)  # the panel still shows the static default
    assert tree == t.choice.tree and choice == t.choice and note == ""
    shown = make_tree(*tree_settings(t.choice.tree))  # the panel showing the choice runs it, its chain stop too
    assert page_tree(AUTO, shown, key, session) == (t.choice.tree, t.choice, "")
    if t.choice.tree.stops:  # the stop set to 0 by hand is a fixed chain: a hand setting, it wins
        fixed = make_tree(*tree_settings(t.choice.tree)[:5], 0.0, t.choice.tree.hot_vocab)
        assert page_tree(AUTO, fixed, key, session) == (fixed, None, "")
    by_hand = TreeConfig.chain(2) if t.choice.tree != TreeConfig.chain(2) else TreeConfig.chain(3)
    assert page_tree(AUTO, by_hand, key, session) == (by_hand, None, "")  # settings moved by hand win
    assert page_tree("cpu", static, key, session) == (static, None, "")
    asked = RunRequest(tuple(ids), RunConfig(max_new_tokens=24, tree=tree), race_phases(race=True))
    live = start_run(key, prepare_run(session, asked, lambda run: (run, choice, "")))
    live.done.wait()
    eagle, baseline, _ = live.snapshot()
    base = RunView.of(list(session.stream(ids, RunConfig(max_new_tokens=24, tree=tree), mode="baseline")))
    assert eagle.token_ids == base.token_ids == baseline.token_ids
    stats = summary(eagle, baseline, True, "", choice)
    assert stats["auto"] == choice.to_dict() and stats["tree"] == choice.tree.label()
    assert set(stats["auto"]) == {"tree", "predicted_tau", "predicted_round_cost", "predicted_speedup"}
    strip = stats_html(eagle, baseline, True, "done", "", choice)
    measured = f"measured {stats['speedup']:.2f}x at tau {stats['tau']:.2f} (this text)"
    predicted = f"predicted {choice.predicted_speedup:.2f}x at tau {choice.predicted_tau:.2f} (calibration text)"
    assert f"auto: {choice.tree.label()}, {predicted}, {measured}" in strip
    plain = f"auto: {choice.tree.label()}, predicted {choice.predicted_speedup:.2f}x"
    assert choice.versus(2.0) == f"{plain}, measured 2.00x" and choice.versus(None) == plain
    assert "stat-auto" not in stats_html(eagle, baseline, True, "done")  # a tree picked by hand: no auto line



@pytest.mark.slow
def test_generate_without_load_runs_auto_and_a_probe_that_switches_conventions_tunes_again(counted):
    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.autotune import calibrate_ui, page_tree, tuning
    from eagle_demo.common.config import default_tree

    key = make_key("assets/tiny-target", "assets/tiny-eagle1", device="cpu")
    session = REGISTRY.load(key)
    list(calibrate_ui(key))
    t = tuning(key)
    static, by_hand = default_tree("cpu", session.family), TreeConfig(4, 4, 16)
    # a page that never noted its preset (Generate pressed without Load) runs the auto choice, as after Load
    assert page_tree(None, static, key, session) == (t.choice.tree, t.choice, "")
    assert page_tree(None, by_hand, key, session) == (by_hand, None, "")  # settings moved by hand still win
    before = autotree._cache_file(session, torch.device("cpu"), torch.float32, None)
    # what Session.probe records when it switches the draft to another rope_theta
    probe = {"tau": 3.0, "used": {"rope_theta": 500000.0}, "declared": {"rope_theta": 10000.0}}
    session.pair = dataclasses.replace(session.pair, report=dataclasses.replace(session.report, probe=probe))
    assert tuning(key) is None and counted == [1]  # the choice made for the old conventions is stale
    assert autotree._cache_file(session, torch.device("cpu"), torch.float32, None) != before
    list(calibrate_ui(key))  # what the page runs after Probe
    again = tuning(key)
    assert again is not t and again.choice is not None and counted == [1, 1]
    assert again.conventions == autotree.conventions(session) != ""
    list(calibrate_ui(key))  # the same conventions: nothing measured again
    assert tuning(key) is again and counted == [1, 1]

# ---- the choice from measured tables, the fits and the replay ---------------------------------------------------

def _costs():
    """A plain step of 10 ms; verify 9 ms + 0.4 ms a token (+1 ms for a tree mask); draft per depth 0.4 ms (chain),
    0.6 ms (top-k 4), 1.0 ms (top-k 8); extend 0.2 ms + 0.05 ms a token; host 0.1 ms + 0.01 ms a node."""
    from eagle_demo.autotree.costs import Costs, Line

    ms = 1e-3
    return Costs(plain=10 * ms, verify=Line(9 * ms, 0.0, 0.4 * ms), tree_extra=1 * ms,
                 draft={1: Line(0.4 * ms, 1.0, 0.4 * ms), 4: Line(1.0 * ms, 2.0, 0.6 * ms),
                        8: Line(1.4 * ms, 2.0, 1.0 * ms)},
                 extend=Line(0.2 * ms, 1.0, 0.05 * ms), host=Line(0.1 * ms, 2.0, 0.01 * ms))


SHAPES = [TreeConfig.chain(2), TreeConfig.chain(4), TreeConfig.chain(7), TreeConfig(2, 4, 8), TreeConfig(2, 8, 12),
          TreeConfig(6, 4, 24)]


def _stats(taus):
    return Acceptance(rank=((0.0,),), chain=(0.0,), rounds=40, measured=dict(zip(SHAPES, taus)))


def test_the_choice_is_the_best_measured_speedup_not_the_longest_or_the_cheapest_round():
    """Worked by hand from _costs (round ms = draft + verify + extend(tau) + host, / 10 ms):
    strong head: chain 7 costs 2.8 + 12.2 + 0.46 + 0.16 = 15.62 ms -> 6.2 / 1.562 = 3.97x, above tree 24/6/4
    (tau 6.6 but 23.8 ms: 2.77x) and chain 4 (4.4 / 1.31 = 3.36x).
    weak head: tree 8/2/4 costs 1.0 + 13.2 + 0.26 + 0.16 = 14.62 ms -> 2.2 / 1.462 = 1.505x, above tree 12/2/8
    (2.45 / 1.66725 = 1.469x), chain 2 (1.6 / 1.134 = 1.411x) and tree 24/6/4 (2.6 / 2.36 = 1.10x)."""
    costs = _costs()
    strong = autotree.choose(_stats([2.8, 4.4, 6.2, 2.9, 2.95, 6.6]), costs, 1.0, torch.device("cpu"), SHAPES)
    assert strong.tree == TreeConfig.chain(7)
    assert strong.predicted_round_cost == pytest.approx(1.562)
    assert strong.predicted_speedup == pytest.approx(6.2 / 1.562)
    weak = autotree.choose(_stats([1.6, 1.7, 1.72, 2.2, 2.45, 2.6]), costs, 1.0, torch.device("cpu"), SHAPES)
    assert weak.tree == TreeConfig(2, 4, 8) and weak.predicted_tau == 2.2
    assert weak.predicted_round_cost == pytest.approx(1.462) and weak.predicted_speedup == pytest.approx(2.2 / 1.462)
    # a verify twice as steep per token tips the weak head to the cheaper chain 2: (1.6 / 1.254 = 1.276x) over
    # tree 8/2/4 (2.2 / 1.782 = 1.235x)
    steep = dataclasses.replace(costs, verify=dataclasses.replace(costs.verify, slope=0.8e-3))
    assert autotree.choose(_stats([1.6, 1.7, 1.72, 2.2, 2.45, 2.6]), steep, 1.0, torch.device("cpu"),
                           SHAPES).tree == TreeConfig.chain(2)


def test_the_engine_run_scales_the_prediction_but_never_the_choice():
    costs = _costs()
    base = _stats([1.6, 1.7, 1.72, 2.2, 2.45, 2.6])
    # the engine's own timed runs: chain 7 (tau 2), the cheaper one's round 1.25x what the parts predict in plain
    # steps; the other ran in a burst of load
    parts = costs.round(TreeConfig.chain(7), 2.0) / costs.plain
    ran = dataclasses.replace(base, engine=(TreeConfig.chain(7), ((1.25 * parts, 2.0), (1.9 * parts, 2.0))))
    plain, scaled = (autotree.choose(s, costs, 1.0, torch.device("cpu"), SHAPES) for s in (base, ran))
    expect = 1.25
    assert autotree.overhead_scale(ran, costs) == pytest.approx(expect)
    assert scaled.tree == plain.tree
    assert scaled.predicted_round_cost == pytest.approx(plain.predicted_round_cost * expect)
    # rounds 2.4x what the parts predict: capped at 1.6 on a CPU, believed on a GPU (a quieter clock)
    slow = dataclasses.replace(base, engine=(TreeConfig.chain(7), ((2.4 * parts, 2.0),)))
    cpu, gpu = (autotree.choose(slow, costs, 1.0, torch.device(d), SHAPES) for d in ("cpu", "cuda"))
    assert cpu.predicted_round_cost == pytest.approx(plain.predicted_round_cost * autotree.OVERHEAD_CAP_CPU)
    assert gpu.predicted_round_cost == pytest.approx(plain.predicted_round_cost * 2.4)


def test_the_verify_line_is_fitted_through_every_size_and_shrugs_off_a_load_spike():
    from eagle_demo.autotree.costs import fit_verify

    true = lambda n, tree: 8e-3 + 0.3e-3 * n + (0.8e-3 if tree else 0.0)  # noqa: E731
    chain = {n: true(n, False) for n in (2, 4, 6, 9)}
    tree = {n: true(n, True) for n in (4, 8, 16, 32)}
    tree[16] *= 1.5  # a burst of load elsewhere while size 16 ran
    line, extra = fit_verify(chain, tree)
    assert line(0) == pytest.approx(8e-3, rel=1e-6) and line.slope == pytest.approx(0.3e-3, rel=1e-6)
    assert extra == pytest.approx(0.8e-3, rel=1e-6)
    flat = fit_verify({2: 9e-3, 9: 8e-3}, {})[0]  # a bigger verify never costs less
    assert flat.slope == 0.0


def test_walk_tau_follows_the_rounds_an_engine_would_take():
    from eagle_demo.autotree.replay import walk_tau

    # from state 10: accept 2 (3 tokens) -> state 13: accept 1 (2) -> state 15: accept 3 (4) -> 19: past the end
    by_state = {10: 2, 11: 0, 12: 0, 13: 1, 14: 0, 15: 3, 16: 0, 17: 0, 18: 0}
    assert walk_tau([by_state]) == pytest.approx(9 / 3)  # the average over all states would say 1.67
    assert walk_tau([by_state, {5: 0, 6: 0}]) == pytest.approx(11 / 5)
    assert walk_tau([]) == 1.0


@pytest.mark.slow
def test_the_replay_accepts_exactly_what_the_engine_accepts():
    """On the shipped pair, the replayed accepted length at each state an engine run visits equals that run's
    accepted length in that round, for a chain and for trees (the target's own text, greedy), and for chains over
    a hot vocabulary, fixed and stopping."""
    from eagle_demo.autotree.replay import Group, replay, timed_runs

    session = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32")
    engine = session.eagle
    ids = session.encode("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n")
    groups = [Group(1, 5), Group(4, 3, (8, 12)), Group(8, 2, (6, 16)), Group(1, 5, stops=((5, 0.3),), hot=600)]
    got = replay(engine, [ids], groups, 40)
    assert got.states == 40 - 5
    timed = timed_runs(engine, session.baseline, [ids], TreeConfig.chain(4))
    assert len(timed) == 2 and all(cost > 0 and 1 <= tau <= 5 for cost, tau in timed)  # plain steps; 1-5 a round
    checked = 0
    hot = (TreeConfig.chain(5, hot_vocab=600), TreeConfig.chain(5, 0.3, 600))
    for shape in (TreeConfig.chain(5), TreeConfig.chain(2), TreeConfig(3, 4, 12), TreeConfig(2, 8, 16), *hot):
        by_state = got.accepted[shape][0]
        m = len(ids)
        for ev in engine.generate(ids, RunConfig(max_new_tokens=40, ignore_eos=True, tree=shape)):
            if isinstance(ev, Round) and m in by_state:
                assert by_state[m] == len(ev.accepted_path), (shape, m)
                m += len(ev.accepted_path) + 1
                checked += 1
    assert checked > 30
    assert {t for t in got.accepted} == {t for g in groups for t in autotree.shapes_of(g)}
    assert got.accepted[hot[0]] != got.accepted[TreeConfig.chain(5)]  # 600 ids leave tokens out of the draft's reach


@pytest.mark.parametrize("family", ["shipped", "qwen3", "mistral"])
def test_packed_greedy_texts_equal_each_prompts_own_plain_decoding(family):
    """All prompts continued in one forward per step give, prompt by prompt, plain greedy decoding's tokens
    (prompts of different lengths, one of a single token); the shipped pair and two random targets."""
    from eagle_demo.autotree.packed_text import greedy_texts
    from eagle_demo.decoding.engine import BaselineEngine
    from eagle_demo.decoding.events import Finish

    if family == "shipped":
        model = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32").pair.target
        prompts = [[5, 9, 200, 17, 3, 44, 91], [1], [300, 12, 12, 7], list(range(40, 75))]
    else:
        from fixtures import tiny_target

        model = tiny_target(family, seed=3)
        prompts = [[5, 9, 20, 17, 3, 44, 91], [1], [30, 12, 12, 7], list(range(40, 75))]
    plain = BaselineEngine(model)
    want = [[ev for ev in plain.generate(p, RunConfig(max_new_tokens=24, ignore_eos=True))
             if isinstance(ev, Finish)][0].token_ids for p in prompts]
    assert greedy_texts(plain.runner, prompts, 24) == [list(w) for w in want]
    assert greedy_texts(plain.runner, prompts[:1], 1) == [list(want[0][:1])]
    with pytest.raises(ValueError, match="at least one token"):
        greedy_texts(plain.runner, [[3], []], 4)


def test_candidates_include_short_wide_trees_and_deep_chains():
    shapes = autotree.candidates(torch.device("cpu"))
    assert TreeConfig.chain(8) in shapes and TreeConfig(2, 8, 16) in shapes and TreeConfig(1, 8, 8) in shapes
    assert TreeConfig(6, 4, 24) in shapes and all(t.total_tokens <= 32 for t in shapes)
    assert all(t.depth < t.total_tokens - 1 <= t.max_draft_nodes for t in shapes if not t.is_chain)


def test_tests_never_touch_the_real_cache():
    from pathlib import Path

    assert not autotree.default_cache_dir().is_relative_to(Path.home() / ".cache" / "eagle_demo")


@pytest.mark.parametrize("head", ["tiny-eagle1", "tiny-eagle3"])
def test_the_batched_replay_grows_each_states_candidates_as_the_drafter_does(head):
    """Every state's candidates from one batched forward per depth equal those of a drafter that took the state's
    m committed positions: tokens, parents and depths exactly, scores to float rounding."""
    from eagle_demo.autotree import replay_batch
    from eagle_demo.common.paths import ASSETS

    session = load_session(SHIPPED_TARGET, str(ASSETS / head), threads=1, device="cpu", dtype="float32")
    engine = session.eagle
    text = torch.tensor(session.encode("class Queue:\n    \"\"\"A first-in, first-out queue.\"\"\"\n\n    def "))
    with torch.inference_mode():
        engine.runner.reset(len(text))
        features = engine.runner.forward(text[:-1]).features  # [N-1, F]
        engine.runner.reset()
    drafter = engine.drafter
    drafter.reset()
    drafter.reserve(len(text) + 16)
    kv, g = replay_batch.extend_text(drafter.head, features, text)
    states = torch.tensor([3, 7, len(text) - 2])
    for k, depth in ((1, 6), (4, 4)):
        batch = replay_batch.grow(drafter.head, kv, g, states, k, depth)
        assert kv.get_seq_length() == len(text) - 1  # the tree entries are dropped again
        for row, m in enumerate(states.tolist()):
            drafter.reset()
            drafter.extend(features[:m], text[1:m + 1])
            want = drafter.candidates(TreeConfig(depth=depth, top_k=k, total_tokens=2))
            assert torch.equal(batch.tokens[row], want.tokens) and torch.equal(batch.parents[row], want.parents)
            assert torch.equal(batch.depths, want.depths)
            torch.testing.assert_close(batch.scores[row], want.scores, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_a_page_that_switches_pairs_runs_the_new_pairs_auto_choice(counted):
    """The panel shows auto's choice for the EAGLE-1 pair (a hot vocabulary); the page switches to the EAGLE-3 pair
    and presses Generate: those settings are auto's, not moved by hand, so the new pair's own choice runs (the
    EAGLE-1 one would fail: an EAGLE-3 head has no hot vocabulary). After the run the panel shows what ran."""
    from types import SimpleNamespace

    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.autotune import AUTO, calibrate_ui, page_tree, tuning
    from eagle_demo.app.draft_panel import after_generate, after_load, apply_tree_preset
    from eagle_demo.app.forms import make_tree
    from eagle_demo.app.pages import PAGES
    from eagle_demo.app.state import start_run
    from eagle_demo.prepare import RunRequest, prepare_run

    page = SimpleNamespace(session_hash="switching-page")
    first = make_key("assets/tiny-target", "assets/tiny-eagle1", device="cpu")
    REGISTRY.load(first)
    list(calibrate_ui(first))
    after_load(first, page)
    shown = make_tree(*apply_tree_preset(AUTO, first, page))  # the choice, on the panel
    assert shown == tuning(first).choice.tree == PAGES.of(page.session_hash).auto_shown
    second = make_key("assets/tiny-target", "assets/tiny-eagle3", device="cpu")
    session = REGISTRY.load(second)
    tree, choice, note = page_tree(AUTO, shown, second, session, PAGES.of(page.session_hash).auto_shown)
    assert choice is tuning(second).choice and tree == choice.tree and note == "" and tree.hot_vocab == 0
    assert page_tree(AUTO, shown, second, session) == (shown, None, "")  # without the note: moved by hand
    by_hand = TreeConfig.chain(2)
    assert page_tree(AUTO, by_hand, second, session, PAGES.of(page.session_hash).auto_shown) == (by_hand, None, "")
    with pytest.raises(ConfigError, match="use hot vocabulary 0"):  # EAGLE-1's choice, refused before it runs
        session.check_tree(RunConfig(tree=shown))
    ids = session.encode("def add(a, b):\n")
    asked = RunRequest(tuple(ids), choice.run_config(RunConfig(max_new_tokens=8)))
    live = start_run(second, prepare_run(session, asked, lambda run: (run, choice, "")))
    live.done.wait()
    assert live.error is None
    PAGES.of(page.session_hash).run = live
    *settings, line = after_generate(second, page)
    assert make_tree(*settings) == choice.tree == PAGES.of(page.session_hash).auto_shown and line.startswith("auto: ")
    hand = start_run(second, prepare_run(session, RunRequest(tuple(ids), RunConfig(max_new_tokens=8, tree=by_hand))))
    hand.done.wait()  # a tree set by hand
    PAGES.of(page.session_hash).run = hand
    assert after_generate(second, page)[:7] == (gr.skip(),) * 7  # the hand settings stay on the panel
