"""python -m eagle_demo train-head {data, train, export, report}: EAGLE heads for your own target."""

from __future__ import annotations

import argparse

from ..training import train_head as stages

__all__ = ["add_parser", "run"]


def add_parser(sub) -> None:
    p = sub.add_parser("train-head", help="train EAGLE-3 / EAGLE-1 heads for a target on its own chat answers",
                       description=stages.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    stages.add_stages(p)


def run(args: argparse.Namespace) -> int:
    return stages.run(args)
