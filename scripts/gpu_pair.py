"""The second-generation pair (issue 22) in one prepared run: target, bits per byte, head data, both heads.

Stages, each within its own wall-clock budget (and all of them within --minutes), each recorded in
``$OUT/summary.json`` as soon as it ends (a failed stage is recorded with its error, and the stages that do
not need it still run):

1. bpb-before: held-out bits per byte of today's shipped target (assets/tiny-target).
2. target: the 24 x 128 Llama of eagle_demo.training.target2, from scratch on the carried tokens, with a
   small share of chat examples (eagle_demo.training.target_budget: batch size from measured step times,
   schedule and stop by the clock); exported like assets/tiny-target (fp16 safetensors, tokenizer with the
   chat template); bits per byte, greedy samples and the indentation check on the export.
   -> ``$OUT/target2.tar`` (target2/...)
3. head-data: the new target's greedy continuations of code, docstring, docs-prose and chat prompts, plus
   corpus windows, and their features (eagle_demo.training.head_data).
4. eagle1, eagle3: the heads of eagle_demo.training.heads (training-time-test unroll 4), exported in the
   yuhuili layouts like assets/tiny-eagle1 and assets/tiny-eagle3.
5. check: each head loaded with its target through eagle_demo's loader (load_pair), greedy EAGLE equal to
   plain greedy decoding (fp32) on code, docstring, prose and chat prompts; tau per prompt.
   -> ``$OUT/heads.tar`` (eagle1/, eagle3/, training_log_eagle{1,3}.json)

Prepare the carried folder here once (19 MiB; the tracked tree adds about 23 MB of the 64 MiB a call takes)::

    python -m eagle_demo.training.carry --out out/pair2

Then one device call, from the repository root, carrying ``out/pair2`` (timeout_s 600)::

    PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 python3 scripts/gpu_pair.py --carry out/pair2 --out $OUT 2>&1 | tee $OUT/log.txt

Back here: ``tar -xf target2.tar -C DIR`` and ``tar -xf heads.tar -C DIR`` give the folders to inspect,
bench and, once they pass, copy into assets/. ``--smoke`` runs every stage on the CPU with a tiny target
and tiny budgets (about two minutes), writing into --out (default: a new temporary folder).
``--target-dir DIR`` skips the target's training and trains heads for an exported target (a rerun of the
heads only). Across CPU sessions: ``--head-tokens FILE`` keeps the head data's token rows (the target's own
continuations, the slow part; a later run with the same file and target reads them back), and
``--init-heads DIR`` trains DIR/eagle1 and DIR/eagle3 further instead of starting from scratch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from eagle_demo.training import carry as carried  # noqa: E402
from eagle_demo.training.target_budget import TargetRun  # noqa: E402

SMOKE_SHAPE = dict(hidden_size=64, num_hidden_layers=8, num_attention_heads=2, num_key_value_heads=1,
                   intermediate_size=128)
CODE_PROMPTS = ("def f(x):\n", "def parse_args(argv):\n", 'class LRUCache:\n    """',
                "The for statement is used to iterate over", "import os\nimport sys\n\n\ndef main(argv):\n")
CHAT_QUESTION = "How do I read a file line by line?"


def log(*args) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


class Clock:
    """Stage budgets inside one overall deadline: a stage gets its own minutes, or less when the stages after
    it would otherwise lose their reserve."""

    def __init__(self, minutes: float):
        self.t0, self.total = time.perf_counter(), minutes * 60

    def left(self) -> float:
        return self.total - (time.perf_counter() - self.t0)

    def allot(self, minutes: float, reserve_minutes: float) -> float:
        return max(0.05, min(minutes, (self.left() / 60) - reserve_minutes))


