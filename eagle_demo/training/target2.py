"""Second-generation tiny target: a deep, narrow Llama trained on ``corpus2`` with the ``code`` tokenizer.

Resumable and device-agnostic: CUDA (bf16 autocast) when it is there, the CPU (fp32) otherwise. Every
file it writes lives outside git, under ``<cache>/train2`` (``~/.cache/eagle_demo/train2``)::

    tokens/train.u16 val.u16 meta.json   the tokenized corpus, raw little-endian uint16 (carry it to a GPU)
    ckpt/last.pt (+ last.prev.pt)        model, EMA of the weights, optimizer, step, log; resumed by default
    train.log                            when started with nohup as in docs/training.md

Stages::

    python -m eagle_demo.training.target2 tokens   # corpus2 + tokenizer-code -> tokens/*.u16 (<= 64 MB)
    python -m eagle_demo.training.target2 train    # resumes from ckpt/last.pt when present
    python -m eagle_demo.training.target2 export --out DIR   # fp16 safetensors + tokenizer (EMA weights)
    python -m eagle_demo.training.target2 samples --out DIR  # greedy continuations of SAMPLE_PROMPTS
    python -m eagle_demo.training.target2 bench    # decode-step cost of candidate shapes

Schedule: linear warm-up, then a constant peak learning rate (a run can be continued across sessions
and machines without a schedule that has to know its end), then, when asked with ``--decay-steps N``,
a linear decay to a tenth over the next N steps. An exponential moving average of the weights
(:data:`EMA_DECAY`) is kept alongside; the export takes whichever of the two has the lower validation
loss. Batches are drawn by :class:`eagle_demo.training.shared.WindowSampler`, a pure function of the
seed and the step, so a resumed run sees exactly the batches a continuous run would have.

Shape (:data:`SHAPE`, 24 x 128, 4 heads / 2 KV heads, intermediate 352, vocabulary 8192: 6.53 M
parameters, 13 MB in fp16): narrow, so that a one-layer draft step (its decoder layer plus a
8192 x 128 lm_head) stays cheap, and as deep as the 100 tokens/s floor of plain decoding allows. On a
loaded 2-core x86 host, one fp32 decode step after a 200-token prefill (one
thread, smallest median) measured 16 x 192 (the first generation's target, vocabulary 4096): 21 ms, 24 x 128: 24-26 ms,
28 x 128: 31-36 ms; the shipped target decodes at 146-166 tokens/s on a quiet host, so 28 layers
would land near 100 and 24 layers at about 125. The one-layer draft-sized step was 0.65 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

from eagle_demo.training.corpus import default_cache_dir, read_split
from eagle_demo.training.shared import (
    WindowSampler,
    evaluate,
    file_digest,
    init_weights,
    lm_loss,
    lr_at,
    make_optimizer,
    save_checkpoint,
    time_step,
    val_windows,
)

SPECIAL_ID = 0
SHAPE = dict(hidden_size=128, num_hidden_layers=24, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=352)
SEQ_LEN = 256
BATCH_SIZE = 8
PEAK_LR = 2e-3
WARMUP_STEPS = 200
EMA_DECAY = 0.998
EVAL_EVERY = 200
VAL_WINDOWS = 64  # periodic validation on 64 held-out windows spread over the packages (16 K tokens)
MAX_TOKEN_FILE_BYTES = 64 * 2**20
SEED = 1234
SAMPLE_PROMPTS = ("def f(x):\n", "def parse_args(argv):\n", 'class LRUCache:\n    """',
                  "The for statement is used to iterate over")


def train_root() -> Path:
    return default_cache_dir() / "train2"


def default_corpus() -> Path:
    return default_cache_dir() / "corpus2"


def default_tokenizer() -> Path:
    return default_cache_dir() / "tokenizer-code"


def make_config(vocab_size: int, **shape):
    from transformers import LlamaConfig

    shape = {**SHAPE, **shape}
    cfg = LlamaConfig(vocab_size=vocab_size, head_dim=shape["hidden_size"] // shape["num_attention_heads"],
                      max_position_embeddings=2048, rope_theta=10000.0, rms_norm_eps=1e-5, hidden_act="silu",
                      tie_word_embeddings=False, attention_bias=False, mlp_bias=False, bos_token_id=SPECIAL_ID,
                      eos_token_id=SPECIAL_ID, pad_token_id=SPECIAL_ID, use_cache=True, **shape)
    cfg._attn_implementation = "sdpa"
    return cfg


def build_model(vocab_size: int, **shape):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM(make_config(vocab_size, **shape))


# ---- tokens ----------------------------------------------------------------------------------


