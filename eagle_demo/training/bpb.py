"""Bits per byte of causal LMs on the held-out packages of ``corpus2``, comparable across tokenizers.

For every held-out file: ``ids = [<|endoftext|>] + tokenizer(text)``. The ids are cut into consecutive
windows that overlap by one token (``ids[0:W+1]``, ``ids[W:2W+1]``, ...); each window is one forward and
scores its tokens after the first, so every token of the file except the leading ``<|endoftext|>`` is
scored exactly once, seeing the earlier tokens of its own window (at most ``W`` of them). Then::

    bits per byte = (sum of -ln p(token) over all scored tokens) / (ln 2 x sum of UTF-8 bytes of the files)

The byte count does not depend on the tokenizer, so models with different vocabularies compare on the
same footing. ``W`` defaults to 256, the training length of both generations. Run::

    python -m eagle_demo.training.bpb assets/tiny-target ~/.cache/eagle_demo/exports/target2 [--json FILE]

It prints the total and the figure per held-out package (fp32, CPU or the given device).
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F

from eagle_demo.training.corpus import read_split

WINDOW = 256


@torch.inference_mode()
def file_nats(model, ids: list[int], window: int = WINDOW, batch: int = 16) -> float:
    """Sum of -ln p over ``ids[1:]`` given the earlier ids of the same window (see the module doc)."""
    rows = [ids[s:s + window + 1] for s in range(0, len(ids) - 1, window)]
    device = next(model.parameters()).device
    total = 0.0
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        width = max(len(r) for r in chunk)
        x = torch.zeros(len(chunk), width, dtype=torch.long)  # [b, w] right-padded
        mask = torch.zeros(len(chunk), width, dtype=torch.bool)
        for j, r in enumerate(chunk):
            x[j, :len(r)] = torch.tensor(r)
            mask[j, :len(r)] = True
        x, mask = x.to(device), mask.to(device)
        logits = model(input_ids=x[:, :-1], use_cache=False).logits.float()  # [b, w-1, V]
        nll = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")  # [b, w-1]
        total += (nll * mask[:, 1:]).sum().item()
    return total


def heldout_files(corpus: Path) -> list[tuple[str, str]]:
    """``(package, text)`` of the validation split, in order (names from the corpus manifest)."""
    docs = read_split(corpus / "val.txt")
    names = json.loads((corpus / "manifest.json").read_text())["files"]["val"]
    if len(names) != len(docs):
        raise SystemExit(f"{corpus}: manifest lists {len(names)} validation files, val.txt has {len(docs)}; "
                         f"rebuild with python -m eagle_demo.training.corpus --generation 2")
    return [(n.split("/")[1], d) for n, d in zip(names, docs)]


def bits_per_byte(folder: Path, files: list[tuple[str, str]], window: int = WINDOW, device: str = "cpu") -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).to(device).eval()
    nats, nbytes, ntok = defaultdict(float), defaultdict(int), 0
    for package, text in files:
        ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
        nats[package] += file_nats(model, ids, window)
        nbytes[package] += len(text.encode("utf-8"))
        ntok += len(ids) - 1
    total_nats, total_bytes = sum(nats.values()), sum(nbytes.values())
    return {"model": str(folder), "bits_per_byte": round(total_nats / (math.log(2) * total_bytes), 4),
            "nats_per_token": round(total_nats / ntok, 4), "tokens": ntok, "bytes": total_bytes,
            "window": window,
            "per_package": {p: round(nats[p] / (math.log(2) * nbytes[p]), 4) for p in sorted(nats)}}


def main(argv: list[str] | None = None) -> None:
    from eagle_demo.training.target2 import default_corpus

    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.bpb", description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--window", type=int, default=WINDOW)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    files = heldout_files(args.corpus)
    rows = []
    for folder in args.models:
        rows.append(bits_per_byte(folder, files, args.window))
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
