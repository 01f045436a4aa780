"""A KV cache for the engines: transformers' own `DynamicCache` API over preallocated buffers.

`DynamicLayer` appends with `torch.cat` on every forward (a fresh allocation and a copy of the whole
cache, per layer, per forward) and crops by slicing. Here each layer owns a buffer that doubles when
full: an update writes the new block in place and hands back a view of the filled part, a crop only
shortens the view. Inference only (in-place writes); training keeps `DynamicCache`.

Given the model's layer count, every layer with the first layer's shape, dtype and device keeps its keys
and values in one pool [layers, 2, b, kv, capacity, d], so compacting the cache after a round is a single
gather and a single copy for all layers (`compact`). Capacity starts at what the run needs (`capacity`,
e.g. prompt + max new tokens + tree), never at the model's full context.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

__all__ = ["BufferCache", "BufferLayer"]

INITIAL_CAPACITY = 256


class BufferLayer(DynamicLayer):
    def __init__(self, owner: "BufferCache | None" = None, index: int = 0):
        super().__init__()
        self.owner = owner
        self.index = index
        self.pooled = False

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True
        if self.owner is not None and self.owner.join_pool(self, key_states, value_states):
            return
        b, h, _, d = key_states.shape
        capacity = self.owner.capacity if self.owner is not None else INITIAL_CAPACITY
        self._keys = key_states.new_empty(b, h, capacity, d)  # [b, kv, cap, d]
        self._values = value_states.new_empty(b, h, capacity, value_states.shape[-1])
        self.keys, self.values = self._keys[..., :0, :], self._values[..., :0, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start = self.keys.shape[-2]
        end = start + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            capacity = max(end, 2 * self._keys.shape[-2])
            self.owner.grow_pool(capacity) if self.pooled else self._grow(capacity)
        self._keys[..., start:end, :].copy_(key_states)  # [b, kv, n, d]
        self._values[..., start:end, :].copy_(value_states)
        self.keys, self.values = self._keys[..., :end, :], self._values[..., :end, :]  # views [b, kv, end, d]
        return self.keys, self.values

    def point(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Use new backing buffers [b, kv, cap, d] (already holding this layer's filled part)."""
        length = self.keys.shape[-2] if self.keys is not None else 0
        self._keys, self._values = keys, values
        self.keys, self.values = keys[..., :length, :], values[..., :length, :]

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
    """`DynamicCache` whose layers are `BufferLayer`s (batch size fixed by the first update).

    num_layers > 0 turns on the shared pool; capacity is the initial number of positions per layer."""

    def __init__(self, num_layers: int = 0, capacity: int | None = None) -> None:
        Cache.__init__(self, layer_class_to_replicate=BufferLayer)
        self.layer_class_to_replicate = self._new_layer
        self.num_layers = num_layers
        self.capacity = capacity or INITIAL_CAPACITY
        self.pool: torch.Tensor | None = None  # [L, 2, b, kv, cap, d]

    def _new_layer(self) -> BufferLayer:
        return BufferLayer(self, len(self.layers))

    def join_pool(self, layer: BufferLayer, key: torch.Tensor, value: torch.Tensor) -> bool:
        if self.num_layers <= 0 or key.shape != value.shape or layer.index >= self.num_layers:
            return False
        b, h, _, d = key.shape
        if self.pool is None:
            if layer.index != 0:
                return False
            self.pool = key.new_empty(self.num_layers, 2, b, h, self.capacity, d)  # [L, 2, b, kv, cap, d]
        p = self.pool
        if p.shape[2:4] + p.shape[5:] != (b, h, d) or p.dtype != key.dtype or p.device != key.device:
            return False
        layer.pooled = True
        layer.keys = None
        layer.point(p[layer.index, 0], p[layer.index, 1])
        return True

    def grow_pool(self, capacity: int) -> None:
        old = self.pool
        new = old.new_empty(*old.shape[:4], capacity, old.shape[-1])  # [L, 2, b, kv, capacity, d]
        filled = max(layer.keys.shape[-2] for layer in self.layers if layer.pooled)
        new[..., :filled, :].copy_(old[..., :filled, :])
        self.pool = new
        for layer in self.layers:
            if layer.pooled:
                layer.point(new[layer.index, 0], new[layer.index, 1])

    @property
    def fully_pooled(self) -> bool:
        return self.pool is not None and len(self.layers) == self.num_layers and all(
            getattr(layer, "pooled", False) for layer in self.layers)

    def compact(self, start: int, src: torch.Tensor) -> None:
        """Move positions `src` (absolute, ascending, >= start) to start, start+1, ... in every layer;
        one gather and one copy when every layer is in the pool. Lengths are left to `crop`."""
        m = src.shape[0]
        if self.fully_pooled:
            self.pool[..., start:start + m, :] = self.pool[..., src, :]  # [L, 2, b, kv, m, d]
            return
        for layer in self.layers:
            idx = src.to(layer.keys.device)  # each layer's cache lives where the layer runs
            layer.keys[..., start:start + m, :] = layer.keys[..., idx, :]  # [1, kv, m, d]
            layer.values[..., start:start + m, :] = layer.values[..., idx, :]
