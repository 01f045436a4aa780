"""Metric reducers on hand-built event streams."""

import pytest

from eagle_demo.decoding.events import DraftNode, Finish, Round, RunStart, Step
from eagle_demo.decoding.metrics import misses, summarize
from eagle_demo.race.speedup import breakdown, speedup


def chain_round(index: int, k: int, accepted: int) -> Round:
    nodes = (DraftNode(1, -1, 0, 1.0, 1.0),) + tuple(DraftNode(10 + d, d - 1, d, 0.9, 0.9 ** d)
                                                      for d in range(1, k + 1))
    path = tuple(range(1, accepted + 1))
    committed = tuple(10 + d for d in path) + (99,)
    return Round(index=index, nodes=nodes, accepted_path=path, accepted_ids=tuple(10 + d for d in path), bonus_id=99,
                 committed_ids=committed, target_probs=(1.0,) * len(committed), draft_seconds=0.0,
                 verify_seconds=0.0, host_seconds=0.0, elapsed=float(index + 1), total_new_tokens=0)


def start() -> RunStart:
    return RunStart(mode="eagle", prompt_tokens=3, max_new_tokens=64, tree="chain k=2", temperature=0.0,
                    draft_family="eagle1", device="cpu", dtype="float32")


def test_acceptance_by_depth_counts_only_depths_a_round_could_accept():
    # chain k=2: accepted 2, 2, 1, 0 drafts. Depth 3 was never drafted, so it is not reported as 0.
    rounds = [chain_round(i, 2, a) for i, a in enumerate([2, 2, 1, 0])]
    events = [start(), *rounds, Finish("length", tuple(range(9)), 9, 4, 0.1, 4.0)]
    stats = summarize(events)
    assert stats.acceptance_by_depth == pytest.approx((3 / 4, 2 / 3))
    assert stats.tau == pytest.approx(9 / 4)


def test_a_round_cut_by_eos_or_the_token_budget_counts_only_the_drafts_it_output():
    """chain k=4: a round accepting 1 draft, then one accepting 3 but cut after 1 token (max new tokens): depths 2
    and 3 of the second were accepted by the verifier but never output, so they count neither way."""
    full = chain_round(0, 4, 1)
    cut = chain_round(1, 4, 3)
    cut = Round(**{**cut.__dict__, "committed_ids": cut.committed_ids[:1], "target_probs": (1.0,)})
    stats = summarize([start(), full, cut, Finish("length", tuple(range(4)), 4, 2, 0.1, 2.0)])
    assert stats.acceptance_by_depth == pytest.approx((1.0, 0.0))  # the uncut path would give (1, .5, 1, 0)
    assert stats.tau == pytest.approx(3 / 2)


def test_a_pruned_tree_without_a_child_under_the_accepted_node_is_not_a_rejection():
    # root -> a (depth 1) -> nothing below a; root -> b -> c. Accepting a leaves no depth-2 draft to try.
    nodes = (DraftNode(1, -1, 0, 1.0, 1.0), DraftNode(5, 0, 1, 0.6, 0.6), DraftNode(6, 0, 1, 0.3, 0.3),
             DraftNode(7, 2, 2, 0.9, 0.27))
    r = Round(index=0, nodes=nodes, accepted_path=(1,), accepted_ids=(5,), bonus_id=8, committed_ids=(5, 8),
              target_probs=(1.0, 1.0), draft_seconds=0.0, verify_seconds=0.0, host_seconds=0.0, elapsed=1.0,
              total_new_tokens=3)
    stats = summarize([start(), r, Finish("length", (1, 5, 8), 3, 1, 0.1, 1.0)])
    assert stats.acceptance_by_depth == (1.0,)


def timed_round(index: int, accepted: int, draft: float, verify: float, host: float, elapsed: float) -> Round:
    r = chain_round(index, 3, accepted)
    return Round(**{**r.__dict__, "draft_seconds": draft, "verify_seconds": verify, "host_seconds": host,
                    "elapsed": elapsed})


def test_breakdown_explains_the_speedup_as_tau_over_round_cost():
    # EAGLE: 2 rounds committing 4 + 2 tokens in 0.030 s (draft 5 ms + verify 8 ms + host 1 ms each, 2 ms loop).
    rounds = [timed_round(0, 3, 0.005, 0.008, 0.001, 0.015), timed_round(1, 1, 0.005, 0.008, 0.001, 0.030)]
    eagle = summarize([start(), *rounds, Finish("length", tuple(range(7)), 7, 2, 0.01, 0.030)])
    # plain decoding of the same 6 tokens: 6 steps in 0.060 s (10 ms a step)
    steps = [Step(i, 5, 1.0, 0.01, 0.01 * (i + 1), i + 2) for i in range(6)]
    base = summarize([RunStart("baseline", 3, 64, "", 0.0, "", "cpu", "float32"), *steps,
                      Finish("length", tuple(range(7)), 7, 6, 0.01, 0.060)])
    b = breakdown(eagle, base)
    assert b.speedup == pytest.approx(speedup(eagle, base)) == pytest.approx(2.0)
    assert b.tau == pytest.approx(3.0) and b.round_cost == pytest.approx(1.5)
    assert (b.draft, b.verify, b.host, b.other) == pytest.approx((0.5, 0.8, 0.1, 0.1))
    assert b.step_ms == pytest.approx(10.0) and b.round_ms == pytest.approx(15.0)
    assert b.line().startswith("2.00x = tau 3.00 / round cost 1.50 steps (draft 0.50 + verify 0.80 + host 0.10")


def test_breakdown_needs_both_runs():
    empty = summarize([start(), Finish("stopped", (1,), 1, 0, 0.01, 0.0)])
    assert breakdown(empty, empty) is None


def test_misses_pair_the_drafts_favourite_with_the_targets_token():
    # chain k=2 accepting 2, 2, 1, 0: the full acceptances have no drafted child left to miss
    rounds = [chain_round(i, 2, a) for i, a in enumerate([2, 2, 1, 0])]
    assert misses(rounds) == {(12, 99): 1, (11, 99): 1}  # depth 2 after accepting one; depth 1 after none
    # a tree: root -> a (0.6), b (0.3); neither accepted: the favourite a is the miss
    nodes = (DraftNode(1, -1, 0, 1.0, 1.0), DraftNode(5, 0, 1, 0.6, 0.6), DraftNode(6, 0, 1, 0.3, 0.3))
    r = Round(index=0, nodes=nodes, accepted_path=(), accepted_ids=(), bonus_id=8, committed_ids=(8,),
              target_probs=(1.0,), draft_seconds=0.0, verify_seconds=0.0, host_seconds=0.0, elapsed=1.0,
              total_new_tokens=2)
    assert misses([r, r]) == {(5, 8): 2}
    cut = Round(**{**r.__dict__, "committed_ids": ()})  # max new tokens reached before the bonus
    assert misses([cut]) == {}
