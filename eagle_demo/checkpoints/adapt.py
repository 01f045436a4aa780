"""Match a detected draft to its target (`target_info`): compatibility checks and the adapted draft configuration.

Everything here works from configs and tensor headers only; `build.py` materializes the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import DeepseekV3Config, LlamaConfig

from .detect import DraftSpec
from .errors import CheckpointError, IncompatiblePairError, NotAnEagleDraftError, UnsupportedLayoutError
from .mtp import plan_mtp
from .target_info import TargetInfo, tokenizer_vocab_size

__all__ = ["DraftPlan", "plan_draft", "feature_layers"]

CONVENTIONS = {
    "default": "default [2, L//2, L-3]",
    "plus_one": "specforge/sglang eagle_config ids +1",
    "as_given": "speculators ids as given",
    "boundary": "eagle_config ids as hidden-state boundaries (first id not 1)",
}

@dataclass
class DraftPlan:
    """The adapted draft: its Llama config and how it hooks into the target."""

    spec: DraftSpec
    target: TargetInfo
    config: LlamaConfig | DeepseekV3Config | None = None
    feature_layers: tuple[int, ...] | None = None
    feature_convention: str = "post-norm last hidden state"
    target_feature_width: int = 0  # Ht
    draft_vocab: int = 0  # Vd (EAGLE-1: V)
    embedding: str = "shared"  # shared | own | compare (own tensor, shared if equal to the target's)
    lm_head: str = "target"  # target | own
    d2t: str = "identity"  # identity | checkpoint | t2d
    max_positions: int = 0
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problem: CheckpointError | None = None  # why load_pair refuses (set by plan_draft callers)
    parts: object = None  # MTP: the target family's classes (drafts.mtp.MtpParts)
    block_index: int = 0  # MTP: the decoder block's layer index in the target's numbering


def feature_layers(spec: DraftSpec, num_layers: int) -> tuple[tuple[int, ...], str, list[str]]:
    """HF hidden_states indices for an EAGLE-3 draft, the convention applied and any warnings.

    >>> # SpecForge eagle_config ids are output-of-layer ids: [1, 3, 4] -> hidden_states (2, 4, 5)
    """
    warnings: list[str] = []
    layers: tuple[int, ...]
    if spec.feature_ids is None:
        layers = (2, num_layers // 2, num_layers - 3)
    elif spec.feature_id_rule == "plus_one":
        layers = tuple(i + 1 for i in spec.feature_ids)
    else:
        layers = tuple(spec.feature_ids)
    bad = [i for i in layers if not 0 <= i <= num_layers]
    if bad:
        raise IncompatiblePairError(
            f"EAGLE-3 draft asks for target feature layer {bad[0]} but the target has only {num_layers} layers "
            f"(hidden_states 0..{num_layers}); pick a draft made for this target")
    return layers, CONVENTIONS[spec.feature_id_rule], warnings


def plan_draft(spec: DraftSpec, target: TargetInfo) -> DraftPlan:
    """Check the pair and derive the adapted draft config. Raises CheckpointError subclasses when the pair
    cannot work; the plan's notes/warnings are complete up to that point."""
    plan = DraftPlan(spec=spec, target=target)
    if spec.family in ("medusa", "causal_lm", "unknown"):
        raise NotAnEagleDraftError(f"draft {spec.folder} is {spec.description}, not an EAGLE draft; pick an "
                                   "EAGLE-1/2 or EAGLE-3 draft for this target")
    if spec.unsupported:
        raise UnsupportedLayoutError(spec.unsupported)
    _check_tokenizers(spec, target)
    if spec.family == "mtp":
        plan_mtp(plan, spec, target)
        return plan
    v = target.vocab
    if spec.family == "eagle1":
        plan.draft_vocab = v
        plan.target_feature_width = spec.feature_width
        if spec.hidden != target.hidden:
            raise IncompatiblePairError(
                f"draft hidden size {spec.hidden} (fc input {spec.fc_in}) does not match the target hidden size "
                f"{target.hidden}; pick a draft made for this target")
        plan.lm_head = "target"
        if "lm_head.weight" not in spec.names:  # otherwise the detection note already says so
            plan.notes.append("lm_head shared from target (same tensor)")
    else:
        _plan_eagle3(plan, spec, target)
    _check_vocab(spec, target)
    if spec.embed_shape is not None:
        if spec.embed_shape[1] != spec.hidden:
            raise IncompatiblePairError(f"draft embed_tokens is {list(spec.embed_shape)} but the draft hidden size is "
                                        f"{spec.hidden}; the checkpoint is inconsistent")
        plan.embedding = "compare" if spec.hidden == target.hidden else "own"
    else:
        if spec.hidden != target.hidden:
            raise IncompatiblePairError(
                f"draft hidden size {spec.hidden} differs from the target hidden size {target.hidden} and the draft "
                "ships no embed_tokens.weight, so it cannot share the target embedding; pick a complete draft")
        plan.embedding = "shared"
        plan.notes.append("embedding shared from target")
    plan.max_positions = spec.max_positions
    if target.max_positions and spec.max_positions < target.max_positions:
        plan.max_positions = target.max_positions
        plan.notes.append(f"max_position_embeddings raised {spec.max_positions} -> {target.max_positions} "
                          "(target context)")
    plan.config = _mla_config(spec, plan) if spec.mla else _llama_config(spec, plan)
    return plan


