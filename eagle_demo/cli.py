"""python -m eagle_demo {generate, inspect, bench, export, doctor}

Errors exit with code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from .config import ConfigError, RunConfig, SamplingConfig, TreeConfig, TREE_PRESETS
from .events import Finish, Prefill, Round, Step, to_dict

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eagle_demo", description="Lossless EAGLE speculative decoding.")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="generate text with EAGLE or plain decoding")
    _pair_args(g)
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-ids", help="comma-separated token ids, e.g. 1,2,3")
    g.add_argument("--chat", action="store_true", help="apply the tokenizer's chat template")
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="sampling top-k (0 = off)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--mode", choices=["eagle", "baseline"], default="eagle")
    g.add_argument("--race", action="store_true",
                   help="then run plain decoding of the same prompt: speedup, identity (greedy) and why")
    _tree_args(g)
    g.add_argument("--auto-tree", action="store_true",
                   help="pick the chain/tree that maximises predicted tau / round cost for this pair and device "
                        "(eagle_demo.autotree: a few seconds of calibration, cached on disk)")
    g.add_argument("--ignore-eos", action="store_true")
    g.add_argument("--json", action="store_true", help="one JSON object per event and a final summary line")

    i = sub.add_parser("inspect", help="detect and report how a draft adapts to a target (no full load)")
    _pair_args(i)
    i.add_argument("--json", action="store_true")

    b = sub.add_parser("bench", help="benchmark EAGLE against plain decoding on a prompt suite")
    _pair_args(b)
    b.add_argument("--suite", default=None, help="JSONL prompt suite (default: the shipped suite)")
    b.add_argument("--categories", nargs="*", default=None)
    b.add_argument("--max-new-tokens", type=int, default=128)
    b.add_argument("--repeats", type=int, default=1)
    b.add_argument("--limit", type=int, default=None, help="at most this many prompts")
    b.add_argument("--chat", choices=["auto", "on", "off"], default="auto")
    _tree_args(b)
    b.add_argument("--auto-tree", action="store_true",
                   help="pick the chain/tree that maximises predicted tau / round cost for this pair and device "
                        "(eagle_demo.autotree: a few seconds of calibration, cached on disk)")
    b.add_argument("--compare-draft", nargs="+", default=None, metavar="DRAFT",
                   help="also run these drafts on the same target (loaded once) and compare them")
    b.add_argument("--temperatures", nargs="+", type=float, default=None, metavar="T",
                   help="run the suite at each sampling temperature (0 = greedy) and compare: acceptance falls as T rises")
    b.add_argument("--json", dest="json_out", default=None, help="write the JSON report here")
    b.add_argument("--csv", dest="csv_out", default=None, help="write the per-prompt CSV here")

    d = sub.add_parser("doctor", help="check this environment: versions, devices, the shipped pair end to end")
    d.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    d.add_argument("--no-model", action="store_true", help="skip loading the shipped pair")

    e = sub.add_parser("export", help="command lines (and adapted drafts) for vLLM or SGLang")
    _pair_args(e)
    e.add_argument("--engine", choices=["vllm", "sglang"], required=True)
    e.add_argument("--out", default=None, help="folder for an adapted copy of the draft when one is needed")
    _tree_args(e)
    return p


def _pair_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=None, help="repo id or folder (default: the shipped tiny target)")
    p.add_argument("--draft", default=None, help="repo id or folder (default: the shipped EAGLE-1 head)")
    p.add_argument("--revision", default=None, help="target revision")
    p.add_argument("--draft-revision", default=None)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (0 = automatic: 1 for a model under 50 M parameters on CPU, "
                        "torch's default otherwise)")


def _tree_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=int, default=None, help="longest drafted path (draft forwards per round)")
    p.add_argument("--draft-top-k", type=int, default=None, help="children per expanded node")
    p.add_argument("--total-tokens", type=int, default=None, help="tokens verified per round, root included")
    p.add_argument("--chain", type=int, default=None, help="draft a single chain of K tokens instead of a tree")


def tree_from_args(args, device_type: str = "cpu") -> TreeConfig:
    if args.chain is not None:
        return TreeConfig.chain(args.chain)
    base = TREE_PRESETS["cpu" if device_type == "cpu" else "gpu-eagle2"]
    return TreeConfig(depth=args.depth if args.depth is not None else base.depth,
                      top_k=args.draft_top_k if args.draft_top_k is not None else base.top_k,
                      total_tokens=args.total_tokens if args.total_tokens is not None else base.total_tokens)


def tree_for_session(args, session) -> TreeConfig:
    """--auto-tree: the autotree choice (its line goes to stderr); otherwise the flags or the preset."""
    if getattr(args, "auto_tree", False) and session.eagle is not None:
        from .autotree import auto_tree

        choice = auto_tree(session)
        sys.stderr.write(f"[{choice.line()}]\n")
        return choice.tree
    return tree_from_args(args, session.pair.target.device.type)


def pair_from_args(args) -> tuple[str, str]:
    """(target, draft) for commands that need both; the shipped pair when neither is given."""
    from .session import SHIPPED_EAGLE1, SHIPPED_TARGET

    target = args.target or SHIPPED_TARGET
    draft = args.draft or (SHIPPED_EAGLE1 if target == SHIPPED_TARGET else None)
    if draft is None:
        raise ConfigError("--draft is required when --target is given")
    return target, draft


def _draft_arg(args) -> str | None:
    return args.draft if args.draft is not None else "default"


def _load(args, need_draft: bool = True):
    from .session import load_session

    draft = _draft_arg(args) if need_draft else None
    return load_session(args.target, draft, revision=args.revision, draft_revision=args.draft_revision,
                        dtype=args.dtype, device=args.device, threads=getattr(args, "threads", 0))


def cmd_generate(args) -> int:
    from .session import TokenStreamDecoder

    prompt_ids = None
    if args.prompt_ids is not None:
        try:
            prompt_ids = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--prompt-ids must be comma-separated integers, got '{args.prompt_ids}'")
    elif not args.prompt.strip():
        raise ConfigError("the prompt is empty; pass some text with --prompt")
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)
    tree_from_args(args)  # settings are checked before anything is loaded
    session = _load(args, need_draft=args.mode == "eagle")
    if prompt_ids is None:
        prompt_ids = session.encode(args.prompt, chat=args.chat)
    run = RunConfig(max_new_tokens=args.max_new_tokens, ignore_eos=args.ignore_eos,
                    tree=tree_for_session(args, session), sampling=sampling)
    note = session.context_note(len(prompt_ids), run) if args.mode == "eagle" else ""
    if note:
        sys.stderr.write(f"[note] {note}\n")
    out = sys.stdout
    text = TokenStreamDecoder(session.decode)
    finish = None
    events = []
    for event in session.stream(prompt_ids, run, mode=args.mode):
        events.append(event)
        if args.json:
            out.write(json.dumps(to_dict(event)) + "\n")
        else:
            ids = (event.token_id,) if isinstance(event, (Prefill, Step)) else \
                event.committed_ids if isinstance(event, Round) else ()
            if ids:
                out.write(text.push(ids))
        out.flush()
        if isinstance(event, Finish):
            finish = event
    rounds_tokens = finish.new_tokens - 1
    tau = rounds_tokens / finish.rounds if finish.rounds else 0.0
    summary = {
        "event": "summary", "token_ids": list(finish.token_ids), "text": session.decode(finish.token_ids),
        "new_tokens": finish.new_tokens, "rounds": finish.rounds, "tau": round(tau, 4),
        "decode_seconds": finish.decode_seconds, "prefill_seconds": finish.prefill_seconds, "mode": args.mode,
        "draft_family": session.pair.head.family if (args.mode == "eagle" and session.pair.head) else "",
        "finish_reason": finish.reason,
        "tokens_per_second": rounds_tokens / finish.decode_seconds if finish.decode_seconds > 0 else 0.0,
    }
    race = _race(session, prompt_ids, run, events) if args.race and args.mode == "eagle" else None
    if race:
        summary.update(race)
    if args.json:
        out.write(json.dumps(summary) + "\n")
    else:
        out.write(text.flush() + "\n")
        sys.stderr.write(f"[{args.mode}] {finish.new_tokens} new tokens, {finish.rounds} rounds, tau {tau:.2f}, "
                         f"{summary['tokens_per_second']:.1f} tokens/s, prefill {finish.prefill_seconds:.3f}s\n")
        if race:
            same = {True: "yes", False: "NO", None: "not checked (sampling)"}[race["identical_to_baseline"]]
            sys.stderr.write(f"[baseline] {race['baseline_tokens_per_second']:.1f} tokens/s; identical to baseline: "
                             f"{same}\n[why] {race['why']}\n")
    return 0


def _race(session, prompt_ids: list[int], run: RunConfig, events: list) -> dict:
    """Plain decoding of the same prompt right after the EAGLE run: the page's race, for the terminal."""
    from .metrics import breakdown, summarize

    eagle, base = summarize(events), summarize(session.stream(prompt_ids, run, mode="baseline"))
    why = breakdown(eagle, base)
    complete = "stopped" not in (eagle.finish_reason, base.finish_reason)
    return {"baseline_tokens_per_second": base.tokens_per_second,
            "speedup": why.speedup if why else None, "round_cost": why.round_cost if why else None,
            "identical_to_baseline": (eagle.token_ids == base.token_ids) if run.sampling.greedy and complete else None,
            "why": why.line() if why else "no decode time to compare"}


