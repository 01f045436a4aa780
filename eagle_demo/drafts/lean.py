"""The draft head's hot path, written for few op launches: attention calls SDPA directly on the draft's own
preallocated KV buffers with a precomputed rotary table; the projections are fused into one matmul each.

Fusions (exact algebra, only float rounding differs from the stock `transformers` layer):
- q, k, rotate_half(q), rotate_half(k) and v come from one linear: rotate_half is a fixed signed permutation
  of each head's rows, so rotate_half(W x + b) = (R W) x + R b. RoPE is then q*cos + rot(q)*sin on the q|k
  block at once, with cos/sin tiled over the heads in the table.
- gate and up of the MLP are one linear.
Fused weights are cached per module and rebuilt when a weight changes (its version counter moves), checked
once per drafter call (`one_call`) rather than once per draft depth; with gradients enabled (training) they are
rebuilt on every call so gradients reach the original parameters.
"""

from __future__ import annotations

import contextlib
import itertools
import threading

import torch
import torch.nn.functional as F
from torch import nn

from ..target.cpu_layout import same_layout
from .base import StockModule, embedding, linear

__all__ = ["DraftKV", "RopeTable", "attention", "embedding", "linear", "mlp", "one_call", "rms_norm"]

INITIAL_CAPACITY = 256


class DraftKV:
    """Per-layer K/V buffers [b, kv_heads, capacity, head_dim] with a length each; the `Cache` calls the
    heads and the drafter use (update, crop, get_seq_length). Capacity doubles when full."""

    def __init__(self, capacity: int = INITIAL_CAPACITY):
        self.capacity = capacity
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.lengths: list[int] = []

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args, **kwargs):
        """key/value [b, kv, n, d] -> the layer's filled keys/values [b, kv, len+n, d] (views)."""
        while len(self.keys) <= layer_idx:
            self.keys.append(key.new_empty(*key.shape[:2], self.capacity, key.shape[-1]))
            self.values.append(value.new_empty(*value.shape[:2], self.capacity, value.shape[-1]))
            self.lengths.append(0)
        start = self.lengths[layer_idx]
        end = start + key.shape[-2]
        if end > self.keys[layer_idx].shape[-2]:
            self._grow(layer_idx, max(end, 2 * self.keys[layer_idx].shape[-2]))
        k, v = self.keys[layer_idx], self.values[layer_idx]
        k[:, :, start:end].copy_(key)  # [b, kv, n, d]
        v[:, :, start:end].copy_(value)
        self.lengths[layer_idx] = end
        return k[:, :, :end], v[:, :, :end]

    def _grow(self, layer_idx: int, capacity: int) -> None:
        n = self.lengths[layer_idx]
        for store in (self.keys, self.values):
            old = store[layer_idx]
            new = old.new_empty(*old.shape[:2], capacity, old.shape[-1])  # [b, kv, capacity, d]
            new[:, :, :n].copy_(old[:, :, :n])
            store[layer_idx] = new

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last -tokens_to_remove entries of every layer (a negative count, as `DynamicCache.crop`)."""
        if tokens_to_remove > 0:
            raise ValueError("crop takes a negative count of tokens to remove")
        self.lengths = [max(0, n + tokens_to_remove) for n in self.lengths]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.lengths[layer_idx] if layer_idx < len(self.lengths) else 0


class RopeTable:
    """cos/sin of the head's rotary embedding for positions 0..capacity-1, tiled over the q|k heads:
    table [capacity, 2, (heads + kv_heads) * head_dim] (index 0 cos, 1 sin). Built by the stock rotary module,
    so every RoPE variant it supports (scaling types, attention scaling) comes out the same."""

    def __init__(self, owner: StockModule, heads: int):
        self.owner = [owner]  # the head (not registered as a submodule); its `rotary_emb` may be replaced
        self.heads = heads
        self.table: torch.Tensor | None = None
        self.key: tuple = ()
        self.checked = 0  # the drafter call (`one_call`) in which the key was last checked

    def _key(self, like: torch.Tensor) -> tuple:
        rotary = self.owner[0].rotary_emb
        freq = getattr(rotary, "inv_freq", None)
        return (id(rotary), _version_of(freq), like.device, like.dtype)

    def reserve(self, positions: int, like: torch.Tensor) -> None:
        t, key = self.table, self._key(like)
        if t is not None and t.shape[0] >= positions and key == self.key:
            return
        capacity = max(positions, 2 * (t.shape[0] if t is not None else INITIAL_CAPACITY // 2))
        pos = torch.arange(capacity, device=like.device)[None]  # [1, cap]
        with torch.inference_mode(False), torch.no_grad():
            cos, sin = self.owner[0].rotary_emb(like.new_zeros(1, 1, 1), pos)  # [1, cap, hd]
        self.table = torch.stack([cos[0], sin[0]], 1).repeat(1, 1, self.heads).to(like.dtype)  # [cap, 2, heads*hd]
        self.key = key

    def __call__(self, positions: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [n] -> cos, sin [n, heads*hd] (the table grows when training asks past it)."""
        call = _call()
        if not call or self.checked != call:
            if self.table is None or self._key(like) != self.key:
                self.reserve(self.table.shape[0] if self.table is not None else INITIAL_CAPACITY, like)
            self.checked = call
        assert self.table is not None  # reserved above
        rows = self.table[positions]  # [..., n, 2, heads*hd]
        return rows[..., 0, :], rows[..., 1, :]


