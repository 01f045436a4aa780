"""Pure reducers over an engine's event stream, and `RunView`, one run's events kept as they arrive.

- round: one draft + verify step (a baseline decode step counts as a round of length 1).
- tau (mean accepted length) = tokens committed by rounds / rounds, the bonus token included;
  plain decoding gives exactly 1.0. The prefill token is not part of any round.
- acceptance rate at depth d = rounds that accepted a draft token at depth d / rounds that reached
  depth d-1 (accepted at least d-1 drafts) with a draft token at depth d to try (a chain of k has
  none at depth k+1, a pruned tree may have none under the accepted node).
- tokens/s = tokens committed by rounds / decode wall time (prefill reported separately).
- speedup = baseline decode time / EAGLE decode time for the same prompt and number of new tokens (`race`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from .events import Event, Finish, Prefill, Round, RunStart, Step

__all__ = ["RunStats", "RunView", "summarize", "misses", "DEFINITIONS"]

DEFINITIONS = {
    "round": "one draft + verify step (plain decoding: one target step)",
    "tau": "mean accepted length = tokens committed per round, bonus token included (plain decoding = 1.00)",
    "acceptance at depth d": "rounds that accepted a draft token at depth d / rounds that reached depth d-1 "
                             "with a draft token at depth d to try",
    "tokens/s": "tokens produced after the prefill / decode wall time (prefill time shown separately)",
    "speedup": "baseline decode time / EAGLE decode time, same prompt, same new tokens, same process and device",
    "round cost": "mean EAGLE round time / mean plain decoding step time, split into draft, verify and host; "
                  "speedup = tau / round cost",
    "plain round": "a round without a draft: with the auto tree, when the last drafting rounds committed fewer "
                   "tokens than a drafting round costs in plain steps, the draft sits out the next rounds and the "
                   "target takes plain steps (one token each), then drafting resumes on a probe round",
    "tau of drafting rounds": "tau over the rounds that drafted; tau itself counts plain rounds as 1.00 each",
}


@dataclass(frozen=True)
class RunStats:
    mode: str
    new_tokens: int
    rounds: int
    tau: float
    tokens_per_second: float
    prefill_seconds: float
    decode_seconds: float
    acceptance_by_depth: tuple[float, ...]
    accepted_per_round: tuple[int, ...]  # accepted drafts per round (bonus excluded)
    draft_seconds: float
    verify_seconds: float
    host_seconds: float
    token_ids: tuple[int, ...]
    finish_reason: str
    plain_rounds: int = 0  # rounds the draft sat out (`gate`): one plain target step each, counted in `rounds`
    drafting_tau: float = 0.0  # tau over the rounds that drafted (equal to tau when no round was plain)
    rope_rounds: int = 0  # plain rounds the target's rotary scaling required (`rope_limit`), counted in `rounds`


def summarize(events: Iterable[Event]) -> RunStats:
    mode, rounds, committed, accepted, offered, plain, rope = "", 0, 0, [], [], 0, 0
    draft = verify = host = 0.0
    prefill_seconds = decode_seconds = 0.0
    token_ids: tuple[int, ...] = ()
    reason = ""
    elapsed = 0.0
    for e in events:
        if isinstance(e, RunStart):
            mode = e.mode
        elif isinstance(e, Prefill):
            prefill_seconds = e.seconds
            token_ids = (e.token_id,)
        elif isinstance(e, Round):
            rounds += 1
            rope += e.plain_for == "rope"  # the root alone: a verify would not rotate as plain steps do
            plain += len(e.nodes) == 1 and e.plain_for != "rope"  # the root alone: the gate paused the draft
            committed += len(e.committed_ids)
            got, tried = _round_depths(e)
            accepted.append(got)
            offered.append(tried)
            draft += e.draft_seconds
            verify += e.verify_seconds
            host += e.host_seconds
            elapsed = e.elapsed
            token_ids = token_ids + e.committed_ids
        elif isinstance(e, Step):
            rounds += 1
            committed += 1
            accepted.append(0)
            offered.append(0)
            verify += e.seconds
            elapsed = e.elapsed
            token_ids = token_ids + (e.token_id,)
        elif isinstance(e, Finish):
            prefill_seconds, decode_seconds = e.prefill_seconds, e.decode_seconds
            token_ids, reason = e.token_ids, e.reason
    if not decode_seconds:
        decode_seconds = elapsed
    by_depth = [got / tried for got, tried in zip(*_depth_counts(offered, accepted)) if tried]
    return RunStats(
        mode=mode, new_tokens=len(token_ids), rounds=rounds, tau=committed / rounds if rounds else 0.0,
        tokens_per_second=committed / decode_seconds if decode_seconds > 0 else 0.0,
        prefill_seconds=prefill_seconds, decode_seconds=decode_seconds, acceptance_by_depth=tuple(by_depth),
        accepted_per_round=tuple(accepted), draft_seconds=draft, verify_seconds=verify, host_seconds=host,
        token_ids=tuple(token_ids), finish_reason=reason, plain_rounds=plain, rope_rounds=rope,
        drafting_tau=(committed - plain - rope) / (rounds - plain - rope) if rounds > plain + rope else 0.0,
    )


def misses(events: Iterable[Event]) -> Counter[tuple[int, int]]:
    """Where the draft missed: at each round whose path stopped at a node with drafted children, (the draft's
    favourite child token, the token the target produced there instead), counted over the run."""
    out: Counter[tuple[int, int]] = Counter()
    for e in events:
        if not isinstance(e, Round) or len(e.committed_ids) <= len(e.accepted_ids):
            continue  # not a Round, or its bonus token was cut (EOS or max new tokens inside the block)
        stop = e.accepted_path[-1] if e.accepted_path else 0
        children = [n for n in e.nodes if n.parent == stop]
        if children:
            out[(max(children, key=lambda n: n.draft_prob).token_id, e.bonus_id)] += 1
    return out


def _round_depths(r: Round) -> tuple[int, int]:
    """(depth accepted, depth offered) of one round; a round cut by EOS or max new tokens counts what was output."""
    if len(r.committed_ids) <= len(r.accepted_ids):
        return len(r.committed_ids), len(r.committed_ids)
    return len(r.accepted_ids), _offered_depth(r)


def depth_counts(rounds: Iterable[Round]) -> tuple[list[int], list[int]]:
    """Per depth d = 1, 2, ...: (rounds that accepted a draft at d, rounds that had one to try at d): the counts
    behind `RunStats.acceptance_by_depth`."""
    pairs = [_round_depths(r) for r in rounds]
    return _depth_counts([o for _, o in pairs], [a for a, _ in pairs])


def _offered_depth(r: Round) -> int:
    """The deepest depth d at which this round had a draft token to try: the accepted path reached
    depth d-1 and the node it stopped at (the root for d = 1) has a drafted child."""
    stop = r.accepted_path[-1] if r.accepted_path else 0
    has_child = any(node.parent == stop for node in r.nodes)
    return len(r.accepted_path) + (1 if has_child else 0)


def _depth_counts(offered: list[int], accepted: list[int]) -> tuple[list[int], list[int]]:
    """Per depth d = 1, 2, ...: rounds that accepted a draft at d, and rounds that had one to try at d."""
    deepest = max(offered, default=0)
    got = [sum(1 for a in accepted if a >= d) for d in range(1, deepest + 1)]
    tried = [sum(1 for o in offered if o >= d) for d in range(1, deepest + 1)]
    return got, tried


class RunView:
    """The events of one run, kept as they arrive (plain values; cheap to copy and to keep in gr.State)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.start: RunStart | None = None
        self.prefill: Prefill | None = None
        self.rounds: list[Round] = []
        self.steps: list[Step] = []
        self.finish: Finish | None = None

    def add(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, RunStart):
            self.start = event
        elif isinstance(event, Prefill):
            self.prefill = event
        elif isinstance(event, Round):
            self.rounds.append(event)
        elif isinstance(event, Step):
            self.steps.append(event)
        elif isinstance(event, Finish):
            self.finish = event

    @classmethod
    def of(cls, events: Iterable[Event]) -> "RunView":
        view = cls()
        for e in events:
            view.add(e)
        return view

    def snapshot(self) -> "RunView":
        """A copy that later `add` calls do not change (the lists are copied, the events are frozen)."""
        return RunView.of(list(self.events))

    @property
    def mode(self) -> str:
        return self.start.mode if self.start else ""

    @property
    def done(self) -> bool:
        return self.finish is not None

    @property
    def token_ids(self) -> tuple[int, ...]:
        if self.finish is not None:
            return self.finish.token_ids
        ids = [self.prefill.token_id] if self.prefill else []
        for r in self.rounds:
            ids.extend(r.committed_ids)
        ids.extend(s.token_id for s in self.steps)
        return tuple(ids)

    def stats(self) -> RunStats:
        return summarize(self.events)

    def curve(self) -> tuple[list[float], list[int]]:
        """(decode seconds, new tokens) after the prefill and after every round or step."""
        if self.prefill is None:
            return [], []
        xs, ys = [0.0], [1]
        for e in self.rounds or self.steps:
            xs.append(e.elapsed)
            ys.append(e.total_new_tokens)
        return xs, ys
