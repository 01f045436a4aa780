"""Greedy continuations of several prompts at once: one target forward per step for all of them.

The prompts share one cache, packed one after another, then one entry per prompt per step. A block-diagonal
additive mask keeps each prompt to its own entries and each prompt's position ids restart at 0, so every row
computes what a run of its prompt alone computes, over a wider but masked key set (its sums may round
differently in the last bits, so on an exact near-tie a row may take the other token). For calibration
(`autotree_replay`): the text costs the same few forwards whatever the draft, where a speculative engine run
over a weak draft costs more than plain decoding.
"""

from __future__ import annotations

import torch

from ..target.kv import BufferCache
from ..target.runner import TargetRunner, tree_attention_mask

__all__ = ["greedy_texts"]


@torch.inference_mode()
def greedy_texts(runner: TargetRunner, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    """Each prompt's greedy continuation of `new_tokens` tokens (argmax of the target's logits, first index on
    ties, as `sampling.pick` takes it; EOS is not special)."""
    if not prompts or any(not p for p in prompts):
        raise ValueError("every calibration prompt needs at least one token")
    dev = runner.device
    b = len(prompts)
    lengths = torch.tensor([len(p) for p in prompts], device=dev)  # [B]
    rows = torch.arange(b, device=dev)  # [B]
    owner = torch.repeat_interleave(rows, lengths)  # [P] the prompt each packed entry belongs to
    positions = torch.cat([torch.arange(len(p), device=dev) for p in prompts])  # [P]
    ids = torch.tensor([t for p in prompts for t in p], device=dev)  # [P]
    total = owner.shape[0] + b * new_tokens
    keys = torch.cat([owner, rows.repeat(max(new_tokens - 1, 0))])  # [total - B] the owner of every cache entry
    cache = BufferCache(runner.num_layers, total)
    visible = (owner[:, None] == owner[None]) & (positions[None] <= positions[:, None])  # [P, P] causal, per prompt
    key_positions = positions  # [P] the position of every cache entry (for a sliding window)
    hidden = _forward(runner, cache, ids, positions, visible, key_positions)  # [P, H]
    last = hidden[torch.cumsum(lengths, 0) - 1]  # [B, H] each prompt's last entry
    token = runner.logit_head(runner.lm_head(last)).argmax(-1)  # [B] each prompt's first new token
    out, width = [token], owner.shape[0]
    for step in range(1, new_tokens):
        width += b
        visible = keys[None, :width] == rows[:, None]  # [B, width] each row sees its own prompt's entries
        key_positions = torch.cat([key_positions, lengths + step - 1])  # [width]
        hidden = _forward(runner, cache, token, lengths + step - 1, visible, key_positions)  # [B, H]
        token = runner.logit_head(runner.lm_head(hidden)).argmax(-1)  # [B]
        out.append(token)
    return torch.stack(out, 1).tolist()  # [B, new_tokens]


def _forward(runner: TargetRunner, cache: BufferCache, ids: torch.Tensor, positions: torch.Tensor,
             visible: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
    """The target's base model over new entries ids [n] at positions [n], each row seeing `visible` [n, width]
    of the cache after them (entries at key_positions [width]); returns the last hidden states [n, H]."""
    full = tree_attention_mask(0, visible, runner.dtype)  # [1, 1, n, width] additive, no prefix
    mask = runner.window.apply(full, key_positions, positions)  # the target's sliding window, if one is in use
    out = runner.base(input_ids=ids[None], attention_mask=mask, position_ids=positions[None], cache=cache,
                      use_cache=True)
    return out.last_hidden_state[0]  # [n, H]
