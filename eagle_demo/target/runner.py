"""Run a stock transformers causal LM as the target: prefill, decode, tree forward, cache compaction.

No forked modeling code: the model's own base model runs with a 4-D additive attention mask and
explicit depth-based position ids; its KV cache (`kv.BufferCache`) is compacted in place after each round.

Features handed to the draft:
- EAGLE-1/2: the post-norm last hidden state (exactly what the lm_head sees).
- EAGLE-3: the concatenation of `hidden_states[i]` for the requested indices (HF convention: index i is
  the input of decoder layer i, index 0 the embeddings). Index L (after the last layer) is the last layer's output
  before the final norm, as vLLM and SGLang capture it (HF's own `hidden_states[L]` is after the norm).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from .features import Features
from .kv import BufferCache
from .logit_head import LogitHead
from .windows import AttentionWindow

__all__ = ["TargetRunner", "TargetOutput", "tree_attention_mask"]


@dataclass(frozen=True)
class TargetOutput:
    logits: torch.Tensor  # [n, V]
    features: torch.Tensor  # [n, F]


def tree_attention_mask(prefix_len: int, block: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask [1, 1, n, prefix_len + m]: the whole prefix is visible, the last m keys follow
    block [n, m] (bool, True = visible).

    Float, not bool: eager attention silently misreads a bool 4-D mask in this transformers release.
    """
    n, m = block.shape
    visible = torch.ones(n, prefix_len + m, dtype=torch.bool, device=block.device)  # [n, P+m]
    visible[:, prefix_len:] = block
    mask = torch.zeros(n, prefix_len + m, dtype=dtype, device=block.device)  # [n, P+m]
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None]  # [1, 1, n, P+m]


class TargetRunner:
    """Owns the target's KV cache for one generation at a time (batch size 1)."""

    def __init__(self, model: PreTrainedModel, feature_layers: tuple[int, ...] | None = None,
                 static: bool = False, graphs: bool = True):
        """static: run over a fixed-size cache with full-width masks (`static.StaticTarget`), captured as CUDA
        graphs on a GPU when `graphs`; otherwise the growing `kv.BufferCache` path."""
        self.model = model
        self.static_mode, self.graphs = static, graphs
        self.static = None
        self.base = model.base_model
        self.lm_head = model.get_output_embeddings()
        self.feature_layers = feature_layers
        self.num_layers = int(model.config.get_text_config().num_hidden_layers)
        self.window = AttentionWindow.of(model)  # our own 4-D masks apply the target's sliding window themselves
        self.logit_head = LogitHead.of(model)  # what the family's own forward does after the projection
        self.cache = BufferCache(self.num_layers)
        self.length = 0  # committed positions held in the cache

    @property
    def device(self) -> torch.device:
        return self.lm_head.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    def reset(self, capacity: int | None = None) -> None:
        """A fresh cache; capacity = the positions this run needs (prompt + max new tokens + tree), so the
        buffers are allocated once at the run's size, never at the model's full context."""
        self.cache = BufferCache(self.num_layers, capacity)
        self.length = 0
        if self.static_mode and capacity is None and self.static is not None:
            self.static.reset()  # end of a run: keep the buffers (and captured graphs) for the next one
        elif self.static_mode:
            from .static import StaticTarget, pool_size

            need = capacity or 1024
            if self.static is None or self.static.capacity < need or self.static.feature_layers != self.feature_layers:
                self.static = StaticTarget(self.model, pool_size(need), self.feature_layers, self.graphs,
                                           self.window, self.logit_head)
            self.static.reset()

    def set_feature_layers(self, layers: tuple[int, ...] | None) -> None:
        if layers is not None:
            for i in layers:
                if not 0 <= i <= self.num_layers:
                    raise ValueError(f"feature layer {i} is outside the target's 0..{self.num_layers}")
        self.feature_layers = layers

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, depths: torch.Tensor | None = None,
                tree_mask: torch.Tensor | None = None) -> TargetOutput:
        """Run n new tokens after the cached prefix.

        input_ids [n]; depths [n] (tree depth of each token, None = consecutive positions);
        tree_mask [n, n] bool (None = causal). The n new entries stay in the cache until `commit`.
        """
        n = input_ids.shape[0]
        if self.static is not None:
            logits, features = self.static.forward(input_ids.to(self.device), depths, tree_mask)
            self._pending = n
            return TargetOutput(logits=logits, features=features)
        start = self.length
        ids = input_ids.to(self.device)[None]  # [1, n]
        if depths is None:
            positions = torch.arange(start, start + n, device=self.device)[None]  # [1, n]
        else:
            positions = (depths.to(self.device) + start)[None]  # [1, n]
        mask = None
        if tree_mask is not None:  # built on the device: the prefix is visible, the tree block follows tree_mask
            mask = torch.zeros(1, 1, n, start + n, dtype=self.dtype, device=self.device)  # [1, 1, n, start+n]
            mask[0, 0, :, start:].masked_fill_(~tree_mask.to(self.device), torch.finfo(self.dtype).min)
            if self.window.size is not None:
                keys = torch.cat([torch.arange(start, device=self.device), positions[0]])  # [start+n]
                mask = self.window.apply(mask, keys, positions[0])
        want_hidden = self.feature_layers is not None
        with Features(self.base, self.feature_layers or ()) as taken:
            out = self.base(input_ids=ids, attention_mask=mask, position_ids=positions, cache=self.cache,
                            use_cache=True, output_hidden_states=want_hidden)
        last = out.last_hidden_state[0]  # [n, H]
        logits = self.logit_head(self.lm_head(last))  # [n, V]
        if want_hidden:
            features = taken.of(out.hidden_states, self.device)  # [n, k*H]
        else:
            features = last  # [n, H]
        self._pending = n
        return TargetOutput(logits=logits, features=features)

    def verify(self, tree) -> TargetOutput:
        """One forward over a round's drafted tree (root first). A chain needs no tree mask: plain causal
        attention over consecutive positions is the same computation and skips building the mask."""
        if tree.is_chain:
            return self.forward(tree.tokens)
        return self.forward(tree.tokens, tree.depths, tree.mask)

    @torch.inference_mode()
    def commit(self, keep: list[int]) -> None:
        """Keep `keep` (indices into the last forward's block, ascending) and drop the rest of the block."""
        start, n = self.length, self._pending
        m = len(keep)
        if self.static is not None:
            self.static.commit(keep, n)
            self.length, self._pending = start + m, 0
            return
        if keep != list(range(m)):  # a tree path: one gather for all layers (kv.BufferCache.compact)
            self.cache.compact(start, torch.tensor([start + i for i in keep], device=self.device))  # [m]
        if n - m > 0:
            self.cache.crop(-(n - m))
        self.length = start + m
        self._pending = 0

    def restart(self) -> None:
        """Forget every cached position and keep the buffers (a longrope target's boundary runs them again)."""
        if self.static is not None:
            self.static.reset()
        elif self.length:
            self.cache.crop(-self.length)
        self.length, self._pending = 0, 0

    def rollback(self, m: int) -> None:
        """Forget the last m committed positions (calibration times a step, then takes it back)."""
        if self.static is not None:
            self.static.cache.length -= m
        else:
            self.cache.crop(-m)
        self.length -= m

    def cache_length(self) -> int:
        return self.cache.get_seq_length()
