"""Read an EAGLE draft's shapes from its tensors (not its config) and its draft-side settings from its config.

H from the norms / fc rows, heads from q/k rows and head_dim, I from gate_proj, Ht from the fc width,
Vd from lm_head rows, biases iff present; RoPE, eps, context and EAGLE-3 feature ids from the config
with EAGLE defaults when absent. Every choice that differs from the config is noted for the report.
"""

from __future__ import annotations

import re

from .errors import CheckpointError, CorruptCheckpointError
from .spec import DraftSpec, as_int
from .variants import count_extra_layers, read_eagle3_variants, read_hass, read_mla

__all__ = ["read_common", "read_eagle1", "read_eagle3"]

_LAYER = re.compile(r"^layers\.(\d+)\.")


def _shape(spec: DraftSpec, canonical: str) -> tuple[int, ...] | None:
    return spec.shape(canonical)


def _require(spec: DraftSpec, canonical: str) -> tuple[int, ...]:
    shape = spec.shape(canonical)
    if shape is None:
        raise CorruptCheckpointError(
            f"{spec.family.upper()} draft in {spec.folder} is missing required weight {canonical}; the checkpoint "
            "is incomplete, re-download it or pick another draft")
    return shape


def read_common(spec: DraftSpec, top: dict, layer: dict) -> None:
    spec.config_vocab = as_int(layer.get("vocab_size"))
    spec.config_layers = as_int(layer.get("num_hidden_layers"))
    spec.rope, note = _rope(layer)
    spec.notes.append(note)
    eps = layer.get("rms_norm_eps")
    if eps is None:
        spec.rms_norm_eps = 1e-6
        spec.notes.append("rms_norm_eps 1e-06 (absent in config, EAGLE default)")
    else:
        spec.rms_norm_eps = float(eps)
    spec.max_positions = as_int(layer.get("max_position_embeddings")) or 2048
    spec.hidden_act = str(layer.get("hidden_act") or "silu")
    spec.embed_shape = _shape(spec, "embed_tokens.weight")


def _rope(layer: dict) -> tuple[dict, str]:
    """transformers rope_parameters from either the v5 `rope_parameters` or legacy rope_theta/rope_scaling."""
    params = layer.get("rope_parameters")
    if isinstance(params, dict) and params:
        rope = dict(params)
        theta = rope.get("rope_theta", layer.get("rope_theta"))
    else:
        rope = {}
        theta = layer.get("rope_theta")
        scaling = layer.get("rope_scaling")
        if isinstance(scaling, dict) and scaling:
            rope.update(scaling)
    kind = rope.pop("type", None)
    rope["rope_type"] = rope.get("rope_type") or kind or "default"
    if theta is None:
        rope["rope_theta"] = 10000.0
        note = "rope_theta 10000 (absent in config, EAGLE default)"
    else:
        rope["rope_theta"] = float(theta)
        note = f"rope_theta {float(theta):g} (draft config)"
    if rope["rope_type"] != "default":
        note += f", rope scaling {rope['rope_type']}"
    return rope, note


def _heads(spec: DraftSpec, layer: dict, q_rows: int, k_rows: int) -> None:
    cfg_heads = as_int(layer.get("num_attention_heads"))
    cfg_hd = as_int(layer.get("head_dim"))
    cfg_kv = as_int(layer.get("num_key_value_heads"))
    if cfg_hd and q_rows % cfg_hd == 0 and k_rows % cfg_hd == 0:
        head_dim = cfg_hd
        if spec.hidden != q_rows:
            spec.notes.append(f"head_dim {head_dim} from config (heads x head_dim = {q_rows} != hidden {spec.hidden})")
    elif cfg_heads and q_rows % cfg_heads == 0:
        head_dim = q_rows // cfg_heads
        if cfg_hd:
            spec.notes.append(f"head_dim {head_dim} derived from q_proj rows (config head_dim {cfg_hd} does not fit)")
    else:
        raise CheckpointError(
            f"cannot infer the attention heads of the draft in {spec.folder}: q_proj has {q_rows} rows and the "
            "config gives no usable num_attention_heads/head_dim; add them to its config.json")
    if k_rows % head_dim:
        raise CorruptCheckpointError(
            f"draft k_proj has {k_rows} rows, not a multiple of head_dim {head_dim}; the checkpoint is inconsistent")
    spec.head_dim = head_dim
    spec.num_heads = q_rows // head_dim
    spec.num_kv_heads = k_rows // head_dim
    if spec.num_heads % spec.num_kv_heads:
        raise CorruptCheckpointError(
            f"draft has {spec.num_heads} query heads but {spec.num_kv_heads} k/v heads (not a divisor); the "
            "checkpoint is inconsistent")
    if cfg_kv is None:
        spec.notes.append(f"k/v heads {spec.num_kv_heads} from k_proj rows (config has none)")
    elif cfg_kv != spec.num_kv_heads:
        spec.notes.append(f"k/v heads {spec.num_kv_heads} from k_proj rows (config says {cfg_kv})")


