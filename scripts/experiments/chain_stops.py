"""Stopping chains against fixed chains, replayed on the calibration, suite and fresh texts.

Stopping chains against fixed chains, replayed: each chain's predicted speedup over plain decoding on the
calibration text, the suite's and the fresh prompts' own greedy texts, with one set of measured costs, so only
the shape differs. A measurement, not a test.

    OMP_NUM_THREADS=1 python scripts/experiments/chain_stops.py [--draft assets/tiny-eagle1] [--reference-tokens 128]

The replay (`autotree.replay`) gives every state's accepted length and, for a stopping chain, its drafted length
(the drafter's own rule on the draft's path scores); a chain's tau and mean drafted length are those of the walk an
engine run takes; its round is priced by `autotree.costs` at that mean length.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _texts import pair_args, reference_texts  # noqa: E402

from eagle_demo.autotree import choose as autotree  # noqa: E402
from eagle_demo.autotree.costs import measure_costs  # noqa: E402
from eagle_demo.autotree.replay import Group, replay, walk_drafted, walk_tau  # noqa: E402
from eagle_demo.common.config import TreeConfig  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402

DEEPEST = 16
STOPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)


def main(argv=None) -> int:
    args = pair_args(__doc__.splitlines()[0], argv)
    session = load_session(args.target, args.draft, threads=1, device="cpu", dtype="float32")
    engine = session.eagle
    chain_sizes = (2, 4, 6, 9, 13, DEEPEST + 1)
    costs = measure_costs(engine, session.encode(autotree.PROMPTS[0]), 4.0, chain_sizes, (4, 8), {1: (1, DEEPEST)})
    group = Group(1, DEEPEST, stops=tuple((d, p) for d in (8, 12, DEEPEST) for p in STOPS))
    texts = {"calibration": (autotree.PROMPTS, autotree.NEW_TOKENS), **reference_texts(args.reference_tokens)}
    table = {}
    for name, (prompts, new_tokens) in texts.items():
        got = replay(engine, [session.encode(p) for p in prompts], [group], new_tokens)
        for shape, by_prompt in got.accepted.items():
            tau = walk_tau(by_prompt)
            drafted = walk_drafted(by_prompt, got.drafted[shape]) if shape.stops else None
            cost = costs.round(shape, tau, drafted) / costs.plain
            table.setdefault(shape, {})[name] = (tau / cost, tau, cost)
    print(f"{args.draft}: plain step {costs.plain * 1e3:.2f} ms, verify of 9 tokens "
          f"{costs.verify_at(9, False) / costs.plain:.2f} plain steps, "
          f"a draft depth {costs.draft[1].slope * 1e3:.2f} ms")
    fixed = [s for s in table if not s.stops]
    best = {name: max(fixed, key=lambda s: table[s][name][0]) for name in texts}
    print("best fixed chain: " + ", ".join(f"{n} {best[n].depth} ({table[best[n]][n][0]:.2f}x)" for n in texts))
    print(f"{'shape':<34}" + "".join(f"{n:>28}" for n in texts))
    rows = sorted(table, key=lambda s: -table[s]["calibration"][0])
    for shape in rows[:12] + [TreeConfig.chain(8)]:
        cells = "".join(f"{table[shape][n][0] / table[best[n]][n][0]:>9.3f} (tau {table[shape][n][1]:5.2f}, "
                        f"{table[shape][n][2]:.2f})" for n in texts)
        print(f"{shape.label():<34}{cells}")
    print("(each cell: predicted speedup as a share of the best fixed chain's on that text, tau, round cost in plain "
          "steps; rows by the calibration text's figure, then chain 8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
