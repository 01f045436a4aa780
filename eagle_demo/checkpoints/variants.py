"""Detection of the EAGLE variants published in 2025-2026 (see docs/checkpoint-formats.md, "Newer layouts").

HASS-style EAGLE-1 (extra norms), EAGLE-3.1 (fc_norm, norm_output), NVIDIA Eagle3 (norm_before_fc with
input_norm, use_aux_hidden_state false) and multi-layer EAGLE-3. Shapes come from the weights; a config
flag only decides what the weights cannot show (norm_output).
"""

from __future__ import annotations

import re

from .errors import CheckpointError, CorruptCheckpointError
from .spec import DraftSpec, as_int

__all__ = ["read_hass", "read_eagle3_variants", "read_mla", "count_extra_layers", "declared_family"]

_EAGLE1_ARCHS = ("LlamaForCausalLMEagle", "Qwen2ForCausalLMEagle", "EagleSpeculator", "EAGLEModel",
                 "EagleLlamaForCausalLM")


def declared_family(config: dict) -> str | None:
    """"eagle1" / "eagle3" as the draft's config states it (None when it states neither)."""
    archs = [str(a) for a in config.get("architectures") or []]
    kind = str(config.get("speculators_model_type") or "")
    if kind == "eagle" or config.get("model_type") == "eagle" or any(a in _EAGLE1_ARCHS for a in archs):
        return "eagle1"
    if kind == "eagle3" or any("Eagle3" in a for a in archs):
        return "eagle3"
    return None

# stored norm name -> where it sits (speculators EagleSpeculator, vLLM eagle.py add_para_norm)
HASS_ROLES = {
    "embed_layernorm.weight": "embed_norm", "embedding_layernorm.weight": "embed_norm",
    "post_embedding_layernorm.weight": "embed_norm", "enorm.weight": "embed_norm",
    "hidden_layernorm.weight": "hidden_norm", "hidden_states_layernorm.weight": "hidden_norm",
    "hnorm.weight": "hidden_norm",
    "lm_head_layernorm.weight": "lm_head_norm", "pre_lm_head_layernorm.weight": "lm_head_norm",
}
_WHERE = {"embed_norm": "on the embedding before fc", "hidden_norm": "on the feature before fc",
          "lm_head_norm": "before the lm_head only"}
_LAYER = re.compile(r"^layers\.(\d+)\.")


def read_hass(spec: DraftSpec, top: dict, layer: dict) -> None:
    """Map HASS extra norms to the head's canonical names; notes say where each one is applied."""
    found = [(stored, HASS_ROLES[stored]) for stored in HASS_ROLES if stored in spec.names]
    roles = []
    for stored, role in found:
        if role in roles:
            raise CorruptCheckpointError(f"draft in {spec.folder} has two norms for the same place ({stored}); the "
                                         "checkpoint is inconsistent")
        roles.append(role)
        spec.names[f"{role}.weight"] = spec.names.pop(stored)
        spec.notes.append(f"HASS norm {stored.removesuffix('.weight')} applied {_WHERE[role]}")
    if not found:
        if top.get("layernorms") or layer.get("add_para_norm"):
            spec.notes.append("config asks for extra norms but the weights have none; run as plain EAGLE-1")
        return
    spec.notes.append(f"extra norms found ({', '.join(s for s, _ in found)}), HASS-style")
    spec.hass_norms = tuple(roles)
    spec.layer0_input_norm = "layers.0.input_layernorm.weight" in spec.names
    if spec.layer0_input_norm:
        spec.notes.append("layers.0.input_layernorm kept (HASS drafts keep layer 0's input norm)")


def count_extra_layers(spec: DraftSpec) -> int:
    """Layers after the first (`layers.1..n-1` once layer 0 is named midlayer); numbering checked."""
    indices = sorted({int(m.group(1)) for k in spec.names if (m := _LAYER.match(k))})
    if indices and indices != list(range(1, len(indices) + 1)):
        raise CorruptCheckpointError(f"EAGLE-3 draft layers in {spec.folder} are numbered 0 and {indices}, not 0..n-1; "
                                     "the checkpoint is incomplete")
    return len(indices)


