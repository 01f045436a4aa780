"""Race this project against the official EAGLE code (PyPI `eagle-llm` 1.2.1) on the same weights.

Race this project against the official EAGLE code (PyPI `eagle-llm` 1.2.1, EAGLE-1, its static 26-node tree
`mc_sim_7b_63`) on the same weights, prompts, token budget and torch thread count. A measurement, not a test.

    OMP_NUM_THREADS=1 python scripts/peer_official.py [--pair shipped|weak|both] [--ours auto chain7 ...]
        [--max-new-tokens 128] [--repeats 3] [--threads 1] [--device cpu]

The official code needs transformers 4.36, so it runs in its own virtualenv, built on first use at
$EAGLE_DEMO_CACHE/peer-venv (default ~/.cache/eagle_demo/peer-venv): torch==2.13.0 (this machine's wheel),
transformers==4.36.2, accelerate==0.21.0 and eagle-llm==1.2.1 without its web-UI/training pins (gradio, openai,
fschat, wandb are never imported by `eagle.model`). The same script is the worker inside that venv (`--worker`).
On a machine without internet (a lent GPU), `--wheels DIR` installs the official code's packages from a folder of
wheels into a folder put on PYTHONPATH instead, over the machine's own packages and torch (docs/gpu/README.md).

Pairs: "shipped" is assets/tiny-target + assets/tiny-eagle1 (EAGLE-1 yuhuili layout, read by both sides as is).
"weak" is the shipped target with a deliberately degraded head: every weight of the shipped head is mixed with
seeded Gaussian noise (`--weak-noise`, relative to each tensor's own spread) so the head accepts poorly (tau < 2),
written in the same layout under $EAGLE_DEMO_CACHE/peer/ (about 2.5 MB; never committed). "big" (`--pair big`,
`--big-shape 8b|smoke`, `--dtype bfloat16` on a GPU) is a random Llama-3.1-8B-shaped target with a random EAGLE-1
head in the official layout (`big_pair`, 16 GB written once): random weights accept nothing, so it races the
cost of a round on an 8B forward (each side's round ms is printed).

The official code runs in one worker process that keeps its model loaded; runs alternate per prompt (the official
run, then each of our shapes, on the same prompt, their order rotated from prompt to prompt), after one dropped
warm-up run of each. Every line reports one side's median tokens/s over the prompts and repeats (wall clock) and its
tokens per CPU second (both sides time their own generating thread with `time.thread_time`, one torch thread each,
so other processes on a shared machine do not enter that figure); the ratios are ours / official from that one run.
Output ends with a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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
# --wheels: the machine's torch stays; these are the versions transformers 4.36.2 needs that a newer image lacks
OFFLINE_PINS = ("transformers==4.36.2", "accelerate==0.21.0", "huggingface_hub==0.36.2", "tokenizers==0.15.2")


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
                                       torch_dtype=getattr(torch, args.dtype), low_cpu_mem_usage=True
                                       ).to(args.device).eval()
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__}), flush=True)
    for line in sys.stdin:  # one prompt (a JSON list of token ids) per line, one result line back
        ids = json.loads(line)
        x = torch.tensor([ids], device=args.device)
        rounds[0] = 0
        t, cpu = time.perf_counter(), time.thread_time()
        out = model.eagenerate(x, temperature=0.0, max_new_tokens=args.max_new_tokens, tree_choices=mc_sim_7b_63)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds, cpu = time.perf_counter() - t, time.thread_time() - cpu
        new = out.shape[1] - len(ids)
        print(json.dumps({"new_tokens": int(new), "seconds": seconds, "cpu_seconds": cpu, "rounds": rounds[0],
                          "tokens": out[0, len(ids):].tolist()}), flush=True)
    return 0


# ---- our side and the race ----------------------------------------------------------------------------------

def venv_env(**extra: str) -> dict:
    """The environment for the official code: without PYTHONPATH, which would put this project's own transformers
    (e.g. one carried to a GPU machine in a folder on PYTHONPATH) before the official code's 4.36.2."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | extra