def cmd_inspect(args) -> int:
    from .checkpoints import inspect_pair

    target, draft = pair_from_args(args)
    report = inspect_pair(target, draft, revision=args.revision, draft_revision=args.draft_revision)
    if args.json:
        print(report.to_json())
    elif report.problem is None:
        print(report.summary())
    if report.problem is not None:
        sys.stderr.write(f"error: {report.problem}\n")
        return 2
    return 0


def cmd_bench(args) -> int:
    from .bench import run_bench_cli

    return run_bench_cli(args)


def cmd_export(args) -> int:
    from .deploy import run_export_cli

    return run_export_cli(args)


def cmd_doctor(args) -> int:
    from .doctor import run_doctor_cli

    return run_doctor_cli(args)


COMMANDS = {"generate": cmd_generate, "inspect": cmd_inspect, "bench": cmd_bench, "export": cmd_export,
            "doctor": cmd_doctor}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight-loading bars; Hub download bars stay
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 2
    except Exception as exc:  # every failure is one line, no traceback
        sys.stderr.write(f"error: {one_line(exc)}\n")
        return 2


def one_line(exc: BaseException) -> str:
    """The first line of an error; our own error classes speak for themselves, others get their type."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    ours = {"ConfigError", "CheckpointError", "DeviceError", "PromptError"}
    if not ours.intersection(c.__name__ for c in type(exc).__mro__):
        text = f"{type(exc).__name__}: {text}"
    return text
