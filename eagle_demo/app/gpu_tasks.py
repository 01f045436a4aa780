"""The GPU side of a ZeroGPU Space: one decorated function, `gpu_task`, that takes and returns plain data.

Its arguments are a pair key, the main process's probe report of the pair (or None) and a task (`StreamTask`,
`CalibrateTask`, `ProbeTask`, `BenchTask`, `ExploreTask`: prompt ids, a RunConfig, numbers); the worker looks the
session up in its own registry (forked from the main process after the start-up load). It yields tagged tuples
of plain data: ("event", event), ("stage", text, fraction), ("done", value), or ("error", one line): an error
comes back as the same one-line message as anywhere else, never as a bare class name. One function, so one worker
per GPU serves every kind of task and a probe's outcome stays in the process that drafts with it.

`calls` and `run_to_end` are the main process's side: closing their generator closes the GPU call, and the worker
stops after its next yield (Stop, a cancelled request).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import queue
import threading
from typing import Any, Callable, Iterator

import gradio as gr

from ..common.config import RunConfig, TreeConfig
from ..common.errors import one_line
from ..prepare import ReadyRun
from .pages import BenchmarkStopped
from .registry import REGISTRY, PairKey
from .zerogpu import gpu, run_seconds

__all__ = ["StreamTask", "CalibrateTask", "ProbeTask", "BenchTask", "ExploreTask", "gpu_task", "calls", "run_to_end",
           "GpuTaskError", "serve", "gpu_phases", "probe_on_gpu"]

log = logging.getLogger(__name__)

Say = Callable[[str, float], None]


class GpuTaskError(RuntimeError):
    """A GPU task's failure, carrying the one line the worker made of it."""


@dataclasses.dataclass(frozen=True)
class StreamTask:
    """One engine's run (phase "eagle", "ngram" or "baseline") of a ready run, checked in the main process
    (`prepare.prepare_run`) and not again here: yields its events."""

    phase: str
    ready: ReadyRun

    def seconds(self) -> int:
        return run_seconds(self.ready.run.max_new_tokens)

    def work(self, key: PairKey, session) -> Iterator[tuple]:
        stop = threading.Event()
        events = session.run(self.ready, self.phase, stop)
        try:
            for event in events:
                yield ("event", event)
        finally:  # a closed call (Stop): the engine ends cleanly
            stop.set()
            events.close()


@dataclasses.dataclass(frozen=True)
class CalibrateTask:
    """The automatic tree's calibration (`autotree.auto_tree`): stages, then the AutoChoice."""

    def seconds(self) -> int:
        return run_seconds(0, calibrate=True)

    def work(self, key: PairKey, session) -> Iterator[tuple]:
        from ..autotree.choose import auto_tree

        return _relay(lambda say, stop: auto_tree(session, progress=lambda stage: say(stage, 0.0)))


@dataclasses.dataclass(frozen=True)
class ProbeTask:
    """The pre-flight probe (`Session.probe`): stages, then the pair's report with its `probe` filled."""

    def seconds(self) -> int:
        return run_seconds(0, probe=True)

    def work(self, key: PairKey, session) -> Iterator[tuple]:
        def probe(say: Say, stop: threading.Event):
            report = session.probe(say)
            _ADOPTED[key] = _used(report)
            return report
        return _relay(probe)


@dataclasses.dataclass(frozen=True)
class BenchTask:
    """A benchmark (`bench.run_bench`, or `bench.sweep_temperatures` when temperatures are given): stages
    ("name (done/total)"), then the report (a list of reports for a sweep)."""

    items: tuple
    run: RunConfig
    temperatures: tuple[float, ...] = ()
    repeats: int = 1
    chat: bool = False

    def seconds(self) -> int:
        runs = 2 * len(self.items) * self.repeats * max(len(self.temperatures), 1) + 2  # both engines + warm-up
        return run_seconds(self.run.max_new_tokens, runs)

    def work(self, key: PairKey, session) -> Iterator[tuple]:
        from ..bench.run import run_bench, sweep_temperatures

        def bench(say: Say, stop: threading.Event):
            def step(done: int, total: int, name: str) -> None:
                if stop.is_set():  # the page's Stop closed the call
                    raise BenchmarkStopped(f"benchmark stopped after {done} of {total} runs")
                say(f"{name} ({done}/{total})", done / max(total, 1))
            options = dict(repeats=self.repeats, chat=self.chat, progress=step)
            if self.temperatures:
                return sweep_temperatures(session, list(self.items), self.run, list(self.temperatures), **options)
            return run_bench(session, list(self.items), self.run, **options)
        return _relay(bench)


