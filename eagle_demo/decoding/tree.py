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
    """A round's tree. The tensors stay on the draft's device; the host fields (token_list, parents, depth_list,
    scores, draft_probs) come from `host` when built on the host, else from one copy of `pack`, made at most
    once per round, and `read_with` lets the verifier fetch its own per-node rows in that same copy."""

    tokens: torch.Tensor  # [N] long, root first
    depths: torch.Tensor  # [N] long, root 0
    mask: torch.Tensor  # [N, N] bool, mask[i, j] = j is an ancestor of i or i itself
    is_chain: bool  # a single path: plain causal attention and consecutive positions verify it, no mask
    pack: torch.Tensor | None = None  # [5, N] float: tokens, parents, depths, path score, draft probability
    host: tuple | None = None  # (token_list, parents, depth_list, scores, draft_probs) tuples

    @cached_property
    def _host(self) -> tuple:
        if self.host is not None:
            return self.host
        assert self.pack is not None, "a tree carries its host tuples or their device pack"
        return _unpack(self.pack.tolist())

    def read_with(self, rows: torch.Tensor) -> list:
        """rows [k, N] on the tree's device -> their values as lists, in the same host copy as the tree's own
        fields when those were not read yet (one device->host transfer per round)."""
        if "_host" in self.__dict__ or self.pack is None:
            return rows.tolist()
        values = torch.cat([self.pack, rows.to(self.pack.dtype)]).tolist()
        self.__dict__["_host"] = _unpack(values[:5])
        return values[5:]

    token_list = property(lambda self: self._host[0])
    parents = property(lambda self: self._host[1])  # parent node index, -1 for the root
    depth_list = property(lambda self: self._host[2])
    scores = property(lambda self: self._host[3])  # product of draft probabilities along the path (root 1.0)
    draft_probs = property(lambda self: self._host[4])  # probability given the parent (root 1.0)

    @property
    def size(self) -> int:
        return self.tokens.shape[0]

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
                            torch.cat([fields.new_ones(2, 1), fields], 1), chain=False)


def tree_from_device(tokens: torch.Tensor, parents: torch.Tensor, depths: torch.Tensor,
                     probs: torch.Tensor, chain: bool) -> DraftTree:
    """A tree from device tensors: tokens/parents/depths [N] long (parent -1 for the root, parents first),
    probs [2, N] (path score, probability given the parent); chain: the drafter knows it drafted one path.
    The ancestor mask is built on the device (a chain's is lower-triangular); nothing is read by the host here."""
    n = tokens.shape[0]
    mask = torch.ones(n, n, dtype=torch.bool, device=tokens.device).tril_() if chain else \
        _ancestor_mask_t(parents.clamp(min=0))  # [N, N]
    pack = torch.cat([torch.stack([tokens, parents, depths]).float(), probs.float()])  # [5, N]
    return DraftTree(tokens=tokens, depths=depths, mask=mask, is_chain=chain, pack=pack)


def _unpack(rows: list) -> tuple:
    as_int = lambda row: tuple(int(x) for x in row)  # noqa: E731
    return as_int(rows[0]), as_int(rows[1]), as_int(rows[2]), tuple(rows[3]), tuple(rows[4])


def make_tree(tokens: list[int], parents: list[int], depths: list[int], draft_probs: list[float],
              scores: list[float], device: torch.device | str = "cpu") -> DraftTree:
    return DraftTree(
        tokens=torch.tensor(tokens, dtype=torch.long, device=device),
        depths=torch.tensor(depths, dtype=torch.long, device=device),
        mask=ancestor_mask(parents, device=device),
        is_chain=all(p == i - 1 for i, p in enumerate(parents)),
        host=(tuple(tokens), tuple(parents), tuple(depths), tuple(scores), tuple(draft_probs)),
    )


def ancestor_mask(parents: list[int], device: torch.device | str = "cpu") -> torch.Tensor:
    """parents (parents before children) -> bool [N, N], row i true at i and at each ancestor of i."""
    return _ancestor_mask_t(torch.tensor([max(p, 0) for p in parents], dtype=torch.long, device=device))


def _ancestor_mask_t(up: torch.Tensor) -> torch.Tensor:
    """up [N] long (each node's parent, the root pointing at itself) -> ancestor mask [N, N] bool.

    Pointer doubling: after t steps row i holds every ancestor within 2**t levels, so log2(N) steps of
    two gathers and an or, whatever the tree's shape."""
    n = up.shape[0]
    mask = torch.eye(n, dtype=torch.bool, device=up.device).scatter_(1, up[:, None], True)  # [N, N] self, parent
    jump = up  # (scatter_ with a scalar: no host tensor to copy, so a CUDA graph can capture it)
    for _ in range(max(0, math.ceil(math.log2(max(n - 1, 1))))):
        mask = mask | mask[jump]  # [N, N]
        jump = jump[jump]
    return mask
