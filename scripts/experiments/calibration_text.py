"""How well a calibration text stands for the runs it prices, scored on other texts.

How well a calibration text stands for the runs: the shape the automatic tree picks from it, and that shape's
predicted speedup on the suite's and the fresh prompts' own texts as a share of the best shape's there. One set
of measured costs scores every text, so only the text differs. A measurement, not a test.

    OMP_NUM_THREADS=1 python scripts/experiments/calibration_text.py [--draft assets/tiny-eagle1] \
        [--reference-tokens 128]

Texts: "before" (the calibration text until 2026-12-05: 40-token continuations of a code, a history and an
arithmetic prompt) and "now" (`autotree.choose.PROMPTS`, `autotree.choose.NEW_TOKENS` tokens each).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _texts import pair_args, reference_texts  # noqa: E402

from eagle_demo.autotree import choose as autotree  # noqa: E402
from eagle_demo.autotree.replay import replay, walk_tau  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402

BEFORE = (("def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n",
           "The history of the printing press begins in the fifteenth century, when",
           "Question: A train travels 60 km in 1.5 hours. What is its average speed?\nAnswer:"), 40)


def main(argv=None) -> int:
    args = pair_args(__doc__.splitlines()[0], argv)
    session = load_session(args.target, args.draft, threads=1, device="cpu", dtype="float32")
    engine = session.eagle
    dev = engine.runner.device
    hot = autotree.hot_sizes(engine)
    shapes = autotree.candidates(dev, hot)
    costs = autotree.measure_costs(engine, session.encode(autotree.PROMPTS[0]), 2.0)

    def speedups(prompts, new_tokens) -> tuple[dict, dict]:
        got = replay(engine, [session.encode(p) for p in prompts], autotree.groups(dev, hot), new_tokens)
        taus = {shape: walk_tau(got.accepted[shape]) for shape in shapes}
        return taus, {shape: tau / autotree.round_cost(costs, shape, tau) for shape, tau in taus.items()}

    reference = {name: speedups(*text)[1] for name, text in reference_texts(args.reference_tokens).items()}
    print(f"{args.draft}: plain step {costs.plain * 1e3:.2f} ms")
    for name, ref in reference.items():
        top = sorted(ref, key=ref.get, reverse=True)[:4]
        print(f"  best on the {name} texts: " + ", ".join(f"{s.label()} {ref[s]:.2f}x" for s in top))
    for name, (prompts, new_tokens) in (("before", BEFORE), ("now", (autotree.PROMPTS, autotree.NEW_TOKENS))):
        start = time.perf_counter()
        taus, pred = speedups(prompts, new_tokens)
        pick = max(pred, key=pred.get)
        shares = ", ".join(f"{k} {ref[pick] / max(ref.values()):.2f}" for k, ref in reference.items())
        print(f"  {name:<7} {len(prompts)} x {new_tokens} tokens ({time.perf_counter() - start:.1f} s): picks "
              f"{pick.label()} (tau {taus[pick]:.2f}, {pred[pick]:.2f}x); share of the best: {shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
