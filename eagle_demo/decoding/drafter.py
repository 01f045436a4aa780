"""The draft side of a round: extend the draft's cache with accepted (feature, token) pairs and grow the
EAGLE-2 dynamic tree from the last accepted position.

Draft positions: the pair at position i is (target feature_i, token_{i+1}). After `extend` the cache
holds `length` stable positions and `last_g` is the draft output at the last one, a prediction of the
next feature whose logits propose depth-1 tokens.

Lean by construction: one head forward per depth over the whole frontier; scores, top-k, the frontier and
the tree mask stay on the device (the mask lives in one preallocated additive buffer); the tree is selected
with tensor ops and reaches the host in a single copy per round (`tree.tree_from_device`).

static=True: the head runs over fixed K/V pools under full-width masks (`static_draft.StaticDraft`), so a
round's whole chain or tree draft, and the extend after it, have fixed shapes and are each replayed as one CUDA
graph on a GPU (positions, slots and masks computed from the start slot on the device); on a CPU the same path
runs eagerly (a stopping chain there still stops depth by depth).

A chain over a hot vocabulary (`TreeConfig.hot_vocab`) takes its top-1 over `hot_vocab.HotVocab`: the first ids
plus every id of the run's context, which `extend` records from the host's copy of the tokens (no device read).
A static drafter's table is fixed (its graphs keep its addresses) and holds a row for every position of its pools.
"""

from __future__ import annotations

import torch

from ..common.config import RunConfig, TreeConfig
from ..drafts.base import DraftHead
from ..drafts.lean import DraftKV, one_call
from ..target.static import pool_size
from .chain_draft import ChainDraft
from .hot_vocab import HotVocab
from .static_draft import StaticDraft
from .tree import Candidates, DraftTree, select_tree

__all__ = ["Drafter"]


