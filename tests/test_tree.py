"""Golden hand-worked trees for selection, masks, depths and child lookup."""

import math

import pytest
import torch

from eagle_demo.common.config import ConfigError, TreeConfig
from eagle_demo.decoding.tree import Candidates, ancestor_mask, make_tree, select_tree


def cands(rows):
    """rows: (token, parent, depth, prob_given_parent); scores are cumulative log-probs."""
    scores, logp = [], []
    for _tok, parent, _depth, prob in rows:
        lp = math.log(prob)
        logp.append(lp)
        scores.append(lp + (scores[parent] if parent >= 0 else 0.0))

    def t(x, d=torch.long):
        return torch.tensor(x, dtype=d)

    return Candidates(tokens=t([r[0] for r in rows]), parents=t([r[1] for r in rows]), depths=t([r[2] for r in rows]),
                      scores=t(scores, torch.float), logp=t(logp, torch.float))


def test_docstring_example():
    c = cands([(10, -1, 1, 0.6), (11, -1, 1, 0.3), (12, 0, 2, 0.9), (13, 0, 2, 0.05), (14, 1, 2, 0.5)])
    tree = select_tree(99, c, 3)
    assert tree.token_list == (99, 10, 11, 12)
    assert tree.parents == (-1, 0, 0, 1)
    assert tree.depths.tolist() == [0, 1, 1, 2]
    assert tree.mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert tree.children[0] == {10: 1, 11: 2} and tree.children[1] == {12: 3}
    assert tree.scores[3] == pytest.approx(0.54)
    assert tree.draft_probs[3] == pytest.approx(0.9)
    assert tree.path_to(3) == [1, 3]


def test_selection_keeps_parents_under_ties():
    # child with probability 1.0 ties its parent's score: the parent must still come first and be kept
    c = cands([(1, -1, 1, 0.5), (2, -1, 1, 0.5), (3, 0, 2, 1.0), (4, 1, 2, 1.0), (5, 2, 3, 1.0)])
    for n in range(1, 6):
        tree = select_tree(0, c, n)
        for i, p in enumerate(tree.parents):
            assert p < i
        assert tree.size == n + 1


def test_deeper_tree_mask_and_depths():
    # chain of 3 under the first of two roots' children
    c = cands([(1, -1, 1, 0.9), (2, -1, 1, 0.05), (3, 0, 2, 0.9), (4, 2, 3, 0.9), (5, 1, 2, 0.9)])
    tree = select_tree(7, c, 4)
    assert tree.token_list == (7, 1, 2, 3, 4)
    assert tree.parents == (-1, 0, 0, 1, 3)
    assert tree.depths.tolist() == [0, 1, 1, 2, 3]
    assert tree.mask[4].tolist() == [True, True, False, True, True]


def test_ancestor_mask_matches_definition():
    parents = [-1, 0, 0, 1, 1, 2, 3, 6]
    mask = ancestor_mask(parents)
    for i in range(len(parents)):
        anc, j = {i}, i
        while parents[j] >= 0:
            j = parents[j]
            anc.add(j)
        assert {k for k in range(len(parents)) if mask[i, k]} == anc


def test_make_tree_first_duplicate_child_wins():
    tree = make_tree([0, 5, 5], [-1, 0, 0], [0, 1, 1], [1, .5, .5], [1, .5, .5])
    assert tree.children[0] == {5: 1}


def test_tree_config_ranges():
    assert TreeConfig.chain(4) == TreeConfig(depth=4, top_k=1, total_tokens=5)
    assert TreeConfig(depth=3, top_k=2, total_tokens=60).max_draft_nodes == 2 + 2 * 4
    with pytest.raises(ConfigError, match="depth"):
        TreeConfig(depth=0)
    with pytest.raises(ConfigError, match="total_tokens"):
        TreeConfig(total_tokens=1)
