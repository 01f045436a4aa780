"""Benchmark results as plain values: per-prompt rows, category summaries, the report and its text/CSV/JSON forms.
No torch here, so the page can draw reports without loading model code (`bench` runs them).

Speedup follows Spec-Bench: the ratio of mean tokens/s over prompts (per category and overall).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..race.speedup import verdict

__all__ = ["PromptItem", "PromptResult", "CategorySummary", "BenchReport", "CATEGORIES", "draft_label",
           "report_label", "comparison_table", "comparison_csv", "comparison_json"]

CATEGORIES = ("chat", "translation", "summarization", "qa", "math", "rag", "code")


@dataclass(frozen=True)
class PromptItem:
    id: str
    category: str
    prompt: str


@dataclass(frozen=True)
class PromptResult:
    id: str
    category: str
    repeat: int
    prompt_tokens: int
    new_tokens: int
    rounds: int
    tau: float
    eagle_tokens_per_second: float
    baseline_tokens_per_second: float
    speedup: float
    acceptance_by_depth: tuple[float, ...]
    draft_seconds: float
    verify_seconds: float
    host_seconds: float
    equal_to_baseline: bool | None  # greedy, or sampled in float32 (seeded baseline); None for sampled bf16/fp16
    round_cost: float = 0.0  # tau / speedup: a mean round's price in plain decoding steps
    plain_rounds: int = 0  # rounds the draft sat out (`gate`), counted in `rounds`
    tau_code: float = 0.0  # tokens per round by the kind of line a round starts on (`falloff`; 0: no such round)
    tau_comment: float = 0.0
    tau_docstring: float = 0.0
    tau_prose: float = 0.0


@dataclass(frozen=True)
class CategorySummary:
    category: str
    prompts: int  # distinct prompts
    runs: int  # prompts x repeats: the rows averaged
    tau: float
    eagle_tokens_per_second: float
    baseline_tokens_per_second: float
    speedup: float
    all_equal: bool | None
    round_cost: float = 0.0  # tau / speedup, in plain decoding steps (speedup = tau / round cost)


@dataclass(frozen=True)
class BenchReport:
    machine: dict
    settings: dict
    results: tuple[PromptResult, ...]
    categories: tuple[CategorySummary, ...]
    overall: CategorySummary
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_csv(self) -> str:
        buf = io.StringIO()
        names = list(PromptResult.__dataclass_fields__)
        writer = csv.DictWriter(buf, fieldnames=names)
        writer.writeheader()
        for r in self.results:
            row = asdict(r)
            row["acceptance_by_depth"] = " ".join(f"{a:.3f}" for a in r.acceptance_by_depth)
            writer.writerow(row)
        return buf.getvalue()

    def misses_line(self, limit: int = 8) -> str:
        """The most frequent misses, e.g. "' the' -> ' a' x5"."""
        top = self.extra.get("top_misses", [])[:limit]
        if not top:
            return "the draft missed nowhere (no round stopped under a drafted child)"
        return "most frequent misses (draft's guess -> target's token): " + ", ".join(
            f"{m['draft']!r} -> {m['target']!r} x{m['count']}" for m in top)

    def where_line(self) -> str:
        """Tau by kind of text and by position (`falloff`), e.g. "tau by kind: code 4.1 (80 rounds), ..."."""
        where = self.extra.get("where")
        if not where or not where.get("by_kind"):
            return "tau by kind of text: no rounds"
        kinds = ", ".join(f"{k} {v['tau']:.2f} ({v['rounds']} rounds)" for k, v in where["by_kind"].items())
        blocks = where.get("by_position", [])
        third = max(1, len(blocks) // 3)
        pooled = lambda part: sum(b["tau"] * b["rounds"] for b in part) / max(1, sum(b["rounds"] for b in part))  # noqa: E731
        trend = (f"; by position: first third {pooled(blocks[:third]):.2f}, last third {pooled(blocks[-third:]):.2f}"
                 if len(blocks) >= 3 else "")
        return f"tau by kind of text: {kinds}{trend}"

    def table(self) -> str:
        """The table by category; first, when the tree was the automatic one, its choice and predicted speedup
        next to the measured overall speedup (`extra["auto"]`)."""
        auto = self.extra.get("auto")
        head = [f"auto: {auto['tree']}, predicted tau {auto['predicted_tau']:.2f}, round cost "
                f"{auto['predicted_round_cost']:.2f} plain steps, predicted {auto['predicted_speedup']:.2f}x, "
                f"measured {auto['measured_speedup']:.2f}x"] if auto else []
        lines = [f"{'category':<14}{'prompts':>8}{'runs':>6}{'tau':>7}{'EAGLE tok/s':>13}{'base tok/s':>12}"
                 f"{'speedup':>9}{'round cost':>12}{'equal':>7}"]
        for c in (*self.categories, self.overall):
            eq = verdict(c.all_equal)
            lines.append(f"{c.category:<14}{c.prompts:>8}{c.runs:>6}{c.tau:>7.2f}{c.eagle_tokens_per_second:>13.1f}"
                         f"{c.baseline_tokens_per_second:>12.1f}{c.speedup:>8.2f}x{c.round_cost:>12.2f}{eq:>7}")
        return "\n".join(head + lines)


def _summary(name: str, rows: list[PromptResult]) -> CategorySummary:
    n = len(rows)
    e = sum(r.eagle_tokens_per_second for r in rows) / n
    b = sum(r.baseline_tokens_per_second for r in rows) / n
    eq = [r.equal_to_baseline for r in rows if r.equal_to_baseline is not None]
    rounds = sum(r.rounds for r in rows)  # tau pooled, as the metric is defined: committed tokens / rounds
    tau, ratio = sum(r.tau * r.rounds for r in rows) / rounds if rounds else 0.0, e / b if b else 0.0
    return CategorySummary(category=name, prompts=len({r.id for r in rows}), runs=n, tau=tau, eagle_tokens_per_second=e,
                           baseline_tokens_per_second=b, speedup=ratio, all_equal=all(eq) if eq else None,
                           round_cost=_pooled_cost(rows))


def _pooled_cost(rows: list[PromptResult]) -> float:
    """Round cost over runs, as the metric is defined: mean EAGLE round time / mean plain step time, both pooled.
    A run's committed tokens (tau x rounds) took committed / tokens-per-second of decode time in each engine, and
    as many plain steps. (Speedup is Spec-Bench's ratio of mean tokens/s, so over several runs it is not exactly
    tau / this cost.)"""
    done = [r for r in rows if r.rounds and r.eagle_tokens_per_second > 0 and r.baseline_tokens_per_second > 0]
    committed = [r.tau * r.rounds for r in done]
    rounds, steps = sum(r.rounds for r in done), sum(committed)
    if not rounds or not steps:
        return 0.0
    round_s = sum(c / r.eagle_tokens_per_second for c, r in zip(committed, done)) / rounds
    step_s = sum(c / r.baseline_tokens_per_second for c, r in zip(committed, done)) / steps
    return round_s / step_s


def draft_label(path_or_repo: str | None) -> str:
    """A short name for a draft: its folder or repo name."""
    text = (path_or_repo or "").rstrip("/\\")
    return Path(text).name or text or "no draft"


def report_label(report: BenchReport, by: str) -> str:
    """What tells reports apart in a comparison: the draft's name, or the sampling temperature."""
    if by == "temperature":
        return f"{report.settings['temperature']:g}"
    if by == "context":
        return str(report.settings["context_tokens"])
    return draft_label(report.settings["draft"])


