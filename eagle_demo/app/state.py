"""Runs, no Gradio: one run's live events (`LiveRun`), the worker that runs a ready run's race, and the pairs'
registry lookups the events share.

- Models live in a registry keyed by PairKey, loaded lazily (first Generate) or by Load, so browsers using the same
  pair share one loaded model; the engines' locks and a concurrency limit of 1 on every model event keep runs on it
  one at a time. Loading another pair frees the previous one.
- A generation runs in a worker thread that records events into a LiveRun; the page's generator reads a snapshot
  now and then and renders it, so drawing never pauses the engine's clock.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..common.errors import one_line
from ..common.paths import SUITE
from ..decoding.metrics import RunView
from ..prepare import ReadyRun, race
from ..view.tokens import TextCache
from .pages import PAGES, RUNS, RUNS_LOCK, stop_abandoned
from .registry import REGISTRY, PairKey

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["LiveRun", "start_run", "stream_pair", "in_worker", "spawn", "MODEL_GATE", "ensure", "decoder", "best_round",
           "suite_prompts"]

log = logging.getLogger(__name__)


class LiveRun:
    """Events of one run of a `ReadyRun` (EAGLE, and the engines that race it), filled by a worker thread."""

    def __init__(self, key: PairKey, ready: ReadyRun, note: str = "", *, watched: bool = False,
                 started: bool = True):
        """note: shown under the stats (e.g. a run that reaches past the draft's context). watched: a page streams
        this run; its baseline waits (up to DRAW_WAIT seconds, untimed) until the page has drawn EAGLE's final state
        (`eagle_drawn`), so no heavy redraw runs beside the baseline. started False: the page's Stop came before the
        run started; nothing runs, the run is done at once and carries nothing for the Diagnose tab."""
        self.key, self.race, self.greedy = key, ready.race, ready.run.sampling.greedy
        self.watched = watched
        self.eagle_drawn = threading.Event()
        self.note = note
        self.auto = ready.auto if started else None  # the autotree.AutoChoice this run's tree came from, if any
        self.prompt_ids = list(ready.prompt_ids) if started else None  # for the Diagnose tab's replay of this run
        self.tree = ready.run.tree if started else None
        self.eagle = RunView()
        self.baseline = RunView() if ready.race else None
        self.ngram = RunView() if started and "ngram" in ready.phases else None  # races after EAGLE (`decoding.ngram`)
        self.phase = "eagle"
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None
        if not started:
            self.done.set()

    def add(self, phase: str, event) -> None:
        with self.lock:
            self.phase = phase
            {"eagle": self.eagle, "ngram": self.ngram}.get(phase, self.baseline).add(event)

    def count(self) -> int:
        """Events received so far (both runs)."""
        with self.lock:
            return len(self.eagle.events) + sum(len(v.events) for v in (self.baseline, self.ngram) if v is not None)

    def snapshot(self) -> tuple[RunView, RunView | None, str]:
        with self.lock:
            return self.eagle.snapshot(), (self.baseline.snapshot() if self.baseline else None), self.phase

    def ngram_snapshot(self) -> RunView | None:
        """The n-gram racer's events so far (None when it does not race)."""
        with self.lock:
            return self.ngram.snapshot() if self.ngram is not None else None

    def wait_drawn(self) -> None:
        """Between EAGLE and its baseline (in the worker): wait for the watching page's last EAGLE redraw."""
        deadline = time.monotonic() + DRAW_WAIT
        while self.watched and not self.stop.is_set() and time.monotonic() < deadline:
            if self.eagle_drawn.wait(0.05):
                return

    def eagle_finished(self) -> bool:
        with self.lock:
            return self.eagle.finish is not None

    @property
    def state(self) -> str:
        if not self.done.is_set():
            return self.phase if self.phase in ("baseline", "ngram") else "running"
        views = [v for v in (self.eagle, self.ngram, self.baseline) if v is not None]
        return "stopped" if any(v.finish is None or v.finish.reason == "stopped" for v in views) else "done"


def stream_pair(key: PairKey, ready: ReadyRun, stop: threading.Event,
                between: Callable[[], None] | None = None) -> Iterator[tuple[str, Any]]:
    """The ready run's engines in race order (`prepare.race`), sequentially in this worker. Yields (phase, event).
    between: called after EAGLE, before the other racers start (untimed). On ZeroGPU each engine runs in a GPU call
    that takes and returns data only (`gpu_tasks.gpu_phases`)."""
    session = REGISTRY.get(key)
    if session is None:
        raise RuntimeError("the model was unloaded by another load; press Generate again")
    if REGISTRY.gpu_stream is not None:
        stream_phase = REGISTRY.gpu_stream(key, session, ready, stop)
    else:
        def stream_phase(phase: str):
            return session.run(ready, phase, stop)
    yield from race(ready, stream_phase, stop, between)


def in_worker(fn: Callable, *args, **kwargs):
    """Run fn in a fresh thread (with this request's context) and return its result or raise its error.
    Generation and benchmarks both run in fresh threads so their timings are measured the same way."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    spawn("eagle-bench", work).join()
    if "error" in box:
        raise box["error"]
    return box["result"]


WORKERS: set[threading.Thread] = set()  # model workers still going: runs, benchmarks, auto-tree calibrations
WORKERS_LOCK = threading.Lock()
EXIT_WAIT_SECONDS = 60.0


def spawn(name: str, fn: Callable, *args) -> threading.Thread:
    """Start fn(*args) in a daemon thread that carries this request's context (ZeroGPU reads it) and that the
    interpreter's exit waits for (`_drain_at_exit`)."""
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            ctx.run(fn, *args)
        finally:
            with WORKERS_LOCK:
                WORKERS.discard(threading.current_thread())

    thread = threading.Thread(target=work, name=name, daemon=True)
    with WORKERS_LOCK:
        WORKERS.add(thread)
    try:
        thread.start()
    except BaseException:
        with WORKERS_LOCK:
            WORKERS.discard(thread)
        raise
    return thread


@atexit.register
def _drain_at_exit() -> None:
    """Stop every run and benchmark and wait for the workers to leave torch before the interpreter finalizes.
    A daemon thread still inside torch at finalization aborts the process ("terminate called without an
    active exception", exit status 134), which turned a green test run or a Ctrl-C'd app into a crash."""
    stop_abandoned()
    for page in PAGES:
        if page.bench_stop is not None:
            page.bench_stop.set()
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    with WORKERS_LOCK:
        workers = list(WORKERS)
    for thread in workers:  # a run ends at its next round, a benchmark after its prompt, a calibration in seconds
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in workers):
        log.warning("model workers still running at exit after %.0f s: %s", EXIT_WAIT_SECONDS,
                    ", ".join(t.name for t in workers if t.is_alive()))