def _plan_eagle3(plan: DraftPlan, spec: DraftSpec, target: TargetInfo) -> None:
    if spec.use_aux:
        _plan_features(plan, spec, target)
    elif spec.hidden != target.hidden:
        raise IncompatiblePairError(f"EAGLE-3 draft without feature fusion has hidden size {spec.hidden} but the "
                                    f"target's is {target.hidden}; pick a draft made for this target")
    else:
        plan.target_feature_width = target.hidden
        plan.feature_convention = "post-norm last hidden state (no fusion)"
    _plan_vocab(plan, spec, target)


def _plan_features(plan: DraftPlan, spec: DraftSpec, target: TargetInfo) -> None:
    n_feat = len(spec.feature_ids) if spec.feature_ids else (spec.fc_norms or 3)
    if spec.fc_in % n_feat:
        raise IncompatiblePairError(
            f"EAGLE-3 draft fc input {spec.fc_in} is not {n_feat} x the target hidden size {target.hidden}; pick a "
            "draft made for this target")
    ht = spec.fc_in // n_feat
    if ht != target.hidden:
        raise IncompatiblePairError(
            f"EAGLE-3 draft fuses {n_feat} target features of width {ht} (fc input {spec.fc_in}) but the target "
            f"hidden size is {target.hidden}; this draft was made for another target, pick one made for "
            f"{target.model_type} with hidden size {target.hidden}")
    plan.target_feature_width = ht
    layers, convention, warnings = feature_layers(spec, target.num_layers)
    plan.feature_layers, plan.feature_convention = layers, convention
    plan.warnings.extend(warnings)
    if spec.fc_norms and spec.fc_norms != len(layers):
        raise IncompatiblePairError(f"EAGLE-3.1 draft has {spec.fc_norms} fc_norm weights but fuses {len(layers)} "
                                    "target features; the checkpoint and its config disagree")


