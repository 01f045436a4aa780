"""AdaptationReport: what was detected, what was adapted, what was ignored (plain values, JSON-ready)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["AdaptationReport", "probe_line"]


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
    probe: dict | None = None  # eagle_demo.probe.measure: {"tau", "used", "declared", "alternatives": [...]}

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
        """The report as plain text (the command line's `inspect`): `to_markdown` without its markup."""
        return self.to_markdown().replace("**", "").replace("`", "")

    def to_markdown(self) -> str:
        """What was detected, adapted, ignored and warned, as markdown (the page's report). The one rendering."""
        lines = [f"**Target** {_code(self.target)}: {self.target_model_type}, {self.target_layers} layers, hidden "
                 f"{self.target_hidden}, vocab {self.target_vocab}" + (f" ({self.dtype} on {self.device})" if self.dtype
                                                                     else "")]
        if self.draft is None:
            lines.append("**Draft**: none, plain decoding only")
        else:
            lines += self._draft_lines()
        if self.adaptations:
            lines.append("\n**Adaptations**")
            lines += [f"- {a}" for a in self.adaptations]
        if self.ignored_keys:
            shown = ", ".join(_code(k) for k in self.ignored_keys[:8]) + (" ..." if len(self.ignored_keys) > 8 else "")
            lines.append(f"\n**Ignored keys** ({len(self.ignored_keys)}): {shown}")
        if self.warnings:
            lines.append("\n**Warnings**")
            lines += [f"- ⚠ {w}" for w in self.warnings]
        if self.probe is not None:
            lines.append("\n" + probe_line(self.probe))
        if self.problem:
            lines.append(f"\n**Cannot load**: {self.problem}")
        return "\n".join(lines)

    def _draft_lines(self) -> list[str]:
        name = {"eagle1": "EAGLE-1/2 head", "eagle3": "EAGLE-3 head", "mtp": "MTP head"}.get(self.family, self.family)
        lines = [f"**Draft** {_code(self.draft)}: **{name}**, {self.family} ({_code(self.source_layout)} layout)"]
        if self.draft_hidden:
            heads = f", heads {self.num_heads}/{self.num_kv_heads} x {self.head_dim}" if self.num_heads else ""
            lines.append(f"- shape: hidden {self.draft_hidden}, {self.draft_layers} layer(s){heads}, "
                         f"draft vocab {self.draft_vocab}")
        if self.family == "eagle3":
            convention = self.feature_convention or "default"
            lines.append(f"- features: `hidden_states` {list(self.feature_layers or ())} ({convention})")
        elif self.family == "eagle1":
            lines.append("- features: the target's last hidden state after its final norm")
        if self.embedding or self.lm_head:
            lines.append(f"- embedding: {self.embedding or '-'}; lm_head: {self.lm_head or '-'}")
        if self.dtype or self.shared_bytes:
            lines.append(f"- weights: {human_bytes(self.draft_param_bytes)} own + {human_bytes(self.shared_bytes)} "
                         "shared with the target")
        elif self.draft_param_bytes:
            lines.append(f"- weights: the draft's files hold {human_bytes(self.draft_param_bytes)} of tensors "
                         f"({self.source_dtype})")
        return lines


def _code(text) -> str:
    """Inline markdown code span (backticks inside are replaced, not escaped)."""
    return "`" + str(text).replace("`", "'") + "`"


def human_bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def probe_line(probe: dict) -> str:
    """The probe's result in one line: what was declared, what was measured, what is used."""
    declared, used = probe["declared"], probe["used"]
    declared_tau = probe.get("declared_tau", probe["tau"] if used == declared else None)
    size = f"{probe.get('prompts', '?')} prompts x {probe.get('max_new_tokens', '?')} tokens"
    measured = f"tau {declared_tau:.2f}" if declared_tau is not None else "tau ?"
    alternatives = probe.get("alternatives", [])
    shown = {k: v for k, v in (probe.get("loaded") or declared).items() if declared.get(k) != v}
    if shown:  # weight-first loading read the draft otherwise than its config states
        measured += f" (the weights showed {_conventions(shown)})"
    if used == declared:
        best = max((a["tau"] for a in alternatives), default=None)
        others = f"best of {len(alternatives)} alternatives tau {best:.2f}" if best is not None else "no alternatives"
        return (f"**Probe** ({size}): declared {_conventions(declared)} measured {measured}; used as declared "
                f"({others})")
    changed = {k: v for k, v in used.items() if declared.get(k) != v}
    return (f"**Probe** ({size}): declared {_conventions(declared)} measured {measured}; used "
            f"{_conventions(changed)} instead, measured tau {probe['tau']:.2f} (lossless: only speed changes)")


def _conventions(conv: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in conv.items()) or "(no open conventions)"
