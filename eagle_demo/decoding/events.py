"""Typed, frozen events emitted by the engines. Plain Python values only, never tensors.

Every consumer (CLI, metrics, UI, benchmark) reads the same stream:
RunStart -> Prefill -> Round* (EAGLE) or Step* (baseline) -> Finish.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Union

__all__ = ["RunStart", "Prefill", "DraftNode", "Round", "Step", "Finish", "Event", "to_dict"]


@dataclass(frozen=True)
class RunStart:
    mode: str  # "eagle", "ngram" or "baseline"
    prompt_tokens: int
    max_new_tokens: int
    tree: str  # TreeConfig.label(), "" for baseline
    temperature: float
    draft_family: str  # "eagle1", "eagle3", "" for baseline
    device: str
    dtype: str
    static: bool = False  # fixed-size caches (CUDA graphs on a GPU), `static`
    repetition_penalty: float = 1.0  # the run's penalty (1 = off), `sampling.penalize`
    hidden_size: int = 0  # the target's hidden size (the divergence explainer's rounding scale, `divergence`)


@dataclass(frozen=True)
class Prefill:
    token_id: int  # the first new token, produced by the target from the prompt
    seconds: float
    target_prob: float  # probability of token_id under the processed target distribution
    target_top2: tuple = ()  # (top id, its logit, runner-up id, its logit) of the target's logits here (`top_two`)


@dataclass(frozen=True)
class DraftNode:
    """One drafted token of a round's tree. Index 0 of a round is the root (the last committed token). In a chain
    over a hot vocabulary (`TreeConfig.hot_vocab`) the draft's probabilities are over its table (the first ids
    and the context's), renormalized there: the full softmax would need every row of the lm_head, which the
    table exists to skip."""

    token_id: int
    parent: int  # index into the round's node list; -1 for the root
    depth: int  # 0 for the root
    draft_prob: float  # draft probability of this token given its parent (1.0 for the root)
    score: float  # product of draft probabilities along the path (EAGLE-2's ranking score)


@dataclass(frozen=True)
class Round:
    index: int  # 0-based round number
    nodes: tuple[DraftNode, ...]  # root first, parents before children
    accepted_path: tuple[int, ...]  # node indices of accepted drafts, root excluded, in order
    accepted_ids: tuple[int, ...]  # their token ids
    bonus_id: int  # the target's own token ending the round
    committed_ids: tuple[int, ...]  # what was appended this round (accepted + bonus, cut at EOS/max)
    target_probs: tuple[float, ...]  # processed target probability of each committed token
    draft_seconds: float
    verify_seconds: float
    host_seconds: float
    elapsed: float  # seconds since decode start, at the end of this round
    total_new_tokens: int  # new tokens so far, the prefill token included
    plain_for: str = ""  # a round without a draft: "gate" (the draft did not pay) or "rope" (`rope_limit`)
    target_top2: tuple = ()  # per committed token: the target's (top id, logit, runner-up id, logit) there


@dataclass(frozen=True)
class Step:
    """One plain decoding step of the baseline engine."""

    index: int
    token_id: int
    target_prob: float
    seconds: float
    elapsed: float
    total_new_tokens: int
    target_top2: tuple = ()  # (top id, its logit, runner-up id, its logit) of the target's logits at this step


@dataclass(frozen=True)
class Finish:
    reason: str  # "eos", "length" or "stopped"
    token_ids: tuple[int, ...]  # all new token ids
    new_tokens: int
    rounds: int  # rounds (EAGLE) or decode steps (baseline)
    prefill_seconds: float
    decode_seconds: float
    extra: dict = field(default_factory=dict)


Event = Union[RunStart, Prefill, Round, Step, Finish]


def to_dict(event: Event) -> dict:
    """JSON-ready dict with an `event` field naming the kind."""
    data = asdict(event)
    data = {"event": type(event).__name__.lower(), **data}
    return data
