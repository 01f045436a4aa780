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
