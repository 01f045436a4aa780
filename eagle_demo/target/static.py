"""Static-shape target execution: the stock `transformers` target over a fixed-size KV cache, so every forward
of n tokens has the same shapes and addresses and can be captured once as a CUDA graph and replayed.

- The cache is two zeroed pools, keys [layers, 1, kv, capacity, dk] and values [layers, 1, kv, capacity, dv],
  sized to the run (prompt + max new tokens + tree, rounded up to `POOL_STEP` positions so that a slightly
  longer run reuses them and their graphs), never to the model's full context, and shaped by the first
  keys and values the model writes (an MLA target's key and value widths differ from its config's head_dim).
  A forward writes its n keys/values at slots length..length+n-1 (a device index, `index_copy_`) and
  attention reads the whole pool under a full-width additive mask [1, 1, n, capacity]: committed slots and
  the block's own tree relation are visible, everything else (stale or unused) is not.
- Every input of a forward lives in a per-size static buffer (token ids, positions, slots, tree block, length);
  the mask is built from them on the device inside the forward, so a captured graph stays valid for any length.
- On CUDA (`graphs=True`) a size up to `GRAPH_MAX_TOKENS` is captured with `torch.cuda.CUDAGraph` on its
  second forward and replayed afterwards (a longer one, a prefill, runs eagerly: a graph per prompt length would
  pile up in a long-running app); any capture failure falls back to eager for good. On CPU the same static path
  runs eagerly (that is how the tests check it: greedy equality and sampling through it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

from .features import Features
from .logit_head import LogitHead
from .windows import AttentionWindow

__all__ = ["StaticTarget", "StaticKV", "capture_graph", "pool_size", "POOL_STEP", "GRAPH_MAX_TOKENS"]

POOL_STEP = 128  # pools grow in steps of this many positions: a slightly longer prompt (a chat's next turn) reuses
# the pools and the graphs captured over them, where an exact size would capture every graph again


GRAPH_MAX_TOKENS = 64  # forwards of at most this many tokens (verifies: the largest GPU tree is 64; the draft's
# extends) are captured and keep their inputs; a prefill runs eagerly, so a long-running app does not keep a graph
# per prompt length


def pool_size(need: int) -> int:
    """The positions a new pool holds for a run that needs `need`: rounded up to `POOL_STEP`."""
    return -(-need // POOL_STEP) * POOL_STEP


class _Layer(DynamicLayer):
    def __init__(self, owner: "StaticKV", index: int):
        super().__init__()
        self.owner, self.index = owner, index
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        owner = self.owner
        if owner.keys is None:  # the first forward (the prefill, never captured) shapes the pools
            owner.allocate(key_states, value_states)
        keys, values = owner.keys[self.index], owner.values[self.index]  # [1, kv, cap, dk], [1, kv, cap, dv]
        keys.index_copy_(2, owner.slots, key_states)  # [1, kv, n, dk] at the slots
        values.index_copy_(2, owner.slots, value_states)
        return keys, values

    def get_seq_length(self) -> int:
        return self.owner.length

    def crop(self, tokens_to_remove: int) -> None:
        raise RuntimeError("the static cache is compacted by StaticTarget.commit, not cropped")


class StaticKV(DynamicCache):
    """Fixed pools the model's layers write into at `slots`; `length` committed slots (host int)."""

    def __init__(self, num_layers: int, capacity: int, device):
        Cache.__init__(self, layer_class_to_replicate=DynamicLayer)
        self.keys: torch.Tensor | None = None  # [L, 1, kv, cap, dk]
        self.values: torch.Tensor | None = None  # [L, 1, kv, cap, dv]
        self.layer_class_to_replicate = None
        self.layers = [_Layer(self, i) for i in range(num_layers)]
        self.capacity = capacity
        self.length = 0
        self.slots = torch.zeros(1, dtype=torch.long, device=device)  # set per forward

    def allocate(self, key: torch.Tensor, value: torch.Tensor) -> None:
        """Zeroed pools shaped like the model's own keys [1, kv, n, dk] and values [1, kv, n, dv]."""
        n = len(self.layers)
        self.keys = key.new_zeros(n, *key.shape[:2], self.capacity, key.shape[-1])
        self.values = value.new_zeros(n, *value.shape[:2], self.capacity, value.shape[-1])

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length


@dataclass
class _Inputs:
    """Static buffers for one forward size n."""

    ids: torch.Tensor  # [n] long
    depths: torch.Tensor  # [n] long (position offsets from the committed length)
    block: torch.Tensor  # [n, n] bool (the new block's own visibility)
    length: torch.Tensor  # [] long
    chain_depths: torch.Tensor  # [n] 0..n-1, constant
    causal: torch.Tensor  # [n, n] lower triangle, constant


def capture_graph(run, device: torch.device) -> tuple:
    """(graph, outputs) of `run()` captured as a CUDA graph, after two warm-up calls on a side stream (they write
    only the slots the replay rewrites). Raises whatever the capture raises; callers fall back to eager."""
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        for _ in range(2):
            run()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    return graph, out


