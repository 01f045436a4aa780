"""What one draft depth costs on a CPU, part by part, and what a hot vocabulary saves.

What one draft depth costs on a CPU, part by part, and what a draft over a hot vocabulary (the first ids only)
saves: a measurement, not a test.

    OMP_NUM_THREADS=1 python scripts/experiments/draft_depth.py [--draft assets/tiny-eagle1] [--hot 4096 2048 1024]
        [--prompts 6] [--chain 8] [--stop 0.0]

1. One chain depth of the loaded pair (`Drafter._depth`: the head's forward on one token and its top-1 over the
   vocabulary), repeated after an extend over the target's features of 128 tokens, best of 5 loops of 500: the
   depth, the head's forward alone, the lm_head with its top-1 alone, the forward after a sweep through 8 MB (the
   caches emptied of the head's weights), and the depth with the top-1 taken over the first N token ids only (for
   each --hot N).
2. End to end, for the full vocabulary and each --hot N: tau and tokens/s of a chain (--chain, stopping under
   --stop when given, never paused) over the first --prompts suite prompts, 128 tokens each, twice, with greedy
   equality to plain decoding checked (the target verifies every draft, so a restricted draft stays lossless).

A restricted top-1 is FR-Spec's idea (SGLang's `--speculative-token-map`): the lm_head reads N rows instead of the
whole vocabulary (heads that share the target's lm_head: EAGLE-1/2). The shipped tokenizer numbers its BPE merges
in the order it learned them, so its first ids stand in for a frequency ranking. The engines draft this way for a
chain with `TreeConfig.hot_vocab` (the automatic tree scores it on a CPU); this script runs that path.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from eagle_demo.bench.run import load_suite  # noqa: E402
from eagle_demo.common.config import RunConfig, TreeConfig  # noqa: E402
from eagle_demo.decoding.events import Finish  # noqa: E402
from eagle_demo.drafts.base import shares_target_vocab  # noqa: E402
from eagle_demo.drafts.lean import one_call  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402


def best_us(fn, loops: int = 500, rounds: int = 5) -> float:
    for _ in range(loops // 2):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - start) / loops)
    return min(times) * 1e6


@torch.inference_mode()
def depth_parts(session, hot_sizes: list[int]) -> dict:
    drafter = session.eagle.drafter
    head = drafter.head
    drafter.reset()
    drafter.reserve(512, 16)
    runner = session.eagle.runner
    text = torch.randint(0, 1000, (129,))  # [129] token ids
    runner.reset(256)
    out = runner.forward(text[:-1])  # features [128, F] of the target, as a prefill gives them
    runner.reset()
    drafter.extend(out.features, text[1:])  # pair i = (feature_i, token_i+1); a hot table also takes these ids
    g, token = drafter.last_g[None], torch.tensor([5])  # [1, H], [1]
    at = drafter.length
    sweep = torch.zeros(2 * 1024 * 1024)  # 8 MB

    def depth(hot: int = 0):
        with one_call():
            drafter._depth(g, token, drafter._positions(at, 1), 1, at, hot=hot)
        drafter.cache.crop(-1)

    def forward():
        with one_call():
            head(g, token, drafter._positions(at, 1), drafter.cache, None)
        drafter.cache.crop(-1)

    def after_sweep():
        sweep.add_(1.0)
        forward()

    out = {"depth": best_us(depth), "head forward alone": best_us(forward),
           "lm_head and top-1 alone": best_us(lambda: head.topk(g, 1)),
           "8 MB sweep": best_us(lambda: sweep.add_(1.0)), "8 MB sweep, then the head forward": best_us(after_sweep)}
    for hot in hot_sizes:
        drafter._pick(hot)  # the run's table, up to date, as a round's first depth brings it
        out[f"depth, top-1 over the first {hot} ids"] = best_us(lambda hot=hot: depth(hot))
        out[f"lm_head and top-1 over the first {hot} ids alone"] = best_us(lambda hot=hot: drafter._pick(hot)(g, 1))
    drafter.reset()
    return {k: round(v, 1) for k, v in out.items()}


def finish(session, ids: list[int], run: RunConfig, mode: str) -> Finish:
    return next(e for e in session.stream(ids, run, mode=mode) if isinstance(e, Finish))


def end_to_end(session, hot_sizes: list[int], prompts: list[str], chain: int, stop: float) -> list[dict]:
    ids = [session.encode(p) for p in prompts]
    plain = [finish(session, x, RunConfig(max_new_tokens=128, ignore_eos=True), "baseline").token_ids for x in ids]
    rows = []
    for repeat in range(2):
        for hot in [0, *hot_sizes]:
            run = RunConfig(max_new_tokens=128, ignore_eos=True, tree=TreeConfig.chain(chain, stop, hot))
            taus, tokens, seconds, equal = [], 0, 0.0, True
            for x, want in zip(ids, plain):
                f = finish(session, x, run, "eagle")
                taus.append(f.new_tokens / f.rounds)
                tokens, seconds = tokens + f.new_tokens, seconds + f.decode_seconds
                equal = equal and f.token_ids == want
            rows.append({"repeat": repeat, "ids": hot or "all", "tau": round(sum(taus) / len(taus), 2),
                         "tokens_per_second": round(tokens / seconds, 1), "equal_to_plain": equal})
            print(rows[-1], flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draft", default="default")
    ap.add_argument("--hot", type=int, nargs="*", default=[4096, 2048, 1024])
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--chain", type=int, default=8)
    ap.add_argument("--stop", type=float, default=0.0, help="the chain stops under this path probability (0: fixed)")
    args = ap.parse_args(argv)
    session = load_session(None, args.draft, threads=1)
    if args.hot and not shares_target_vocab(session.eagle.head):
        print(f"the {session.eagle.head.family} head has its own lm_head (its own vocabulary): --hot is left out")
        args.hot = []
    print(f"torch threads {torch.get_num_threads()}; one draft depth, best of 5 loops of 500, us:")
    for name, us in depth_parts(session, args.hot).items():
        print(f"  {name:45s} {us:8.1f}")
    print(f"\n{TreeConfig.chain(args.chain, args.stop).label()}, first {args.prompts} suite prompts, 128 tokens, "
          "never paused:")
    end_to_end(session, args.hot, [item.prompt for item in load_suite()[:args.prompts]], args.chain, args.stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
