"""What `SpeculativeEngine`'s one loop asks of a draft, as transformers' generation loop asks a
`CandidateGenerator` (`get_candidates`, `update_candidate_strategy`).

A run with a draft, in the engine's order:

1. `run_for(run)`: the run as this draft runs it (the n-gram draft fixes the tree to its own chain or trie and
   turns the gate and the retuner off; the EAGLE head's drafter keeps the run as it is);
2. `begin(prompt_ids, run, stops, positions, round_entries)`: a new run starts; `positions` is the room the run
   needs (prompt + new tokens + the widest tree) and `round_entries` what one round's drafting writes past it;
3. the target's prefill, then `extend(features, tokens)` with the prompt's pairs: pair i is the target's feature
   at position i and token i+1;
4. each round: `draft(root_token, tree)` proposes a tree after the last committed token without committing
   anything (two calls in a row propose the same tree); the target verifies it in one forward, and
   `extend(features, tokens)` commits the accepted path and the bonus token (their features, [m, F], and ids [m]);
5. `reset()` when the run ends: the run's state is dropped.

The two drafters: `drafter.Drafter` (an EAGLE head grows a dynamic tree from the target's features) and
`ngram.NgramDrafter` (prompt lookup over the run's own tokens; it reads no features). `tests/test_drafter_contract.py`
runs both through the same checks.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from ..common.config import RunConfig, TreeConfig
from .tree import DraftTree

__all__ = ["DraftSource"]


@runtime_checkable
class DraftSource(Protocol):
    mode: str  # the run's mode in `RunStart` and the session's racer name: "eagle" or "ngram"

    @property
    def family(self) -> str:
        """`RunStart.draft_family`: the head's family, or "ngram"."""
        ...

    @property
    def feature_layers(self) -> tuple[int, ...] | None:
        """The target layers whose features the draft reads; None: the last."""
        ...

    @property
    def static(self) -> object | None:
        """The draft side's fixed pools and graphs (`static_draft.StaticDraft`), None without."""
        ...

    def run_for(self, run: RunConfig) -> RunConfig:
        """The run as this draft runs it."""
        ...

    def label(self, run: RunConfig) -> str:
        """The draft's shape for `RunStart.tree`."""
        ...

    def begin(self, prompt_ids: list[int], run: RunConfig, stops: frozenset[int], positions: int,
              round_entries: int) -> None:
        """A new run: its settings, its stop tokens, room for `positions` positions and one round's entries."""
        ...

    def extend(self, features: torch.Tensor, tokens: torch.Tensor) -> object:
        """Commit tokens [n] (on the host) and the target's features [n, F] at the positions before them."""
        ...

    def draft(self, root_token: int, cfg: TreeConfig) -> DraftTree:
        """The proposals after root_token, the last committed token, as one tree; nothing is committed."""
        ...

    def reset(self) -> None:
        """Drop the run's state."""
        ...
