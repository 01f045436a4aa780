"""A finished EAGLE run taken apart, for the Diagnose tab, `/generate` with `explore` and `generate --explore`:
where acceptance fell, by position in the output and by kind of line (`diagnose.falloff`: pure functions of the
events), and every candidate shape replayed on the run's own text (`autotree.explore`, which runs the target and
the draft; `explorer` is what runs it: `explore` itself, or on a ZeroGPU Space a GPU call that returns its
Exploration).

    d = diagnose_run(session, prompt_ids, events, tree, table, greedy)   # RunDiagnosis
    d.to_dict()   # /generate's and `generate --json`'s "diagnose" block
    d.text()      # `generate --explore`'s lines
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..autotree.explore import KNOWN_ERROR_SOURCE, Exploration, ShapeRow, explore
from ..decoding.metrics import summarize
from .falloff import POSITION_BLOCK, KindFigures, by_kind, by_position, position_blocks, round_starts, token_lines

__all__ = ["RunDiagnosis", "diagnose_run", "output_ids", "too_short", "Explorer"]

Explorer = Callable[..., Exploration]  # `autotree.explore.explore`'s signature


@dataclass(frozen=True)
class RunDiagnosis:
    rounds: tuple[tuple[int, int], ...]  # (start position in the output, tokens committed) per round
    kinds: dict[str, KindFigures]  # kind of line -> its rounds' figures (kinds with no round left out)
    exploration: Exploration
    plain_rounds: int  # rounds the gate ran without a draft (the measured tau counts each as 1)

    def smoothed(self) -> list[tuple[int, float]]:
        """The tab's curve: at each round's start, tokens per round of the rounds near it (`falloff.by_position`)."""
        return by_position(list(self.rounds))

    def notes(self) -> list[str]:
        """The explorer's line, then what qualifies it: the gate's plain rounds, the prediction's known error."""
        notes = [self.exploration.summary()]
        if self.plain_rounds:
            notes.append(f"the gate paused the draft for {self.plain_rounds} rounds: the measured tau counts them as 1")
        notes.append(f"known error of the predicted speedup: {KNOWN_ERROR_SOURCE}; "
                     "tau on this text is exact for greedy runs")
        return notes

    def to_dict(self) -> dict:
        """by_position: tokens per round of the rounds starting in each block of POSITION_BLOCK new tokens (as the
        bench report's); by_kind: per kind of line; then the explorer's (`Exploration.to_dict`): shapes, ran, best,
        measured_tau, known_error."""
        return {"by_position": [{"from": b, "tau": t / r, "rounds": r}
                                for b, (r, t) in position_blocks(list(self.rounds)).items()],
                "position_block": POSITION_BLOCK,
                "by_kind": {k: {"tau": f.tau, "rounds": f.rounds, "tokens": f.tokens} for k, f in self.kinds.items()},
                "plain_rounds": self.plain_rounds, **self.exploration.to_dict()}

    def text(self, top: int = 8) -> str:
        """Lines for a terminal: the `top` shapes by predicted speedup (by tau without costs), the shape that ran
        and the best marked (the ran one added when it is not among them), tau by kind of line, tau by position."""
        x = self.exploration
        costed = any(r.speedup for r in x.rows)
        rows = sorted(x.rows, key=(lambda r: (r.speedup, r.tau)) if costed else (lambda r: r.tau), reverse=True)
        shown = rows[:top] + [r for r in rows[top:] if r.tree == x.ran]
        order = "predicted speedup" if costed else "tau (no round costs: those come with the automatic tree)"
        width = max(len(r.tree.short_label()) for r in shown)
        lines = [f"shapes replayed on this run's text ({x.tokens} tokens{'' if x.greedy else ', as if greedy'}), "
                 f"top {top} of {len(rows)} by {order}:",
                 f"  {'shape':<{width}}  {'tau':>5}  {'cost':>5}  {'speedup':>7}",
                 *self._legend(shown)]
        lines += [self._row(r, width, costed) for r in shown]
        kinds = ", ".join(f"{k} {f.tau:.2f} ({f.rounds} rounds)" for k, f in self.kinds.items()) or "no rounds"
        blocks = " | ".join(f"{b}+ {t / r:.2f}" for b, (r, t) in position_blocks(list(self.rounds)).items())
        lines += [f"tau by kind of line: {kinds}",
                  f"tau by position (rounds starting in each {POSITION_BLOCK} tokens): {blocks or 'no rounds'}",
                  *self.notes()]
        return "\n".join(lines)

    @staticmethod
    def _legend(shown: list[ShapeRow]) -> list[str]:
        """The columns, and what the compact shape labels abbreviate as far as shown (each line within 80 columns
        with the `[explore] ` prefix)."""
        parts = ["@P: stop under p=P"] if any(r.tree.stops for r in shown) else []
        parts += ["hot N: first N ids"] if any(r.tree.hot_vocab for r in shown) else []
        parts += ["tree total/depth/top-k"] if any(not r.tree.is_chain for r in shown) else []
        return ["  (cost: a round in plain decoding steps; ran: the run's measured tau)"] + (
            [f"  ({'; '.join(parts)})"] if parts else [])

    def _row(self, r: ShapeRow, width: int, costed: bool) -> str:
        """One shape within 80 columns with generate's `[explore] ` prefix (the full labels are in the JSON)."""
        x = self.exploration
        marks = (["best"] if r.tree == x.best.tree else []) + (["ran"] if r.tree == x.ran else [])
        if r.tree == x.ran and x.measured_tau is not None:
            marks[-1] += f": tau {x.measured_tau:.2f}"
        cost, speed = (f"{r.round_cost:5.2f}", f"{r.speedup:6.2f}x") if costed else (f"{'-':>5}", f"{'-':>7}")
        row = f"{'*' if marks else ' '} {r.tree.short_label():<{width}}  {r.tau:5.2f}  {cost}  {speed}  " \
              f"{', '.join(marks)}"
        return row.rstrip()


def output_ids(events) -> list[int]:
    """The new tokens of a run (its Finish event's)."""
    return [t for ev in events if hasattr(ev, "decode_seconds") and hasattr(ev, "token_ids") for t in ev.token_ids]


def too_short(events) -> str:
    """Why the run cannot be replayed, "" when it can (the explorer needs 2 new tokens)."""
    n = len(output_ids(events))
    return "" if n >= 2 else f"the run made {n} new token(s) and the shape explorer needs 2; ask for more tokens"


def diagnose_run(session, prompt_ids: list[int], events, tree, table=None, greedy: bool = True,
                 explorer: Explorer = explore) -> RunDiagnosis:
    """The run's events (an EAGLE run of `tree` on `prompt_ids`) taken apart; table: the pair's automatic-tree
    `ShapeTable` (its costs price the shapes; None: taus only)."""
    stats = summarize(events)
    output = output_ids(events)
    rounds = round_starts(events)
    lines, kinds = token_lines(session.decode(list(prompt_ids)), [session.decode([t]) for t in output])
    measured = stats.tau if not stats.plain_rounds else None
    x = explorer(session, list(prompt_ids), output, ran=tree, costs=table.costs if table is not None else None,
                 scale=table.scale if table is not None else 1.0, measured_tau=measured, greedy=bool(greedy))
    return RunDiagnosis(tuple(rounds), by_kind(rounds, lines, kinds), x, stats.plain_rounds)
