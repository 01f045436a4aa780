"""Files a page offers for download (the Benchmark's CSV and JSON): written under one temporary folder per process,
`eagle-bench-*`, which keeps the few most recent runs' files (Gradio copies a returned file into its own cache when
the event ends) and is removed when the process exits. No Gradio."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["DownloadFolder", "BENCH_FILES"]


class DownloadFolder:
    """`fresh()`: a new subfolder for one run's files; only the `keep` most recent stay."""

    def __init__(self, prefix: str, keep: int = 4):
        self.prefix, self.keep = prefix, keep
        self.root: Path | None = None
        self._runs: list[Path] = []
        self._count = 0
        self._lock = threading.Lock()

    def fresh(self) -> Path:
        with self._lock:
            if self.root is None or not self.root.is_dir():
                self.root = Path(tempfile.mkdtemp(prefix=self.prefix))
                self._runs = []
                atexit.register(self.remove)
            self._count += 1
            folder = self.root / f"run-{self._count}"
            folder.mkdir()
            self._runs.append(folder)
            while len(self._runs) > self.keep:
                shutil.rmtree(self._runs.pop(0), ignore_errors=True)
            return folder

    def remove(self) -> None:
        with self._lock:
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
            self.root, self._runs = None, []


BENCH_FILES = DownloadFolder("eagle-bench-")
