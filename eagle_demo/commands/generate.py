"""`python -m eagle_demo generate`: stream a generation to the terminal (text, or one JSON object per event), then
a summary; `--race` then runs plain decoding of the same prompt, as the page does (`--race ngram`: the n-gram draft
too), and explains the first difference of a racer whose output is not plain decoding's (`divergence`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from ..common.config import ConfigError, RunConfig, SamplingConfig
from ..decoding.events import Finish, Prefill, Round, Step, to_dict
from ..decoding.gate import paused_line
from ..decoding.metrics import summarize
from ..diagnose.run import diagnose_run, too_short
from ..prepare import ReadyRun, RunRequest, TreeChoice, prepare_run, race, race_phases
from ..race.racers import race_all, race_table, racers_dict, short_labels
from ..race.speedup import RaceResult, verdict
from ..target.rope_limit import rope_line
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
    tree_from_args,
    write_notes,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    g = sub.add_parser("generate", help="generate text with EAGLE or plain decoding")
    add_pair_args(g)
    add_engine_args(g)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-ids", help="comma-separated token ids, e.g. 1,2,3")
    g.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None,
                   help="apply the tokenizer's chat template (default: on when the target has one)")
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="sampling top-k (0 = off)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--repetition-penalty", type=float, default=1.0,
                   help="transformers' rule over the prompt and the text so far (1 = off); greedy runs too")
    g.add_argument("--mode", choices=["eagle", "ngram", "baseline"], default="eagle",
                   help="eagle: the loaded draft; ngram: the n-gram (prompt lookup) draft, no head needed; baseline: "
                        "plain decoding")
    g.add_argument("--race", nargs="?", const="plain", choices=["plain", "ngram"], default=None,
                   help="then run plain decoding of the same prompt: speedup, identity (greedy), why, and where a "
                        "differing output first split; `--race ngram`: the n-gram draft races too (one table)")
    add_ngram_args(g)
    add_tree_args(g)
    add_auto_tree_arg(g)
    g.add_argument("--ignore-eos", action="store_true")
    g.add_argument("--json", action="store_true", help="one JSON object per event and a final summary line")
    g.add_argument("--explore", action="store_true",
                   help="then take the run apart: every draft shape replayed on its text (tau, predicted speedup; the "
                        "ran shape and the best marked), tau by kind of line and by position (--json: the summary's "
                        "\"diagnose\" block)")


def _prompt_ids(args: argparse.Namespace) -> list[int] | None:
    if args.prompt_ids is not None:
        try:
            return [int(x) for x in args.prompt_ids.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--prompt-ids must be comma-separated integers, got '{args.prompt_ids}'") from None
    if not args.prompt.strip():
        raise ConfigError("the prompt is empty; pass some text with --prompt")
    return None


def run(args: argparse.Namespace) -> int:
    from .text_stream import TokenStreamDecoder

    prompt_ids = _prompt_ids(args)
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed,
                              repetition_penalty=args.repetition_penalty)
    tree_from_args(args)  # settings are checked before anything is loaded
    write_notes(flag_notes(args))
    session = load_from_args(args, need_draft=args.mode == "eagle")
    run_config = RunConfig(max_new_tokens=args.max_new_tokens, ignore_eos=args.ignore_eos, sampling=sampling,
                           tree=tree_from_args(args, session.device.type, session.family),
                           ngram=ngram_from_args(args))
    phases = race_phases(args.mode, race=bool(args.race), ngram=args.race == "ngram")
    asked = RunRequest(args.prompt if prompt_ids is None else tuple(prompt_ids), run_config, phases,
                       chat=session.has_chat_template if args.chat is None else args.chat)
    ready = prepare_run(session, asked, _tree_choice(args, session))  # a bad prompt fails before any calibration
    prompt_ids, run_config, auto = list(ready.prompt_ids), ready.run, ready.auto
    if ready.note:
        sys.stderr.write(f"[note] {ready.note}\n")
    out, text = sys.stdout, TokenStreamDecoder(session.decode)
    runs = _stream(args, session, ready, text)
    events = runs[args.mode]
    finish, stats = next(e for e in reversed(events) if isinstance(e, Finish)), summarize(events)
    summary = {
        "event": "summary", "token_ids": list(finish.token_ids), "text": session.decode(finish.token_ids),
        "new_tokens": finish.new_tokens, "rounds": finish.rounds, "tau": round(stats.tau, 4),
        "decode_seconds": finish.decode_seconds, "prefill_seconds": finish.prefill_seconds, "mode": args.mode,
        "draft_family": {"eagle": session.family, "ngram": "ngram"}.get(args.mode, ""),
        "finish_reason": finish.reason, "tokens_per_second": stats.tokens_per_second,
        "plain_rounds": stats.plain_rounds, "drafting_tau": round(stats.drafting_tau, 4),
        **({"auto": auto.to_dict()} if auto is not None else {}),
    }
    racers = _race(session, runs, sampling.greedy, summary)
    result = racers[0].result if racers else None
    diagnosis = _explore(args, session, prompt_ids, events, run_config, auto, summary)
    if args.json:
        out.write(json.dumps(summary) + "\n")
    else:
        out.write(text.flush() + "\n")
        sys.stderr.write(f"[{args.mode}] {finish.new_tokens} new tokens, {finish.rounds} rounds, tau {stats.tau:.2f}, "
                         f"{stats.tokens_per_second:.1f} tokens/s, prefill {finish.prefill_seconds:.3f}s\n")
        if stats.plain_rounds:
            gate = paused_line(stats.plain_rounds, stats.rounds, run_config.pause_below, run_config.pause_first,
                               run_config.pause_by_length)
            sys.stderr.write(f"[gate] {gate}; tau of the drafting rounds {stats.drafting_tau:.2f}\n")
        if stats.rope_rounds:
            sys.stderr.write(f"[rope] {rope_line(stats.rope_rounds, stats.rounds)}\n")
        if result is not None:
            _race_lines(result, sampling.greedy, racers, session.decode, run_config, auto is not None)
        if auto is not None:
            speedup = result.speedup if result is not None else None
            retuned = finish.extra.get("retuned", ())  # the shapes the run moved to (`retune`)
            tau = stats.drafting_tau if stats.rounds else None  # the drafting rounds' tau; none without a round
            sys.stderr.write(f"[{auto.versus(speedup, tau, retuned)}]\n")
        if diagnosis is not None:
            sys.stderr.write("[explore] " + diagnosis.text().replace("\n", "\n[explore] ") + "\n")
    return 0


def _explore(args, session, prompt_ids: list[int], events: list, run_config: RunConfig, auto, summary: dict):
    """--explore: the EAGLE run taken apart (`diagnose.run`), also the summary's "diagnose" block; None without it."""
    if not args.explore or args.mode != "eagle":
        return None
    if why := too_short(events):
        write_notes([f"--explore: {why}"])
        return None
    table = auto.table if auto is not None else None  # the calibration's costs price the shapes
    diagnosis = diagnose_run(session, prompt_ids, events, run_config.tree, table, run_config.sampling.greedy)
    summary["diagnose"] = diagnosis.to_dict()
    return diagnosis


