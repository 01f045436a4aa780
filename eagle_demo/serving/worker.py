"""Runs inside the vLLM virtualenv (`eagle_demo.serving.runtime`), started by file path: it imports nothing
from eagle_demo. One job (a JSON object on stdin) loads one engine, vLLM's offline `LLM` API, with or without a
`speculative_config`, runs greedy generations on given token ids and prints one JSON line per run:

    {"target": DIR, "speculative_config": {...} | null, "threads": 1, "max_model_len": 512,
     "runs": [{"label": "b1", "prompts": [[ids], ...], "max_new_tokens": 64, "repeats": 1}]}

Each result line carries the output ids, wall seconds (the best of `repeats`) and that run's CPU seconds (this
process and vLLM's engine process, so other load on a shared machine does not enter it), and vLLM's own
speculative-decoding counters read from the engine's metrics (`disable_log_stats=False`) as differences over that
run: drafts, drafted tokens, accepted tokens and accepted tokens by position. The first line is {"vllm": version,
"torch": version, "startup_s": s}; a failure is one line {"error": "..."} and exit code 1. vLLM starts worker
processes, hence the `__main__` guard.
"""

from __future__ import annotations

import json
import sys
import time

COUNTERS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens")
BY_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


def counters(llm) -> dict:
    """vLLM's cumulative speculative-decoding counters: {name: int}, by position as a list."""
    out: dict = {name: 0 for name in COUNTERS}
    out[BY_POSITION] = []
    for metric in llm.get_metrics():
        if metric.name in COUNTERS:
            out[metric.name] += int(metric.value)
        elif metric.name == BY_POSITION:
            values = [int(v) for v in metric.values]
            old = out[BY_POSITION]
            out[BY_POSITION] = [a + b for a, b in zip(values, old + [0] * (len(values) - len(old)))]
    return out


def delta(after: dict, before: dict) -> dict:
    pos = [a - (before[BY_POSITION][i] if i < len(before[BY_POSITION]) else 0)
           for i, a in enumerate(after[BY_POSITION])]
    short = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted_tokens"}
    return {short[k]: after[k] - before[k] for k in COUNTERS} | {"accepted_by_position": pos}


def cpu_seconds() -> float:
    """User + system CPU time of this process and its children (vLLM's engine core runs in one)."""
    import psutil

    total, me = 0.0, psutil.Process()
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            continue
    return total


def run_one(llm, run: dict) -> dict:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=run["max_new_tokens"], ignore_eos=True)
    prompts = [TokensPrompt(prompt_token_ids=ids) for ids in run["prompts"]]
    best, stats, outputs = None, None, None
    for _ in range(max(1, run.get("repeats", 1))):
        before, cpu = counters(llm), cpu_seconds()
        t = time.perf_counter()
        outs = llm.generate(prompts, params, use_tqdm=False)
        seconds, cpu = time.perf_counter() - t, cpu_seconds() - cpu
        if best is None or seconds < best:
            best, stats = seconds, delta(counters(llm), before) | {"cpu_seconds": cpu}
        outputs = [list(o.outputs[0].token_ids) for o in outs]
    new = sum(len(o) for o in outputs)
    return {"label": run.get("label", ""), "tokens": outputs, "seconds": best, "new_tokens": new,
            "tokens_per_second": new / best, **stats}


def main() -> int:
    job = json.loads(sys.stdin.read())
    try:
        import torch
        import vllm
        from vllm import LLM

        torch.set_num_threads(int(job.get("threads", 1)))
        t = time.perf_counter()
        llm = LLM(model=job["target"], tokenizer=job.get("tokenizer") or job["target"],
                  dtype=job.get("dtype", "float32"), seed=0, max_model_len=int(job.get("max_model_len", 512)),
                  max_num_seqs=int(job.get("max_num_seqs", 16)), speculative_config=job.get("speculative_config"),
                  disable_log_stats=False, enforce_eager=bool(job.get("enforce_eager", False)))
        print(json.dumps({"vllm": vllm.__version__, "torch": torch.__version__,
                          "startup_s": time.perf_counter() - t}), flush=True)
        for run in job["runs"]:
            print(json.dumps(run_one(llm, run)), flush=True)
    except Exception as exc:  # the driver shows it in one line
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
