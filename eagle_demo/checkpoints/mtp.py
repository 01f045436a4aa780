"""MTP heads inside a target checkpoint (or in a folder beside it): detect, plan, build.

DeepSeek-V3 / GLM-4.5 style: `model.layers.{L}.{enorm, hnorm, eh_proj, shared_head.norm, shared_head.head,
embed_tokens}` plus a full decoder block under the same prefix, L >= num_hidden_layers (vLLM
`deepseek_mtp.py`, `get_spec_layer_idx_from_weight_name`). Qwen3-Next / Qwen3.5 style: `mtp.{fc,
pre_fc_norm_embedding, pre_fc_norm_hidden, layers.0.*, norm}` with the target's embedding and lm_head (vLLM
`qwen3_next_mtp.py`). MiMo-7B style: `model.mtp_layers.{k}.{token_layernorm, hidden_layernorm, input_proj,
final_layernorm}` with the Qwen2 block's tensors stored under the same prefix (the MiMo repo's `MiMoMTPLayers`;
vLLM `mimo_mtp.py` and SGLang `mimo_mtp.py` insert `mtp_block.` when loading them, and a `mtp_block.` prefix in
the file is accepted too); embedding and lm_head are the target's. The block is built from the target family's
own transformers classes.
"""

from __future__ import annotations

import copy
import re
import sys

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

from ..drafts.mtp import MtpHead, MtpParts
from .errors import CorruptCheckpointError, IncompatiblePairError, UnsupportedLayoutError
from .files import WeightFiles
from .spec import DraftSpec

__all__ = ["find_mtp", "read_mtp", "plan_mtp", "make_mtp_head", "mtp_key_plan", "load_mtp_head", "mtp_parts"]

_DS = re.compile(r"^((?:model\.)?layers\.(\d+)\.)(?:enorm|hnorm|eh_proj)\.weight$")
_QWEN_PREFIXES = ("mtp.", "model.mtp.", "model.language_model.mtp.")
_MIMO = re.compile(r"^((?:model\.)?mtp_layers\.(\d+)\.)input_proj\.weight$")
_MIMO_ANY = re.compile(r"^(?:model\.)?mtp_layers\.(\d+)\.")
_EXPERTS = re.compile(r"^(block\..*experts)\.(gate_up_proj|down_proj)$")
_LINEAR_KINDS = ("linear_attention", "mamba", "gated_deltanet", "linear")


def find_mtp(weights: WeightFiles) -> tuple[str, str, int | None] | None:
    """(style, stored prefix, DeepSeek layer index) of the first MTP layer, or None."""
    hits = sorted({(int(m.group(2)), m.group(1)) for k in weights.tensors if (m := _DS.match(k))})
    if hits:
        return "deepseek", hits[0][1], hits[0][0]
    for prefix in _QWEN_PREFIXES:
        if f"{prefix}fc.weight" in weights.tensors and f"{prefix}pre_fc_norm_hidden.weight" in weights.tensors:
            return "qwen3_next", prefix, None
    mimo = sorted((int(m.group(2)), m.group(1)) for k in weights.tensors if (m := _MIMO.match(k)))
    if mimo and f"{mimo[0][1]}hidden_layernorm.weight" in weights.tensors:
        return "mimo", mimo[0][1], None
    return None