class Drafter(ChainDraft):
    """An EAGLE head's side of a round (`draft_source.DraftSource`): the draft's cache over the committed pairs,
    and the tree it grows from them."""

    mode = "eagle"

    def __init__(self, head: DraftHead, static: bool = False, graphs: bool = True):
        self.head = head
        self.static_mode, self.graphs = static, graphs
        self.static: StaticDraft | None = None
        self._consts: dict = {}
        self.reset()

    @property
    def family(self) -> str:
        return self.head.family

    @property
    def feature_layers(self) -> tuple[int, ...] | None:
        return self.head.feature_layers

    def run_for(self, run: RunConfig) -> RunConfig:
        """The run as given: the tree, the gate and the retuner are the head's."""
        return run

    def label(self, run: RunConfig) -> str:
        return run.tree.label()

    def begin(self, prompt_ids: list[int], run: RunConfig, stops: frozenset[int], positions: int,
              round_entries: int) -> None:
        """A new run: the cache emptied and sized. The head reads the run's context from `extend`'s pairs alone."""
        self.reset()
        self.reserve(positions, round_entries)

    def reset(self) -> None:
        self.cache = self.static.kv if self.static is not None else DraftKV()
        self.length = 0
        self.last_g: torch.Tensor | None = None  # [H]
        self._mask: torch.Tensor | None = None  # [k, capacity] additive, 0 outside a round's tree block
        self.hot: HotVocab | None = None  # this run's hot vocabulary table (a chain with `hot_vocab`)
        if self.static is not None:
            self.static.clear_hot()
        self._context: list[torch.Tensor] = []  # token ids extended since the table last took them
        self._seen: list[int] = []  # every token id of this run's context the table has been offered

    def reserve(self, positions: int, round_entries: int = 0) -> None:
        """Size the buffers for `positions` draft positions (prompt + max new tokens + tree) up front;
        round_entries: the entries a round's drafting writes past them (the static pools hold those too)."""
        need = positions + round_entries if self.static_mode else positions
        rope = getattr(self.head, "rope", None)
        if rope is not None:
            rope.reserve(need, self._fc_weight())
        if not self.static_mode:
            self.cache.capacity = max(self.cache.capacity, need)
        elif self.static is None or self.static.capacity < need:
            self.static = StaticDraft(self.head, pool_size(need), self.graphs)  # new pools, no graphs yet
            self.cache = self.static.kv

    def _fc_weight(self) -> torch.Tensor:
        """The head's fc weight (an empty buffer where the head has no fc): it carries the head's device and dtype."""
        weight = self.head.fc.weight
        assert isinstance(weight, torch.Tensor)
        return weight

    @property
    def device(self) -> torch.device:
        return self._fc_weight().device

    @property
    def dtype(self) -> torch.dtype:
        return self._fc_weight().dtype

    def _const(self, name: str, make):
        key = (name, self.device, self.dtype)
        if key not in self._consts:
            self._consts[key] = make()
        return self._consts[key]

    def _positions(self, start: int, n: int) -> torch.Tensor:
        """Positions start..start+n-1 as a view of one cached range (no op launch in the common case)."""
        table = self._consts.get(("positions", self.device))
        if table is None or table.shape[0] < start + n:
            table = torch.arange(max(2 * (start + n), 1024), device=self.device)
            self._consts[("positions", self.device)] = table
        return table[start:start + n]

    @torch.inference_mode()
    def extend(self, features: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """features [n, F] of accepted positions, tokens [n] = the token that followed each of them.
        n > 1 attends causally over the new block (the head builds that mask). Returns the draft outputs [n, H]."""
        n = tokens.shape[0]
        positions = self._positions(self.length, n)  # [n]
        self._context.append(tokens)  # as given: the engine's are on the host, so the table reads them for free
        features, tokens = features.to(self.device, self.dtype), tokens.to(self.device)
        with one_call():
            if self.static is None:
                g = self.head(features, tokens, positions, self.cache, None, from_target=True)  # [n, H]
            else:
                g = self.static.extend(features, tokens, self.length)  # [n, H]
        self.length += n
        self.last_g = g[-1]
        return g

    @torch.inference_mode()
    def draft(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        with one_call():  # the head's fused weights are checked once for the whole round
            if cfg.top_k == 1:
                return self._chain(root_token, min(cfg.depth, cfg.total_tokens - 1), cfg.stop_below, cfg.hot_vocab)
            return self._tree(root_token, cfg)

    def _round_inputs(self, key: tuple, root_token: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The static inputs of a whole-draft graph `key`, set for this round: the draft output to start from [1, H],
        the start slot [1] and the root token [1]."""
        x = self._on_static().inputs(key, lambda: (torch.zeros_like(self._last()),
                                             *torch.zeros(2, 1, dtype=torch.long, device=self.device)))
        x[0].copy_(self._last())
        x[1].fill_(self.length)
        x[2].fill_(root_token)
        return x

    def _depth(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, k: int, start: int,
               block: torch.Tensor | None = None, pick=None):
        """One draft depth over the frontier: g [n, H] and its top-k logp, ids [n, k]. The n new entries take
        slots start..start+n-1; block: their additive rows over this round's tree entries and themselves (a
        tree depth; the prefix before them is visible), None for a chain step (causal); pick: the round's top-k
        (`_pick`; None: the head's)."""
        pick = pick or self.head.topk
        if self.static is None:
            mask = None if block is None else self._tree_mask(self.length, block)
            g = self.head(hidden, tokens, positions, self.cache, mask)  # [n, H]
            return (g, *pick(g, k))
        n = tokens.shape[0]
        mask = self.static.causal_mask(start, n)  # [1, 1, n, cap] (a static tree depth: `StaticDraft.tree_depth`)
        return self.static.depth(hidden, tokens, positions, self._positions(start, n), mask, k, pick)

    def _tree_mask(self, prefix: int, block: torch.Tensor) -> torch.Tensor:
        """Write the additive tree block [k, m] after the prefix into the persistent mask buffer and return
        the view [1, 1, k, prefix + m] (the prefix columns are zero: every draft row sees the whole prefix)."""
        k, m = block.shape
        buf = self._mask
        if buf is None or buf.shape[0] != k or buf.shape[1] < prefix + m or buf.dtype != self.dtype:
            width = max(2 * (prefix + m), self.cache.capacity)
            buf = self._mask = torch.zeros(k, width, dtype=self.dtype, device=self.device)
        buf[:, prefix:prefix + m].copy_(block)
        return buf[None, None, :, :prefix + m]

    def _tree(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        if self.static is None:
            return select_tree(root_token, self.candidates(cfg), cfg.total_tokens - 1)
        return self._static_tree(root_token, cfg)

    def _static_tree(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        """The whole expansion and its selection in one call (one CUDA graph on a GPU): the inputs are the draft
        output to start from, the start slot and the root token, every depth's positions, slots and mask come
        from the start slot on the device, and the tree (its ancestor mask and host pack too) is the output."""
        st = self._on_static()
        st.check(self.length + (cfg.depth - 1) * cfg.top_k)
        key = ("tree", cfg.depth, cfg.top_k, cfg.total_tokens)
        x = self._round_inputs(key, root_token)

        def run():
            tree = select_tree(x[2], self._expand(cfg, x[0], x[1]), cfg.total_tokens - 1)
            return tree.tokens, tree.depths, tree.mask, tree.pack

        tokens, depths, mask, pack = st.replayed(key, run)
        return DraftTree(tokens=tokens, depths=depths, mask=mask, is_chain=False, pack=pack)

    @torch.inference_mode()
    def candidates(self, cfg: TreeConfig) -> Candidates:
        """Every node the EAGLE-2 expansion proposes for cfg's depth and top-k (before the total_tokens
        selection), depth-major; the candidates of a shallower depth are a prefix of these."""
        start = None if self.static is None else torch.full((1,), self.length, device=self.device)
        return self._expand(cfg, self._last(), start)

    def _expand(self, cfg: TreeConfig, last_g: torch.Tensor, start: torch.Tensor | None) -> Candidates:
        """The expansion from the draft output last_g [1, H]; start: the static path's start slot [1] (every
        position, slot and mask computed from it on the device), None on the growing path."""
        k, head, dev, prefix = cfg.top_k, self.head, self.device, self.length
        logp, ids = head.topk(last_g, k)  # [1, k], [1, k]
        hidden_min = torch.finfo(self.dtype).min
        eye = self._const(f"eye{k}", lambda: torch.full((k, k), hidden_min, dtype=self.dtype, device=dev)
                          .fill_diagonal_(0.0))  # [k, k] additive: each row sees itself
        tokens, scores, logps, frontiers = [ids[0]], [logp[0]], [logp[0]], []
        frontier = self._const(f"arange{k}", lambda: torch.arange(k, device=dev))  # candidate ids to expand
        frontier_scores, frontier_tokens = logp[0], ids[0]  # [k], [k]
        frontier_hidden = last_g.expand(k, -1)  # [k, H]
        parent_rows = eye[:, :0]  # [k, added] additive rows of the frontier over the tree entries so far
        added, offset = 0, k
        for step in range(2, cfg.depth + 1):
            block = torch.cat([parent_rows, eye], 1)  # [k, added+k]
            if start is None:
                positions = self._positions(prefix + step - 2, 1).expand(k)  # siblings share a position
                g, logp, ids = self._depth(frontier_hidden, frontier_tokens, positions, k, prefix + added,
                                           block)  # [k, H], [k, k], [k, k]
            else:
                g, logp, ids = self._on_static().tree_depth(frontier_hidden, frontier_tokens, start, step, added,
                                                            block, k)
            added += k
            cum = frontier_scores[:, None] + logp  # [k, k]
            tokens.append(ids.reshape(-1))
            scores.append(cum.reshape(-1))
            logps.append(logp.reshape(-1))
            frontiers.append(frontier)
            if step == cfg.depth:
                break
            top = torch.topk(cum.reshape(-1), k)
            local_parent = top.indices // k  # [k] which fed node each new frontier node hangs from
            frontier = offset + top.indices
            frontier_scores = top.values
            frontier_tokens = ids.reshape(-1)[top.indices]  # [k]
            frontier_hidden = g[local_parent]  # [k, H]
            parent_rows = block[local_parent]  # [k, added]
            offset += k * k
        if added and self.static is None:
            self.cache.crop(-added)  # drop the tree entries; the stable prefix stays
            assert self._mask is not None  # the growing cache's tree depths set it
            self._mask[:, prefix:prefix + added].zero_()
        return self._candidates(cfg, tokens, scores, logps, frontiers)

    def _candidates(self, cfg: TreeConfig, tokens, scores, logps, frontiers) -> Candidates:
        k, dev = cfg.top_k, self.device
        depths = self._const(f"depths{k}/{cfg.depth}", lambda: torch.cat(
            [torch.ones(k, dtype=torch.long, device=dev)]
            + [torch.full((k * k,), d, dtype=torch.long, device=dev) for d in range(2, cfg.depth + 1)]))
        roots = self._const(f"roots{k}", lambda: torch.full((k,), -1, dtype=torch.long, device=dev))
        parents = [roots] + ([torch.stack(frontiers).repeat_interleave(k, dim=1).reshape(-1)] if frontiers else [])
        return Candidates(tokens=torch.cat(tokens), parents=torch.cat(parents), depths=depths,
                          scores=torch.cat(scores), logp=torch.cat(logps))