def read_eagle3_variants(spec: DraftSpec, top: dict, layer: dict, eagle_config: dict) -> None:
    """fc_norm / input_norm / norm_output / unfused input; after fc, hidden and feature ids are known."""
    if declared_family(spec.config) == "eagle1":
        spec.notes.append("config declares EAGLE-1 but the weights are EAGLE-3; loaded as EAGLE-3 (an EAGLE-1 loop "
                          "would feed it the unfused last hidden state, SGLang #21272)")
    fc_norms = sorted(k for k in spec.names if k.startswith("fc_norm."))
    if fc_norms:
        spec.fc_norms = len(fc_norms)
        widths = {spec.shape(k)[0] for k in fc_norms}
        if len(widths) != 1 or spec.fc_norms * widths.pop() != spec.fc_in:
            raise CorruptCheckpointError(f"EAGLE-3.1 fc_norm weights in {spec.folder} do not split the fc input "
                                         f"{spec.fc_in} into {spec.fc_norms} equal parts; "
                                         "the checkpoint is inconsistent")
        spec.notes.append(f"EAGLE-3.1 fc_norm: {spec.fc_norms} per-feature RMSNorms before fc")
    if "input_norm.weight" in spec.names:
        width = spec.shape("input_norm.weight")[0]
        if width != spec.fc_in:
            raise CorruptCheckpointError(f"draft input_norm has {width} entries but the fc reads {spec.fc_in}; the "
                                         "checkpoint is inconsistent")
        spec.input_norm = True
        spec.notes.append("norm_before_fc: input_norm over the concatenated features before fc (NVIDIA Eagle3)")
    elif top.get("norm_before_fc") or layer.get("norm_before_fc"):
        spec.notes.append("config says norm_before_fc but the weights have no input_norm; built without")
    flag = top.get("norm_output", layer.get("norm_output"))
    if flag is not None:
        spec.norm_output = bool(flag)
        spec.notes.append(f"norm_output {str(spec.norm_output).lower()} (draft config"
                          f"{'; EAGLE-3.1: the normed state is fed back' if spec.norm_output else ''})")
    if eagle_config.get("use_aux_hidden_state") is False or "fc.weight" not in spec.names:
        spec.use_aux = False
        spec.fc_in = spec.feature_width = spec.hidden
        why = "use_aux_hidden_state false" if eagle_config.get("use_aux_hidden_state") is False else "no fc weight"
        spec.notes.append(f"{why}: the target's post-norm last hidden state goes in unfused (fc not used)")
        if "fc.weight" in spec.names:  # kept aside (not run): `eagle_demo.probe` measures the fused reading too
            spec.spare_fc_in = spec.shape("fc.weight")[1]
            spec.names["spare_fc.weight"] = spec.names.pop("fc.weight")
            spec.notes.append("fc weights kept aside, unused unless the probe finds the fused reading clearly better")
        if spec.fc_norms or spec.input_norm:
            raise CorruptCheckpointError(f"draft in {spec.folder} has fc norms but no feature fusion; the checkpoint "
                                         "is inconsistent")


def read_mla(spec: DraftSpec, layer: dict) -> None:
    """MLA attention in the EAGLE-3 layer (vLLM deepseek_eagle3.py): ranks and head dims from the weights, the
    head count from the config (kv_b_proj rows = heads x (nope + v), o_proj columns = heads x v)."""
    p, two_h = "midlayer.self_attn.", 2 * spec.hidden
    kv_a, norm = spec.shape(p + "kv_a_proj_with_mqa.weight"), spec.shape(p + "kv_a_layernorm.weight")
    kv_b, o_proj = spec.shape(p + "kv_b_proj.weight"), spec.shape(p + "o_proj.weight")
    q_a, q = spec.shape(p + "q_a_proj.weight"), spec.shape(p + "q_proj.weight") or spec.shape(p + "q_b_proj.weight")
    heads = as_int(layer.get("num_attention_heads"))
    if None in (norm, kv_b, o_proj, q) or not heads:
        raise CheckpointError(f"the MLA EAGLE-3 draft in {spec.folder} lacks kv_a_layernorm/kv_b_proj/o_proj/q weights "
                              "or num_attention_heads in its config; the checkpoint is incomplete")
    if kv_a[1] != two_h or (q_a if q_a is not None else q)[1] != two_h:
        raise CorruptCheckpointError(f"MLA EAGLE-3 draft projections in {spec.folder} do not read the 2H concat "
                                     f"({two_h}); the checkpoint is inconsistent")
    kv_rank = norm[0]
    v_dim = o_proj[1] // heads
    mla = {"kv_lora_rank": kv_rank, "qk_rope_head_dim": kv_a[0] - kv_rank, "v_head_dim": v_dim,
           "qk_nope_head_dim": kv_b[0] // heads - v_dim, "q_lora_rank": q_a[0] if q_a is not None else None}
    if q[0] != heads * (mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]) or kv_b[0] % heads or o_proj[1] % heads:
        raise CorruptCheckpointError(f"MLA EAGLE-3 draft in {spec.folder}: q/kv_b/o shapes do not agree with "
                                     f"{heads} heads; the checkpoint is inconsistent")
    spec.mla = mla
    spec.num_heads = spec.num_kv_heads = heads
    spec.head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    gate = spec.shape("midlayer.mlp.gate_proj.weight")
    spec.intermediate = gate[0] if gate else (as_int(layer.get("intermediate_size")) or 0)
    spec.notes.append(f"MLA attention in the draft layer (kv_lora_rank {kv_rank}, q_lora_rank {mla['q_lora_rank']}, "
                      f"rope {mla['qk_rope_head_dim']}, nope {mla['qk_nope_head_dim']}, v {v_dim}); dense MLP")
    if spec.num_layers > 1:
        spec.unsupported = (f"the MLA EAGLE-3 draft in {spec.folder} has {spec.num_layers} layers; only single-layer "
                            "MLA drafts are built here, serve it with vLLM")
