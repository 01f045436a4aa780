"""The target's attention on a CPU: transformers' SDPA, with grouped-query heads read in place under a mask.

A verify is a masked forward of n > 1 tokens after the cache. For such a forward of a grouped-query model
(fewer key/value heads than query heads) `transformers`' `sdpa_attention_forward` copies every layer's
whole K and V cache n_rep times (`repeat_kv`) before attention: its kernels on CUDA would fall back to the
math path with `enable_gqa` and a mask. PyTorch's CPU kernel takes `enable_gqa` with a mask and reads each
key/value head in place, so on a CPU this runs SDPA that way. Everything else (one query token, no mask, no
grouped heads, other devices, position biases) goes to transformers' own function. The mask is built by
transformers' own SDPA mask builder and made additive once per forward (a bool mask costs a conversion in
every layer).

On a GPU, `enable_gqa` with a mask would leave only the math kernel; `PACKED` (`packed_sdpa_forward`) instead
packs the grouped query heads into query rows and tiles the mask, as transformers does for one token. It is
registered for any device and off by default: `scripts/gpu_fast.py` measures it against the stock call on a
GPU.

Registered through transformers' `AttentionInterface` and `AttentionMaskInterface`: the model classes are
transformers' own, only the attention call and the mask's dtype differ. Outputs equal the stock path's bit for
bit on the shipped target (tests/test_attention.py); a verify of 5 tokens there takes 1.1 plain steps instead
of 1.3 (docs/perf-history.md, "Grouped-query attention on a CPU").
"""

from __future__ import annotations

import torch
from torch.nn import functional as F
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

__all__ = ["NAME", "PACKED", "additive_sdpa_mask", "grouped_sdpa_forward", "packed_sdpa_forward", "use_grouped_sdpa"]

NAME = "sdpa_grouped_cpu"
PACKED = "sdpa_packed_heads"  # any device; not switched on by the loader (measured by scripts/gpu_fast.py on a GPU)


def _stock_case(query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor | None, dropout: float,
                kwargs: dict) -> bool:
    """Where transformers' own call is already as good: one query token (it packs the heads itself), no mask (it
    passes `enable_gqa`), no grouped heads; and what these calls do not handle (dropout, position biases, softcap)."""
    return (attention_mask is None or query.shape[2] == 1 or key.shape[1] == query.shape[1] or bool(dropout)
            or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None)


def grouped_sdpa_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                         is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [b, h, n, d], key/value [b, kv, K, d], attention_mask [b|1, 1, n, K] or None -> ([b, n, h, d], None)."""
    if not query.is_cpu or _stock_case(query, key, attention_mask, dropout, kwargs):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                                      **kwargs)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, scale=scaling,
                                         enable_gqa=True)  # [b, h, n, d]
    return out.transpose(1, 2).contiguous(), None  # [b, n, h, d]


def packed_sdpa_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                        is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """The grouped heads packed into query rows, for any device: query head g*rep + r, row i becomes row r*n + i
    of key/value head g, and the mask is tiled over the rep row blocks. No K/V copy and no `enable_gqa`, so a
    GPU keeps its masked kernels (transformers packs the same way for one query token, without a mask)."""
    if _stock_case(query, key, attention_mask, dropout, kwargs) or attention_mask.shape[1] != 1:  # (per-head masks)
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, is_causal,
                                      **kwargs)
    b, heads, n, d = query.shape
    kv, width = key.shape[1], attention_mask.shape[-1]
    rep = heads // kv
    q = query.reshape(b, kv, rep * n, d)  # [b, kv, rep*n, d]
    mask = attention_mask[:, :, None].expand(-1, -1, rep, -1, -1).reshape(-1, 1, rep * n, width)  # [b|1, 1, rep*n, K]
    out = F.scaled_dot_product_attention(q, key, value, attn_mask=mask, scale=scaling)  # [b, kv, rep*n, d]
    return out.reshape(b, heads, n, d).transpose(1, 2).contiguous(), None  # [b, n, h, d]


def additive_sdpa_mask(*args, dtype: torch.dtype = torch.float32, **kwargs) -> torch.Tensor | None:
    """transformers' SDPA mask, made additive once per forward: given a bool mask, SDPA's CPU kernel converts it
    to floats in every layer. None stays None (a causal or full block that SDPA's own flags cover)."""
    mask = sdpa_mask(*args, **kwargs)  # [b, 1, n, K] bool, or None
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask, torch.zeros((), dtype=dtype, device=mask.device), torch.finfo(dtype).min)  # [b, 1, n, K]


AttentionInterface.register(NAME, grouped_sdpa_forward)
AttentionMaskInterface.register(NAME, additive_sdpa_mask)
AttentionInterface.register(PACKED, packed_sdpa_forward)
AttentionMaskInterface.register(PACKED, additive_sdpa_mask)


def use_grouped_sdpa(model: PreTrainedModel) -> bool:
    """Switch a CPU target that runs stock SDPA with grouped-query heads to `grouped_sdpa_forward`; True if it
    did. Other targets (eager attention, a GPU, as many key/value heads as query heads) keep theirs."""
    cfg = model.config.get_text_config()
    heads = getattr(cfg, "num_attention_heads", None)
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    if model.config._attn_implementation != "sdpa" or model.device.type != "cpu" or not heads or kv == heads:
        return False
    model.set_attn_implementation(NAME)
    return True
