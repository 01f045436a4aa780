"""EAGLE-3 draft head: fc over three fused target features (3*Ht -> H, only for target features), one
decoder layer whose attention reads [norm(embedding), norm(hidden)] (2H wide), its own final norm and
lm_head over the draft vocabulary, and d2t mapping draft ids to target ids (target = draft + d2t)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm

from . import lean
from .base import DraftHead, Shared, qk_heads, top_logp

__all__ = ["Eagle3Head", "Eagle3Layer", "widen_inputs"]


def widen_inputs(attn: nn.Module, names: tuple[str, ...], width: int) -> None:
    """Replace the named input projections of an attention module (those present) with ones reading `width`
    features: an EAGLE-3 layer's attention reads the 2H-wide [norm(embedding), norm(hidden)]."""
    for name in names:
        old = getattr(attn, name, None)
        if old is not None:
            setattr(attn, name, nn.Linear(width, old.out_features, bias=old.bias is not None))


class Eagle3Layer(nn.Module):
    def __init__(self, config: LlamaConfig, index: int = 0, norm_before_residual: bool = False):
        super().__init__()
        h = config.hidden_size
        eps = config.rms_norm_eps
        self.self_attn = LlamaAttention(config, layer_idx=index)
        widen_inputs(self.self_attn, ("q_proj", "k_proj", "v_proj"), 2 * h)  # read [embedding, hidden]
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(h, eps=eps)
        self.hidden_norm = LlamaRMSNorm(h, eps=eps)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=eps)
        self.norm_before_residual = norm_before_residual

    def forward(self, emb: torch.Tensor, hidden: torch.Tensor, mask, rope: lean.RopeTable, positions, cache):
        normed = lean.rms_norm(self.hidden_norm, hidden)  # [1, n, H]
        residual = normed if self.norm_before_residual else hidden
        x = torch.cat([lean.rms_norm(self.input_layernorm, emb), normed], dim=-1)  # [1, n, 2H]
        x = residual + lean.attention(self.self_attn, x, rope, positions, cache, 0, mask)  # [1, n, H]
        return x + lean.mlp(self.mlp, lean.rms_norm(self.post_attention_layernorm, x))  # [1, n, H]


class Eagle3Head(DraftHead):
    family = "eagle3"
    d2t: torch.Tensor  # a buffer: draft id -> target id offset

    def __init__(self, config: LlamaConfig, target_hidden_size: int, draft_vocab_size: int,
                 embed_tokens: nn.Module | None, feature_layers: tuple[int, ...],
                 norm_before_residual: bool = False):
        super().__init__(config)
        h = self.hidden_size
        self.feature_layers = tuple(feature_layers)
        self.target_hidden_size = target_hidden_size
        # nn.Module: a subclass may put another kind here (Unfused fc, an MLA layer, its family's norm)
        self.fc: nn.Module = nn.Linear(len(self.feature_layers) * target_hidden_size, h, bias=False)
        self.midlayer: nn.Module = Eagle3Layer(config, 0, norm_before_residual)
        self.norm: nn.Module = LlamaRMSNorm(h, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(h, draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))
        self.shared_embed = Shared(embed_tokens) if embed_tokens is not None else None
        self.embed_tokens: nn.Embedding | None = None
        self.rope = lean.RopeTable(self, qk_heads(config))

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache,
                mask: torch.Tensor | None, from_target: bool = False) -> torch.Tensor:
        """hidden [n, F] or batched [b, n, F] (training), tokens [n] or [b, n] -> g [n, H] or [b, n, H]."""
        batched = hidden.dim() == 3
        if from_target:
            hidden = lean.linear(self.fc, hidden)  # [(b,) n, 3Ht] -> [(b,) n, H]; the draft's outputs skip fc
        emb = self.embed(tokens).to(hidden.dtype)  # [(b,) n, H]
        if not batched:
            emb, hidden = emb[None], hidden[None]  # [1, n, H]
        if batched:
            self.rope.reserve(int(positions.max()) + 1, hidden)
        g = self.midlayer(emb, hidden, mask, self.rope, positions, cache)  # [b, n, H]
        return g if batched else g[0]  # pre-norm output, fed back as the next hidden

    def draft_logits(self, g: torch.Tensor) -> torch.Tensor:
        return lean.linear(self.lm_head, lean.rms_norm(self.norm, g))  # [m, Vd]

    def topk(self, g: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        logp, ids = top_logp(self.draft_logits(g), k)  # [m, k], draft ids [m, k]
        return logp, ids + self.d2t[ids]  # [m, k], target ids [m, k]
