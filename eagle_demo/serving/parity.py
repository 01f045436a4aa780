"""Parity between this playground and real vLLM on one exported pair: the same prompt ids, greedy, EOS ignored, a
chain of k draft tokens here against vLLM's `num_speculative_tokens=k` (the exported config drafts a chain), vLLM
plain decoding as the reference. Used by scripts/peer_vllm.py, tests/test_vllm.py and the Deploy tab, whose n-gram check
(`verify_ngram_in_vllm`) runs vLLM's `ngram` beside our n-gram draft under vLLM's rule."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..common.config import NgramConfig, RunConfig, TreeConfig
from ..decoding.events import Finish, Round
from .harness import VllmRun, run_vllm, speculative_config_of
from .runtime import VllmRuntime

__all__ = ["OurRun", "Parity", "run_ours", "exported_spec", "exported_draft", "verify_in_vllm", "vllm_rule",
           "verify_ngram_in_vllm"]


@dataclass(frozen=True)
class OurRun:
    tokens: tuple[tuple[int, ...], ...]
    rounds: int
    new_tokens: int
    seconds: float
    cpu_seconds: float = 0.0
    drafted_rounds: int = 0  # rounds with a draft (a gated round is plain)
    accepted: int = 0  # accepted draft tokens over those rounds, before the token budget cuts the last round

    @property
    def tau(self) -> float:
        """New tokens per round (the prefill token included, the last round cut at the budget)."""
        return self.new_tokens / max(1, self.rounds)

    @property
    def acceptance_length(self) -> float:
        """vLLM's definition: 1 + accepted / drafts, where vLLM counts a round's accepted drafts before it cuts them
        at max_tokens; the playground's tau counts only what was kept, so short runs differ by the last rounds."""
        return 1.0 + self.accepted / max(1, self.drafted_rounds)


@dataclass(frozen=True)
class Parity:
    k: int
    spec: dict
    ours: OurRun
    vllm: VllmRun
    plain: VllmRun | None
    version: str

    @property
    def identical_to_ours(self) -> bool:
        return self.vllm.tokens == self.ours.tokens

    @property
    def identical_to_plain(self) -> bool | None:
        return None if self.plain is None else self.vllm.tokens == self.plain.tokens

    @property
    def acceptance_gap(self) -> float:
        """|vLLM's acceptance length - ours| / ours."""
        theirs = self.vllm.acceptance_length or 1.0
        return abs(theirs - self.ours.acceptance_length) / self.ours.acceptance_length


def run_ours(session, prompts: list[list[int]], k: int, max_new_tokens: int, ngram: NgramConfig | None = None
             ) -> OurRun:
    """Our engine on each prompt, one after another, a chain of k (k=0: plain decoding), or the n-gram draft set as
    `ngram` (k unused). A round counts as a draft when it drafted a token, as vLLM counts one (an n-gram round without
    a match drafts nothing)."""
    tokens, rounds, new, seconds, cpu, drafted, accepted = [], 0, 0, 0.0, 0.0, 0, 0
    run = RunConfig(max_new_tokens=max_new_tokens, ignore_eos=True,
                    **({"tree": TreeConfig.chain(k)} if k else {}), **({"ngram": ngram} if ngram else {}))
    mode = "ngram" if ngram else "eagle" if k else "baseline"
    for ids in prompts:
        t, c = time.perf_counter(), time.process_time()
        events = list(session.stream(ids, run, mode))
        seconds, cpu = seconds + time.perf_counter() - t, cpu + time.process_time() - c
        finish = [ev for ev in events if isinstance(ev, Finish)][0]
        drafts = [ev for ev in events if isinstance(ev, Round) and not ev.plain_for and len(ev.nodes) > 1]
        drafted, accepted = drafted + len(drafts), accepted + sum(len(ev.accepted_ids) for ev in drafts)
        tokens.append(tuple(finish.token_ids))
        rounds, new = rounds + finish.rounds, new + finish.new_tokens
    return OurRun(tuple(tokens), rounds, new, seconds, cpu, drafted, accepted)


def exported_spec(target: str, draft: str, report, k: int, model: str | None = None) -> dict:
    """The speculative config `python -m eagle_demo export --engine vllm --chain k` prints for this pair (`model`:
    an adapted copy's folder in place of the draft)."""
    from ..deploy import plan_for

    spec = speculative_config_of(plan_for("vllm", target, draft, report, TreeConfig.chain(k)).command)
    return spec | ({"model": model} if model else {})


def exported_draft(target: str, draft: str, report, k: int, folder) -> tuple[dict, list[str]]:
    """(vLLM speculative config, the export's changes) as `export --engine vllm --chain k --out folder` gives them:
    the adapted copy is written into `folder` (a new or empty one) whenever the export lists a change."""
    from ..deploy import plan_for, write_adapted_copy

    plan = plan_for("vllm", target, draft, report, TreeConfig.chain(k))
    if not plan.changes:
        return exported_spec(target, draft, report, k), []
    copy = write_adapted_copy(plan, report, folder)
    return exported_spec(target, draft, report, k, model=str(copy)), list(plan.changes)


def verify_in_vllm(runtime: VllmRuntime, session, target: str, draft: str, k: int, ids: list[int],
                   max_new_tokens: int, folder) -> Parity:
    """The Deploy tab's check: the exported pair (its adapted copy where the export writes one, into `folder`) on one
    prompt in vLLM, greedy, a chain of k, against our engine on the same chain."""
    spec, _ = exported_draft(target, draft, session.report, k, folder)
    return _beside_ours(runtime, session, target, spec, k, ids, max_new_tokens)


def vllm_rule(cfg: NgramConfig) -> NgramConfig:
    """`cfg`'s min_n, max_n and tokens under vLLM's ngram rule, which is transformers' (`deploy.ngram`)."""
    return NgramConfig.transformers(cfg.max_n, cfg.tokens, cfg.min_n)


def verify_ngram_in_vllm(runtime: VllmRuntime, session, target: str, cfg: NgramConfig, ids: list[int],
                         max_new_tokens: int) -> Parity:
    """The Deploy tab's n-gram check: vLLM's `ngram` at `cfg`'s min, max and tokens (the command `deploy.ngram`
    prints) on one prompt, greedy, against our n-gram draft under vLLM's rule (`vllm_rule`). No head is needed."""
    from ..deploy.ngram import vllm_ngram_spec

    rule = vllm_rule(cfg)
    return _beside_ours(runtime, session, target, vllm_ngram_spec(rule), rule.tokens, ids, max_new_tokens, rule)


def _beside_ours(runtime: VllmRuntime, session, target: str, spec: dict, k: int, ids: list[int],
                 max_new_tokens: int, ngram: NgramConfig | None = None) -> Parity:
    result = run_vllm(runtime, target, spec, [{"label": "page", "prompts": [ids], "max_new_tokens": max_new_tokens}],
                      enforce_eager=True)
    ours = run_ours(session, [ids], k, max_new_tokens, ngram=ngram)
    return Parity(k=k, spec=spec, ours=ours, vllm=result.runs[0], plain=None, version=result.version)
