"""EAGLE-3 drafts whose decoder layer uses DeepSeek MLA attention (Kimi K2 / DeepSeek drafts,
`Eagle3DeepseekV2ForCausalLM`; vLLM `deepseek_eagle3.py`): the layer-0 attention reads the 2H concat
[input_layernorm(embedding), hidden_norm(hidden)] through its first MLA projections (q_a_proj or q_proj, and
kv_a_proj_with_mqa), the MLP is dense, RoPE is DeepSeek's (yarn when the config scales it). Everything else
(fusion, final norm, lm_head, d2t, EAGLE-3.1 options) is `Eagle3xHead`'s.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3MLP,
    DeepseekV3RMSNorm,
    DeepseekV3RotaryEmbedding,
)

from .base import Shared
from .eagle3 import widen_inputs
from .eagle3x import Eagle3xHead, Unfused, Variant

__all__ = ["MlaEagle3Head", "MlaEagle3Layer"]


class MlaEagle3Layer(nn.Module):
    def __init__(self, config: DeepseekV3Config, norm_before_residual: bool = False):
        super().__init__()
        h, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = DeepseekV3Attention(config, layer_idx=0)
        widen_inputs(self.self_attn, ("q_proj", "q_a_proj", "kv_a_proj_with_mqa"), 2 * h)  # those reading x
        self.mlp = DeepseekV3MLP(config)
        self.input_layernorm = DeepseekV3RMSNorm(h, eps=eps)
        self.hidden_norm = DeepseekV3RMSNorm(h, eps=eps)
        self.post_attention_layernorm = DeepseekV3RMSNorm(h, eps=eps)
        self.norm_before_residual = norm_before_residual

    def forward(self, emb: torch.Tensor, hidden: torch.Tensor, mask, position_embeddings, cache):
        normed = self.hidden_norm(hidden)  # [1, n, H]
        residual = normed if self.norm_before_residual else hidden
        x = torch.cat([self.input_layernorm(emb), normed], dim=-1)  # [1, n, 2H]
        attn, _ = self.self_attn(x, position_embeddings=position_embeddings, attention_mask=mask, cache=cache)
        x = residual + attn  # [1, n, H]
        return x + self.mlp(self.post_attention_layernorm(x))  # [1, n, H]


class MlaEagle3Head(Eagle3xHead):
    family = "eagle3"
    lean_midlayer = False  # its MLA layer is transformers' own, called with position embeddings

    def __init__(self, config: DeepseekV3Config, target_hidden_size: int, draft_vocab_size: int,
                 embed_tokens: nn.Module | None, feature_layers: tuple[int, ...] | None, variant: Variant = Variant()):
        """variant: its norms (one MLA layer: `num_layers` and `spare_fc_in` do not apply)."""
        nn.Module.__init__(self)  # Eagle3xHead's own layers are Llama-shaped; this head builds its own
        self.config = config
        self.hidden_size = h = int(config.hidden_size)
        eps = config.rms_norm_eps
        fc_norms, input_norm = variant.fc_norms, variant.input_norm
        self.rotary_emb = DeepseekV3RotaryEmbedding(config=config)
        self.target_hidden_size = target_hidden_size
        self.feature_layers = tuple(feature_layers) if feature_layers else None
        width = len(self.feature_layers) * target_hidden_size if self.feature_layers else h
        self.fc = nn.Linear(width, h, bias=False) if self.feature_layers else Unfused()
        self.fc_norm = nn.ModuleList(DeepseekV3RMSNorm(target_hidden_size, eps=eps) for _ in range(fc_norms)) \
            if fc_norms else None
        self.input_norm = DeepseekV3RMSNorm(width, eps=eps) if input_norm else None
        self.midlayer = MlaEagle3Layer(config, variant.norm_before_residual)
        self.layers = nn.ModuleDict()
        self.norm = DeepseekV3RMSNorm(h, eps=eps)
        self.lm_head = nn.Linear(h, draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab_size, dtype=torch.long))
        self.shared_embed = Shared(embed_tokens) if embed_tokens is not None else None
        self.embed_tokens: nn.Embedding | None = None
        self.norm_output = variant.norm_output
