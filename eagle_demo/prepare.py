"""One way from a request to a verified round, shared by the page's Generate, `/generate`, the CLI and the ZeroGPU
GPU call.

- `prepare_run` checks a run once: the prompt encoded, its length checked for every engine that will run it, the
  automatic tree chosen (the caller says how: the page, the API and the CLI each have their rule), the tree
  checked. It returns a frozen `ReadyRun`; nothing checks that run again (`Session.run` takes it as it is).
- `race` runs a ready run's engines in race order (EAGLE or the chosen draft first, then the n-gram draft, then
  plain decoding of the same prompt), whatever runs each engine: this process, or a GPU call per engine.
No Gradio here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from .common.config import RunConfig
from .decoding.events import Event

__all__ = ["PHASES", "RunRequest", "ReadyRun", "TreeChoice", "race_phases", "prepare_run", "race"]

PHASES = ("eagle", "ngram", "baseline")  # the engines: the loaded draft, the n-gram draft, plain decoding

# (run with the tree that will run, the autotree.AutoChoice it came from or None, a note or "")
TreeChoice = Callable[[RunConfig], tuple[RunConfig, Any, str]]


class _Checks(Protocol):
    """What `prepare_run` asks of a session (`session.Session`): its encoding and its checks."""

    def encode(self, prompt: str, chat: bool = False, history: tuple[tuple[str, str], ...] = ()) -> list[int]: ...

    def check_length(self, prompt_ids: list[int], run: RunConfig, mode: str = "eagle") -> None: ...

    def check_tree(self, run: RunConfig) -> None: ...

    def context_note(self, prompt_tokens: int, run: RunConfig) -> str: ...


@dataclass(frozen=True)
class RunRequest:
    """A run as a caller asks for it, before any check: the prompt as text (encoded in the tokenizer's chat template
    with `chat`, after the conversation's earlier (user, assistant) turns in `history`) or as token ids, the run's
    settings, and the engines that run it in race order (`race_phases`)."""

    prompt: str | tuple[int, ...]
    run: RunConfig
    phases: tuple[str, ...] = ("eagle",)
    chat: bool = False
    history: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ReadyRun:
    """A run that passed every check (`prepare_run`): the prompt's token ids, the settings with the tree that runs,
    the engines in race order, the automatic tree's choice it came from (None: a tree set by hand, or no draft) and
    the note the run shows ("" when there is nothing to say)."""

    prompt_ids: tuple[int, ...]
    run: RunConfig
    phases: tuple[str, ...] = ("eagle",)
    auto: Any = None  # autotree.AutoChoice
    note: str = ""

    @property
    def race(self) -> bool:
        """Whether other engines race the first one on the same prompt."""
        return len(self.phases) > 1


def race_phases(first: str = "eagle", *, race: bool = False, ngram: bool = False) -> tuple[str, ...]:
    """The engines that run a prompt, in race order: `first`, then when racing the n-gram draft (`ngram`, only
    behind EAGLE) and plain decoding. Plain decoding has nothing to race."""
    if not race or first == "baseline":
        return (first,)
    return (first, *(("ngram",) if ngram and first == "eagle" else ()), "baseline")


def prepare_run(session: _Checks, request: RunRequest, choose_tree: TreeChoice | None = None) -> ReadyRun:
    """`request` checked once, in this order: the engines named, the prompt encoded, its length for every engine
    that runs (a bad prompt fails before any calibration), the tree chosen by `choose_tree` when EAGLE runs first
    and the caller gives one (its length checked again when the choice changed it), and the tree checked against
    the draft. Raises the one-line error of the first check that fails."""
    for phase in request.phases:
        if phase not in PHASES:
            raise ValueError(f"unknown mode '{phase}'; use eagle, ngram or baseline")
    prompt = request.prompt
    ids = (session.encode(prompt, chat=request.chat, history=request.history) if isinstance(prompt, str)
           else [int(i) for i in prompt])
    run, auto, notes = request.run, None, []
    for phase in request.phases:
        session.check_length(ids, run, phase)
    if request.phases[0] == "eagle":
        if choose_tree is not None:
            run, auto, auto_note = choose_tree(run)
            notes.append(auto_note)
            if run.tree != request.run.tree:  # the chosen tree needs its own room in the context
                session.check_length(ids, run, "eagle")
        session.check_tree(run)
        notes.append(session.context_note(len(ids), run))
    return ReadyRun(tuple(ids), run, request.phases, auto, "; ".join(n for n in notes if n))


def race(ready: ReadyRun, stream_phase: Callable[[str], Iterator[Event]], stop: threading.Event | None = None,
         between: Callable[[], None] | None = None) -> Iterator[tuple[str, Event]]:
    """The ready run's engines one after another, in race order, each event tagged with its engine (its phase).
    `stream_phase(phase)` runs one engine: here (`Session.run`) or in a GPU call (`app.gpu_tasks`). After the first
    engine, once: a set `stop` ends the race, else `between` runs (untimed: the page draws the first engine's end)
    before the others start."""
    for index, phase in enumerate(ready.phases):
        if index == 1:
            if stop is not None and stop.is_set():
                return
            if between is not None:
                between()
        for event in stream_phase(phase):
            yield phase, event
