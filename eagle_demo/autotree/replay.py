"""Acceptance of every candidate draft shape, replayed on the target's own greedy text (for `autotree`).

No model of acceptance: for greedy decoding a shape's accepted length at a position is a fact that can be
read off once the target's continuation is known.

1. The target continues every calibration prompt greedily, all prompts in one forward per step
   (`packed_text`), so each prompt plus its continuation is the target's own text S. The text costs the same
   whatever the draft: a weak draft's engine run would cost more than plain decoding.
2. One target forward over S gives every position's features, one draft extend over all of them the draft's
   cache and output at every position. The state "S[..m] committed" is the draft's cache up to m entries, its
   output at m - 1 and the root S[m]: exactly where an engine round starts.
3. Every state's EAGLE-2 candidates are grown at once, once per top-k at its deepest depth (`replay_batch`:
   one head forward per depth for a chunk of states, each state's rows masked to its own prefix and
   ancestors; the candidates of a shallower depth are a prefix of them; top-k 1 is the chain). A tree (total,
   depth, top-k) keeps the total - 1 best candidates by path score, with `tree.select_tree`'s tie rule; its
   accepted length is how far S[m+1..] runs down the kept nodes.
4. A shape's tau is the walk an engine run takes over the same text: from the state after the prompt, accept,
   jump past the accepted tokens and the bonus, repeat. All shapes are scored on the same text.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import torch

from ..common.config import RunConfig, TreeConfig
from ..decoding.events import DraftNode, Round, Step
from . import replay_batch
from .packed_text import greedy_texts

__all__ = ["Group", "Replay", "replay", "replay_prompt", "shapes_of", "walk_drafted", "walk_tau"]

TIMED_ROUNDS = 8  # rounds of each timed engine run (two runs, before and after the replay)


@dataclass(frozen=True)
class Group:
    """The candidates grown once per state: a top-k (1 = the chain) at its deepest depth, and the totals
    (tokens verified, root included) its shapes may keep."""

    top_k: int
    depth: int
    totals: tuple[int, ...] = ()
    stops: tuple[tuple[int, float], ...] = ()  # chains only: (longest, stop_below) of the stopping chains scored
    fixed: int = 0  # chains only: the longest fixed chain scored (0: depth)
    hot: int = 0  # chains only: drafts over the first `hot` ids and the context's (`TreeConfig.hot_vocab`; 0: all)


@dataclass
class Replay:
    """Accepted lengths per shape per state, summed over the prompts replayed so far."""

    accepted: dict = field(default_factory=dict)  # TreeConfig -> list of per-prompt {state m: accepted}
    drafted: dict = field(default_factory=dict)  # stopping chain -> list of per-prompt {state m: tokens drafted}
    rank_offered: list = field(default_factory=list)  # [depth][rank] counts for the rank model (autotree)
    rank_accepted: list = field(default_factory=list)
    lead: list = field(default_factory=list)
    states: int = 0
    tokens: int = 0


def shapes_of(group: Group) -> list[TreeConfig]:
    """The shapes one group's candidates score: chains 1..depth (or 1..fixed) and its stopping chains, or every
    (total, depth) that keeps more nodes than its depth and no more than the expansion proposes."""
    if group.top_k == 1:
        return ([TreeConfig.chain(d, hot_vocab=group.hot) for d in range(1, (group.fixed or group.depth) + 1)]
                + [TreeConfig.chain(d, stop, group.hot) for d, stop in group.stops])
    out = []
    for depth in range(1, group.depth + 1):
        for total in group.totals:
            tree = TreeConfig(depth=depth, top_k=group.top_k, total_tokens=total)
            if depth < total - 1 <= tree.max_draft_nodes:
                out.append(tree)
    return out


def timed_runs(engine, baseline, prompts: list[list[int]], tree: TreeConfig,
               clock: Callable[[], float] = time.perf_counter) -> tuple[tuple[float, float], ...]:
    """What the engine's bookkeeping adds to a round of `tree` (`autotree.overhead_scale`): two short runs, on the
    first prompt and on the last, each plain decoding then engine rounds timed apart (`_timed_run`; a burst of
    load seldom lifts both, and the cheaper counts). The calibration times the shape it chose, so the predicted
    speedup shown and the gate's break-even are the chosen shape's own."""
    return tuple(_timed_run(engine, baseline, ids, tree, clock) for ids in (prompts[0], prompts[-1]))


def _timed_run(engine, baseline, ids: list[int], tree: TreeConfig, clock: Callable[[], float]) -> tuple[float, float]:
    """`TIMED_ROUNDS` plain decoding steps of `baseline`, then as many rounds of an engine run of `tree`, each
    timed from the event before it (a prefill is neither): (the median round over the median step, the rounds'
    tokens per round). Both runs take a fraction of a second, so a machine that changes speed between
    calibration's phases changes both alike."""
    steps = _times(baseline.generate(ids, RunConfig(max_new_tokens=TIMED_ROUNDS + 1, ignore_eos=True)), Step,
                   clock)
    run = RunConfig(max_new_tokens=TIMED_ROUNDS * tree.total_tokens + 1, ignore_eos=True, tree=tree)
    stop = threading.Event()
    rounds = _times(engine.generate(ids, run, stop), Round, clock, stop)
    tau = sum(len(ev.committed_ids) for _, ev in rounds) / len(rounds)
    return statistics.median(t for t, _ in rounds) / statistics.median(t for t, _ in steps), tau