def _tree_choice(args: argparse.Namespace, session) -> TreeChoice:
    """The tree flags' choice for `prepare.prepare_run`: the automatic tree without tree flags (its line goes to
    stderr; --retune lets the run move), else the flags over the static default tree."""
    def choose(run_config: RunConfig):
        tree, auto = auto_for_session(args, session)
        if auto is not None:
            return auto.run_config(run_config, args.retune), auto, ""
        return dataclasses.replace(run_config, tree=tree), None, ""
    return choose


def _stream(args, session, ready: ReadyRun, text) -> dict[str, list]:
    """Run the engines in race order (`prepare.race`): the chosen engine's events written as JSON (--json) or its
    committed text as they come; each racer's events serialized inside the timed loop when the chosen engine's
    were (--json), so every racer pays the same consumer cost. Every engine's events, by phase."""
    out, runs = sys.stdout, {}
    for phase, event in race(ready, lambda phase: session.run(ready, phase)):
        runs.setdefault(phase, []).append(event)
        if phase != args.mode:  # a racer
            if args.json:
                json.dumps(to_dict(event))
            continue
        if args.json:
            out.write(json.dumps(to_dict(event)) + "\n")
        else:
            ids = (event.token_id,) if isinstance(event, (Prefill, Step)) else \
                event.committed_ids if isinstance(event, Round) else ()
            if ids:
                out.write(text.push(ids))
        out.flush()
    return runs


def _race(session, runs: dict[str, list], greedy: bool, summary: dict) -> list:
    """The page's race (`--race`: plain decoding of the same prompt right after, and the n-gram draft before it with
    `--race ngram`): the racers (`race.racers.race_all`), the summary updated with the first one's result and
    divergence; none without a race."""
    if len(runs) < 2:
        return []
    racers = race_all(runs, greedy)
    summary.update(racers[0].result.to_dict(detail=False))
    summary["divergence"] = racers[0].divergence.to_dict(session.decode) if racers[0].divergence else None
    if len(racers) > 2:
        summary["race"] = racers_dict(racers, session.decode)
    return racers


def _race_lines(result: RaceResult, greedy: bool, racers: list = (), decode=None, run: RunConfig | None = None,
                auto: bool = False) -> None:
    """The race's lines; with `run`, the table's drafts in compact labels and each below in full (EAGLE's not with
    `auto`: the [auto: ...] line names its tree)."""
    short = short_labels(run) if run is not None else {}
    said = {"eagle"} if auto else set()
    label = "identical to baseline" if greedy else "same as seeded baseline"
    same = verdict(result.identical_to_baseline, "not checked (sampling in bfloat16/float16)")
    speed = result.baseline_tokens_per_second
    speed_text = "no decode step" if speed is None else f"{speed:.1f} tokens/s"
    sys.stderr.write(f"[baseline] {speed_text}; {label}: {same}\n"
                     f"[why] {result.why_line()}\n")
    for r in racers:
        if r.divergence is not None:
            sys.stderr.write(f"[diverged: {r.name}] {r.divergence.line(decode)}\n")
    if len(racers) > 2:  # the table's compact draft labels, then each in full where it says more
        sys.stderr.write(race_table(racers, short) + "\n")
        sys.stderr.write("".join(f"[draft: {r.name}] {r.label}\n" for r in racers
                                 if r.label and r.mode not in said and r.label != short.get(r.mode, r.label)))
