"""Materialize an adapted pair: the stock transformers target, and the draft head's module and key plan (its
weights are filled in by `head_weights`)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from ..common.cpu_dtype import MIN_PARAMETERS, choose_cpu_dtype
from ..common.devices import DTYPES, DeviceError, device_failure, resolve_device, resolve_dtype
from ..decoding.sampling import generation_warnings
from ..drafts import DraftHead, Eagle1Head, Eagle3Head, Shared
from ..drafts.eagle3_mla import MlaEagle3Head
from ..drafts.eagle3x import Eagle3xHead, Variant
from ..drafts.hass import HassHead
from ..target.attention import use_grouped_sdpa
from ..target.check import check_target
from ..target.cpu_layout import column_major_linears
from ..target.fused_norms import fuse_rms_norms
from ..target.logit_head import LogitHead
from ..target.rope_limit import RopeLimit
from ..target.windows import AttentionWindow
from .adapt import DraftPlan
from .errors import CheckpointError, CorruptCheckpointError, DevicePlacementError, UnsupportedLayoutError
from .mimo import MimoBody
from .mtp import make_mtp_head, mtp_key_plan
from .target_info import TargetInfo

__all__ = ["make_head", "key_plan", "load_target", "load_tokenizer"]

# Names the builder consumes itself instead of copying them into the head's state dict 1:1.
_HANDLED = ("d2t", "t2d", "embed_tokens.weight")


def make_head(plan: DraftPlan, lm_head: nn.Module | None, embed: nn.Module | None,
              own_embedding: bool) -> DraftHead:
    """The head for `plan` on the meta device, shaped exactly like the checkpoint (biases included)."""
    spec, config = plan.spec, plan.config
    if spec.family == "mtp":
        return make_mtp_head(plan, lm_head, embed, own_embedding)
    try:
        with torch.device("meta"):
            if spec.family == "eagle1" and (spec.hass_norms or spec.layer0_input_norm):
                head: DraftHead = HassHead(config, lm_head, embed, norms=spec.hass_norms,
                                           layer0_input_norm=spec.layer0_input_norm, fc_bias=spec.fc_bias,
                                           qkv_bias=spec.qkv_bias, num_layers=spec.num_layers)
            elif spec.family == "eagle1":
                head = Eagle1Head(config, lm_head=lm_head, embed_tokens=embed, fc_bias=spec.fc_bias,
                                  qkv_bias=spec.qkv_bias, num_layers=spec.num_layers)
            elif spec.mla:
                head = MlaEagle3Head(config, plan.target_feature_width, plan.draft_vocab, embed, plan.feature_layers,
                                     Variant(norm_before_residual=spec.norm_before_residual, fc_norms=spec.fc_norms,
                                             input_norm=spec.input_norm, norm_output=spec.norm_output))
            elif _is_variant(spec):
                head = Eagle3xHead(config, plan.target_feature_width, plan.draft_vocab, embed, plan.feature_layers,
                                   Variant(norm_before_residual=spec.norm_before_residual, num_layers=spec.num_layers,
                                           fc_norms=spec.fc_norms, input_norm=spec.input_norm,
                                           norm_output=spec.norm_output, spare_fc_in=spec.spare_fc_in))
            else:
                head = Eagle3Head(config, target_hidden_size=plan.target_feature_width,
                                  draft_vocab_size=plan.draft_vocab, embed_tokens=embed,
                                  feature_layers=plan.feature_layers, norm_before_residual=spec.norm_before_residual)
            if spec.family == "eagle3" and plan.lm_head == "target":
                del head.lm_head  # replace the draft's own (absent) head by the target's, shared
                head.lm_head = Shared(lm_head)
            _match_biases(head, spec.names)
            if own_embedding:
                head.embed_tokens = nn.Embedding(plan.target.vocab, spec.hidden)
    except (KeyError, ValueError, TypeError) as exc:
        raise UnsupportedLayoutError(
            f"the draft in {spec.folder} could not be built ({' '.join(str(exc).split())[:160]}); its settings "
            f"(e.g. rope type {spec.rope.get('rope_type')}) are not supported here, pick another draft") from exc
    return head


def _is_variant(spec) -> bool:
    return spec.num_layers > 1 or bool(spec.fc_norms) or spec.input_norm or spec.norm_output or not spec.use_aux


def _match_biases(head: nn.Module, names: dict[str, str]) -> None:
    """Give every Linear a bias exactly when the checkpoint has one (weights decide, never configs)."""
    for name, module in list(head.named_modules()):
        if not isinstance(module, nn.Linear):
            continue
        want = f"{name}.bias" in names
        if (module.bias is not None) == want:
            continue
        parent_name, _, child = name.rpartition(".")
        parent = head.get_submodule(parent_name) if parent_name else head
        setattr(parent, child, nn.Linear(module.in_features, module.out_features, bias=want))


def key_plan(head: DraftHead, plan: DraftPlan) -> tuple[dict[str, str], list[str]]:
    """Strict key diff of the head's expected state dict against the checkpoint.

    Returns (canonical -> stored name for every tensor to read, stored names that are ignored).
    Missing required keys and shape mismatches raise CorruptCheckpointError naming the key.
    """
    spec = plan.spec
    if spec.family == "mtp":
        return mtp_key_plan(head, plan)
    expected = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    missing = [k for k in expected if k not in spec.names and k not in _HANDLED]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CorruptCheckpointError(
            f"{spec.family.upper()} draft in {spec.folder} is missing required weight {missing[0]}{more}; the "
            "checkpoint is incomplete, re-download it or pick another draft")
    needed: dict[str, str] = {}
    for key, shape in expected.items():
        if key in _HANDLED:
            continue
        stored = spec.names[key]
        found = spec.weights.tensors[stored].shape
        if tuple(found) != shape:
            raise CorruptCheckpointError(
                f"draft weight {stored} is {list(found)}, expected {list(shape)} for this layout; the checkpoint is "
                "inconsistent, pick another draft")
        needed[key] = stored
    if plan.embedding in ("own", "compare"):
        needed["embed_tokens.weight"] = spec.names["embed_tokens.weight"]
    if plan.d2t == "checkpoint":
        needed["d2t"] = spec.names["d2t"]
    elif plan.d2t == "t2d":
        needed["t2d"] = spec.names["t2d"]
    used = set(needed.values())
    ignored = sorted(set(spec.ignored) | {s for s in spec.names.values() if s not in used})
    return needed, ignored


# ---- target ----------------------------------------------------------------------------------------

def load_target(info: TargetInfo, dtype: str, device: str, warnings: list[str],
                notes: list[str] | None = None, check: bool = True) -> PreTrainedModel:
    """AutoModelForCausalLM in eval mode with SDPA attention (`attention.use_grouped_sdpa` on a CPU); never
    trust_remote_code. notes: gets what the target check found (the report's adaptations)."""
    try:
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, dev)
    except DeviceError as exc:
        raise CheckpointError(str(exc)) from exc
    if (dtype or "auto").strip().lower() == "auto" and dev.type == "cpu" and _parameters(info.config) >= MIN_PARAMETERS:
        choice = choose_cpu_dtype(info.config.hidden_size, info.config.intermediate_size)
        torch_dtype = DTYPES[choice.dtype]
        if notes is not None:
            notes.append(choice.reason)
    kwargs: dict = dict(dtype=torch_dtype, attn_implementation="sdpa", trust_remote_code=False)
    device_map = _device_map(info, torch_dtype, dev, device)
    if device_map is not None:
        kwargs["device_map"] = device_map
    loader = AutoModelForCausalLM
    if info.model_type == "mimo":  # the Qwen2 body with the config read in mimo.py (never the repo's code)
        loader, kwargs["config"] = MimoBody, info.config
    try:
        try:
            model, loading = loader.from_pretrained(str(info.folder), output_loading_info=True, **kwargs)
        except ValueError as exc:
            if "sdpa" not in str(exc).lower() and "scaled_dot_product" not in str(exc).lower():
                raise
            kwargs["attn_implementation"] = "eager"
            warnings.append(f"{info.model_type} does not support SDPA attention here; using eager attention")
            model, loading = loader.from_pretrained(str(info.folder), output_loading_info=True, **kwargs)
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - transformers/safetensors raise many unrelated types here
        raise _load_failure(exc, info, dev) from exc
    missing = sorted(loading.get("missing_keys") or [])
    if missing:
        raise CorruptCheckpointError(
            f"target {info.folder} is missing weights (e.g. {missing[0]}, {len(missing)} in all); the checkpoint is "
            f"incomplete or not a {info.model_type} model")
    mismatched = list(loading.get("mismatched_keys") or [])
    if mismatched:
        raise CorruptCheckpointError(f"target {info.folder} has weights of the wrong shape (e.g. {mismatched[0]}); "
                                     "the config and the weights disagree, re-download the target")
    if device_map is None:
        column_major_linears(model)  # fp32 on a CPU only: a faster decode step, identical results (cpu_layout)
    fuse_rms_norms(model)  # fp32 on a CPU only: each RMS norm in one call, identical results (fused_norms)
    use_grouped_sdpa(model)  # a CPU target with grouped-query heads: a cheaper verify, identical results (attention)
    try:
        if check:
            check_target(model.eval())  # the engines' prefill, tree and compacted-cache logits are the model's own
        else:
            model.eval()
    except ValueError as exc:
        raise CheckpointError(f"target {info.folder}: {exc}") from exc
    if notes is not None:
        notes.extend(describe_target(model))
    warnings.extend(generation_warnings(getattr(model, "generation_config", None)))
    return model


