"""One prepared run of the CUDA path, for a machine with a GPU (measurements, not tests).

Sections (cuda-tests first: tests/test_cuda.py under pytest), in order of importance; each prints its figures
and adds them to the JSON report as soon as it ends, and a section that fails is recorded and the next one runs:

1. shipped-fp32: the shipped pair on CUDA in fp32, whole prompt suite, baseline and EAGLE interleaved
   (`run_bench`): every greedy output must equal the baseline's; tau and speedup for the CPU preset chain and
   the GPU tree presets; seeded sampling equal to the seeded baseline.
2. economics-8b: a Llama-3.1-8B-shaped target (random bf16 weights, built on the GPU) and an
   EAGLE3-LLaMA3.1-shaped head: target forward time against tokens verified per round, draft step time
   against frontier width, one engine run's per-round draft/verify/host split, and the speedup the cost
   model predicts (tau x T_target(1) / T_round) for given tau values.
3. shipped-bf16: the shipped pair in bf16: how often greedy EAGLE still equals the bf16 baseline, speed.
4. loader-1b: a Llama-3.2-1B-shaped target saved with save_pretrained and a random EAGLE-3 head written in
   the official yuhuili layout, loaded through `load_pair(device="cuda")` in fp32: greedy equality.

    python scripts/gpu_check.py --out report.json [--seconds 420]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from eagle_demo.bench.run import load_suite, run_bench  # noqa: E402
from eagle_demo.common.config import TREE_PRESETS, RunConfig, SamplingConfig, TreeConfig  # noqa: E402
from eagle_demo.decoding.metrics import summarize  # noqa: E402
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_EAGLE3, SHIPPED_TARGET, load_session  # noqa: E402

REPORT: dict = {}
DEVICE = "cuda"
SMOKE = False  # --smoke: tiny shapes on the CPU, to check this script itself before spending GPU time


def log(*args) -> None:
    print(*args, flush=True)


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds of fn() with a synchronize around each call."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def env() -> dict:
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "device": DEVICE}
    if DEVICE == "cuda":
        info |= {"cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0),
                 "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    return info


def bench_summary(report) -> dict:
    o = report.overall
    equal = [r.equal_to_baseline for r in report.results if r.equal_to_baseline is not None]
    rounds = sum(r.rounds for r in report.results) or 1
    return {"prompts": o.prompts, "runs": o.runs, "tau": round(o.tau, 3),
            "eagle_tok_s": round(o.eagle_tokens_per_second, 1),
            "baseline_tok_s": round(o.baseline_tokens_per_second, 1),
            "speedup": round(o.speedup, 3), "equal": f"{sum(equal)}/{len(equal)}",
            "ms_per_round_draft": round(1e3 * sum(r.draft_seconds for r in report.results) / rounds, 3),
            "ms_per_round_verify": round(1e3 * sum(r.verify_seconds for r in report.results) / rounds, 3),
            "ms_per_round_host": round(1e3 * sum(r.host_seconds for r in report.results) / rounds, 3)}


def shipped(dtype: str, limit: int | None, shapes: dict[str, TreeConfig]) -> dict:
    items = load_suite()
    if limit:
        items = items[:limit]
    out = {}
    for name, draft in (("eagle1", SHIPPED_EAGLE1), ("eagle3", SHIPPED_EAGLE3)):
        session = load_session(SHIPPED_TARGET, draft, device=DEVICE, dtype=dtype)
        for label, tree in shapes.items():
            run = RunConfig(max_new_tokens=128, tree=tree)
            s = bench_summary(run_bench(session, items, run))
            out[f"{name} {label}"] = s
            log(f"  {dtype} {name} {label:>10}: {s}")
        if dtype == "float32":  # seeded sampling: EAGLE equals the seeded baseline token for token
            same = 0
            for i, item in enumerate(items[:6]):  # (GPU: a CPU-made uniform once crashed searchsorted here)
                run = RunConfig(max_new_tokens=64, tree=TREE_PRESETS["gpu-eagle2"],
                                sampling=SamplingConfig(temperature=0.8, top_p=0.95, seed=100 + i))
                ids = session.encode(item.prompt)
                a = summarize(session.stream(ids, run, "eagle")).token_ids
                b = summarize(session.stream(ids, run, "baseline")).token_ids
                same += a == b
            out[f"{name} seeded sampling equal"] = f"{same}/{min(6, len(items))}"
            log(f"  {name} seeded sampling equal to the seeded baseline: {same}/{min(6, len(items))}")
        del session
    return out


def llama31_8b_config():
    from transformers import LlamaConfig

    if SMOKE:
        return LlamaConfig(vocab_size=128256, hidden_size=256, intermediate_size=512, num_hidden_layers=32,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                           rope_theta=500000.0, eos_token_id=128009)
    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                       rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, eos_token_id=128009)


def economics_8b() -> dict:
    from transformers import AutoModelForCausalLM, LlamaConfig

    from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
    from eagle_demo.drafts import Eagle3Head
    from eagle_demo.target.runner import TargetRunner

    out: dict = {}
    torch.manual_seed(0)
    cfg = llama31_8b_config()
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.bfloat16).eval()
    out["target_params_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 2)
    runner = TargetRunner(model, (2, 16, 29))
    prefix = torch.randint(0, 128000, (512,))
    n_list = [1, 8, 60] if SMOKE else [1, 2, 4, 8, 16, 32, 48, 60, 64, 96, 128]
    costs = {}
    for n in n_list:
        runner.reset()
        runner.forward(prefix)
        runner.commit(list(range(512)))
        ids = torch.randint(0, 128000, (n,))
        depths = torch.arange(n)
        mask = torch.ones(n, n, dtype=torch.bool).tril()

        def step(runner=runner, ids=ids, depths=depths, mask=mask):  # bound now: `runner` is deleted below
            runner.forward(ids, depths, mask)
            runner.commit([])  # drop the block: the next call sees the same 512-token prefix
        costs[n] = timed(step, repeats=2 if SMOKE else 15)
    out["target_forward_ms_by_tokens"] = {n: round(1e3 * t, 3) for n, t in costs.items()}
    log(f"  8B target forward (tree mask, prefix 512) ms by tokens: {out['target_forward_ms_by_tokens']}")

    h = cfg.hidden_size
    dcfg = LlamaConfig(vocab_size=128256, hidden_size=h, intermediate_size=cfg.intermediate_size, num_hidden_layers=1,
                       num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                       max_position_embeddings=8192, rms_norm_eps=1e-5)
    dcfg._attn_implementation = "sdpa"
    with torch.device(DEVICE):
        head = Eagle3Head(dcfg, h, 32000, model.get_input_embeddings(), (2, 16, 29)).to(torch.bfloat16).eval()
    used = torch.sort(torch.randperm(128256)[:32000]).values.to(DEVICE)
    head.d2t.copy_(used - torch.arange(32000, device=DEVICE))
    eagle = SpeculativeEngine(model, head)
    base = BaselineEngine(model)
    prompt = torch.randint(0, 128000, (256,)).tolist()
    for label, tree in (("chain k=7", TreeConfig.chain(7)), ("gpu-eagle3 60/8/10", TREE_PRESETS["gpu-eagle3"]),
                        ("gpu-eagle2 60/6/10", TREE_PRESETS["gpu-eagle2"])):
        run = RunConfig(max_new_tokens=16 if SMOKE else 96, ignore_eos=True, tree=tree)
        summarize(eagle.generate(prompt, RunConfig(max_new_tokens=8, ignore_eos=True, tree=tree)))  # warm-up
        tries = []
        for _ in range(3):  # the first H200 host scattered round times 3x between runs: keep every try
            s = summarize(eagle.generate(prompt, run))
            r = max(s.rounds, 1)
            tries.append({"draft_ms": 1e3 * s.draft_seconds / r, "verify_ms": 1e3 * s.verify_seconds / r,
                          "host_ms": 1e3 * s.host_seconds / r, "round_ms": 1e3 * s.decode_seconds / r})
        split = min(tries, key=lambda t: t["round_ms"])
        out[f"round {label}"] = {k: round(v, 3) for k, v in split.items()} | {
            "tau_random_head": round(s.tau, 3), "round_ms_tries": [round(t["round_ms"], 2) for t in tries]}
        log(f"  8B round {label}: {out[f'round {label}']}")
    summarize(base.generate(prompt, RunConfig(max_new_tokens=8, ignore_eos=True)))
    b = min((summarize(base.generate(prompt, RunConfig(max_new_tokens=16 if SMOKE else 96, ignore_eos=True)))
             for _ in range(3)), key=lambda x: x.decode_seconds / max(x.rounds, 1))
    step_ms = 1e3 * b.decode_seconds / max(b.rounds, 1)
    out["baseline_step_ms"] = round(step_ms, 3)
    out["baseline_tok_s"] = round(b.tokens_per_second, 1)
    predicted = {}
    for label in ("chain k=7", "gpu-eagle3 60/8/10"):
        round_ms = out[f"round {label}"]["round_ms"]
        predicted[label] = {f"tau {tau}": round(tau * step_ms / round_ms, 2) for tau in (3.0, 4.0, 5.0, 6.0)}
    out["predicted_speedup"] = predicted
    log(f"  8B baseline step {step_ms:.2f} ms ({b.tokens_per_second:.1f} tok/s); predicted speedup {predicted}")
    del model, head, eagle, base, runner
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return out


def loader_1b() -> dict:
    from transformers import AutoModelForCausalLM, LlamaConfig

    from eagle_demo.checkpoints import load_pair
    from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
    from layouts import eagle3_weights, write_official_eagle3

    hidden, inter, layers = (128, 256, 4) if SMOKE else (2048, 8192, 16)
    cfg = LlamaConfig(vocab_size=128256, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=32 if not SMOKE else 2, num_key_value_heads=8 if not SMOKE else 1,
                      max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=True, head_dim=64, bos_token_id=128000, eos_token_id=128009)
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        with torch.no_grad():  # sharper distributions than the default init, so greedy paths are not ties
            for p in model.parameters():
                if p.dim() == 2:
                    p.mul_(2.0)
    root = Path(tempfile.mkdtemp())
    model.to(torch.bfloat16).save_pretrained(root / "target")
    del model
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    sd = eagle3_weights(hidden=hidden, target_hidden=hidden, vocab=128256, draft_vocab=32000, heads=heads, kv=kv,
                        head_dim=64, inter=inter)
    write_official_eagle3(root / "draft", sd, hidden_size=hidden, intermediate_size=inter, num_attention_heads=heads,
                          num_key_value_heads=kv, vocab_size=128256)
    out = {}
    t = time.perf_counter()
    pair = load_pair(str(root / "target"), str(root / "draft"), device=DEVICE, dtype="float32")
    out["load_seconds"] = round(time.perf_counter() - t, 1)
    out["report"] = pair.report.summary() if hasattr(pair.report, "summary") else str(pair.report)
    eagle, base = SpeculativeEngine(pair.target, pair.head), BaselineEngine(pair.target)
    equal = 0
    trials = 1 if SMOKE else 4
    for i in range(trials):
        g = torch.Generator().manual_seed(i)
        prompt = torch.randint(0, 128000, (64,), generator=g).tolist()
        for tree in (TreeConfig.chain(5), TREE_PRESETS["gpu-eagle3"]):
            run = RunConfig(max_new_tokens=64, ignore_eos=True, tree=tree)
            a = summarize(eagle.generate(prompt, run)).token_ids
            b = summarize(base.generate(prompt, run)).token_ids
            equal += a == b
    out["greedy_equal"] = f"{equal}/{2 * trials}"
    log(f"  1B loader (cuda fp32): {out}")
    return out


def overhead() -> dict:
    """Where a decode step's time goes on this host: one tiny kernel's launch, torch's CPU threads, and a
    profile of one 1-token forward of the shipped target (CPU-side time against GPU kernel time)."""
    from torch.profiler import ProfilerActivity, profile

    out = {"torch_threads": torch.get_num_threads()}
    x = torch.ones(16, device=DEVICE)
    out["tiny_op_us"] = round(1e6 * timed(lambda: [x.add_(1) for _ in range(100)], repeats=5) / 100, 2)
    session = load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, device=DEVICE, dtype="float32")
    runner = session.baseline.runner
    runner.reset()
    runner.forward(torch.arange(1, 65))
    runner.commit(list(range(64)))
    one = torch.tensor([5])

    def step():
        runner.forward(one)
        runner.commit([])
    out["shipped_step_ms"] = round(1e3 * timed(step, repeats=30), 3)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])) as prof:
        for _ in range(5):
            step()
        sync()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)
    out["profile_top"] = table
    log(f"  {out['torch_threads']} threads, tiny op {out['tiny_op_us']} us, shipped step {out['shipped_step_ms']} ms")
    log(table)
    return out


def cuda_tests() -> dict:
    """tests/test_cuda.py (greedy and seeded sampling on CUDA) under pytest, in a child process."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cuda.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:]
    log(f"  pytest tests/test_cuda.py: exit {proc.returncode}, {tail}")
    return {"exit": proc.returncode, "summary": tail}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu_check.json")
    p.add_argument("--seconds", type=float, default=420.0, help="skip sections that start after this")
    p.add_argument("--only", nargs="*", help="run only these sections")
    p.add_argument("--limit", type=int, default=0, help="shipped-fp32: at most this many suite prompts")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (checks this script, measures nothing)")
    args = p.parse_args()
    global DEVICE, SMOKE
    if args.smoke:
        DEVICE, SMOKE = "cpu", True
    elif not torch.cuda.is_available():
        print("no CUDA GPU here; this script checks the CUDA path (--smoke runs it on the CPU)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    REPORT["env"] = env()
    log(REPORT["env"])
    gpu_shapes = {"chain k=7": TreeConfig.chain(7), "gpu-eagle2": TREE_PRESETS["gpu-eagle2"],
                  "gpu-eagle3": TREE_PRESETS["gpu-eagle3"]}
    sections = [
        ("cuda-tests", cuda_tests),
        ("shipped-fp32", lambda: shipped("float32", 2 if SMOKE else args.limit or None, gpu_shapes)),
        ("economics-8b", economics_8b),
        ("shipped-bf16", lambda: shipped("bfloat16", 2 if SMOKE else 8, {"chain k=7": TreeConfig.chain(7),
                                                         "gpu-eagle2": TREE_PRESETS["gpu-eagle2"]})),
        ("loader-1b", loader_1b),
        ("overhead", overhead),
    ]
    for name, fn in sections:
        if args.only and name not in args.only:
            continue
        elapsed = time.perf_counter() - start
        if elapsed > args.seconds:
            REPORT[name] = {"skipped": f"time budget spent ({elapsed:.0f} s)"}
            log(f"[{name}] skipped")
            continue
        log(f"[{name}] at {elapsed:.0f} s")
        t = time.perf_counter()
        try:
            REPORT[name] = fn()
        except Exception as exc:  # record and go on: one run must bring back as much as it can
            REPORT[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}
            log(traceback.format_exc())
        REPORT[name + " seconds"] = round(time.perf_counter() - t, 1)
        Path(args.out).write_text(json.dumps(REPORT, indent=2))
    log(f"done in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
