"""Race fixed tree shapes on a few suite prompts: tau, speedup and round cost of each.

Pick a tree shape for this device: run candidate trees on a few suite prompts and print tau, the measured
speedup against plain decoding (interleaved, same process) and the round cost in plain decoding steps
(speedup = tau / round cost: a bigger tree raises tau and the cost together). A measurement, not a test.

    python scripts/experiments/tune_tree.py [--target T --draft D] [--max-new-tokens 128] [--categories code]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from eagle_demo.bench.run import load_suite, run_bench  # noqa: E402
from eagle_demo.common.config import RunConfig, TreeConfig  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402

CANDIDATES = [TreeConfig.chain(3), TreeConfig.chain(4), TreeConfig.chain(5), TreeConfig.chain(6),
              TreeConfig(depth=5, top_k=2, total_tokens=8), TreeConfig(depth=6, top_k=2, total_tokens=10),
              TreeConfig(depth=5, top_k=4, total_tokens=12), TreeConfig(depth=6, top_k=4, total_tokens=16),
              TreeConfig(depth=6, top_k=10, total_tokens=60)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None)
    ap.add_argument("--draft", default="default")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--categories", nargs="*", default=["code"])
    ap.add_argument("--limit", type=int, default=3)
    args = ap.parse_args(argv)
    session = load_session(args.target, args.draft)
    items = load_suite(None, args.categories)[:args.limit]
    print(f"{'tree':<40}{'tau':>7}{'speedup':>9}{'round cost':>12}")
    for tree in CANDIDATES:
        report = run_bench(session, items, RunConfig(max_new_tokens=args.max_new_tokens, tree=tree))
        o = report.overall
        print(f"{tree.label():<40}{o.tau:>7.2f}{o.speedup:>8.2f}x{o.round_cost:>12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