def official_runtime(wheels: Path | None = None) -> tuple[Path, dict]:
    """(python, environment) that run the official code, built once. wheels: a folder of wheels to install from
    with no index (a machine without internet, e.g. a lent GPU): the official code's packages go to a folder on
    PYTHONPATH in front of this interpreter's own, so its torch (CUDA there) and everything else stay in use. A
    venv would not do there: that machine's python is itself a venv, whose packages a nested venv cannot see."""
    if wheels is not None:
        site = cache_root() / "peer-site"
        python, env = Path(sys.executable), venv_env(PYTHONPATH=str(site))
    else:
        venv = cache_root() / "peer-venv"
        python, env = venv / "bin" / "python", venv_env()
    check = "import eagle.model.ea_model, transformers; assert transformers.__version__ == '4.36.2'"
    probe = [str(python), "-c", check]
    if python.is_file() and subprocess.run(probe, capture_output=True, env=env).returncode == 0:
        return python, env
    if wheels is not None:  # exactly these; their other needs (numpy, requests, ...) are the machine's own
        print(f"installing the official code from {wheels} into {site} (once)", file=sys.stderr)
        pip = [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--find-links", str(wheels),
               "--upgrade", "--target", str(site)]
        subprocess.run(pip + list(OFFLINE_PINS) + ["eagle-llm==1.2.1"], check=True, env=env)
    else:
        print(f"building the official code's virtualenv at {venv} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run(pip + list(PEER_PINS), check=True, env=env)
        subprocess.run(pip + ["--no-deps", "eagle-llm==1.2.1"], check=True, env=env)  # no UI/training pins
    subprocess.run(probe, check=True, env=env)
    return python, env


WEAK_NOISE = 0.9  # official tau 1.72 and ours 1.71 on PROMPTS (0.6 left the official tree at tau 2.50)


def weak_head(noise: float = WEAK_NOISE, seed: int = 0) -> Path:
    """The shipped EAGLE-1 head mixed with seeded noise, in the same (yuhuili) layout (cached per shipped head:
    a new shipped pair gets its own weak head)."""
    import hashlib

    import torch

    src = ROOT / "assets" / "tiny-eagle1"
    stamp = hashlib.sha256((src / "pytorch_model.bin").read_bytes()).hexdigest()[:12]
    out = cache_root() / "peer" / f"weak-eagle1-{noise:g}-{seed}-{stamp}"
    if (out / "pytorch_model.bin").is_file():
        return out
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


BIG = {"8b": {"hidden": 4096, "inter": 14336, "layers": 32, "heads": 32, "kv": 8, "vocab": 128256},  # Llama-3.1-8B
       "smoke": {"hidden": 256, "inter": 512, "layers": 4, "heads": 4, "kv": 2, "vocab": 4096}}


def _llama_config(c: dict, layers: int, dtype: str, **extra) -> dict:
    """A config.json both transformers 4.36 and 5.x read the same way (rope theta 10000, their shared default)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": c["hidden"],
            "intermediate_size": c["inter"], "num_attention_heads": c["heads"], "num_key_value_heads": c["kv"],
            "num_hidden_layers": layers, "hidden_act": "silu", "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-5, "vocab_size": c["vocab"], "bos_token_id": 0, "eos_token_id": 0,
            "pad_token_id": 0, "tie_word_embeddings": False, "torch_dtype": dtype, **extra}


def big_pair(shape: str, dtype: str) -> tuple[Path, Path]:
    """A Llama-3.1-8B-shaped target with random weights ("8b": 16 GB in bf16) and a random EAGLE-1 head in the
    official (yuhuili) layout, written once under $EAGLE_DEMO_CACHE/peer/big-<shape>-<dtype>/ (never committed):
    the same weights for both sides, so the two rounds are timed on an 8B forward. A random head accepts almost
    nothing (tau near 1), so this pair races the rounds' cost, not acceptance."""
    import torch
    from safetensors.torch import save_file

    c, out = BIG[shape], cache_root() / "peer" / f"big-{shape}-{dtype}"
    target, head = out / "target", out / "head"
    if (target / "model.safetensors").is_file() and (head / "pytorch_model.bin").is_file():
        return target, head
    dt, dev = getattr(torch, dtype), "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=dev).manual_seed(0)

    def w(*size: int) -> torch.Tensor:
        return (0.02 * torch.randn(*size, generator=gen, device=dev)).to(dt).cpu()

    def layer(p: str, first_norm: bool) -> dict:
        h, i, hd = c["hidden"], c["inter"], c["hidden"] // c["heads"]
        part = {p + "self_attn.q_proj.weight": w(h, h), p + "self_attn.k_proj.weight": w(c["kv"] * hd, h),
                p + "self_attn.v_proj.weight": w(c["kv"] * hd, h), p + "self_attn.o_proj.weight": w(h, h),
                p + "mlp.gate_proj.weight": w(i, h), p + "mlp.up_proj.weight": w(i, h),
                p + "mlp.down_proj.weight": w(h, i), p + "post_attention_layernorm.weight": torch.ones(h, dtype=dt)}
        return part | ({p + "input_layernorm.weight": torch.ones(h, dtype=dt)} if first_norm else {})

    state = {"model.embed_tokens.weight": w(c["vocab"], c["hidden"]), "lm_head.weight": w(c["vocab"], c["hidden"]),
             "model.norm.weight": torch.ones(c["hidden"], dtype=dt)}
    for i in range(c["layers"]):
        state |= layer(f"model.layers.{i}.", True)
    target.mkdir(parents=True, exist_ok=True)
    head.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(_llama_config(c, c["layers"], dtype), indent=1))
    (head / "config.json").write_text(json.dumps(_llama_config(c, 1, dtype, bias=True), indent=1))
    drafts = {"fc.weight": w(c["hidden"], 2 * c["hidden"]), "fc.bias": torch.zeros(c["hidden"], dtype=dt),
              **layer("layers.0.", False), "embed_tokens.weight": state["model.embed_tokens.weight"]}
    # each file under a temporary name first: a run cut off while writing 16 GB leaves no half file to reuse
    torch.save(drafts, head / "pytorch_model.bin.tmp")
    os.replace(head / "pytorch_model.bin.tmp", head / "pytorch_model.bin")
    save_file(state, str(target / "model.safetensors.tmp"), metadata={"format": "pt"})
    os.replace(target / "model.safetensors.tmp", target / "model.safetensors")
    return target, head


