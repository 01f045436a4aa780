"""A race of several decoders on one prompt: EAGLE, the n-gram draft and plain decoding side by side (the page's
race, `generate --race ngram`, the `/generate` API's stats), each checked against plain decoding and, where its
output differs, explained (`divergence`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..common.config import RunConfig
from ..decoding.events import Event, RunStart
from ..decoding.metrics import RunStats, summarize
from ..diagnose.divergence import Divergence, explain
from .speedup import RaceResult, race, verdict

__all__ = ["Racer", "race_all", "race_table", "short_labels", "racers_dict", "NAMES"]

NAMES = {"eagle": "EAGLE", "ngram": "n-gram", "baseline": "plain"}


@dataclass(frozen=True)
class Racer:
    mode: str  # "eagle", "ngram" or "baseline"
    label: str  # the draft's shape ("" for plain decoding)
    stats: RunStats
    result: RaceResult | None  # against plain decoding; None for plain decoding itself
    divergence: Divergence | None  # where its output first differs from plain decoding's, when it does

    @property
    def name(self) -> str:
        return NAMES.get(self.mode, self.mode)


def race_all(runs: dict[str, list[Event]], greedy: bool) -> list[Racer]:
    """runs: {mode: that run's events} with "baseline" among them (when it finished) -> one Racer per run, plain
    decoding last. A racer is checked against plain decoding as `race.speedup.race` says; a difference is explained."""
    base_events = runs.get("baseline")
    base = summarize(base_events) if base_events else None
    out = []
    for mode, events in runs.items():
        if mode == "baseline":
            continue
        stats = summarize(events)
        start = next((e for e in events if isinstance(e, RunStart)), None)
        result = race(stats, base, greedy, start.dtype if start else "")
        why = explain(events, base_events, greedy) if result.identical_to_baseline is False else None
        out.append(Racer(mode, start.tree if start else "", stats, result, why))
    if base is not None:
        out.append(Racer("baseline", "", base, None, None))
    return out


def short_labels(run: RunConfig) -> dict[str, str]:
    """{mode: the draft's compact label} for a race of `run` (`TreeConfig` / `NgramConfig.short_label`)."""
    return {"eagle": run.tree.short_label(), "ngram": run.ngram.short_label()}


def race_table(racers: list[Racer], short: dict[str, str] | None = None) -> str:
    """The race as a text table: tokens/s, tau, speedup and identity per racer; short: {mode: draft label} for the
    draft column (`short_labels`; each racer's full label, `Racer.label`, without it)."""
    rows = [("decoder", "draft", "tokens/s", "tau", "speedup", "identical")]
    for r in racers:
        same = "-" if r.result is None else verdict(r.result.identical_to_baseline, "not checked")
        speed = "1.00x" if r.result is None else ("-" if r.result.speedup is None else f"{r.result.speedup:.2f}x")
        draft = (short or {}).get(r.mode, r.label) if r.label else "-"
        rows.append((r.name, draft, f"{r.stats.tokens_per_second:.1f}", f"{r.stats.tau:.2f}", speed, same))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


def racers_dict(racers: list[Racer], decode: Callable[[list[int]], str] | None = None) -> dict:
    """JSON-ready: {mode: {tokens_per_second, tau, speedup, identical_to_baseline, divergence}}."""
    out = {}
    for r in racers:
        out[r.mode] = {
            "draft": r.label, "tokens_per_second": r.stats.tokens_per_second, "tau": r.stats.tau,
            "new_tokens": r.stats.new_tokens, "rounds": r.stats.rounds,
            "speedup": None if r.result is None else r.result.speedup,
            "identical_to_baseline": None if r.result is None else r.result.identical_to_baseline,
            "divergence": None if r.divergence is None else r.divergence.to_dict(decode),
        }
    return out
