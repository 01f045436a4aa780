"""A draft's hot vocabulary (`TreeConfig.hot_vocab`): the first N token ids plus every id of the run's own context.

A draft head whose logits are the target's lm_head (EAGLE-1/2) reads all V rows of it at every draft depth. FR-Spec
keeps the most frequent ids only; a BPE tokenizer numbers its merges in the order it learned them, so the first N
ids stand in for them. Frequent in the training text is not frequent in this text: a prompt's identifiers are often
late merges, and the continuation repeats them. So the table also takes every id that enters the draft's context
(the prompt, then each round's committed tokens), as it arrives. On the shipped pair, 6.7% of the target's tokens on
ten fresh prompts lie outside the first 2048 ids, 0.9% outside them and the context before them (docs/perf-history.md).

The table keeps its rows in the lm_head's own layout (column-major on a CPU, `cpu_layout`) in a buffer that grows by
doubling; `ids` maps a row to its token id. Log-probabilities are normalised over the table. The target verifies
over its whole vocabulary, so the output is the target's whatever the table holds.

`fixed=True` (the static path, whose CUDA graphs keep the addresses they were captured with): the buffer never
moves. Its room rows start zeroed and masked out by an additive row `hidden` [capacity]; a context id fills the next
room row and unmasks it in place, so a replayed graph sees it; ids past the room are left out; `clear` empties the
room for the next run. The top-k runs over every row, the masked ones adding nothing.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ..common.config import ConfigError
from ..drafts.base import shares_target_vocab, top_logp
from ..target.cpu_layout import is_column_major

__all__ = ["HotVocab", "hot_vocab_problem"]


def hot_vocab_problem(head, size: int | None = None) -> str:
    """Why a hot vocabulary (of `size` ids, when given) cannot serve this head ("" when it can): the table holds
    rows of the target's lm_head."""
    if not shares_target_vocab(head):
        return (f"a hot vocabulary needs a head whose logits are the target's lm_head (EAGLE-1/2); this "
                f"{head.family} head has its own vocabulary: use hot vocabulary 0 (--hot-vocab 0)")
    vocab = head.lm_head.module.weight.shape[0]
    if size is not None and not 2 <= size < vocab:
        return (f"hot vocabulary {size} is out of range; use 2 to {vocab - 1} (the vocabulary has {vocab} ids) or 0 "
                "for all of it")
    return ""


class HotVocab:
    @torch.no_grad()
    def __init__(self, head, size: int, room: int = 256, fixed: bool = False):
        """head: a head with `shares_target_vocab`; size: the first ids always in the table (2 <= size < V); room:
        rows for context ids before the buffer first grows (fixed: the most it ever holds)."""
        if problem := hot_vocab_problem(head, size):
            raise ConfigError(problem)
        self.head = head
        self.weight = head.lm_head.module.weight  # [V, H], the target's
        self.size, self.n = size, size
        self.column_major = is_column_major(self.weight)
        self._store = self._empty(size + room)
        self._rows_of(self._store)[:size] = self.weight[:size]
        self.ids = torch.arange(size + room, device=self.weight.device)  # [cap] row -> token id (past n: unused)
        self.present: set[int] = set()  # ids >= size held in the table
        self.fixed = fixed
        self.hidden: torch.Tensor | None = None  # fixed: [cap] additive, 0 on the rows in use, -inf on the rest
        if fixed:
            self._rows_of(self._store)[size:].zero_()
            self.hidden = self.weight.new_full((size + room,), float("-inf"))
            self.hidden[:size] = 0.0

    @torch.inference_mode()  # the drafter makes its tables in inference mode: their tensors change only in it
    def clear(self) -> None:
        """Drop every context id (a fixed table, between runs)."""
        self.n = self.size
        self.present.clear()
        if self.hidden is not None:
            self.hidden[self.size:] = float("-inf")

    def _empty(self, capacity: int) -> torch.Tensor:
        hidden = self.weight.shape[1]
        w = self.weight
        return w.new_empty(hidden, capacity) if self.column_major else w.new_empty(capacity, hidden)

    def _rows_of(self, store: torch.Tensor) -> torch.Tensor:
        return store.t() if self.column_major else store  # [cap, H]

    @property
    def rows(self) -> torch.Tensor:
        """[n, H] the table's lm_head rows."""
        return self._rows_of(self._store)[:self.n]

    @torch.inference_mode()
    def add(self, token_ids: list[int]) -> int:
        """Take every id of token_ids not yet in the table (in order of first appearance); returns how many."""
        new = [t for t in dict.fromkeys(token_ids) if t >= self.size and t not in self.present]
        if self.fixed:
            new = new[:self.ids.shape[0] - self.n]  # a fixed table never grows: what does not fit stays out
        if not new:
            return 0
        need = self.n + len(new)
        if need > self.ids.shape[0]:
            grown = self._empty(2 * need)
            self._rows_of(grown)[:self.n] = self.rows
            self._store = grown
            self.ids = torch.cat([self.ids[:self.n], torch.empty(2 * need - self.n, dtype=self.ids.dtype,
                                                                 device=self.ids.device)])
        index = torch.tensor(new, device=self.weight.device)  # [m]
        self._rows_of(self._store)[self.n:need] = self.weight[index]  # [m, H]
        self.ids[self.n:need] = index
        if self.hidden is not None:
            self.hidden[self.n:need] = 0.0
        self.n = need
        self.present.update(new)
        return len(new)

    def topk(self, g: torch.Tensor, k: int, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's top-k over the table: g [m, H] -> logp [m, k] (over the table), token ids [m, k]. mask [m, n]
        additive (the calibration replay's rows, each seeing the ids of its own context only)."""
        if self.fixed:  # every row, the unused ones masked out (the graph's addresses stay)
            assert self.hidden is not None  # a fixed table has its mask
            logits = F.linear(self.head.lm_head_input(g), self._rows_of(self._store)) + self.hidden  # [m, cap]
        else:
            logits = F.linear(self.head.lm_head_input(g), self.rows)  # [m, n]
        if mask is not None:
            logits = logits + mask
        logp, local = top_logp(logits, k)  # [m, k], [m, k] rows of the table
        return logp, self.ids[local]  # [m, k] token ids
