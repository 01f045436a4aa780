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

import math
from dataclasses import dataclass
from functools import cached_property

import torch

__all__ = ["DraftTree", "Candidates", "select_tree", "ancestor_mask", "make_tree", "tree_from_device"]


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
    tokens: torch.Tensor  # [N] long, root first (on the draft's device)
    depths: torch.Tensor  # [N] long, root 0
    mask: torch.Tensor  # [N, N] bool, mask[i, j] = j is an ancestor of i or i itself
    parents: tuple[int, ...]  # parent node index, -1 for the root
    draft_probs: tuple[float, ...]  # probability of each node given its parent (root 1.0)
    scores: tuple[float, ...]  # product of draft probabilities along the path (root 1.0)
    token_list: tuple[int, ...]
    depth_list: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.parents)

    @cached_property
    def is_chain(self) -> bool:
        """A single path: plain causal attention and consecutive positions verify it, no mask needed."""
        return all(p == i - 1 for i, p in enumerate(self.parents))

    @cached_property
    def children(self) -> tuple[dict[int, int], ...]:
        """Per node: token id -> child node index (the first child carrying a token wins)."""
        kids: list[dict[int, int]] = [dict() for _ in self.parents]
        for i, p in enumerate(self.parents):
            if p >= 0:
                kids[p].setdefault(self.token_list[i], i)
        return tuple(kids)

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root (excluded) down to `node` (included)."""
        path = []
        while node > 0:
            path.append(node)
            node = self.parents[node]
        return path[::-1]


def select_tree(root_token: int | torch.Tensor, cand: Candidates, n_select: int) -> DraftTree:
    """EAGLE-2 reranking: keep the n_select candidates with the highest path score, on the candidates' device.

    Ties are broken towards shallower, earlier candidates (a stable sort over the depth-major order), and
    a child's score never exceeds its parent's, so every kept node's parent is kept too.
    """
    m = cand.tokens.shape[0]
    n_select = max(0, min(n_select, m))
    dev = cand.tokens.device
    order = torch.sort(cand.scores, descending=True, stable=True).indices[:n_select]  # [n]
    chosen = torch.sort(order).values  # [n] depth-major order = parents first
    new_index = torch.zeros(m + 1, dtype=torch.long, device=dev)  # candidate+1 -> node index (0 = root)
    new_index[chosen + 1] = torch.arange(1, n_select + 1, device=dev)
    node_parent = new_index[cand.parents[chosen] + 1]  # [n] parent node of each kept candidate
    root = torch.as_tensor(root_token, dtype=torch.long, device=dev).reshape(1)  # [1]
    tokens = torch.cat([root, cand.tokens[chosen]])  # [N]
    depths = torch.cat([root.new_zeros(1), cand.depths[chosen]])  # [N]
    fields = torch.stack([cand.scores[chosen], cand.logp[chosen]]).float().exp()  # [2, n] probabilities
    return tree_from_device(tokens, torch.cat([root.new_full((1,), -1), node_parent]), depths,
                            torch.cat([fields.new_ones(2, 1), fields], 1))


def tree_from_device(tokens: torch.Tensor, parents: torch.Tensor, depths: torch.Tensor,
                     probs: torch.Tensor) -> DraftTree:
    """A tree from device tensors: tokens/parents/depths [N] long (parent -1 for the root, parents first),
    probs [2, N] (path score, probability given the parent). The ancestor mask is built on the device; the
    host gets everything else in one copy."""
    mask = _ancestor_mask_t(parents.clamp(min=0))
    host = torch.cat([torch.stack([tokens, parents, depths]).float(), probs.float()]).tolist()  # one read
    as_int = lambda row: tuple(int(x) for x in row)  # noqa: E731
    return DraftTree(tokens=tokens, depths=depths, mask=mask, parents=as_int(host[1]), draft_probs=tuple(host[4]),
                     scores=tuple(host[3]), token_list=as_int(host[0]), depth_list=as_int(host[2]))


def make_tree(tokens: list[int], parents: list[int], depths: list[int], draft_probs: list[float],
              scores: list[float], device: torch.device | str = "cpu") -> DraftTree:
    return DraftTree(
        tokens=torch.tensor(tokens, dtype=torch.long, device=device),
        depths=torch.tensor(depths, dtype=torch.long, device=device),
        mask=ancestor_mask(parents, device=device),
        parents=tuple(parents), draft_probs=tuple(draft_probs), scores=tuple(scores),
        token_list=tuple(tokens), depth_list=tuple(depths),
    )


def ancestor_mask(parents: list[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """parents (parents before children) -> bool [N, N], row i true at i and at each ancestor of i."""
    return _ancestor_mask_t(torch.tensor([max(p, 0) for p in parents], dtype=torch.long, device=device))


def _ancestor_mask_t(up: torch.Tensor) -> torch.Tensor:
    """up [N] long (each node's parent, the root pointing at itself) -> ancestor mask [N, N] bool.

    Pointer doubling: after t steps row i holds every ancestor within 2**t levels, so log2(N) steps of
    two gathers and an or, whatever the tree's shape."""
    n = up.shape[0]
    rows = torch.arange(n, device=up.device)  # [N]
    mask = torch.zeros(n, n, dtype=torch.bool, device=up.device)  # [N, N]
    mask[rows, rows] = True
    mask[rows, up] = True
    jump = up
    for _ in range(max(0, math.ceil(math.log2(max(n - 1, 1))))):
        mask = mask | mask[jump]  # [N, N]
        jump = jump[jump]
    return mask
