"""A KV cache for the engines: transformers' own `DynamicCache` API over preallocated buffers.

`DynamicLayer` appends with `torch.cat` on every forward (a fresh allocation and a copy of the whole
cache, per layer, per forward) and crops by slicing. Here each layer owns a buffer that doubles when
full: an update writes the new block in place and hands back a view of the filled part, a crop only
shortens the view. Inference only (in-place writes); training keeps `DynamicCache`.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

__all__ = ["BufferCache", "BufferLayer"]

INITIAL_CAPACITY = 256


class BufferLayer(DynamicLayer):
    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        b, h, _, d = key_states.shape
        self._keys = key_states.new_empty(b, h, INITIAL_CAPACITY, d)  # [b, kv, cap, d]
        self._values = value_states.new_empty(b, h, INITIAL_CAPACITY, value_states.shape[-1])
        self.keys, self.values = self._keys[..., :0, :], self._values[..., :0, :]
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.keys.shape[-2]
        end = start + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            self._grow(max(end, 2 * self._keys.shape[-2]))
        self._keys[..., start:end, :].copy_(key_states)  # [b, kv, n, d]
        self._values[..., start:end, :].copy_(value_states)
        self.keys, self.values = self._keys[..., :end, :], self._values[..., :end, :]  # views [b, kv, end, d]
        return self.keys, self.values

    def _grow(self, capacity: int) -> None:
        length = self.keys.shape[-2]
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            new = old.new_empty(*old.shape[:2], capacity, old.shape[-1])  # [b, kv, capacity, d]
            new[..., :length, :].copy_(old[..., :length, :])
            setattr(self, name, new)
        self.keys, self.values = self._keys[..., :length, :], self._values[..., :length, :]

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative count of tokens to remove")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        length = self.keys.shape[-2] + tokens_to_remove
        self.keys, self.values = self._keys[..., :length, :], self._values[..., :length, :]

    def reset(self) -> None:
        if self.is_initialized:
            self.keys, self.values = self._keys[..., :0, :], self._values[..., :0, :]


class BufferCache(DynamicCache):
    """`DynamicCache` whose layers are `BufferLayer`s (batch size fixed by the first update)."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=BufferLayer)
