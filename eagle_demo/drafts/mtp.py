"""MTP heads (multi-token prediction layers shipped with the target) run as EAGLE-style drafts.

The decoder block, its norms and its RoPE are the target family's own transformers classes, so the block
computes exactly what the target's architecture defines (MLA + MoE for DeepSeek-V3, GQA for Qwen3, ...).

DeepSeek-V3 / GLM style (vLLM `deepseek_mtp.py`): emb zeroed at position 0, enorm(emb), hnorm(hidden),
eh_proj over [emb, hidden] (2H -> H), the block; the block output is fed back; logits =
shared_head.head(shared_head.norm(g)).
Qwen3-Next / Qwen3.5 style (vLLM `qwen3_next_mtp.py`): pre_fc_norm_embedding(emb), pre_fc_norm_hidden(hidden),
fc over [emb, hidden], the block, then norm; the normed output is fed back and read by the target's lm_head.
MiMo-7B style (vLLM `mimo_mtp.py`, SGLang `mimo_mtp.py`): emb zeroed at position 0, token_layernorm(emb),
hidden_layernorm(hidden), input_proj over [hidden, emb] (hidden FIRST, the reverse of DeepSeek), the Qwen2 block,
final_layernorm; the normed output is fed back (the engines pass the draft's returned state on) and read by
the target's lm_head.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import DraftHead, Shared, top_logp

__all__ = ["MtpHead", "MtpParts"]


class MtpParts:
    """The target family's classes the head is built from (found by the checkpoints package)."""

    def __init__(self, layer_cls: type, norm_cls: type, rotary_cls: type):
        self.layer_cls, self.norm_cls, self.rotary_cls = layer_cls, norm_cls, rotary_cls


class MtpHead(DraftHead):
    family = "mtp"

    def __init__(self, config, parts: MtpParts, block_index: int, lm_head: nn.Module | None,
                 embed_tokens: nn.Module | None, *, style: str, own_lm_head: bool):
        """config: the target's text config (copied; sdpa attention). style: "deepseek" | "qwen3_next" | "mimo"."""
        nn.Module.__init__(self)
        self.config = config
        self.hidden_size = h = int(config.hidden_size)
        eps = float(getattr(config, "rms_norm_eps", 1e-6))
        self.style = style
        self.mask_first = style in ("deepseek", "mimo")  # the engines zero the embedding at position 0
        self.hidden_first = style == "mimo"  # MiMo's input_proj reads [hidden, emb]; the others [emb, hidden]
        self.feed_normed = style in ("qwen3_next", "mimo")  # out_norm before feeding back (else only before logits)
        self.rotary_emb = parts.rotary_cls(config=config)
        self.enorm = parts.norm_cls(h, eps=eps)
        self.hnorm = parts.norm_cls(h, eps=eps)
        self.fc = nn.Linear(2 * h, h, bias=False)  # DeepSeek eh_proj / Qwen3-Next fc / MiMo input_proj
        self.block = parts.layer_cls(config, layer_idx=block_index)
        self.block.self_attn.layer_idx = 0  # the draft keeps its own one-layer cache
        self.out_norm = parts.norm_cls(h, eps=eps)  # DeepSeek shared_head.norm / Qwen3-Next norm / MiMo final_layernorm
        # a probe head is built from the plan alone (make_head(plan, None, ...)), the target's lm_head shared later
        self.lm_head = nn.Linear(h, int(config.vocab_size), bias=False) if own_lm_head \
            else Shared(lm_head)  # type: ignore[arg-type]
        self.shared_embed = Shared(embed_tokens) if embed_tokens is not None else None
        self.embed_tokens: nn.Embedding | None = None

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        table = self.embed_tokens if self.embed_tokens is not None else self.shared_embed
        if table is None:
            raise ValueError("the MTP head has no token embedding: neither its own nor the target's")
        return table(tokens)  # [n, H]

    def forward(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, cache,
                mask: torch.Tensor | None, from_target: bool = False) -> torch.Tensor:
        """hidden [n, H] (the target's post-norm last hidden state, or this head's own output), tokens [n]
        -> g [n, H]."""
        emb = self.embed(tokens).to(hidden.dtype)  # [n, H]
        if self.mask_first:
            emb = emb.masked_fill((positions == 0)[:, None], 0.0)  # vLLM/SGLang mask the embedding at position 0
        pair = [self.hnorm(hidden), self.enorm(emb)] if self.hidden_first else [self.enorm(emb), self.hnorm(hidden)]
        x = self.fc(torch.cat(pair, dim=-1))[None]  # [1, n, H]
        pos_emb = self.rotary_emb(x, positions[None])
        x = self.block(x, attention_mask=mask, position_ids=positions[None], cache=cache, use_cache=True,
                       position_embeddings=pos_emb)  # [1, n, H]
        x = x[0] if isinstance(x, torch.Tensor) else x[0][0]
        return self.out_norm(x) if self.feed_normed else x  # [n, H]

    def topk(self, g: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = g if self.feed_normed else self.out_norm(g)  # [m, H]
        return top_logp(self.lm_head(x), k)  # [m, k], [m, k]
