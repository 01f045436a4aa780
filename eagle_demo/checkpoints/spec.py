"""DraftSpec: everything known about a draft checkpoint before any weight is materialized."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .files import WeightFiles

__all__ = ["DraftSpec", "HASS_NORMS", "as_int"]

# Extra norms of HASS-style / para-norm EAGLE-1 variants (see checkpoint-formats.md 1.3, 2.3, 2.7).
HASS_NORMS = ("embed_layernorm.weight", "hidden_layernorm.weight", "lm_head_layernorm.weight",
              "embedding_layernorm.weight", "pre_lm_head_layernorm.weight", "post_embedding_layernorm.weight",
              "hidden_states_layernorm.weight", "enorm.weight", "hnorm.weight")


@dataclass
class DraftSpec:
    """Family, layout, canonical names and shapes of a draft (from tensor headers and its config)."""

    folder: Path
    family: str  # eagle1 | eagle3 | mtp | medusa | causal_lm | unknown
    layout: str
    weights: WeightFiles | None
    config: dict  # top-level config.json ({} when absent)
    layer_config: dict  # the dict holding the decoder-layer settings (inner/transformer_layer_config)
    names: dict[str, str] = field(default_factory=dict)  # canonical name -> stored name
    ignored: list[str] = field(default_factory=list)  # stored names dropped during name mapping
    description: str = ""  # what the folder holds, for non-EAGLE families
    hidden: int = 0
    num_layers: int = 0
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    intermediate: int = 0
    fc_in: int = 0  # fc input width
    feature_width: int = 0  # the target-feature part of the fc input (EAGLE-1: H, EAGLE-3: n * Ht)
    fc_bias: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    embed_shape: tuple[int, ...] | None = None
    lm_head_shape: tuple[int, ...] | None = None
    draft_vocab: int | None = None  # EAGLE-3 Vd (None: same as the target vocab)
    t2d_len: int | None = None
    config_vocab: int | None = None
    config_layers: int | None = None
    rope: dict = field(default_factory=dict)  # transformers rope_parameters
    rms_norm_eps: float = 1e-6
    hidden_act: str = "silu"
    max_positions: int = 2048
    feature_ids: tuple[int, ...] | None = None
    feature_id_rule: str = "default"  # default | plus_one | as_given | boundary
    norm_before_residual: bool = False
    source_dtype: str = "float32"
    fc_norms: int = 0  # EAGLE-3.1: one RMSNorm per fused feature before fc
    input_norm: bool = False  # NVIDIA norm_before_fc: one RMSNorm over the concatenated features
    norm_output: bool = False  # EAGLE-3.1: the final norm's output is fed back and read by the lm_head
    use_aux: bool = True  # False: no fc, the target's last hidden state goes in unfused (NVIDIA v2)
    spare_fc_in: int = 0  # use_aux false with fc weights present: their input width (kept for the probe)
    hass_norms: tuple[str, ...] = ()  # HASS extra norms present: embed_norm / hidden_norm / lm_head_norm
    layer0_input_norm: bool = False  # HASS: layer 0 keeps its input norm
    mla: dict = field(default_factory=dict)  # MLA draft layer: q_lora_rank, kv_lora_rank, qk_* / v_head_dim
    mtp_style: str = ""  # deepseek | qwen3_next | mimo
    mtp_index: int | None = None  # DeepSeek-style MTP layer index in the checkpoint
    unsupported: str | None = None  # reason load_pair refuses a recognized variant
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def stored(self, canonical: str) -> str | None:
        return self.names.get(canonical)

    def shape(self, canonical: str) -> tuple[int, ...] | None:
        stored = self.names.get(canonical)
        if stored is None or self.weights is None:
            return None
        return self.weights.tensors[stored].shape



def as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
