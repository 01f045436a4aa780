"""EAGLE against plain decoding of the same prompt: the speedup, why it is what it is, and whether the output
was identical.

- speedup = baseline decode time / EAGLE decode time for the same prompt and number of new tokens.
- Why (`breakdown`): tokens/s is tau / (mean round time) for EAGLE and 1 / (mean step time) for plain decoding,
  so speedup = tau / round cost, where round cost is a mean EAGLE round measured in plain decoding steps, split
  into draft + verify + host (+ loop time outside the three phases).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..decoding.metrics import RunStats

__all__ = ["SpeedupBreakdown", "RaceResult", "speedup", "breakdown", "race", "verdict"]


def speedup(eagle: RunStats, baseline: RunStats) -> float:
    """Ratio of decode throughputs (equal to the decode-time ratio when both made the same tokens)."""
    if baseline.tokens_per_second <= 0:
        return 0.0
    return eagle.tokens_per_second / baseline.tokens_per_second


@dataclass(frozen=True)
class SpeedupBreakdown:
    """speedup = tau / round_cost. Costs are in plain decoding steps of the same target (1.0 = one step)."""

    speedup: float
    tau: float
    round_cost: float  # mean EAGLE round time / mean baseline step time
    draft: float  # the parts of round_cost
    verify: float
    host: float
    other: float  # decode time outside the three measured phases (the loop itself, the consumer)
    step_ms: float  # mean plain decoding step
    round_ms: float  # mean EAGLE round

    def line(self) -> str:
        parts = f"draft {self.draft:.2f} + verify {self.verify:.2f} + host {self.host:.2f}"
        if self.other >= 0.005:
            parts += f" + other {self.other:.2f}"
        return (f"{self.speedup:.2f}x = tau {self.tau:.2f} / round cost {self.round_cost:.2f} steps "
                f"({parts}; one step = {self.step_ms:.2f} ms)")


def breakdown(eagle: RunStats, baseline: RunStats) -> SpeedupBreakdown | None:
    """Explain `speedup(eagle, baseline)` as tau / round cost; None when either run has no decode time."""
    if not (eagle.rounds and baseline.rounds and eagle.decode_seconds > 0 and baseline.decode_seconds > 0):
        return None
    if eagle.tokens_per_second <= 0 or baseline.tokens_per_second <= 0:
        return None
    step = 1.0 / baseline.tokens_per_second  # seconds per committed token of plain decoding
    round_seconds = eagle.tau / eagle.tokens_per_second  # = decode seconds / rounds
    per_round = [x / eagle.rounds / step for x in (eagle.draft_seconds, eagle.verify_seconds, eagle.host_seconds)]
    cost = round_seconds / step
    return SpeedupBreakdown(speedup=eagle.tau / cost, tau=eagle.tau, round_cost=cost, draft=per_round[0],
                            verify=per_round[1], host=per_round[2], other=max(cost - sum(per_round), 0.0),
                            step_ms=1e3 * step, round_ms=1e3 * round_seconds)


def verdict(same: bool | None, unchecked: str = "-") -> str:
    """The yes/no cell of an identity check: "yes", "NO", or `unchecked` when the check does not apply."""
    return unchecked if same is None else ("yes" if same else "NO")


@dataclass(frozen=True)
class RaceResult:
    """EAGLE against plain decoding of the same prompt in the same process (the page's race, `generate --race`,
    each benchmark prompt)."""

    baseline_tokens_per_second: float | None  # None: no finished baseline, or one without a decode step
    speedup: float | None  # None: as above, or an EAGLE run without a round
    why: SpeedupBreakdown | None  # speedup = tau / round cost; None without decode time on both sides
    identical_to_baseline: bool | None  # None where the check does not apply (see `race`)

    @property
    def round_cost(self) -> float | None:
        return self.why.round_cost if self.why else None

    def why_line(self) -> str:
        return self.why.line() if self.why else "no decode time to compare"

    def to_dict(self, detail: bool = True) -> dict:
        """JSON-ready. detail: `round_cost` as its parts (the API's stats); else the cost in steps and the `why`
        line (the command line's summary)."""
        out = {"baseline_tokens_per_second": self.baseline_tokens_per_second, "speedup": self.speedup}
        w = self.why
        if detail:
            out["round_cost"] = None if w is None else {
                "steps": w.round_cost, "draft": w.draft, "verify": w.verify, "host": w.host, "other": w.other,
                "step_ms": w.step_ms, "round_ms": w.round_ms, "line": w.line()}
        else:
            out["round_cost"] = self.round_cost
        out["identical_to_baseline"] = self.identical_to_baseline
        if not detail:
            out["why"] = self.why_line()
        return out


def race(eagle: RunStats, baseline: RunStats | None, greedy: bool, dtype: str) -> RaceResult:
    """Compare an EAGLE run with plain decoding of the same prompt. The token ids are compared when both runs
    finished (not stopped) and the run is greedy, or sampled in float32: both engines draw position i's random
    number from the seed, so a lossless verifier gives the seeded baseline's text. In bf16/fp16 the tree forward's
    rounding can flip a draw now and then, which says nothing about the distribution, so it is not checked there.
    dtype: "float32", "torch.float32", ... (the run's dtype)."""
    if baseline is None or not baseline.finish_reason:
        return RaceResult(None, None, None, None)
    finished = bool(eagle.finish_reason) and "stopped" not in (eagle.finish_reason, baseline.finish_reason)
    checked = finished and (greedy or str(dtype).removeprefix("torch.") == "float32")
    decoded = eagle.rounds > 0 and baseline.rounds > 0  # a run of one new token (the prefill's) decodes nothing
    return RaceResult(baseline.tokens_per_second if decoded else None, speedup(eagle, baseline) if decoded else None,
                      breakdown(eagle, baseline), (eagle.token_ids == baseline.token_ids) if checked else None)
