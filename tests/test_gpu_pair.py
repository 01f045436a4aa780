"""scripts/gpu_pair.py, the second generation's one GPU run, smoke-run on the CPU over a tiny carried folder
built here (a small code tokenizer, standard-library files, one reST page): every stage ends, and the pair it
exports loads through the loader in its public layouts and decodes exactly like plain greedy decoding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import pre_tokenizers, processors, trainers

from eagle_demo.training import carry, target_budget
from eagle_demo.training.corpus import join_documents
from eagle_demo.training.target2 import write_tokens
from eagle_demo.training.tokenizer import build_tokenizer, save_tokenizer

ROOT = Path(__file__).resolve().parents[1]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
TRAIN = ("textwrap.py", "bisect.py", "heapq.py", "shlex.py", "fnmatch.py", "glob.py", "string.py", "queue.py")
VAL = ("colorsys.py", "keyword.py")
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64)


def _rst() -> str:
    sections = []
    for i, topic in enumerate(("Lists", "Tuples", "Sets", "Dictionaries", "Strings", "Files")):
        sections.append(f"Working with {topic}\n{'=' * (13 + len(topic))}\n\nThe {topic.lower()} section explains "
                        f"how {topic.lower()} behave in Python programs, with examples and notes number {i}.\n")
    return "\n".join(sections)


def _tiny_carry(root: Path) -> Path:
    corpus = root / "corpus2"
    corpus.mkdir()
    train = [(f"stdlib/{n}", (STDLIB / n).read_text()) for n in TRAIN]
    train.append(("pydoc/_sources/tutorial/tiny.rst.txt", _rst()))
    val = [(f"pypi/{n[:-3]}/{n}", (STDLIB / n).read_text()) for n in VAL]
    for split, docs in (("train", train), ("val", val)):
        (corpus / f"{split}.txt").write_text(join_documents(docs), encoding="utf-8")
    (corpus / "manifest.json").write_text(json.dumps({"files": {"train": [n for n, _ in train],
                                                                "val": [n for n, _ in val]}}))
    tok = build_tokenizer("code")
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([t for _, t in train], trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|endoftext|>:0 $A:0",
                                                       special_tokens=[("<|endoftext|>", 0)])
    save_tokenizer(tok, root / "tokenizer")
    write_tokens(corpus, root / "tokenizer", root / "tokens")
    sizes = carry.prepare(root / "carry", corpus, root / "tokenizer", root / "tokens", chat_examples=50)
    assert sizes["total_mib"] < 1
    raw = np.fromfile(root / "tokens" / "train.u16", dtype="<u2")
    assert torch.equal(carry.load_tokens(root / "carry", "train"), torch.from_numpy(raw).long())
    return root / "carry"


@pytest.fixture(scope="module")
def carried(tmp_path_factory):
    return _tiny_carry(tmp_path_factory.mktemp("carry"))


def test_head_data_prompts_end_where_their_kind_says(carried):
    from tokenizers import Tokenizer

    from eagle_demo.training.head_data import PREFIX, prompts, special_ids

    tok = Tokenizer.from_file(str(carried / "tokenizer-code" / "tokenizer.json"))
    stream = carry.load_tokens(carried, "train")
    spans = carry.document_spans(stream, carry.manifest_names(carried, "train"))
    questions = [e.question for e in carry.load_chat(carried)]
    rows = prompts(stream, spans, tok, questions, {"code": 20, "docstring": 10, "prose": 10, "chat": 3}, seed=5)
    assert [k for k, _ in rows].count("code") == 20 and [k for k, _ in rows].count("chat") == 3
    breaks, quotes = special_ids(tok)
    for kind, ids in rows:
        assert 0 < len(ids) <= PREFIX and 0 not in ids[1:], (kind, ids)  # inside one document
        if kind in ("code", "prose"):
            assert ids[-1] in breaks and tok.decode(ids).endswith("\n")
        elif kind == "docstring":
            assert ids[-1] in quotes and tok.decode(ids).endswith('"""')
        else:
            assert tok.decode(ids).startswith("Question: ") and tok.decode(ids).endswith("\nAnswer:")
    assert prompts(stream, spans, tok, questions, {"code": 20}, seed=5) == [r for r in rows if r[0] == "code"]


@pytest.mark.slow
def test_smoke_pipeline_exports_a_lossless_pair(carried, tmp_path):
    from eagle_demo.common.config import RunConfig, TreeConfig
    from eagle_demo.decoding.metrics import summarize
    from eagle_demo.session import load_session

    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    rows = tmp_path / "head_tokens.pt"
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_pair.py"), "--smoke", "--carry", str(carried), "--out", str(out),
           "--target-minutes", "0.05", "--data-minutes", "0.05", "--eagle1-minutes", "0.03", "--eagle3-minutes", "0.03",
           "--head-tokens", str(rows)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for stage in ("load", "bpb_before", "target", "target_after", "head_data", "eagle1", "eagle3", "check"):
        assert "error" not in summary[stage], (stage, summary[stage])
    assert summary["target"]["steps"] > 0 and summary["target"]["tokens"] > 0
    assert summary["load"]["chat_examples"] == 6 and summary["head_data"]["generated"]["chat"] > 0
    pair = tmp_path / "pair"
    for name in ("target2.tar", "heads.tar"):
        with tarfile.open(out / name) as tar:
            tar.extractall(pair, filter="data")
    assert json.loads((pair / "target2" / "tokenizer_config.json").read_text())["chat_template"]
    for family in ("eagle1", "eagle3"):
        session = load_session(str(pair / "target2"), str(pair / family), device="cpu", dtype="float32")
        assert (session.report.family, session.report.source_layout) == (family, f"yuhuili-{family}")
        assert session.has_chat_template
        for prompt, chat in (("def f(x):\n", False), ("What is a list?", True)):
            ids = session.encode(prompt, chat=chat)
            run = RunConfig(max_new_tokens=24, tree=TreeConfig(depth=4, top_k=3, total_tokens=10))
            eagle = summarize(session.stream(ids, run, "eagle"))
            assert eagle.token_ids == summarize(session.stream(ids, run, "baseline")).token_ids
            assert len(eagle.token_ids) == 24
    _heads_trained_further(carried, tmp_path, env, pair, rows, summary)


