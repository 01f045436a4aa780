"""Check the automatic tree: is its choice stable, and is its predicted round cost the measured one?

Check the automatic tree: calibrate it several times (is the choice stable?), then race shapes against plain
decoding in CPU time on the peer prompts (is the predicted round cost the measured one?). A measurement, not a test.

    OMP_NUM_THREADS=1 python scripts/autotree_check.py [--draft D ...] [--calibrations 3] [--shapes auto chain7 ...]

Times are this thread's CPU time (`time.thread_time`), so other processes on a shared machine do not enter them;
the wall time of each calibration and the load average are printed beside. The measured round cost of a shape is
its tau over its measured speedup; the predicted one is autotree's model at that same tau (the last calibration's
costs; a stopping chain at the run's own mean draft length), so the two columns compare the cost model alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from _shapes import parse_tree  # noqa: E402
from eagle_demo.autotree import choose as autotree  # noqa: E402
from eagle_demo.common.config import RunConfig, TreeConfig  # noqa: E402
from eagle_demo.decoding.events import Finish, Round  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402
from peer_official import PROMPTS, WEAK_NOISE, weak_head  # noqa: E402


def calibrate(session, times: int):
    """(choice, stats, costs) of the last of `times` fresh calibrations; prints each."""
    seen = {}
    real = autotree.choose

    def spy(stats, costs, *a, **k):
        seen.update(stats=stats, costs=costs)
        return real(stats, costs, *a, **k)

    autotree.choose = spy
    try:
        for _ in range(times):
            wall, cpu = time.perf_counter(), time.thread_time()
            choice = autotree.auto_tree(session, refresh=True, cache_dir=Path(tempfile.mkdtemp()))
            print(f"  {choice.line()}; {time.thread_time() - cpu:.2f} s CPU, {time.perf_counter() - wall:.2f} s wall, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        autotree.choose = real
    return choice, seen["stats"], seen["costs"]


def cpu_run(session, prompts, tree: TreeConfig | None, max_new: int) -> tuple[int, int, float, int, int]:
    """(new tokens, rounds, CPU seconds, drafting rounds, tokens they drafted) over the prompts; tree None: plain
    decoding."""
    new = rounds = drafting = drafted = 0
    cpu = 0.0
    for ids in prompts:
        run = RunConfig(max_new_tokens=max_new, ignore_eos=True, tree=tree or TreeConfig.chain(1))
        start = time.thread_time()
        events = list(session.stream(ids, run, mode="eagle" if tree else "baseline"))
        cpu += time.thread_time() - start
        finish = [e for e in events if isinstance(e, Finish)][0]
        new, rounds = new + finish.new_tokens, rounds + finish.rounds
        sizes = [len(e.nodes) - 1 for e in events if isinstance(e, Round) and len(e.nodes) > 1]
        drafting, drafted = drafting + len(sizes), drafted + sum(sizes)
    return new, rounds, cpu, drafting, drafted


def check(name: str, draft: str, args) -> None:
    session = load_session(str(ROOT / "assets" / "tiny-target"), draft, threads=1, device="cpu", dtype="float32")
    print(f"\n[{name}] {draft}")
    choice, stats, costs = calibrate(session, args.calibrations)
    scale = autotree.overhead_scale(stats, costs)
    prompts = [session.encode(p) for p in PROMPTS]
    shapes = [("plain", None)] + [(label, choice.tree) if label == "auto" else parse_tree(label, session)
                                  for label in args.shapes]
    totals = {label: [0, 0, 0.0, 0, 0] for label, _ in shapes}
    cpu_run(session, prompts[:1], choice.tree, 16)  # warm-up
    for _ in range(args.repeats):  # interleaved
        for label, tree in shapes:
            for i, x in enumerate(cpu_run(session, prompts, tree, args.max_new_tokens)):
                totals[label][i] += x
    base = totals["plain"][0] / totals["plain"][2]
    print(f"  {'shape':<44}{'speedup':>8}{'tau':>7}{'cost':>7}{'model':>7}   (CPU time, {len(prompts)} prompts x "
          f"{args.repeats}, {args.max_new_tokens} tokens)")
    for label, tree in shapes[1:]:
        new, rounds, cpu, drafting, drafted = totals[label]
        speedup, tau = new / cpu / base, new / rounds
        mean = drafted / drafting if tree.is_chain and tree.stop_below > 0 and drafting else None
        model = autotree.round_cost(costs, tree, tau, scale, mean)  # a stopping chain: at this run's mean draft
        print(f"  {label + ' (' + tree.label() + ')':<44}{speedup:>7.2f}x{tau:>7.2f}{tau / speedup:>7.2f}{model:>7.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draft", nargs="*", default=None, help="heads to check (default: shipped and weak)")
    ap.add_argument("--calibrations", type=int, default=3)
    ap.add_argument("--shapes", nargs="+", default=["auto", "chain7", "tree16/3/4"])
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    drafts = [(Path(d).name, d) for d in args.draft] if args.draft else [
        ("shipped", str(ROOT / "assets" / "tiny-eagle1")), (f"weak (noise {WEAK_NOISE:g})", str(weak_head()))]
    for name, draft in drafts:
        check(name, draft, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
