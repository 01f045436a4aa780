"""The automatic tree's predicted round cost against a timed run of its chosen shape.

The automatic tree's prediction against a run: calibrate a pair (fresh), then time four prompts of 128 tokens at
the chosen shape against plain decoding, and run them again with the gate. Prints the choice, the calibration's
seconds and overhead scale, the predicted and the measured round cost in plain steps, and the gate's plain
rounds. A measurement, not a test; run it from two checkouts back to back to compare code (docs/perf.md, "Timing
the chosen shape").

    OMP_NUM_THREADS=1 python scripts/experiments/calibration_check.py [--code DIR] [--draft PATH]
"""

from __future__ import annotations

import argparse
import os
import sys

PROMPTS = ("def quicksort(items):\n    \"\"\"Sort a list with quicksort.\"\"\"\n",
           "class LinkedList:\n    def __init__(self):\n        self.head = None\n\n    def append(self, value):\n",
           "The river flowed slowly through the valley, and the old miller",
           "import json\n\n\ndef load_config(path):\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    help="the checkout whose eagle_demo runs (default: this one)")
    ap.add_argument("--draft", default="default", help="a draft folder (default: the shipped head)")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.code)
    from eagle_demo.autotree.choose import auto_tree
    from eagle_demo.common.config import RunConfig
    from eagle_demo.decoding.metrics import summarize
    from eagle_demo.session import load_session

    session = load_session(None, args.draft, threads=1, device="cpu", dtype="float32")
    choice = auto_tree(session, refresh=True)
    gated = choice.run_config(RunConfig(max_new_tokens=128, ignore_eos=True))
    fixed = RunConfig(max_new_tokens=128, ignore_eos=True, tree=choice.tree)
    plain_s = eagle_s = 0.0
    steps = rounds = paused = 0
    for prompt in PROMPTS:
        ids = session.encode(prompt)
        base, eagle = summarize(session.stream(ids, fixed, mode="baseline")), summarize(session.stream(ids, fixed))
        plain_s, steps = plain_s + base.decode_seconds, steps + base.rounds
        eagle_s, rounds = eagle_s + eagle.decode_seconds, rounds + eagle.rounds
        paused += summarize(session.stream(ids, gated)).plain_rounds
    step = plain_s / steps
    print(f"{choice.line()} | calibration {choice.calibration_seconds:.2f} s, "
          f"overhead scale {choice.table.scale:.3f} | "
          f"round: predicted {choice.predicted_round_cost:.2f}, measured {eagle_s / rounds / step:.2f} plain steps | "
          f"the gate's plain rounds {paused}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