def comparison_table(reports: list[BenchReport], by: str = "draft") -> str:
    """Overall figures of each report, one line each (the per-category tables come from `table`)."""
    lines = [f"{by:<28}{'family':>8}{'tau':>7}{'EAGLE tok/s':>13}{'base tok/s':>12}{'speedup':>9}"
             f"{'round cost':>12}{'equal':>7}"]
    for r in reports:
        o = r.overall
        eq = verdict(o.all_equal)
        lines.append(f"{report_label(r, by):<28}{r.settings['draft_family']:>8}{o.tau:>7.2f}"
                     f"{o.eagle_tokens_per_second:>13.1f}{o.baseline_tokens_per_second:>12.1f}{o.speedup:>8.2f}x"
                     f"{o.round_cost:>12.2f}{eq:>7}")
    return "\n".join(lines)


def category_table(reports: list[BenchReport], by: str = "draft") -> str:
    """Tokens/s per category, one column per report and plain decoding's last (the mean of the reports' own
    interleaved baselines), each report's speedup over its own baseline beside its tokens/s."""
    names = [report_label(r, by) for r in reports]
    cats = list(dict.fromkeys(c.category for r in reports for c in r.categories)) + ["overall"]
    width = max(len(c) for c in cats + ["category"]) + 2
    head = f"{'category':<{width}}" + "".join(f"{n[:22]:>24}" for n in names) + f"{'plain':>10}"
    lines = [head]
    for cat in cats:
        cells, plain = [], []
        for r in reports:
            c = r.overall if cat == "overall" else next((x for x in r.categories if x.category == cat), None)
            cells.append(f"{'-':>24}" if c is None else f"{c.eagle_tokens_per_second:>14.1f} ({c.speedup:>5.2f}x)")
            plain += [] if c is None else [c.baseline_tokens_per_second]
        mean = f"{sum(plain) / len(plain):>10.1f}" if plain else f"{'-':>10}"
        lines.append(f"{cat:<{width}}" + "".join(cells) + mean)
    return "\n".join(lines)


def comparison_csv(reports: list[BenchReport], by: str = "draft") -> str:
    """Every report's per-prompt rows, with what tells them apart (draft name or temperature) first."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    for i, r in enumerate(reports):
        rows = list(csv.reader(io.StringIO(r.to_csv())))
        if i == 0:
            writer.writerow([by, *rows[0]])
        writer.writerows([report_label(r, by), *row] for row in rows[1:])
    return buf.getvalue()


def comparison_json(reports: list[BenchReport], by: str = "draft") -> str:
    """{"drafts": [report, ...]} or {"temperatures": [report, ...]}."""
    return json.dumps({by + "s": [r.to_dict() for r in reports]}, indent=2)
