"""Compatibility: the command line lives in `eagle_demo.commands` (`commands.cli` is the parser and dispatch)."""

from .commands.cli import build_parser, main

__all__ = ["main", "build_parser"]
