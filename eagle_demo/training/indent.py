"""Does a target continue a block opener (a prompt ending in ``:\\n``) with an indented line?

Usable on any target folder: the prompt is encoded with the folder's own tokenizer, the target continues
it greedily in fp32, and the first non-empty line of the continuation must be indented deeper than the
prompt's last line. Issue 22's first-generation target fails it (``def parse_args(argv):\\n`` was
continued with an unindented ``def``), because its tokenizer glues a line break to the indentation after
it.

    python -m eagle_demo.training.indent FOLDER [FOLDER ...]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

PROMPTS = ("def f(x):\n", "def parse_args(argv):\n", "class LRUCache:\n", "for item in items:\n",
           "if __name__ == \"__main__\":\n", "    def __init__(self, size):\n")


@dataclass(frozen=True)
class IndentResult:
    prompt: str
    continuation: str
    first_line: str
    indented: bool


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def first_line_indented(prompt: str, continuation: str) -> tuple[str, bool]:
    """The first non-blank line of ``continuation`` and whether it is indented deeper than the prompt's
    last non-blank line (a continuation that stays on the prompt's own line counts as not indented)."""
    if not prompt.endswith("\n") or not prompt.strip():
        raise ValueError("the prompt must be a line ending with a line break")
    opener = [line for line in prompt.split("\n") if line.strip()][-1]
    line = next((line for line in continuation.split("\n") if line.strip()), "")
    return line, bool(line) and indent_of(line) > indent_of(opener)


@torch.inference_mode()
def greedy_continuations(folder: Path, prompts, max_new_tokens: int) -> list[str]:
    """Load ``folder`` as a user would (its own tokenizer, fp32) and continue each prompt greedily; the
    continuations alone, decoded without special tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    out = []
    for prompt in prompts:
        enc = tok(prompt, return_tensors="pt")
        ids = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
        out.append(tok.decode(ids[0, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return out


def check_folder(folder: Path, prompts=PROMPTS, max_new_tokens: int = 12) -> list[IndentResult]:
    out = []
    for prompt, text in zip(prompts, greedy_continuations(folder, prompts, max_new_tokens)):
        line, ok = first_line_indented(prompt, text)
        out.append(IndentResult(prompt, text, line, ok))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.indent", description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    for folder in args.folders:
        rows = check_folder(folder)
        print(json.dumps({"folder": str(folder), "indented": sum(r.indented for r in rows), "of": len(rows),
                          "results": [asdict(r) for r in rows]}, indent=1))


if __name__ == "__main__":
    main()
