"""The static cache and CUDA graphs measured on a GPU in one prepared run (issue 21's checks).

Issue 21's GPU checks in one prepared run (measurements, not tests). `--smoke` runs every section on the CPU
with tiny shapes to check the script itself before spending device time.

Sections, in this order (each prints its figures and lands in the JSON report as it ends; a failing section is
recorded and the next one runs; one that would start after --seconds is skipped):
1. tests: tests/test_static.py, tests/test_static_draft.py, tests/test_lean.py and tests/test_cuda.py (the CUDA
   graph replay tests, and the shipped pairs' greedy and seeded-sampling equality on the default path, which is
   static + graphs on CUDA now).
2. big: a Llama-3.1-8B-shaped bf16 target (random weights) and an EAGLE-3-shaped head: plain step eager vs
   graphs, against the weights-bandwidth time (weight bytes / --hbm-tbps); verify ms by size; the shape autotree
   picks for an acceptance profile with tau about 6 from the costs the product's calibration measures on this
   engine (`autotree.choose.measure_costs`, static + graphs), with its predicted speedup and round cost in plain steps
   and chain 7's at tau 6, and the round measured at that shape and at chain 7; peak memory with the static
   cache sized prompt + max new + tree; the verify by size again with `target.attention.PACKED` (grouped heads packed
   into query rows), with its largest logit difference from the stock call; a chain-7 draft of an EAGLE-1-shaped
   head over the target's 128k lm_head, over all ids and over a hot quarter.
3. shipped: the shipped pair in fp32 and bf16, eager vs static cache + CUDA graphs (auto calibrated on each
   path), baseline given the same treatment: plain step ms, round ms and round cost at the auto choice and at
   chain 7, tau, greedy equality (fp32), peak GPU memory of each path, and the draft step time per dtype.
4. verify_profile: the shipped target's static verify of 1, 8 and 64 tokens per dtype, replayed, and the CUDA
   kernels of one eager run of it (the slow fp32 verify of docs/gpu/h100_run2.json).
5. sdpa: the draft's attention call in fp32 and bf16, masked with GQA, masked with repeated keys, unmasked.

    python scripts/gpu_fast.py --out gpu_fast.json [--seconds 500] [--hbm-tbps 3.35]  (default: by the GPU's name)
    python scripts/gpu_fast.py --smoke
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eagle_demo.common.config import RunConfig, TreeConfig  # noqa: E402
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine  # noqa: E402
from eagle_demo.decoding.metrics import summarize  # noqa: E402

REPORT: dict = {}
DEVICE, SMOKE = "cuda", False


def log(*args) -> None:
    print(*args, flush=True)


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def peak_reset() -> None:
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_gb() -> float:
    return round(torch.cuda.max_memory_allocated() / 2**30, 3) if DEVICE == "cuda" else 0.0


def best_run(engine, prompt, run, tries: int = 3):
    """Fastest of a few runs (after a warm-up that also captures the graphs): summarize() stats."""
    summarize(engine.generate(prompt, RunConfig(max_new_tokens=min(run.max_new_tokens, 16), ignore_eos=True,
                                                 tree=run.tree)))
    return min((summarize(engine.generate(prompt, run)) for _ in range(tries)),
               key=lambda s: s.decode_seconds / max(s.rounds, 1))


def race(model, head, prompt, tree, static: bool, new: int) -> dict:
    base, eagle = BaselineEngine(model, static=static), SpeculativeEngine(model, head, static=static)
    run = RunConfig(max_new_tokens=new, ignore_eos=True, tree=tree)
    peak_reset()
    b = best_run(base, prompt, run)
    e = best_run(eagle, prompt, run)
    step = b.decode_seconds / max(b.rounds, 1)
    rnd = e.decode_seconds / max(e.rounds, 1)
    static_target, static_draft = eagle.runner.static, eagle.drafter.static
    return {"plain_step_ms": round(1e3 * step, 3), "round_ms": round(1e3 * rnd, 3), "round_cost": round(rnd / step, 3),
            "tau": round(e.tau, 3), "speedup": round(e.tau * step / rnd, 3), "peak_gb": peak_gb(),
            "equal": e.token_ids == b.token_ids,  # promised in float32 only
            "first_divergence": divergence(model, prompt, b.token_ids, e.token_ids),
            "draft_ms": round(1e3 * e.draft_seconds / max(e.rounds, 1), 3),
            "verify_ms": round(1e3 * e.verify_seconds / max(e.rounds, 1), 3),
            "graphs": sorted(static_target.graphs) if static_target is not None else [],
            "capture_error": static_target.capture_error if static_target is not None else None,
            "draft_graphs": sorted(static_draft.graphs) if static_draft is not None else [],
            "draft_capture_error": static_draft.capture_error if static_draft is not None else None}


@torch.inference_mode()
def divergence(model, prompt, plain, eagle) -> dict | None:
    """Where two greedy outputs first differ, and the target's own top-2 logit gap there (one fresh forward over
    the prompt and the common prefix): in bf16, where equality is not promised, a gap near the dtype's rounding
    says a near tie flipped (the verify's multi-row kernels round differently from a plain step's)."""
    i = next((j for j, (x, y) in enumerate(zip(plain, eagle)) if x != y), None)
    if i is None:
        return None
    device = model.get_output_embeddings().weight.device
    ids = torch.tensor([list(prompt) + list(plain[:i])], device=device)  # [1, P+i]
    top = model(input_ids=ids).logits[0, -1].float().topk(2)  # values [2], indices [2]
    return {"index": i, "plain": int(plain[i]), "eagle": int(eagle[i]),
            "top2": [int(t) for t in top.indices], "top2_gap": round(float(top.values[0] - top.values[1]), 5)}


def section_tests() -> dict:
    tests = ["tests/test_static.py", "tests/test_static_draft.py", "tests/test_lean.py", "tests/test_cuda.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT,
                          capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    log(f"  {tail}")
    return {"rc": proc.returncode, "summary": tail}


def section_shipped() -> dict:
    from eagle_demo.autotree.choose import auto_tree
    from eagle_demo.session import load_session

    out = {}
    for dtype in ("float32", "bfloat16"):
        for static in (False, True):  # auto calibrates on the path it then runs (graphs price a round differently)
            path = "static+graphs" if static else "eager"
            session = load_session(device=DEVICE, dtype=dtype, threads=0, static=static)
            prompt = session.encode("def binary_search(items, target):\n    \"\"\"Return the index of target.\"\"\"\n")
            t0 = time.perf_counter()  # each calibration stage's start (bf16 eager took 27 s on an H100, fp32 4.8 s)
            choice = auto_tree(session, refresh=True,
                               progress=lambda stage: log(f"    {time.perf_counter() - t0:.2f} s: {stage}"))
            out[f"{dtype} {path} auto"] = choice.line()
            out[f"{dtype} {path} calibration s"] = round(choice.calibration_seconds, 2)
            if choice.table is not None:  # the engine's own rounds over the parts' prediction (capped at 1.6)
                out[f"{dtype} {path} overhead scale"] = round(choice.table.scale, 3)
            log(f"  {dtype} {path}: {choice.line()} (calibration {choice.calibration_seconds:.2f} s)")
            for label, tree in (("auto", choice.tree), ("chain7", TreeConfig.chain(7))):
                key = f"{dtype} {label} {path}"
                out[key] = race(session.pair.target, session.pair.head, prompt, tree, static, 32 if SMOKE else 128)
                log(f"  {key}: {out[key]}")
        drafter, runner = session.eagle.drafter, session.eagle.runner
        runner.reset(len(prompt) + 16)
        drafter.reset()
        drafter.extend(runner.forward(torch.tensor(prompt)).features, torch.tensor(prompt[1:] + prompt[:1]))
        runner.reset()
        t = []
        for _ in range(20):
            sync()
            t0 = time.perf_counter()
            drafter.draft(prompt[-1], TreeConfig.chain(7))
            sync()
            t.append(time.perf_counter() - t0)
        out[f"{dtype} draft chain7 ms"] = round(1e3 * min(t), 3)
        log(f"  {dtype} draft chain 7: {out[f'{dtype} draft chain7 ms']} ms")
    return out


def section_verify_profile() -> dict:
    """The fp32 static verify of 8 tokens cost 3.4 plain steps on an H100 (bf16: 1.2; docs/gpu/h100_run2.json):
    per dtype, the shipped target's static verify of 1, 8 and 64 tokens replayed (ms; a 64-token tree took 3.8 ms
    in fp32 there), and on a GPU the CUDA kernels of one eager run of the same forward (their count, total ms, and
    the six that take longest)."""
    from eagle_demo.session import load_session

    out = {}
    for dtype in ("float32", "bfloat16"):
        session = load_session(device=DEVICE, dtype=dtype, threads=0, static=True)
        model, head = session.pair.target, session.pair.head
        prompt = session.encode("def binary_search(items, target):\n    \"\"\"Return the index of target.\"\"\"\n")
        ms, _ = verify_by_size(model, head, prompt, (1, 8, 64))  # a 64-token tree verified in 3.8 ms there
        out[f"{dtype} replayed ms"] = {n: round(1e3 * v, 3) for n, v in ms.items()}
        log(f"  {dtype} static verify replayed ms: {out[f'{dtype} replayed ms']}")
        if DEVICE != "cuda":
            continue
        runner = SpeculativeEngine(model, head, static=True).runner
        runner.reset(len(prompt) + 80)
        runner.forward(torch.tensor(prompt))
        runner.commit(list(range(len(prompt))))
        runner.static.graphs_on = False  # the same forward, eagerly, so the profiler sees each kernel
        for n in (1, 8, 64):
            ids, depths, mask = torch.arange(n) + 5, torch.arange(n), torch.ones(n, n, dtype=torch.bool).tril()
            runner.forward(ids, depths, mask)
            runner.commit([])
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                runner.forward(ids, depths, mask)
                sync()
            runner.commit([])
            device_us = lambda e: getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)  # noqa: E731
            events = sorted(prof.key_averages(), key=device_us, reverse=True)
            out[f"{dtype} n{n} kernels"] = {
                "count": sum(e.count for e in events), "total_ms": round(sum(map(device_us, events)) / 1e3, 3),
                "top": [[e.key[:90], e.count, round(device_us(e) / 1e3, 3)] for e in events[:6]]}
            log(f"  {dtype} n{n} kernels: {out[f'{dtype} n{n} kernels']}")
    return out


def section_sdpa() -> dict:
    """The draft's attention call in fp32 and bf16 (the bf16 drafting slowdown): SDPA with an additive mask and
    `enable_gqa` (what `drafts.lean.attention` runs) against keys/values repeated over the query heads (a mask with
    GQA may leave only the math kernel) and against no mask, at the shipped head's and an 8B head's shapes, for a
    chain step (1 query) and a tree depth (10 queries) over 512 keys: us per call, the fastest of 50 after a warm-up;
    with the kernel count of one call from the profiler on a GPU."""
    import torch.nn.functional as F

    out = {}
    shapes = {"shipped": (4, 2, 32), "8B": (32, 8, 128)}
    for dtype in (torch.float32, torch.bfloat16):
        for name, (heads, kv, hd) in shapes.items():
            for n in (1, 10):
                q = torch.randn(1, heads, n, hd, device=DEVICE, dtype=dtype)
                k, v = (torch.randn(1, kv, 512, hd, device=DEVICE, dtype=dtype) for _ in range(2))
                mask = torch.zeros(1, 1, n, 512, device=DEVICE, dtype=dtype)
                mask[..., 400:] = torch.finfo(dtype).min
                rep = heads // kv
                calls = {"mask+gqa": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
                         "mask+repeat": lambda: F.scaled_dot_product_attention(
                             q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), attn_mask=mask),
                         "gqa, no mask": lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)}
                row = {}
                for label, fn in calls.items():
                    fn()
                    t = []
                    for _ in range(50):
                        sync()
                        t0 = time.perf_counter()
                        fn()
                        sync()
                        t.append(time.perf_counter() - t0)
                    row[label] = round(1e6 * min(t), 1)
                    if DEVICE == "cuda":
                        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                            fn()
                            sync()
                        row[label + " kernels"] = sum(e.count for e in prof.key_averages())
                key = f"{str(dtype).replace('torch.', '')} {name} q{n}"
                out[key] = row
                log(f"  {key}: {row}")
    return out


def big_models():
    from transformers import AutoModelForCausalLM, LlamaConfig

    from eagle_demo.drafts import Eagle3Head

    h, inter, layers, heads, kv = (256, 512, 4, 4, 2) if SMOKE else (4096, 14336, 32, 32, 8)
    vocab = 4096 if SMOKE else 128256
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=8192,
                      rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.bfloat16).eval()
        dcfg = LlamaConfig(vocab_size=vocab, hidden_size=h, intermediate_size=inter, num_hidden_layers=1,
                           num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=8192)
        dcfg._attn_implementation = "sdpa"
        draft_vocab = min(32000, vocab)
        fl = (2, layers // 2, layers - 3)
        head = Eagle3Head(dcfg, h, draft_vocab, model.get_input_embeddings(), fl).to(torch.bfloat16).eval()
    return model, head


def section_big(hbm_tbps: float) -> dict:
    from eagle_demo.autotree.choose import Acceptance, choose, measure_costs, round_cost

    model, head = big_models()
    out = {"weight_gb": round(sum(p.numel() * p.element_size() for p in model.parameters()) / 1e9, 2)}
    out["bandwidth_step_ms"] = round(out["weight_gb"] / (hbm_tbps * 1e3) * 1e3, 3)
    prompt = torch.randint(0, 4000, (64 if SMOKE else 512,)).tolist()
    new = 16 if SMOKE else 128
    for static in (False, True):
        label = "static+graphs" if static else "eager"
        out[label] = race(model, head, prompt, TreeConfig.chain(4), static, new)
        out[label]["plain_step_vs_bandwidth"] = round(out[label]["plain_step_ms"] / out["bandwidth_step_ms"], 2)
        log(f"  8B {label}: {out[label]}")
    # verify cost by size on the static path (graphs), then autotree's choice for a tau-6 acceptance profile
    sizes = (1, 2, 4, 8) if SMOKE else (1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64)
    verify, logits = verify_by_size(model, head, prompt, sizes)
    out["verify_ms_by_size"] = {n: round(1e3 * v, 3) for n, v in verify.items()}
    log(f"  8B verify ms by size (static): {out['verify_ms_by_size']}")
    out["packed_heads"] = packed_heads(model, head, prompt, tuple(sorted({*sizes[::2], sizes[-1]})), logits)
    profile = Acceptance(rank=tuple((0.88, 0.06, 0.02, 0.01) for _ in range(8)),
                         chain=tuple(0.88 ** (d + 1) for d in range(8)), rounds=0)
    # the costs as the product's calibration measures them on this engine (static, graphs): plain step, verify
    # by size, each top-k's draft by depth (a whole chain or tree replayed), extend, host
    engine = SpeculativeEngine(model, head, static=True)
    costs = measure_costs(engine, prompt[:64], 1.0 if SMOKE else 6.0)
    out["measured_costs_ms"] = {"plain": round(1e3 * costs.plain, 3), "verify 8": round(1e3 * costs.verify(8), 3),
                                "verify 64": round(1e3 * costs.verify(64), 3),
                                "draft at depth 7 by top-k": {k: round(1e3 * f(7), 3) for k, f in costs.draft.items()},
                                "extend 1": round(1e3 * costs.extend(1), 3)}
    chain7 = TreeConfig.chain(7)
    out["chain7 at tau 6"] = {"round_cost": round(round_cost(costs, chain7, 6.0), 3),
                              "speedup": round(6.0 / round_cost(costs, chain7, 6.0), 3)}
    log(f"  8B measured costs: {out['measured_costs_ms']}; chain 7 at tau 6: {out['chain7 at tau 6']}")
    choice = choose(profile, costs, 0.0, torch.device(DEVICE))
    out["auto_at_tau6_profile"] = choice.line()
    log(f"  8B {choice.line()}")
    out["chosen static+graphs"] = race(model, head, prompt, choice.tree, True, new)  # the round cost at that shape
    log(f"  8B {choice.tree.label()} static+graphs: {out['chosen static+graphs']}")
    out["chain7 static+graphs"] = race(model, head, prompt, TreeConfig.chain(7), True, new)  # tau 6 needs depth
    log(f"  8B chain 7 static+graphs: {out['chain7 static+graphs']}")
    out["eagle1_hot_draft"] = hot_draft(model)
    log(f"  8B EAGLE-1-shaped head, chain-7 draft ms: {out['eagle1_hot_draft']}")
    del model, head
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    return out


def hot_draft(model) -> dict:
    """An EAGLE-1-shaped head over the target's own lm_head (128k x 4096 in bf16, 1 GB read per draft depth): a
    chain-7 draft over the whole vocabulary and over a quarter of it plus the context's ids (`hot_vocab`), eager
    and static (CUDA graphs, the fixed-address table with the context ids), best of 20, ms. On a CPU the hot table
    cut a depth by a third."""
    from transformers import LlamaConfig

    from eagle_demo.decoding.drafter import Drafter
    from eagle_demo.drafts import Eagle1Head

    t = model.config
    dcfg = LlamaConfig(vocab_size=t.vocab_size, hidden_size=t.hidden_size, intermediate_size=t.intermediate_size,
                       num_hidden_layers=1, num_attention_heads=t.num_attention_heads,
                       num_key_value_heads=t.num_key_value_heads, max_position_embeddings=8192)
    dcfg._attn_implementation = "sdpa"
    head = Eagle1Head(dcfg, model.get_output_embeddings(), model.get_input_embeddings()).to(DEVICE, torch.bfloat16)
    prompt = torch.randint(0, 4000, (65,), device=DEVICE)  # [65]
    with torch.inference_mode():
        features = model.model(prompt[None, :-1]).last_hidden_state[0]  # [64, H] post-norm, as EAGLE-1 reads
    out = {}
    for static in (False, True):
        drafter = Drafter(head.eval(), static=static)
        drafter.reserve(128, 16)
        drafter.extend(features, prompt[1:])
        for hot in (0, t.vocab_size // 4):
            tree = TreeConfig.chain(7, hot_vocab=hot)
            times = []
            for _ in range(20):
                sync()
                t0 = time.perf_counter()
                drafter.draft(int(prompt[-1]), tree)
                sync()
                times.append(time.perf_counter() - t0)
            out[f"{'static+graphs' if static else 'eager'} hot {hot or 'all'}"] = round(1e3 * min(times), 3)
    del head
    return out


def verify_by_size(model, head, prompt: list[int], sizes: tuple[int, ...]) -> tuple[dict, torch.Tensor]:
    """Seconds of one static-path verify (graphs on a GPU) of n chain tokens after the prompt, the fastest after
    two warm-ups; and the logits of the largest size (for comparing attention calls)."""
    runner = SpeculativeEngine(model, head, static=True).runner
    runner.reset(len(prompt) + 80)
    runner.forward(torch.tensor(prompt))
    runner.commit(list(range(len(prompt))))
    verify, logits = {}, None
    for n in sizes:
        gen = torch.Generator().manual_seed(n)
        ids, depths = torch.randint(0, 4000, (n,), generator=gen), torch.arange(n)
        mask = torch.ones(n, n, dtype=torch.bool).tril()  # [n, n]
        t = []
        for _ in range(5 if SMOKE else 12):
            sync()
            t0 = time.perf_counter()
            got = runner.forward(ids, depths, mask)
            sync()
            t.append(time.perf_counter() - t0)
            runner.commit([])
        verify[n] = min(t[2:] or t)
        logits = got.logits.float().clone()  # [n, V] (a replayed graph rewrites its output buffer)
    runner.reset()
    return verify, logits


def packed_heads(model, head, prompt: list[int], sizes: tuple[int, ...], stock_logits: torch.Tensor) -> dict:
    """The same verifies with `target.attention.PACKED` (grouped query heads packed into rows, the mask tiled; no K/V
    copy), against the stock call's: ms by size, and the largest logit difference at the largest size."""
    from eagle_demo.target import attention

    if DEVICE == "cuda":
        torch.cuda.empty_cache()  # the stock run's pools and graphs
    model.set_attn_implementation(attention.PACKED)
    try:
        verify, logits = verify_by_size(model, head, prompt, sizes)
    finally:
        model.set_attn_implementation("sdpa")
    out = {"verify_ms_by_size": {n: round(1e3 * v, 3) for n, v in verify.items()},
           "max_logit_diff_vs_stock": round(float((logits - stock_logits).abs().max()), 5),
           "same_argmax": bool(torch.equal(logits.argmax(-1), stock_logits.argmax(-1)))}
    log(f"  8B packed heads: {out}")
    return out


