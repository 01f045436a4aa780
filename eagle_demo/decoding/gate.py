"""Pausing the draft while it does not pay: rounds fall back to plain target steps, losslessly.

A drafting round costs `pause_below` plain steps (the automatic tree's predicted round cost) and commits tau
tokens, so it pays only while tau exceeds that break-even. When the mean committed tokens of the last `WINDOW`
drafting rounds falls under it, by more than the prediction's error (`MARGIN`), the next `PAUSE` rounds are
plain steps (a round with no draft: the target's own token), then one probe round drafts again. A probe that
commits at least the break-even starts the window afresh (the rounds before the pause no longer hold drafting
down: text that turned predictable, a loop say, gets drafted at once); otherwise its tokens enter the window, and
a window still under the break-even pauses twice as long as the pause before (up to `MAX_PAUSE`), so a draft
that keeps failing costs fewer probes. The pause is back to `PAUSE` once a drafting round keeps the mean at the
break-even. A plain round is what plain decoding does, token for token (the same logits pipeline and the same
position-keyed sampler), so the output never changes.

Where the automatic tree's own calibration predicts a tau under the margin of its break-even (a weak head: no
shape pays), the run starts paused (`RunConfig.pause_first`): `PAUSE` plain rounds, then a probe, as if a window
had already shown it; a probe that pays starts drafting as usual.

A stopping chain's rounds draft 1..k tokens and cost accordingly: with `by_length` (its break-even by drafted
length, from the automatic tree's cost lines) each round is held to its own break-even, and the window compares
its committed tokens with the sum of its rounds' break-evens. A round that stopped early is cheap, so its few
tokens may still pay.

Decisions depend on committed token counts (and drafted lengths) only, never on timings: a seeded run is
reproducible.
"""

from __future__ import annotations

from collections import deque

__all__ = ["DraftGate", "WINDOW", "PAUSE", "MAX_PAUSE", "MARGIN", "paused_line"]

WINDOW = 10  # drafting rounds whose mean tau is compared with the break-even (6 paused strong heads in the
# bursts of new text between loops: on the shipped pair 1-7% under never pausing; 10 keeps them within 1.5%)
PAUSE = 8  # plain rounds before the first probe round
MAX_PAUSE = 96  # the longest pause: each failed probe in a row doubles it up to this
MARGIN = 0.9  # the window pauses under MARGIN x its break-even: a calibration on a loaded machine prices rounds
# 5-10% high, and text that sits at the break-even then paused half its rounds (a 64-token page run: 24 plain
# rounds of 43, 1.09x where drafting every round ran at 1.4x); a weak head's rounds stay far under it


class DraftGate:
    """Whether the next round drafts. `pause_below` 0 never pauses (every explicit tree shape). start_paused: the
    first `pause` rounds are plain and the next one probes, as after a window under the break-even (the automatic
    tree's calibration predicted its tau under `MARGIN` x the break-even: the window's own rule, applied before a
    window of dear rounds has to show it)."""

    def __init__(self, pause_below: float = 0.0, window: int | None = None, pause: int | None = None,
                 by_length: tuple[float, ...] = (), start_paused: bool = False):
        self.pause_below, self.pause = float(pause_below), PAUSE if pause is None else pause
        self.by_length = tuple(by_length)  # break-even of a round that drafted d tokens at [d - 1]; () = pause_below
        # last drafting rounds' (committed tokens, break-even)
        self.recent: deque[tuple[int, float]] = deque(maxlen=WINDOW if window is None else window)
        self.plain_left = 0  # plain rounds still to run before the next probe
        self.next_pause = self.pause  # the length of the next pause (doubles while probes fail)
        self.probing = False  # the next drafting round is a probe (it follows a pause)
        if start_paused and self.pause_below > 0:
            self.plain_left = self.pause

    @property
    def drafting(self) -> bool:
        return self.plain_left == 0

    def break_even(self, drafted: int) -> float:
        if self.by_length and drafted > 0:
            return self.by_length[min(drafted, len(self.by_length)) - 1]
        return self.pause_below

    def after_draft(self, committed: int, drafted: int = 0) -> None:
        """A drafting round committed `committed` tokens after drafting a chain of `drafted` (0: not known)."""
        due = self.break_even(drafted)
        if self.probing and committed >= due:  # the probe paid: judge the rounds from here on
            self.recent.clear()
        self.probing = False
        self.recent.append((committed, due))
        full = len(self.recent) == self.recent.maxlen
        if self.pause_below > 0 and full and sum(c for c, _ in self.recent) < MARGIN * sum(d for _, d in self.recent):
            self.plain_left = self.next_pause
            self.next_pause = max(self.next_pause, min(2 * self.next_pause, MAX_PAUSE))
        else:
            self.next_pause = self.pause

    def after_plain(self) -> None:
        self.plain_left -= 1
        self.probing = self.plain_left == 0


def paused_line(plain_rounds: int, rounds: int, pause_below: float, first: bool = False,
                by_length: tuple[float, ...] = ()) -> str:
    """What the page, the CLI and the bench say of a run whose draft paused; "" when it never did. first: the run
    started paused (`RunConfig.pause_first`). The break-even shown is the one the gate used: `by_length` (a stopping
    chain's, by drafted length) when given, else `pause_below`. With no gate (`pause_below` 0: an explicit shape, the
    n-gram draft) a round without a draft is one where the draft proposed nothing, and the line says that."""
    if not plain_rounds:
        return ""
    if pause_below <= 0 and not by_length:
        return (f"the draft proposed nothing in {plain_rounds} of {rounds} rounds (for the n-gram draft: no earlier "
                "match of the text's last tokens), so those rounds were plain target steps")
    why = ("the calibration predicted the draft's tau under its break-even" if first
           else "the draft's recent tau fell under its break-even")
    levels = sorted(set(by_length)) if by_length else [pause_below]
    shown = (f"{levels[0]:.2f}" if len(levels) == 1 else
             f"{levels[0]:.2f}-{levels[-1]:.2f} (by the length the chain drafted)")
    return (f"drafting paused in {plain_rounds} of {rounds} rounds: {why} {shown} (a drafting round's "
            f"predicted cost in plain steps, less the gate's {1 - MARGIN:.0%} margin), so those rounds were plain "
            "target steps")
