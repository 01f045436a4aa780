"""`python -m eagle_demo export`: the vLLM or SGLang command line for a pair, and an adapted copy of the draft
where that engine cannot load it as published; with `--ngram`, the command that serves the target with the n-gram
draft (no head)."""

from __future__ import annotations

import argparse
import shlex

from .args import (
    add_ngram_args,
    add_pair_args,
    add_tree_args,
    ngram_from_args,
    pair_from_args,
    tree_from_args,
    write_notes,
)

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    e = sub.add_parser("export", help="command lines (and adapted drafts) for vLLM or SGLang")
    add_pair_args(e)
    e.add_argument("--engine", choices=["vllm", "sglang"], required=True)
    e.add_argument("--out", default=None, help="folder for an adapted copy of the draft when one is needed")
    add_tree_args(e)
    e.add_argument("--ngram", action="store_true",
                   help="the command that serves --target with the n-gram draft (prompt lookup, no head), set by the "
                        "--ngram-* flags; --draft, --out and the tree flags are not used")
    add_ngram_args(e)


def run(args: argparse.Namespace) -> int:
    from ..checkpoints import CheckpointError, inspect_pair
    from ..deploy import plan_for, write_adapted_copy

    if args.ngram:
        return _run_ngram(args)
    given = [f"--{f}" for f in ("device", "dtype") if getattr(args, f) != "auto"]
    given += ["--threads"] if args.threads else []
    if given:  # the serving engines pick their own
        write_notes([f"{' '.join(given)} set how this playground runs a pair; they do not change the serving command"])
    target, draft = pair_from_args(args)
    report = inspect_pair(target, draft, revision=args.revision, draft_revision=args.draft_revision)
    if report.problem:
        raise CheckpointError(report.problem)
    tree = tree_from_args(args, "cuda", report.family)  # the serving engines run on GPUs
    plan = plan_for(args.engine, target, draft, report, tree)
    command = plan.command
    if plan.changes and args.out:
        out = write_adapted_copy(plan, report, args.out)
        command = plan_for(args.engine, target, str(out), report, tree).command  # the copy, even where optional
        command = command.replace("<ADAPTED_DRAFT_DIR>", shlex.quote(str(out)))
        print(f"# adapted draft written to {out} (see its README.md)")
    elif args.out:  # nothing to change
        print(f"# {args.engine} loads this draft as published; no copy written to {args.out}")
    elif plan.required:
        print(f"# {args.engine} cannot load this draft as published; pass --out DIR for an adapted copy:")
    elif plan.recommended:
        print(f"# {args.engine} loads this draft as published; an adapted copy is recommended (pass --out DIR):")
    else:
        print(f"# {args.engine} loads this draft as published")
    for c in plan.changes:
        print(f"#   - {c}")
    for n in plan.notes:
        print(f"# note: {n}")
    print(command)
    return 0


def _run_ngram(args: argparse.Namespace) -> int:
    from ..deploy.ngram import ngram_commands
    from ..session import SHIPPED_TARGET

    unused = [f for f, v in (("--draft", args.draft), ("--out", args.out), ("--draft-revision", args.draft_revision))
              if v is not None]
    if unused:
        write_notes([f"{' '.join(unused)}: the n-gram draft needs no head; not used with --ngram"])
    commands = ngram_commands(args.target or SHIPPED_TARGET, ngram_from_args(args))
    print(f"# {args.engine}: the n-gram draft (no head)")
    for n in commands.notes:
        print(f"# note: {n.replace('**', '').replace('`', '')}")
    print(getattr(commands, args.engine))
    return 0