def _layer_common(spec: DraftSpec, prefix: str, layer: dict, q_in: int) -> None:
    q = _require(spec, f"{prefix}self_attn.q_proj.weight")
    k = _require(spec, f"{prefix}self_attn.k_proj.weight")
    if q[1] != q_in:
        raise CorruptCheckpointError(
            f"draft {prefix}self_attn.q_proj.weight is {list(q)}, expected input width {q_in}; the checkpoint does "
            f"not match the {spec.family.upper()} layout")
    _heads(spec, layer, q[0], k[0])
    gate = _shape(spec, f"{prefix}mlp.gate_proj.weight")
    spec.intermediate = gate[0] if gate else (as_int(layer.get("intermediate_size")) or 0)
    spec.qkv_bias = f"{prefix}self_attn.q_proj.bias" in spec.names
    spec.o_bias = f"{prefix}self_attn.o_proj.bias" in spec.names
    spec.mlp_bias = f"{prefix}mlp.gate_proj.bias" in spec.names
    if spec.qkv_bias:
        spec.notes.append("q/k/v biases found in weights (Qwen2-style), kept")
    elif layer.get("qkv_bias") or layer.get("attention_bias"):
        spec.notes.append("no q/k/v biases in weights (config asks for them); built without")


def _fc_bias_note(spec: DraftSpec, claimed: object, source: str) -> None:
    found = spec.fc_bias
    if claimed is None:
        spec.notes.append("fc bias found in weights, kept" if found else "no fc bias in weights; fc built without")
    elif bool(claimed) != found:
        spec.notes.append(f"fc bias {'found in weights, kept' if found else 'absent in weights, fc built without'} "
                          f"(config says {source}={str(bool(claimed)).lower()})")
    else:
        spec.notes.append("fc bias found in weights, kept" if found else "no fc bias (weights and config agree)")


def _layer_count(spec: DraftSpec, prefix_re: re.Pattern) -> int:
    indices = sorted({int(m.group(1)) for k in spec.names if (m := prefix_re.match(k))})
    if indices != list(range(len(indices))):
        raise CorruptCheckpointError(
            f"draft layers in {spec.folder} are numbered {indices}, not 0..n-1; the checkpoint is incomplete")
    return len(indices)


def read_eagle1(spec: DraftSpec, top: dict, layer: dict) -> None:
    fc = _require(spec, "fc.weight")
    hidden = fc[0]
    norm = _shape(spec, "layers.0.post_attention_layernorm.weight")
    if norm is not None and norm[0] != hidden:
        raise CorruptCheckpointError(
            f"draft fc.weight is {list(fc)} but layers.0.post_attention_layernorm has {norm[0]} entries; the "
            "checkpoint is inconsistent")
    spec.hidden = hidden
    spec.fc_in = fc[1]
    if fc[1] != 2 * hidden:
        raise CorruptCheckpointError(
            f"EAGLE-1 draft fc.weight is {list(fc)}; an EAGLE-1 fc must be [H, 2H] (embedding + target feature), "
            "so this checkpoint is not a usable EAGLE-1/2 draft")
    spec.feature_width = fc[1] - hidden
    spec.num_layers = _layer_count(spec, _LAYER)
    if spec.num_layers == 0:
        _require(spec, "layers.0.self_attn.q_proj.weight")
    _layer_common(spec, "layers.0.", layer, hidden)
    spec.fc_bias = "fc.bias" in spec.names
    if "eagle_fc_bias" in top or "eagle_fc_bias" in layer:
        _fc_bias_note(spec, top.get("eagle_fc_bias", layer.get("eagle_fc_bias")), "eagle_fc_bias")
    elif "fusion_bias" in top:
        _fc_bias_note(spec, top.get("fusion_bias"), "fusion_bias")
    else:
        _fc_bias_note(spec, layer.get("bias"), "bias")
    if spec.config_layers is not None and spec.config_layers != spec.num_layers:
        spec.notes.append(f"config says num_hidden_layers {spec.config_layers}, weights hold {spec.num_layers}; "
                          "following the weights")
    read_hass(spec, top, layer)
    if "layers.0.input_layernorm.weight" in spec.names and not spec.layer0_input_norm:
        spec.warnings.append("layers.0.input_layernorm.weight is present but EAGLE-1 skips layer 0's input norm; "
                             "ignored")
    if "lm_head.weight" in spec.names:
        spec.notes.append("lm_head inside the draft ignored; the target's lm_head is shared (same tensor)")
    if top.get("truncated_vocab_size") and spec.config_vocab and top["truncated_vocab_size"] < spec.config_vocab:
        spec.notes.append("truncated_vocab_size/token_map ignored: the target's full lm_head is used")