def _parameters(config) -> int:
    """About how many parameters a decoder-only config describes (embeddings once, attention and MLP per layer)."""
    try:
        text = config.get_text_config()
        h, inter, layers = int(text.hidden_size), int(text.intermediate_size), int(text.num_hidden_layers)
        return int(text.vocab_size) * h + layers * (4 * h * h + 3 * h * inter)
    except (AttributeError, TypeError, ValueError):
        return 0


def _load_failure(exc: Exception, info: TargetInfo, dev: torch.device) -> CheckpointError:
    """What a failed `from_pretrained` means: the device failing (never a corrupt checkpoint), weights of the
    wrong shape, or weights that could not be read."""
    text = " ".join(str(exc).split())[:200]
    if device_failure(exc):  # the files were fine: the device could not take them
        return DevicePlacementError(f"target weights in {info.folder} could not be placed on {dev} ({text}); the "
                                    "device failed, not the checkpoint: check the GPU or pick another device")
    if "mismatched_sizes" in str(exc) or "size mismatch" in str(exc):
        return CorruptCheckpointError(
            f"target {info.folder} has weights of the wrong shape for its config.json; the config and the "
            "weights disagree, re-download the target or fix config.json")
    return CorruptCheckpointError(f"target weights in {info.folder} could not be loaded ({text}); re-download the "
                                  "target or check the folder")