def read_mtp(spec: DraftSpec, found: tuple[str, str, int | None]) -> DraftSpec:
    style, prefix, index = found
    names = spec.weights.tensors
    spec.family, spec.mtp_style, spec.mtp_index = "mtp", style, index
    if style == "deepseek":
        spec.layout = "deepseek-mtp"
        alias = {"enorm.weight": "enorm.weight", "hnorm.weight": "hnorm.weight", "fc.weight": "eh_proj.weight",
                 "out_norm.weight": "shared_head.norm.weight", "lm_head.weight": "shared_head.head.weight",
                 "embed_tokens.weight": "embed_tokens.weight"}
        block_prefix = prefix
        layers = sorted({int(m.group(2)) for k in names if (m := _DS.match(k))})
        spec.description = f"DeepSeek-V3-style MTP layer {index}"
    elif style == "mimo":
        spec.layout = "mimo-mtp"
        alias = {"enorm.weight": "token_layernorm.weight", "hnorm.weight": "hidden_layernorm.weight",
                 "fc.weight": "input_proj.weight", "out_norm.weight": "final_layernorm.weight"}
        nested = any(k.startswith(prefix + "mtp_block.") for k in names)
        block_prefix = prefix + "mtp_block." if nested else prefix
        layers = sorted({int(m.group(1)) for k in names if (m := _MIMO_ANY.match(k))})
        spec.description = f"MiMo-style MTP layer {_MIMO_ANY.match(prefix).group(1)}"
    else:
        spec.layout = "qwen3next-mtp"
        alias = {"enorm.weight": "pre_fc_norm_embedding.weight", "hnorm.weight": "pre_fc_norm_hidden.weight",
                 "fc.weight": "fc.weight", "out_norm.weight": "norm.weight"}
        block_prefix = prefix + "layers.0."
        layers = sorted({int(k[len(prefix) + 7:].split(".")[0]) for k in names if k.startswith(prefix + "layers.")})
        spec.description = "Qwen3-Next-style MTP module"
    mapped = {canonical: prefix + stored for canonical, stored in alias.items() if prefix + stored in names}
    own = set(mapped.values())
    for stored in names:
        if stored.startswith(block_prefix) and stored not in own:
            mapped["block." + stored[len(block_prefix):]] = stored
    spec.names = mapped
    # unmapped MTP tensors (further MTP layers) are reported; the target's own weights are not "ignored"
    spec.ignored = sorted(k for k in set(names) - set(mapped.values())
                          if (m := _DS.match(k)) and int(m.group(2)) != index or k.startswith(prefix)
                          or style == "mimo" and _MIMO_ANY.match(k))
    fc = spec.shape("fc.weight")
    if fc is None or len(fc) != 2 or fc[1] != 2 * fc[0]:
        name = {"deepseek": "eh_proj", "mimo": "input_proj"}.get(style, "fc")
        raise CorruptCheckpointError(f"MTP {name} in {spec.folder} is {list(fc or ())}, expected [H, 2H]; the "
                                     "checkpoint is inconsistent")
    spec.hidden = fc[0]
    spec.fc_in = fc[1]
    spec.num_layers = 1
    spec.embed_shape = spec.shape("embed_tokens.weight")
    spec.lm_head_shape = spec.shape("lm_head.weight")
    spec.notes.append(f"{spec.description} found under '{prefix}' ({spec.layout}); run as an EAGLE-style draft "
                      "over the target's post-norm last hidden state")
    if len(layers) > 1:
        spec.notes.append(f"{len(layers)} MTP layers in the checkpoint; the first is used at every draft depth")
    return spec


def mtp_parts(config) -> MtpParts:
    """The target family's decoder layer, RMSNorm and rotary classes, from its transformers module."""
    model_cls = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(config), None)
    module = sys.modules.get(model_cls.__module__) if model_cls is not None else None
    stem = model_cls.__name__.removesuffix("ForCausalLM") if model_cls is not None else ""
    found = [getattr(module, stem + s, None) if module else None
             for s in ("DecoderLayer", "RMSNorm", "RotaryEmbedding")]
    if not all(found):
        raise UnsupportedLayoutError(f"the target's model type '{config.model_type}' has no decoder-layer/RMSNorm/"
                                     "rotary classes in transformers to build its MTP layer from; pick an EAGLE draft")
    return MtpParts(*found)


