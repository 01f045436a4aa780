"""Grow the draft candidates of many replayed states at once (for `autotree_replay`).

The states of one text share the draft's cache over the whole text. A state "the first m positions committed"
is a row set that sees the cache up to m and, among the round's new entries, its own ancestors and itself; so
one head forward per depth grows the EAGLE-2 candidates of every state in a chunk, where the drafter would take
one forward per depth per state. The expansion is the drafter's own (`Drafter.candidates`): the same top-k per
node, the same frontier of the k best path scores, the same depth-major order of the candidates.

Then, with tensor ops, the accepted length of every shape of a group at every state: the target's own
continuation is followed down the candidates, and a tree (total, depth) keeps the total - 1 best-scored
candidates of its depth (`tree.select_tree`'s tie rule: the earlier candidate first).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..decoding.hot_vocab import HotVocab
from ..drafts.lean import DraftKV

__all__ = ["Batch", "accepted_lengths", "extend_text", "grow", "true_path"]

ROWS = 256  # draft rows per forward: states per chunk = ROWS // top-k


@dataclass(frozen=True)
class Batch:
    """The candidates of S states, depth-major as `tree.Candidates`, one row per state."""

    tokens: torch.Tensor  # [S, M] long
    parents: torch.Tensor  # [S, M] long, candidate index, -1 = child of the root
    scores: torch.Tensor  # [S, M] cumulative log-probability
    logp: torch.Tensor  # [S, M] log-probability given the parent
    depths: torch.Tensor  # [M] long, >= 1
    top_k: int


@torch.inference_mode()
def extend_text(head, features: torch.Tensor, text: torch.Tensor) -> tuple[DraftKV, torch.Tensor]:
    """The draft's cache over a whole text and its output after every position: features [N-1, F] of the
    target at positions 0..N-2, text [N]. Returns (cache with N-1 entries, g [N-1, H])."""
    kv = DraftKV(capacity=2 * text.shape[0])
    rope = getattr(head, "rope", None)
    if rope is not None:  # the rotary table up to the deepest draft position (the drafter's own pools untouched)
        rope.reserve(2 * text.shape[0], head.fc.weight)
    positions = torch.arange(text.shape[0] - 1, device=features.device)  # [N-1]
    g = head(features, text[1:], positions, kv, None, from_target=True)  # [N-1, H]
    return kv, g


def hot_table(head, size: int, text: torch.Tensor) -> tuple[HotVocab, torch.Tensor]:
    """A hot vocabulary of `size` first ids holding every id the text extends (text[1:]), and each row's first
    position in the text (0 for the first ids): the state of prefix m sees the rows at positions up to m, the ids
    its context has extended, as a drafter's table holds them at that state (`Drafter._hot_table`)."""
    ids = text[1:].tolist()
    table = HotVocab(head, size, room=len(ids))
    table.add(ids)
    first: dict[int, int] = {}
    for j, t in enumerate(ids, start=1):
        first.setdefault(t, j)
    extra = [first[t] for t in table.ids[size:table.n].tolist()]
    return table, torch.tensor([0] * size + extra, device=text.device)  # [n]