def describe_target(model: PreTrainedModel) -> list[str]:
    """The report's lines on what the engines do for this target beyond the stock base model (after
    `target_check.check_target` passed)."""
    window, head = AttentionWindow.of(model), LogitHead.of(model)
    out = ["target check: the engines' prefill, tree and compacted-cache logits equal the model's own forward"]
    if not head.identity:
        out.append(f"logits after the output projection as the {model.config.model_type} forward does: {head.label()}")
    if window.size is not None:
        out.append(f"sliding window of {window.size} tokens applied in the engines' own masks"
                   + (" (full and sliding layers: a mask per layer type)" if window.mixed else ""))
    rope = RopeLimit.of(model)
    if rope.kind is not None:
        out.append(rope.label())
    return out


def _device_map(info: TargetInfo, dtype: torch.dtype, dev: torch.device, requested: str):
    """None (plain load, then one device), {"": device} or "auto" when the target fits no single GPU."""
    if dev.type == "cpu":
        return None
    if (requested or "auto").strip().lower() == "auto" and dev.type == "cuda" and torch.cuda.device_count() > 1:
        size = sum(t.numel for t in info.weights.tensors.values()) * torch.tensor([], dtype=dtype).element_size() \
            if info.weights else 0
        free, _ = torch.cuda.mem_get_info(dev)
        if size > 0.9 * free:
            return "auto"
    return {"": str(dev)}


def load_tokenizer(info: TargetInfo, warnings: list[str]):
    if not info.has_tokenizer:
        return None
    try:
        return AutoTokenizer.from_pretrained(str(info.folder), trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - tokenizer backends raise assorted errors; token ids still work
        warnings.append(f"the target tokenizer could not be loaded ({' '.join(str(exc).split())[:120]}); "
                        "only token ids can be used")
        return None