def plan_mtp(plan, spec: DraftSpec, target) -> None:
    """Fill `plan` (adapt.DraftPlan) for an MTP head; raises CheckpointError subclasses."""
    text = target.config.get_text_config()
    kinds = [str(k) for k in (getattr(text, "layer_types", None) or [])]
    linear = sorted({k for k in kinds if k in _LINEAR_KINDS})
    if linear:
        raise UnsupportedLayoutError(f"the target {target.folder} has {linear[0]} layers whose recurrent state "
                                     "cannot be rolled back after a rejected draft, so this playground cannot verify "
                                     "drafts on it; use vLLM or SGLang for this model")
    if spec.hidden != target.hidden:
        raise IncompatiblePairError(f"MTP layer hidden size {spec.hidden} does not match the target hidden size "
                                    f"{target.hidden}; pass the MTP weights of this target")
    for what, shape in (("shared_head.head", spec.lm_head_shape), ("embed_tokens", spec.embed_shape)):
        if shape is not None and tuple(shape) != (target.vocab, target.hidden):
            raise IncompatiblePairError(f"MTP {what} is {list(shape)} but the target has vocab {target.vocab} and "
                                        f"hidden {target.hidden}; pass the MTP weights of this target")
    index = spec.mtp_index if spec.mtp_index is not None else target.num_layers
    if spec.mtp_index is not None and spec.mtp_index < target.num_layers:
        raise IncompatiblePairError(f"the MTP layer index {spec.mtp_index} lies inside the target's "
                                    f"{target.num_layers} layers; the checkpoint and config.json disagree")
    config = copy.deepcopy(text)
    config._attn_implementation = "sdpa"
    if hasattr(config, "_experts_implementation"):
        config._experts_implementation = "eager"  # the block stands alone, outside the model that would set it
    if kinds:
        config.layer_types = kinds + ["full_attention"] * (index + 1 - len(kinds))
    config.num_hidden_layers = max(int(config.num_hidden_layers), index + 1)
    plan.config, plan.parts, plan.block_index = config, mtp_parts(config), index
    plan.draft_vocab, plan.target_feature_width, plan.max_positions = target.vocab, target.hidden, 0
    plan.lm_head = "own" if spec.lm_head_shape is not None else "target"
    plan.notes.append("shared_head.head kept (own lm_head)" if plan.lm_head == "own" else
                      "lm_head shared from target (the MTP layer has none)")
    plan.embedding = "compare" if spec.embed_shape is not None else "shared"
    if plan.embedding == "shared":
        plan.notes.append("embedding shared from target")
    plan.notes.append(f"decoder block built as {plan.parts.layer_cls.__name__} (layer index {index}), norms "
                      f"{plan.parts.norm_cls.__name__}, RoPE {plan.parts.rotary_cls.__name__}")


def make_mtp_head(plan, lm_head: nn.Module | None, embed: nn.Module | None, own_embedding: bool) -> MtpHead:
    spec = plan.spec
    try:
        with torch.device("meta"):
            head = MtpHead(plan.config, plan.parts, plan.block_index, lm_head, embed, style=spec.mtp_style,
                           own_lm_head=plan.lm_head == "own")
            if own_embedding:
                head.embed_tokens = nn.Embedding(plan.target.vocab, spec.hidden)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise UnsupportedLayoutError(f"the MTP layer in {spec.folder} could not be built "
                                     f"({' '.join(str(exc).split())[:160]}); pick an EAGLE draft") from exc
    return head


