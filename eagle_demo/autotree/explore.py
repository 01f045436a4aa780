"""The shape explorer: after a run, every candidate draft shape replayed on that run's own text.

The automatic tree replays the candidates on calibration text (`autotree_replay`); this replays them on the
prompt and the output of a finished run, with the same machinery (`replay_batch`): one target forward over the
text, one draft extend, every state's candidates grown at once, and for each shape the walk an engine run would
take. For greedy decoding the walk is exact: the shape that ran replays to the engine's measured tau on the same
text (tests/test_explore.py), and every other shape's tau is what it would have measured. A round's price comes
from the automatic tree's cost model (`autotree_costs`), so speedups are predictions, with the error the
predicted-against-measured checks found (`KNOWN_ERROR`).

A sampled run's text is replayed as if greedy (accepted = the draft guessed the token the run committed): a
lower bound's shape, not the run's own acceptance, and the explorer says so.

    shapes = explore(session, prompt_ids, output_ids, ran=run.tree)   # Exploration: rows, best, ran_tau
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..common.config import TreeConfig
from . import replay_batch
from .choose import groups as candidate_groups
from .choose import hot_sizes, round_cost
from .costs import Costs
from .replay import Group, shapes_of

__all__ = ["ShapeRow", "Exploration", "explore", "replay_text", "walk", "KNOWN_ERROR", "KNOWN_ERROR_SOURCE"]

# What the predicted round cost missed by, measured / predicted, over the shapes raced in the predicted-against-
# measured checks (docs/perf.md "Automatic tree": 7 shapes x 2 pairs, CPU time, one thread; "Timing the chosen
# shape": the chosen shape on 2 pairs): 0.97 to 1.28. A predicted speedup reads as measured between
# predicted / 1.28 and predicted / 0.97. On the run's own greedy text the tau has no error.
KNOWN_ERROR = (0.97, 1.28)
KNOWN_ERROR_SOURCE = ("round cost measured / predicted 0.97-1.28 over 14 raced shapes on two pairs "
                      "(docs/perf.md, Automatic tree; scripts/autotree_check.py)")


@dataclass(frozen=True)
class ShapeRow:
    tree: TreeConfig
    tau: float  # tokens per round replayed on the run's text (accepted + bonus)
    round_cost: float  # predicted, in plain decoding steps (0 without costs)
    speedup: float  # tau / round_cost (0 without costs)
    drafted: float = 0.0  # a stopping chain's mean draft tokens per round on the same walk


@dataclass(frozen=True)
class Exploration:
    rows: tuple[ShapeRow, ...]  # every candidate, the shape that ran included
    ran: TreeConfig | None
    measured_tau: float | None  # the run's own tau, for the line beside the replayed one
    tokens: int  # new tokens replayed
    greedy: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best(self) -> ShapeRow:
        key = (lambda r: (r.speedup, r.tau)) if any(r.speedup for r in self.rows) else (lambda r: r.tau)
        return max(self.rows, key=key)

    def row(self, tree: TreeConfig | None) -> ShapeRow | None:
        return next((r for r in self.rows if r.tree == tree), None)

    def summary(self) -> str:
        """One line: the shape that ran against the best, with the prediction's known error."""
        best, ran = self.best, self.row(self.ran)
        low, high = KNOWN_ERROR
        parts = [f"best on this text: {best.tree.label()}, tau {best.tau:.2f}"]
        if best.speedup:
            parts[0] += f", predicted {best.speedup:.2f}x ({best.speedup / high:.2f}-{best.speedup / low:.2f}x)"
        if ran is not None:
            seen = f" (measured {self.measured_tau:.2f})" if self.measured_tau is not None else ""
            pay = f", predicted {ran.speedup:.2f}x" if ran.speedup else ""
            parts.append(f"ran {ran.tree.label()}: replayed tau {ran.tau:.2f}{seen}{pay}")
        return "; ".join(parts + list(self.notes))

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "greedy": self.greedy, "ran": self.ran.label() if self.ran else None,
                "measured_tau": self.measured_tau, "best": self.best.tree.label(), "known_error": list(KNOWN_ERROR),
                "known_error_source": KNOWN_ERROR_SOURCE, "notes": list(self.notes),
                "shapes": [{"tree": r.tree.label(), "depth": r.tree.depth, "top_k": r.tree.top_k,
                            "total_tokens": r.tree.total_tokens, "stop_below": r.tree.stop_below,
                            "hot_vocab": r.tree.hot_vocab, "tau": round(r.tau, 4), "round_cost": round(r.round_cost, 4),
                            "speedup": round(r.speedup, 4)} for r in self.rows]}


def _group_for(tree: TreeConfig) -> Group:
    """The replay group that scores exactly `tree` (a shape outside the device's candidates)."""
    if tree.is_chain:
        stops = ((tree.depth, tree.stop_below),) if tree.stops else ()
        return Group(1, tree.depth, stops=stops, fixed=tree.depth, hot=tree.hot_vocab)
    return Group(tree.top_k, tree.depth, (tree.total_tokens,))


