"""Long-run memory check: resident memory growth over many sequential generations.

    python scripts/soak.py --runs 100 [--target T --draft D] [--max-new-tokens 64]

Prints RSS after warm-up and at the end, and the growth in percent. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psutil  # noqa: E402

from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402

PROMPTS = ["def fibonacci(n):\n", "import os\nimport sys\n\n", "class Stack:\n", "The logging module"]


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--target", default=None)
    ap.add_argument("--draft", default="default")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args(argv)
    session = load_session(args.target, args.draft)
    prompts = [session.encode(p) for p in PROMPTS]

    def one(i: int) -> None:
        sampling = SamplingConfig(temperature=0.0 if i % 2 == 0 else 0.8, seed=i)
        run = RunConfig(max_new_tokens=args.max_new_tokens, tree=TreeConfig(depth=5, top_k=4, total_tokens=16),
                        sampling=sampling)
        mode = "baseline" if i % 5 == 4 else "eagle"
        for _ in session.stream(prompts[i % len(prompts)], run, mode):
            pass

    for i in range(args.warmup):
        one(i)
    gc.collect()
    start, t0 = rss_mb(), time.time()
    samples = []
    for i in range(args.runs):
        one(args.warmup + i)
        if (i + 1) % 10 == 0:
            gc.collect()
            samples.append(rss_mb())
    end = rss_mb()
    growth = 100.0 * (end - start) / start
    print(f"runs {args.runs} in {time.time() - t0:.1f}s; RSS after warm-up {start:.1f} MiB, at end {end:.1f} MiB, "
          f"growth {growth:+.2f}%; every 10 runs: " + ", ".join(f"{s:.1f}" for s in samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
