"""Verification: walk the draft tree with the target's choices.

Greedy: at each node the target's token is the argmax; descend into the child carrying it.
Sampling: at each node draw the target's token from the processed distribution with the position-keyed
sampler; descend if a child carries it, else it is the bonus (correction). Drafts are point masses, so
this "sample and match" rule emits exactly the target's distribution (tests/test_sampling.py checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import SamplingConfig
from .sampling import PositionSampler, process_logits
from .tree import DraftTree

__all__ = ["Verdict", "verify_tree"]


@dataclass(frozen=True)
class Verdict:
    path: tuple[int, ...]  # accepted node indices, root excluded
    bonus_id: int
    target_probs: tuple[float, ...]  # processed target probability of each accepted token, then the bonus


def verify_tree(tree: DraftTree, logits: torch.Tensor, cfg: SamplingConfig,
                sampler: PositionSampler | None, position: int) -> Verdict:
    """logits [N, V] from the tree forward; position = output index of the first token to commit."""
    path: list[int] = []
    probs_out: list[float] = []
    node = 0
    if cfg.greedy:
        choice = torch.argmax(logits, dim=-1).tolist()  # [N]
        while True:
            token = choice[node]
            child = tree.children[node].get(token)
            if child is None:
                break
            path.append(child)
            node = child
        nodes = [0] + path
        tokens = [tree.token_list[i] for i in path] + [token]
        probs = torch.softmax(logits[nodes].float(), dim=-1)  # [len(path)+1, V]
        probs_out = probs[torch.arange(len(nodes)), torch.tensor(tokens)].tolist()
        return Verdict(tuple(path), int(token), tuple(probs_out))
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