class Official:
    """The official code in its own environment, loaded once; `run(ids)` generates one prompt there."""

    def __init__(self, peer: tuple[Path, dict], target: str, draft: str, args):
        python, env = peer
        env = env | {"OMP_NUM_THREADS": str(args.threads), "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
                     "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
        cmd = [str(python), __file__, "--worker", "--target", target, "--draft", draft, "--device", args.device,
               "--threads", str(args.threads), "--max-new-tokens", str(args.max_new_tokens), "--dtype", args.dtype]
        self.log = tempfile.TemporaryFile(mode="w+")  # its warnings; a pipe nobody reads could fill and block it
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, env=env, cwd=str(cache_root()))
        self.versions = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"the official code failed:\n{self.log.read()[-3000:]}")
        return json.loads(line)

    def run(self, ids: list[int]) -> dict:
        self.proc.stdin.write(json.dumps(ids) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.log.close()


def run_ours(session, ids: list[int], tree, max_new: int, fields: dict | None = None) -> dict:
    from eagle_demo.common.config import RunConfig
    from eagle_demo.decoding.events import Finish

    run = RunConfig(max_new_tokens=max_new, ignore_eos=True, **(fields or {}),
                    **({"tree": tree} if tree is not None else {}))  # fields: pause_below, retune (`_shapes`)
    t, cpu = time.perf_counter(), time.thread_time()
    mode = "eagle" if tree is not None else "baseline"  # tree None: plain decoding of the same target
    finish = [ev for ev in session.stream(ids, run, mode) if isinstance(ev, Finish)][0]
    seconds, cpu = time.perf_counter() - t, time.thread_time() - cpu
    return {"new_tokens": finish.new_tokens, "seconds": seconds, "cpu_seconds": cpu, "rounds": finish.rounds,
            "tokens": list(finish.token_ids), "retuned": finish.extra.get("retuned", [])}


def _common_prefix_equal(a: list[int], b: list[int]) -> bool:
    """The official loop stops past the budget (it commits whole rounds): compare what both produced."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def summary(runs: list[dict]) -> dict:
    tps = [r["new_tokens"] / r["seconds"] for r in runs]
    return {"tokens_per_second": statistics.median(tps),
            "tokens_per_cpu_second": sum(r["new_tokens"] for r in runs) / sum(r["cpu_seconds"] for r in runs),
            "tau": sum(r["new_tokens"] for r in runs) / max(1, sum(r["rounds"] for r in runs)),
            "round_ms": 1e3 * sum(r["seconds"] for r in runs) / max(1, sum(r["rounds"] for r in runs))}


def race(name: str, target: str, draft: str, peer: tuple[Path, dict], args) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from _shapes import parse_shape
    from eagle_demo.session import load_session

    session = load_session(target, draft, threads=args.threads, device=args.device, dtype=args.dtype,
                           static=args.static)
    if session.tokenizer is not None:
        prompts = [session.encode(p) for p in PROMPTS]
    else:  # the random big pair: seeded token ids, as many prompts
        gen = torch.Generator().manual_seed(0)
        vocab = min(32000, int(session.pair.target.get_input_embeddings().weight.shape[0]))
        prompts = [torch.randint(0, vocab, (128,), generator=gen).tolist() for _ in PROMPTS]
    shapes = [parse_shape(t, session) for t in args.ours]
    official, ours = [], {label: [] for label, _, _ in shapes}
    peer = Official(peer, target, draft, args)
    try:
        peer.run(prompts[0])  # warm-up runs, dropped
        for _, tree, pause in shapes:
            run_ours(session, prompts[0], tree, args.max_new_tokens, pause)
        turn = 0
        for _ in range(args.repeats):  # per prompt: the official run, then each of ours, their order rotated
            for ids in prompts:  # (the run right after the official process meets colder caches)
                official.append(peer.run(ids))
                for label, tree, pause in shapes[turn % len(shapes):] + shapes[:turn % len(shapes)]:
                    ours[label].append(run_ours(session, ids, tree, args.max_new_tokens, pause))
                turn += 1
    finally:
        peer.close()
    ref = summary(official)
    load = os.getloadavg()
    print(f"\n[{name}] {target} + {draft}, {args.dtype}{'; ours static + graphs' if args.static else ''}; "
          f"torch threads {torch.get_num_threads()}, {len(prompts)} prompts x "
          f"{args.repeats} repeats, {args.max_new_tokens} new tokens, greedy, EOS ignored; load average at the end "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print(f"  {'':<62}{'wall tok/s':>11}{'CPU tok/s':>11}")
    print(f"  {'official eagle-llm 1.2.1 (static tree mc_sim_7b_63, 26 nodes)':<62}"
          f"{ref['tokens_per_second']:>11.1f}{ref['tokens_per_cpu_second']:>11.1f}  tau {ref['tau']:.2f}  "
          f"round {ref['round_ms']:.2f} ms")
    rows = {"official": ref}
    for label, runs in ours.items():
        s = summary(runs)
        s["ratio"] = s["tokens_per_second"] / ref["tokens_per_second"]
        s["cpu_ratio"] = s["tokens_per_cpu_second"] / ref["tokens_per_cpu_second"]
        same = all(_common_prefix_equal(a["tokens"], b["tokens"]) for a, b in zip(runs, official))
        s["same_tokens_as_official"] = same
        s["retuned_runs"] = sum(1 for r in runs if r["retuned"])  # runs whose shape moved (`retune`)
        print(f"  {'ours ' + label:<62}{s['tokens_per_second']:>11.1f}{s['tokens_per_cpu_second']:>11.1f}  tau "
              f"{s['tau']:.2f}  round {s['round_ms']:.2f} ms  ratio {s['ratio']:.2f}x wall, {s['cpu_ratio']:.2f}x CPU"
              f"  same tokens: {same}"
              + (f"  retuned in {s['retuned_runs']} of {len(runs)} runs" if s["retuned_runs"] else ""))
        rows[label] = s
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--target", default=None)
    ap.add_argument("--draft", default=None)
    ap.add_argument("--pair", choices=["shipped", "weak", "both", "big"], default="both",
                    help="big: a random Llama-3.1-8B-shaped target and EAGLE-1 head, written once (`big_pair`)")
    ap.add_argument("--big-shape", choices=sorted(BIG), default="8b")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--ours", nargs="+", default=["auto", "plain"],
                    help="our shapes: auto, auto-retune (auto moving its shape, `retune`), auto-fixed (never paused), "
                         "chainK, treeT/D/K, or plain (our plain decoding of the target)")
    ap.add_argument("--weak-noise", type=float, default=WEAK_NOISE)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--static", action="store_true",
                    help="our engines over fixed-size caches, CUDA graphs on a GPU (`load_session(static=True)`)")
    ap.add_argument("--wheels", type=Path, default=None,
                    help="install the official code offline from this folder of wheels (docs/gpu/README.md)")
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    peer = official_runtime(args.wheels)
    target = args.target or str(ROOT / "assets" / "tiny-target")
    pairs = []
    if args.pair == "big":
        big_target, big_head = big_pair(args.big_shape, args.dtype)
        target = str(big_target)
        pairs.append((f"big ({args.big_shape}, random weights)", str(big_head)))
    elif args.draft:
        pairs.append(("custom", args.draft))
    else:
        if args.pair in ("shipped", "both"):
            pairs.append(("shipped", str(ROOT / "assets" / "tiny-eagle1")))
        if args.pair in ("weak", "both"):
            pairs.append((f"weak (noise {args.weak_noise:g})", str(weak_head(args.weak_noise))))
    report = {name: race(name, target, draft, peer, args) for name, draft in pairs}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
