"""The loaded pairs: a registry keyed by PairKey (target, draft, revisions, dtype, device), loaded lazily (first
Generate) or by Load, so browsers using the same pair share one loaded model. Loading another pair frees the
previous one; a client whose pair was freed is told which pair replaced it. No Gradio."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..common.config import ConfigError
from ..common.paths import ROOT
from . import public
from .pages import PAGES, RUNS, RUNS_LOCK
from .presets import PRESETS
from .zerogpu import PAIRS_SETTING, refusal

if TYPE_CHECKING:
    from ..session import Session

from .pages import stop_abandoned

log = logging.getLogger(__name__)

__all__ = ["PairKey", "make_key", "entry", "local_or_repo", "Registry", "REGISTRY"]


@dataclass(frozen=True)
class PairKey:
    target: str
    draft: str | None
    revision: str | None = None
    draft_revision: str | None = None
    dtype: str = "auto"
    device: str = "auto"

    def label(self) -> str:
        return f"{public.shown_path(self.target)} + {public.shown_path(self.draft) or 'no draft'}"


def local_or_repo(text: str | None, kind: str = "") -> str | None:
    """A local folder as an absolute path (one key per folder, however it is typed; paths relative to the
    repository, like assets/tiny-target, work from any working directory); anything else unchanged."""
    text = (text or "").strip()
    if not text:
        return None
    for path in (Path(text).expanduser(), ROOT / text):
        try:
            if path.exists():
                return str(path.resolve())
        except OSError:  # e.g. a name too long: the resolver says so, in a line that cuts it
            return text
    return text


def entry(text: str | None, kind: str) -> str | None:
    """A target or draft box as a key holds it: `local_or_repo`, or in public mode `public.admit` (the shipped
    assets, the presets and the owner's Hub repos only; nothing else is looked up on the disk)."""
    if public.enabled():
        return public.admit(text, kind, PRESETS)
    return local_or_repo(text)


def make_key(target: str, draft: str | None, revision: str | None = None, dtype: str = "auto",
             device: str = "auto", draft_revision: str | None = None, owner: bool = False) -> PairKey:
    """owner: the pair comes from the app's owner (the page's default, a ZeroGPU Space's pairs), not a visitor:
    public mode does not restrict it."""
    pick = local_or_repo if owner else entry
    target_path, draft = pick(target, "target"), pick(draft, "draft")
    if target_path is None:
        raise ConfigError("the target is empty; pick a preset or type a repo id or folder")
    return PairKey(target_path, draft, (revision or "").strip() or None,
                   (draft_revision or "").strip() or None, dtype or "auto", device or "auto")


class Registry:
    """Loaded sessions by key; keeps at most `capacity` (a Space has memory for one real pair).

    Loads run one at a time (`_loading`); lookups only take the short `_lock`, so pages that redraw or stop
    are never held up by a long download."""

    def __init__(self, capacity: int = 1):
        self.capacity = capacity
        self._sessions: OrderedDict[PairKey, Session] = OrderedDict()
        self._lock = threading.Lock()
        self._loading = threading.Lock()
        self.fallback: PairKey | None = None  # the page's default pair: /generate loads it when nothing is loaded
        self.missing: dict[PairKey, str] = {}  # ZeroGPU: served pairs that failed to load at start-up, and why
        self.served: list[PairKey] | None = None  # ZeroGPU: the pairs loaded at start-up (`gpu_tasks.serve`), and
        self.gpu_stream: Callable | None = None  # what runs the engines and the probe in GPU calls
        self.gpu_probe: Callable | None = None
        self._replaced: OrderedDict[PairKey, PairKey] = OrderedDict()  # freed pair -> the pair whose load freed it
        self._used: dict[PairKey, float] = {}  # when each loaded pair was last asked for (public mode's holds)

    def replaced_by(self, key: PairKey) -> PairKey | None:
        """The pair loaded in place of `key` when `key` was freed by another load and is still not loaded."""
        with self._lock:
            return None if key in self._sessions else self._replaced.get(key)

    def get(self, key: PairKey) -> Session | None:
        with self._lock:
            if key in self._sessions:
                self._used[key] = time.monotonic()
            return self._sessions.get(key)

    def current(self) -> PairKey | None:
        with self._lock:
            return next(reversed(self._sessions), None)

    def for_client(self, used: PairKey | None) -> PairKey:
        """The pair a client's request runs on: the one it `used` last (`pages.Page.pair`), else the last loaded,
        else the default."""
        key = used or self.current() or self.fallback
        if key is None:
            raise ConfigError("no pair is loaded; load one with /load first")
        return key

    def load(self, key: PairKey, progress: Callable[[str, float], None] | None = None, *, check: bool = True,
             client: str | None = None) -> Session:
        """`client`: the session hash asking (public mode frees no pair another client holds, `public.to_free`)."""
        from ..checkpoints import CheckpointError, inspect_pair
        from ..session import load_session

        with self._loading:
            with self._lock:
                if key in self._sessions:
                    self._sessions.move_to_end(key)
                    self._used[key] = time.monotonic()
                    return self._sessions[key]
            if self.served is not None:  # ZeroGPU: only the start-up pairs (a load here would reach CUDA)
                if key in self.missing:
                    raise ConfigError(f"{key.label()} is in this Space's {PAIRS_SETTING} but did not load at "
                                      f"start-up: {self.missing[key]}; fix the setting or the repo and restart "
                                      "the Space")
                raise ConfigError(refusal(key.label(), [k.label() for k in self.served]))
            say = progress or (lambda stage, fraction: None)
            say("checking the pair", 0.0)
            cap = public.max_download_bytes() if public.enabled() else None  # declared sizes, before downloading
            report = inspect_pair(key.target, key.draft, key.revision, key.draft_revision,  # fails before freeing
                                  max_download_bytes=cap)
            if report.problem:
                raise CheckpointError(report.problem)
            freed = self._free_for(key, client) if public.enabled() else self._evict(self.capacity - 1)
            session = load_session(key.target, key.draft, revision=key.revision, draft_revision=key.draft_revision,
                                   dtype=key.dtype, device=key.device, progress=say, check=check,
                                   max_download_bytes=cap,
                                   threads=int(os.environ.get("EAGLE_DEMO_THREADS", "0") or 0))
            with self._lock:
                self._sessions[key] = session
                self._used[key] = time.monotonic()
                self._replaced.pop(key, None)
                self._replaced.update((old, key) for old in freed)  # only a load that succeeded replaced them
                while len(self._replaced) > 64:
                    self._replaced.popitem(last=False)
            return session

    def probe(self, key: PairKey, progress: Callable[[str, float], None] | None = None) -> Session:
        """The session of `key` (loaded first when it is not) after its pre-flight probe (`Session.probe`): the
        registry keeps that session, so every later run on the pair drafts with the conventions the probe chose.
        A run still going was abandoned by its page (model events run one at a time): it is told to stop."""
        session = self.load(key, progress)
        with self._loading:  # no load frees the pair while it is probed
            stop_abandoned()
            if self.gpu_probe is not None:  # ZeroGPU: measured in a GPU call; this process keeps the report
                self.gpu_probe(key, session, progress)
            else:
                session.probe(progress)
        return session

    def _free_for(self, key: PairKey, client: str | None) -> list[PairKey]:
        """Public mode: free the pairs `public.to_free` picks for `key` (none another visitor holds), or refuse."""
        with RUNS_LOCK:
            running = {r.key for r in RUNS if not r.done.is_set()}
        with self._lock:
            loaded, used = list(self._sessions), dict(self._used)
        return self._evict(0, public.to_free(loaded, key, client, PAGES.pairs(), used, running))

    def _evict(self, keep: int, only: list[PairKey] | None = None) -> list[PairKey]:
        """Drop all but the `keep` most recent sessions (or exactly the sessions of `only`) and hand their memory
        back; returns their keys."""
        with self._lock:
            dropped, keys = [], []
            for old in list(self._sessions) if only is None else [k for k in only if k in self._sessions]:
                if only is None and len(self._sessions) <= max(keep, 0):
                    break
                keys.append(old)
                dropped.append(self._sessions.pop(old))
                self._used.pop(old, None)
        if not dropped:
            return keys
        del dropped  # a run still streaming keeps its session alive until it ends
        gc.collect()
        import torch  # only to return cached GPU memory

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return keys

    def clear(self) -> None:
        with self._loading:
            self._evict(0)


REGISTRY = Registry()


# ---- one run --------------------------------------------------------------------------------------------
