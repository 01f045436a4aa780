"""Acceptance of every candidate draft shape, replayed on the target's own greedy text (for `autotree`).

No model of acceptance: for greedy decoding a shape's accepted length at a position is a fact that can be
read off once the target's continuation is known.

1. The engine generates a short greedy continuation of a calibration prompt (greedy EAGLE output equals plain
   decoding, whatever the shape), so the prompt plus it is the target's own text S.
2. One target forward over S gives every position's features, one draft extend over all of them the draft's
   output at every position. The state "S[..m] committed" is the draft's cache cut to m entries, its output at
   m - 1 and the root S[m]: exactly where an engine round starts. States are visited from the end backwards, so
   cutting the draft's cache is all that moving between them takes.
3. At each state the drafter grows the EAGLE-2 candidates once per top-k at its deepest depth (the candidates
   of a shallower depth are a prefix of them) and drafts the longest chain. A tree (total, depth, top-k) keeps
   the total - 1 best candidates by path score, with `tree.select_tree`'s tie rule; its accepted length is how
   far S[m+1..] runs down the kept nodes.
4. A shape's tau is the walk an engine run takes over the same text: from the state after the prompt, accept,
   jump past the accepted tokens and the bonus, repeat. All shapes are scored on the same text.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import torch

from .config import RunConfig, TreeConfig
from .events import DraftNode, Finish, Round

__all__ = ["Group", "Replay", "replay", "replay_prompt", "shapes_of", "walk_tau"]

MIN_STATES = 12  # states scored per prompt however late it runs


@dataclass(frozen=True)
class Group:
    """The candidates grown once per state: a top-k (1 = the chain) at its deepest depth, and the totals
    (tokens verified, root included) its shapes may keep."""

    top_k: int
    depth: int
    totals: tuple[int, ...] = ()


@dataclass
class Replay:
    """Accepted lengths per shape per state, summed over the prompts replayed so far."""

    accepted: dict = field(default_factory=dict)  # TreeConfig -> list of per-prompt {state m: accepted}
    rank_offered: list = field(default_factory=list)  # [depth][rank] counts for the rank model (autotree)
    rank_accepted: list = field(default_factory=list)
    lead: list = field(default_factory=list)
    states: int = 0
    tokens: int = 0
    engine_seconds: float = 0.0  # the generations themselves (clock of the replay), prefill included
    engine_rounds: int = 0
    engine_tokens: int = 0
    prompt_tokens: int = 0
    runs: int = 0


def shapes_of(group: Group) -> list[TreeConfig]:
    """The shapes one group's candidates score: chains 1..depth, or every (total, depth) that keeps more nodes
    than its depth and no more than the expansion proposes."""
    if group.top_k == 1:
        return [TreeConfig.chain(d) for d in range(1, group.depth + 1)]
    out = []
    for depth in range(1, group.depth + 1):
        for total in group.totals:
            tree = TreeConfig(depth=depth, top_k=group.top_k, total_tokens=total)
            if depth < total - 1 <= tree.max_draft_nodes:
                out.append(tree)
    return out


def _continuation(engine, ids: list[int], new_tokens: int, tree: TreeConfig, into: Replay,
                  clock: Callable[[], float]) -> list[int]:
    run = RunConfig(max_new_tokens=new_tokens, ignore_eos=True, tree=tree)
    start = clock()
    finish = [ev for ev in engine.generate(ids, run) if isinstance(ev, Finish)][0]
    into.engine_seconds += clock() - start
    into.engine_rounds += finish.rounds
    into.engine_tokens += finish.new_tokens
    into.prompt_tokens += len(ids)
    into.runs += 1
    return list(finish.token_ids)


def replay_prompt(engine, ids: list[int], groups: list[Group], new_tokens: int, gen_tree: TreeConfig,
                  into: Replay, deadline: float = math.inf, clock: Callable[[], float] = time.perf_counter) -> None:
    """Generate, then score every group's shapes at every state of this prompt's continuation (adds to into);
    past the deadline the states scored so far (the last ones, MIN_STATES at least) stand for the prompt."""
    text = list(ids) + _continuation(engine, ids, new_tokens, gen_tree, into, clock)
    deepest = max(g.depth for g in groups)
    first, last = len(ids), len(text) - 1 - deepest  # states whose next `deepest` tokens are known
    if last < first:
        return
    runner, drafter = engine.runner, engine.drafter
    with engine.lock:
        runner.reset(len(text))
        drafter.reset()
        drafter.reserve(len(text) + 8 * max(g.top_k for g in groups))
        with torch.inference_mode():
            out = runner.forward(torch.tensor(text[:-1]))  # features [N-1, F]
        runner.reset()
        g = drafter.extend(out.features, torch.tensor(text[1:]))  # [N-1, H]: the draft output after each pair
        per_shape: dict[TreeConfig, dict[int, int]] = {}
        ranked = next((grp for grp in groups if grp.top_k > 1), None)  # its candidates feed the rank model too
        for m in range(last, first - 1, -1):
            if last - m >= MIN_STATES and clock() > deadline:
                first = m + 1
                break
            drafter.cache.crop(m - drafter.cache.get_seq_length())
            drafter.length, drafter.last_g = m, g[m - 1]
            future = text[m + 1:m + 1 + deepest]
            for group in groups:
                counts = into if group is ranked else None
                for shape, a in _score_state(drafter, text[m], future, group, counts).items():
                    per_shape.setdefault(shape, {})[m] = a
        drafter.reset()
    for shape, by_state in per_shape.items():
        into.accepted.setdefault(shape, []).append(by_state)
    into.states += last - first + 1
    into.tokens += len(text) - len(ids)


def _score_state(drafter, root: int, future: list[int], group: Group,
                 counts: Replay | None) -> dict[TreeConfig, int]:
    """Accepted length of each of the group's shapes at this state; counts: add the rank model's counts."""
    if group.top_k == 1:
        drafted = drafter.draft(root, TreeConfig.chain(group.depth)).token_list[1:]
        run = 0
        while run < len(drafted) and drafted[run] == future[run]:
            run += 1
        return {TreeConfig.chain(d): min(d, run) for d in range(1, group.depth + 1)}
    cand = drafter.candidates(TreeConfig(depth=group.depth, top_k=group.top_k, total_tokens=2))
    tokens, parents, depths, scores, logp = torch.stack(
        [cand.tokens.double(), cand.parents.double(), cand.depths.double(), cand.scores.double(),
         cand.logp.double()]).tolist()  # one host copy
    path = _true_path(tokens, parents, future, group.depth)
    if counts is not None:
        _count_ranks(counts, tokens, parents, depths, logp, path)
    out = {}
    k = group.top_k
    for depth in range(1, group.depth + 1):
        m = k + (depth - 1) * k * k  # the candidates of this depth: a prefix
        ranks = [sum(1 for i in range(m) if scores[i] > scores[p] or (scores[i] == scores[p] and i < p))
                 for p in path[:depth]]
        for total in group.totals:
            tree = TreeConfig(depth=depth, top_k=k, total_tokens=total)
            if depth < total - 1 <= tree.max_draft_nodes:
                out[tree] = sum(1 for _ in _while_below(ranks, total - 1))
    return out


def _while_below(ranks: list[int], keep: int):
    for r in ranks:  # ranks grow down the path (a child never outscores its parent)
        if r >= keep:
            return
        yield r


def _true_path(tokens: list, parents: list, future: list[int], depth: int) -> list[int]:
    """Candidate indices of the target's own continuation, depth by depth, as far as the candidates hold it."""
    path, parent = [], -1
    for d in range(min(depth, len(future))):
        nxt = next((i for i, (t, p) in enumerate(zip(tokens, parents))
                    if int(p) == parent and int(t) == future[d]), None)
        if nxt is None:
            break
        path.append(nxt)
        parent = nxt
    return path


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


def _count(ev: Round, offered, accepted, lead=None) -> None:
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


def replay(engine, prompts: list[list[int]], groups: list[Group], new_tokens: int, gen_tree: TreeConfig,
           budget_s: float, clock: Callable[[], float] = time.perf_counter) -> Replay:
    """Replay every prompt, each in an equal share of the budget (MIN_STATES states of each at least)."""
    out = Replay()
    start = clock()
    for i, ids in enumerate(prompts):
        replay_prompt(engine, ids, groups, new_tokens, gen_tree, out, start + budget_s * (i + 1) / len(prompts),
                      clock)
    return out