def _times(events, kind: type, clock: Callable[[], float], stop: threading.Event | None = None) -> list:
    """(seconds since the event before, event) of each `kind` event; stop: set after `TIMED_ROUNDS` of them."""
    out, last = [], clock()
    for ev in events:
        now = clock()
        if isinstance(ev, kind):
            out.append((now - last, ev))
            if stop is not None and len(out) == TIMED_ROUNDS:
                stop.set()  # the run ends before its next round
        last = now
    return out


def replay_prompt(engine, ids: list[int], continuation: list[int], groups: list[Group], into: Replay) -> None:
    """Score every group's shapes at every state of this prompt's greedy continuation (adds to into): one head
    forward per depth per chunk of states (`replay_batch`)."""
    text = list(ids) + list(continuation)
    deepest = max(g.depth for g in groups)
    first, last = len(ids), len(text) - 1 - deepest  # states whose next `deepest` tokens are known
    if last < first:
        return
    runner, head = engine.runner, engine.drafter.head
    dev = engine.drafter.device
    with engine.lock:
        runner.reset(len(text))
        with torch.inference_mode():
            out = runner.forward(torch.tensor(text[:-1]))  # features [N-1, F]
        runner.reset()
        every = torch.tensor(text, device=dev)  # [N]
        kv, g = replay_batch.extend_text(head, out.features.to(dev, engine.drafter.dtype), every)  # g [N-1, H]
        states = torch.arange(first, last + 1, device=dev)  # [S] committed lengths m; root text[m]
        future = every[states[:, None] + 1 + torch.arange(deepest, device=dev)]  # [S, deepest]
        ranked = next((grp for grp in groups if grp.top_k > 1), None)  # its candidates feed the rank model too
        per_shape: dict[TreeConfig, list[int]] = {}
        per_drafted: dict[TreeConfig, list[int]] = {}
        for group in groups:
            hot = replay_batch.hot_table(head, group.hot, every) if group.hot else None
            batch = replay_batch.grow(head, kv, g, states, group.top_k, group.depth, hot)
            path = replay_batch.true_path(batch, future[:, :group.depth])  # [S, depth]
            if group is ranked:
                _count_batch(into, batch, path)
            drafted = _chain_drafted(group, batch)  # stopping chains only
            for shape, got in _group_lengths(group, batch, path, drafted).items():
                per_shape[shape] = got.tolist()
            for shape, got in drafted.items():
                per_drafted[shape] = got.tolist()
    for shape, lengths in per_shape.items():
        into.accepted.setdefault(shape, []).append(dict(zip(range(first, last + 1), lengths)))
    for shape, lengths in per_drafted.items():
        into.drafted.setdefault(shape, []).append(dict(zip(range(first, last + 1), lengths)))
    into.states += last - first + 1
    into.tokens += len(text) - len(ids)


def _group_lengths(group: Group, batch, path: torch.Tensor,
                   drafted: dict[TreeConfig, torch.Tensor]) -> dict[TreeConfig, torch.Tensor]:
    """Accepted length [S] of each of the group's shapes at every state (drafted: `_chain_drafted`'s)."""
    if group.top_k == 1:
        run = (path >= 0).int().cumprod(1).sum(1)  # [S] how far the chain matches
        fixed = {TreeConfig.chain(d, hot_vocab=group.hot): run.clamp(max=d)
                 for d in range(1, (group.fixed or group.depth) + 1)}
        return fixed | {shape: torch.minimum(run, got) for shape, got in drafted.items()}
    shapes = shapes_of(group)
    got = replay_batch.accepted_lengths(batch, path, [(t.depth, t.total_tokens) for t in shapes])
    return {t: got[(t.depth, t.total_tokens)] for t in shapes}