class Report:
    def __init__(self, out: Path, args):
        self.out, self.data = out, {"args": {k: str(v) for k, v in vars(args).items()}, "env": env(args.device)}
        self.write()

    def stage(self, name: str, fn):
        log(f"== {name}")
        t = time.perf_counter()
        try:
            result = fn()
            self.data[name] = {**(result or {}), "stage_seconds": round(time.perf_counter() - t, 1)}
            ok = True
        except Exception as exc:  # recorded, and the stages that do not need this one still run
            self.data[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:],
                               "stage_seconds": round(time.perf_counter() - t, 1)}
            log(f"{name} failed: {exc}")
            ok = False
        self.write()
        return ok

    def write(self) -> None:
        (self.out / "summary.json").write_text(json.dumps(self.data, indent=1) + "\n")


def env(device: str) -> dict:
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device,
            "threads": torch.get_num_threads()}
    if device == "cuda":
        info |= {"cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    return info


def heldout(carry: Path, smoke: bool) -> list[tuple[str, str]]:
    from eagle_demo.training.bpb import heldout_files

    files = heldout_files(carry / "corpus")
    if smoke:  # the first 3 KB of one file a package: seconds on a CPU
        firsts = {}
        for package, text in files:
            firsts.setdefault(package, (package, text[:3000]))
        files = list(firsts.values())
    return files


def bpb_stage(folder: Path, files, device: str) -> dict:
    from eagle_demo.training.bpb import bits_per_byte

    r = bits_per_byte(folder, files, device=device)
    log(f"bits per byte {r['bits_per_byte']} ({folder.name}): {r['per_package']}")
    return r


def chat_stream(examples, tokenizer) -> torch.Tensor:
    """The chat examples packed as one stream ``[0, Question..Answer.., 0, ...]`` (see chat.CHAT_TEMPLATE)."""
    from eagle_demo.training.chat import render

    ids: list[int] = []
    for e in examples:
        ids.extend(tokenizer.encode(render(e), add_special_tokens=False).ids[:-1])  # the next BOS ends it
    ids.append(0)
    return torch.tensor(ids, dtype=torch.long)  # [M]


def target_stage(ctx: dict, args, clock: Clock) -> dict:
    from eagle_demo.training.chat import add_template
    from eagle_demo.training.shared import export_model
    from eagle_demo.training.target_budget import train_target

    run = TargetRun(minutes=clock.allot(args.target_minutes, args.reserve_minutes), chat_ratio=args.chat_ratio,
                    batch_sizes=(4, 8) if args.smoke else (64, 128, 256), eval_seconds=10 if args.smoke else 30)
    shape = SMOKE_SHAPE if args.smoke else None
    model, record = train_target(ctx["train"], ctx["val"], ctx["chat"], ctx["vocab"], run, args.device, shape, log)
    folder = export_model(model.cpu(), ctx["work"] / "target2", args.carry / "tokenizer-code")
    if args.chat_ratio > 0:
        add_template(folder)
    ctx["target_dir"] = folder
    record["run"] = {k: v for k, v in vars(run).items()}
    record["chat_template"] = args.chat_ratio > 0
    return record


def given_target(ctx: dict, args) -> dict:
    """--target-dir: heads for an existing export, as it is (a chat template only if it has one)."""
    import shutil

    folder = ctx["work"] / "target2"
    shutil.copytree(args.target_dir, folder)
    ctx["target_dir"] = folder
    return {"given": str(args.target_dir)}


def after_stage(ctx: dict, args) -> dict:
    from eagle_demo.training.chat import prompt_text
    from eagle_demo.training.indent import check_folder
    from eagle_demo.training.shared import generate_samples

    folder = ctx["target_dir"]
    out = {"bpb": bpb_stage(folder, ctx["heldout"], args.device)}
    prompts = list(CODE_PROMPTS) + [prompt_text(CHAT_QUESTION, bos="")]
    out["samples"] = dict(zip(prompts, generate_samples(folder, prompts, 24 if args.smoke else 64)))
    rows = check_folder(folder)
    out["indent"] = {"indented": sum(r.indented for r in rows), "of": len(rows),
                     "first_lines": {r.prompt: r.first_line for r in rows}}
    log(f"indentation: {out['indent']['indented']}/{len(rows)} prompts ending in ':\\n' continue indented")
    with tarfile.open(args.out / "target2.tar", "w") as tar:
        tar.add(folder, arcname="target2")
    return out


def data_stage(ctx: dict, args, clock: Clock) -> dict:
    from tokenizers import Tokenizer

    from eagle_demo.training import heads
    from eagle_demo.training.head_data import DataRun, build

    heads.TARGET_DIR = ctx["target_dir"]
    ctx["target"] = heads.load_target(args.device)
    stamp = weights_stamp(ctx["target_dir"])
    if args.head_tokens and args.head_tokens.exists():
        return _saved_tokens(ctx, args, stamp)
    tok = Tokenizer.from_file(str(args.carry / "tokenizer-code" / "tokenizer.json"))
    spans = carried.document_spans(ctx["train"], carried.manifest_names(args.carry, "train"))
    questions = [e.question for e in ctx["examples"]]
    questions = [questions[i] for i in torch.randperm(len(questions), generator=torch.Generator().manual_seed(7))]
    run = DataRun(sequences=args.sequences, batch=args.data_batch,
                  minutes=clock.allot(args.data_minutes, args.reserve_minutes * 0.6))
    ctx["data"], record = build(ctx["target"], ctx["train"], spans, tok, questions, run, log)
    if args.head_tokens:  # the costly part (the target's own continuations), kept for a later run
        args.head_tokens.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"tokens": ctx["data"]["tokens"].cpu(), "n_corpus": ctx["data"]["n_corpus"], "target": stamp,
                    "record": record}, args.head_tokens)
    return record