@dataclasses.dataclass(frozen=True)
class ExploreTask:
    """The shape explorer (`autotree.explore.explore`) on a finished run's text: the Exploration (frozen data)."""

    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    ran: TreeConfig | None = None  # the shape that ran
    costs: Any = None  # the automatic tree's `Costs` with its `scale` (None: taus only)
    scale: float = 1.0
    measured_tau: float | None = None
    greedy: bool = True

    def seconds(self) -> int:  # one target forward over the text and the draft's grows: less than the run itself
        return run_seconds(len(self.output_ids))

    def work(self, key: PairKey, session) -> Iterator[tuple]:
        from ..autotree.explore import explore

        options = dict(ran=self.ran, costs=self.costs, scale=self.scale, measured_tau=self.measured_tau,
                       greedy=self.greedy)
        return _relay(lambda say, stop: explore(session, list(self.prompt_ids), list(self.output_ids), **options))


_ADOPTED: dict[PairKey, str] = {}  # in a GPU worker: the probe conventions its copy of each pair drafts with
_CHECKED: set[PairKey] = set()  # in a GPU worker: the pairs whose target passed its forward check here


def _used(report) -> str:
    return json.dumps((report.probe or {}).get("used"), sort_keys=True)


def _seconds(key: PairKey, report, task) -> int:
    return task.seconds()


@gpu(duration=_seconds)
def gpu_task(key: PairKey, report, task) -> Iterator[tuple]:
    """Run `task` on the worker's copy of the pair `key`, first drafting with the conventions of the main
    process's probe `report` (None: never probed) when this copy does not yet."""
    try:
        session = REGISTRY.get(key)
        if session is None:
            raise RuntimeError(f"this GPU worker does not hold {key.label()}; press the button again")
        if key not in _CHECKED:  # the check a load runs (`target.check`), made where the weights compute
            _check(session)
            _CHECKED.add(key)
        if report is not None and report.probe is not None and _ADOPTED.get(key) != _used(report):
            session.adopt(report)  # the probe ran in another worker: its outcome, without measuring again
            _ADOPTED[key] = _used(report)
        yield from task.work(key, session)
    except Exception as exc:  # one line, as anywhere else (the package would send only the class name)
        log.exception("GPU task failed")
        yield ("error", one_line(exc))


def _check(session) -> None:
    from ..checkpoints import CheckpointError
    from ..target.check import check_target

    try:
        check_target(session.pair.target)
    except ValueError as exc:
        raise CheckpointError(f"target {session.report.target_path}: {exc}") from exc


def _relay(work: Callable[[Say, threading.Event], Any]) -> Iterator[tuple]:
    """work(say, stop) in a thread of the worker, its progress yielded as it comes, then ("done", result). A
    closed call sets `stop` and waits for the thread."""
    out: queue.Queue = queue.Queue()
    stop, box = threading.Event(), {}

    def run() -> None:
        try:
            box["value"] = work(lambda text, fraction: out.put(("stage", text, float(fraction))), stop)
        except BaseException as exc:  # raised in the generator below
            box["error"] = exc
        finally:
            out.put(None)

    thread = threading.Thread(target=run, name="eagle-gpu-task", daemon=True)
    thread.start()
    try:
        while (item := out.get()) is not None:
            yield item
    finally:
        stop.set()
        thread.join()
    if "error" in box:
        raise box["error"]
    yield ("done", box["value"])


# ---- the main process's side ------------------------------------------------------------------------------------

