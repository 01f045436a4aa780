"""Processes the tests start, and the check that none outlives the suite.

A server a test starts (the emulated ZeroGPU Space and the GPU workers the `spaces` package forks from it, olah,
vLLM and its engine core) runs in a process session of its own (`start_new_session=True`) and is ended as a whole
group (`os.killpg`): ending only the process a test started leaves its children running, orphaned.

`leftovers` finds what survived: the pytest process's children (recursively) and every process, orphans included,
whose environment carries this test session's MARKER (set in conftest.py, inherited by every process started with a
copy of os.environ, forks included)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time

import psutil

MARKER = "EAGLE_DEMO_TEST_SESSION"

# Helpers that a library keeps beside the pytest process for its whole life and that exit with it, by design.
OWNED_BY_PYTEST = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "torch._inductor.compile_worker")


def start_session(cmd: list[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen in a process session of its own, so that `end_session` ends it with its children."""
    return subprocess.Popen(cmd, start_new_session=True, **kwargs)


def end_session(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM to the process's whole group, SIGKILL to what is left after `grace` seconds; reaps the process."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break  # the whole group is gone
        if _group_gone(proc, grace if sig == signal.SIGTERM else 10.0):
            break
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL was sent
        pass


def run_in_session(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True) in its own session; whatever the command forked and left
    behind is ended with it (also on a timeout). The output goes through files, not pipes: a forked worker that
    outlives the command would hold a pipe open, and reading it to its end would wait for that worker."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = start_session(cmd, stdout=out, stderr=err, text=True, **kwargs)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            end_session(proc)
            raise
        end_session(proc)  # the command has exited; its forked workers may not have
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())


def _group_gone(proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, or its zombie keeps the group alive
        if not _group(proc.pid):
            return True
        time.sleep(0.1)
    return False


def _group(pgid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def leftovers(marker: str, grace: float = 5.0) -> list[psutil.Process]:
    """Processes started by this test session that are still alive, after `grace` seconds to finish exiting."""
    me = psutil.Process()
    found = {p.pid: p for p in me.children(recursive=True)}
    for p in psutil.process_iter():
        try:
            if p.pid != me.pid and p.environ().get(MARKER) == marker:
                found.setdefault(p.pid, p)
        except psutil.Error:  # gone, or not ours to read
            pass
    live = [p for p in found.values() if _alive(p) and not _owned_by_pytest(p)]
    _, live = psutil.wait_procs(live, timeout=grace)
    return [p for p in live if _alive(p)]


def describe(p: psutil.Process) -> str:
    try:
        age = time.time() - p.create_time()
        rss = p.memory_info().rss / 2**20
        return f"pid {p.pid} (parent {p.ppid()}, {age:.0f} s old, {rss:.0f} MB): {' '.join(p.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {p.pid} (gone while being described)"


def kill(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _owned_by_pytest(p: psutil.Process) -> bool:
    try:
        return p.ppid() == os.getpid() and any(name in " ".join(p.cmdline()) for name in OWNED_BY_PYTEST)
    except psutil.Error:
        return False
