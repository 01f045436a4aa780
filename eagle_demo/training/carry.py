"""The folder a GPU run of the second-generation pair reads (``scripts/gpu_pair.py``), prepared here.

The folder travels to the GPU machine beside the repository, so it is kept under :data:`CARRY_LIMIT`: the
training split's tokens (58 MB raw) go xz-compressed. It holds (about 19 MiB)::

    tokens/train.u16.xz   the training split's tokens, raw little-endian uint16, xz-compressed (16 MB)
    tokens/val.u16        the held-out packages' tokens, raw (1 MB)
    tokens/meta.json      document and token counts, the tokenizer's hash
    tokenizer-code/       the code tokenizer (tokenizer.json, tokenizer_config.json, special_tokens_map.json)
    corpus/val.txt        the held-out files' text, for bits per byte (eagle_demo.training.bpb)
    corpus/manifest.json  corpus2's manifest: file names of both splits, in token-stream order
    chat.jsonl            the instruction-style examples of eagle_demo.training.chat

    python -m eagle_demo.training.carry --out out/pair2     # from ~/.cache/eagle_demo/{corpus2,train2,tokenizer-code}
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
from pathlib import Path

import numpy as np
import torch

from eagle_demo.training.chat import build_examples, corpus_docs, read_jsonl, write_jsonl
from eagle_demo.training.tokenizer import TOKENIZER_FILES

CARRY_LIMIT = 36 * 2**20  # the folder's cap: 36 MiB, about twice what it holds (docs/perf-history.md says why)
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CARRY = REPO_ROOT / "out" / "pair2"


def prepare(dest: Path, corpus: Path, tokenizer: Path, tokens: Path, chat_examples: int) -> dict:
    """Write the carried folder; returns the size of each file. Refuses a folder over :data:`CARRY_LIMIT`."""
    (dest / "tokens").mkdir(parents=True, exist_ok=True)
    (dest / "corpus").mkdir(exist_ok=True)
    (dest / "tokenizer-code").mkdir(exist_ok=True)
    with open(tokens / "train.u16", "rb") as src, lzma.open(dest / "tokens" / "train.u16.xz", "wb", preset=6) as out:
        shutil.copyfileobj(src, out, 2**22)
    for name in ("val.u16", "meta.json"):
        shutil.copy2(tokens / name, dest / "tokens" / name)
    for name in TOKENIZER_FILES:
        shutil.copy2(tokenizer / name, dest / "tokenizer-code" / name)
    for name in ("val.txt", "manifest.json"):
        shutil.copy2(corpus / name, dest / "corpus" / name)
    write_jsonl(build_examples(corpus_docs(corpus), chat_examples), dest / "chat.jsonl")
    sizes = {str(p.relative_to(dest)): p.stat().st_size for p in sorted(dest.rglob("*")) if p.is_file()}
    total = sum(sizes.values())
    if total > CARRY_LIMIT:
        raise SystemExit(f"{dest} holds {total / 2**20:.1f} MiB (> {CARRY_LIMIT / 2**20:.0f} MiB): carry less")
    return {"files": sizes, "total_mib": round(total / 2**20, 2)}


def check(carry: Path) -> None:
    """One-line error naming what is missing from a carried folder."""
    need = ["tokens/train.u16.xz", "tokens/val.u16", "tokens/meta.json", "corpus/val.txt", "corpus/manifest.json",
            "chat.jsonl"] + [f"tokenizer-code/{n}" for n in TOKENIZER_FILES]
    missing = [n for n in need if not (carry / n).is_file()]
    if missing:
        raise SystemExit(f"{carry} lacks {', '.join(missing)}; run python -m eagle_demo.training.carry --out {carry}")


def load_tokens(carry: Path, split: str) -> torch.Tensor:
    """The split's token stream ``[0, doc_1..., 0, doc_2..., ...]`` as int64."""
    path = carry / "tokens" / f"{split}.u16"
    raw = lzma.open(path.with_suffix(".u16.xz")).read() if split == "train" else path.read_bytes()
    return torch.from_numpy(np.frombuffer(raw, dtype="<u2").astype(np.int64))  # [N]


def document_spans(stream: torch.Tensor, names: list[str]) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of each document in a stream; ``start`` is its leading ``<|endoftext|>``."""
    starts = (stream == 0).nonzero().flatten().tolist()
    if len(starts) != len(names):
        raise SystemExit(f"the token stream holds {len(starts)} documents, the manifest names {len(names)}; "
                         "rebuild the tokens (python -m eagle_demo.training.target2 tokens)")
    ends = starts[1:] + [stream.numel()]
    return list(zip(names, starts, ends))


def manifest_names(carry: Path, split: str) -> list[str]:
    return json.loads((carry / "corpus" / "manifest.json").read_text())["files"][split]


def load_chat(carry: Path):
    return read_jsonl(carry / "chat.jsonl")


def main(argv: list[str] | None = None) -> None:
    from eagle_demo.training.chat import N_EXAMPLES
    from eagle_demo.training.target2 import default_corpus, default_tokenizer, train_root

    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.carry", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_CARRY)
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--tokenizer", type=Path, default=default_tokenizer())
    ap.add_argument("--tokens", type=Path, default=train_root() / "tokens")
    ap.add_argument("--chat-examples", type=int, default=N_EXAMPLES)
    args = ap.parse_args(argv)
    print(json.dumps(prepare(args.out, args.corpus, args.tokenizer, args.tokens, args.chat_examples), indent=1))


if __name__ == "__main__":
    main()