DRAW_WAIT = 5.0  # longest a baseline waits for its page to draw EAGLE's final state
MODEL_GATE = threading.Lock()  # held by a run's worker and by an auto-tree calibration: one model use at a time


def start_run(key: PairKey, ready: ReadyRun, note: str = "", *, watched: bool = False) -> LiveRun:
    """Start the worker on a run `prepare.prepare_run` made; an abandoned run still going is told to stop
    (`stop_abandoned`). note: the line shown under the stats (the ready run's own note when not given). watched: a
    page streams it (`LiveRun`)."""
    live = LiveRun(key, ready, note or ready.note, watched=watched)
    stop_abandoned()
    with RUNS_LOCK:
        RUNS[:] = [r for r in RUNS if not r.done.is_set()] + [live]

    def work() -> None:
        try:
            with MODEL_GATE:  # waits for a calibration or an abandoned run to let go
                for phase, event in stream_pair(key, ready, live.stop, live.wait_drawn):
                    live.add(phase, event)
        except Exception as exc:  # reported to the page as one line; the traceback goes to the log
            log.exception("generation failed")
            live.error = one_line(exc)
        finally:
            live.done.set()

    spawn("eagle-run", work)
    return live


def ensure(key: PairKey, say: Callable[[str, float], None] | None = None) -> Session:
    """The loaded session of `key`, loading it (and freeing another) when it is not loaded."""
    session = REGISTRY.get(key)
    return session if session is not None else REGISTRY.load(key, say)


def decoder(key: PairKey | None) -> TextCache:
    """Memoized decoding with the pair's tokenizer (token ids in brackets when the pair is gone)."""
    session = REGISTRY.get(key) if key is not None else None
    if session is None:
        return TextCache(lambda ids: "".join(f"⟨{i}⟩" for i in ids))
    return TextCache(session.decode)


def best_round(view: RunView) -> int:
    """The round to show first: the one with the longest accepted path (the first such), preferring a whole round
    (one the run's end did not cut, so it shows the target's own token too)."""
    if not view.rounds:
        return 0
    return max(view.rounds, key=lambda r: (len(r.committed_ids) > len(r.accepted_path), len(r.accepted_path),
                                           -r.index)).index


def suite_prompts() -> tuple[list[str], list[str]]:
    """(code prompts for the examples, categories) of the shipped suite, read without importing the engine."""
    try:
        rows = [json.loads(line) for line in SUITE.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return [], []
    categories = list(dict.fromkeys(str(r.get("category", "")) for r in rows))
    return [str(r["prompt"]) for r in rows if r.get("category") == "code" and "prompt" in r], categories
