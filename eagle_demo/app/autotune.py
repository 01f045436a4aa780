"""The page's automatic tree: the tree preset "auto" (the default after Load, on every device) runs the shape
`autotree.auto_tree` chooses for the loaded pair on this device and dtype.

- One calibration per loaded pair, in a background thread that holds `state.MODEL_GATE` (a run's worker waits for
  it) and is started from a model event (concurrency id "model"), so nothing else uses the engine meanwhile.
  `autotree` caches the choice on disk per pair/device/dtype; here it is kept per PairKey for the pair's loaded
  session, so loading another pair (or the same pair again) tunes again (from the disk cache when it can).
- The page follows the calibration with a progress line, then shows the choice and its predicted speedup.
- A Generate (or /generate) that asks for auto while the calibration runs waits for it; when the calibration
  fails or takes longer than WAIT_SECONDS it runs the static `config.default_tree` and says so in its note.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..common.config import TreeConfig, default_tree
from ..common.errors import one_line
from .pages import Page, stop_abandoned
from .registry import REGISTRY, PairKey
from .state import MODEL_GATE, spawn

if TYPE_CHECKING:
    from ..autotree.choose import AutoChoice
    from ..prepare import TreeChoice
    from ..session import Session

__all__ = ["AUTO", "Tuning", "tuning", "start_tuning", "choice_for", "page_tree", "api_tree_choice",
           "page_tree_choice", "calibrate_ui", "auto_line"]

log = logging.getLogger(__name__)

AUTO = "auto"  # the tree preset's name
WAIT_SECONDS = 120.0  # longest a Generate waits for a calibration before it runs the static default tree
KEEP = 8  # tunings remembered (one per loaded pair key)
IDLE_LINE = "auto: the draft shape is chosen for this pair and device right after Load (a few seconds)."


@dataclass
class Tuning:
    """One calibration of one loaded session: its stage while it runs, then its choice or its error."""

    session: Any  # weakref.ref to the Session (an evicted pair is never kept alive by its tuning)
    conventions: str = ""  # the draft's conventions it tuned (a probe that switches them makes it stale)
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    stage: str = "waiting for the model"
    choice: AutoChoice | None = None
    error: str = ""

    def line(self) -> str:
        """The page's progress line, then the choice and its predicted speedup."""
        if self.choice is not None:
            c = self.choice
            how = "from the cache" if c.from_cache else f"calibrated in {c.calibration_seconds:.1f} s"
            return f"{c.line()} ({how})"
        if self.error:
            return f"auto: the calibration failed ({self.error}); auto runs the static default tree"
        return f"auto: calibrating on this device: {self.stage} ({time.monotonic() - self.started:.1f} s)"


_TUNINGS: dict[PairKey, Tuning] = {}
_LOCK = threading.Lock()


def _current(t: Tuning | None, session: Session | None, used: str | None = None) -> bool:
    """Whether t tuned this very session with the draft conventions it uses now (`used`, when the caller has
    them already)."""
    from ..autotree.choose import conventions

    if t is None or session is None or t.session() is not session:
        return False
    return t.conventions == (conventions(session) if used is None else used)


def tuning(key: PairKey | None) -> Tuning | None:
    """The tuning of the pair's loaded session (None when it has none, the pair was loaded again since, or a
    probe switched its draft's conventions since)."""
    session = REGISTRY.get(key) if key is not None else None
    with _LOCK:
        t = _TUNINGS.get(key) if key is not None else None
    return t if _current(t, session) else None


def start_tuning(key: PairKey, session: Session) -> Tuning:
    """The pair's tuning, starting its calibration thread unless one is running or has chosen for the session's
    current draft conventions."""
    from ..autotree.choose import conventions

    used = conventions(session)
    with _LOCK:
        t = _TUNINGS.get(key)
        if _current(t, session, used) and not t.error:
            return t
        t = Tuning(weakref.ref(session), used)
        _TUNINGS.pop(key, None)
        _TUNINGS[key] = t
        while len(_TUNINGS) > KEEP:
            _TUNINGS.pop(next(iter(_TUNINGS)))
    stop_abandoned()  # called from a model event: a run still going was abandoned; it ends at its next round
    MODEL_GATE.acquire()  # taken here, so a run started after this call waits; the thread lets go when done
    try:
        spawn("eagle-autotree", _calibrate, t, session, key)
    except BaseException:
        MODEL_GATE.release()
        raise
    return t


