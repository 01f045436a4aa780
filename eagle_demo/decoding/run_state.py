"""What a run carries between rounds: the plain rounds' pairs the draft has not seen (`Held`), the seen-token mask
of the repetition penalty (`Seen`), both with the draft gate as one named record (`RoundState`), when the run ends,
and the cut of a round's tokens at EOS or the budget."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterable

import torch

from ..common.config import RunConfig
from .gate import DraftGate

__all__ = ["Held", "Seen", "RoundState", "end_reason", "cut"]


class Held:
    """(feature, token) pairs of plain rounds, for the draft's next extend."""

    def __init__(self):
        self.features: list[torch.Tensor] = []
        self.tokens: list[int] = []

    def add(self, features: torch.Tensor, token: int) -> None:
        self.features.append(features)  # [1, F]
        self.tokens.append(token)

    def take(self) -> tuple[torch.Tensor, torch.Tensor]:
        out = torch.cat(self.features), torch.tensor(self.tokens, dtype=torch.long)  # [n, F], [n]
        self.features, self.tokens = [], []
        return out


class Seen:
    """The prompt's and the committed tokens as a [V] bool mask, for the repetition penalty. It grows by the tokens
    committed since the last call, so a round costs O(new tokens), not O(length)."""

    def __init__(self, run: RunConfig):
        self.on = run.sampling.repetition_penalty != 1.0
        self.mask: torch.Tensor | None = None  # [V] bool
        self.count = 0  # how many of the context's tokens are in the mask

    def of(self, logits: torch.Tensor, parts: tuple[list[int], ...]) -> torch.Tensor | None:
        """[V] bool after adding the tokens of `parts` (prompt, then new tokens; only the last part grows) past
        those already in; None when the run sets no penalty."""
        if not self.on:
            return None
        if self.mask is None:
            self.mask = torch.zeros(logits.shape[-1], dtype=torch.bool, device=logits.device)  # [V]
        tail, skip = [], self.count
        for part in parts:
            tail += part[skip:]
            skip = max(skip - len(part), 0)
        if tail:
            self.mask[torch.tensor(tail, device=logits.device)] = True
            self.count += len(tail)
        return self.mask


@dataclass(frozen=True)
class RoundState:
    """What one speculative run carries from round to round, named: the plain rounds' pairs waiting for the draft
    (`held`), the gate that pauses drafting when rounds commit too little (`gate`), and the repetition penalty's
    seen tokens (`seen`). The record is fixed for the run; its three parts change in place as rounds commit."""

    held: Held
    gate: DraftGate
    seen: Seen


def end_reason(token: int, count: int, run: RunConfig, eos: frozenset[int],
                stop: threading.Event | None) -> str | None:
    """None while generation goes on, else why it ends (checked between steps/rounds)."""
    if token in eos:
        return "eos"
    if count >= run.max_new_tokens:
        return "length"
    if stop is not None and stop.is_set():
        return "stopped"
    return None


def cut(tokens: list[int], eos: Iterable[int], room: int) -> list[int]:
    """Commit tokens in order exactly as plain decoding would: stop after an EOS or when out of room."""
    out = []
    for t in tokens[:room]:
        out.append(t)
        if t in eos:
            break
    return out
