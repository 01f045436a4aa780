"""A draft shape as each serving engine's flags (the Deploy tab, after the shape explorer's "use this shape").

- SGLang: `--speculative-num-steps` (draft depth), `--speculative-eagle-topk` (top-k per step, 1 for a chain) and
  `--speculative-num-draft-tokens` (tokens verified per round, the root included), the same dynamic EAGLE-2 tree
  as here (python/sglang/srt/server_args.py).
- vLLM: `num_speculative_tokens` in `--speculative-config`. A chain is `num_speculative_tokens` = its depth. vLLM
  has no dynamic tree; its `speculative_token_tree` (vllm/config/speculative.py, SpeculativeConfig: a list of
  paths such as [(0,), (1,), (0, 0)], child ranks from the root, breadth-first; without it a chain of
  num_speculative_tokens) is a static tree, run by the TREE_ATTN attention backend, with num_speculative_tokens
  its node count. A dynamic shape becomes the static tree of the same size that keeps the nodes with the highest
  expected acceptance under the rank model (`retune.rank_model`: P(rank-r child accepted) by depth), measured on
  this pair when the automatic tree has calibrated, else a generic fall-off (RANK_PRIOR).
"""

from __future__ import annotations

import heapq
import json

from ..common.config import TreeConfig

__all__ = ["shape_flags", "static_tree", "RANK_PRIOR"]

RANK_PRIOR = (0.6, 0.15, 0.06, 0.03, 0.02, 0.01, 0.01, 0.01, 0.005, 0.005)  # P(rank-r child accepted), any depth


def static_tree(tree: TreeConfig, rank: tuple[tuple[float, ...], ...] | None = None) -> list[tuple[int, ...]]:
    """The total - 1 paths (child ranks) of highest expected acceptance within the shape's depth and top-k,
    breadth-first as vLLM sorts them. rank[d-1][r]: P(the rank-r child is accepted | its parent was), depth d."""
    def rate(depth: int, r: int) -> float:
        row = rank[min(depth, len(rank)) - 1] if rank else RANK_PRIOR
        return row[r] if r < len(row) else 0.0

    nodes = tree.total_tokens - 1
    heap = [(-rate(1, r), (r,)) for r in range(tree.top_k)]
    heapq.heapify(heap)
    chosen: list[tuple[int, ...]] = []
    while heap and len(chosen) < nodes:
        value, path = heapq.heappop(heap)
        chosen.append(path)
        if len(path) < tree.depth:
            for r in range(tree.top_k):
                heapq.heappush(heap, (value * rate(len(path) + 1, r), path + (r,)))
    return sorted(chosen, key=lambda p: (len(p), p))


def shape_flags(tree: TreeConfig, rank: tuple[tuple[float, ...], ...] | None = None) -> dict:
    """{"sglang": flags, "vllm": speculative-config fields, "notes": [...]} for a draft shape."""
    topk = 1 if tree.is_chain else tree.top_k
    tokens = tree.depth + 1 if tree.is_chain else tree.total_tokens
    sglang = (f"--speculative-num-steps {tree.depth} --speculative-eagle-topk {topk} "
              f"--speculative-num-draft-tokens {tokens}")
    notes = []
    if tree.is_chain:
        vllm: dict = {"num_speculative_tokens": tree.depth}
    else:
        paths = static_tree(tree, rank)
        vllm = {"num_speculative_tokens": len(paths), "speculative_token_tree": str(paths)}
        notes.append("vLLM's tree is static (speculative_token_tree, vllm/config/speculative.py; with "
                     "--attention-backend TREE_ATTN): these paths keep the shape's "
                     f"{len(paths)} nodes of highest expected acceptance "
                     + ("measured on this pair" if rank else "under a generic fall-off by rank")
                     + "; EAGLE-2's dynamic tree (here and in SGLang) picks its nodes per round")
    if tree.stops or tree.hot_vocab:
        notes.append("the chain stop and the hot vocabulary are this playground's; both engines draft the whole "
                     "chain over the whole vocabulary")
    return {"sglang": sglang, "vllm": vllm, "vllm_json": json.dumps(vllm), "notes": notes}