def read_eagle3(spec: DraftSpec, top: dict, layer: dict, speculators: bool) -> None:
    fc = _shape(spec, "fc.weight")
    norm = _shape(spec, "midlayer.post_attention_layernorm.weight") or _shape(spec, "midlayer.hidden_norm.weight")
    hidden = norm[0] if norm else _require(spec, "fc.weight")[0]
    if fc is not None and fc[0] != hidden:
        raise CorruptCheckpointError(
            f"draft fc.weight is {list(fc)} but the midlayer norms have {hidden} entries; the checkpoint is "
            "inconsistent")
    spec.hidden = hidden
    spec.fc_in = fc[1] if fc is not None else hidden
    spec.feature_width = spec.fc_in
    spec.fc_bias = "fc.bias" in spec.names
    if spec.fc_bias:
        spec.notes.append("fc bias found in weights, kept (EAGLE-3 fc usually has none)")
    spec.num_layers = 1 + count_extra_layers(spec)
    mla = "midlayer.self_attn.kv_a_proj_with_mqa.weight" in spec.names
    for i in range(1, 1 if mla else spec.num_layers):  # MLA layers are read (and multi-layer refused) below
        q = _require(spec, f"layers.{i}.self_attn.q_proj.weight")
        if q[1] != hidden:
            raise CorruptCheckpointError(f"EAGLE-3 draft layers.{i}.self_attn.q_proj.weight is {list(q)}; layers after "
                                         f"the first read width {hidden}, the checkpoint is inconsistent")
    if spec.num_layers > 1:
        spec.notes.append(f"multi-layer EAGLE-3: {spec.num_layers} decoder layers (layer 0 reads the 2H concat, "
                          "later layers H)")
    if mla:
        read_mla(spec, layer)
    else:
        _layer_common(spec, "midlayer.", layer, 2 * hidden)
    if spec.config_layers is not None and spec.config_layers != spec.num_layers:
        plural = "layer" if spec.num_layers == 1 else "layers"
        spec.notes.append(f"config says num_hidden_layers {spec.config_layers}, weights hold {spec.num_layers} "
                          f"{plural}; following the weights")
    _eagle3_vocab(spec, top, layer, hidden)
    eagle_config = _eagle3_knobs(spec, top, layer, speculators)
    read_eagle3_variants(spec, top, layer, eagle_config)
    if "t2d" in spec.names:
        spec.notes.append("t2d ignored (d2t maps draft ids to target ids)")


def _eagle3_vocab(spec: DraftSpec, top: dict, layer: dict, hidden: int) -> None:
    """The EAGLE-3 draft's own vocabulary: lm_head rows, d2t / t2d maps, and the config's draft_vocab_size."""
    lm = _shape(spec, "lm_head.weight")
    spec.lm_head_shape = lm
    d2t = _shape(spec, "d2t")
    t2d = _shape(spec, "t2d")
    spec.t2d_len = t2d[0] if t2d else None
    cfg_vd = as_int(top.get("draft_vocab_size")) or as_int(layer.get("draft_vocab_size"))
    spec.draft_vocab = lm[0] if lm else (d2t[0] if d2t else cfg_vd)
    if cfg_vd and spec.draft_vocab and cfg_vd != spec.draft_vocab:
        spec.notes.append(f"draft vocab {spec.draft_vocab} from the weights (config says {cfg_vd})")
    if lm is not None and lm[1] != hidden:
        raise CorruptCheckpointError(f"draft lm_head.weight is {list(lm)}, expected [Vd, {hidden}]; the checkpoint "
                                     "is inconsistent")
    if d2t is not None and spec.draft_vocab is not None and d2t[0] != spec.draft_vocab:
        raise CorruptCheckpointError(f"draft d2t has {d2t[0]} entries but lm_head has {spec.draft_vocab} rows; the "
                                     "checkpoint is inconsistent")
    if layer.get("tie_word_embeddings") or top.get("tie_word_embeddings"):
        spec.notes.append("tie_word_embeddings true in config ignored: the draft lm_head is never tied")


def _eagle3_knobs(spec: DraftSpec, top: dict, layer: dict, speculators: bool) -> dict:
    """Feature layer ids and variant knobs from the draft's config; returns its `eagle_config` block (or {})."""
    eagle_config = found if isinstance(found := top.get("eagle_config"), dict) else (
        nested if isinstance(nested := layer.get("eagle_config"), dict) else {})
    if top.get("eagle_aux_hidden_state_layer_ids"):
        spec.feature_ids = tuple(int(i) for i in top["eagle_aux_hidden_state_layer_ids"])
        spec.feature_id_rule = "as_given"
    elif eagle_config.get("eagle_aux_hidden_state_layer_ids"):
        # output-of-layer ids start at layer 1's output (SpecForge/ModelOpt [1, L//2-1, L-4]); NVIDIA v3 writes
        # hidden-state boundaries ([24, 30, 36] for gpt-oss-120b's 36 blocks, SGLang #32334): +1 iff the first id is 1
        # (SGLang #25454's rule)
        spec.feature_ids = tuple(int(i) for i in eagle_config["eagle_aux_hidden_state_layer_ids"])
        spec.feature_id_rule = "plus_one" if spec.feature_ids[0] == 1 else "boundary"
    # variant knobs
    if "norm_before_residual" in top:
        spec.norm_before_residual = bool(top["norm_before_residual"])
        spec.notes.append(f"norm_before_residual {str(spec.norm_before_residual).lower()} (draft config)")
    elif speculators:
        spec.norm_before_residual = True
        spec.notes.append("norm_before_residual true (speculators default)")
    return eagle_config