def mtp_key_plan(head: MtpHead, plan) -> tuple[dict[str, list[str]], list[str]]:
    """canonical -> stored names (several for fused MoE experts, stored one file per expert) and ignored names."""
    spec = plan.spec
    needed: dict[str, list[str]] = {}
    for key, value in head.state_dict().items():
        if key == "embed_tokens.weight":
            continue
        want = tuple(value.shape)
        if key in spec.names:
            needed[key] = [spec.names[key]]
            found = tuple(spec.weights.tensors[spec.names[key]].shape)
        elif (m := _EXPERTS.match(key)) and f"{m.group(1)}.0.down_proj.weight" in spec.names:
            parts = ("gate_proj", "up_proj") if m.group(2) == "gate_up_proj" else ("down_proj",)
            stored = [spec.names.get(f"{m.group(1)}.{e}.{p}.weight") for e in range(want[0]) for p in parts]
            if None in stored:
                raise CorruptCheckpointError(f"MTP layer in {spec.folder} lacks some experts of {key}; the checkpoint "
                                             "is incomplete")
            needed[key] = stored
            first = spec.weights.tensors[stored[0]].shape
            found = (want[0], first[0] * len(parts), first[1])
        else:
            raise CorruptCheckpointError(f"MTP layer in {spec.folder} is missing required weight {key}; the "
                                         "checkpoint is incomplete, re-download it or pick another draft")
        if found != want:
            raise CorruptCheckpointError(f"MTP weight {needed[key][0]} is {list(found)}, expected {list(want)} for the "
                                         "target's architecture; pass the MTP weights of this target")
    if plan.embedding in ("own", "compare"):
        needed["embed_tokens.weight"] = [spec.names["embed_tokens.weight"]]
    used = {s for group in needed.values() for s in group}
    return needed, sorted(set(spec.ignored) | {s for s in spec.names.values() if s not in used})


@torch.no_grad()
def load_mtp_head(plan, target: PreTrainedModel, result_cls):
    spec = plan.spec
    lm_head, embed = target.get_output_embeddings(), target.get_input_embeddings()
    device, dtype = lm_head.weight.device, lm_head.weight.dtype
    probe = make_mtp_head(plan, lm_head, embed, own_embedding=False)
    needed, ignored = mtp_key_plan(probe, plan)
    raw = spec.weights.load({s for group in needed.values() for s in group})
    state = {key: _assemble(key, [raw[s] for s in group]) for key, group in needed.items()}
    for key, t in state.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CorruptCheckpointError(f"MTP weight {needed[key][0]} in {spec.folder} contains NaN/inf values; the "
                                         "checkpoint is corrupted")
    notes: list[str] = []
    own_embedding = False
    if "embed_tokens.weight" in state:
        own_embedding = not torch.equal(state["embed_tokens.weight"].to(embed.weight.device, embed.weight.dtype),
                                        embed.weight)
        notes.append("own embedding kept (differs from the target's)" if own_embedding else
                     "embedding in the MTP layer equals the target's; shared from target")
        if not own_embedding:
            del state["embed_tokens.weight"]
    head = make_mtp_head(plan, lm_head, embed, own_embedding)
    head.to(dtype=dtype)
    head.to_empty(device=device)
    head.load_state_dict(state, strict=True)
    head.rotary_emb = plan.parts.rotary_cls(config=plan.config).to(device)  # real inv_freq, fp32
    head.eval().requires_grad_(False)
    if spec.source_dtype != str(dtype).replace("torch.", ""):
        notes.append(f"weights cast {spec.source_dtype} -> {str(dtype).replace('torch.', '')}")
    own_bytes = sum(t.numel() * t.element_size() for t in head.state_dict().values())
    shared = ([] if plan.lm_head == "own" else [lm_head.weight]) + ([] if own_embedding else [embed.weight])
    shared_bytes = sum(t.numel() * t.element_size() for t in shared)
    return result_cls(head, notes, ignored, "own" if own_embedding else "shared", own_bytes, shared_bytes)


def _assemble(key: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    if len(tensors) == 1 and not _EXPERTS.match(key):
        return tensors[0]
    if key.endswith("gate_up_proj"):  # per expert [I, H] gate then up -> [E, 2I, H]
        return torch.stack([torch.cat(tensors[i:i + 2], dim=0) for i in range(0, len(tensors), 2)])
    return torch.stack(tensors)  # down_proj: [E, H, I]
