"""Where acceptance falls, in the benchmark, by context length (`sweep_context`: each prompt run after 128, 512,
... tokens of real text of its own kind).

The filler text is on this machine in any Python install: for the `code` category the standard library's own
source files (sorted by name), for every other category prose, the standard library's module docstrings (the same
files, `ast.get_docstring`, paragraphs joined by blank lines): English about Python, the suite's subject. Each
prompt is the filler's first tokens, a blank line, then the prompt, so the continuation still answers the prompt.
"""

from __future__ import annotations

import ast
import functools
import sysconfig
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..common.config import ConfigError, RunConfig
from .report import BenchReport, PromptItem

__all__ = ["filler_text", "context_ids", "sweep_context", "CONTEXT_LENGTHS", "check_lengths"]

CONTEXT_LENGTHS = (128, 512, 1536)  # the shipped target's window is 2048 positions


@functools.lru_cache(maxsize=2)
def filler_text(kind: str, chars: int = 200_000) -> str:
    """About `chars` characters of real text: the standard library's source ("code") or its docstrings ("prose")."""
    out, size = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if kind != "code":
            try:
                text = ast.get_docstring(ast.parse(text)) or ""
            except (SyntaxError, ValueError):
                text = ""
        if text.strip():
            out.append(text.strip())
            size += len(out[-1])
        if size >= chars:
            break
    return "\n\n".join(out)


def context_ids(session, item: PromptItem, length: int, chat: bool) -> list[int]:
    """The item's prompt after filler of its kind, `length` tokens in all (or the prompt alone, if longer)."""
    prompt = session.encode(item.prompt, chat=chat)
    kind = "code" if item.category == "code" else "prose"
    filler = session.pair.tokenizer(filler_text(kind), verbose=False)["input_ids"]
    room = length - len(prompt)
    ids = prompt
    for _ in range(4):  # the text re-encodes to a slightly different count: settle on the length
        if room <= 0:
            return ids
        text = session.decode(filler[:room]) + "\n\n" + item.prompt
        ids = session.encode(text, chat=chat)
        if len(ids) == length:
            return ids
        room += length - len(ids)
    return ids[-length:] if len(ids) > length else ids


def check_lengths(session, lengths: list[int], run: RunConfig) -> None:
    """Every length plus the run's new tokens and a round's widest verify within the target's window."""
    window = getattr(session.pair.target.config.get_text_config(), "max_position_embeddings", None) or 0
    for n in lengths:
        if n < 1:
            raise ConfigError(f"context length {n} is not positive; give lengths such as 128 512 1536")
        need = n + run.max_new_tokens + run.tree.total_tokens
        if window and need > window:
            most = window - run.max_new_tokens - run.tree.total_tokens
            raise ConfigError(f"context length {n} + {run.max_new_tokens} new tokens passes the target's window of "
                              f"{window} positions; use lengths up to {most}")


def sweep_context(session, items: list[PromptItem], run: RunConfig, lengths: list[int], repeats: int = 1,
                  chat: bool = False, progress: Callable[[int, int, str], None] | None = None) -> list[BenchReport]:
    """`bench.run.run_bench` at each context length: tau and speedup as the context grows. One report per length,
    `settings["context_tokens"]` its length and `settings["context_mean"]` the prompts' mean length in tokens."""
    from .run import run_bench

    check_lengths(session, lengths, run)
    reports, per = [], len(items) * repeats
    for n, length in enumerate(lengths):
        encoded = [context_ids(session, item, length, chat) for item in items]

        def step(done: int, _total: int, name: str, offset=n * per, length=length) -> None:
            if progress:
                progress(offset + done, len(lengths) * per, f"{length} tokens: {name}")
        report = run_bench(session, items, run, repeats=repeats, chat=chat, progress=step, encoded=encoded)
        mean = sum(map(len, encoded)) / len(encoded)
        reports.append(replace(report, settings={**report.settings, "context_tokens": length,
                                                 "context_mean": round(mean, 1)}))
    return reports