def _version_of(t: torch.Tensor | None) -> tuple | None:
    """What changes when `t` is replaced or written in place (an inference-mode tensor has no version counter)."""
    if t is None:
        return None
    try:
        return (id(t), t.data_ptr(), t._version)
    except RuntimeError:
        return (id(t), t.data_ptr(), None)


def _rotate_rows(w: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Rows of W (or entries of b) such that the output is rotate_half of W's output per head."""
    shape = w.shape
    x = w.reshape(-1, head_dim, *shape[1:])  # [heads, hd, ...]
    half = head_dim // 2
    return torch.cat([-x[:, half:], x[:, :half]], 1).reshape(shape)


def _versions(*tensors) -> tuple:
    return tuple((t._version, t.data_ptr(), t.dtype, t.device) for t in tensors if t is not None)


_CALLS = itertools.count(1)
_LOCAL = threading.local()  # .call: nonzero inside `one_call`, the id of this thread's drafter call under way


def _call() -> int:
    return getattr(_LOCAL, "call", 0)


@contextlib.contextmanager
def one_call():
    """One drafter call (an extend or a round's draft): no weight changes inside it, so each fused weight is checked
    against its sources once per call instead of once per draft depth (the checks cost about 20 us a depth).
    Per thread: a generation in another thread neither shares nor ends this one's call."""
    outer = _call()
    _LOCAL.call = outer or next(_CALLS)
    try:
        yield
    finally:
        _LOCAL.call = outer


def _checked(module: nn.Module, name: str):
    """The cached value of `name` when it was checked in this drafter call (see `one_call`), else None."""
    hit, call = module.__dict__.get(name), _call()
    return hit[1] if hit is not None and call and hit[2] == call else None


def _cached(module: nn.Module, name: str, sources: tuple, build):
    """A fused tensor built from `sources`, cached on the module until a source changes."""
    if torch.is_grad_enabled() and any(s.requires_grad for s in sources if s is not None):
        return build()
    key = _versions(*sources)
    hit = module.__dict__.get(name)
    if hit is None or hit[0] != key:
        with torch.no_grad():
            hit = (key, build())
    module.__dict__[name] = (*hit[:2], _call())
    return hit[1]


def _fused_qkv(attn: StockModule, head_dim: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    if (hit := _checked(attn, "_lean_qkv")) is not None:
        return hit
    q, k, v = attn.q_proj, attn.k_proj, attn.v_proj

    def build():
        qk_w = torch.cat([q.weight, k.weight])  # [(h+kv)*hd, in]
        w = torch.cat([qk_w, _rotate_rows(qk_w, head_dim), v.weight])  # [2*(h+kv)*hd + kv*hd, in]
        w = same_layout(w, q.weight)
        if q.bias is None:
            return w, None
        qk_b = torch.cat([q.bias, k.bias])
        return w, torch.cat([qk_b, _rotate_rows(qk_b, head_dim), v.bias])

    return _cached(attn, "_lean_qkv", (q.weight, k.weight, v.weight, q.bias, k.bias, v.bias), build)


def attention(attn: StockModule, x: torch.Tensor, rope: RopeTable, positions: torch.Tensor, cache, layer_idx: int,
              mask: torch.Tensor | None) -> torch.Tensor:
    """A stock LlamaAttention's weights, run lean. x [b, n, in]; positions [n] or [b, n]; mask additive
    [1, 1, n, kv] or None (None means n == 1 or plain causal attention over keys that are all new)."""
    b, n, _ = x.shape
    hd = attn.head_dim
    heads = attn.q_proj.out_features // hd
    kv_heads = attn.k_proj.out_features // hd
    qk_width = (heads + kv_heads) * hd
    w, bias = _fused_qkv(attn, hd)
    y = F.linear(x, w, bias)  # [b, n, 2*qk + v]
    cos, sin = rope(positions, y)  # [(b,) n, qk]
    qk = y[..., :qk_width] * cos + y[..., qk_width:2 * qk_width] * sin  # [b, n, qk]
    q = qk[..., :heads * hd].view(b, n, heads, hd).transpose(1, 2)  # [b, h, n, hd]
    k = qk[..., heads * hd:].view(b, n, kv_heads, hd).transpose(1, 2)  # [b, kv, n, hd]
    v = y[..., 2 * qk_width:].view(b, n, kv_heads, hd).transpose(1, 2)  # [b, kv, n, hd]
    if cache is not None:
        k, v = cache.update(k, v, layer_idx)  # [b, kv, L, hd]
    causal = mask is None and n > 1 and k.shape[-2] == n
    if mask is None and n > 1 and not causal:
        mask = _causal_tail(n, k.shape[-2], y)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=attn.scaling,
                                         enable_gqa=heads != kv_heads)  # [b, h, n, hd]
    return linear(attn.o_proj, out.transpose(1, 2).reshape(b, n, heads * hd))  # [b, n, H]


def _causal_tail(n: int, total: int, like: torch.Tensor) -> torch.Tensor:
    """Additive mask [1, 1, n, total]: the new rows see the whole prefix and causally among themselves."""
    hidden = torch.full((n, total), torch.finfo(like.dtype).min, dtype=like.dtype, device=like.device)  # [n, total]
    return hidden.triu_(total - n + 1)[None, None]  # row i sees keys 0..total-n+i


def _fused_gate_up(module: StockModule) -> tuple[torch.Tensor, torch.Tensor | None]:
    if (hit := _checked(module, "_lean_gate_up")) is not None:
        return hit
    gate, up = module.gate_proj, module.up_proj

    def build():
        w = same_layout(torch.cat([gate.weight, up.weight]), gate.weight)  # [2I, H]
        return w, (torch.cat([gate.bias, up.bias]) if gate.bias is not None else None)

    return _cached(module, "_lean_gate_up", (gate.weight, up.weight, gate.bias, up.bias), build)


def mlp(module: StockModule, x: torch.Tensor) -> torch.Tensor:
    """A stock LlamaMLP (down(act(gate x) * up x)) with gate and up fused into one linear."""
    w, bias = _fused_gate_up(module)  # [2I, H], [2I] or None
    width = w.shape[0] // 2
    y = F.linear(x, w, bias)  # [b, n, 2I]
    return linear(module.down_proj, module.act_fn(y[..., :width]) * y[..., width:])  # [b, n, H]


def rms_norm(norm: StockModule, x: torch.Tensor) -> torch.Tensor:
    """A stock LlamaRMSNorm (float32 statistics, weight applied in the input dtype); Identity passes through."""
    if isinstance(norm, nn.Identity):
        return x
    eps = norm.variance_epsilon
    if x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), norm.weight, eps)
    return norm.weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)
