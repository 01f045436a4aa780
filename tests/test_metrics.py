"""Metric reducers on hand-built event streams."""

import pytest

from eagle_demo.events import DraftNode, Finish, Round, RunStart
from eagle_demo.metrics import summarize


def chain_round(index: int, k: int, accepted: int) -> Round:
    nodes = (DraftNode(1, -1, 0, 1.0, 1.0),) + tuple(DraftNode(10 + d, d - 1, d, 0.9, 0.9 ** d) for d in range(1, k + 1))
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


def test_a_pruned_tree_without_a_child_under_the_accepted_node_is_not_a_rejection():
    # root -> a (depth 1) -> nothing below a; root -> b -> c. Accepting a leaves no depth-2 draft to try.
    nodes = (DraftNode(1, -1, 0, 1.0, 1.0), DraftNode(5, 0, 1, 0.6, 0.6), DraftNode(6, 0, 1, 0.3, 0.3),
             DraftNode(7, 2, 2, 0.9, 0.27))
    r = Round(index=0, nodes=nodes, accepted_path=(1,), accepted_ids=(5,), bonus_id=8, committed_ids=(5, 8),
              target_probs=(1.0, 1.0), draft_seconds=0.0, verify_seconds=0.0, host_seconds=0.0, elapsed=1.0,
              total_new_tokens=3)
    stats = summarize([start(), r, Finish("length", (1, 5, 8), 3, 1, 0.1, 1.0)])
    assert stats.acceptance_by_depth == (1.0,)
