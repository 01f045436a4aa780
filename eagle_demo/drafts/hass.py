"""HASS-style EAGLE-1 drafts: the EAGLE-1 layout plus extra RMSNorms (speculators `layernorms: true`, vLLM's
`add_para_norm`). Where each norm sits (speculators `EagleSpeculator.forward`, vLLM V0 `eagle.py`):
- embed_norm: on the token embedding before fc (embedding_layernorm / embed_layernorm / enorm);
- hidden_norm: on the incoming feature before fc (hidden_layernorm / hidden_states_layernorm / hnorm);
- lm_head_norm: on the draft output before the target's lm_head only (pre_lm_head_layernorm /
  lm_head_layernorm); the un-normed output is what is fed back, as in EAGLE-1;
- layer 0 keeps its input norm when the checkpoint has one (speculators keeps it with layernorms on).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from .base import top_logp
from .eagle1 import Eagle1Head

__all__ = ["HassHead"]


class HassHead(Eagle1Head):
    family = "eagle1"
    # set in __init__ by name, each a norm or None
    embed_norm: nn.Module | None
    hidden_norm: nn.Module | None
    lm_head_norm: nn.Module | None

    def __init__(self, config: LlamaConfig, lm_head: nn.Module, embed_tokens: nn.Module | None, *,
                 norms: tuple[str, ...], layer0_input_norm: bool, fc_bias: bool = True, qkv_bias: bool = False,
                 num_layers: int = 1):
        """norms: which of ("embed_norm", "hidden_norm", "lm_head_norm") the checkpoint has."""
        super().__init__(config, lm_head, embed_tokens, fc_bias=fc_bias, qkv_bias=qkv_bias, num_layers=num_layers)
        h, eps = self.hidden_size, config.rms_norm_eps
        for name in ("embed_norm", "hidden_norm", "lm_head_norm"):
            setattr(self, name, LlamaRMSNorm(h, eps=eps) if name in norms else None)
        if layer0_input_norm:
            self.layers[0].input_layernorm = LlamaRMSNorm(h, eps=eps)

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache,
                mask: torch.Tensor | None, from_target: bool = False) -> torch.Tensor:
        """hidden [n, H] or batched [b, n, H], tokens [n] or [b, n] -> g [n, H] or [b, n, H]."""
        batched = hidden.dim() == 3
        emb = self.embed(tokens).to(hidden.dtype)  # [(b,) n, H]
        if self.embed_norm is not None:
            emb = self.embed_norm(emb)
        if self.hidden_norm is not None:
            hidden = self.hidden_norm(hidden)  # [(b,) n, H]
        x = self.fc(torch.cat([emb, hidden], dim=-1))  # [(b,) n, H]
        x = x if batched else x[None]  # [b, n, H]
        pos_emb = self.position_embeddings(x[0], positions)
        for layer in self.layers:
            x = layer(x, attention_mask=mask, position_ids=positions[None], cache=cache, use_cache=True,
                      position_embeddings=pos_emb)  # [b, n, H]
        return x if batched else x[0]

    def topk(self, g: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return top_logp(self.lm_head(self.lm_head_input(g)), k)  # [m, k], [m, k]

    def lm_head_input(self, g: torch.Tensor) -> torch.Tensor:
        return self.lm_head_norm(g) if self.lm_head_norm is not None else g  # [m, H]
