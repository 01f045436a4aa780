"""Sliding attention windows under our own 4-D masks.

Our tree verifies, static-cache forwards and packed calibration texts hand the target a ready 4-D additive mask,
and `transformers` then uses that mask as given for every layer: its sliding-window builder only windows masks it
builds itself. A target with a window in use (Mistral v0.1, Qwen2 with `use_sliding_window`, Gemma 2/3's local
layers) would attend past the window in those forwards, where plain decoding does not.

`AttentionWindow.of(model)` reads the window from the config; `apply` hides every key more than `size - 1`
positions behind its query (transformers' rule: key position > query position - size). A model with layers of
both kinds gets a mask per layer type (the dict its forward accepts in place of one mask); one whose attention
layers all slide gets the windowed mask alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["AttentionWindow"]


@dataclass(frozen=True)
class AttentionWindow:
    size: int | None  # tokens a query sees, itself included; None: no window in use
    mixed: bool = False  # full and sliding layers both: the forward takes a dict of masks by layer type

    @classmethod
    def of(cls, model) -> "AttentionWindow":
        cfg = model.config.get_text_config()
        size = getattr(cfg, "sliding_window", None)
        if not size or getattr(cfg, "use_sliding_window", True) is False:
            return cls(None)
        kinds = set(getattr(cfg, "layer_types", None) or ["sliding_attention"])
        if "sliding_attention" not in kinds:  # e.g. Qwen2 with every layer under max_window_layers
            return cls(None)
        return cls(int(size), mixed=len(kinds) > 1)

    def apply(self, mask: torch.Tensor, key_positions: torch.Tensor,
              query_positions: torch.Tensor) -> torch.Tensor | dict[str, torch.Tensor]:
        """mask [1, 1, n, K] additive (full attention); key_positions [K], query_positions [n] -> the mask to pass
        as `attention_mask` (unchanged when no window is in use)."""
        if self.size is None:
            return mask
        behind = key_positions[None] <= query_positions[:, None] - self.size  # [n, K] outside the window
        windowed = mask.masked_fill(behind[None, None], torch.finfo(mask.dtype).min)  # [1, 1, n, K]
        if self.mixed:
            return {"full_attention": mask, "sliding_attention": windowed}
        return windowed