def _plan_vocab(plan: DraftPlan, spec: DraftSpec, target: TargetInfo) -> None:
    v = target.vocab
    vd = spec.draft_vocab or v
    if vd > v:
        raise IncompatiblePairError(f"EAGLE-3 draft vocab {vd} is larger than the target vocab {v}; pick a draft made "
                                    "for this target's tokenizer")
    plan.draft_vocab = vd
    if spec.lm_head_shape is not None:
        plan.lm_head = "own"
        plan.notes.append(f"own lm_head [{vd}, {spec.hidden}] kept (never tied)")
    elif vd == v and spec.hidden == target.hidden:
        plan.lm_head = "target"
        plan.notes.append("lm_head shared from target (draft has none; full vocabulary)")
    else:
        raise IncompatiblePairError(
            f"EAGLE-3 draft in {spec.folder} has no lm_head.weight and its vocab/hidden ({vd}/{spec.hidden}) differ "
            f"from the target's ({v}/{target.hidden}); the checkpoint is incomplete, pick another draft")
    if vd == v:
        plan.d2t = "identity"
        plan.notes.append("d2t identity (draft vocab == target vocab)")
    elif "d2t" in spec.names:
        plan.d2t = "checkpoint"
        plan.notes.append(f"d2t maps {vd} draft ids to target ids")
    elif "t2d" in spec.names:
        plan.d2t = "t2d"
        plan.notes.append(f"d2t rebuilt from t2d ({vd} draft ids)")
    else:
        raise IncompatiblePairError(
            f"EAGLE-3 draft vocab {vd} is smaller than the target vocab {v} but the checkpoint has no d2t/t2d "
            "mapping; the checkpoint is incomplete, pick another draft")


def _check_vocab(spec: DraftSpec, target: TargetInfo) -> None:
    v = target.vocab
    if spec.embed_shape is not None and spec.embed_shape[0] != v:
        raise IncompatiblePairError(
            f"draft embed_tokens has {spec.embed_shape[0]} rows but the target vocab size is {v}; pick a draft made "
            "for this target's tokenizer")
    if spec.t2d_len is not None and spec.t2d_len != v:
        raise IncompatiblePairError(f"draft t2d covers a vocab of {spec.t2d_len} but the target vocab size is {v}; "
                                    "pick a draft made for this target's tokenizer")
    if spec.config_vocab is not None and spec.config_vocab != v:
        raise IncompatiblePairError(f"draft config vocab_size {spec.config_vocab} does not match the target vocab "
                                    f"size {v}; pick a draft made for this target's tokenizer")


def _check_tokenizers(spec: DraftSpec, target: TargetInfo) -> None:
    draft_vocab = tokenizer_vocab_size(spec.folder)
    if draft_vocab is not None and target.tokenizer_vocab is not None and draft_vocab != target.tokenizer_vocab:
        raise IncompatiblePairError(
            f"tokenizer mismatch: the draft's tokenizer has {draft_vocab} tokens, the target's "
            f"{target.tokenizer_vocab}; pick a draft trained with this target's tokenizer")


def _llama_config(spec: DraftSpec, plan: DraftPlan) -> LlamaConfig:
    config = LlamaConfig(
        vocab_size=plan.target.vocab, hidden_size=spec.hidden, intermediate_size=spec.intermediate,
        num_hidden_layers=spec.num_layers, num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads, head_dim=spec.head_dim, rms_norm_eps=spec.rms_norm_eps,
        hidden_act=spec.hidden_act,
        rope_parameters=dict(spec.rope), max_position_embeddings=plan.max_positions,
        attention_bias=spec.qkv_bias if spec.family == "eagle3" else spec.o_bias, mlp_bias=spec.mlp_bias,
        tie_word_embeddings=False, pad_token_id=None, bos_token_id=None, eos_token_id=None)
    config._attn_implementation = "sdpa"
    return config


def _mla_config(spec: DraftSpec, plan: DraftPlan) -> DeepseekV3Config:
    """DeepSeek-V3 config of an MLA EAGLE-3 draft layer (dense MLP; RoPE as its config states it)."""
    config = DeepseekV3Config(
        vocab_size=plan.target.vocab, hidden_size=spec.hidden, intermediate_size=spec.intermediate,
        num_hidden_layers=1, num_attention_heads=spec.num_heads, num_key_value_heads=spec.num_heads,
        rms_norm_eps=spec.rms_norm_eps, hidden_act=spec.hidden_act, rope_parameters=dict(spec.rope),
        max_position_embeddings=plan.max_positions, attention_bias=spec.qkv_bias, tie_word_embeddings=False,
        first_k_dense_replace=1, pad_token_id=None, bos_token_id=None, eos_token_id=None, **spec.mla)
    config._attn_implementation = "sdpa"
    return config
