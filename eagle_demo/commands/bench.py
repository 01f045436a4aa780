"""`python -m eagle_demo bench`: EAGLE against plain decoding on a prompt suite; or several drafts for one target
(and the n-gram draft, `--ngram`), or several sampling temperatures, compared on the same prompts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..bench import run as suite
from ..common.config import ConfigError, RunConfig, SamplingConfig
from ..decoding.gate import paused_line
from .args import (
    add_auto_tree_arg,
    add_engine_args,
    add_ngram_args,
    add_pair_args,
    add_tree_args,
    auto_for_session,
    flag_notes,
    load_from_args,
    ngram_from_args,
    write_notes,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="benchmark EAGLE against plain decoding on a prompt suite")
    add_pair_args(b)
    add_engine_args(b)
    b.add_argument("--suite", default=None, help="JSONL prompt suite (default: the shipped suite)")
    b.add_argument("--categories", nargs="*", default=None)
    b.add_argument("--max-new-tokens", type=int, default=128)
    b.add_argument("--repeats", type=int, default=1)
    b.add_argument("--limit", type=int, default=None, help="at most this many prompts")
    b.add_argument("--chat", choices=["auto", "on", "off"], default="auto")
    add_tree_args(b)
    add_auto_tree_arg(b)
    b.add_argument("--compare-draft", nargs="+", default=None, metavar="DRAFT",
                   help="also run these drafts on the same target (loaded once) and compare them; without tree "
                        "flags each draft runs its own automatic tree")
    b.add_argument("--temperatures", nargs="+", type=float, default=None, metavar="T",
                   help="run the suite at each sampling temperature (0 = greedy) and compare: "
                        "acceptance falls as T rises")
    b.add_argument("--ngram", action="store_true",
                   help="also run the n-gram (prompt lookup) draft on the same prompts, against its own interleaved "
                        "baseline: one table of EAGLE, n-gram and plain decoding per category")
    add_ngram_args(b)
    b.add_argument("--context-lengths", nargs="+", type=int, default=None, metavar="N",
                   help="run each prompt after N tokens of real text of its kind (the standard library's source for "
                        "code, its docstrings otherwise), for each N (e.g. 128 512 1536): tau and speedup by length")
    b.add_argument("--json", dest="json_out", default=None, help="write the JSON report here")
    b.add_argument("--csv", dest="csv_out", default=None, help="write the per-prompt CSV here")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm


    ngram = _check(args)
    items = suite.load_suite(args.suite, args.categories)[:args.limit]  # a bad suite fails before the model loads
    write_notes(flag_notes(args))
    session = load_from_args(args)
    chat = {"on": True, "off": False}.get(args.chat, session.has_chat_template)
    tree, auto = auto_for_session(args, session)
    run_config = RunConfig(max_new_tokens=args.max_new_tokens, ignore_eos=False, sampling=SamplingConfig(), tree=tree)
    series = (len(args.compare_draft or ()) + 1 if args.compare_draft
              else len(args.temperatures or args.context_lengths or ()) or 1) + bool(args.ngram)
    bar = tqdm(total=series * len(items) * args.repeats, desc="bench", unit="prompt", file=sys.stderr)

    def progress(done, total, name):
        bar.update(1)
        bar.set_postfix_str(name)

    options = dict(repeats=args.repeats, chat=chat, progress=progress)
    # its draft pauses below break-even (and moves its shape with --retune)
    auto_run = auto.run_config(run_config, args.retune) if auto is not None else run_config
    if args.context_lengths:
        return _context(args, session, items, auto_run, options, bar)
    if args.ngram:
        return _with_ngram(args, session, items, auto_run, auto, options, bar, RunConfig(
            max_new_tokens=args.max_new_tokens, sampling=SamplingConfig(), ngram=ngram))
    if not args.compare_draft and not args.temperatures:
        report = suite.with_auto(suite.run_bench(session, items, auto_run, **options), auto)
        bar.close()
        print(report.table())
        plain = sum(r.plain_rounds for r in report.results)
        rounds = sum(r.rounds for r in report.results)
        if plain:
            print(paused_line(plain, rounds, auto_run.pause_below, auto_run.pause_first, auto_run.pause_by_length))
        print(report.misses_line())
        print(report.where_line())
        _write(args, report.to_json(), report.to_csv())
        return 0
    if args.compare_draft:
        by, sessions = "draft", [session] + [session.with_draft(d) for d in args.compare_draft]
        # with no tree flag each draft runs its own automatic tree (calibrated for that head), else the flags' tree
        autos = [auto] + [auto_for_session(args, s)[1] for s in sessions[1:]] if auto is not None else None
        runs = [a.run_config(run_config, args.retune) for a in autos] if autos is not None else None
        reports = suite.compare_drafts(sessions, items, run_config, runs=runs, **options)
        reports = [suite.with_auto(r, a) for r, a in zip(reports, autos)] if autos is not None else reports
    else:
        by = "temperature"
        reports = suite.sweep_temperatures(session, items, auto_run, args.temperatures, **options)
        # the choice was calibrated greedy: its prediction belongs to the greedy report only
        reports = [suite.with_auto(r, auto) if r.settings["temperature"] == 0 else r for r in reports]
    bar.close()
    for r in reports:
        print(f"{by} {suite.report_label(r, by)} ({r.settings['draft_family']}, {r.settings['tree']})\n{r.table()}\n"
              f"{r.misses_line()}\n")
    print(suite.comparison_table(reports, by))
    _write(args, suite.comparison_json(reports, by), suite.comparison_csv(reports, by))
    return 0


def _check(args: argparse.Namespace):
    """Settings fail here, before anything loads; returns the n-gram draft's settings."""
    if args.compare_draft and args.temperatures:
        raise ConfigError("compare drafts or sweep temperatures, one at a time")
    if args.context_lengths and (args.compare_draft or args.temperatures or args.ngram):
        raise ConfigError("sweep context lengths alone: leave out --compare-draft, --temperatures and --ngram")
    if args.ngram and args.temperatures:
        raise ConfigError("the n-gram draft races at one temperature; leave out --temperatures or --ngram")
    for t in args.temperatures or ():
        SamplingConfig(temperature=t)
    if args.repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {args.repeats}")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (or left out for the whole suite), got {args.limit}")
    return ngram_from_args(args)