@torch.inference_mode()
def grow(head, kv: DraftKV, g: torch.Tensor, prefixes: torch.Tensor, top_k: int, depth: int,
         hot: tuple[HotVocab, torch.Tensor] | None = None) -> Batch:
    """The candidates of the states with the given prefix lengths (prefixes [S], each >= 1), in chunks of
    ROWS draft rows. kv: the cache over the text (`extend_text`), left as it was. hot: a `hot_table` of the text,
    whose rows each state sees up to its own prefix (`TreeConfig.hot_vocab`); None: the head's whole vocabulary."""
    chunk = max(1, ROWS // top_k)  # states per forward
    parts = [_grow(head, kv, g, prefixes[i:i + chunk], top_k, depth, hot) for i in range(0, prefixes.shape[0], chunk)]
    tokens, parents, scores, logp = (torch.cat([getattr(p, f) for p in parts]) for f in ("tokens", "parents", "scores",
                                                                                        "logp"))
    return Batch(tokens, parents, scores, logp, depths=parts[0].depths, top_k=top_k)


def _picker(head, hot: tuple[HotVocab, torch.Tensor] | None, prefixes: torch.Tensor, dtype: torch.dtype):
    """The top-k of the rows of these states (each state's rows in a block, state by state)."""
    if hot is None:
        return head.topk
    table, first = hot
    seen = torch.where(first[None] <= prefixes[:, None], 0.0, float("-inf")).to(dtype)  # [S, n] additive

    def topk(x: torch.Tensor, k: int):
        per = x.shape[0] // seen.shape[0]  # rows per state: 1 for a chain, k at a tree's later depths
        return table.topk(x, k, seen if per == 1 else seen.repeat_interleave(per, 0))
    return topk


def _grow(head, kv: DraftKV, g: torch.Tensor, prefixes: torch.Tensor, k: int, depth: int,
          hot: tuple[HotVocab, torch.Tensor] | None) -> Batch:
    dev, dtype = g.device, g.dtype
    topk = _picker(head, hot, prefixes, dtype)
    s, base = prefixes.shape[0], kv.get_seq_length()
    low = torch.finfo(dtype).min
    last_g = g[prefixes - 1]  # [S, H] the draft output at each state's last committed position
    logp, ids = topk(last_g, k)  # [S, k], [S, k]
    tokens, scores, logps, frontiers = [ids], [logp], [logp], []
    frontier = torch.arange(k, device=dev).expand(s, k)  # [S, k] candidate ids to expand
    f_scores, f_tokens = logp, ids  # [S, k], [S, k]
    f_hidden = last_g[:, None].expand(s, k, -1)  # [S, k, H]
    seen = torch.arange(base, device=dev)[None] < prefixes[:, None]  # [S, base] each state's committed cache
    prefix_rows = torch.where(seen, 0.0, low).to(dtype)[:, None].expand(s, k, base)  # [S, k, base]
    eye = torch.eye(k, dtype=torch.bool, device=dev).expand(s, k, k)  # [S, k, k]
    ancestors = eye[:, :, :0]  # [S, k, t*k] each frontier row's ancestors among its state's tree entries
    offset = k
    for step in range(2, depth + 1):
        t = step - 2  # tree blocks written so far
        vis = torch.cat([ancestors, eye], 2)  # [S, k, (t+1)*k]
        block = torch.arange(t + 1, device=dev)[:, None] * (s * k) + torch.arange(k, device=dev)  # [t+1, k]
        cols = base + (block[None] + (torch.arange(s, device=dev) * k)[:, None, None]).reshape(s, -1)  # [S, (t+1)k]
        mask = torch.full((s, k, base + (t + 1) * s * k), low, dtype=dtype, device=dev)  # [S, k, width]
        mask[:, :, :base] = prefix_rows
        mask.scatter_(2, cols[:, None].expand(s, k, -1), torch.where(vis, 0.0, low).to(dtype))
        positions = (prefixes + t)[:, None].expand(s, k).reshape(-1)  # [S*k] siblings share a position
        out = head(f_hidden.reshape(s * k, -1), f_tokens.reshape(-1), positions, kv,
                   mask.reshape(1, 1, s * k, -1))  # [S*k, H]
        logp, ids = (x.reshape(s, k, k) for x in topk(out, k))  # [S, k, k] per frontier row
        cum = f_scores[:, :, None] + logp  # [S, k, k]
        tokens.append(ids.reshape(s, -1))
        scores.append(cum.reshape(s, -1))
        logps.append(logp.reshape(s, -1))
        frontiers.append(frontier)
        if step == depth:
            break
        top = torch.topk(cum.reshape(s, -1), k)  # [S, k] over each state's k*k new candidates
        local = top.indices // k  # [S, k] the frontier row each new frontier node hangs from
        frontier, f_scores = offset + top.indices, top.values
        f_tokens = ids.reshape(s, -1).gather(1, top.indices)  # [S, k]
        f_hidden = out.reshape(s, k, -1).gather(1, local[..., None].expand(-1, -1, out.shape[-1]))  # [S, k, H]
        ancestors = vis.gather(1, local[..., None].expand(-1, -1, vis.shape[-1]))  # [S, k, (t+1)*k]
        offset += k * k
    if kv.get_seq_length() > base:
        kv.crop(base - kv.get_seq_length())  # the tree entries go; the text's cache stays
    roots = torch.full((s, k), -1, dtype=torch.long, device=dev)
    parents = [roots] + ([torch.stack(frontiers, 1).repeat_interleave(k, dim=2).reshape(s, -1)] if frontiers else [])
    depths = torch.cat([torch.ones(k, dtype=torch.long, device=dev)]
                       + [torch.full((k * k,), d, dtype=torch.long, device=dev) for d in range(2, depth + 1)])
    return Batch(torch.cat(tokens, 1), torch.cat(parents, 1), torch.cat(scores, 1), torch.cat(logps, 1), depths, k)


def true_path(batch: Batch, future: torch.Tensor) -> torch.Tensor:
    """Candidate index of the target's own continuation at each depth, -1 past where the candidates hold it:
    future [S, D] the tokens after each state's root; returns [S, D]."""
    s, depth = future.shape
    k = batch.top_k
    path = torch.full((s, depth), -1, dtype=torch.long, device=future.device)
    prev = torch.full((s,), -1, dtype=torch.long, device=future.device)
    alive = torch.ones(s, dtype=torch.bool, device=future.device)
    for d in range(depth):
        lo = 0 if d == 0 else k + (d - 1) * k * k
        hi = k if d == 0 else lo + k * k
        if hi > batch.tokens.shape[1]:
            break
        hit = (batch.parents[:, lo:hi] == prev[:, None]) & (batch.tokens[:, lo:hi] == future[:, d, None])  # [S, w]
        alive = alive & hit.any(1)
        prev = torch.where(alive, lo + hit.int().argmax(1), -1)
        path[:, d] = prev
    return path


def accepted_lengths(batch: Batch, path: torch.Tensor, shapes: list[tuple[int, int]]) -> dict:
    """{(depth, total): accepted [S]}: how far the true path runs down the total - 1 best candidates of depth
    `depth` (ranked by score; equal scores: the earlier candidate first)."""
    s, depth = path.shape
    k, m = batch.top_k, batch.scores.shape[1]
    valid = path >= 0  # [S, D]
    at = path.clamp(min=0)
    mine = batch.scores.gather(1, at)  # [S, D] the path nodes' scores
    idx = torch.arange(m, device=path.device)
    above = (batch.scores[:, None, :] > mine[..., None]) | (
        (batch.scores[:, None, :] == mine[..., None]) & (idx < at[..., None]))  # [S, D, M]
    before = above.int().cumsum(2)  # [S, D, M] rank of each path node among the first j+1 candidates
    out = {}
    for d, total in shapes:
        width = k + (d - 1) * k * k  # the candidates of depth <= d
        rank = before[:, :d, width - 1]  # [S, d]
        ok = valid[:, :d] & (rank < total - 1)  # [S, d]
        out[(d, total)] = ok.int().cumprod(1).sum(1)  # [S]
    return out
