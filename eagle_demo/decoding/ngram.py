"""N-gram drafting (prompt lookup): a draft source that needs no head, for any target.

The draft proposes a continuation of the run's own context, as transformers' prompt lookup
(`generate(prompt_lookup_num_tokens=...)`) and vLLM's `ngram` method do:

- for n from `max_n` down to `min_n`, look for an earlier occurrence of the context's last n tokens; the earliest
  occurrence whose continuation is not empty wins (transformers' rule, scanning left to right), and the first n
  with a match ends the search;
- the proposal is up to `tokens` tokens that followed that occurrence (they may run on into the suffix itself),
  cut before an end-of-sequence token when the run stops at one (transformers does the same);
- no match: the round drafts nothing and is a plain target step through the verify path.

The parameters carry vLLM's names too: `min_n` is its prompt_lookup_min, `max_n` prompt_lookup_max and `tokens`
num_speculative_tokens; transformers fixes min_n at 1 and calls max_n `max_matching_ngram_size` (default 2) and
tokens `prompt_lookup_num_tokens`.

Lossless: a proposal is deterministic, a point mass (q = 1 at its token), so the verifier's rule (sample the
target's token at a node, descend into the child carrying it; the argmax when greedy) keeps the output exactly the
target's, greedy and sampled alike (`acceptance`). The draft plugs into `SpeculativeEngine`'s one loop
(`NgramEngine`); each round's chain is built on the host and verified like any other chain.

The index keeps the first start of every n-gram (min_n <= n <= max_n) of the context in a dict, updated as tokens
are committed: a proposal costs max_n - min_n + 1 lookups, whatever the context's length.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace

import torch
from transformers import PreTrainedModel

from ..common.config import NgramConfig, RunConfig, TreeConfig
from .engine import SpeculativeEngine, _EngineBase
from .events import Event
from .tree import DraftTree

__all__ = ["NgramIndex", "NgramDrafter", "NgramEngine", "propose"]


class NgramIndex:
    """A growing token list and the start of the first occurrence of each of its n-grams, min_n <= n <= max_n."""

    def __init__(self, min_n: int, max_n: int):
        self.min_n, self.max_n = min_n, max_n
        self.tokens: list[int] = []
        self.first: dict[tuple[int, ...], int] = {}

    def add(self, ids: Iterable[int]) -> None:
        tokens, first = self.tokens, self.first
        for t in ids:
            tokens.append(int(t))
            end = len(tokens)
            for n in range(self.min_n, min(self.max_n, end) + 1):
                first.setdefault(tuple(tokens[end - n:end]), end - n)

    def propose(self, k: int) -> list[int]:
        """Up to k tokens that followed the earliest earlier occurrence of the longest matching suffix n-gram."""
        tokens, size = self.tokens, len(self.tokens)
        for n in range(min(self.max_n, size - 1), self.min_n - 1, -1):
            start = self.first.get(tuple(tokens[size - n:]))
            if start is not None and start + n < size:  # the earliest occurrence is not the suffix itself
                return tokens[start + n:start + n + k]
        return []


def propose(context: list[int], cfg: NgramConfig, stops: Iterable[int] = ()) -> list[int]:
    """The proposal for a whole context at once (the reference the index is tested against)."""
    stop = set(stops)
    size = len(context)
    for n in range(min(cfg.max_n, size - 1), cfg.min_n - 1, -1):
        suffix = context[size - n:]
        for start in range(size - n):
            if context[start:start + n] == suffix:
                return _cut(context[start + n:start + n + cfg.tokens], stop)
    return []


def _cut(ids: list[int], stops) -> list[int]:
    for i, t in enumerate(ids):
        if t in stops:
            return ids[:i]
    return ids


class NgramDrafter:
    """The draft side of `NgramEngine`: the interface of `drafter.Drafter` (reset, reserve, extend, draft)
    over an `NgramIndex` of the run's context."""

    static = None  # no draft-side graphs (`session.graph_note` reads it)
    family = "ngram"

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.cfg = NgramConfig()
        self.stops: frozenset[int] = frozenset()
        self.index = NgramIndex(self.cfg.min_n, self.cfg.max_n)
        self._consts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def begin(self, prompt_ids: list[int], cfg: NgramConfig, stops: frozenset[int]) -> None:
        """A new run: its settings, its stop tokens, and the prompt's first token (the engine's `extend` after the
        prefill gives the rest: pair i is (feature_i, token_i+1))."""
        self.cfg, self.stops = cfg, stops
        self.index = NgramIndex(cfg.min_n, cfg.max_n)
        self.index.add(prompt_ids[:1])

    def reset(self) -> None:
        self.index = NgramIndex(self.cfg.min_n, self.cfg.max_n)

    def reserve(self, positions: int, round_entries: int = 0) -> None:
        """Nothing to size: the index grows with the context."""

    def extend(self, features: torch.Tensor, tokens: torch.Tensor) -> None:
        """tokens [n]: the tokens committed after the context so far (on the host: the engine builds them there);
        the features are not used."""
        self.index.add(tokens.tolist())

    def draft(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        """A chain of the proposal (at most cfg.depth tokens) after root_token, the last committed token."""
        ids = _cut(self.index.propose(cfg.depth), self.stops)
        n = len(ids) + 1
        depths, mask = self._chain(cfg.depth + 1)
        tokens = torch.tensor([root_token, *ids], dtype=torch.long, device=self.device)  # [n]
        ones = (1.0,) * n
        host = ((root_token, *ids), tuple(range(-1, n - 1)), tuple(range(n)), ones, ones)
        return DraftTree(tokens=tokens, depths=depths[:n], mask=mask[:n, :n], is_chain=True, host=host)

    def _chain(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Depths [size] and the lower-triangular mask [size, size] of the longest chain, made once per size."""
        if size not in self._consts:
            self._consts[size] = (torch.arange(size, device=self.device),
                                  torch.ones(size, size, dtype=torch.bool, device=self.device).tril_())
        return self._consts[size]


class NgramEngine(SpeculativeEngine):
    """Speculative decoding with the n-gram draft (`ngram`): no head, any target. The same loop as
    `SpeculativeEngine`; each run drafts chains of up to `run.ngram.tokens` tokens and never pauses (the gate and the
    retuner are EAGLE's)."""

    mode = "ngram"

    def __init__(self, model: PreTrainedModel, static: bool = False):
        _EngineBase.__init__(self, model, None, static)
        self.head = None
        self.drafter = NgramDrafter(self.runner.device)

    @property
    def family(self) -> str:
        return "ngram"

    def _label(self, run: RunConfig) -> str:
        return run.ngram.label()

    def generate(self, prompt_ids: list[int], run: RunConfig,
                 stop: threading.Event | None = None) -> Iterator[Event]:
        run = replace(run, tree=TreeConfig.chain(run.ngram.tokens), retune=None, pause_below=0.0, pause_by_length=(),
                      pause_first=False)
        return super().generate(prompt_ids, run, stop)

    def _prefill(self, prompt_ids, run, sampler, seen):
        self.drafter.begin(prompt_ids, run.ngram, self._stops(run))  # the context starts with the prompt
        return super()._prefill(prompt_ids, run, sampler, seen)
