"""Race this project against the official EAGLE code (PyPI `eagle-llm` 1.2.1, EAGLE-1, its static 26-node tree
`mc_sim_7b_63`) on the same weights, prompts, token budget and torch thread count. A measurement, not a test.

    OMP_NUM_THREADS=1 python scripts/peer_official.py [--pair shipped|weak|both] [--ours auto chain7 ...]
        [--max-new-tokens 128] [--repeats 3] [--threads 1] [--device cpu]

The official code needs transformers 4.36, so it runs in its own virtualenv, built on first use at
$EAGLE_DEMO_CACHE/peer-venv (default ~/.cache/eagle_demo/peer-venv): torch==2.13.0 (this machine's wheel),
transformers==4.36.2, accelerate==0.21.0 and eagle-llm==1.2.1 without its web-UI/training pins (gradio, openai,
fschat, wandb are never imported by `eagle.model`). The same script is the worker inside that venv (`--worker`).

Pairs: "shipped" is assets/tiny-target + assets/tiny-eagle1 (EAGLE-1 yuhuili layout, read by both sides as is).
"weak" is the shipped target with a deliberately degraded head: every weight of the shipped head is mixed with
seeded Gaussian noise (`--weak-noise`, relative to each tensor's own spread) so the head accepts poorly (tau < 2),
written in the same layout under $EAGLE_DEMO_CACHE/peer/ (about 2.5 MB; never committed).

Runs alternate (official, then ours, per repeat) and every line reports one side's median over the prompts and
repeats; the ratio is ours / official tokens per second from that one run. Output ends with a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = (
    "def quicksort(items):\n    \"\"\"Sort a list with quicksort.\"\"\"\n",
    "class LinkedList:\n    def __init__(self):\n        self.head = None\n\n    def append(self, value):\n",
    "The river flowed slowly through the valley, and the old miller",
    "import json\n\n\ndef load_config(path):\n",
)
PEER_PINS = ("torch==2.13.0", "transformers==4.36.2", "accelerate==0.21.0")


def cache_root() -> Path:
    env = os.environ.get("EAGLE_DEMO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo"


# ---- the official side (runs inside the peer venv) ----------------------------------------------------------

def worker(args) -> int:
    import torch
    import transformers
    from eagle.model import ea_model as em
    from eagle.model.choices import mc_sim_7b_63

    torch.set_num_threads(args.threads)
    rounds = [0]
    original = em.tree_decoding

    def counted(*a, **k):
        rounds[0] += 1
        return original(*a, **k)

    em.tree_decoding = counted

    class NoTokenizer:  # the harness hands token ids; EOS is ignored on both sides (same budget)
        eos_token_id = None

    em.AutoTokenizer = type("T", (), {"from_pretrained": staticmethod(lambda *a, **k: NoTokenizer())})
    model = em.EaModel.from_pretrained(base_model_path=args.target, ea_model_path=args.draft,
                                       torch_dtype=torch.float32, low_cpu_mem_usage=True).to(args.device).eval()
    prompts = json.loads(args.prompt_ids)
    results = []
    for i, ids in enumerate([prompts[0]] + prompts):  # the first run warms up and is dropped
        x = torch.tensor([ids], device=args.device)
        rounds[0] = 0
        t = time.perf_counter()
        out = model.eagenerate(x, temperature=0.0, max_new_tokens=args.max_new_tokens, tree_choices=mc_sim_7b_63)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - t
        new = out.shape[1] - len(ids)
        if i:
            results.append({"new_tokens": int(new), "seconds": seconds, "rounds": rounds[0],
                            "tokens": out[0, len(ids):].tolist()})
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "runs": results}))
    return 0


# ---- our side and the race ----------------------------------------------------------------------------------

def ensure_venv() -> Path:
    venv = cache_root() / "peer-venv"
    python = venv / "bin" / "python"
    check = "import eagle.model.ea_model, transformers; assert transformers.__version__ == '4.36.2'"
    probe = [str(python), "-c", check]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"building the official code's virtualenv at {venv} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run(pip + list(PEER_PINS), check=True)
    subprocess.run(pip + ["--no-deps", "eagle-llm==1.2.1"], check=True)  # its UI/training pins are not needed
    subprocess.run(probe, check=True)
    return python


def weak_head(noise: float, seed: int = 0) -> Path:
    """The shipped EAGLE-1 head mixed with seeded noise, in the same (yuhuili) layout."""
    import torch

    out = cache_root() / "peer" / f"weak-eagle1-{noise:g}-{seed}"
    if (out / "pytorch_model.bin").is_file():
        return out
    src = ROOT / "assets" / "tiny-eagle1"
    state = torch.load(src / "pytorch_model.bin", map_location="cpu", weights_only=True)
    gen = torch.Generator().manual_seed(seed)
    for name, w in state.items():
        if w.is_floating_point() and w.dim() >= 1 and not name.endswith("layernorm.weight"):
            spread = w.float().std() if w.numel() > 1 else w.float().abs()
            state[name] = (w.float() + noise * spread * torch.randn(w.shape, generator=gen)).to(w.dtype)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text((src / "config.json").read_text())
    torch.save(state, out / "pytorch_model.bin")
    return out


def run_official(python: Path, target: str, draft: str, prompts: list[list[int]], args) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
           "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [str(python), __file__, "--worker", "--target", target, "--draft", draft, "--device", args.device,
           "--threads", str(args.threads), "--max-new-tokens", str(args.max_new_tokens),
           "--prompt-ids", json.dumps(prompts)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(cache_root()))
    if proc.returncode != 0:
        raise SystemExit(f"the official code failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["runs"]


def run_ours(session, prompts: list[list[int]], tree, max_new: int) -> list[dict]:
    from eagle_demo.config import RunConfig
    from eagle_demo.events import Finish

    run = RunConfig(max_new_tokens=max_new, ignore_eos=True, tree=tree)
    results = []
    for i, ids in enumerate([prompts[0]] + prompts):  # warm-up run dropped, as on the official side
        t = time.perf_counter()
        finish = [ev for ev in session.stream(ids, run) if isinstance(ev, Finish)][0]
        seconds = time.perf_counter() - t
        if i:
            results.append({"new_tokens": finish.new_tokens, "seconds": seconds, "rounds": finish.rounds,
                            "tokens": list(finish.token_ids)})
    return results


def _common_prefix_equal(a: list[int], b: list[int]) -> bool:
    """The official loop stops past the budget (it commits whole rounds): compare what both produced."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def summary(runs: list[dict]) -> dict:
    tps = [r["new_tokens"] / r["seconds"] for r in runs]
    return {"tokens_per_second": statistics.median(tps),
            "tau": sum(r["new_tokens"] for r in runs) / max(1, sum(r["rounds"] for r in runs))}




