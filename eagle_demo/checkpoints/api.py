"""load_pair / inspect_pair: the one entry point the CLI, the UI and the benchmark use."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from transformers import PreTrainedModel

from ..drafts import DraftHead
from ..target.check import layer_problem
from . import hub
from .adapt import DraftPlan, plan_draft
from .build import describe_target, key_plan, load_target, load_tokenizer, make_head
from .detect import DraftSpec, detect_draft
from .errors import CheckpointError, CorruptCheckpointError
from .head_weights import load_head
from .report import AdaptationReport
from .target_info import TargetInfo, read_target

__all__ = ["LoadedPair", "load_pair", "inspect_pair", "attach_draft"]

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class LoadedPair:
    target: PreTrainedModel  # eval mode, SDPA attention
    tokenizer: Any  # the target folder's AutoTokenizer, or None when it has none
    head: DraftHead | None  # None when no draft was given
    report: AdaptationReport
    target_path: str
    draft_path: str | None


def inspect_pair(target: str, draft: str | None, revision: str | None = None,
                 draft_revision: str | None = None, max_download_bytes: int | None = None) -> AdaptationReport:
    """Detect and plan without loading weights (configs and tensor headers only).

    Raises CheckpointError when files cannot be found or read; a pair that load_pair would refuse for any
    other reason (a Medusa head, another target's draft, an unsupported variant) comes back with
    `report.problem` set to the same one-line message.
    """
    target_path = hub.resolve(target, revision, "target", max_download_bytes, weights=False)
    info = read_target(Path(target_path), require_weights=False)
    layers = layer_problem(info.config)
    if draft is None:
        return _report(target, None, info, None, None, problem=f"target {info.folder}: {layers}" if layers else None)
    draft_path = hub.resolve(draft, draft_revision, "draft", max_download_bytes)
    spec = detect_draft(Path(draft_path))
    plan: DraftPlan | None = None
    problem: str | None = None
    ignored: list[str] = []
    try:
        plan = plan_draft(spec, info)
        _, ignored = key_plan(make_head(plan, None, None, own_embedding=plan.embedding == "own"), plan)
    except CorruptCheckpointError:
        raise
    except CheckpointError as exc:
        problem = str(exc)
    if problem is None and layers is not None:
        problem = f"target {info.folder}: {layers}"
    return _report(target, draft, info, spec, plan, problem=problem, ignored=ignored)


def load_pair(target: str, draft: str | None, *, revision: str | None = None, draft_revision: str | None = None,
              dtype: str = "auto", device: str = "auto", max_download_bytes: int | None = None,
              progress: Progress | None = None, check: bool = True) -> LoadedPair:
    """Resolve, check, load and adapt a (target, draft) pair. Raises CheckpointError (one line) on failure.
    check=False leaves out the target's forward check (`target.check`), for the caller to run where the weights
    compute (a ZeroGPU Space runs it in its GPU worker: its main process holds placeholders)."""
    say = progress or (lambda message, fraction: None)

    def stage(low: float, high: float) -> Progress:  # map a download's own 0..1 into this load's range
        return lambda message, fraction: say(message, low + (high - low) * min(max(fraction, 0.0), 1.0))

    say("reading the target config", 0.0)
    target_path = hub.resolve(target, revision, "target", max_download_bytes, stage(0.0, 0.05), weights=False)
    info = read_target(Path(target_path), require_weights=False)
    spec = plan = None
    draft_path = None
    if draft is not None:
        say("reading the draft", 0.1)
        draft_path = hub.resolve(draft, draft_revision, "draft", max_download_bytes, stage(0.1, 0.2))
        spec = detect_draft(Path(draft_path))
        plan = plan_draft(spec, info)
        key_plan(make_head(plan, None, None, own_embedding=plan.embedding == "own"), plan)  # fail before the target
    if (problem := layer_problem(info.config)) is not None:  # before fetching the target's weights
        raise CheckpointError(f"target {info.folder}: {problem}")
    say("fetching the target weights", 0.2)
    target_path = hub.resolve(target, revision, "target", max_download_bytes, stage(0.2, 0.3))
    info = read_target(Path(target_path))
    if plan is not None:
        plan = plan_draft(spec, info)
    warnings: list[str] = []
    target_notes: list[str] = []
    say("loading the target", 0.3)
    model = load_target(info, dtype, device, warnings, target_notes, check=check)
    tokenizer = load_tokenizer(info, warnings)
    result = None
    if plan is not None:
        say("building the draft", 0.8)
        result = load_head(plan, model)
    say("ready", 1.0)
    report = _report(target, draft, info, spec, plan, problem=None,
                     loaded=_Loaded(model, result, tuple(warnings), tuple(target_notes)))
    return LoadedPair(target=model, tokenizer=tokenizer, head=result.head if result else None, report=report,
                      target_path=str(info.folder), draft_path=draft_path)


def attach_draft(pair: LoadedPair, draft: str, *, draft_revision: str | None = None,
                 max_download_bytes: int | None = None, progress: Progress | None = None) -> LoadedPair:
    """Another draft on an already loaded target (to compare heads): the target's weights and tokenizer are
    shared, not loaded again. Raises CheckpointError (one line) as load_pair does."""
    say = progress or (lambda message, fraction: None)
    info = read_target(Path(pair.target_path))
    say("reading the draft", 0.1)
    draft_path = hub.resolve(draft, draft_revision, "draft", max_download_bytes,
                             lambda message, fraction: say(message, 0.1 + 0.5 * min(max(fraction, 0.0), 1.0)))
    spec = detect_draft(Path(draft_path))
    plan = plan_draft(spec, info)
    say("building the draft", 0.7)
    result = load_head(plan, pair.target)
    say("ready", 1.0)
    report = _report(pair.report.target, draft, info, spec, plan, problem=None,
                     loaded=_Loaded(pair.target, result,
                                    target_notes=tuple(describe_target(pair.target))))  # checked at its load
    return LoadedPair(target=pair.target, tokenizer=pair.tokenizer, head=result.head, report=report,
                      target_path=pair.target_path, draft_path=draft_path)


@dataclass(frozen=True)
class _Loaded:
    """What a load adds to a pair's report: the target model, the draft's load result (None without a draft), the
    load's warnings and the notes on the target."""
    model: PreTrainedModel
    result: Any = None
    warnings: tuple[str, ...] = ()
    target_notes: tuple[str, ...] = ()


def _report(target: str, draft: str | None, info: TargetInfo, spec: DraftSpec | None, plan: DraftPlan | None,
            problem: str | None, ignored: list[str] | None = None, loaded: _Loaded | None = None) -> AdaptationReport:
    model = loaded.model if loaded else None
    result = loaded.result if loaded else None
    warnings, target_notes = (loaded.warnings, loaded.target_notes) if loaded else ((), ())
    base = dict(target=target, draft=draft, target_path=str(info.folder), target_model_type=info.model_type,
                target_layers=info.num_layers, target_hidden=info.hidden, target_vocab=info.vocab, problem=problem)
    if model is not None:
        weight = model.get_output_embeddings().weight
        base.update(dtype=str(weight.dtype).replace("torch.", ""), device=str(weight.device))
    target_side = list(info.notes) + list(target_notes)
    if spec is None:
        return AdaptationReport(draft_path=None, family="none", source_layout="", **base,
                                adaptations=tuple(target_side), warnings=tuple(warnings))
    notes = target_side + list(spec.notes) + (plan.notes if plan else []) + (result.notes if result else [])
    eagle = spec.family in ("eagle1", "eagle3", "mtp")
    if result is not None:
        draft_bytes, shared_bytes, embedding = result.draft_bytes, result.shared_bytes, result.embedding
        ignored = result.ignored
    else:
        counted = ([spec.weights.tensors[n] for n in spec.names.values()] if spec.family == "mtp" else
                   list(spec.weights.tensors.values())) if spec.weights else []  # MTP: its layer, not the target
        draft_bytes = sum(t.nbytes() for t in counted)
        shared_bytes, embedding = 0, None
        if plan is not None:
            embedding = {"shared": "shared", "own": "own", "compare": "own (shared if equal to the target's)"}[
                plan.embedding]
    return AdaptationReport(
        draft_path=str(spec.folder), family=spec.family, source_layout=spec.layout, **base,
        draft_hidden=(spec.hidden or None) if eagle else None,
        draft_vocab=(plan.draft_vocab if plan else spec.draft_vocab) if eagle else None,
        draft_layers=(spec.num_layers or None) if eagle else None,
        num_heads=spec.num_heads or None, num_kv_heads=spec.num_kv_heads or None, head_dim=spec.head_dim or None,
        intermediate_size=spec.intermediate or None, fc_bias=spec.fc_bias if eagle else None,
        qkv_bias=spec.qkv_bias if eagle else None, embedding=embedding,
        lm_head=plan.lm_head if plan else None,
        feature_layers=plan.feature_layers if plan else None,
        feature_convention=plan.feature_convention if plan else "",
        rope_theta=spec.rope.get("rope_theta") if eagle else None,
        rope_type=spec.rope.get("rope_type") if eagle else None,
        max_position_embeddings=(plan.max_positions if plan else spec.max_positions) if eagle else None,
        draft_context=spec.max_positions if eagle else None,
        norm_before_residual=spec.norm_before_residual if spec.family == "eagle3" else None,
        source_dtype=spec.source_dtype,
        adaptations=tuple(dict.fromkeys(notes)), ignored_keys=tuple(ignored or spec.ignored),
        warnings=tuple(dict.fromkeys(spec.warnings + (plan.warnings if plan else []) + list(warnings))),
        draft_param_bytes=draft_bytes, shared_bytes=shared_bytes)