def explore(session, prompt_ids: list[int], output_ids: list[int], ran: TreeConfig | None = None,
            costs: Costs | None = None, scale: float = 1.0, measured_tau: float | None = None,
            greedy: bool = True) -> Exploration:
    """Every candidate shape (and `ran`) replayed on prompt + output. costs: the automatic tree's (its
    `ShapeTable.costs` and `scale`); None: taus only."""
    engine = session.eagle
    if engine is None:
        raise ValueError("the shape explorer needs a draft; load a pair with a draft head")
    if len(output_ids) < 2:
        raise ValueError("the run produced fewer than 2 tokens; nothing to replay")
    dev = engine.runner.device
    groups = list(candidate_groups(dev, hot_sizes(engine)))
    shapes = [s for g in groups for s in shapes_of(g)]
    if ran is not None and ran not in shapes:
        groups.append(_group_for(ran))
        shapes.append(ran)
    accepted, drafted = replay_text(engine, prompt_ids, output_ids, groups)
    end = len(prompt_ids) + len(output_ids)
    rows = []
    for shape in dict.fromkeys(shapes):
        tau, mean = walk(accepted[shape], len(prompt_ids), end, drafted.get(shape))
        cost = round_cost(costs, shape, tau, scale, mean if shape in drafted else None) if costs else 0.0
        rows.append(ShapeRow(shape, tau, cost, tau / cost if cost else 0.0, mean))
    notes = () if greedy else ("sampled run: replayed as if greedy on the committed text",)
    return Exploration(tuple(rows), ran, measured_tau, len(output_ids), greedy, notes)


def walk(by_state: dict[int, int], first: int, end: int, drafted: dict[int, int] | None = None) -> tuple[float, float]:
    """(tokens per round, draft tokens per round) of an engine run over a text of `end` tokens whose prompt is
    `first` long: from the state after the prefill token, accept, commit accepted + bonus cut at the text's end
    (as the engine cuts at max_new_tokens or EOS), jump, repeat."""
    tokens = rounds = spent = 0
    m = first
    while m < end - 1:
        a = by_state[m]
        got = min(a + 1, end - 1 - m)
        tokens, rounds, m = tokens + got, rounds + 1, m + got
        spent += drafted[m - got] if drafted else 0
    return (tokens / rounds if rounds else 1.0), (spent / rounds if rounds else 0.0)


@torch.inference_mode()
def replay_text(engine, prompt_ids: list[int], output_ids: list[int],
                groups: list[Group]) -> tuple[dict[TreeConfig, dict[int, int]], dict[TreeConfig, dict[int, int]]]:
    """Accepted length of every group's shapes at every state of the text (and a stopping chain's draft tokens):
    `autotree_replay.replay_prompt` to the text's last state, the tokens past the end unknown (never accepted)."""
    text = list(prompt_ids) + list(output_ids)
    deepest = max(g.depth for g in groups)
    runner, head, dev = engine.runner, engine.drafter.head, engine.drafter.device
    accepted: dict[TreeConfig, dict[int, int]] = {}
    drafted: dict[TreeConfig, dict[int, int]] = {}
    with engine.lock:
        runner.reset(len(text))
        out = runner.forward(torch.tensor(text[:-1]))  # features [N-1, F]
        runner.reset()
        every = torch.tensor(text, device=dev)  # [N]
        padded = torch.cat([every, torch.full((deepest,), -1, device=dev)])  # [N + deepest] -1: unknown
        kv, g = replay_batch.extend_text(head, out.features.to(dev, engine.drafter.dtype), every)  # g [N-1, H]
        states = torch.arange(len(prompt_ids), len(text) - 1, device=dev)  # [S] committed lengths m; root text[m]
        future = padded[states[:, None] + 1 + torch.arange(deepest, device=dev)]  # [S, deepest]
        keys = states.tolist()
        for group in groups:
            hot = replay_batch.hot_table(head, group.hot, every) if group.hot else None
            batch = replay_batch.grow(head, kv, g, states, group.top_k, group.depth, hot)
            path = replay_batch.true_path(batch, future[:, :group.depth])  # [S, depth]
            if group.top_k == 1:
                run = (path >= 0).int().cumprod(1).sum(1)  # [S] how far the chain matches
                for d in range(1, (group.fixed or group.depth) + 1):
                    accepted[TreeConfig.chain(d, hot_vocab=group.hot)] = dict(zip(keys, run.clamp(max=d).tolist()))
                for d, stop in group.stops:
                    n = 1 + (batch.scores[:, :d - 1] >= math.log(stop)).sum(1)  # [S] tokens the chain drafts
                    shape = TreeConfig.chain(d, stop, group.hot)
                    accepted[shape] = dict(zip(keys, torch.minimum(run, n).tolist()))
                    drafted[shape] = dict(zip(keys, n.tolist()))
                continue
            shapes = shapes_of(group)
            got = replay_batch.accepted_lengths(batch, path, [(t.depth, t.total_tokens) for t in shapes])
            for t in shapes:
                accepted[t] = dict(zip(keys, got[(t.depth, t.total_tokens)].tolist()))
    return accepted, drafted
