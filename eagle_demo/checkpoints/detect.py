"""Recognize a draft folder from its weights first and its config second (never from the repo name).

`detect_draft(folder)` returns a DraftSpec: the family (eagle1, eagle3, medusa, causal_lm, unknown), the
source layout, the tensor names mapped to the canonical names of our heads, every shape that matters
(taken from tensors, not configs) and the draft-side settings (RoPE, eps, context, feature ids).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from .errors import CorruptCheckpointError
from .files import WeightFiles, read_config, scan_weights
from .mtp import find_mtp, read_mtp
from .shapes import read_common, read_eagle1, read_eagle3
from .spec import HASS_NORMS, DraftSpec

__all__ = ["DraftSpec", "detect_draft"]

_LAYER = re.compile(r"^layers\.(\d+)\.")
_MEDUSA_V1 = re.compile(r"^\d+\.\d+\.(linear\.)?(weight|bias)$")


def detect_draft(folder: Path) -> DraftSpec:
    folder = Path(folder)
    raw_cfg = read_config(folder)
    weights = scan_weights(folder)
    if weights is None:
        raise CorruptCheckpointError(
            f"draft folder {folder} has no weight files (model.safetensors, pytorch_model.bin or sharded "
            "*.index.json); pass a folder or repo that holds the draft weights")
    cfg = raw_cfg or {}
    top, layer, hint, notes = _unwrap_config(cfg)
    spec = DraftSpec(folder=folder, family="unknown", layout="unknown", weights=weights, config=cfg,
                     layer_config=layer, notes=notes)
    if raw_cfg is None:
        spec.warnings.append("no config.json in the draft folder; shapes from the weights, EAGLE defaults for RoPE")
    spec.source_dtype = _main_dtype(weights)

    if _is_medusa(cfg, weights):
        return _medusa(spec, cfg, weights)

    found = find_mtp(weights)
    if found is not None:
        return read_mtp(spec, found)
    stripped = _strip_prefixes(weights, spec)
    speculators = hint == "speculators" or "fusion_fc.weight" in stripped
    if speculators:
        stripped = {_speculators_name(k): v for k, v in stripped.items()}
    if "fc.weight" not in stripped and not _unfused_eagle3(stripped):
        return _not_eagle(spec, cfg, stripped)

    eagle3 = _looks_eagle3(cfg, top, stripped, weights)
    if eagle3 and not any(k.startswith("midlayer.") for k in stripped):
        stripped = {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v
                    for k, v in stripped.items()}
    spec.names = stripped
    spec.family = "eagle3" if eagle3 else "eagle1"
    spec.layout = _layout_name(spec.family, cfg, top, hint, speculators, stripped)
    read_common(spec, top, layer)
    if eagle3:
        read_eagle3(spec, top, layer, speculators)
    else:
        read_eagle1(spec, top, layer)
    return spec


# ---- config unwrapping -----------------------------------------------------------------------------

def _unwrap_config(cfg: dict) -> tuple[dict, dict, str, list[str]]:
    """(top-level dict, decoder-layer dict, layout hint, notes)."""
    if cfg.get("model_type") == "eagle" and isinstance(cfg.get("model"), dict):
        inner = cfg["model"]
        return cfg, inner, "vllm", [
            f"config wrapped {{model_type: eagle}} -> inner {inner.get('model_type', 'llama')} config"]
    if isinstance(cfg.get("transformer_layer_config"), dict):
        inner = cfg["transformer_layer_config"]
        return cfg, inner, "speculators", [
            f"speculators config: layer settings from transformer_layer_config ({inner.get('model_type', 'llama')})"]
    archs = [str(a) for a in cfg.get("architectures") or []]
    if cfg.get("speculators_model_type") or any(a.endswith("Speculator") for a in archs):
        return cfg, cfg, "speculators", []
    return cfg, cfg, "", []


def _layout_name(family: str, cfg: dict, top: dict, hint: str, speculators: bool, names: dict) -> str:
    archs = [str(a) for a in cfg.get("architectures") or []]
    if family == "eagle1":
        if speculators:
            return "speculators-eagle1"
        if hint == "vllm":
            return "vllm-eagle1"
        if any(n in names for n in HASS_NORMS):
            return "hass-eagle1"
        return "yuhuili-eagle1"
    if "midlayer.self_attn.kv_a_proj_with_mqa.weight" in names:
        return "mla-eagle3"
    if speculators:
        return "speculators-eagle3"
    if hint == "vllm":
        return "vllm-eagle3"
    if any(a.endswith("Eagle3") for a in archs) or isinstance(top.get("eagle_config"), dict):
        return "nvidia-eagle3" if _modelopt_eagle3(top, names) else "specforge-eagle3"
    if any(a.startswith("Eagle3") for a in archs) or "target_model_type" in cfg:
        return "angelslim-eagle3"
    return "yuhuili-eagle3"


# NVIDIA Model-Optimizer's export fills these eagle_config keys from its own EagleConfig (its `eagle_config`
# template in modelopt/torch/export/plugins/hf_spec_export.py); SpecForge writes only the ids and use_aux_hidden_state
_MODELOPT_KEYS = ("norm_before_fc", "use_input_layernorm_in_first_layer", "use_last_layernorm", "use_mtp_layernorm",
                  "next_layer_regular", "parallel_draft_step", "parallel_draft_heads_num_layers")


def _modelopt_eagle3(top: dict, names: dict) -> bool:
    """An NVIDIA ModelOpt EAGLE-3 draft (v2/v3, vLLM #40656, SGLang #32334) rather than a SpecForge one: a norm over
    the fused features (`input_norm.weight`, `norm_before_fc`), no fusion (`use_aux_hidden_state: false` or no fc),
    or ModelOpt's own eagle_config keys. Only the label differs: both load through the same readers."""
    block = found if isinstance(found := top.get("eagle_config"), dict) else {}
    return ("input_norm.weight" in names or "fc.weight" not in names or "norm_before_fc" in top
            or block.get("use_aux_hidden_state") is False or any(k in block for k in _MODELOPT_KEYS))


# ---- name mapping ----------------------------------------------------------------------------------

def _strip_prefixes(weights: WeightFiles, spec: DraftSpec) -> dict[str, str]:
    """Canonical-ish name -> stored name, with wrapper prefixes (`model.`, `model.model.`) removed."""
    out: dict[str, str] = {}
    for stored in sorted(weights.tensors):
        name = stored
        while name.startswith("model."):
            name = name[len("model."):]
        if name in out:
            spec.ignored.append(stored)  # duplicate under another prefix; the first one wins
            continue
        out[name] = stored
    return out


def _speculators_name(name: str) -> str:
    if name.startswith("fusion_fc."):
        return "fc." + name[len("fusion_fc."):]
    if name.startswith("transformer."):
        return "layers.0." + name[len("transformer."):]
    return name


def _looks_eagle3(cfg: dict, top: dict, names: dict, weights: WeightFiles) -> bool:
    """EAGLE-3 if: midlayer.*, d2t/t2d, an eagle3 speculators type / Eagle3 architecture, or a layer-0
    q_proj that reads 2H (the [embedding, hidden] concat) where H is the fc output width."""
    if any(k.startswith("midlayer.") for k in names) or "d2t" in names or "t2d" in names:
        return True
    kind = str(top.get("speculators_model_type") or cfg.get("speculators_model_type") or "")
    if kind == "eagle3" or any(str(a).startswith("Eagle3") or str(a).endswith("Eagle3")
                               for a in cfg.get("architectures") or []):
        return True
    if "fc.weight" not in names:
        return True  # only an unfused EAGLE-3 gets here without fc
    q = names.get("layers.0.self_attn.q_proj.weight")
    fc = weights.tensors[names["fc.weight"]].shape
    return q is not None and len(fc) == 2 and weights.tensors[q].shape[1] == 2 * fc[0]


def _unfused_eagle3(names: dict) -> bool:
    """An EAGLE-3 layer (hidden_norm beside the attention) without fc: NVIDIA's use_aux_hidden_state false."""
    return any(f"{p}hidden_norm.weight" in names and f"{p}self_attn.q_proj.weight" in names
               for p in ("midlayer.", "layers.0."))


# ---- other families --------------------------------------------------------------------------------

def _is_medusa(cfg: dict, weights: WeightFiles) -> bool:
    if "medusa_num_heads" in cfg or cfg.get("model_type") == "medusa":
        return True
    names = list(weights.tensors)
    if any(n.startswith(("medusa_head.", "medusa_heads.", "medusa_lm_head.")) for n in names):
        return True
    if any(n.startswith("blocks.") for n in names) and any(n.startswith("lm_heads.") for n in names):
        return True
    return bool(names) and all(_MEDUSA_V1.match(n) for n in names)


def _medusa(spec: DraftSpec, cfg: dict, weights: WeightFiles) -> DraftSpec:
    spec.family = "medusa"
    spec.layout = "vllm-medusa" if cfg.get("model_type") == "medusa" else "medusa"
    heads = cfg.get("medusa_num_heads") or cfg.get("num_heads")
    spec.description = f"a Medusa head{f' ({heads} heads)' if heads else ''}"
    spec.ignored = sorted(weights.tensors)
    return spec


def _not_eagle(spec: DraftSpec, cfg: dict, names: dict) -> DraftSpec:
    layers = {m.group(1) for k in names if (m := _LAYER.match(k))}
    has_embed = any(k.endswith("embed_tokens.weight") or k.endswith("wte.weight") for k in names)
    archs = [str(a) for a in cfg.get("architectures") or []]
    if (layers and has_embed) or (any(a.endswith("ForCausalLM") for a in archs) and len(names) > 8):
        spec.family = "causal_lm"
        spec.layout = "causal_lm"
        kind = cfg.get("model_type") or (archs[0] if archs else "causal LM")
        spec.description = f"a full causal LM ({kind}, {len(layers) or '?'} layers)"
        if cfg.get("num_nextn_predict_layers"):  # MTP declared, but no MTP layer in these weights
            spec.description += (f" whose config declares num_nextn_predict_layers {cfg['num_nextn_predict_layers']} "
                                 "but whose weights hold no MTP layer (no model.mtp_layers.*, model.layers.{L}.eh_proj "
                                 "or mtp.fc)")
    else:
        spec.description = "an unrecognized checkpoint (no fc.weight, no Medusa or causal-LM keys)"
    spec.ignored = sorted(spec.weights.tensors) if spec.weights else []
    return spec



def _main_dtype(weights: WeightFiles) -> str:
    counts = Counter(t.dtype for t in weights.tensors.values() if t.dtype.startswith(("float", "bfloat")))
    return counts.most_common(1)[0][0] if counts else "float32"