def _chain_drafted(group: Group, batch) -> dict[TreeConfig, torch.Tensor]:
    """Tokens [S] each stopping chain of a chain group drafts at every state: the drafter's rule (`Drafter._chain`),
    one more step while the path's log-probability so far is at least log(stop); a chain's path scores only fall,
    so that is 1 + the number of its first depth - 1 scores at or over the floor."""
    if group.top_k != 1:
        return {}
    return {TreeConfig.chain(d, stop, group.hot): 1 + (batch.scores[:, :d - 1] >= math.log(stop)).sum(1)  # [S]
            for d, stop in group.stops}


def _count_batch(into: Replay, batch, path: torch.Tensor) -> None:
    """The rank model's counts from every state's candidates and true path (one host copy)."""
    depths = batch.depths.tolist()
    for tokens, parents, logp, row in zip(batch.tokens.tolist(), batch.parents.tolist(), batch.logp.tolist(),
                                          path.tolist()):
        _count_ranks(into, tokens, parents, depths, logp, [i for i in row if i >= 0])


def _count_ranks(into: Replay, tokens, parents, depths, logp, path) -> None:
    """The rank model's counts (`_count`) from this state's candidates and the true path."""
    depth = int(max(depths))
    k = sum(1 for p in parents if int(p) == -1)
    if not into.rank_offered:
        into.rank_offered = [[0] * k for _ in range(depth)]
        into.rank_accepted = [[0] * k for _ in range(depth)]
        into.lead = [[0, 0] for _ in range(depth)]
    nodes = [DraftNode(0, -1, 0, 1.0, 1.0)] + [
        DraftNode(int(t), int(p) + 1, int(d), math.exp(q), 0.0) for t, p, d, q in zip(tokens, parents, depths, logp)]
    ev = SimpleNamespace(nodes=nodes, accepted_path=tuple(i + 1 for i in path))
    _count(ev, into.rank_offered, into.rank_accepted, into.lead)


def _count(ev: Round | SimpleNamespace, offered, accepted, lead=None) -> None:
    """Add one round (its nodes and accepted path) to the rank model's counts."""
    kids: dict[int, list[tuple[float, int]]] = {}
    for i, node in enumerate(ev.nodes):
        if node.parent >= 0:
            kids.setdefault(node.parent, []).append((-node.draft_prob, i))
    parent, top1_path = 0, True
    for d in range(len(offered)):
        ranked = [i for _, i in sorted(kids.get(parent, []))][:len(offered[d])]
        for r in range(len(ranked)):
            offered[d][r] += 1
        if lead is not None and top1_path and ranked:
            lead[d][0] += 1
        nxt = ev.accepted_path[d] if d < len(ev.accepted_path) else None
        if nxt is None or nxt not in ranked:
            return
        r = ranked.index(nxt)
        accepted[d][r] += 1
        if lead is not None and top1_path and r == 0:
            lead[d][1] += 1
        top1_path = top1_path and r == 0
        parent = nxt


def walk_tau(by_prompt: list[dict[int, int]]) -> float:
    """Tokens per round of an engine run over the replayed text: from each prompt's first state, accept a,
    commit a + 1 tokens, continue from the state after them, until the states run out."""
    tokens = rounds = 0
    for by_state in by_prompt:
        if not by_state:
            continue
        m = min(by_state)
        while m in by_state:
            a = by_state[m]
            tokens, rounds, m = tokens + a + 1, rounds + 1, m + a + 1
    return tokens / rounds if rounds else 1.0


def walk_drafted(by_prompt: list[dict[int, int]], drafted: list[dict[int, int]]) -> float:
    """Draft tokens per round on `walk_tau`'s walk (a stopping chain's rounds draft 1..depth tokens)."""
    total = rounds = 0
    for by_state, counts in zip(by_prompt, drafted):
        if not by_state:
            continue
        m = min(by_state)
        while m in by_state:
            total, rounds, m = total + counts[m], rounds + 1, m + by_state[m] + 1
    return total / rounds if rounds else 1.0


def replay(engine, prompts: list[list[int]], groups: list[Group], new_tokens: int) -> Replay:
    """Replay every prompt, every state of each: the same text always gives the same figures."""
    out = Replay()
    with engine.lock:
        texts = greedy_texts(engine.runner, prompts, new_tokens)
    for ids, continuation in zip(prompts, texts):
        replay_prompt(engine, ids, continuation, groups, out)
    return out