def _saved_tokens(ctx: dict, args, stamp: str) -> dict:
    """--head-tokens FILE that exists: the rows a previous run generated for this same target; features again."""
    from eagle_demo.training.head_data import features

    saved = torch.load(args.head_tokens, weights_only=True)
    if saved["target"] != stamp:
        raise ValueError(f"{args.head_tokens} holds head data for another target (weights {saved['target']}, this "
                         f"one {stamp}); remove it or name another --head-tokens file")
    ctx["data"] = features(ctx["target"], saved["tokens"], max(1, args.data_batch // 2))
    ctx["data"]["n_corpus"] = int(saved["n_corpus"])
    log(f"head data: {saved['tokens'].shape[0]} rows read from {args.head_tokens}")
    return {**saved["record"], "read_from": str(args.head_tokens)}


def weights_stamp(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()[:16]


def head_stage(ctx: dict, args, clock: Clock, family: str) -> dict:
    from eagle_demo.training import head_export, heads

    budget = args.eagle1_minutes if family == "eagle1" else args.eagle3_minutes
    extra = {}
    minutes = clock.allot(budget, args.reserve_minutes * (0.45 if family == "eagle1" else 0.2))
    batch = args.head_batch
    init = args.init_heads / family if args.init_heads else None  # warm start from an exported head
    if init is not None:
        extra["init"] = str(init)
    save = heads.Saver(args.out / "partial", family, args.save_every) if args.save_every > 0 else None
    if family == "eagle1":
        run = heads.HeadRun(10**6, batch, args.head_lr, minutes, unroll=4, init=init, progress=False)
        head, hlog = heads.train_eagle1(ctx["data"], run, target=ctx["target"], save=save)
        head_export.export_eagle1(head, ctx["work"] / "eagle1")
    else:
        vd = min(args.draft_vocab, ctx["vocab"] // 2)
        run = heads.HeadRun(10**6, batch, args.head_lr, minutes, unroll=4, draft_vocab=vd, init=init, progress=False)
        head, t2d, hlog = heads.train_eagle3(ctx["data"], run, target=ctx["target"], save=save)
        head_export.export_eagle3(head, t2d, ctx["work"] / "eagle3")
        tokens = ctx["data"]["tokens"].cpu()
        extra.update(draft_vocab=int(t2d.sum()), coverage=round(t2d[tokens].float().mean().item(), 4))
    (ctx["work"] / f"training_log_{family}.json").write_text(json.dumps(hlog))
    last = hlog[-1]
    log(f"{family}: {len(hlog)} steps in {last['seconds']:.0f} s, loss {last['loss']:.4f}, top-1 by unroll step "
        + " ".join(f"{a:.3f}" for a in last["top1_by_step"]))
    tail = hlog[-20:]
    return {**extra, "steps": len(hlog), "batch": batch, "minutes": round(minutes, 2),
            "seconds": round(last["seconds"], 1),
            "loss_first": round(hlog[0]["loss"], 4), "loss_last20": round(sum(r["loss"] for r in tail) / len(tail), 4),
            "top1_by_step_last20": [round(sum(r["top1_by_step"][j] for r in tail) / len(tail), 4)
                                    for j in range(len(last["top1_by_step"]))]}


def pack_heads(ctx: dict, args) -> dict:
    names = [n for n in ("eagle1", "eagle3", "training_log_eagle1.json", "training_log_eagle3.json")
             if (ctx["work"] / n).exists()]
    with tarfile.open(args.out / "heads.tar", "w") as tar:
        for name in names:
            tar.add(ctx["work"] / name, arcname=name)
    return {"packed": names}


def check_stage(ctx: dict, args) -> dict:
    from eagle_demo.common.config import RunConfig, default_tree
    from eagle_demo.decoding.metrics import summarize
    from eagle_demo.session import load_session

    out = {}
    prompts = [(p, False) for p in CODE_PROMPTS[:4]]
    if "chat_template" in json.loads((ctx["target_dir"] / "tokenizer_config.json").read_text()):
        prompts.append((CHAT_QUESTION, True))
    for family in ("eagle1", "eagle3"):
        if not (ctx["work"] / family / "pytorch_model.bin").is_file():
            continue
        session = load_session(str(ctx["target_dir"]), str(ctx["work"] / family), device=args.device, dtype="float32")
        run = RunConfig(max_new_tokens=16 if args.smoke else 96, tree=default_tree(args.device, family))
        rows = []
        for prompt, chat in prompts:
            ids = session.encode(prompt, chat=chat)
            eagle = summarize(session.stream(ids, run, "eagle"))
            base = summarize(session.stream(ids, run, "baseline"))
            rows.append({"prompt": prompt, "chat": chat, "equal": eagle.token_ids == base.token_ids,
                         "tau": round(eagle.tau, 3)})
        out[family] = {"tree": str(run.tree), "equal": f"{sum(r['equal'] for r in rows)}/{len(rows)}",
                       "tau_mean": round(sum(r["tau"] for r in rows) / len(rows), 3), "prompts": rows}
        log(f"{family}: greedy equal to plain decoding {out[family]['equal']}, mean tau {out[family]['tau_mean']}")
        del session
    if not out:
        raise RuntimeError("no head was exported")
    if not all(r["equal"] for v in out.values() for r in v["prompts"]):
        raise RuntimeError(f"EAGLE output differs from plain decoding: {out}")
    return out


def load_stage(ctx: dict, args) -> dict:
    from tokenizers import Tokenizer

    t = time.perf_counter()
    ctx["train"] = carried.load_tokens(args.carry, "train")
    ctx["val"] = carried.load_tokens(args.carry, "val")
    meta = json.loads((args.carry / "tokens" / "meta.json").read_text())
    ctx["vocab"] = meta["vocab_size"]
    ctx["examples"] = carried.load_chat(args.carry)
    tok = Tokenizer.from_file(str(args.carry / "tokenizer-code" / "tokenizer.json"))
    ctx["chat"] = chat_stream(ctx["examples"], tok)
    ctx["heldout"] = heldout(args.carry, args.smoke)
    return {"train_tokens": ctx["train"].numel(), "val_tokens": ctx["val"].numel(), "vocab": ctx["vocab"],
            "chat_examples": len(ctx["examples"]), "chat_tokens": ctx["chat"].numel(),
            "heldout_files": len(ctx["heldout"]), "seconds": round(time.perf_counter() - t, 1)}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--carry", type=Path, default=carried.DEFAULT_CARRY)
    ap.add_argument("--out", type=Path, default=None, help="results folder (default $OUT, or a temporary one)")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny target and budgets: checks the script")
    ap.add_argument("--device", default=None)
    ap.add_argument("--minutes", type=float, default=8.6, help="deadline for all stages together")
    ap.add_argument("--target-minutes", type=float, default=5.0)
    ap.add_argument("--data-minutes", type=float, default=0.8)
    ap.add_argument("--eagle1-minutes", type=float, default=0.9)
    ap.add_argument("--eagle3-minutes", type=float, default=0.9)
    ap.add_argument("--reserve-minutes", type=float, default=3.0, help="kept for the stages after the target")
    ap.add_argument("--chat-ratio", type=float, default=0.005, help="share of target rows from chat examples")
    ap.add_argument("--sequences", type=int, default=8192, help="head data: sequences of 256 tokens")
    ap.add_argument("--data-batch", type=int, default=512, help="head data: prompts continued together")
    ap.add_argument("--head-batch", type=int, default=32)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--draft-vocab", type=int, default=4096, help="EAGLE-3 draft vocabulary (of 8192)")
    ap.add_argument("--target-dir", type=Path, default=None, help="skip target training: heads for this export")
    ap.add_argument("--threads", type=int, default=0, help="CPU: torch threads (default: the cores, up to 8)")
    ap.add_argument("--head-tokens", type=Path, default=None,
                    help="head data's token rows: read when the file exists (made for this same target), else "
                         "written after generating them, for a later run")
    ap.add_argument("--init-heads", type=Path, default=None,
                    help="warm start: DIR/eagle1 and DIR/eagle3, heads exported for this target, trained further")
    ap.add_argument("--save-every", type=float, default=0.0,
                    help="minutes between exports of a head under training into OUT/partial/ (0: only at the end), "
                         "so a run stopped from outside keeps its progress (a CPU run across sessions)")
    ap.add_argument("--heads", nargs="+", default=["eagle1", "eagle3"], choices=["eagle1", "eagle3"],
                    help="head families to train (two CPU runs can train one each, side by side)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["bpb_before", "target_after"],
                    help="measurements to leave out (a CPU run of the heads for an export measured already)")
    if "--smoke" in (sys.argv[1:] if argv is None else argv):  # tiny budgets unless given explicitly
        ap.set_defaults(device="cpu", minutes=3.0, target_minutes=0.3, data_minutes=0.3, eagle1_minutes=0.15,
                        eagle3_minutes=0.15, reserve_minutes=1.0, sequences=24, data_batch=12, head_batch=4)
    args = ap.parse_args(argv)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else Path(tempfile.mkdtemp(prefix="gpu_pair-")))
    args.out = out
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    carried.check(args.carry)
    args.out.mkdir(parents=True, exist_ok=True)
    clock = Clock(args.minutes)
    if args.device == "cpu":
        torch.set_num_threads(args.threads or (max(1, min(8, os.cpu_count() or 1)) if not args.smoke else 1))
    work = Path(tempfile.mkdtemp(prefix="pair2-"))
    ctx: dict = {"work": work}
    report = Report(args.out, args)
    log(f"device {args.device}, carry {args.carry}, out {args.out}, work {work}")
    if not report.stage("load", lambda: load_stage(ctx, args)):
        return 1
    if "bpb_before" not in args.skip:
        report.stage("bpb_before", lambda: bpb_stage(ROOT / "assets" / "tiny-target", ctx["heldout"], args.device))
    train = (lambda: given_target(ctx, args)) if args.target_dir else (lambda: target_stage(ctx, args, clock))
    if not report.stage("target", train):
        return 1
    if "target_after" not in args.skip:
        report.stage("target_after", lambda: after_stage(ctx, args))
    if report.stage("head_data", lambda: data_stage(ctx, args, clock)):
        for family in args.heads:
            report.stage(family, lambda f=family: head_stage(ctx, args, clock, f))
        report.stage("pack", lambda: pack_heads(ctx, args))
    report.stage("check", lambda: check_stage(ctx, args))
    failed = [k for k, v in report.data.items() if isinstance(v, dict) and "error" in v]
    report.data["failed_stages"] = failed
    report.data["total_seconds"] = round(time.perf_counter() - clock.t0, 1)
    report.write()
    log(f"done in {report.data['total_seconds']:.0f} s; results in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