def race(name: str, target: str, draft: str, python: Path, args) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from _shapes import parse_tree
    from eagle_demo.session import load_session

    session = load_session(target, draft, threads=args.threads, device=args.device, dtype="float32")
    prompts = [session.encode(p) for p in PROMPTS]
    shapes = [parse_tree(t, session) for t in args.ours]
    official, ours = [], {label: [] for label, _ in shapes}
    for _ in range(args.repeats):
        official += run_official(python, target, draft, prompts, args)
        for label, tree in shapes:
            ours[label] += run_ours(session, prompts, tree, args.max_new_tokens)
    ref = summary(official)
    print(f"\n[{name}] {target} + {draft}; torch threads {torch.get_num_threads()}, {len(prompts)} prompts x "
          f"{args.repeats} repeats, {args.max_new_tokens} new tokens, greedy, EOS ignored")
    print(f"  {'official eagle-llm 1.2.1 (static tree mc_sim_7b_63, 26 nodes)':<62}"
          f"{ref['tokens_per_second']:>8.1f} tok/s  tau {ref['tau']:.2f}")
    rows = {"official": ref}
    for label, runs in ours.items():
        s = summary(runs)
        s["ratio"] = s["tokens_per_second"] / ref["tokens_per_second"]
        same = all(_common_prefix_equal(a["tokens"], b["tokens"]) for a, b in zip(runs, official))
        s["same_tokens_as_official"] = same
        print(f"  {'ours ' + label:<62}{s['tokens_per_second']:>8.1f} tok/s  tau {s['tau']:.2f}  "
              f"ratio {s['ratio']:.2f}x  same tokens: {same}")
        rows[label] = s
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--prompt-ids", help=argparse.SUPPRESS)
    ap.add_argument("--target", default=None)
    ap.add_argument("--draft", default=None)
    ap.add_argument("--pair", choices=["shipped", "weak", "both"], default="both")
    ap.add_argument("--ours", nargs="+", default=["auto"], help="our shapes: auto, chainK, treeT/D/K")
    ap.add_argument("--weak-noise", type=float, default=0.6)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    python = ensure_venv()
    target = args.target or str(ROOT / "assets" / "tiny-target")
    pairs = []
    if args.draft:
        pairs.append(("custom", args.draft))
    else:
        if args.pair in ("shipped", "both"):
            pairs.append(("shipped", str(ROOT / "assets" / "tiny-eagle1")))
        if args.pair in ("weak", "both"):
            pairs.append((f"weak (noise {args.weak_noise:g})", str(weak_head(args.weak_noise))))
    report = {name: race(name, target, draft, python, args) for name, draft in pairs}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
