"""The chain half of the drafter (`drafter.Drafter` inherits it): top-k 1, one new token per depth, causal
attention, no selection; a stopping chain ends under a path probability, and a chain over a hot vocabulary takes
each top-1 over `hot_vocab.HotVocab`. It uses the drafter's cache, depth step and static path."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from .hot_vocab import HotVocab
from .tree import DraftTree, tree_from_device

if TYPE_CHECKING:
    from ..drafts.base import DraftHead
    from ..drafts.lean import DraftKV
    from .static_draft import StaticDraft, StaticDraftKV

__all__ = ["ChainDraft"]


class ChainDraft:
    """Chain drafting for `Drafter` (its `head`, `cache`, `static`, `length`, `last_g`, `_depth`, `_positions`,
    `_const` and `_round_inputs`)."""

    # what it reads and writes of `Drafter`, typed here for the checker
    head: DraftHead
    cache: DraftKV | StaticDraftKV
    static: StaticDraft | None
    hot: HotVocab | None
    length: int
    last_g: torch.Tensor | None
    _context: list[torch.Tensor]
    _seen: list[int]

    if TYPE_CHECKING:
        @property
        def device(self) -> torch.device: ...

        def _const(self, name: str, make): ...

        def _positions(self, start: int, n: int) -> torch.Tensor: ...

        def _round_inputs(self, key: tuple, root_token: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...

        def _depth(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, k: int, start: int,
                   block: torch.Tensor | None = None, pick=None): ...

    def _on_static(self) -> StaticDraft:
        """The static pools, in the paths that run only on them."""
        assert self.static is not None
        return self.static

    def _last(self) -> torch.Tensor:
        """The last draft output [1, H] (every extend sets it)."""
        assert self.last_g is not None, "extend before drafting"
        return self.last_g[None]

    def _hot_table(self, size: int) -> HotVocab:
        """This run's hot vocabulary of `size` first ids, holding every id extended so far (one host read of the
        ids extended since the last round: free on a CPU)."""
        new = [t for ids in self._context for t in ids.tolist()]
        self._context.clear()
        self._seen += new
        if self.static is not None:
            self.hot, made = self.static.hot_table(size)
            new = self._seen if made else new
        elif self.hot is None or self.hot.size != size or self.hot.weight is not self.head.lm_head.module.weight:
            self.hot = HotVocab(self.head, size, room=max(256, self.cache.capacity))
            new = self._seen
        self.hot.add(new)
        return self.hot

    def _pick(self, hot: int):
        """The draft's top-k for a chain over `hot` first ids (0: the head's own over the whole vocabulary)."""
        return self._hot_table(hot).topk if hot else self.head.topk

    def _chain(self, root_token: int, longest: int, stop_below: float = 0.0, hot: int = 0) -> DraftTree:
        """top-k 1: each step feeds the single new token; causal attention, no mask, no selection. stop_below > 0:
        no further step after a token whose path probability is under it (one host read of one score per step:
        free on a CPU, a sync on a GPU). hot > 0: each step's top-1 over the hot vocabulary (`_pick`)."""
        if self.static is not None and (self.static.graphs_on or stop_below <= 0.0):
            return self._static_chain(root_token, longest, stop_below, hot)
        pick = self._pick(hot)
        logp, ids = pick(self._last(), 1)  # [1, 1], [1, 1]
        all_ids, all_logp = [ids[0]], [logp[0]]
        g = self._last()  # [1, H]
        floor = math.log(stop_below) if stop_below > 0.0 else None
        path, depth = 0.0, 1
        for step in range(2, longest + 1):
            if floor is not None:
                path += float(logp)  # the path's log-probability down to depth step - 1
                if path < floor:
                    break
            g, logp, ids = self._depth(g, ids[0], self._positions(self.length + step - 2, 1), 1,
                                       self.length + step - 2, pick=pick)  # [1, H], [1, 1], [1, 1]
            all_ids.append(ids[0])
            all_logp.append(logp[0])
            depth = step
        if depth > 1:
            self.cache.crop(-(depth - 1))
        return self._chain_tree(root_token, torch.cat(all_ids), torch.cat(all_logp))

    def _static_chain(self, root_token: int, longest: int, stop_below: float, hot: int) -> DraftTree:
        """The whole chain and its tree in one call (one CUDA graph on a GPU): the inputs are the draft output to
        start from, the start slot and the root token. A stop is applied afterwards, from one host read of the
        path's log-probabilities: the depths past it were drafted (on a GPU cheaper than a sync per depth; without
        graphs a stopping chain takes `_chain`'s depth by depth path) and are cut off, as the growing path would
        never have drafted them (a chain's tree cut after d tokens is the tree of its first d)."""
        st = self._on_static()
        st.check(self.length + longest - 1)
        pick = self._pick(hot)  # a hot table takes the context ids since the last round in place
        key = ("chain", longest, hot)
        x = self._round_inputs(key, root_token)

        def run():
            ids, logps = st.chain(x[0], x[1], longest, pick)  # [longest], [longest]
            tree = self._chain_tree(x[2], ids, logps)
            return tree.tokens, tree.depths, tree.mask, tree.pack, logps

        tokens, depths, mask, pack, logps = st.replayed(key, run)
        n = longest + 1
        if stop_below > 0.0 and longest > 1:
            path = logps[:-1].double().cumsum(0)  # [longest-1] down to depths 1..longest-1, never increasing
            n = 2 + int((path >= math.log(stop_below)).sum())
        return DraftTree(tokens=tokens[:n], depths=depths[:n], mask=mask[:n, :n], is_chain=True, pack=pack[:, :n])

    def _chain_tree(self, root_token: int | torch.Tensor, ids: torch.Tensor, logps: torch.Tensor) -> DraftTree:
        """ids, logps [depth] of a drafted chain -> its tree (root first), on the device."""
        dev, depth = self.device, ids.shape[0]
        root = torch.as_tensor(root_token, dtype=torch.long, device=dev).reshape(1)  # [1]
        tokens = torch.cat([root, ids])  # [depth+1]
        chain = self._const(f"chain{depth}", lambda: (torch.arange(-1, depth, device=dev),
                                                      torch.arange(depth + 1, device=dev)))
        probs = torch.stack([torch.cumsum(logps, 0), logps]).exp()  # [2, depth] path score, given parent
        probs = torch.cat([probs.new_ones(2, 1), probs], 1)  # [2, depth+1]
        return tree_from_device(tokens, chain[0], chain[1], probs, chain=True)
