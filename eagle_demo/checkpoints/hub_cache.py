"""The HF cache side of a Hub download: free space before it, progress and Stop during it, and a check of what it
left (sizes against the repo's listing, contents against the file's own hash) before anything is loaded.

huggingface_hub writes a file as BLOB.incomplete and renames it when whole, so a cut download never counts as
cached; what this module catches is a cached file that changed afterwards (truncated, overwritten, a disk error)
or a server whose listing and files disagree. A bad file is removed, so the next Load fetches it afresh.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from huggingface_hub import constants as hub_constants

from .errors import CheckpointError, CorruptCheckpointError

__all__ = ["human", "cache_folder", "missing_bytes", "check_space", "check_files", "cached_listing", "snapshot_folder",
           "record_ref",
           "DownloadBar"]

Progress = Callable[[str, float], None]
_VERIFIED: dict[tuple[str, int, int], bool] = {}  # (blob, size, mtime_ns) already hashed in this process
_VERIFIED_LOCK = threading.Lock()


def human(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def cache_folder() -> Path:
    return Path(hub_constants.HF_HUB_CACHE).expanduser()


def snapshot_folder(repo: str, commit: str) -> Path:
    return cache_folder() / f"models--{repo.replace('/', '--')}" / "snapshots" / commit


def record_ref(repo: str, revision: str, commit: str) -> None:
    """refs/REVISION -> commit in the repo's cache folder (huggingface_hub's layout), so an offline load of the same
    revision finds the snapshot: the download itself is asked for by commit, which records no ref."""
    snapshot = snapshot_folder(repo, commit)
    if revision == commit or "/" in revision or revision in ("", ".", "..") or not snapshot.is_dir():
        return
    refs = snapshot.parent.parent / "refs"
    try:
        refs.mkdir(parents=True, exist_ok=True)
        (refs / revision).write_text(commit, encoding="utf-8")
    except OSError:
        pass  # an offline load then says the repo is not cached, which is true for that revision


def missing_bytes(repo: str, commit: str, files: list[str], sizes: dict[str, int]) -> int:
    """Bytes of `files` not yet in the cache at their listed size (what the download will write)."""
    snap = snapshot_folder(repo, commit)
    return sum(sizes.get(f, 0) for f in files
               if not ((snap / f).is_file() and (snap / f).stat().st_size == sizes.get(f, -1)))


def check_space(kind: str, repo: str, needed: int) -> None:
    """Refuse, before downloading, a download larger than the free space of the cache's filesystem."""
    folder = cache_folder()
    probe = next((p for p in (folder, *folder.parents) if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    if needed > free:
        raise CheckpointError(
            f"{kind} {repo} needs {human(needed)} of downloads but the cache folder {folder} has {human(free)} "
            "free; free some space or point HF_HOME at a bigger disk")


def cached_listing(folder: Path) -> dict[str, int]:
    """{file: size} of a snapshot as huggingface_hub recorded the repo's listing (trees/COMMIT.json), or {}."""
    tree = folder.parent.parent / "trees" / f"{folder.name}.json"
    try:
        files = json.loads(tree.read_text(encoding="utf-8")).get("files") or {}
        return {str(k): int(v["size"]) for k, v in files.items() if isinstance(v, dict) and "size" in v}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def check_files(kind: str, repo: str, folder: Path, files: list[str], sizes: dict[str, int] | None,
                again: str = "press Load again to download it afresh") -> None:
    """Each of `files` in the snapshot `folder` against the repo's listed size and its blob's own hash (the blob is
    named by the server's ETag: a git blob id, or the sha256 of an LFS file). A bad file is removed from the cache
    and named in one line; the next Load downloads it again."""
    for name in files:
        path = folder / name
        if not path.is_file():
            continue  # selected but not listed (e.g. an optional file); the loader names what it lacks
        blob = path.resolve()
        size, listed = blob.stat().st_size, (sizes or {}).get(name)
        if listed and size != listed:
            _drop(path, blob)
            raise CorruptCheckpointError(
                f"{kind} {repo}: the cached {name} is {size} bytes but the repo lists {listed} (truncated or "
                f"overwritten); it was removed from the cache, {again}")
        if not _hash_ok(blob):
            _drop(path, blob)
            raise CorruptCheckpointError(
                f"{kind} {repo}: the cached {name} does not match its checksum (corrupted on disk or in transit); "
                f"it was removed from the cache, {again}")


def _hash_ok(blob: Path) -> bool:
    stat = blob.stat()
    key = (str(blob), stat.st_size, stat.st_mtime_ns)
    with _VERIFIED_LOCK:
        if key in _VERIFIED:
            return True
    name = blob.name.lower()
    if len(name) == 64 and all(c in "0123456789abcdef" for c in name):
        digest = hashlib.sha256()
    elif len(name) == 40 and all(c in "0123456789abcdef" for c in name):
        digest = hashlib.sha1(f"blob {stat.st_size}\0".encode())  # git's blob id
    else:
        return True  # not named by a content hash: nothing to compare with
    with open(blob, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    if digest.hexdigest() != name:
        return False
    with _VERIFIED_LOCK:
        _VERIFIED[key] = True
    return True


def _drop(link: Path, blob: Path) -> None:
    for path in (link, blob):
        try:
            path.unlink()
        except OSError:
            pass


class DownloadBar:
    """Progress of one snapshot_download: `factory()` is its tqdm_class (it draws nothing, it counts bytes) and
    `run()` reports the bytes received and the rate as one line through `say`, twice a second. `say` may raise
    (the page's Stop does): the download then ends with that error."""

    def __init__(self, say: Progress, label: str, total: int):
        self.say, self.label, self.total = say, label, max(total, 1)
        self.received = 0
        self.started = time.monotonic()
        self.stopped = False
        self.lock = threading.Lock()

    def factory(self):
        outer = self

        class Bar:
            def __init__(self, *args, **kwargs):
                self.bytes = kwargs.get("unit") == "B"  # huggingface_hub's transfer and reconstruction bars
                self.n, self.total = kwargs.get("initial", 0) or 0, kwargs.get("total")
                self.format_dict: dict = {}

            def update(self, n=1):
                if outer.stopped:
                    raise CheckpointError(f"the download of {outer.label} was stopped")
                self.n += n or 0
                if self.bytes:
                    outer.seen(self.n)

            def __getattr__(self, name):  # refresh, close, set_description, set_postfix_str, ...
                return lambda *args, **kwargs: None

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        return Bar

    def seen(self, received: int) -> None:
        with self.lock:
            self.received = max(self.received, received)

    def report(self) -> None:
        with self.lock:
            received = self.received
        rate = received / max(time.monotonic() - self.started, 1e-3)
        self.say(f"downloading {self.label}: {human(received)} of {human(self.total)} at {human(rate)}/s",
                 min(received / self.total, 1.0))

    def run(self, download: Callable[[], str]) -> str:
        """download() in a worker thread while this thread reports its progress twice a second (the page's
        progress only takes reports from the event's own thread). When the report raises (Stop), the worker is told
        to stop at its next chunk and the error is raised once it has."""
        box: dict = {}
        ctx = contextvars.copy_context()

        def work() -> None:
            try:
                box["folder"] = ctx.run(download)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                box["error"] = exc

        worker = threading.Thread(target=work, name="hub-download", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.5)
                if worker.is_alive():
                    self.report()
        except BaseException:
            self.stopped = True
            worker.join(60)
            raise
        if "error" in box:
            raise box["error"]
        return box["folder"]
