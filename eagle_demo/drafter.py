"""The draft side of a round: extend the draft's cache with accepted (feature, token) pairs and grow the
EAGLE-2 dynamic tree from the last accepted position.

Draft positions: the pair at position i is (target feature_i, token_{i+1}). After `extend` the cache
holds `length` stable positions and `last_g` is the draft output at the last one, a prediction of the
next feature whose logits propose depth-1 tokens.
"""

from __future__ import annotations

import torch

from .config import TreeConfig
from .drafts.base import DraftHead
from .kv import BufferCache
from .target import tree_attention_mask
from .tree import Candidates, DraftTree, select_tree

__all__ = ["Drafter"]


class Drafter:
    def __init__(self, head: DraftHead):
        self.head = head
        self.reset()

    def reset(self) -> None:
        self.cache = BufferCache()
        self.length = 0
        self.last_g: torch.Tensor | None = None  # [H]

    @property
    def device(self) -> torch.device:
        return self.head.fc.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.head.fc.weight.dtype

    @torch.inference_mode()
    def extend(self, features: torch.Tensor, tokens: torch.Tensor) -> None:
        """features [n, F] of accepted positions, tokens [n] = the token that followed each of them."""
        n = tokens.shape[0]
        positions = torch.arange(self.length, self.length + n, device=self.device)  # [n]
        mask = None
        if n > 1:
            causal = torch.ones(n, n, dtype=torch.bool, device=self.device).tril()  # [n, n]
            mask = tree_attention_mask(self.length, causal, self.dtype)  # [1, 1, n, P+n]
        g = self.head(features.to(self.device, self.dtype), tokens.to(self.device), positions, self.cache,
                      mask, from_target=True)  # [n, H]
        self.length += n
        self.last_g = g[-1]

    @torch.inference_mode()
    def draft(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        k, head, dev = cfg.top_k, self.head, self.device
        logp, ids = head.topk(self.last_g[None], k)  # [1, k], [1, k]
        tokens, parents, depths = [ids[0]], [torch.full((k,), -1, device=dev)], [torch.ones(k, device=dev)]
        scores, logps = [logp[0]], [logp[0]]
        frontier = torch.arange(k, device=dev)  # candidate indices of the nodes to expand next
        frontier_scores = logp[0]  # [k]
        frontier_tokens = ids[0]  # [k]
        frontier_hidden = self.last_g[None].expand(k, -1)  # [k, H]
        parent_rows = torch.zeros(k, 0, dtype=torch.bool, device=dev)  # [k, added]
        added, offset = 0, k
        for step in range(2, cfg.depth + 1):
            n = frontier.shape[0]
            block = torch.cat([parent_rows, torch.eye(n, dtype=torch.bool, device=dev)], 1)  # [n, added+n]
            # top-k 1: the single frontier node's tree keys are all its ancestors, so causal attention is the
            # same; decided on the host (reading `block` would wait for the device every step)
            chain = n == 1
            mask = None if chain else tree_attention_mask(self.length, block, self.dtype)  # [1, 1, n, P+added+n]
            positions = torch.full((n,), self.length + step - 2, device=dev)  # siblings share a position
            g = head(frontier_hidden, frontier_tokens, positions, self.cache, mask)  # [n, H]
            added += n
            logp, ids = head.topk(g, k)  # [n, k], [n, k]
            cum = frontier_scores[:, None] + logp  # [n, k]
            tokens.append(ids.reshape(-1))
            parents.append(frontier.repeat_interleave(k))
            depths.append(torch.full((n * k,), step, device=dev))
            scores.append(cum.reshape(-1))
            logps.append(logp.reshape(-1))
            top = torch.topk(cum.reshape(-1), min(k, n * k))
            local_parent = top.indices // k  # [k] which fed node each new frontier node hangs from
            frontier = offset + top.indices
            frontier_scores = top.values
            frontier_tokens = ids.reshape(-1)[top.indices]  # [k]
            frontier_hidden = g[local_parent]  # [k, H]
            parent_rows = block[local_parent]  # [k, added]
            offset += n * k
        if added:
            self.cache.crop(-added)  # drop the tree entries; the stable prefix stays
        cand = Candidates(
            tokens=torch.cat(tokens).cpu(), parents=torch.cat(parents).cpu(), depths=torch.cat(depths).long().cpu(),
            scores=torch.cat(scores).float().cpu(), logp=torch.cat(logps).float().cpu(),
        )
        return select_tree(root_token, cand, cfg.total_tokens - 1)
