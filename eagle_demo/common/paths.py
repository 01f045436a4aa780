"""Where the repository's files are: the one place that names them (no imports, so any layer may use it)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "ASSETS", "SUITE", "STYLE", "REQUIREMENTS"]

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
SUITE = ASSETS / "prompts" / "suite.jsonl"  # the shipped prompt suite (benchmark, page examples)
STYLE = ASSETS / "style.css"
REQUIREMENTS = ROOT / "requirements.txt"
