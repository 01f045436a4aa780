"""Race our n-gram draft against transformers' prompt lookup (`generate(prompt_lookup_num_tokens=...)`) on one target.

    OMP_NUM_THREADS=1 python scripts/ngram_vs_prompt_lookup.py [--target assets/tiny-target] [--max-new-tokens 128]
        [--tokens 10] [--ngram-max 2] [--limit N] [--repeats 1] [--threads 1]

A measurement, not a test. Every side runs the same target object (the same weights in this process), greedy, on
the same prompts (the shipped suite, plain text), with the same n-gram settings: transformers' prompt lookup fixes
the shortest match at 1 and calls the longest `max_matching_ngram_size` and the proposal length
`prompt_lookup_num_tokens`; ours are `NgramConfig(min_n=1, max_n, tokens)` (`decoding.ngram`). Ours runs twice:
as shipped (`ours_ngram`: `--branches` continuations verified as one trie, repeat, by count, weak matches
shortened; docs/ngram-and-divergence.md) and with transformers' exact proposals (`ours_lookup`:
`NgramConfig.transformers`), which isolates the loop from the drafter. Each prompt runs transformers' prompt lookup,
ours twice, transformers' plain greedy `generate` and our plain decoding, the order rotated from prompt to prompt,
after one dropped warm-up of each. Every side is timed around its whole call (prefill included), by the wall clock
and by the generating thread's CPU time
(`time.thread_time`, which other processes on a shared machine do not enter). Identity: every token id of our n-gram
run against transformers' prompt lookup and against its plain greedy decoding. The ratios (ours / transformers) come
from this one run; the output ends with a JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default=str(ROOT / "assets" / "tiny-target"))
    p.add_argument("--suite", default=str(ROOT / "assets" / "prompts" / "suite.jsonl"))
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--tokens", type=int, default=10, help="proposal length (prompt_lookup_num_tokens)")
    p.add_argument("--ngram-max", type=int, default=2, help="longest suffix matched (max_matching_ngram_size)")
    p.add_argument("--branches", type=int, default=2, help="ours_ngram: continuations verified together")
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def timed(fn):
    w0, c0 = time.perf_counter(), time.thread_time()
    ids = fn()
    return ids, time.perf_counter() - w0, time.thread_time() - c0


def sides(session, ids: list[int], args, rounds: dict | None = None) -> dict:
    """name -> a callable giving the new token ids; our sides add their rounds to `rounds` (by name)."""
    from dataclasses import replace

    import torch

    from eagle_demo.common.config import NgramConfig, RunConfig

    model = session.pair.target
    eos = sorted(session.baseline.eos)
    shipped = RunConfig(max_new_tokens=args.max_new_tokens,
                        ngram=NgramConfig(1, args.ngram_max, args.tokens, branches=args.branches))
    lookup = replace(shipped, ngram=NgramConfig.transformers(args.ngram_max, args.tokens))
    x = torch.tensor([ids])
    hf_kwargs = dict(do_sample=False, max_new_tokens=args.max_new_tokens, attention_mask=torch.ones_like(x),
                     pad_token_id=eos[0] if eos else 0, eos_token_id=eos or None)

    def hf(**extra):
        with torch.inference_mode():
            return model.generate(x, **hf_kwargs, **extra)[0, len(ids):].tolist()

    def ours(mode, run, name):
        finish = list(session.stream(ids, run, mode))[-1]
        if rounds is not None:
            rounds[name] = rounds.get(name, 0) + finish.rounds
        return list(finish.token_ids)

    return {"hf_lookup": lambda: hf(prompt_lookup_num_tokens=args.tokens, max_matching_ngram_size=args.ngram_max),
            "ours_ngram": lambda: ours("ngram", shipped, "ours_ngram"),
            "ours_lookup": lambda: ours("ngram", lookup, "ours_lookup"), "hf_plain": lambda: hf(),
            "ours_plain": lambda: ours("baseline", shipped, "ours_plain")}


def main(argv=None) -> int:
    args = parse(argv)
    import torch

    from eagle_demo.bench.run import load_suite
    from eagle_demo.session import load_session

    torch.set_num_threads(args.threads)
    session = load_session(args.target, draft=None, threads=-1)
    items = load_suite(args.suite)[:args.limit]
    encoded = [session.encode(i.prompt) for i in items]
    for fn in sides(session, encoded[0], args).values():  # warm-up, dropped
        fn()
    totals = {name: [0, 0.0, 0.0] for name in ("hf_lookup", "ours_ngram", "ours_lookup", "hf_plain", "ours_plain")}
    same_lookup = same_plain = runs = 0
    rounds: dict[str, int] = {}
    for repeat in range(args.repeats):
        for n, (item, ids) in enumerate(zip(items, encoded)):
            jobs = list(sides(session, ids, args, rounds).items())
            shift = (n + repeat) % len(jobs)
            out = {}
            for name, fn in jobs[shift:] + jobs[:shift]:
                out[name], wall, cpu = timed(fn)
                totals[name][0] += len(out[name])
                totals[name][1] += wall
                totals[name][2] += cpu
            same_lookup += out["ours_ngram"] == out["ours_lookup"] == out["hf_lookup"]
            same_plain += out["ours_ngram"] == out["hf_plain"] == out["ours_plain"]
            runs += 1
            print(f"{item.id}: {len(out['ours_ngram'])} tokens, identical to prompt lookup: "
                  f"{out['ours_ngram'] == out['hf_lookup']}", file=sys.stderr)
    rate = {name: (t[0] / t[1], t[0] / t[2]) for name, t in totals.items()}
    print(f"{'side':<12}{'tokens':>8}{'tokens/s':>10}{'tokens/CPU s':>14}")
    for name, (wall, cpu) in rate.items():
        print(f"{name:<12}{totals[name][0]:>8}{wall:>10.1f}{cpu:>14.1f}")
    ratio = {"ngram_vs_prompt_lookup": [rate["ours_ngram"][i] / rate["hf_lookup"][i] for i in (0, 1)],
             "same_proposals_vs_prompt_lookup": [rate["ours_lookup"][i] / rate["hf_lookup"][i] for i in (0, 1)],
             "plain_vs_generate": [rate["ours_plain"][i] / rate["hf_plain"][i] for i in (0, 1)],
             "prompt_lookup_vs_generate": [rate["hf_lookup"][i] / rate["hf_plain"][i] for i in (0, 1)],
             "ngram_vs_our_plain": [rate["ours_ngram"][i] / rate["ours_plain"][i] for i in (0, 1)]}
    for name, (wall, cpu) in ratio.items():
        print(f"{name}: {wall:.2f}x wall, {cpu:.2f}x CPU")
    tau = {name: totals[name][0] / n for name, n in rounds.items() if n}
    print("tokens per round (ours): " + ", ".join(f"{name} {t:.2f}" for name, t in tau.items()))
    print(f"identical to transformers' prompt lookup (ours both ways): {same_lookup}/{runs}; "
          f"to plain greedy (both): {same_plain}/{runs}")
    print(json.dumps({"prompts": len(items), "repeats": args.repeats, "max_new_tokens": args.max_new_tokens,
                      "tokens": args.tokens, "ngram_max": args.ngram_max, "threads": args.threads,
                      "tokens_per_second": {k: v[0] for k, v in rate.items()},
                      "tokens_per_cpu_second": {k: v[1] for k, v in rate.items()},
                      "ratios_wall_cpu": ratio, "tokens_per_round": tau,
                      "identical_to_prompt_lookup": [same_lookup, runs],
                      "identical_to_plain": [same_plain, runs]}))
    return 0 if same_lookup == same_plain == runs else 1


if __name__ == "__main__":
    sys.exit(main())
