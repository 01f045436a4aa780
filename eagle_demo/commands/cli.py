"""python -m eagle_demo {generate, inspect, bench, export, doctor, train-head}: the parser and the dispatch.

Errors exit with code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..common.errors import one_line
from . import bench, doctor, export, generate, inspect, train_head

__all__ = ["main", "build_parser", "user_errors"]

SUBCOMMANDS = {"generate": generate, "inspect": inspect, "bench": bench, "doctor": doctor, "export": export,
               "train-head": train_head}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eagle_demo", description="Lossless EAGLE speculative decoding.")
    sub = p.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS.values():
        module.add_parser(sub)
    return p


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors whose message speaks for itself (what is wrong, what to do); any other error also shows its
    class name."""
    from ..checkpoints import CheckpointError
    from ..common.config import ConfigError
    from ..common.devices import DeviceError
    from ..session import PromptError

    return ConfigError, CheckpointError, DeviceError, PromptError


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight-loading bars; Hub download bars stay
    try:
        return SUBCOMMANDS[args.command].run(args)
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 2
    except Exception as exc:  # every failure is one line, no traceback
        sys.stderr.write(f"error: {one_line(exc, user_errors())}\n")
        return 2
