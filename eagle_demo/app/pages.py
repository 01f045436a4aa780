"""What each page (or API client) owns, in one record per client (`Page`), kept in `PAGES`: its last run, the pair
it uses, its Generate click waiting for its turn, the stop events of its Load and benchmark, and the tree preset
and the settings "auto" put on its draft panel. No Gradio, no models.

Lifetime: a client's record is made on its first request that names one (its session hash) and freed when its page
closes (`Pages.close`, wired to Gradio's unload), or, for clients that never close (an API client that just goes
away), when it is the least recent of more than `Pages.capacity`. A freed record that an event still holds (a
benchmark or a Generate still going) is found again under its hash until that event lets go: Gradio also unloads a
page whose heartbeat dropped for a moment and came back, and its Stop must still reach what it started.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..common.config import TreeConfig

__all__ = ["Page", "Pages", "PAGES", "PendingClick", "BenchmarkStopped", "RUNS", "RUNS_LOCK", "stop_abandoned"]


class PendingClick:
    """One Generate click, noted before it joins the queue, so that a Stop pressed while it waits ends it.
    `click` numbers the page's Generate clicks (1, 2, ...; 0 when the caller does not count them)."""

    def __init__(self, click: int = 0):
        self.click = click
        self.stopped = threading.Event()


@dataclass
class Page:
    """Everything one page or API client owns. Its fields change as the page's events come; `lock` keeps a Stop
    and a Generate's note, served in either order by two requests, from missing each other."""

    # typed Any: `state.LiveRun` and `registry.PairKey` live in modules that import this one
    run: Any = None  # the `state.LiveRun` it started last (its Stop ends it; the draft panel follows it)
    pair: Any = None  # the `registry.PairKey` it used last (`/generate` runs on it; public mode holds it for them)
    pending: PendingClick | None = None  # its Generate click waiting for its turn in the queue
    stopped_clicks: int = 0  # its Generate click count when its latest Stop was pressed
    load_stop: threading.Event | None = None  # set by Stop: ends its running Load (the download)
    bench_stop: threading.Event | None = None  # set by Stop: ends its running benchmark
    bench_noted: bool = False  # its Run benchmark click made `bench_stop` and that benchmark has not started yet
    preset: str | None = None  # the tree preset its draft panel shows (None: never noted)
    auto_shown: TreeConfig | None = None  # the tree "auto" last put on its draft panel (perhaps another pair's)
    conversation: tuple[tuple[str, str], ...] = ()  # its chat's finished (user, assistant) turns, on `talk_pair`
    talk_pair: Any = None  # the pair the conversation ran on: another pair starts a new one
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def turns_for(self, key: Any) -> tuple[tuple[str, str], ...]:
        """The conversation a chat Generate on `key` continues: its earlier turns, none on another pair."""
        with self.lock:
            return self.conversation if key == self.talk_pair else ()

    def add_turn(self, key: Any, user: str, answer: str) -> None:
        """A finished chat turn on `key` (a turn on another pair starts the conversation afresh)."""
        with self.lock:
            earlier = self.conversation if key == self.talk_pair else ()
            self.conversation, self.talk_pair = (*earlier, (user, answer)), key

    def forget_conversation(self) -> None:
        with self.lock:
            self.conversation, self.talk_pair = (), None

    def note_click(self, click: int) -> None:
        """A Generate click (the page's `click`-th) that joins the queue now."""
        with self.lock:
            self.pending = PendingClick(click)

    def note_stop(self, clicks: int) -> None:
        """Stop, pressed after the page's `clicks`-th Generate click: it ends that Generate even when its note
        reaches the server after the Stop (the page sends them as two requests, served in either order), the
        waiting click, the running run, the benchmark and the Load."""
        with self.lock:
            if clicks > 0:
                self.stopped_clicks = max(clicks, self.stopped_clicks)
            pending = self.pending
        for stop in (pending.stopped if pending else None, self.run.stop if self.run else None, self.bench_stop,
                     self.load_stop):
            if stop is not None:
                stop.set()

    def note_benchmark(self) -> None:
        """A Run benchmark click, noted before it joins the queue: a Stop from now on ends that benchmark, even
        while it waits for its turn, loads the pair or calibrates."""
        with self.lock:
            self.bench_stop, self.bench_noted = threading.Event(), True

    def benchmark_stop(self) -> threading.Event:
        """The stop event of the benchmark starting now: the one its click noted, else (an API call) a new one."""
        with self.lock:
            if not self.bench_noted or self.bench_stop is None:
                self.bench_stop = threading.Event()
            self.bench_noted = False
            return self.bench_stop

    def stopped_before_start(self) -> bool:
        """Takes the waiting click: whether the page pressed Stop after it and before its run started."""
        with self.lock:
            pending, self.pending = self.pending, None
            if pending is None:
                return False
            return pending.stopped.is_set() or 0 < pending.click <= self.stopped_clicks


class Pages:
    """session hash -> `Page`, the most recent `capacity` kept; a request without a session hash gets a record of
    its own that is kept nowhere (what it notes is dropped, what it reads is empty)."""

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._pages: OrderedDict[str, Page] = OrderedDict()
        self._freed: weakref.WeakValueDictionary[str, Page] = weakref.WeakValueDictionary()  # still held by an event
        self._lock = threading.Lock()

    def of(self, session_hash: str | None) -> Page:
        """The client's record, made on its first use."""
        if not session_hash:
            return Page()
        with self._lock:
            page = self._pages.get(session_hash) or self._freed.pop(session_hash, None)
            if page is None:
                page = Page()
            self._pages[session_hash] = page
            self._pages.move_to_end(session_hash)
            while len(self._pages) > self.capacity:
                old, evicted = self._pages.popitem(last=False)
                self._freed[old] = evicted
            return page

    def close(self, session_hash: str | None) -> None:
        """The page closed: its record is freed (a run it left going ends on its own: its stream's clean-up stops
        it, and the next run stops any abandoned one)."""
        with self._lock:
            page = self._pages.pop(session_hash or "", None)
            if page is not None:
                self._freed[session_hash] = page

    def __contains__(self, session_hash: object) -> bool:
        with self._lock:
            return session_hash in self._pages

    def __iter__(self) -> Iterator[Page]:
        """Every record an event may still use: the kept ones, then those freed that an event still holds (the exit's
        drain stops their benchmarks too, `state._drain_at_exit`)."""
        with self._lock:
            return iter([*self._pages.values(), *self._freed.values()])  # a hash is in one of the two, never both

    def pairs(self) -> dict[str, Any]:
        """session hash -> the pair each client used last (public mode's holds, `public.to_free`): the kept records',
        and a freed record's while an event still holds it."""
        with self._lock:
            records = {**dict(self._freed.items()), **self._pages}
        return {session_hash: page.pair for session_hash, page in records.items() if page.pair is not None}


PAGES = Pages()


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
