"""`python -m eagle_demo doctor`: one line per check (ok / warn / FAIL); exit 1 when a check failed."""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    d = sub.add_parser("doctor", help="check this environment: versions, devices, the shipped pair end to end")
    d.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    d.add_argument("--no-model", action="store_true", help="skip loading the shipped pair")


def run(args: argparse.Namespace) -> int:
    """Print one line per check; exit 1 when any check failed (0 with warnings only)."""
    from ..common.devices import resolve_device
    from ..doctor import run_checks

    resolve_device(args.device)  # an impossible device is an error (exit 2), not a failed check
    failed = False
    for check in run_checks(args.device, model=not args.no_model):
        print(check.line(), flush=True)
        failed |= check.status == "FAIL"
    return 1 if failed else 0
