"""The divergence explainer: where a race's output first differs from plain decoding, and whether that was a near
tie (the dtype's rounding) or a defect.

Every engine records the target's top two logits at each token it commits (`events`' `target_top2`, from
`sampling.top_two`): the baseline at its steps, the speculative engines at the tree rows their verify committed
from. At the first position where the two outputs differ (the baseline chose A, the racer B) each run has a gap:
logit(A) - logit(B) in the baseline's run, logit(B) - logit(A) in the racer's. Greedy decoding took the larger
logit in each, so both gaps are >= 0, and the two computations of the same logits disagreed by at least their sum.

How large may that disagreement be from rounding alone (`rounding_tolerance`)? A logit is a dot product of the
final hidden state with a row of the lm_head over the H components of the hidden size. Near a logit of magnitude M
the dtype resolves steps of one ulp(M) = eps * 2**floor(log2 M) (eps = `torch.finfo(dtype).eps`: 2**-7 in
bfloat16, 2**-10 in float16, 2**-23 in float32), and each of the H terms a run's sum accumulates can be off by up
to half an ulp there. Two computations of the same logit (a verify over a block against a one-token step: other
kernels, other summation orders) round independently, so term by term they differ by up to one ulp, and H
independent errors add like a random walk: about sqrt(H) * ulp(M). The tolerance is that: gaps summing to less
are a near tie, expected in that dtype; more is
no rounding, a defect. Two cases are defects whatever the gaps: a committed token that is not the top token of
its own run's logits (a verifier that accepted what the target did not choose), and a sampled run that split
(identity of sampled runs is checked in float32 only, where a draw lands within rounding of a boundary about once
in 10**6 positions). When a run's token is not among the other run's top two, its gap there is at least that run's
top-2 gap (the bound counts in the sum); within the tolerance it is a tie of several tokens.

Measured on the shipped target (H = 128, 24 layers, logits 9 to 17 in magnitude): between one-token steps and
8-token blocks over the same 96 greedy tokens the top-two gap moved by at most 0.06 in bfloat16 (the tolerance is
0.71 to 1.4 there) and by 7e-6 in float32 (1.1e-5 to 2.2e-5); docs/ngram-and-divergence.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

import torch

from ..decoding.events import Event, Prefill, Round, RunStart, Step

__all__ = ["Divergence", "rounding_tolerance", "top2_by_position", "explain", "CONTEXT"]

CONTEXT = 12  # tokens of shared text shown before the split, and of each run after it (at most)


def rounding_tolerance(dtype: str, magnitude: float, hidden_size: int) -> float:
    """sqrt(H) * ulp(M): how far two computations of logits of magnitude M over a hidden size H may drift apart in
    `dtype` from rounding alone (the module's docstring derives it)."""
    name = str(dtype).removeprefix("torch.")
    eps = torch.finfo(getattr(torch, name, torch.float32)).eps
    ulp = eps * 2.0 ** math.floor(math.log2(max(abs(magnitude), 1e-30)))
    return math.sqrt(max(hidden_size, 1)) * ulp


def top2_by_position(events: Iterable[Event]) -> list[tuple]:
    """The target's (top id, logit, runner-up id, logit) at each new token, in output order (() where not known)."""
    out: list[tuple] = []
    for e in events:
        if isinstance(e, (Prefill, Step)):
            out.append(tuple(e.target_top2))
        elif isinstance(e, Round):
            known = list(e.target_top2)[:len(e.committed_ids)]
            out += [tuple(t) for t in known] + [()] * (len(e.committed_ids) - len(known))
    return out


@dataclass(frozen=True)
class Divergence:
    position: int  # index among the new tokens (0: the prefill's)
    baseline_id: int
    racer_id: int
    racer: str  # "EAGLE" or "n-gram"
    context_ids: tuple[int, ...]  # the shared new tokens just before the split
    baseline_next: tuple[int, ...]  # each run's tokens from the split on
    racer_next: tuple[int, ...]
    baseline_gap: float | None  # logit(baseline token) - logit(racer token) in the baseline's run (a lower bound,
    # the top-2 gap, when the racer's token is not its runner-up); None: not recorded
    racer_gap: float | None  # logit(racer token) - logit(baseline token) in the racer's run, likewise
    magnitude: float  # the larger top logit of the two runs there
    tolerance: float  # `rounding_tolerance` at that magnitude
    dtype: str
    hidden_size: int
    kind: str  # "near tie" or "defect"
    reason: str  # why, in words

    @property
    def gap(self) -> float:
        """The disagreement the two runs' logits must have had: the sum of the known gaps (as sizes: a verifier that
        committed a token its target did not choose has a negative gap in its own run)."""
        return sum(abs(g) for g in (self.baseline_gap, self.racer_gap) if g is not None)

    def verdict(self) -> str:
        if self.kind == "near tie":
            several = f"; {self.reason}" if self.reason else ""
            return (f"a near tie (gap {self.gap:.2g} < the {self.dtype} rounding at this magnitude, "
                    f"{self.tolerance:.2g}{several}): expected in {self.dtype}")
        return f"gap {self.gap:.2g}: not rounding ({self.reason}); this is a defect, please report it with this line"

    def line(self, decode: Callable[[list[int]], str] | None = None) -> str:
        """One line: where, both tokens, the context, both gaps and the verdict."""
        show = (lambda ids: repr(decode(list(ids)))) if decode else (lambda ids: str(list(ids)))
        gaps = ", ".join(f"{g:.3g} in the {who} run" if g is not None else f"unknown in the {who} run"
                         for g, who in ((self.baseline_gap, "baseline"), (self.racer_gap, self.racer)))
        return (f"first difference at new token {self.position}: baseline {show([self.baseline_id])} vs "
                f"{self.racer} {show([self.racer_id])} after {show(self.context_ids)}; top-2 gap {gaps} "
                f"(logits ~{self.magnitude:.3g}, {self.dtype}, hidden size {self.hidden_size}): {self.verdict()}")

    def to_dict(self, decode: Callable[[list[int]], str] | None = None) -> dict:
        out = {**asdict(self), "gap": self.gap, "verdict": self.verdict(), "line": self.line(decode)}
        if decode is not None:
            out.update(baseline_token=decode([self.baseline_id]), racer_token=decode([self.racer_id]),
                       context=decode(list(self.context_ids)))
        return out


def explain(racer: list[Event], baseline: list[Event], greedy: bool) -> Divergence | None:
    """The first difference between a racer's finished run and the baseline's; None when one is a prefix of the
    other (the same text, or a run cut short)."""
    ids_r, ids_b = _ids(racer), _ids(baseline)
    p = next((i for i, (a, b) in enumerate(zip(ids_b, ids_r)) if a != b), None)
    if p is None:
        return None
    start = next((e for e in racer if isinstance(e, RunStart)), None)
    dtype = start.dtype if start else "float32"
    hidden = start.hidden_size if start else 0
    a, b = ids_b[p], ids_r[p]
    top_b, top_r = _at(top2_by_position(baseline), p), _at(top2_by_position(racer), p)
    gap_b, gap_r = _gap(top_b, a, b), _gap(top_r, b, a)
    magnitude = max([abs(t[1]) for t in (top_b, top_r) if t] or [0.0])
    tol = rounding_tolerance(dtype, magnitude, hidden)
    name = "n-gram" if start is not None and start.mode == "ngram" else "EAGLE"
    kind, reason = _judge(greedy, (top_b, a, gap_b), (top_r, b, gap_r), tol, name)
    return Divergence(position=p, baseline_id=a, racer_id=b, racer=name,
                      context_ids=tuple(ids_b[max(0, p - CONTEXT):p]),
                      baseline_next=tuple(ids_b[p:p + CONTEXT]), racer_next=tuple(ids_r[p:p + CONTEXT]),
                      baseline_gap=gap_b, racer_gap=gap_r, magnitude=magnitude, tolerance=tol, dtype=dtype,
                      hidden_size=hidden, kind=kind, reason=reason)


def _judge(greedy: bool, baseline: tuple, racer: tuple, tol: float, name: str) -> tuple[str, str]:
    """(kind, reason) of a divergence; baseline and racer: each run's (top-2 row at the position, the token it
    committed there, its top-2 gap)."""
    (top_b, a, gap_b), (top_r, b, gap_r) = baseline, racer
    if not greedy:
        return "defect", "a seeded draw differed in a run whose identity is checked"
    if top_r and not _is_top(top_r, b):
        return "defect", (f"the target's top token in the {name} run was another; the verifier committed one it did "
                          "not choose")
    if top_b and not _is_top(top_b, a):
        return "defect", "the baseline committed a token that was not its top one"
    if gap_b is None or gap_r is None:
        return "defect", "the top-2 logits of a run were not recorded"
    if gap_b + gap_r > tol:  # a gap or its lower bound: more than rounding either way
        return "defect", f"the {tol:.2g} the dtype's rounding allows at this magnitude"
    if top_b[2] != b or top_r[2] != a:
        return "near tie", "several tokens tie within rounding here"
    return "near tie", ""


def _is_top(top: tuple, token: int) -> bool:
    """Whether `token` has the top logit of a (top id, logit, runner-up id, logit) row (an exact tie counts: the
    argmax and the top-2 may order tied ids differently)."""
    return token == top[0] or (token == top[2] and top[3] == top[1])


def _ids(events: list[Event]) -> list[int]:
    for e in reversed(events):
        if hasattr(e, "token_ids") and type(e).__name__ == "Finish":
            return list(e.token_ids)
    ids: list[int] = []
    for e in events:
        ids += [e.token_id] if isinstance(e, (Prefill, Step)) else list(e.committed_ids) if isinstance(e, Round) else []
    return ids


def _at(rows: list[tuple], p: int) -> tuple:
    return rows[p] if p < len(rows) else ()


def _gap(top: tuple, mine: int, other: int) -> float | None:
    """logit(mine) - logit(other) from a (top id, logit, runner-up id, logit) row. When one of the two is not in the
    row, the top-2 gap (a lower bound of the distance to any other token); None when the row is unknown."""
    if not top:
        return None
    logits = {top[2]: top[3], top[0]: top[1]}
    if mine in logits and other in logits:
        return logits[mine] - logits[other]
    return top[1] - top[3]
