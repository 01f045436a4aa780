"""What one target forward costs by the number of tokens it verifies, against a plain decoding step.

    OMP_NUM_THREADS=1 python scripts/verify_cost.py [--target assets/tiny-target] [--context 200]

The target as the engines load it (`checkpoints.load_pair`: column-major weights, `target.attention`'s grouped SDPA),
its own forward (`TargetRunner.forward`, the path every round's verify takes) after a prefilled context, for n
new tokens, timed in the calling thread's CPU time (other processes on a shared machine do not enter it), sizes
and attention calls interleaved (the loader's and transformers' stock `sdpa`), the 20th percentile of the
repeats; then the same for single fp32 linears, one of the target's own weights per shape in the loader's layout,
to show where the step from one token to two comes from.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from eagle_demo.checkpoints import load_pair  # noqa: E402
from eagle_demo.target.runner import TargetRunner  # noqa: E402


def low(times: list[float]) -> float:
    return sorted(times)[len(times) // 5]


def forward_costs(runner: TargetRunner, vocab: int, context: int, sizes: tuple[int, ...], repeats: int,
                  attentions: tuple[str, ...]) -> dict:
    """{(attention, n): seconds}; every attention call runs on the same weights and context."""
    runner.reset(context + max(sizes) + 8)
    runner.forward(torch.randint(0, vocab, (context,)))  # [context]
    runner.commit(list(range(context)))
    times: dict[tuple[str, int], list[float]] = {(a, n): [] for a in attentions for n in sizes}
    for _ in range(repeats):
        for a in attentions:
            runner.model.set_attn_implementation(a)
            for n in sizes:
                ids = torch.randint(0, vocab, (n,))  # [n]
                start = time.thread_time()
                runner.forward(ids)
                times[a, n].append(time.thread_time() - start)
                runner.commit([])  # drop the block: the next size starts from the same context
    runner.model.set_attn_implementation(attentions[0])
    return {key: low(t) for key, t in times.items()}


def linear_costs(model, sizes: tuple[int, ...], repeats: int = 200) -> list[tuple[str, dict]]:
    """One of the model's own weights per shape, in the layout the loader gave it (`target.cpu_layout`), timed alone:
    a weight that fits the core's cache stays there between repeats, where a forward reads it from further out."""
    weights = {}
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            weights.setdefault(tuple(m.weight.shape), m.weight.detach())
    rows = []
    for (out_f, in_f), weight in sorted(weights.items()):  # weight [N, K]
        cost = {}
        for n in sizes:
            x = torch.randn(n, in_f)  # [n, K]
            for _ in range(20):
                F.linear(x, weight)
            runs = []
            for _ in range(5):
                start = time.thread_time()
                for _ in range(repeats):
                    F.linear(x, weight)
                runs.append((time.thread_time() - start) / repeats)
            cost[n] = min(runs)
        rows.append((f"{in_f} -> {out_f}", cost))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="assets/tiny-target")
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_pair(args.target, None, dtype="float32", device="cpu").target
    sizes = (1, 2, 3, 4, 5, 8, 12)
    loaded = model.config._attn_implementation
    attentions = (loaded, "sdpa") if loaded != "sdpa" else ("sdpa",)
    costs = forward_costs(TargetRunner(model), model.config.vocab_size, args.context, sizes, args.repeats,
                          attentions)
    print(f"target {args.target}, context {args.context}, {args.threads} thread(s), CPU time, 20th percentile")
    print("| tokens | " + " | ".join(f"{a}: ms | plain steps" for a in attentions) + " |")
    print("|---:|" + "---:|---:|" * len(attentions))
    for n in sizes:  # plain steps: against the loader's own one-token step (the stock call's is the same call)
        base = costs[attentions[0], 1]
        print(f"| {n} | " + " | ".join(f"{costs[a, n] * 1e3:.2f} | {costs[a, n] / base:.2f}" for a in attentions)
              + " |")
    print("\n| fp32 linear (K -> N) | " + " | ".join(f"{n} rows (us)" for n in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for name, cost in linear_costs(model, sizes):
        print(f"| {name} | " + " | ".join(f"{cost[n] * 1e6:.0f}" for n in sizes) + " |")


if __name__ == "__main__":
    main()