def _with_ngram(args, session, items, auto_run, auto, options, bar, ngram_run) -> int:
    """EAGLE (and each --compare-draft head, each with its own automatic tree) and the n-gram draft on the same
    prompts, each against its own interleaved baseline; one table per category."""
    from ..bench.run import (
        category_table,
        compare_drafts,
        comparison_csv,
        comparison_json,
        comparison_table,
        run_bench,
        with_auto,
    )

    sessions = [session] + [session.with_draft(d) for d in args.compare_draft or ()]
    autos = [auto] + [auto_for_session(args, s)[1] for s in sessions[1:]] if auto is not None else None
    runs = [a.run_config(auto_run, args.retune) for a in autos] if autos is not None else None
    reports = compare_drafts(sessions, items, auto_run, runs=runs, **options)
    reports = [with_auto(r, a) for r, a in zip(reports, autos)] if autos is not None else reports
    reports.append(run_bench(session, items, ngram_run, racer="ngram", **options))
    bar.close()
    for r in reports:
        print(f"draft {r.settings['draft']} ({r.settings['draft_family']}, {r.settings['tree']})\n{r.table()}\n")
    print(comparison_table(reports, "draft"))
    print("\ntokens/s per category (speedup over each run's own interleaved plain decoding)")
    print(category_table(reports, "draft"))
    _write(args, comparison_json(reports, "draft"), comparison_csv(reports, "draft"))
    return 0


def _context(args: argparse.Namespace, session, items, run_config, options: dict, bar) -> int:
    """The context-length sweep: one report per length, compared in one table (tau and speedup per length)."""
    from ..bench.context_sweep import sweep_context
    from ..bench.report import comparison_csv, comparison_json, comparison_table

    reports = sweep_context(session, items, run_config, args.context_lengths, **options)
    bar.close()
    for r in reports:
        print(f"context {r.settings['context_tokens']} tokens (mean {r.settings['context_mean']:.0f})\n{r.table()}\n"
              f"{r.where_line()}\n")
    print(comparison_table(reports, "context"))
    _write(args, comparison_json(reports, "context"), comparison_csv(reports, "context"))
    return 0


def _write(args: argparse.Namespace, json_text: str, csv_text: str) -> None:
    if args.json_out:
        Path(args.json_out).write_text(json_text, encoding="utf-8")
    if args.csv_out:
        Path(args.csv_out).write_text(csv_text, encoding="utf-8")
