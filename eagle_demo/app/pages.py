"""Which page or API client has which run, pair, waiting Generate and benchmark: per-page bookkeeping of the
Playground's Generate and Stop (no Gradio, no models)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

__all__ = ["PerPage", "LAST_RUNS", "CLIENT_PAIRS", "PENDING", "BENCH_STOPS", "LOAD_STOPS", "STOPPED_CLICKS",
           "GenerateRequest",
           "note_stop", "stopped_before_start", "BenchmarkStopped", "RUNS", "RUNS_LOCK", "stop_abandoned"]


class PerPage:
    """session hash -> value, keeping the most recent `capacity` pages (the pair a page or API client loaded,
    the LiveRun its Stop button ends)."""

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, session_hash: str | None, value: Any) -> None:
        if not session_hash:
            return
        with self._lock:
            self._items[session_hash] = value
            self._items.move_to_end(session_hash)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def get(self, session_hash: str | None) -> Any:
        with self._lock:
            return self._items.get(session_hash) if session_hash else None

    def pop(self, session_hash: str | None) -> Any:
        with self._lock:
            return self._items.pop(session_hash, None) if session_hash else None

    def values(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def items(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._items)


LAST_RUNS = PerPage()  # session hash -> LiveRun
CLIENT_PAIRS = PerPage()  # session hash -> the PairKey that page or API client used last
PENDING = PerPage()  # session hash -> GenerateRequest of the Generate click waiting for its turn in the queue
BENCH_STOPS = PerPage()  # session hash -> threading.Event of that page's running benchmark
LOAD_STOPS = PerPage()  # session hash -> threading.Event of that page's running Load (its download)


STOPPED_CLICKS = PerPage()  # session hash -> the page's Generate click count when its latest Stop was pressed


class GenerateRequest:
    """One Generate click, noted before it joins the queue, so that a Stop pressed while it waits ends it.
    `click` numbers the page's Generate clicks (1, 2, ...; 0 when the caller does not count them)."""

    def __init__(self, click: int = 0):
        self.click = click
        self.stopped = threading.Event()


def note_stop(session_hash: str | None, clicks: int) -> None:
    """A Stop pressed after the page's `clicks`-th Generate click: it ends that Generate even when its note
    reaches the server after the Stop (the page sends them as two requests, served in either order)."""
    if clicks > 0:
        STOPPED_CLICKS.put(session_hash, max(clicks, STOPPED_CLICKS.get(session_hash) or 0))


def stopped_before_start(session_hash: str | None, pending: GenerateRequest | None) -> bool:
    """Whether the page pressed Stop after this Generate click and before its run started."""
    if pending is None:
        return False
    return pending.stopped.is_set() or (pending.click > 0 and (STOPPED_CLICKS.get(session_hash) or 0) >= pending.click)


class BenchmarkStopped(RuntimeError):
    """Raised from a benchmark's progress callback when its page pressed Stop."""


RUNS: list = []  # the `state.LiveRun`s whose worker may still be going
RUNS_LOCK = threading.Lock()


def stop_abandoned() -> None:
    """Model events run one at a time, so a run still going when one starts was abandoned (its page was
    cancelled or closed): tell it to stop; it ends at its next round and lets go of MODEL_GATE."""
    with RUNS_LOCK:
        for old in RUNS:
            old.stop.set()