def issue_checks(report: dict) -> dict:
    """Issue 21's GPU checks read off the report: each figure with its goal and "met" / "not met" (absent when
    its section did not run)."""
    def verdict(value, goal: str, ok: bool) -> str:
        return f"{value} ({goal}): {'met' if ok else 'not met'}"

    out = {}
    big = report.get("big", {})
    graphs = big.get("static+graphs", {})
    if "plain_step_vs_bandwidth" in graphs:
        out["plain step with graphs / bandwidth time"] = verdict(graphs["plain_step_vs_bandwidth"], "<= 2",
                                                                 graphs["plain_step_vs_bandwidth"] <= 2.0)
    if "round_cost" in big.get("chosen static+graphs", {}):
        cost = big["chosen static+graphs"]["round_cost"]
        out["round cost at the chosen shape"] = verdict(f"{cost} plain steps ({big.get('auto_at_tau6_profile')})",
                                                        "<= 1.5", cost <= 1.5)
    if "chain7 at tau 6" in big:
        speedup = big["chain7 at tau 6"]["speedup"]
        out["predicted speedup at tau 6 (chain 7)"] = verdict(f"{speedup}x", ">= 3.5", speedup >= 3.5)
    shipped = report.get("shipped", {})
    bf16, fp32 = shipped.get("bfloat16 chain7 static+graphs", {}), shipped.get("float32 chain7 static+graphs", {})
    if "round_ms" in bf16 and "round_ms" in fp32:
        out["bf16 round no slower than fp32 (shipped, chain 7, graphs)"] = verdict(
            f"{bf16['round_ms']} vs {fp32['round_ms']} ms", "bf16 <= fp32", bf16["round_ms"] <= fp32["round_ms"])
    equal = [v["equal"] for k, v in shipped.items() if k.startswith("float32") and isinstance(v, dict) and "equal" in v]
    if equal:
        out["fp32 greedy equal to plain decoding (shipped)"] = verdict(f"{sum(equal)} of {len(equal)}", "all",
                                                                       all(equal))
    return out


