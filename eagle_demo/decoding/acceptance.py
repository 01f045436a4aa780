"""Verification: walk the draft tree with the target's choices.

Greedy: at each node the target's token is the argmax; descend into the child carrying it.
Sampling: at each node draw the target's token from the processed distribution with the position-keyed
sampler; descend if a child carries it, else it is the bonus (correction). Drafts are point masses, so
this "sample and match" rule emits exactly the target's distribution (tests/test_sampling.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..common.config import SamplingConfig
from .sampling import PositionSampler, penalize, process_logits
from .tree import DraftTree

__all__ = ["Verdict", "verify_tree"]


@dataclass(frozen=True)
class Verdict:
    path: tuple[int, ...]  # accepted node indices, root excluded
    bonus_id: int
    target_probs: tuple[float, ...]  # processed target probability of each accepted token, then the bonus


def verify_tree(tree: DraftTree, logits: torch.Tensor, cfg: SamplingConfig,
                sampler: PositionSampler | None, position: int, seen: torch.Tensor | None = None) -> Verdict:
    """logits [N, V] from the tree forward; position = output index of the first token to commit; seen [V] bool:
    the prompt's and committed tokens, for the repetition penalty (each node adds the drafts on its path)."""
    path: list[int] = []
    probs_out: list[float] = []
    node = 0
    if seen is not None:  # given only when the run sets a penalty
        logits = penalize(logits, seen, cfg, (tree.tokens, tree.mask))  # [N, V] each node over its own path too
    if cfg.greedy:
        x = logits.float()  # [N, V]
        best = x.max(dim=-1)  # the target's token at every node and its logit
        prob = (best.values - torch.logsumexp(x, dim=-1)).exp()  # [N] its probability
        choice, p = tree.read_with(torch.stack([best.indices.float(), prob]))  # with the tree: one read a round
        while True:
            token = int(choice[node])
            probs_out.append(p[node])
            child = tree.children[node].get(token)
            if child is None:
                break
            path.append(child)
            node = child
        return Verdict(tuple(path), token, tuple(probs_out))
    assert sampler is not None, "sampling needs the run's sampler"
    while True:
        p = process_logits(logits[node:node + 1], cfg)[0]  # [V]
        token = sampler.sample(p, position + len(path))
        probs_out.append(float(p[token]))
        child = tree.children[node].get(token)
        if child is None:
            break
        path.append(child)
        node = child
    return Verdict(tuple(path), int(token), tuple(probs_out))
