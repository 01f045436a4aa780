"""Draft trees as plain data: selection of EAGLE-2 candidates, ancestor masks, depths, child lookup.

A round's tree has N nodes. Node 0 is the root: the last committed token, which the target has not
seen yet. Every other node is a drafted token. Nodes are ordered depth-major (parents before children).

Worked example (the golden case in tests/test_tree.py):

    candidates (depth-major)      cumulative log-prob
      0: 'a'  depth 1  parent -     log 0.6
      1: 'b'  depth 1  parent -     log 0.3
      2: 'c'  depth 2  parent 0     log 0.6*0.9
      3: 'd'  depth 2  parent 0     log 0.6*0.05
      4: 'e'  depth 2  parent 1     log 0.3*0.5
    select 3 -> a (0.6), c (0.54), b (0.3)
    nodes: root, a, b, c   parents [-1, 0, 0, 1]   depths [0, 1, 1, 2]
    mask (row attends to column):  root: root        a: root a
                                   b: root b         c: root a c
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["DraftTree", "Candidates", "select_tree", "ancestor_mask"]


@dataclass(frozen=True)
class Candidates:
    """Everything the drafter proposed in one round, depth-major.

    tokens [M] long, parents [M] long (candidate index, -1 = child of the root), depths [M] long (>= 1),
    scores [M] float (cumulative log-probability), logp [M] float (log-probability given the parent).
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    depths: torch.Tensor
    scores: torch.Tensor
    logp: torch.Tensor


@dataclass(frozen=True)
class DraftTree:
    tokens: torch.Tensor  # [N] long, root first
    depths: torch.Tensor  # [N] long, root 0
    mask: torch.Tensor  # [N, N] bool, mask[i, j] = j is an ancestor of i or i itself
    parents: tuple[int, ...]  # parent node index, -1 for the root
    draft_probs: tuple[float, ...]  # probability of each node given its parent (root 1.0)
    scores: tuple[float, ...]  # product of draft probabilities along the path (root 1.0)
    token_list: tuple[int, ...]
    children: tuple[dict[int, int], ...]  # per node: token id -> child node index

    @property
    def size(self) -> int:
        return len(self.parents)

    @property
    def is_chain(self) -> bool:
        """A single path: plain causal attention and consecutive positions verify it, no mask needed."""
        return all(p == i - 1 for i, p in enumerate(self.parents))

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root (excluded) down to `node` (included)."""
        path = []
        while node > 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]


def select_tree(root_token: int, cand: Candidates, n_select: int) -> DraftTree:
    """EAGLE-2 reranking: keep the n_select candidates with the highest path score.

    Ties are broken towards shallower, earlier candidates (a stable sort over the depth-major order), and
    a child's score never exceeds its parent's, so every kept node's parent is kept too.
    """
    m = cand.tokens.shape[0]
    n_select = max(0, min(n_select, m))
    order = torch.sort(cand.scores, descending=True, stable=True).indices[:n_select]  # [n_select]
    chosen = torch.sort(order).values.tolist()  # depth-major order = parents first
    new_index = {c: i + 1 for i, c in enumerate(chosen)}
    cand_parents = cand.parents.tolist()
    cand_tokens = cand.tokens.tolist()
    cand_depths = cand.depths.tolist()
    cand_scores = cand.scores.exp().tolist()
    cand_probs = cand.logp.exp().tolist()

    parents = [-1]
    tokens = [int(root_token)]
    depths = [0]
    scores = [1.0]
    probs = [1.0]
    for c in chosen:
        p = cand_parents[c]
        if p >= 0 and p not in new_index:
            raise AssertionError("tree selection dropped a parent; candidates are not depth-major")
        parents.append(0 if p < 0 else new_index[p])
        tokens.append(cand_tokens[c])
        depths.append(cand_depths[c])
        scores.append(cand_scores[c])
        probs.append(cand_probs[c])
    return make_tree(tokens, parents, depths, probs, scores, device=cand.tokens.device)


def make_tree(tokens: list[int], parents: list[int], depths: list[int], draft_probs: list[float],
              scores: list[float], device: torch.device | str = "cpu") -> DraftTree:
    children: list[dict[int, int]] = [dict() for _ in tokens]
    for i, p in enumerate(parents):
        if p >= 0:
            children[p].setdefault(tokens[i], i)
    return DraftTree(
        tokens=torch.tensor(tokens, dtype=torch.long, device=device),
        depths=torch.tensor(depths, dtype=torch.long, device=device),
        mask=ancestor_mask(parents, device=device),
        parents=tuple(parents),
        draft_probs=tuple(draft_probs),
        scores=tuple(scores),
        token_list=tuple(tokens),
        children=tuple(children),
    )


def ancestor_mask(parents: list[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """parents (parents before children) -> bool [N, N], row i true at i and at each ancestor of i."""
    n = len(parents)
    rows: list[list[bool]] = []
    for i, p in enumerate(parents):
        row = list(rows[p]) if p >= 0 else [False] * n
        row[i] = True
        rows.append(row)
    return torch.tensor(rows, dtype=torch.bool, device=device)
