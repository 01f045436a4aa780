"""Shared by the replay experiments: their command line and the reference texts.

What the replay scripts (`calibration_text.py`, `chain_stops.py`) share: their command line (the pair, the
reference texts' length) and the reference texts, the suite's and the ten fresh prompts' greedy continuations."""

from __future__ import annotations

import argparse
from pathlib import Path

from eagle_demo.bench.run import load_suite
from eagle_demo.common.paths import SUITE

ROOT = Path(__file__).resolve().parents[2]
FRESH = ROOT / "docs" / "bench" / "gen2" / "fresh10.jsonl"


def pair_args(description: str, argv=None) -> argparse.Namespace:
    """--target, --draft (the shipped pair by default) and --reference-tokens."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--target", default=str(ROOT / "assets" / "tiny-target"))
    ap.add_argument("--draft", default=str(ROOT / "assets" / "tiny-eagle1"))
    ap.add_argument("--reference-tokens", type=int, default=128, help="new tokens of the suite's and fresh texts")
    return ap.parse_args(argv)


def reference_texts(new_tokens: int) -> dict[str, tuple[list[str], int]]:
    """name -> (prompts, new tokens) of the suite and the fresh prompts."""
    return {name: ([item.prompt for item in load_suite(path)], new_tokens) for name, path in (("suite", SUITE),
                                                                                            ("fresh", FRESH))}
