"""Frozen run settings: the draft tree, the sampling pipeline, and one generation request.

Vocabulary used everywhere in this package:
- target: the large model whose output we must reproduce exactly.
- draft: the EAGLE head that proposes tokens.
- round: one draft + verify step.
- accepted: draft tokens the target agreed with in a round.
- bonus: the token the target itself produces at the end of a round (a correction when a draft was
  rejected, a free extra token when the whole path was accepted).
- commit: appending accepted + bonus tokens to the output.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TreeConfig", "SamplingConfig", "NgramConfig", "RunConfig", "TREE_PRESETS", "ConfigError", "default_preset",
           "default_tree",
           "tree_from"]


class ConfigError(ValueError):
    """A setting is out of range; the message names the setting and the allowed range."""


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not (low <= value <= high):
        raise ConfigError(f"{name} {value} is out of range; use {low} to {high}")


@dataclass(frozen=True)
class TreeConfig:
    """Shape of the draft tree built each round (EAGLE-2 dynamic tree; a chain is top_k=1).

    depth: the longest drafted path, i.e. the number of sequential draft forwards per round.
        (EAGLE's code counts expansions after the first step, so its `depth=5` is our 6.)
    top_k: children expanded per frontier node and frontier width per depth.
    total_tokens: tokens the target verifies per round, the root included (EAGLE's `total_token`).
    stop_below: chains only, 0 = off: the chain stops growing after the first draft token whose path
        probability (the product of the chain's draft probabilities so far) is under it, so a round drafts
        1..depth tokens (a confidence stop, decided on the draft's own scores: the output stays lossless).
    hot_vocab: chains only, 0 = off: the draft proposes only among the first hot_vocab token ids (FR-Spec's
        frequency-ranked draft vocabulary: a BPE tokenizer numbers its merges in the order it learned them, so the
        low ids are the frequent ones) and the ids of the run's context (`hot_vocab.HotVocab`; a static drafter's
        table is fixed-address, with room for the context), and a draft step reads those rows of the lm_head
        instead of all. For heads whose logits are the target's lm_head (EAGLE-1/2); the target still verifies
        over its whole vocabulary, so the output stays lossless.
    """

    depth: int = 4
    top_k: int = 4
    total_tokens: int = 16
    stop_below: float = 0.0
    hot_vocab: int = 0

    def __post_init__(self) -> None:
        _check_int("depth", self.depth, 1, 32)
        _check_int("top_k", self.top_k, 1, 64)
        _check_int("total_tokens", self.total_tokens, 2, 512)
        if isinstance(self.stop_below, bool) or not isinstance(self.stop_below, (int, float)) or not (
                0.0 <= self.stop_below < 1.0):
            raise ConfigError(f"chain stop {self.stop_below!r} is out of range; use 0 (off) to below 1")
        if self.stop_below and self.top_k != 1:
            raise ConfigError("a chain stop applies to chains only; use top-k 1 (a chain) or stop 0")
        if self.hot_vocab:
            _check_int("hot vocabulary", self.hot_vocab, 2, 1 << 24)
            if self.top_k != 1:
                raise ConfigError("a hot vocabulary applies to chains only; use top-k 1 (a chain) or hot vocabulary 0")

    @classmethod
    def chain(cls, k: int, stop_below: float = 0.0, hot_vocab: int = 0) -> "TreeConfig":
        """A single path of k draft tokens (classic speculative decoding shape); stop_below, hot_vocab: see the
        class."""
        _check_int("chain k", k, 1, 32)
        return cls(depth=k, top_k=1, total_tokens=k + 1, stop_below=float(stop_below), hot_vocab=hot_vocab)

    @property
    def stops(self) -> bool:
        """A chain whose length follows the draft's confidence (`stop_below`)."""
        return self.stop_below > 0.0

    @property
    def is_chain(self) -> bool:
        return self.top_k == 1

    @property
    def max_draft_nodes(self) -> int:
        """Drafted nodes per round: at most total_tokens - 1, at most what the expansion can produce."""
        produced = self.top_k + (self.depth - 1) * self.top_k * self.top_k
        return min(self.total_tokens - 1, produced)

    def label(self) -> str:
        if self.is_chain:
            notes = [f"stops under p={self.stop_below:g}"] if self.stops else []
            notes += [f"drafts over the first {self.hot_vocab} ids plus context ids"] if self.hot_vocab else []
            return f"chain k={self.depth}" + (f" ({'; '.join(notes)})" if notes else "")
        return f"tree {self.total_tokens}/{self.depth}/{self.top_k} (total/depth/top-k)"

    def short_label(self) -> str:
        """For a table column: `chain 5`, `chain 16 @0.005 hot 2048` (stops under p=0.005, the first 2048 ids),
        `tree 12/3/4` (total/depth/top-k)."""
        if self.is_chain:
            return (f"chain {self.depth}" + (f" @{self.stop_below:g}" if self.stops else "")
                    + (f" hot {self.hot_vocab}" if self.hot_vocab else ""))
        return f"tree {self.total_tokens}/{self.depth}/{self.top_k}"


@dataclass(frozen=True)
class SamplingConfig:
    """The one logits pipeline shared by baseline and verifier: the repetition penalty, then temperature, then
    top-k, then top-p (the order of transformers' `generate`).

    temperature == 0 means greedy (argmax, of the penalized logits when a penalty is set). seed drives a
    position-keyed sampler, so the same seed gives the same text in the baseline and the EAGLE engine.
    repetition_penalty: transformers' rule over every token seen so far, the prompt included (a logit > 0 is
    divided by it, one < 0 multiplied); 1 = off.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if not (0.0 <= float(self.temperature) <= 10.0):
            raise ConfigError(f"temperature {self.temperature} is out of range; use 0 (greedy) to 10")
        if not (0.0 < float(self.top_p) <= 1.0):
            raise ConfigError(f"top_p {self.top_p} is out of range; use a value in (0, 1]")
        _check_int("top_k (sampling)", self.top_k, 0, 1_000_000)
        _check_int("seed", self.seed, 0, 2**63 - 1)
        if not (0.0 < float(self.repetition_penalty) <= 10.0):
            raise ConfigError(f"repetition penalty {self.repetition_penalty} is out of range; use a value in (0, 10] "
                              "(1 = off)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class NgramConfig:
    """The n-gram draft's settings (`ngram`): match the context's last n tokens, n from max_n down to min_n, and
    propose up to `tokens` tokens that followed the match (vLLM's prompt_lookup_min, prompt_lookup_max and
    num_speculative_tokens; transformers' prompt lookup is min_n 1, max_n its max_matching_ngram_size, default 2,
    and tokens its prompt_lookup_num_tokens).

    branches: up to this many distinct continuations of the matched n-gram (its earliest occurrences first), verified
        together as one tree; 1 is one chain, as transformers and vLLM draft.
    repeat: a continuation that runs into the context's end goes on with the period it found (the match and the
        suffix are one pattern repeating), so a loop proposes all `tokens`; off, it stops at the end as transformers'
        does.
    by_count: the occurrences whose next token followed the match most often come first (the earliest first among
        equals); off, the earliest first, as transformers.
    weak_tokens: a weak match, shorter than max_n, proposes at most this many tokens per branch (0: `tokens`): on the
        shipped suite, under transformers' rule, a one-token match had its first token rejected in 94 of 143
        drafting rounds, a two-token match in 34 of 273, and every proposed token is a row the target's forward
        pays for.
    `transformers()` is the setting that proposes exactly transformers' prompt lookup candidates."""

    min_n: int = 1
    max_n: int = 2
    tokens: int = 10
    branches: int = 2
    repeat: bool = True
    by_count: bool = True
    weak_tokens: int = 2

    def __post_init__(self) -> None:
        _check_int("n-gram min", self.min_n, 1, 16)
        _check_int("n-gram max", self.max_n, 1, 16)
        _check_int("n-gram tokens", self.tokens, 1, 32)
        _check_int("n-gram branches", self.branches, 1, 8)
        if self.min_n > self.max_n:
            raise ConfigError(f"n-gram min {self.min_n} is above n-gram max {self.max_n}; use min <= max")
        _check_int("n-gram weak tokens", self.weak_tokens, 0, 32)
        for name in ("repeat", "by_count"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"n-gram {name} must be true or false, got {getattr(self, name)!r}")

    @classmethod
    def transformers(cls, max_n: int = 2, tokens: int = 10, min_n: int = 1) -> "NgramConfig":
        """transformers' prompt lookup (max_matching_ngram_size, prompt_lookup_num_tokens): one chain, the earliest
        occurrence, no repeat, weak matches proposing all `tokens`. vLLM's `ngram` is the same rule with a
        `prompt_lookup_min` (`min_n`)."""
        return cls(min_n=min_n, max_n=max_n, tokens=tokens, branches=1, repeat=False, by_count=False, weak_tokens=0)

    @property
    def total_tokens(self) -> int:
        """The most tokens a round verifies: the root and every branch's proposal."""
        return 1 + self.tokens * self.branches

    def label(self) -> str:
        extra = [f"{self.branches} branches"] if self.branches > 1 else []
        extra += ["repeating"] if self.repeat else []
        extra += ["by count"] if self.by_count else []
        extra += [f"weak matches {self.weak_tokens}"] if self.weak_tokens and self.weak_tokens < self.tokens and \
            self.min_n < self.max_n else []
        return f"n-gram {self.min_n}..{self.max_n}, up to {self.tokens} tokens" + "".join(f", {e}" for e in extra)

    def short_label(self) -> str:
        """For a table column or a chart: `n-gram 1..2 x10` (n from 1 to 2, up to 10 tokens); `label()` says all."""
        return f"n-gram {self.min_n}..{self.max_n} x{self.tokens}"


@dataclass(frozen=True)
class RunConfig:
    """One generation request."""

    max_new_tokens: int = 128
    ignore_eos: bool = False
    tree: TreeConfig = TreeConfig()
    sampling: SamplingConfig = SamplingConfig()
    pause_below: float = 0.0  # break-even tau: drafting pauses while it does not pay (`gate`); 0 never pauses
    pause_by_length: tuple[float, ...] = ()  # a stopping chain's break-even by drafted length 1..k (`gate`)
    pause_first: bool = False  # the gate starts paused: the calibration predicted the draft does not pay (`gate`)
    retune: object | None = None  # an `autotree.retune.ShapeTable` (its `retuner(tree)` starts a run's retuning)
    ngram: NgramConfig = NgramConfig()  # the n-gram draft's settings (a run of `decoding.ngram.NgramEngine` only)

    def __post_init__(self) -> None:
        _check_int("max_new_tokens", self.max_new_tokens, 1, 8192)
        for value in (self.pause_below, *self.pause_by_length):
            if not (0.0 <= float(value) <= 64.0):
                raise ConfigError(f"pause_below {value} is out of range; use 0 (never pause) to 64")


# Device-aware presets. "cpu" was tuned on a 2-core x86 CPU with the shipped tiny pair
# (python -m eagle_demo bench, the whole shipped suite, 2 repeats, one torch thread, 128 new tokens; overall
# speedup EAGLE-1 / EAGLE-3): chain k=4 2.24x / 2.05x, k=5 2.46x / 2.31x, k=6 2.52x / 2.15x, k=7 2.70x /
# 2.23x, k=8 2.78x / 2.15x. A tiny target verifies 8 tokens for little more than the price of one, so long
# chains pay; but every extra token still costs compute, so on code prompts (scripts/experiments/tune_tree.py) tree
# 10/6/2 reached 1.8-2.1x and a GPU-sized tree 60/6/10 only 1.0-1.2x. "cpu-tree" is that best tree shape,
# for watching trees. The GPU presets are the papers' defaults in our depth convention.
TREE_PRESETS: dict[str, TreeConfig] = {
    "cpu": TreeConfig.chain(7),
    "cpu-tree": TreeConfig(depth=6, top_k=2, total_tokens=10),
    "gpu-eagle2": TreeConfig(depth=6, top_k=10, total_tokens=60),
    "gpu-eagle3": TreeConfig(depth=8, top_k=10, total_tokens=60),
}


def default_preset(device: str, family: str = "") -> str:
    """The name of the tree preset a pair starts with: "cpu" on a CPU (any family), else the GPU preset of the
    draft's family. device: "cpu", "cuda", "cuda:1" (or a torch.device)."""
    if str(device).split(":")[0] == "cpu":
        return "cpu"
    return "gpu-eagle3" if family == "eagle3" else "gpu-eagle2"


def default_tree(device: str, family: str = "") -> TreeConfig:
    """The one default draft tree of every entry point (page, /generate, command line) for a device and a draft
    family. Today it is a preset per (device, family); a measured choice can replace it here."""
    return TREE_PRESETS[default_preset(device, family)]


def tree_from(base: TreeConfig, depth: int | None = None, top_k: int | None = None, total_tokens: int | None = None,
              chain: int | None = None, mode: str = "auto", chain_stop: float | None = None,
              hot_vocab: int | None = None) -> TreeConfig:
    """A tree from optional settings over `base` (usually `default_tree`): mode "chain" is a chain of `chain`
    tokens (stopping under `chain_stop`, drafting over the first `hot_vocab` ids), "tree" the given tree settings;
    "auto" is a chain when `chain` is given, else `base` with whichever tree settings are given. Unset settings
    come from `base`."""
    if mode not in ("auto", "tree", "chain"):
        raise ConfigError(f"draft_mode must be 'auto', 'tree' or 'chain', got {mode!r}")
    chained = mode == "chain" or (mode == "auto" and chain is not None)
    if hot_vocab and not chained:
        raise ConfigError("a hot vocabulary applies to chains only; give a chain length too (--chain K)")
    if chain_stop and not chained:
        raise ConfigError("a chain stop applies to chains only; give a chain length too (--chain K)")
    if chained:
        return TreeConfig.chain(int(chain) if chain is not None else base.depth, float(chain_stop or 0.0),
                                int(hot_vocab or 0))
    if mode == "auto" and depth is None and top_k is None and total_tokens is None:
        return base
    return TreeConfig(depth=int(depth) if depth is not None else base.depth,
                      top_k=int(top_k) if top_k is not None else base.top_k,
                      total_tokens=int(total_tokens) if total_tokens is not None else base.total_tokens)