def _calibrate(t: Tuning, session: Session, key: PairKey) -> None:
    from ..autotree.choose import auto_tree

    def say(stage: str, fraction: float = 0.0) -> None:
        t.stage = stage

    try:  # holds MODEL_GATE (taken by start_tuning)
        if REGISTRY.served is not None:  # ZeroGPU: in a GPU call; the choice comes back as data, stages as yields
            from .gpu_tasks import CalibrateTask, run_to_end

            t.choice = run_to_end(key, session, CalibrateTask(), say)
        else:
            t.choice = auto_tree(session, progress=say)
    except Exception as exc:  # the page shows one line; the static default tree runs instead
        log.exception("auto-tree calibration failed")
        t.error = one_line(exc)
    finally:
        MODEL_GATE.release()
        t.done.set()


def choice_for(key: PairKey, session: Session, wait: float = WAIT_SECONDS) -> tuple[AutoChoice | None, str]:
    """The pair's auto choice (calibrating once when it has none yet, waiting for it), or None and a note that
    says why the static default tree runs instead."""
    static = default_tree(session.device.type, session.family).label()
    if session.eagle is None:
        return None, ""
    t = start_tuning(key, session)
    if not t.done.wait(wait):
        return None, f"auto: the calibration is still running after {wait:.0f} s; this run used {static}"
    if t.choice is None:
        return None, f"auto: the calibration failed ({t.error}); this run used {static}"
    return t.choice, ""


def page_tree(preset: str | None, shown: TreeConfig, key: PairKey, session: Session,
              auto_shown: TreeConfig | None = None) -> tuple[TreeConfig, AutoChoice | None, str]:
    """(tree, auto choice or None, note) of a page Generate. With the preset "auto" the pair's choice runs when
    the draft panel shows it, the static default it shows while the calibration runs, or what auto last put on
    the panel (`auto_shown`, perhaps another pair's choice: the panel's pair changed since); settings moved by
    hand win. A page that never noted a preset (Generate pressed without Load) runs as after Load: auto."""
    if preset is None:
        preset = AUTO
    if preset != AUTO or session.eagle is None:
        return shown, None, ""
    t = tuning(key)
    known = t.choice.tree if t is not None and t.choice is not None else None
    if shown not in (default_tree(session.device.type, session.family), known, auto_shown):
        return shown, None, ""
    choice, note = choice_for(key, session)
    if choice is None:
        return default_tree(session.device.type, session.family), None, note
    return choice.tree, choice, ""


def api_tree_choice(key: PairKey, session: Session) -> TreeChoice:
    """`/generate`'s automatic tree for `prepare.prepare_run`: the pair's choice (`choice_for`: calibrating once,
    waiting for it), or the static default tree the request's settings made, with a note saying why."""
    def choose(run):
        auto, note = choice_for(key, session)
        return (auto.run_config(run) if auto is not None else run), auto, note
    return choose


def page_tree_choice(page: Page, key: PairKey, session: Session) -> TreeChoice:
    """A page Generate's tree for `prepare.prepare_run`: what `page_tree` picks from the page's preset, its draft
    panel and what auto last put there."""
    def choose(run):
        tree, auto, note = page_tree(page.preset, run.tree, key, session, page.auto_shown)  # waits for a calibration
        return (auto.run_config(run) if auto is not None else dataclasses.replace(run, tree=tree)), auto, note
    return choose


def auto_line(key: PairKey | None) -> str:
    t = tuning(key)
    return t.line() if t is not None else IDLE_LINE


def calibrate_ui(key: PairKey | None):
    """After Load (a model event): calibrate the loaded pair in the background and follow it on the page."""
    session = REGISTRY.get(key) if key is not None else None
    if session is None or session.eagle is None:
        yield "auto: needs a draft; name one in the draft box" if session is not None else IDLE_LINE
        return
    t = start_tuning(key, session)
    while not t.done.wait(0.3):
        yield t.line()
    yield t.line()