def _heads_trained_further(carried, tmp_path, env, pair, rows, first):
    """A later run of the heads only: the saved head-data rows are read back (no generation) and both heads
    start from the exported ones; the check stage still finds them lossless. A file made for another target is
    refused in one line."""
    out = tmp_path / "again"
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_pair.py"), "--smoke", "--carry", str(carried), "--out", str(out),
           "--target-dir", str(pair / "target2"), "--skip", "bpb_before", "target_after", "--head-tokens", str(rows),
           "--init-heads", str(pair), "--eagle1-minutes", "0.03", "--eagle3-minutes", "0.03",
           "--save-every", "0.0002"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    summary = json.loads((out / "summary.json").read_text())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert summary["head_data"]["read_from"] == str(rows)
    assert summary["head_data"]["sequences"] == first["head_data"]["sequences"]
    assert summary["eagle1"]["init"] == str(pair / "eagle1") and summary["eagle3"]["init"] == str(pair / "eagle3")
    assert summary["eagle3"]["draft_vocab"] == first["eagle3"]["draft_vocab"]
    assert "error" not in summary["check"], summary["check"]
    for family in ("eagle1", "eagle3"):  # exported while training too (--save-every), with the log so far
        assert (out / "partial" / family / "pytorch_model.bin").is_file()
        assert json.loads((out / "partial" / f"training_log_{family}.json").read_text())
    saved = torch.load(rows, weights_only=True)
    torch.save({**saved, "target": "0" * 16}, rows)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert "another target" in summary["head_data"]["error"] and "\n" not in summary["head_data"]["error"]


def test_batches_mix_chat_rows_at_the_asked_share():
    stream = torch.arange(100, 5100)  # [N] no document starts
    chat = torch.tensor([0, 7, 7, 7, 0, 8, 8, 0, 9, 9, 9, 9, 0])  # [M] three examples
    run = target_budget.TargetRun(seq_len=6, chat_ratio=0.1)
    batches = target_budget.Batches(stream, chat, run, "cpu")
    rows = torch.cat([batches.next(8) for _ in range(25)])  # [200, 7]
    from_chat = rows[(rows < 10).all(1)]
    assert len(from_chat) == 20  # exactly a tenth of the rows
    assert (from_chat[:, 0] == 0).all()  # each chat window starts at an example's <|endoftext|>
    assert not ((from_chat[:, 1:] == 0) & (from_chat[:, :-1] == 0)).any()  # one 0 between examples, wrap included
    assert {int(r[1]) for r in from_chat} == {7, 8, 9}
    plain = rows[(rows >= 100).all(1) & (rows[:, 1:] - rows[:, :-1] == 1).all(1)]
    assert len(plain) == 180


def test_lr_schedule_follows_the_clock():
    f = target_budget.lr_factor
    assert f(0, 0.0, 0.7) == pytest.approx(1 / target_budget.WARMUP_STEPS)
    assert f(500, 0.5, 0.7) == 1.0
    assert f(500, 0.85, 0.7) == pytest.approx(0.55)
    assert f(900, 1.0, 0.7) == pytest.approx(0.1) == f(900, 1.3, 0.7)


def test_budgeted_training_stops_on_time_and_keeps_leaf_weights():
    g = torch.Generator().manual_seed(0)
    stream, val = torch.randint(1, 97, (6000,), generator=g), torch.randint(1, 97, (700,), generator=g)
    run = target_budget.TargetRun(minutes=0.04, batch_sizes=(2, 4), seq_len=32, calibration_steps=2, eval_seconds=0.5)
    shape = TINY
    model, record = target_budget.train_target(stream, val, None, 97, run, "cpu", shape, say=lambda *a: None)
    assert 0.04 * 60 <= record["seconds"] < 0.04 * 60 + 1  # calibration included; stops at the first step past it
    assert record["steps"] > 2 * (1 + run.calibration_steps) and record["batch_size"] in (2, 4)
    assert record["exported"] in ("raw", "ema") or record["exported"].startswith("snapshot@")
    assert record["val_loss_fp32"][record["exported"]] == min(record["val_loss_fp32"].values())
    assert len(record["calibration"]) == 2
    assert all(p.is_leaf and p.grad_fn is None for p in model.parameters())  # the EMA never joined the graph


def test_budgeted_training_stops_at_max_epochs():
    g = torch.Generator().manual_seed(0)
    stream, val = torch.randint(1, 97, (6000,), generator=g), torch.randint(1, 97, (700,), generator=g)
    run = target_budget.TargetRun(minutes=1.0, batch_sizes=(2,), seq_len=32, calibration_steps=2, max_epochs=0.3)
    shape = TINY
    model, record = target_budget.train_target(stream, val, None, 97, run, "cpu", shape, say=lambda *a: None)
    assert 1800 <= record["tokens"] < 1800 + 2 * 32 and record["seconds"] < 30
