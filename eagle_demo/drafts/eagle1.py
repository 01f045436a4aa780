"""EAGLE-1/2 draft head: fc over concat(token embedding, feature), one Llama decoder layer without its
input norm, no final norm, logits through the target's lm_head."""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

from . import lean
from .base import DraftHead, Shared, qk_heads, top_logp

__all__ = ["Eagle1Head"]


class Eagle1Head(DraftHead):
    family = "eagle1"
    lm_head_logits = True

    def __init__(self, config: LlamaConfig, lm_head: nn.Module, embed_tokens: nn.Module | None,
                 fc_bias: bool = True, qkv_bias: bool = False, num_layers: int = 1):
        """embed_tokens: the target's embedding (shared) unless `own_embedding` is set later."""
        super().__init__(config)
        h = self.hidden_size
        self.fc = nn.Linear(2 * h, h, bias=fc_bias)
        self.layers = nn.ModuleList(_decoder_layer(config, i, qkv_bias) for i in range(num_layers))
        self.layers[0].input_layernorm = nn.Identity()  # EAGLE-1 skips layer 0's input norm
        self.lm_head = Shared(lm_head)
        self.shared_embed = Shared(embed_tokens) if embed_tokens is not None else None
        self.embed_tokens: nn.Embedding | None = None  # set when the checkpoint brings its own
        self.rope = lean.RopeTable(self, qk_heads(config))

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache,
                mask: torch.Tensor | None, from_target: bool = False) -> torch.Tensor:
        """hidden [n, F] or batched [b, n, F] (training), tokens [n] or [b, n] -> g [n, H] or [b, n, H]."""
        batched = hidden.dim() == 3
        emb = self.embed(tokens).to(hidden.dtype)  # [(b,) n, H]
        x = lean.linear(self.fc, torch.cat([emb, hidden], dim=-1))  # [(b,) n, H]
        x = x if batched else x[None]  # [b, n, H]
        if batched:
            self.rope.reserve(int(positions.max()) + 1, x)
        for i, layer in enumerate(self.layers):  # a LlamaDecoderLayer's computation, run lean
            x = x + lean.attention(layer.self_attn, lean.rms_norm(layer.input_layernorm, x), self.rope, positions,
                                   cache, i, mask)  # [b, n, H]
            x = x + lean.mlp(layer.mlp, lean.rms_norm(layer.post_attention_layernorm, x))  # [b, n, H]
        return x if batched else x[0]  # [(b,) n, H]

    def topk(self, g: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return top_logp(lean.linear(self.lm_head, g), k)  # [m, k], [m, k]


def _decoder_layer(config: LlamaConfig, index: int, qkv_bias: bool) -> LlamaDecoderLayer:
    layer = LlamaDecoderLayer(config, layer_idx=index)
    if qkv_bias:  # Qwen2-style drafts: biases on q/k/v only (o_proj stays bias-free)
        attn = layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj"):
            old = getattr(attn, name)
            setattr(attn, name, nn.Linear(old.in_features, old.out_features, bias=True))
    return layer
