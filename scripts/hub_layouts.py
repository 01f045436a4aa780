"""Repo layouts that test which files the loader fetches from a Hub, committed as git repos for olah's mirrors path.

`build_layouts(mirrors)` adds them next to `hub_mirror.build_repos`' pair (tests/test_hub_server.py serves both with
one olah). Every weight file is a real file of its format (safetensors, or a state dict written by torch.save), so
what the server lists and sends is what a real repo of that shape would hold:

- local/both-weights: the shipped target plus pytorch_model.bin, training_args.bin, README.md and
  original/consolidated.pth (safetensors must win; the rest must never be fetched; no tokenizer for a draft);
- local/sharded-extra: config + model.safetensors.index.json naming two shards, plus consolidated.safetensors
  that the index does not name;
- local/escaping-index: an index whose weight_map names ../x.safetensors;
- local/odd-names: weights only under names that are not plain top-level files (sub/, a backslash, a colon) next
  to one plain weights.safetensors;
- local/no-weights (config + README), local/no-config (weights + sub/config.json);
- tinybare: a legacy bare repo name (no owner), the shipped draft;
- datasets/local/chat-data: a dataset repo, asked for as a model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hub_mirror import ASSETS, ORG, _commit_folder, _git


def _tensors(path: Path, **shapes: tuple[int, ...]) -> None:
    import torch
    from safetensors.torch import save_file

    save_file({name: torch.full(shape, 0.5) for name, shape in shapes.items()}, str(path), metadata={"format": "pt"})


def _state_dict(path: Path, **shapes: tuple[int, ...]) -> None:
    import torch

    torch.save({name: torch.full(shape, 0.5) for name, shape in shapes.items()}, str(path))


def _repo(mirrors: Path, name: str, files: dict[str, object], kind: str = "models") -> Path:
    """A git repo at mirrors/KIND/NAME holding `files` ({relative path: text, bytes, or a writer(path)})."""
    repo = mirrors / kind / name
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q", "-b", "main")
    for rel, content in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(str(content), encoding="utf-8")
    _commit_folder(repo, None, f"the {name} layout")
    return repo


def build_layouts(mirrors: Path) -> None:
    """The repos above under `mirrors` (olah's mirrors path); once per folder."""
    mirrors = Path(mirrors)
    if (mirrors / "models" / ORG / "both-weights").exists():
        return
    config = (ASSETS / "tiny-target" / "config.json").read_text(encoding="utf-8")
    both = _repo(mirrors, f"{ORG}/both-weights", {
        "pytorch_model.bin": lambda p: _state_dict(p, **{"lm_head.weight": (4, 4)}),
        "training_args.bin": lambda p: _state_dict(p, steps=(1,)),
        "README.md": "a target with both weight formats\n",
        "original/consolidated.pth": lambda p: _state_dict(p, w=(64, 64)),
    })
    for file in (ASSETS / "tiny-target").iterdir():
        shutil.copy2(file, both / file.name)
    _commit_folder(both, None, "the shipped target next to the others")
    index = {"metadata": {"total_size": 64}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                            "b": "model-00002-of-00002.safetensors"}}
    _repo(mirrors, f"{ORG}/sharded-extra", {
        "config.json": config, "model.safetensors.index.json": json.dumps(index),
        "model-00001-of-00002.safetensors": lambda p: _tensors(p, a=(4,)),
        "model-00002-of-00002.safetensors": lambda p: _tensors(p, b=(4,)),
        "consolidated.safetensors": lambda p: _tensors(p, a=(4,), b=(4,)),
    })
    _repo(mirrors, f"{ORG}/escaping-index", {
        "config.json": config,
        "model.safetensors.index.json": json.dumps({"weight_map": {"a": "../x.safetensors"}}),
        "x.safetensors": lambda p: _tensors(p, a=(4,)),
    })
    _repo(mirrors, f"{ORG}/odd-names", {
        "config.json": config, "weights.safetensors": lambda p: _tensors(p, a=(4,)),
        "sub/x.safetensors": lambda p: _tensors(p, a=(4,)),
        "..\\evil.safetensors": lambda p: _tensors(p, a=(4,)),
        "c:evil.safetensors": lambda p: _tensors(p, a=(4,)),
    })
    _repo(mirrors, f"{ORG}/no-weights", {"config.json": config, "README.md": "configs only\n"})
    _repo(mirrors, f"{ORG}/no-config", {"sub/config.json": config,
                                        "model.safetensors": lambda p: _tensors(p, a=(4,))})
    _repo(mirrors, "tinybare", {name: (ASSETS / "tiny-eagle1" / name).read_bytes()
                                for name in ("config.json", "pytorch_model.bin")})
    _repo(mirrors, f"{ORG}/chat-data", {"data.jsonl": '{"text": "hello"}\n'}, kind="datasets")