def write_tokens(corpus: Path, tokenizer: Path, out: Path) -> dict:
    """Tokenize both splits into raw uint16 files: ``[0, doc_1..., 0, doc_2..., ...]``."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    if tok.get_vocab_size() > 65536:
        raise SystemExit(f"vocabulary of {tok.get_vocab_size()} does not fit uint16; use a smaller one")
    out.mkdir(parents=True, exist_ok=True)
    meta = {"tokenizer_sha": file_digest(tokenizer / "tokenizer.json"), "vocab_size": tok.get_vocab_size()}
    for split in ("train", "val"):
        docs = read_split(corpus / f"{split}.txt")
        ids: list[int] = []
        for enc in tok.encode_batch(docs, add_special_tokens=False):
            ids.append(SPECIAL_ID)
            ids.extend(enc.ids)
        arr = np.asarray(ids, dtype="<u2")
        arr.tofile(out / f"{split}.u16")
        n_bytes = sum(len(d.encode("utf-8")) for d in docs)
        meta[split] = {"documents": len(docs), "tokens": int(arr.size), "text_bytes": n_bytes,
                       "bytes_per_token": round(n_bytes / arr.size, 4),
                       "corpus_sha": file_digest(corpus / f"{split}.txt")}
    size = (out / "train.u16").stat().st_size + (out / "val.u16").stat().st_size
    if size > MAX_TOKEN_FILE_BYTES:
        raise SystemExit(f"token files are {size / 2**20:.1f} MiB (> 64 MiB); lower MAX_PACKAGE_BYTES")
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def load_tokens(tokens: Path, split: str) -> torch.Tensor:
    return torch.from_numpy(np.fromfile(tokens / f"{split}.u16", dtype="<u2").astype(np.int32))  # [N]


# ---- training --------------------------------------------------------------------------------


def lr_of(step: int, args, peak: float) -> float:
    """`peak` on the one schedule (`shared.lr_at`, linear): the decay runs over `--decay-steps` steps from step
    `--decay-start` (none without `--decay-steps`), after the warm-up."""
    decay = (step - args.decay_start) / args.decay_steps if args.decay_steps and step >= WARMUP_STEPS else 0.0
    return lr_at(peak, step, WARMUP_STEPS, decay)


@torch.no_grad()
def update_ema(ema, model, decay: float) -> None:
    for e, p in zip(ema.parameters(), model.parameters()):
        e.lerp_(p, 1.0 - decay)


def _log(fh, **row) -> None:
    print(json.dumps(row), file=fh, flush=True)


def train(args) -> None:
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.set_num_threads(args.threads)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    meta = json.loads((args.tokens / "meta.json").read_text())
    stream = load_tokens(args.tokens, "train")
    val = val_windows(load_tokens(args.tokens, "val"), args.seq_len)
    val = val[torch.linspace(0, len(val) - 1, min(VAL_WINDOWS, len(val))).long()].to(device)  # spread over packages
    sampler = WindowSampler(stream, args.seq_len, args.batch_size, args.seed)
    ckpt = args.ckpt_dir / "last.pt"
    torch.manual_seed(args.seed)
    model = build_model(meta["vocab_size"])
    init_weights(model)
    model.to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = make_optimizer(model, args.lr)
    state = {"step": 0, "seconds": 0.0, "tokens": 0, "log": []}
    if ckpt.exists() and not args.fresh:
        ck = torch.load(ckpt, map_location=device, weights_only=False)
        model.load_state_dict(ck["model"])
        ema.load_state_dict(ck["ema"])
        opt.load_state_dict(ck["optimizer"])
        state = ck["state"]
        print(f"resumed from {ckpt} at step {state['step']}", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"device {device}, {n_params / 1e6:.2f} M parameters, train {stream.numel():,} tokens, "
          f"batch {args.batch_size} x {args.seq_len}", flush=True)
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    signal.signal(signal.SIGINT, lambda *_: stop.update(flag=True))
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()

    def checkpoint() -> None:
        if ckpt.exists():
            ckpt.replace(args.ckpt_dir / "last.prev.pt")
        save_checkpoint(ckpt, {"model": model.state_dict(), "ema": ema.state_dict(), "optimizer": opt.state_dict(),
                               "state": state, "shape": SHAPE, "vocab_size": meta["vocab_size"], "args": vars(args)})

    t_start, t_ckpt, losses = time.perf_counter(), time.perf_counter(), []
    base_seconds = state["seconds"]
    model.train()
    while not stop["flag"] and (not args.steps or state["step"] < args.steps):
        step = state["step"]
        for g in opt.param_groups:
            g["lr"] = lr_of(step, args, g["base_lr"])
        batch = sampler.batch(step).to(device)  # [B, T+1]
        with autocast:
            loss = lm_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        update_ema(ema, model, EMA_DECAY if step > WARMUP_STEPS else 0.0)
        losses.append(loss.item())
        state["step"], state["tokens"] = step + 1, state["tokens"] + batch[:, 1:].numel()
        state["seconds"] = base_seconds + time.perf_counter() - t_start
        if state["step"] % 50 == 0:
            print(f"step {state['step']} loss {losses[-1]:.3f} tokens {state['tokens']:,} "
                  f"{state['seconds'] / 60:.1f} min", flush=True)
        if state["step"] % args.eval_every == 0:
            with autocast:
                v, ve = evaluate(model, val), evaluate(ema, val)
            row = dict(step=state["step"], tokens=state["tokens"], train_loss=round(sum(losses) / len(losses), 4),
                       val_loss=round(v, 4), val_loss_ema=round(ve, 4), lr=lr_of(step, args, args.lr),
                       minutes=round(state["seconds"] / 60, 1), epochs=round(sampler.epochs(state["step"]), 3))
            state["log"].append(row)
            losses = []
            _log(sys.stdout, **row)
        if time.perf_counter() - t_ckpt > args.ckpt_minutes * 60:
            checkpoint()
            t_ckpt = time.perf_counter()
    checkpoint()
    print(f"checkpoint at step {state['step']} -> {ckpt}", flush=True)


def load_trained(ckpt_dir: Path, which: str = "best"):
    """The model of ``ckpt_dir/last.pt`` (``raw``, ``ema``, or ``best`` by the last logged validation)."""
    ck = torch.load(ckpt_dir / "last.pt", map_location="cpu", weights_only=False)
    model = build_model(ck["vocab_size"], **ck["shape"])
    if which == "best":
        last = ck["state"]["log"][-1] if ck["state"]["log"] else {}
        which = "ema" if last.get("val_loss_ema", 1e9) <= last.get("val_loss", 1e9) else "raw"
    model.load_state_dict(ck["ema" if which == "ema" else "model"])
    return model.eval(), ck["state"], which


# ---- benchmark -------------------------------------------------------------------------------


def bench(vocab_size: int, shapes: list[dict], threads: int = 1) -> list[dict]:
    """Decode-step milliseconds (1 token and a 8-token verify after a 200-token prefill, fp32), the
    1-layer same-width proxy of a draft step, and training tokens/s on one batch."""
    torch.set_num_threads(threads)
    rows = []
    for shape in shapes:
        torch.manual_seed(0)
        target = build_model(vocab_size, **shape).eval()
        one = build_model(vocab_size, **{**shape, "num_hidden_layers": 1}).eval()
        n = sum(p.numel() for p in target.parameters())
        row = dict(shape=shape, vocab=vocab_size, params_m=round(n / 1e6, 2), fp16_mb=round(2 * n / 1e6, 1),
                   step_ms=round(time_step(target, 200, 1, 30), 2),
                   verify8_ms=round(time_step(target, 200, 8, 30), 2),
                   one_layer_ms=round(time_step(one, 200, 1, 30), 2))
        row["ratio"] = round(row["step_ms"] / row["one_layer_ms"], 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.target2", description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=["tokens", "train", "export", "samples", "bench"])
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--tokenizer", type=Path, default=default_tokenizer())
    ap.add_argument("--tokens", type=Path, default=train_root() / "tokens")
    ap.add_argument("--ckpt-dir", type=Path, default=train_root() / "ckpt")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop at this step (0: run until stopped)")
    ap.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    ap.add_argument("--seq-len", type=int, default=SEQ_LEN)
    ap.add_argument("--lr", type=float, default=PEAK_LR)
    ap.add_argument("--decay-start", type=int, default=0, help="step where the linear decay starts")
    ap.add_argument("--decay-steps", type=int, default=0, help="length of the decay to lr/10 (0: none)")
    ap.add_argument("--eval-every", type=int, default=EVAL_EVERY)
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    ap.add_argument("--which", choices=["best", "raw", "ema"], default="best", help="export: which weights")
    ap.add_argument("--out", type=Path, default=None, help="export folder")
    ap.add_argument("--vocab", type=int, default=8192, help="bench: vocabulary size")
    args = ap.parse_args(argv)
    if args.stage == "tokens":
        print(json.dumps(write_tokens(args.corpus, args.tokenizer, args.tokens), indent=1))
    elif args.stage == "train":
        train(args)
    elif args.stage == "export":
        from eagle_demo.training.shared import export_model

        if args.out is None:
            raise SystemExit("export needs --out DIR (a folder outside assets/ unless you mean to ship it)")
        model, state, which = load_trained(args.ckpt_dir, args.which)
        export_model(model, args.out, args.tokenizer)
        print(f"exported the {which} weights of step {state['step']} to {args.out}")
    elif args.stage == "samples":
        from eagle_demo.training.shared import generate_samples

        for prompt, text in zip(SAMPLE_PROMPTS, generate_samples(args.out, SAMPLE_PROMPTS, 48)):
            print(f"--- {prompt!r}\n{text}")
    else:
        shapes = [SHAPE, {**SHAPE, "num_hidden_layers": 28}, {**SHAPE, "num_hidden_layers": 32},
                  dict(hidden_size=160, num_hidden_layers=24, num_attention_heads=5, num_key_value_heads=1,
                       intermediate_size=432),
                  dict(hidden_size=192, num_hidden_layers=16, num_attention_heads=6, num_key_value_heads=2,
                       intermediate_size=512)]
        bench(args.vocab, shapes, args.threads)


if __name__ == "__main__":
    main()
