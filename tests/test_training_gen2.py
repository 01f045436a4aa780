"""Second-generation training pipeline: the ``code`` tokenizer split, the corpus rules, the bits-per-byte
scorer and the resumable target trainer (tiny shapes, CPU, seconds)."""

from __future__ import annotations

import json
import math
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import pre_tokenizers, trainers

from eagle_demo.training import packages, target2
from eagle_demo.training.bpb import file_nats
from eagle_demo.training.corpus import _dedup
from eagle_demo.training.tokenizer import build_tokenizer, glued_line_breaks

CODE = ("def f(x):\n    return x  # done\n\n\n\tif a:\r\n        b = [1, 2]   \n"
        "class Stack:\n    \"\"\"A stack.\"\"\"\n\n    def push(self, item):\n        self.items.append(item)\n")


def _pieces(split: str, text: str) -> list[str]:
    return [p for p, _ in build_tokenizer(split).pre_tokenizer.pre_tokenize_str(text)]


def test_code_split_keeps_line_breaks_and_indentation_apart():
    pieces = _pieces("code", CODE)
    assert all(p in ("Ċ", "čĊ") for p in pieces if "Ċ" in p), [p for p in pieces if "Ċ" in p]
    i = pieces.index("):")
    assert pieces[i:i + 3] == ["):", "Ċ", "ĠĠĠĠ"]  # ':' | '\n' | the whole indentation | 'return'
    assert pieces[i + 3] == "return"
    assert "ĠĠĠĠĠĠĠĠ" in pieces and "ĉ" in pieces  # eight-space and tab indentation, each one piece
    # the first generation's split glues the line break to the indentation; the check above would fail on it
    assert any(p.startswith("Ċ") and len(p) > 1 for p in _pieces("gpt2", CODE))


def _stdlib_sample() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [(root / name).read_text(encoding="utf-8") for name in ("textwrap.py", "bisect.py", "heapq.py", "shlex.py")]


def _train(split: str, vocab: int = 700):
    tok = build_tokenizer(split)
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_stdlib_sample(), trainer=trainer)
    return tok


def test_trained_code_tokenizer_never_glues_a_line_break():
    code = _train("code")
    assert glued_line_breaks(code) == []
    assert glued_line_breaks(_train("gpt2")) != []  # the checker sees the first generation's "\n    " tokens
    prompt, body = "def f(x):\n", "    return x + 1\n"
    a = code.encode(prompt, add_special_tokens=False).ids
    b = code.encode(prompt + body, add_special_tokens=False).ids
    assert b[:len(a)] == a  # a prompt ending in ':\n' is a token prefix of its indented continuation
    assert code.decode([b[len(a)]]).strip(" ") == ""  # and the next token is indentation only
    assert code.decode([b[len(a)]]) == "    "


def test_package_list_is_large_permissive_and_holds_out_whole_packages():
    names = [p.name for p in packages.PACKAGES]
    assert len(names) == len(set(names)) and len(names) >= 30
    assert all(p.licence in ("MIT", "BSD", "Apache", "PSF") for p in packages.PACKAGES)
    held = [p for p in packages.PACKAGES if p.holdout]
    assert 3 <= len(held) < len(names) // 4
    assert packages.licence_matches("BSD", "License :: OSI Approved :: BSD License")
    assert not packages.licence_matches("MIT", "GPL-3.0-or-later")


def test_file_filters_and_exact_dedup():
    assert not packages._usable("pip/_vendor/rich/text.py", "x = 1\n")
    assert not packages._usable("pkg/table.py", "x = '" + "a" * 2000 + "'\n")
    assert not packages._usable("pkg/empty.py", "\n\n")
    assert packages._usable("pkg/mod.py", "def f():\n    return 1\n")
    seen: set[str] = set()
    val, dropped = _dedup([("v/a.py", "A\n"), ("v/b.py", "B\n")], seen)
    train, dropped = _dedup([("t/a.py", "A\n"), ("t/c.py", "C\n"), ("t/c2.py", "C\n")], seen)
    assert [n for n, _ in val] == ["v/a.py", "v/b.py"]
    assert [n for n, _ in train] == ["t/c.py"] and dropped == 2  # the validation copy wins


def _tiny_llama(vocab: int = 97):
    torch.manual_seed(0)
    return target2.build_model(vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               num_key_value_heads=1, intermediate_size=64).eval()


def test_file_nats_scores_every_token_once_within_its_window():
    model = _tiny_llama()
    ids = torch.randint(1, 97, (23,)).tolist()
    with torch.inference_mode():
        full = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0], -1)  # [23, V]
    expect = -sum(full[i, ids[i + 1]].item() for i in range(22))
    assert math.isclose(file_nats(model, ids, window=64), expect, rel_tol=1e-5)
    # windows of 8 overlapping by one token: each window restarts its context
    manual = 0.0
    for s in range(0, 22, 8):
        w = ids[s:s + 9]
        with torch.inference_mode():
            lp = torch.log_softmax(model(input_ids=torch.tensor([w])).logits[0], -1)
        manual -= sum(lp[i, w[i + 1]].item() for i in range(len(w) - 1))
    assert math.isclose(file_nats(model, ids, window=8, batch=2), manual, rel_tol=1e-5)
    assert not math.isclose(manual, expect, rel_tol=1e-4)  # the window length matters: the check is not vacuous


def _tokens_dir(path: Path, vocab: int = 97) -> Path:
    path.mkdir(parents=True)
    rng = np.random.default_rng(0)
    rng.integers(1, vocab, 5000).astype("<u2").tofile(path / "train.u16")
    rng.integers(1, vocab, 600).astype("<u2").tofile(path / "val.u16")
    (path / "meta.json").write_text(json.dumps({"vocab_size": vocab}))
    return path


def _run(tokens: Path, ckpt: Path, steps: int, monkeypatch) -> dict:
    monkeypatch.setattr(target2, "SHAPE", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                               num_key_value_heads=1, intermediate_size=64))
    target2.main(["train", "--tokens", str(tokens), "--ckpt-dir", str(ckpt), "--steps", str(steps),
                  "--batch-size", "2", "--seq-len", "16", "--eval-every", "3", "--device", "cpu"])
    return torch.load(ckpt / "last.pt", weights_only=False)


@pytest.mark.parametrize("split_at", [3])
def test_train_resumes_exactly(tmp_path, monkeypatch, split_at):
    tokens = _tokens_dir(tmp_path / "tokens")
    straight = _run(tokens, tmp_path / "a", 6, monkeypatch)
    _run(tokens, tmp_path / "b", split_at, monkeypatch)
    resumed = _run(tokens, tmp_path / "b", 6, monkeypatch)
    assert resumed["state"]["step"] == straight["state"]["step"] == 6
    for key in ("model", "ema"):
        for name, value in straight[key].items():
            assert torch.equal(value, resumed[key][name]), (key, name)
    assert [r["val_loss"] for r in straight["state"]["log"]] == [r["val_loss"] for r in resumed["state"]["log"]]
