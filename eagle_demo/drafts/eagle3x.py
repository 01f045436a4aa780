"""EAGLE-3 variants published after the original: EAGLE-3.1, multi-layer EAGLE-3 and NVIDIA's Eagle3 v2/v3.

Same interface and cache use as `Eagle3Head`; what differs (each from the engines' loaders, see
docs/checkpoint-formats.md):
- fc_norm (EAGLE-3.1): one RMSNorm per fused target feature before fc, `fc_norm.{i}.weight` [Ht].
- input_norm (NVIDIA `norm_before_fc`): one RMSNorm over the whole concatenated feature before fc.
- norm_output (EAGLE-3.1): the final norm's output is both fed back and read by the lm_head.
- more decoder layers (vLLM PR #26164): layer 0 reads the 2H concat, layers 1.. are plain decoder layers.
- no fc (NVIDIA v2, `use_aux_hidden_state: false`): the target's last hidden state goes in unfused.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

from .eagle3 import Eagle3Head

__all__ = ["Eagle3xHead", "Unfused", "Variant"]


@dataclass(frozen=True)
class Variant:
    """How a variant's layers differ from the original EAGLE-3's (the module doc says where each comes from).
    spare_fc_in: an unfused draft whose file still has fc weights keeps them, unused (the probe may try them)."""
    norm_before_residual: bool = False
    num_layers: int = 1
    fc_norms: int = 0
    input_norm: bool = False
    norm_output: bool = False
    spare_fc_in: int = 0


class Unfused(nn.Module):
    """Stands where fc would be when a draft takes the target's last hidden state as is. Its empty, non-saved
    `weight` buffer only carries the head's device and dtype (the drafter reads them from `head.fc.weight`)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.empty(0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Eagle3xHead(Eagle3Head):
    family = "eagle3"
    lean_midlayer = True  # the first layer runs lean (drafts/lean.py); a subclass with its own layer sets False

    def __init__(self, config: LlamaConfig, target_hidden_size: int, draft_vocab_size: int,
                 embed_tokens: nn.Module | None, feature_layers: tuple[int, ...] | None, variant: Variant = Variant()):
        """feature_layers None: no fusion (the target's post-norm last hidden state, width H, goes in as is)."""
        super().__init__(config, target_hidden_size, draft_vocab_size, embed_tokens, feature_layers or (),
                         variant.norm_before_residual)
        fc_norms, input_norm, num_layers = variant.fc_norms, variant.input_norm, variant.num_layers
        norm_output, spare_fc_in = variant.norm_output, variant.spare_fc_in
        h, eps = self.hidden_size, config.rms_norm_eps
        self.feature_layers = tuple(feature_layers) if feature_layers else None
        width = len(self.feature_layers) * target_hidden_size if self.feature_layers else h
        self.fc = nn.Linear(width, h, bias=False) if self.feature_layers else Unfused()
        self.fc_norm = nn.ModuleList(LlamaRMSNorm(target_hidden_size, eps=eps) for _ in range(fc_norms)) \
            if fc_norms else None
        self.input_norm: nn.Module | None = LlamaRMSNorm(width, eps=eps) if input_norm else None
        self.layers = nn.ModuleDict({str(i): LlamaDecoderLayer(config, layer_idx=i) for i in range(1, num_layers)})
        self.norm_output = norm_output
        self.spare_fc = nn.Linear(spare_fc_in, h, bias=False) if spare_fc_in else None

    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """[(b,) n, F] target features -> [(b,) n, H]."""
        if self.fc_norm is not None:
            parts = features.split(self.target_hidden_size, dim=-1)  # k x [(b,) n, Ht]
            features = torch.cat([norm(p) for norm, p in zip(self.fc_norm, parts)], dim=-1)  # [(b,) n, F]
        if self.input_norm is not None:
            features = self.input_norm(features)  # [(b,) n, F]
        return self.fc(features)  # [(b,) n, H]

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache,
                mask: torch.Tensor | None, from_target: bool = False) -> torch.Tensor:
        """hidden [n, F] or batched [b, n, F], tokens [n] or [b, n] -> g [n, H] or [b, n, H]."""
        batched = hidden.dim() == 3
        if from_target:
            hidden = self.fuse(hidden)  # [(b,) n, H]
        emb = self.embed(tokens).to(hidden.dtype)  # [(b,) n, H]
        if not batched:
            emb, hidden = emb[None], hidden[None]  # [1, n, H]
        if self.lean_midlayer:
            if batched:
                self.rope.reserve(int(positions.max()) + 1, hidden)
            g = self.midlayer(emb, hidden, mask, self.rope, positions, cache)  # [b, n, H]
            pos_emb = self.position_embeddings(hidden[0], positions) if self.layers else None  # stock layers
        else:
            pos_emb = self.position_embeddings(hidden[0], positions)
            g = self.midlayer(emb, hidden, mask, pos_emb, cache)  # [b, n, H]
        for layer in self.layers.values():
            g = layer(g, attention_mask=mask, position_ids=positions[None], cache=cache, use_cache=True,
                      position_embeddings=pos_emb)  # [b, n, H]
        if self.norm_output:
            g = self.norm(g)  # EAGLE-3.1: the normed state is fed back and read by the lm_head
        return g if batched else g[0]

    def draft_logits(self, g: torch.Tensor) -> torch.Tensor:
        return self.lm_head(g if self.norm_output else self.norm(g))  # [m, Vd]