class StaticTarget:
    def __init__(self, model, capacity: int, feature_layers: tuple[int, ...] | None, graphs: bool,
                 window: AttentionWindow, logit_head: LogitHead):
        """window, logit_head: the owning runner's (`target.TargetRunner`), read from the model once."""
        cfg = model.config.get_text_config()
        self.model, self.base, self.lm_head = model, model.base_model, model.get_output_embeddings()
        device, dtype = self.lm_head.weight.device, self.lm_head.weight.dtype
        self.cache = StaticKV(int(cfg.num_hidden_layers), capacity, device)
        self.device, self.dtype, self.capacity = device, dtype, capacity
        self.feature_layers = feature_layers
        self.graphs_on = graphs and device.type == "cuda"
        self.inputs: dict[int, _Inputs] = {}
        self.graphs: dict[int, tuple] = {}
        self.capture_error: str | None = None  # why a capture failed (every size runs eagerly from then on)
        self.seen: dict[int, int] = {}  # forwards per size: a size is captured on its second use (not the prefill)
        self.columns = torch.arange(capacity, device=device)  # [cap]
        self.window, self.logit_head = window, logit_head

    @property
    def length(self) -> int:
        return self.cache.length

    def reset(self) -> None:
        self.cache.length = 0

    def _inputs(self, n: int) -> _Inputs:
        """The static inputs of size n, kept for sizes a graph may capture (a longer forward gets fresh ones)."""
        if n in self.inputs:
            return self.inputs[n]
        d = self.device
        causal = torch.ones(n, n, dtype=torch.bool, device=d).tril()  # [n, n]
        x = _Inputs(ids=torch.zeros(n, dtype=torch.long, device=d), depths=torch.arange(n, device=d),
                    block=causal.clone(), length=torch.zeros((), dtype=torch.long, device=d),
                    chain_depths=torch.arange(n, device=d), causal=causal)
        if n <= GRAPH_MAX_TOKENS:
            self.inputs[n] = x
        return x

    def _run(self, x: _Inputs):
        """The forward on static buffers: every op has fixed shapes (capturable)."""
        n = x.ids.shape[0]
        slots = x.length + torch.arange(n, device=self.device)  # [n]
        self.cache.slots = slots
        visible = (self.columns < x.length).expand(n, -1).clone()  # [n, cap] committed slots
        visible[:, slots] = x.block  # the block's own tree relation
        mask = torch.zeros(n, self.capacity, dtype=self.dtype, device=self.device)  # [n, cap]
        mask.masked_fill_(~visible, torch.finfo(self.dtype).min)
        want_hidden = self.feature_layers is not None
        positions = (x.length + x.depths)[None]  # [1, n]
        mask = mask[None, None]  # [1, 1, n, cap]
        if self.window.size is not None:  # each slot's position (stale slots are masked anyway)
            keys = self.columns.index_copy(0, slots, positions[0])  # [cap]
            mask = self.window.apply(mask, keys, positions[0])  # [1, 1, n, cap], or one per layer type
        with Features(self.base, self.feature_layers or ()) as taken:
            out = self.base(input_ids=x.ids[None], attention_mask=mask, position_ids=positions,
                            cache=self.cache, use_cache=True, output_hidden_states=want_hidden)
        last = out.last_hidden_state[0]  # [n, H]
        logits = self.logit_head(self.lm_head(last))  # [n, V]
        if want_hidden:
            features = taken.of(out.hidden_states)  # [n, k*H]
        else:
            features = last
        return logits, features

    def forward(self, input_ids: torch.Tensor, depths: torch.Tensor | None, tree_mask: torch.Tensor | None):
        n = input_ids.shape[0]
        if self.length + n > self.capacity:
            raise ValueError(f"the static cache holds {self.capacity} positions; this run needs more "
                             "(raise max new tokens' budget or turn the static cache off)")
        x = self._inputs(n)
        x.ids.copy_(input_ids, non_blocking=True)
        x.length.fill_(self.length)
        if depths is None:
            x.depths.copy_(x.chain_depths)
            x.block.copy_(x.causal)
        else:
            x.depths.copy_(depths, non_blocking=True)
            x.block.copy_(tree_mask, non_blocking=True)
        self.seen[n] = self.seen.get(n, 0) + 1
        if not self.graphs_on or self.seen[n] < 2 or n > GRAPH_MAX_TOKENS:
            return self._run(x)
        if n not in self.graphs:
            self._capture(n, x)
            if n not in self.graphs:
                return self._run(x)
        graph, out = self.graphs[n]
        graph.replay()
        return out

    def _capture(self, n: int, x: _Inputs) -> None:
        try:
            self.graphs[n] = capture_graph(lambda: self._run(x), self.device)
        except Exception as exc:  # noqa: BLE001 - any capture failure: eager from now on
            self.graphs_on = False
            self.capture_error = f"{type(exc).__name__}: {exc}"

    def commit(self, start_keep: list[int], pending: int) -> None:
        """Keep block entries `start_keep` (ascending) of the last forward; one gather for all layers."""
        m, start = len(start_keep), self.length
        if start_keep != list(range(m)):
            src = torch.tensor([start + i for i in start_keep], device=self.device)  # [m]
            for pool in (self.cache.keys, self.cache.values):  # one gather per pool, all layers at once
                pool[..., start:start + m, :] = pool[..., src, :]  # [L, 1, kv, m, d]
        self.cache.length = start + m
