"""`python -m eagle_demo inspect`: how a draft adapts to a target, from configs and tensor headers only."""

from __future__ import annotations

import argparse
import sys

from .args import add_pair_args, pair_from_args

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    i = sub.add_parser("inspect", help="detect and report how a draft adapts to a target (no full load)")
    add_pair_args(i)
    i.add_argument("--json", action="store_true")
    i.add_argument("--probe", action="store_true", help="also load the pair and measure tau with the declared "
                   "conventions and the alternatives the checkpoint leaves open (3 prompts x 32 tokens)")


def run(args: argparse.Namespace) -> int:
    from ..checkpoints import inspect_pair

    target, draft = pair_from_args(args)
    if args.probe and draft is not None:
        from ..probe.measure import probe_report as inspect_pair
    report = inspect_pair(target, draft, revision=args.revision, draft_revision=args.draft_revision)
    if args.json:
        print(report.to_json())
    elif report.problem is None:
        print(report.summary())
    if report.problem is not None:
        sys.stderr.write(f"error: {report.problem}\n")
        return 2
    return 0
