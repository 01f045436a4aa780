"""N-gram drafting (prompt lookup): a draft source that needs no head, for any target.

The draft proposes a continuation of the run's own context, as transformers' prompt lookup
(`generate(prompt_lookup_num_tokens=...)`) and vLLM's `ngram` method do:

- for n from `max_n` down to `min_n`, look for an earlier occurrence of the context's last n tokens; the earliest
  occurrence whose continuation is not empty wins (transformers' rule, scanning left to right), and the first n
  with a match ends the search;
- the proposal is up to `tokens` tokens that followed that occurrence (they may run on into the suffix itself),
  cut before an end-of-sequence token when the run stops at one (transformers does the same);
- no match: the round drafts nothing and is a plain target step through the verify path.

Two additions, both on by default (`NgramConfig`), neither in transformers' or vLLM's drafter:

- branches: the matched n-gram's next distinct continuations (its earliest occurrences first, the first one being
  transformers' proposal) are verified together as a trie in the same target forward, so a round whose first
  continuation misses can still accept another;
- repeat: a continuation that runs into the context's end goes on with the period it found. The match starts P
  tokens before the suffix does, so the context reads as a pattern of period P, and the proposal continues it: a
  loop in the output proposes all `tokens` tokens instead of the few left before the end.

`NgramConfig.transformers()` (one branch, no repeat) proposes exactly transformers' candidates (tests/test_ngram.py).

The parameters carry vLLM's names too: `min_n` is its prompt_lookup_min, `max_n` prompt_lookup_max and `tokens`
num_speculative_tokens; transformers fixes min_n at 1 and calls max_n `max_matching_ngram_size` (default 2) and
tokens `prompt_lookup_num_tokens`.

Lossless: a proposal is deterministic, a point mass (q = 1 at its token), so the verifier's rule (sample the
target's token at a node, descend into the child carrying it; the argmax when greedy) keeps the output exactly the
target's, greedy and sampled alike, for a chain and for a trie of several proposals (`acceptance`). The draft
(`NgramDrafter`) keeps the `draft_source.DraftSource` contract and plugs into `SpeculativeEngine`'s one loop
(`NgramEngine` builds that engine); each round's chain or trie is built on the host and verified like any other
tree.

The index keeps the starts of every n-gram (min_n <= n <= max_n) of the context in a dict, updated as tokens are
committed: a proposal costs max_n - min_n + 1 lookups and reads at most `SCAN` occurrences, whatever the
context's length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

import torch
from transformers import PreTrainedModel

from ..common.config import NgramConfig, RunConfig, TreeConfig
from .engine import SpeculativeEngine
from .tree import DraftTree, make_tree

__all__ = ["NgramIndex", "NgramDrafter", "NgramEngine", "choose", "propose", "trie", "SCAN"]

SCAN = 64  # occurrences of the matched n-gram read per proposal, at most (the earliest ones)


class NgramIndex:
    """A growing token list and the starts of every occurrence of each of its n-grams, min_n <= n <= max_n."""

    def __init__(self, min_n: int, max_n: int):
        self.min_n, self.max_n = min_n, max_n
        self.tokens: list[int] = []
        self.starts: dict[tuple[int, ...], list[int]] = {}

    def add(self, ids: Iterable[int]) -> None:
        tokens, starts = self.tokens, self.starts
        for t in ids:
            tokens.append(int(t))
            end = len(tokens)
            for n in range(self.min_n, min(self.max_n, end) + 1):
                starts.setdefault(tuple(tokens[end - n:end]), []).append(end - n)

    def propose(self, cfg: NgramConfig) -> list[list[int]]:
        """Up to `cfg.branches` distinct continuations of the longest suffix n-gram that occurred earlier
        (`choose`); [] when none did."""
        tokens, size = self.tokens, len(self.tokens)
        for n in range(min(self.max_n, size - 1), self.min_n - 1, -1):
            found = self.starts.get(tuple(tokens[size - n:]), ())
            if found and found[0] + n < size:  # the earliest occurrence is not the suffix itself
                return choose(tokens, [s for s in found[:SCAN] if s + n < size], n, cfg)
        return []


def choose(tokens: list[int], starts: list[int], n: int, cfg: NgramConfig) -> list[list[int]]:
    """The proposals from the earlier occurrences `starts` (ascending) of the context's last n tokens: with
    `by_count`, the occurrences whose next token followed the match most often first (the earliest first among
    equals), else the earliest first; a weak match (n < max_n) proposes at most `weak_tokens` per branch."""
    k = min(cfg.tokens, cfg.weak_tokens) if n < cfg.max_n and cfg.weak_tokens else cfg.tokens
    if cfg.by_count:
        count = Counter(tokens[s + n] for s in starts)
        starts = sorted(starts, key=lambda s: -count[tokens[s + n]])  # stable: the earliest first among equals
    return _distinct((_follow(tokens, s + n, k, cfg.repeat) for s in starts), cfg.branches)


def _follow(tokens: list[int], at: int, k: int, repeat: bool) -> list[int]:
    """The k tokens from `at` on; with `repeat`, past the end the pattern of period len(tokens) - at goes on."""
    out = tokens[at:at + k]
    if repeat:
        period = len(tokens) - at
        while len(out) < k:
            out.append(out[len(out) - period])
    return out


def _distinct(continuations: Iterable[list[int]], branches: int) -> list[list[int]]:
    out: list[list[int]] = []
    for c in continuations:
        if c not in out:
            out.append(c)
            if len(out) == branches:
                break
    return out


def propose(context: list[int], cfg: NgramConfig, stops: Iterable[int] = ()) -> list[list[int]]:
    """The proposals for a whole context at once, by a scan of every window (the reference the index is tested
    against): distinct continuations, each cut before a stop token, the empty ones dropped."""
    size = len(context)
    for n in range(min(cfg.max_n, size - 1), cfg.min_n - 1, -1):
        suffix = context[size - n:]
        found = [s for s in range(size - n) if context[s:s + n] == suffix]
        if found:
            return cut_all(choose(context, found[:SCAN], n, cfg), set(stops))
    return []


def cut_all(continuations: list[list[int]], stops) -> list[list[int]]:
    """Each continuation cut before its first stop token; the empty ones dropped, the rest kept distinct."""
    out: list[list[int]] = []
    for c in continuations:
        c = _cut(c, stops)
        if c and c not in out:
            out.append(c)
    return out


def _cut(ids: list[int], stops) -> list[int]:
    for i, t in enumerate(ids):
        if t in stops:
            return ids[:i]
    return ids


def trie(root: int, continuations: list[list[int]], device: torch.device) -> DraftTree:
    """The continuations after `root` merged into one tree, depth-major (a shared prefix is drafted once)."""
    tokens, parents, depths = [root], [-1], [0]
    node: dict[tuple[int, ...], int] = {(): 0}
    for d in range(1, max(map(len, continuations), default=0) + 1):
        for c in continuations:
            if len(c) >= d and tuple(c[:d]) not in node:
                node[tuple(c[:d])] = len(tokens)
                tokens.append(c[d - 1])
                parents.append(node[tuple(c[:d - 1])])
                depths.append(d)
    ones = [1.0] * len(tokens)
    return make_tree(tokens, parents, depths, ones, ones, device)


class NgramDrafter:
    """The n-gram draft's side of a round (`draft_source.DraftSource`) over an `NgramIndex` of the run's context:
    no head, any target. Each round drafts a chain of up to `run.ngram.tokens` tokens, or a trie of up to
    `run.ngram.branches` such chains, and the run never pauses (the gate and the retuner are EAGLE's)."""

    mode = "ngram"
    family = "ngram"
    feature_layers = None  # the proposals read tokens only
    static = None  # no draft-side graphs (`session.graph_note` reads it)

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.cfg = NgramConfig()
        self.stops: frozenset[int] = frozenset()
        self.index = NgramIndex(self.cfg.min_n, self.cfg.max_n)
        self._consts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def run_for(self, run: RunConfig) -> RunConfig:
        """The run with the tree this draft proposes (a chain, or a trie of `branches` chains), no gate, no
        retuner and no paused start."""
        g = run.ngram
        shape = TreeConfig.chain(g.tokens) if g.branches == 1 else TreeConfig(g.tokens, g.branches, g.total_tokens)
        return replace(run, tree=shape, retune=None, pause_below=0.0, pause_by_length=(), pause_first=False)

    def label(self, run: RunConfig) -> str:
        return run.ngram.label()

    def begin(self, prompt_ids: list[int], run: RunConfig, stops: frozenset[int], positions: int = 0,
              round_entries: int = 0) -> None:
        """A new run: its settings (`run.ngram`), its stop tokens, and the prompt's first token (the engine's
        `extend` after the prefill gives the rest: pair i is (feature_i, token_i+1)). Nothing to size: the index
        grows with the context."""
        self.cfg, self.stops = run.ngram, stops
        self.index = NgramIndex(self.cfg.min_n, self.cfg.max_n)
        self.index.add(prompt_ids[:1])

    def reset(self) -> None:
        self.index = NgramIndex(self.cfg.min_n, self.cfg.max_n)

    def extend(self, features: torch.Tensor, tokens: torch.Tensor) -> None:
        """tokens [n]: the tokens committed after the context so far (on the host: the engine builds them there);
        the features are not used."""
        self.index.add(tokens.tolist())

    def draft(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        """The proposals after root_token, the last committed token: one chain (at most cfg.depth tokens), or a
        trie of up to `branches` of them."""
        found = cut_all(self.index.propose(self.cfg), self.stops)  # cfg.depth is self.cfg.tokens
        if len(found) > 1:
            return trie(root_token, found, self.device)
        ids = found[0] if found else []
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
    """`SpeculativeEngine` with the n-gram draft (an `NgramDrafter` on the target's output device)."""

    def __init__(self, model: PreTrainedModel, static: bool = False):
        super().__init__(model, NgramDrafter(model.get_output_embeddings().weight.device), static)
