"""Retuning the automatic tree on the run's own text: the shape follows the acceptance the rounds see.

The automatic tree (`autotree`) chooses a shape on its calibration text. A run's text can suit the draft better
or worse than that text (a head that knows docstrings drafts deep in a docstring), so the calibration's choice
can be too shallow or too deep there. Each drafting round adds its offered and accepted draft ranks to the
calibration's rank counts (`autotree_replay._count`), and every `EVERY` drafting rounds each candidate is scored
again:

    tau(shape) = replayed tau(shape) x rank-model tau(shape, counts now) / rank-model tau(shape, calibration counts)

Depths the run has not drafted to take the lift of the deepest depth it has (`Retuner.model`). With no
evidence every candidate keeps its replayed tau, so the choice is the calibration's. The best predicted
tau / round cost picks the next rounds' shape and the gate's break-even; a switch needs a `MARGIN` over the shape
in use. The calibration's counts weigh as `PRIOR` rounds, so the run's own rounds soon outweigh them.

A round's shape is a function of the rounds already committed, never of that round's own draws: greedy output is
unchanged, and sampled tokens keep the target's distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..common.config import TreeConfig
from ..decoding.events import Round
from .costs import Costs, Line
from .replay import _count

__all__ = ["ShapeTable", "Retuner", "rank_model", "model_tau", "EVERY", "PRIOR", "MARGIN", "SEEN", "CAP"]

EVERY = 8  # drafting rounds between two scorings
PRIOR = 8.0  # the calibration's counts weigh as this many rounds
MARGIN = 1.08  # a new shape must promise this much more speedup than the shape in use
SEEN = 4  # drafting rounds that reached a depth before the run's own rate there counts
CAP = 0.98  # the most an acceptance rate is lifted to at a depth the run has not drafted to


def rank_model(offered, accepted, lead) -> tuple[tuple, tuple]:
    """(rank, chain): rank[d-1][r] = P(rank-r child accepted | parent accepted) at depth d, and chain[d-1] = P(the
    first d top-1 drafts all accepted), from the counts."""
    if not offered:
        return ((0.0,),), (0.0,)
    depth, k = len(offered), len(offered[0])
    # shrunk towards zero: a rank seen rarely (deep, wide) is not trusted to accept
    rank = tuple(tuple(accepted[d][r] / (offered[d][r] + 1.0) for r in range(k)) for d in range(depth))
    # a chain's own conditional (top-1 child under an all-top-1 path), shrunk towards the any-parent rate
    top1 = [(lead[d][1] + rank[d][0]) / (lead[d][0] + 1.0) for d in range(depth)]
    return rank, tuple(math.prod(top1[:d + 1]) for d in range(depth))


def model_tau(rank: tuple, chain: tuple, tree: TreeConfig) -> float:
    """Expected tokens per round under the rank model: a chain from its survival figures; a tree by EAGLE-2
    selection over expected acceptance (expand the top-k frontier per depth, keep the best total - 1 nodes)."""
    if tree.is_chain:
        depth = min(tree.depth, tree.total_tokens - 1, len(chain))
        return 1.0 + sum(chain[:depth])

    def a(d: int, r: int) -> float:
        row = rank[min(d, len(rank)) - 1]
        return row[r] if r < len(row) else 0.0

    values, frontier = [], [1.0]
    for d in range(1, tree.depth + 1):
        children = [v * a(d, r) for v in frontier for r in range(tree.top_k)]
        values.extend(children)
        frontier = sorted(children, reverse=True)[:tree.top_k]
    return 1.0 + sum(sorted(values, reverse=True)[:tree.total_tokens - 1])


@dataclass(frozen=True)
class ShapeTable:
    """What the automatic tree knew when it chose: every candidate's replayed tau, the rank counts of the same
    replay, the round's part costs and the engine's overhead scale (`autotree.overhead_scale`)."""

    shapes: tuple[TreeConfig, ...]
    taus: tuple[float, ...]  # replayed tau per shape, on the calibration text
    offered: tuple[tuple[float, ...], ...]  # [depth][rank] counts
    accepted: tuple[tuple[float, ...], ...]
    lead: tuple[tuple[float, ...], ...]  # [depth] pairs (all-top-1 parents offered, their top-1 child accepted)
    costs: Costs
    scale: float = 1.0
    drafted: tuple[float, ...] = ()  # a stopping chain's mean draft tokens per round, 0 for the other shapes

    def retuner(self, tree: TreeConfig) -> "Retuner":
        """One run's retuning from this table, starting at `tree` (the engine calls this: it knows the table
        only through `RunConfig.retune`, so the decoding layer never imports the automatic tree)."""
        return Retuner(self, tree)

    def score(self, base: tuple[tuple, tuple], now: tuple[tuple, tuple]) -> list[tuple[float, float, TreeConfig]]:
        """(tau, round cost in plain steps, shape) of every candidate: its replayed tau moved by the rank model
        `now` over the rank model `base` (both `rank_model` answers)."""
        out = []
        drafted = self.drafted or (0.0,) * len(self.shapes)
        for shape, tau, mean in zip(self.shapes, self.taus, drafted):
            ratio = model_tau(*now, shape) / max(model_tau(*base, shape), 1e-9)
            deepest = min(shape.depth, shape.total_tokens - 1)
            t = min(max(1.0, tau * ratio), deepest + 1.0)  # never past every draft accepted plus the bonus
            out.append((t, self.scale * self.costs.round(shape, t, mean or None) / self.costs.plain, shape))
        return out

    def by_length(self, shape: TreeConfig, tau: float) -> tuple[float, ...]:
        """A stopping chain's break-even for a round that drafted 1..k tokens: that round's predicted cost in plain
        steps (the gate holds each round to its own; `gate.DraftGate`). () for other shapes."""
        if not shape.stops:
            return ()
        return tuple(round(self.scale * self.costs.round(shape, tau, d) / self.costs.plain, 3)
                     for d in range(1, shape.depth + 1))

    def to_dict(self) -> dict:
        c = self.costs
        line = lambda x: [x.at, x.x0, x.slope]  # noqa: E731
        return {"shapes": [[s.depth, s.top_k, s.total_tokens, s.stop_below, s.hot_vocab] for s in self.shapes],
                "taus": list(self.taus), "drafted": list(self.drafted),
                "offered": self.offered, "accepted": self.accepted, "lead": self.lead, "scale": self.scale,
                "costs": {"plain": c.plain, "verify": line(c.verify), "tree_extra": c.tree_extra,
                          "draft": {str(k): line(v) for k, v in c.draft.items()}, "extend": line(c.extend),
                          "host": line(c.host), "hot": {str(n): line(v) for n, v in c.hot.items()}}}

    @classmethod
    def from_dict(cls, d: dict) -> "ShapeTable":
        c = d["costs"]
        costs = Costs(plain=c["plain"], verify=Line(*c["verify"]), tree_extra=c["tree_extra"],
                      draft={int(k): Line(*v) for k, v in c["draft"].items()}, extend=Line(*c["extend"]),
                      host=Line(*c["host"]), hot={int(n): Line(*v) for n, v in c.get("hot", {}).items()})
        rows = lambda m: tuple(tuple(float(x) for x in row) for row in m)  # noqa: E731
        return cls(shapes=tuple(TreeConfig(*s) for s in d["shapes"]), taus=tuple(d["taus"]),
                   offered=rows(d["offered"]), accepted=rows(d["accepted"]), lead=rows(d["lead"]), costs=costs,
                   scale=float(d["scale"]), drafted=tuple(float(x) for x in d.get("drafted", ())))

    def widest(self) -> tuple[int, int]:
        """(most tokens a round verifies, most draft entries a round adds beyond its committed ones)."""
        return (max(s.total_tokens for s in self.shapes),
                max(max(s.depth - 1, 0) * s.top_k for s in self.shapes))


class Retuner:
    """One run's retuning: `after_round` takes each drafting round and now and then answers a new shape."""

    def __init__(self, table: ShapeTable, tree: TreeConfig):
        self.table, self.tree = table, tree
        w = min(1.0, PRIOR / max(1.0, table.offered[0][0])) if table.offered else 1.0
        self.counts = tuple([[w * x for x in row] for row in m] for m in (table.offered, table.accepted, table.lead))
        self.base = rank_model(*self.counts)  # the same prior without evidence: every ratio is 1
        self.seen = [0] * len(table.offered)  # drafting rounds that offered drafts at each depth (parent accepted)
        self.rounds = 0
        self.changes: list[tuple[int, str]] = []  # (round index, shape label) of each switch
        self.by_length: tuple[float, ...] = ()  # the shape in use's break-even by drafted length, after a switch

    def after_round(self, ev: Round) -> tuple[TreeConfig, float] | None:
        """Count a drafting round; every EVERY of them, (shape, its round cost in plain steps) when the best
        candidate beats the shape in use by MARGIN (its break-evens by length then in `by_length`), else None."""
        _count(ev, *self.counts)
        deepest = max((n.depth for n in ev.nodes), default=0)
        for d in range(min(deepest, len(ev.accepted_path) + 1, len(self.seen))):  # offered under an accepted parent
            self.seen[d] += 1
        self.rounds += 1
        if self.rounds % EVERY:
            return None
        scored = self.table.score(self.base, self.model())
        tau, cost, best = max(scored, key=lambda s: (s[0] / s[1], -s[1]))
        now = next(((t, c) for t, c, s in scored if s == self.tree), None)
        if best == self.tree or (now is not None and tau / cost < MARGIN * now[0] / now[1]):
            return None
        self.tree = best
        self.changes.append((ev.index + 1, best.label()))
        self.by_length = self.table.by_length(best, tau)
        return best, cost

    def model(self) -> tuple[tuple, tuple]:
        """The rank model of the counts so far. Depths the run's shapes never drafted to (a shallow tree says
        nothing of depth 5) keep the calibration's rates times the lift of the deepest depth the run did see:
        a text that suits the draft better at depth 2 is taken to suit it better further down too, until
        rounds that draft that deep say otherwise."""
        rank, chain = rank_model(*self.counts)
        shown = sum(1 for n in self.seen if n >= SEEN)
        if shown == 0 or shown >= len(rank):
            return rank, chain
        base_rank, base_chain = self.base
        step = lambda c, d: c[d] / c[d - 1] if d and c[d - 1] > 0 else c[d]  # noqa: E731 (top-1 rate at depth d)
        lift = step(chain, shown - 1) / max(step(base_chain, shown - 1), 1e-9)
        rank = rank[:shown] + tuple(tuple(min(CAP, a * lift) for a in row) for row in base_rank[shown:])
        rates = [step(chain, d) if d < shown else min(CAP, step(base_chain, d) * lift) for d in range(len(chain))]
        return rank, tuple(math.prod(rates[:d + 1]) for d in range(len(rates)))
