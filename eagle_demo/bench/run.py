"""Prompt-suite benchmark: baseline and EAGLE interleaved on each prompt in one process.

Speedup follows Spec-Bench: the ratio of mean tokens/s over prompts (per category and overall).
This is a measurement script, not a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import json
import platform
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

import torch

from ..common.config import ConfigError, RunConfig
from ..common.paths import SUITE
from ..decoding.hot_vocab import hot_vocab_problem
from ..decoding.metrics import RunStats, misses, summarize
from ..diagnose.falloff import Where
from ..race.speedup import race
from ..session import Session
from .report import (
    CATEGORIES,
    BenchReport,
    CategorySummary,
    PromptItem,
    PromptResult,
    _summary,
    category_table,
    comparison_csv,
    comparison_json,
    comparison_table,
    draft_label,
    report_label,
)

__all__ = ["PromptItem", "PromptResult", "CategorySummary", "BenchReport", "load_suite", "run_bench",
           "compare_drafts", "sweep_temperatures", "draft_label", "comparison_table", "comparison_csv",
           "comparison_json", "report_label", "CATEGORIES", "_summary", "with_auto", "category_table"]

TOP_MISSES = 20  # (draft's favourite, target's token) pairs kept in a report, most frequent first


def load_suite(path: str | Path | None = None, categories: Iterable[str] | None = None) -> list[PromptItem]:
    path = Path(path) if path else SUITE
    if not path.is_file():
        raise ConfigError(f"prompt suite {path} does not exist; pass --suite FILE.jsonl")
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(PromptItem(id=str(row["id"]), category=str(row["category"]), prompt=str(row["prompt"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}:{n} is not a suite line ({exc}); each line needs id, category, prompt") from None
        if not items[-1].prompt.strip():
            raise ConfigError(f"{path}:{n} has an empty prompt; give it some text or remove the line")
    if categories:
        wanted = set(categories)
        unknown = wanted - {i.category for i in items}
        if unknown:
            raise ConfigError(f"unknown categories {sorted(unknown)}; "
                             f"the suite has {sorted({i.category for i in items})}")
        items = [i for i in items if i.category in wanted]
    return items


def machine_info() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _result(item: PromptItem, repeat: int, prompt_tokens: int, eagle: RunStats, base: RunStats, greedy: bool,
            dtype: str) -> PromptResult:
    """One prompt's row: the race of its EAGLE run against its baseline (sampled float32 runs are checked against
    the seeded baseline, as on the page)."""
    r = race(eagle, base, greedy, dtype)
    return PromptResult(
        id=item.id, category=item.category, repeat=repeat, prompt_tokens=prompt_tokens,
        new_tokens=eagle.new_tokens, rounds=eagle.rounds, tau=eagle.tau,
        eagle_tokens_per_second=eagle.tokens_per_second, baseline_tokens_per_second=base.tokens_per_second,
        speedup=r.speedup or 0.0, acceptance_by_depth=eagle.acceptance_by_depth, draft_seconds=eagle.draft_seconds,
        verify_seconds=eagle.verify_seconds, host_seconds=eagle.host_seconds,
        equal_to_baseline=r.identical_to_baseline, round_cost=r.round_cost or 0.0, plain_rounds=eagle.plain_rounds,
    )


def run_bench(session: Session, items: list[PromptItem], run: RunConfig, *, repeats: int = 1, chat: bool = False,
              progress: Callable[[int, int, str], None] | None = None, racer: str = "eagle",
              encoded: list[list[int]] | None = None) -> BenchReport:
    """Baseline and EAGLE on each prompt, interleaved (the order alternates between repeats), after a warm-up
    (`warm_up`). racer "ngram": the n-gram draft (`decoding.ngram`, run.ngram's settings) in EAGLE's place; its
    report's draft is "n-gram". encoded: the prompts' token ids when the caller built them (a context-length
    sweep); default: each item's prompt encoded."""
    if not items:
        raise ValueError("no prompts to run; check --categories and --suite")
    encoded = encoded or [session.encode(i.prompt, chat=chat) for i in items]
    warm_up(session, encoded[0], run, racer)
    results = []
    missed: Counter[tuple[int, int]] = Counter()
    where = Where()
    total, done = len(items) * repeats, 0
    for repeat in range(repeats):
        for item, ids in zip(items, encoded):
            order = ("baseline", racer) if (repeat + done) % 2 == 0 else (racer, "baseline")
            events = {mode: list(session.stream(ids, run, mode)) for mode in order}
            stats = {mode: summarize(events[mode]) for mode in order}
            missed.update(misses(events[racer]))
            kinds = where.add(item.prompt, events[racer], session.decode)
            results.append(replace(_result(item, repeat, len(ids), stats[racer], stats["baseline"],
                                           run.sampling.greedy, str(session.dtype)), **kinds))
            done += 1
            if progress:
                progress(done, total, item.id)
    cats = []
    for c in dict.fromkeys(r.category for r in results):
        cats.append(_summary(c, [r for r in results if r.category == c]))
    settings = {"max_new_tokens": run.max_new_tokens, "pause_below": run.pause_below,
                "pause_by_length": list(run.pause_by_length), "pause_first": run.pause_first,
                "temperature": run.sampling.temperature,
                "top_p": run.sampling.top_p, "top_k": run.sampling.top_k, "repeats": repeats, "chat": chat,
                "target": session.pair.target_path, **_draft_settings(session, run, racer),
                "device": str(session.device), "dtype": str(session.dtype),
                "attention": str(session.pair.target.config._attn_implementation)}  # the target's (`attention`)
    top = [{"draft_id": d, "target_id": t, "draft": session.decode([d]), "target": session.decode([t]), "count": n}
           for (d, t), n in missed.most_common(TOP_MISSES)]
    return BenchReport(machine=machine_info(), settings=settings, results=tuple(results), categories=tuple(cats),
                       overall=_summary("overall", results), extra={"top_misses": top, "where": where.to_dict()})


def warm_up(session: Session, ids: list[int], run: RunConfig, racer: str = "eagle") -> None:
    """Up to 8 tokens of plain decoding and of the racer on `ids`, not measured: the first run of each shape pays
    for allocations and kernel choices that the measured runs then do not."""
    short = RunConfig(max_new_tokens=min(8, run.max_new_tokens), ignore_eos=True, tree=run.tree, sampling=run.sampling)
    for mode in ("baseline", racer):
        list(session.stream(ids, short, mode))


def _draft_settings(session: Session, run: RunConfig, racer: str) -> dict:
    if racer == "ngram":
        return {"tree": run.ngram.label(), "draft": "n-gram", "draft_family": "ngram"}
    return {"tree": run.tree.label(), "draft": session.pair.draft_path, "draft_family": session.family}


def with_auto(report: BenchReport, auto) -> BenchReport:
    """The report with the automatic tree's choice (`autotree.AutoChoice`, or None: the report as it is) and its
    predicted speedup next to the measured one (JSON `extra["auto"]`, the table's header line)."""
    if auto is None:
        return report
    block = {**auto.to_dict(), "measured_speedup": report.overall.speedup}
    return replace(report, extra={**report.extra, "auto": block})


def _series(jobs: list[tuple[Session, RunConfig, str]], items: list[PromptItem], repeats: int, chat: bool,
            progress: Callable[[int, int, str], None] | None) -> list[BenchReport]:
    """`run_bench` for each (session, run, label), one report each, progress counted over all of them."""
    reports, per_job = [], len(items) * repeats
    for n, (session, run, label) in enumerate(jobs):
        def step(done: int, _total: int, name: str, offset=n * per_job, label=label) -> None:
            if progress:
                progress(offset + done, len(jobs) * per_job, f"{label}: {name}")
        reports.append(run_bench(session, items, run, repeats=repeats, chat=chat, progress=step))  # each warms up
    return reports


def compare_drafts(sessions: list[Session], items: list[PromptItem], run: RunConfig, repeats: int = 1,
                   chat: bool = False, progress: Callable[[int, int, str], None] | None = None,
                   runs: list[RunConfig] | None = None) -> list[BenchReport]:
    """`run_bench` for each draft on one target (`Session.with_draft` shares the target): same prompts, each draft
    against its own interleaved baseline, one report per draft in order. runs: one per session (each draft's own
    automatic tree); without them every draft runs `run`'s settings, less a hot vocabulary for a head with its own
    vocabulary (EAGLE-3 drafts over d2t; its report's tree says so)."""
    runs = runs or [_for_head(session, run) for session in sessions]
    jobs = [(session, r, draft_label(session.pair.draft_path)) for session, r in zip(sessions, runs)]
    return _series(jobs, items, repeats, chat, progress)


def _for_head(session: Session, run: RunConfig) -> RunConfig:
    if run.tree.hot_vocab and session.eagle is not None and hot_vocab_problem(session.eagle.head):
        return replace(run, tree=replace(run.tree, hot_vocab=0))
    return run


def sweep_temperatures(session: Session, items: list[PromptItem], run: RunConfig, temperatures: list[float],
                       repeats: int = 1, chat: bool = False,
                       progress: Callable[[int, int, str], None] | None = None) -> list[BenchReport]:
    """`run_bench` at each temperature (the run's top-p, top-k and seed kept; 0 = greedy): how acceptance and
    speedup fall as sampling gets hotter. One report per temperature, in order."""
    s = run.sampling
    jobs = [(session, replace(run, sampling=replace(s, temperature=float(t))), f"T={t:g}") for t in temperatures]
    return _series(jobs, items, repeats, chat, progress)
