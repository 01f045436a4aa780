"""Reprint the pre-flight probe's table for the shipped pair's seeded misconfigurations.

The pre-flight probe on each seeded misconfiguration of the shipped pair: what the config declares, the
measured tau, every alternative measured, and what the probe uses. Prints a markdown table (the one in
docs/checkpoint-formats.md, "Seeded misconfigurations, measured").

    python scripts/probe_seeded.py            # about 30 s on one CPU thread

The drafts are built from assets/tiny-eagle3 and the fixture in tests/seeded/ (made by
`python -m eagle_demo.training.seeded aux`; the other cases are built exactly); see eagle_demo/training/seeded.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle_demo.checkpoints import load_pair  # noqa: E402
from eagle_demo.probe.measure import probe_pair  # noqa: E402
from eagle_demo.training.seeded import SEEDED, SHIPPED, TARGET, seeded_draft  # noqa: E402


def _fmt(conv: dict, base: dict | None = None) -> str:
    diff = {k: v for k, v in conv.items() if base is None or base.get(k) != v}
    return ", ".join(f"{k}={v}" for k, v in diff.items()) or "as declared"


def _row(name: str, source: str, truth: dict, probe: dict) -> str:
    declared = probe["declared"]
    alts = "; ".join(f"{_fmt(a['conventions'], declared)}: {a['tau']:.2f}" for a in probe["alternatives"])
    used = _fmt(probe["used"], declared) if probe["used"] != declared else "declared (kept)"
    best = max(probe["alternatives"], key=lambda a: a["evidence"]["gain"], default=None)
    e = best["evidence"] if best else None
    seen = (f"{_fmt(best['conventions'], declared)}: {e['gain']:+.0%}, z {e['z']:.1f}, {e['prompts']} x {e['tokens']}"
            if e else "-")
    return (f"| {name} | {source} | {_fmt(truth) if truth else '-'} | {_fmt(declared)} | "
            f"{probe['declared_tau']:.2f} | {alts} | {seen} | {used} | {probe['tau']:.2f} |")


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    t0 = time.time()
    print("| case | seen in | trained / built with | declared | declared tau | alternatives (tau) | "
          "strongest evidence (gain, z, text) | used | used tau |")
    print("|---|---|---|---|---|---|---|---|---|")
    pair = probe_pair(load_pair(str(TARGET), str(SHIPPED), dtype="float32", device="cpu"))
    print(_row("shipped pair (no seeding)", "", {}, pair.report.probe))
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(SEEDED):
            folder = seeded_draft(case, Path(tmp) / str(i))
            pair = probe_pair(load_pair(str(TARGET), str(folder), dtype="float32", device="cpu"))
            print(_row(case.name, case.source, case.truth, pair.report.probe))
            print(f"<!-- {pair.report.adaptations[-1]} -->")
    print(f"\n{len(SEEDED) + 1} pairs probed in {time.time() - t0:.0f} s "
          f"({pair.report.probe['prompts']} prompts x {pair.report.probe['max_new_tokens']} tokens each)")


if __name__ == "__main__":
    main()