def hbm_tbps(gpu_name: str) -> float:
    """The card's memory bandwidth by its name (the weights-bandwidth bound of a plain step); 4.8 when unknown."""
    for part, tbps in (("H100", 3.35), ("H200", 4.8), ("A100", 2.0), ("L40S", 0.864), ("L4", 0.3)):
        if part in gpu_name:
            return tbps
    return 4.8


def main() -> int:
    global DEVICE, SMOKE
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu_fast.json")
    p.add_argument("--seconds", type=float, default=500.0, help="skip sections that start after this")
    p.add_argument("--hbm-tbps", type=float, default=None,
                   help="GPU memory bandwidth in TB/s (default from the GPU's name: H100 3.35, H200 4.8)")
    p.add_argument("--only", nargs="*")
    p.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU (checks this script)")
    args = p.parse_args()
    if args.smoke or not torch.cuda.is_available():
        DEVICE, SMOKE = "cpu", True
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu"
    hbm = args.hbm_tbps or hbm_tbps(name)
    REPORT["env"] = {"torch": torch.__version__, "transformers": transformers.__version__, "device": name,
                     "hbm_tbps": hbm, "smoke": SMOKE}
    start = time.perf_counter()
    sections = [("tests", section_tests), ("big", lambda: section_big(hbm)), ("shipped", section_shipped),
                ("verify_profile", section_verify_profile), ("sdpa", section_sdpa)]  # the issue's checks first
    if args.only:  # in the order given
        sections = sorted((x for x in sections if x[0] in args.only), key=lambda x: args.only.index(x[0]))
    for name, fn in sections:
        if time.perf_counter() - start > args.seconds:
            REPORT[name] = {"skipped": "out of time"}
            continue
        log(f"[{name}]")
        try:
            REPORT[name] = fn()
        except Exception:  # noqa: BLE001 - record and go on to the next section
            REPORT[name] = {"error": traceback.format_exc()[-2000:]}
            log(REPORT[name]["error"])
        Path(args.out).write_text(json.dumps(REPORT, indent=1, default=str))
    REPORT["issue_checks"] = issue_checks(REPORT)
    Path(args.out).write_text(json.dumps(REPORT, indent=1, default=str))
    for check, verdict in REPORT["issue_checks"].items():
        log(f"  {check}: {verdict}")
    failed = [k for k, v in REPORT.items() if isinstance(v, dict) and ("error" in v or v.get("rc", 0) != 0)]
    log(f"done in {time.perf_counter() - start:.0f} s; report {args.out}; failed sections: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
