"""AdaptationReport: what was detected, what was adapted, what was ignored (plain values, JSON-ready)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["AdaptationReport"]


@dataclass(frozen=True)
class AdaptationReport:
    """One loaded or inspected (target, draft) pair.

    family: eagle1 | eagle3 | mtp | medusa | causal_lm | unknown, or "none" when no draft was given.
    feature_layers: HF `hidden_states` indices fed to an EAGLE-3 draft (None: EAGLE-1's post-norm last state).
    problem: the one-line reason load_pair refuses this pair (inspect only; None when it loads).
    """

    target: str
    draft: str | None
    target_path: str
    draft_path: str | None
    family: str
    source_layout: str
    target_model_type: str
    target_layers: int
    target_hidden: int
    target_vocab: int
    draft_hidden: int | None = None
    draft_vocab: int | None = None
    draft_layers: int | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None
    fc_bias: bool | None = None
    qkv_bias: bool | None = None
    embedding: str | None = None  # shared | own
    lm_head: str | None = None  # target | own
    feature_layers: tuple[int, ...] | None = None
    feature_convention: str = ""
    rope_theta: float | None = None
    rope_type: str | None = None
    max_position_embeddings: int | None = None
    draft_context: int | None = None  # the draft config's own max_position_embeddings, before any raise
    norm_before_residual: bool | None = None
    source_dtype: str | None = None
    dtype: str | None = None
    device: str | None = None
    adaptations: tuple[str, ...] = ()
    ignored_keys: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    draft_param_bytes: int = 0
    shared_bytes: int = 0
    problem: str | None = None
    probe: dict | None = None  # eagle_demo.probe: {"tau", "used", "declared", "alternatives": [...]}

    @property
    def loadable(self) -> bool:
        return self.problem is None

    def to_dict(self) -> dict:
        data = asdict(self)
        for key in ("adaptations", "ignored_keys", "warnings"):
            data[key] = list(data[key])
        if data["feature_layers"] is not None:
            data["feature_layers"] = list(data["feature_layers"])
        data["loadable"] = self.loadable
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        """A few readable lines for the CLI and the UI."""
        lines = [f"target: {self.target} ({self.target_model_type}, {self.target_layers} layers, hidden "
                 f"{self.target_hidden}, vocab {self.target_vocab})"]
        if self.draft is None:
            lines.append("draft: none (plain decoding only)")
        else:
            shape = ""
            if self.draft_hidden:
                shape = f", hidden {self.draft_hidden}, {self.draft_layers} layer(s)"
                if self.num_heads:
                    shape += f", heads {self.num_heads}/{self.num_kv_heads} x {self.head_dim}"
            lines.append(f"draft: {self.draft} -> {self.family} ({self.source_layout}{shape})")
            if self.family == "eagle3":
                lines.append(f"features: hidden_states {list(self.feature_layers or ())} "
                             f"({self.feature_convention}); draft vocab {self.draft_vocab}")
            if self.family in ("eagle1", "eagle3", "mtp") and self.dtype:
                lines.append(f"draft weights {_size(self.draft_param_bytes)} own + {_size(self.shared_bytes)} shared "
                             f"with the target ({self.dtype} on {self.device})")
            elif self.draft_param_bytes:
                lines.append(f"draft files hold {_size(self.draft_param_bytes)} of tensors ({self.source_dtype})")
        lines.extend(f"- {a}" for a in self.adaptations)
        if self.ignored_keys:
            shown = ", ".join(self.ignored_keys[:6]) + (" ..." if len(self.ignored_keys) > 6 else "")
            lines.append(f"ignored keys ({len(self.ignored_keys)}): {shown}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        if self.probe is not None:
            lines.append(f"probe: tau {self.probe['tau']:.2f} with {self.probe['used']}")
        if self.problem:
            lines.append(f"cannot load: {self.problem}")
        return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"
