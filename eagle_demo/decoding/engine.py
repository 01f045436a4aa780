"""The two engines. Each has exactly one generation loop and yields typed events.

BaselineEngine: plain decoding of the target (one token per step) through the same runner and the same
logits pipeline. SpeculativeEngine: speculative rounds (draft tree -> one target forward -> verify -> commit) with
any draft that keeps the `draft_source.DraftSource` contract: an EAGLE head's `Drafter` or the n-gram draft.
"""

from __future__ import annotations

import threading
import time
from typing import Iterator

import torch
from transformers import PreTrainedModel

from ..common.config import RunConfig
from ..drafts.base import DraftHead
from ..target.rope_limit import RopeLimit
from ..target.runner import TargetOutput, TargetRunner
from .acceptance import verify_tree
from .draft_source import DraftSource
from .drafter import Drafter
from .events import DraftNode, Event, Finish, Prefill, Round, RunStart, Step
from .gate import DraftGate
from .run_state import Held, RoundState, Seen, cut, end_reason
from .sampling import PositionSampler, penalize, pick, process_logits, top_two

__all__ = ["BaselineEngine", "SpeculativeEngine", "eos_ids_of"]


def eos_ids_of(model: PreTrainedModel) -> frozenset[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if value is None:
            continue
        ids.update([value] if isinstance(value, int) else list(value))
    return frozenset(int(i) for i in ids)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


class _EngineBase:
    mode = ""

    def __init__(self, model: PreTrainedModel, feature_layers: tuple[int, ...] | None = None,
                 static: bool = False):
        """static: the target runs over a fixed-size cache (CUDA graphs on a GPU); see `static.StaticTarget`."""
        self.model = model
        self.runner = TargetRunner(model, feature_layers, static=static)
        self.rope = RopeLimit.of(model)  # a rotary scaling that follows the forward's length (`rope_limit`)
        self.eos = eos_ids_of(model)
        self.lock = threading.Lock()  # one generation at a time on this model

    def _start(self, prompt_ids: list[int], run: RunConfig, family: str) -> RunStart:
        if not prompt_ids:
            raise ValueError("the prompt is empty; type some text (or pass --prompt-ids)")
        return RunStart(
            mode=self.mode, prompt_tokens=len(prompt_ids), max_new_tokens=run.max_new_tokens,
            tree=self._label(run), temperature=run.sampling.temperature,
            draft_family=family, device=str(self.runner.device), dtype=str(self.runner.dtype).replace("torch.", ""),
            static=self.runner.static_mode, repetition_penalty=run.sampling.repetition_penalty,
            hidden_size=int(getattr(self.model.config.get_text_config(), "hidden_size", 0) or 0),
        )

    def _label(self, run: RunConfig) -> str:
        """The draft's shape in RunStart ("" for plain decoding)."""
        return ""

    def _prefill(self, prompt_ids: list[int], run: RunConfig, sampler: PositionSampler | None, seen: Seen):
        """Target prefill over the prompt; returns (output, first token id, its probability, the logits' top two)."""
        ids = torch.tensor(prompt_ids, dtype=torch.long)
        out = self.runner.forward(ids)
        self.runner.commit(list(range(len(prompt_ids))))
        last = penalize(out.logits[-1:], seen.of(out.logits, (prompt_ids,)), run.sampling)[0]  # [V]
        probs = process_logits(last[None], run.sampling)[0]  # [V]
        token = pick(last, probs, run.sampling, sampler, 0)
        return out, token, float(probs[token]), top_two(out.logits[-1:])[0]

    def _stops(self, run: RunConfig) -> frozenset[int]:
        return frozenset() if run.ignore_eos else self.eos

    def _step(self, token: int, run: RunConfig, sampler: PositionSampler | None, position: int,
              context: tuple[list[int], list[int]], seen: Seen):
        """One plain target step on `token` (the last of context's prompt + new tokens): returns (output [1 row],
        next token id, its probability, the logits' top two). Plain decoding takes every step this way, and so does a
        speculative round without a draft. At a longrope target's boundary the step runs the whole sequence again,
        as Phi-3's `generate` does (`rope_limit`)."""
        if self.rope.refills(self.runner.length):
            ids = context[0] + context[1]
            self.runner.restart()
            full = self.runner.forward(torch.tensor(ids, dtype=torch.long))
            self.runner.commit(list(range(len(ids))))
            out = TargetOutput(logits=full.logits[-1:], features=full.features[-1:])  # [1, V], [1, F]
        else:
            out = self.runner.forward(torch.tensor([token]))
            self.runner.commit([0])
        logits = penalize(out.logits, seen.of(out.logits, context), run.sampling)  # [1, V]
        probs = process_logits(logits, run.sampling)[0]  # [V]
        nxt = pick(logits[0], probs, run.sampling, sampler, position)
        return out, nxt, float(probs[nxt]), top_two(out.logits)[0]

    def generate(self, prompt_ids: list[int], run: RunConfig,
                 stop: threading.Event | None = None) -> Iterator[Event]:
        with self.lock:  # one generation at a time on this model
            yield from self._generate(list(prompt_ids), run, stop)

    def _generate(self, prompt_ids, run, stop) -> Iterator[Event]:
        raise NotImplementedError  # each engine's own loop


class BaselineEngine(_EngineBase):
    mode = "baseline"

    def _generate(self, prompt_ids, run, stop) -> Iterator[Event]:
        yield self._start(prompt_ids, run, "")
        device, eos = self.runner.device, self._stops(run)
        sampler = None if run.sampling.greedy else PositionSampler(run.sampling.seed)
        seen = Seen(run)
        self.runner.reset(len(prompt_ids) + run.max_new_tokens + 1)
        t0 = time.perf_counter()
        _, token, prob, top2 = self._prefill(prompt_ids, run, sampler, seen)
        _sync(device)
        t1 = time.perf_counter()
        yield Prefill(token_id=token, seconds=t1 - t0, target_prob=prob, target_top2=top2)
        new, steps = [token], 0
        while (reason := end_reason(token, len(new), run, eos, stop)) is None:
            ts = time.perf_counter()
            _, token, prob, top2 = self._step(token, run, sampler, len(new), (prompt_ids, new), seen)
            _sync(device)
            te = time.perf_counter()
            new.append(token)
            yield Step(index=steps, token_id=token, target_prob=prob, seconds=te - ts,
                       elapsed=te - t1, total_new_tokens=len(new), target_top2=top2)
            steps += 1
        t2 = time.perf_counter()
        self.runner.reset()
        yield Finish(reason=reason, token_ids=tuple(new), new_tokens=len(new), rounds=steps,
                     prefill_seconds=t1 - t0, decode_seconds=t2 - t1)


class SpeculativeEngine(_EngineBase):
    def __init__(self, model: PreTrainedModel, draft: DraftHead | DraftSource, static: bool = False):
        """draft: a head (drafted by a `Drafter`; static: its depths are captured as graphs too) or any drafter."""
        drafter = Drafter(draft, static=static) if isinstance(draft, DraftHead) else draft
        super().__init__(model, drafter.feature_layers, static)
        self.head: DraftHead | None = draft if isinstance(draft, DraftHead) else None
        self.drafter: DraftSource = drafter
        self.mode = drafter.mode

    @property
    def family(self) -> str:
        return self.drafter.family

    def _label(self, run: RunConfig) -> str:
        return self.drafter.label(run)

    def generate(self, prompt_ids: list[int], run: RunConfig,
                 stop: threading.Event | None = None) -> Iterator[Event]:
        return super().generate(prompt_ids, self.drafter.run_for(run), stop)

    def _generate(self, prompt_ids, run, stop) -> Iterator[Event]:
        yield self._start(prompt_ids, run, self.family)
        device, eos, tree_cfg = self.runner.device, self._stops(run), run.tree
        sampler = None if run.sampling.greedy else PositionSampler(run.sampling.seed)
        seen = Seen(run)
        retune = run.retune.retuner(tree_cfg) if run.retune is not None else None  # `autotree.retune`
        widest, drafted = tree_cfg.total_tokens, max(tree_cfg.depth - 1, 0) * tree_cfg.top_k
        if retune is not None:  # any candidate may run
            widest, drafted = (max(a, b) for a, b in zip((widest, drafted), retune.table.widest()))
        need = len(prompt_ids) + run.max_new_tokens + widest
        self.runner.reset(need)
        self.drafter.begin(prompt_ids, run, eos, need, drafted)  # + one round's drafted entries
        t0 = time.perf_counter()
        out, token, prob, top2 = self._prefill(prompt_ids, run, sampler, seen)
        shifted = torch.tensor(prompt_ids[1:] + [token], dtype=torch.long)  # pair i = (feature_i, token_i+1)
        self.drafter.extend(out.features, shifted)
        _sync(device)
        t1 = time.perf_counter()
        yield Prefill(token_id=token, seconds=t1 - t0, target_prob=prob, target_top2=top2)
        gate = DraftGate(run.pause_below, by_length=run.pause_by_length, start_paused=run.pause_first)
        new, rounds, state = [token], 0, RoundState(held=Held(), gate=gate, seen=seen)
        while (reason := end_reason(token, len(new), run, eos, stop)) is None:
            if not gate.drafting or not self.rope.exact(self.runner.length, tree_cfg.depth):
                why = "gate" if not gate.drafting else "rope"
                yield self._plain_round(rounds, (prompt_ids, new), run, sampler, state, t1, why)
                token, rounds = new[-1], rounds + 1
                if not gate.drafting:
                    gate.after_plain()
                continue
            ev = self._draft_round(rounds, (prompt_ids, new), tree_cfg, run, sampler, state, eos, t1)
            token = new[-1]
            if retune is not None and (switch := retune.after_round(ev)) is not None:
                tree_cfg, gate.pause_below = switch[0], round(switch[1], 3)  # the next rounds' shape, its break-even
                gate.by_length = retune.by_length  # a stopping chain's, by drafted length; () for other shapes
            yield ev
            rounds += 1
        t2 = time.perf_counter()
        self.runner.reset()
        self.drafter.reset()
        extra = {"retuned": retune.changes} if retune is not None and retune.changes else {}
        yield Finish(reason=reason, token_ids=tuple(new), new_tokens=len(new), rounds=rounds,
                     prefill_seconds=t1 - t0, decode_seconds=t2 - t1, extra=extra)

    def _draft_round(self, index: int, context: tuple[list[int], list[int]], tree_cfg, run: RunConfig, sampler,
                     state: RoundState, eos: frozenset[int], t1: float) -> Round:
        """A drafting round: the draft grows its tree, the target verifies it in one forward, the accepted path
        and the bonus token are committed to `context`'s new tokens, and the draft extends over them."""
        prompt_ids, new = context
        held, gate, seen = state.held, state.gate, state.seen
        ta = time.perf_counter()
        if held.tokens:  # the draft catches up on the plain rounds' pairs in one extend
            self.drafter.extend(*held.take())
        tree = self.drafter.draft(new[-1], tree_cfg)
        _sync(self.runner.device)
        tb = time.perf_counter()
        out = self.runner.verify(tree)
        _sync(self.runner.device)
        tc = time.perf_counter()
        verdict = verify_tree(tree, out.logits, run.sampling, sampler, len(new),
                              seen.of(out.logits, (prompt_ids, new)))
        accepted = [tree.token_list[i] for i in verdict.path]
        committed = cut(accepted + [verdict.bonus_id], eos, run.max_new_tokens - len(new))
        new.extend(committed)
        rows = [0, *verdict.path][:len(committed)]  # the rows each committed token was chosen from
        top2 = top_two(out.logits[:len(rows)] if rows[-1] == len(rows) - 1 else out.logits[rows])  # a chain: a view
        token = new[-1]
        done = token in eos or len(new) >= run.max_new_tokens
        gate.after_draft(len(committed), len(tree.token_list) - 1 if tree.is_chain else 0)
        td = time.perf_counter()
        extend_seconds = 0.0
        if not done:
            keep = [0, *verdict.path]
            self.runner.commit(keep)
            chain = keep[-1] == len(keep) - 1  # a prefix of the block: a view, no gather
            features = out.features[:len(keep)] if chain else out.features[keep]  # [m, F]
            self.drafter.extend(features, torch.tensor(committed, dtype=torch.long))
            _sync(self.runner.device)
            extend_seconds = time.perf_counter() - td
        te = time.perf_counter()
        return Round(
            index=index, nodes=_nodes(tree), accepted_path=verdict.path, accepted_ids=tuple(accepted),
            bonus_id=verdict.bonus_id, committed_ids=tuple(committed),
            target_probs=verdict.target_probs[:len(committed)], draft_seconds=(tb - ta) + extend_seconds,
            verify_seconds=tc - tb, host_seconds=(te - tc) - extend_seconds, elapsed=te - t1,
            total_new_tokens=len(new), target_top2=top2,
        )

    def _plain_round(self, index: int, context: tuple[list[int], list[int]], run: RunConfig, sampler,
                     state: RoundState, t1: float, why: str) -> Round:
        """A round without a draft (why: "gate", the gate paused drafting; "rope", a verify would not be exact
        under the target's rotary scaling): one plain target step, exactly as plain decoding takes it. Its
        (feature, token) pair waits in `state.held` until drafting resumes. context: (prompt, new tokens); the step
        appends to new."""
        new = context[1]
        ts = time.perf_counter()
        out, token, prob, top2 = self._step(new[-1], run, sampler, len(new), context, state.seen)
        state.held.add(out.features.clone(), token)  # [1, F]; a copy: a replayed CUDA graph rewrites its output buffer
        _sync(self.runner.device)
        te = time.perf_counter()
        new.append(token)
        return Round(
            index=index, nodes=(DraftNode(new[-2], -1, 0, 1.0, 1.0),), accepted_path=(), accepted_ids=(),
            bonus_id=token, committed_ids=(token,), target_probs=(prob,), draft_seconds=0.0,
            verify_seconds=te - ts, host_seconds=0.0, elapsed=te - t1, total_new_tokens=len(new), plain_for=why,
            target_top2=(top2,),
        )


def _nodes(tree) -> tuple[DraftNode, ...]:
    return tuple(map(DraftNode, tree.token_list, tree.parents, tree.depth_list, tree.draft_probs, tree.scores))
