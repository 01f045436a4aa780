"""Parity between this playground and real vLLM on one exported pair: the same prompt ids, greedy, EOS ignored, a
chain of k draft tokens here against vLLM's `num_speculative_tokens=k` (vLLM's CPU backend drafts chains; it has no
tree), vLLM plain decoding as the reference. Used by scripts/peer_vllm.py, tests/test_vllm.py and the Deploy tab."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..common.config import RunConfig, TreeConfig
from ..decoding.events import Finish
from .harness import VllmResult, VllmRun, run_vllm, speculative_config_of
from .runtime import VllmRuntime

__all__ = ["OurRun", "Parity", "run_ours", "exported_spec", "check_parity", "as_row", "exported_draft", "verify_in_vllm"]


@dataclass(frozen=True)
class OurRun:
    tokens: tuple[tuple[int, ...], ...]
    rounds: int
    new_tokens: int
    seconds: float
    cpu_seconds: float = 0.0

    @property
    def acceptance_length(self) -> float:
        """Tokens committed per round (tau): the measure vLLM's mean acceptance length is."""
        return self.new_tokens / max(1, self.rounds)


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


def run_ours(session, prompts: list[list[int]], k: int, max_new_tokens: int) -> OurRun:
    """Our engine on each prompt, one after another, a chain of k (k=0: plain decoding)."""
    tokens, rounds, new, seconds, cpu = [], 0, 0, 0.0, 0.0
    run = RunConfig(max_new_tokens=max_new_tokens, ignore_eos=True,
                    **({"tree": TreeConfig.chain(k)} if k else {}))
    for ids in prompts:
        t, c = time.perf_counter(), time.process_time()
        finish = [ev for ev in session.stream(ids, run, "eagle" if k else "baseline") if isinstance(ev, Finish)][0]
        seconds, cpu = seconds + time.perf_counter() - t, cpu + time.process_time() - c
        tokens.append(tuple(finish.token_ids))
        rounds, new = rounds + finish.rounds, new + finish.new_tokens
    return OurRun(tuple(tokens), rounds, new, seconds, cpu)


def exported_spec(target: str, draft: str, report, k: int, model: str | None = None) -> dict:
    """The speculative config `python -m eagle_demo export --engine vllm --chain k` prints for this pair (`model`:
    an adapted copy's folder in place of the draft)."""
    from ..deploy import plan_for

    spec = speculative_config_of(plan_for("vllm", target, draft, report, TreeConfig.chain(k)).command)
    return spec | ({"model": model} if model else {})


def check_parity(runtime: VllmRuntime, session, target: str, draft: str, k: int, prompts: list[list[int]],
                 max_new_tokens: int = 64, plain: bool = True, spec: dict | None = None) -> Parity:
    """Ours (chain k) against vLLM with the exported config, and vLLM plain decoding when `plain`."""
    spec = spec or exported_spec(target, draft, session.report, k)
    runs = [{"label": "parity", "prompts": prompts, "max_new_tokens": max_new_tokens}]
    eagle: VllmResult = run_vllm(runtime, target, spec, runs)
    base = run_vllm(runtime, target, None, runs).runs[0] if plain else None
    ours = run_ours(session, prompts, k, max_new_tokens)
    return Parity(k=k, spec=spec, ours=ours, vllm=eagle.runs[0], plain=base, version=eagle.version)


def as_row(p: Parity, name: str) -> dict:
    """A JSON-ready table row."""
    return {"head": name, "k": p.k, "method": p.spec.get("method"), "identical_to_ours": p.identical_to_ours,
            "identical_to_vllm_plain": p.identical_to_plain, "vllm_acceptance_length": p.vllm.acceptance_length,
            "our_acceptance_length": p.ours.acceptance_length, "gap": p.acceptance_gap, "vllm": p.version,
            "drafted": p.vllm.draft_tokens, "accepted": p.vllm.accepted_tokens, "drafts": p.vllm.drafts,
            "our_rounds": p.ours.rounds, "accepted_by_position": list(p.vllm.acceptance_by_position)}



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
    result = run_vllm(runtime, target, spec, [{"label": "page", "prompts": [ids], "max_new_tokens": max_new_tokens}],
                      enforce_eager=True)
    ours = run_ours(session, [ids], k, max_new_tokens)
    return Parity(k=k, spec=spec, ours=ours, vllm=result.runs[0], plain=None, version=result.version)