def calls(key: PairKey, session, task) -> Iterator[tuple]:
    """`gpu_task`'s items for the loaded `session` of `key`; an ("error", line) is raised as GpuTaskError."""
    report = session.report if session.report.probe is not None else None
    try:
        with contextlib.closing(gpu_task(key, report, task)) as items:
            for item in items:
                if item[0] == "error":
                    raise GpuTaskError(item[1])
                yield item
    except gr.Error as exc:  # the package's own (quota, queue); a worker that failed to start says only a class name
        if not str(exc.message).isidentifier():
            raise
        raise GpuTaskError(f"the GPU worker failed ({exc.message}; the Space's log has the traceback); press the "
                           "button again") from None


def run_to_end(key: PairKey, session, task, say: Say | None = None, stop: threading.Event | None = None):
    """The task's result; its stages go to `say`. A set `stop` closes the call (the worker stops after its next
    yield) and raises BenchmarkStopped."""
    with contextlib.closing(calls(key, session, task)) as items:
        for item in items:
            if stop is not None and stop.is_set():
                raise BenchmarkStopped("benchmark stopped; press Run benchmark to start again")
            if item[0] == "stage" and say is not None:
                say(item[1], item[2])
            elif item[0] == "done":
                return item[1]
    raise GpuTaskError("the GPU task ended without a result; press the button again")


def gpu_phases(key: PairKey, session, ready: ReadyRun, stop: threading.Event) -> Callable[[str], Iterator[Any]]:
    """`prepare.race`'s engine runner on ZeroGPU: one GPU call per engine, so the page's drawing of EAGLE's end
    (`between`) runs here, between two calls, untimed; nothing but data crosses to the worker (the run without its
    automatic-tree choice, which the worker does not read). Each engine times its own steps in the worker, so every
    racer pays the same transport per event."""
    sent = dataclasses.replace(ready, auto=None)

    def phase_events(phase: str) -> Iterator[Any]:
        with contextlib.closing(calls(key, session, StreamTask(phase, sent))) as items:
            for item in items:
                if item[0] == "event":
                    yield item[1]
                if stop.is_set():  # closing the call stops the worker after its next yield
                    break
    return phase_events


def serve(keys: list[PairKey]) -> None:
    """ZeroGPU start-up: load `keys` now, in this (the main) thread, where the `spaces` package turns their move to
    CUDA into copies it hands to each GPU worker; from then on no other pair loads (`Registry.load` refuses it in
    one line naming the setting), and the engines and the probe run in GPU calls. transformers' threaded weight
    loading would reach the real CUDA init from its own threads: it is turned off. The target's forward check
    runs in each worker, on the device (`gpu_task`)."""
    import torch

    os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"
    REGISTRY.capacity = max(len(keys), 1)
    REGISTRY.missing = {}
    for key in keys:
        try:  # other threads see the placeholders' own device (cpu)
            REGISTRY.load(key, check=False).placed = torch.device("cuda")
        except Exception as exc:  # a typo, a Hub outage, a gated repo: the other pairs still serve
            REGISTRY.missing[key] = one_line(exc)
            log.warning("not serving %s: %s", key.label(), REGISTRY.missing[key])
    served = [key for key in keys if key not in REGISTRY.missing]
    REGISTRY.served = served
    REGISTRY.gpu_stream, REGISTRY.gpu_probe = gpu_phases, probe_on_gpu
    REGISTRY.fallback = served[0] if served else REGISTRY.fallback


def probe_on_gpu(key: PairKey, session, progress: Say | None = None):
    """`Session.probe` on ZeroGPU: measured in a GPU call; this process keeps the report (its own copy of the
    head is a placeholder), and each later call passes it on for the worker to draft with (`Session.adopt`)."""
    from ..session import PromptError

    if session.eagle is None:
        raise PromptError("no draft is loaded, so there is nothing to probe; load a draft first")
    if session.report.probe is None:  # once per session, as `Session.probe`
        report = run_to_end(key, session, ProbeTask(), progress)
        session.pair = dataclasses.replace(session.pair, report=report)
    return session.report
