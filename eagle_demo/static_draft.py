"""Static-shape drafting: the draft head over fixed K/V pools, so every draft forward of n tokens has the same
shapes and addresses and a draft depth (the head's forward and its top-k) can be captured once as a CUDA
graph and replayed, as `static.StaticTarget` does for the target.

- `StaticDraftKV` holds one zeroed pool per layer [1, kv, capacity, d], sized to the run (prompt + max new
  tokens + tree + the entries a round's drafting writes). A head call writes its n entries at `slots` (a device
  tensor the drafter sets) and attends over the whole pool under a full-width additive mask [1, 1, n, capacity]:
  the committed prefix and the round's own tree relation are visible, everything else (stale or unused) is not.
  Nothing is cropped: the drafter's `length` and the masks decide what counts.
- Every input of a captured depth lives in a per-size static buffer (hidden, tokens, positions, slots, mask);
  outputs of a replay are the graph's own buffers, rewritten by its next replay, so the drafter copies what it
  keeps. On CUDA (`graphs=True`) a size is captured on its second use; any capture failure falls back to eager
  for good. On a CPU the same static path runs eagerly, which is how the tests check it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .hot_vocab import HotVocab
from .static import capture_graph

__all__ = ["StaticDraft", "StaticDraftKV"]


class StaticDraftKV:
    """The draft's K/V in fixed per-layer pools (the `update` call the heads make, plus `slots`)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.slots: torch.Tensor | None = None  # [n] long, set by the drafter before each head call

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args, **kwargs):
        """key/value [1, kv, n, d] written at `slots` -> the layer's whole pools [1, kv, capacity, d]."""
        while len(self.keys) <= layer_idx:
            self.keys.append(key.new_zeros(*key.shape[:2], self.capacity, key.shape[-1]))
            self.values.append(value.new_zeros(*value.shape[:2], self.capacity, value.shape[-1]))
        k, v = self.keys[layer_idx], self.values[layer_idx]
        k.index_copy_(2, self.slots, key)  # [1, kv, n, d] into [1, kv, cap, d]
        v.index_copy_(2, self.slots, value)
        return k, v

    def crop(self, tokens_to_remove: int) -> None:
        """Nothing to drop: entries past the drafter's length are masked out and later overwritten."""


@dataclass
class _Buffers:
    """Static inputs of one draft forward size n (and top-k width)."""

    hidden: torch.Tensor  # [n, H]
    tokens: torch.Tensor  # [n] long
    positions: torch.Tensor  # [n] long
    slots: torch.Tensor  # [n] long
    mask: torch.Tensor  # [1, 1, n, capacity] additive


class StaticDraft:
    def __init__(self, head, capacity: int, graphs: bool):
        self.head, self.capacity = head, capacity
        weight = head.fc.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.kv = StaticDraftKV(capacity)
        self.columns = torch.arange(capacity, device=self.device)  # [cap]
        self.hidden_min = torch.finfo(self.dtype).min
        self.graphs_on = graphs and self.device.type == "cuda"
        self.buffers: dict[tuple[int, int, int], _Buffers] = {}  # (frontier size, top-k, hot vocabulary)
        self.graphs: dict[tuple[int, int, int], tuple] = {}
        self.seen: dict[tuple[int, int, int], int] = {}
        self.hot_tables: dict[int, HotVocab] = {}
        self.capture_error: str | None = None

    def _check(self, end: int) -> None:
        if end > self.capacity:
            raise ValueError(f"the static draft cache holds {self.capacity} positions; this round needs {end} "
                             "(raise the run's reserve or turn the static path off)")

    def causal_mask(self, start: int, n: int) -> torch.Tensor:
        """[1, 1, n, cap]: new entry i (slot start + i) sees slots 0..start + i."""
        self._check(start + n)
        rows = self.columns[:n] + start  # [n] the new entries' slots
        visible = self.columns[None] <= rows[:, None]  # [n, cap]
        return torch.zeros(n, self.capacity, dtype=self.dtype, device=self.device).masked_fill_(
            ~visible, self.hidden_min)[None, None]

    def tree_mask(self, prefix: int, block: torch.Tensor) -> torch.Tensor:
        """[1, 1, k, cap]: the prefix is visible, the additive block [k, m] sits at slots prefix..prefix+m-1."""
        k, m = block.shape
        self._check(prefix + m)
        mask = torch.full((k, self.capacity), self.hidden_min, dtype=self.dtype, device=self.device)  # [k, cap]
        mask[:, :prefix] = 0.0
        mask[:, prefix:prefix + m] = block
        return mask[None, None]

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
                mask: torch.Tensor, from_target: bool) -> torch.Tensor:
        """One eager head call over the pools (the extend after a round: its size varies, it is not captured)."""
        self.kv.slots = slots
        return self.head(hidden, tokens, positions, self.kv, mask, from_target=from_target)  # [n, H]

    def depth(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
              mask: torch.Tensor, k: int, hot: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One draft depth: the head on the frontier and its top-k (over the first `hot` ids when hot > 0): g [n, H],
        logp [n, k], ids [n, k]. The results are the drafter's to keep (a replay's own buffers are copied out)."""
        key = (tokens.shape[0], k, hot)
        x = self._buffers(key, hidden)
        x.hidden.copy_(hidden)
        x.tokens.copy_(tokens)
        x.positions.copy_(positions)
        x.slots.copy_(slots)
        x.mask.copy_(mask)
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.graphs_on and self.seen[key] >= 2 and key not in self.graphs:
            self._capture(key, x)
        if key in self.graphs:
            graph, out = self.graphs[key]
            graph.replay()
            return tuple(t.clone() for t in out)
        return self._run(x, k, hot)

    def _buffers(self, key: tuple[int, int, int], like: torch.Tensor) -> _Buffers:
        if key not in self.buffers:
            n, d = key[0], self.device
            self.buffers[key] = _Buffers(hidden=like.new_zeros(n, like.shape[-1]),
                                         tokens=torch.zeros(n, dtype=torch.long, device=d),
                                         positions=torch.zeros(n, dtype=torch.long, device=d),
                                         slots=torch.zeros(n, dtype=torch.long, device=d),
                                         mask=torch.zeros(1, 1, n, self.capacity, dtype=self.dtype, device=d))
        return self.buffers[key]

    def _run(self, x: _Buffers, k: int, hot: int = 0):
        self.kv.slots = x.slots
        g = self.head(x.hidden, x.tokens, x.positions, self.kv, x.mask)  # [n, H]
        logp, ids = self.pick(hot)(g, k)  # [n, k], [n, k]
        return g, logp, ids

    def pick(self, hot: int):
        """The head's top-k, or over a hot vocabulary of the first `hot` ids alone: a replayed graph keeps the
        table it was captured with, so the run's context ids are not added (`Drafter._pick`)."""
        if not hot:
            return self.head.topk
        if hot not in self.hot_tables:
            self.hot_tables[hot] = HotVocab(self.head, hot, room=0)
        return self.hot_tables[hot].topk

    def _capture(self, key: tuple[int, int, int], x: _Buffers) -> None:
        try:
            self.graphs[key] = capture_graph(lambda: self._run(x, key[1], key[2]), self.device)
        except Exception as exc:  # noqa: BLE001 - any capture failure: eager from now on
            self.graphs_on = False
            self.capture_error = f"{type(exc).__name__}: {exc}"
