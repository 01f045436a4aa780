"""Prompt-suite benchmark: baseline and EAGLE interleaved on each prompt in one process.

Speedup follows Spec-Bench: the ratio of mean tokens/s over prompts (per category and overall).
This is a measurement script, not a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import csv
import io
import json
import platform
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

import torch

from .config import RunConfig, SamplingConfig
from .metrics import RunStats, misses, summarize
from .session import ASSETS, Session

__all__ = ["PromptItem", "PromptResult", "BenchReport", "load_suite", "run_bench", "compare_drafts", "draft_label",
           "comparison_table", "comparison_csv", "comparison_json", "sweep_temperatures", "report_label", "run_bench_cli", "CATEGORIES"]

DEFAULT_SUITE = ASSETS / "prompts" / "suite.jsonl"
TOP_MISSES = 20  # (draft's favourite, target's token) pairs kept in a report, most frequent first
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

    def table(self) -> str:
        lines = [f"{'category':<14}{'prompts':>8}{'runs':>6}{'tau':>7}{'EAGLE tok/s':>13}{'base tok/s':>12}{'speedup':>9}"
                 f"{'round cost':>12}{'equal':>7}"]
        for c in (*self.categories, self.overall):
            eq = "-" if c.all_equal is None else ("yes" if c.all_equal else "NO")
            lines.append(f"{c.category:<14}{c.prompts:>8}{c.runs:>6}{c.tau:>7.2f}{c.eagle_tokens_per_second:>13.1f}"
                         f"{c.baseline_tokens_per_second:>12.1f}{c.speedup:>8.2f}x{c.round_cost:>12.2f}{eq:>7}")
        return "\n".join(lines)


def load_suite(path: str | Path | None = None, categories: Iterable[str] | None = None) -> list[PromptItem]:
    path = Path(path) if path else DEFAULT_SUITE
    if not path.is_file():
        raise FileNotFoundError(f"prompt suite {path} does not exist; pass --suite FILE.jsonl")
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            items.append(PromptItem(id=str(row["id"]), category=str(row["category"]), prompt=str(row["prompt"])))
        except (ValueError, KeyError) as exc:
            raise ValueError(f"{path}:{n} is not a suite line ({exc}); each line needs id, category, prompt")
    if categories:
        wanted = set(categories)
        unknown = wanted - {i.category for i in items}
        if unknown:
            raise ValueError(f"unknown categories {sorted(unknown)}; the suite has {sorted({i.category for i in items})}")
        items = [i for i in items if i.category in wanted]
    return items


def machine_info() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _result(item: PromptItem, repeat: int, prompt_tokens: int, eagle: RunStats, base: RunStats,
            check: bool) -> PromptResult:
    ratio = eagle.tokens_per_second / base.tokens_per_second if base.tokens_per_second else 0.0
    return PromptResult(
        id=item.id, category=item.category, repeat=repeat, prompt_tokens=prompt_tokens,
        new_tokens=eagle.new_tokens, rounds=eagle.rounds, tau=eagle.tau,
        eagle_tokens_per_second=eagle.tokens_per_second, baseline_tokens_per_second=base.tokens_per_second,
        speedup=ratio, acceptance_by_depth=eagle.acceptance_by_depth, draft_seconds=eagle.draft_seconds,
        verify_seconds=eagle.verify_seconds, host_seconds=eagle.host_seconds,
        equal_to_baseline=(eagle.token_ids == base.token_ids) if check else None, round_cost=_cost(eagle.tau, ratio),
    )


def _cost(tau: float, speedup: float) -> float:
    return tau / speedup if speedup > 0 else 0.0


def _summary(name: str, rows: list[PromptResult]) -> CategorySummary:
    n = len(rows)
    e = sum(r.eagle_tokens_per_second for r in rows) / n
    b = sum(r.baseline_tokens_per_second for r in rows) / n
    eq = [r.equal_to_baseline for r in rows if r.equal_to_baseline is not None]
    tau, ratio = sum(r.tau for r in rows) / n, e / b if b else 0.0
    return CategorySummary(category=name, prompts=len({r.id for r in rows}), runs=n, tau=tau, eagle_tokens_per_second=e,
                           baseline_tokens_per_second=b, speedup=ratio, all_equal=all(eq) if eq else None,
                           round_cost=_cost(tau, ratio))


def run_bench(session: Session, items: list[PromptItem], run: RunConfig, repeats: int = 1, chat: bool = False,
              progress: Callable[[int, int, str], None] | None = None, warmup: bool = True) -> BenchReport:
    """Baseline and EAGLE on each prompt, interleaved (the order alternates between repeats)."""
    if not items:
        raise ValueError("no prompts to run; check --categories and --suite")
    encoded = [session.encode(i.prompt, chat=chat) for i in items]
    if warmup:
        short = RunConfig(max_new_tokens=min(8, run.max_new_tokens), ignore_eos=True, tree=run.tree,
                          sampling=run.sampling)
        for mode in ("baseline", "eagle"):
            list(session.stream(encoded[0], short, mode))
    results = []
    # sampled runs share the seeded sampler, so in float32 EAGLE must reproduce the seeded baseline too
    check = run.sampling.greedy or session.pair.target.dtype == torch.float32
    missed: Counter[tuple[int, int]] = Counter()
    total, done = len(items) * repeats, 0
    for repeat in range(repeats):
        for item, ids in zip(items, encoded):
            order = ("baseline", "eagle") if (repeat + done) % 2 == 0 else ("eagle", "baseline")
            events = {mode: list(session.stream(ids, run, mode)) for mode in order}
            stats = {mode: summarize(events[mode]) for mode in order}
            missed.update(misses(events["eagle"]))
            results.append(_result(item, repeat, len(ids), stats["eagle"], stats["baseline"], check))
            done += 1
            if progress:
                progress(done, total, item.id)
    cats = []
    for c in dict.fromkeys(r.category for r in results):
        cats.append(_summary(c, [r for r in results if r.category == c]))
    settings = {"max_new_tokens": run.max_new_tokens, "tree": run.tree.label(), "temperature": run.sampling.temperature,
                "top_p": run.sampling.top_p, "top_k": run.sampling.top_k, "repeats": repeats, "chat": chat,
                "target": session.pair.target_path, "draft": session.pair.draft_path,
                "draft_family": session.pair.head.family if session.pair.head else "",
                "device": str(session.pair.target.device), "dtype": str(session.pair.target.dtype)}
    top = [{"draft_id": d, "target_id": t, "draft": session.decode([d]), "target": session.decode([t]), "count": n}
           for (d, t), n in missed.most_common(TOP_MISSES)]
    return BenchReport(machine=machine_info(), settings=settings, results=tuple(results), categories=tuple(cats),
                       overall=_summary("overall", results), extra={"top_misses": top})


def draft_label(path_or_repo: str | None) -> str:
    """A short name for a draft: its folder or repo name."""
    text = (path_or_repo or "").rstrip("/\\")
    return Path(text).name or text or "no draft"


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
                   chat: bool = False, progress: Callable[[int, int, str], None] | None = None) -> list[BenchReport]:
    """`run_bench` for each draft on one target (`Session.with_draft` shares the target): same prompts, same
    settings, each draft against its own interleaved baseline, one report per draft in order."""
    jobs = [(session, run, draft_label(session.pair.draft_path)) for session in sessions]
    return _series(jobs, items, repeats, chat, progress)


def sweep_temperatures(session: Session, items: list[PromptItem], run: RunConfig, temperatures: list[float],
                       repeats: int = 1, chat: bool = False,
                       progress: Callable[[int, int, str], None] | None = None) -> list[BenchReport]:
    """`run_bench` at each temperature (the run's top-p, top-k and seed kept; 0 = greedy): how acceptance and
    speedup fall as sampling gets hotter. One report per temperature, in order."""
    s = run.sampling
    jobs = [(session, replace(run, sampling=replace(s, temperature=float(t))), f"T={t:g}") for t in temperatures]
    return _series(jobs, items, repeats, chat, progress)


def report_label(report: BenchReport, by: str) -> str:
    """What tells reports apart in a comparison: the draft's name, or the sampling temperature."""
    if by == "temperature":
        return f"{report.settings['temperature']:g}"
    return draft_label(report.settings["draft"])


def comparison_table(reports: list[BenchReport], by: str = "draft") -> str:
    """Overall figures of each report, one line each (the per-category tables come from `table`)."""
    lines = [f"{by:<28}{'family':>8}{'tau':>7}{'EAGLE tok/s':>13}{'base tok/s':>12}{'speedup':>9}"
             f"{'round cost':>12}{'equal':>7}"]
    for r in reports:
        o = r.overall
        eq = "-" if o.all_equal is None else ("yes" if o.all_equal else "NO")
        lines.append(f"{report_label(r, by):<28}{r.settings['draft_family']:>8}{o.tau:>7.2f}"
                     f"{o.eagle_tokens_per_second:>13.1f}{o.baseline_tokens_per_second:>12.1f}{o.speedup:>8.2f}x"
                     f"{o.round_cost:>12.2f}{eq:>7}")
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


def run_bench_cli(args) -> int:
    import sys

    from tqdm import tqdm

    from .cli import _load, tree_for_session
    from .config import ConfigError

    if args.compare_draft and args.temperatures:
        raise ConfigError("compare drafts or sweep temperatures, one at a time")
    for t in args.temperatures or ():
        SamplingConfig(temperature=t)  # out-of-range values fail before anything loads
    session = _load(args)
    items = load_suite(args.suite, args.categories)
    if args.limit:
        items = items[:args.limit]
    chat = {"on": True, "off": False}.get(args.chat, bool(getattr(session.tokenizer, "chat_template", None)))
    run = RunConfig(max_new_tokens=args.max_new_tokens, ignore_eos=False,
                    tree=tree_for_session(args, session), sampling=SamplingConfig())
    bar = tqdm(total=len(items) * args.repeats, desc="bench", unit="prompt", file=sys.stderr)

    def progress(done, total, name):
        bar.update(1)
        bar.set_postfix_str(name)

    if args.compare_draft or args.temperatures:
        if args.compare_draft:
            by, sessions = "draft", [session] + [session.with_draft(d) for d in args.compare_draft]
            bar.total = len(sessions) * len(items) * args.repeats
            reports = compare_drafts(sessions, items, run, repeats=args.repeats, chat=chat, progress=progress)
        else:
            by = "temperature"
            bar.total = len(args.temperatures) * len(items) * args.repeats
            reports = sweep_temperatures(session, items, run, args.temperatures, repeats=args.repeats, chat=chat,
                                         progress=progress)
        bar.close()
        for r in reports:
            print(f"{by} {report_label(r, by)} ({r.settings['draft_family']}, {r.settings['tree']})\n{r.table()}\n"
                  f"{r.misses_line()}\n")
        print(comparison_table(reports, by))
        if args.json_out:
            Path(args.json_out).write_text(comparison_json(reports, by), encoding="utf-8")
        if args.csv_out:
            Path(args.csv_out).write_text(comparison_csv(reports, by), encoding="utf-8")
        return 0
    report = run_bench(session, items, run, repeats=args.repeats, chat=chat, progress=progress)
    bar.close()
    print(report.table())
    print(report.misses_line())
    if args.json_out:
        Path(args.json_out).write_text(report.to_json(), encoding="utf-8")
    if args.csv_out:
        Path(args.csv_out).write_text(report.to_csv(), encoding="utf-8")
    return 0
