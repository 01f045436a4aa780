"""The shapes the automatic tree scores on a device: chains (on a CPU stopping ones, also over a hot vocabulary)
and trees of each top-k at every depth and total the device allows (top-8 to depth 2 on a CPU), so the short wide
trees a weak head needs are in the set as well as the deep ones a strong head needs."""

from __future__ import annotations

import torch

from ..common.config import TreeConfig
from ..drafts.base import shares_target_vocab
from .replay import Group, shapes_of

__all__ = ["candidates", "groups", "hot_sizes", "TOTALS_CPU", "TOTALS_GPU", "STOPS_CPU"]

TOTALS_CPU = (3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
TOTALS_GPU = (4, 6, 8, 12, 16, 24, 32, 48, 64)
# Stopping chains (`TreeConfig.stop_below`), CPU only: their stop reads one score per draft step, a sync on a GPU.
STOPS_CPU = (0.002, 0.005, 0.01, 0.02, 0.05)
# A stopping chain's draft over a quarter of the vocabulary, the lowest ids (`TreeConfig.hot_vocab`; FR-Spec keeps
# 32k of Llama 3's 128k), for heads whose logits are the target's lm_head, CPU only (measured there:
# docs/perf-history.md, "A hot vocabulary").
HOT_SHARE = 4
HOT_MIN_VOCAB = 4096


def hot_sizes(engine) -> tuple[int, ...]:
    """The hot vocabularies calibration scores for this engine's head: a quarter of the vocabulary for a head whose
    logits are the target's lm_head, from `HOT_MIN_VOCAB` ids; else none. On a GPU too: an EAGLE-1-shaped head's
    chain-7 draft over Llama-3's 128k lm_head took 2.55 ms over a quarter against 4.67 ms over all of it, replayed
    on an H100 (first ids only then; docs/gpu/h100_run2.json)."""
    head = engine.drafter.head
    if not shares_target_vocab(head):
        return ()
    vocab = int(head.lm_head.module.weight.shape[0])
    return (vocab // HOT_SHARE,) if vocab >= HOT_MIN_VOCAB else ()


def groups(device: torch.device, hot: tuple[int, ...] = ()) -> list[Group]:
    """What the replay grows per state: the chain, also over each hot vocabulary, and per top-k its deepest tree
    (the totals its shapes keep); on a CPU the chains stop (`STOPS_CPU`), on a GPU they run to their depth."""
    if device.type == "cpu":
        stops = tuple((d, p) for d in (8, 12, 16) for p in STOPS_CPU)
        chains = [Group(1, 16, stops=stops, fixed=8)] + [Group(1, 16, stops=stops, fixed=8, hot=n) for n in hot]
        return [*chains, Group(2, 6, TOTALS_CPU), Group(4, 6, TOTALS_CPU), Group(8, 2, TOTALS_CPU)]
    return [Group(1, 8), *(Group(1, 8, hot=n) for n in hot), Group(2, 8, TOTALS_GPU), Group(4, 8, TOTALS_GPU),
            Group(8, 7, TOTALS_GPU), Group(10, 6, TOTALS_GPU)]


def candidates(device: torch.device, hot: tuple[int, ...] = ()) -> list[TreeConfig]:
    """Every shape the calibration scores on this device: chains 1..8, and the trees of each top-k group."""
    return [shape for group in groups(device, hot) for shape in shapes_of(group)]
