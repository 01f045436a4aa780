"""Run an exported pair in real vLLM (its CPU build, `runtime.py`) and read back what it did: output ids, its own
acceptance counters, tokens/s, its version. One `run_vllm` call is one engine start (20-40 s here) and any number of
runs on it; the worker (`worker.py`) runs inside vLLM's virtualenv."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

from .runtime import VllmRuntime

__all__ = ["VllmRun", "VllmResult", "VllmError", "speculative_config_of", "run_vllm"]


class VllmError(RuntimeError):
    """vLLM failed to start or to run the job; the message is vLLM's own, in one line."""


@dataclass(frozen=True)
class VllmRun:
    """One batch of greedy generations in one engine. Counters are vLLM's, over this run only."""

    label: str
    tokens: tuple[tuple[int, ...], ...]  # per prompt: the new token ids
    seconds: float
    new_tokens: int
    drafts: int = 0  # speculative rounds (vLLM: one draft per request per step)
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_by_position: tuple[int, ...] = ()
    cpu_seconds: float = 0.0  # this run's CPU time in vLLM's processes (the shared machine's other load left out)

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def acceptance_length(self) -> float | None:
        """vLLM's mean acceptance length: 1 + accepted / drafts (tokens committed per target forward)."""
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts else None

    @property
    def acceptance_by_position(self) -> tuple[float, ...]:
        return tuple(a / self.drafts for a in self.accepted_by_position) if self.drafts else ()


@dataclass(frozen=True)
class VllmResult:
    version: str
    torch: str
    startup_s: float
    speculative_config: dict | None
    runs: tuple[VllmRun, ...] = field(default_factory=tuple)


def speculative_config_of(command: str) -> dict | None:
    """The JSON after `--speculative-config` in an exported `vllm serve` line (what a user copies), or None."""
    words = shlex.split(command)
    if "--speculative-config" not in words:
        return None
    return json.loads(words[words.index("--speculative-config") + 1])


def _run(data: dict, label: str) -> VllmRun:
    return VllmRun(label=label, tokens=tuple(tuple(t) for t in data["tokens"]), seconds=float(data["seconds"]),
                   new_tokens=int(data["new_tokens"]), drafts=int(data["drafts"]),
                   draft_tokens=int(data["draft_tokens"]), accepted_tokens=int(data["accepted_tokens"]),
                   accepted_by_position=tuple(int(a) for a in data["accepted_by_position"]),
                   cpu_seconds=float(data.get("cpu_seconds", 0.0)))


def _root_cause(log: str, fallback: str) -> str:
    """The last exception line vLLM logged from its own processes (its engine reports only "initialization
    failed; see root cause above"), without the logger's prefix."""
    causes = [line.split("] ", 1)[-1].strip() for line in log.splitlines()
              if re.search(r"\b\w*(Error|Exception): ", line) and "initialization failed" not in line]
    return causes[-1] if causes else fallback


def _run_in_session(runtime: VllmRuntime, job: str, log, timeout: float) -> subprocess.CompletedProcess:
    """The worker in a process session of its own, ended as a whole group once it exits or times out: vLLM's engine
    core is a child process of the worker, and outlives a worker that is only killed."""
    proc = subprocess.Popen(runtime.worker_cmd(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                            env=runtime.env, start_new_session=True)
    try:
        out, _ = proc.communicate(job, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise VllmError(f"vLLM did not finish within {timeout:.0f} s") from exc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the worker started and left
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, None)


def run_vllm(runtime: VllmRuntime, target: str, speculative_config: dict | None, runs: list[dict],
             timeout: float = 600.0, threads: int = 1, max_model_len: int = 512, enforce_eager: bool = False,
             ) -> VllmResult:
    """Start vLLM on `target` (with `speculative_config`, or plain) and do `runs`: [{"label", "prompts": [[ids]],
    "max_new_tokens", "repeats"}]. Greedy, EOS ignored, float32. Raises VllmError with vLLM's message. A `pypi:`
    target runs from its converted folder, as the exported command names it (`deploy.target`)."""
    from ..deploy.target import served_target

    target = served_target(target)[0]
    job = {"target": target, "speculative_config": speculative_config, "runs": runs, "threads": threads,
           "max_model_len": max_model_len, "enforce_eager": enforce_eager,
           "max_num_seqs": max(len(r["prompts"]) for r in runs)}
    with tempfile.TemporaryFile(mode="w+") as log:  # vLLM's own logging; a pipe nobody reads could block it
        proc = _run_in_session(runtime, json.dumps(job), log, timeout)
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        errors = [x["error"] for x in lines if "error" in x]
        if errors or not lines:
            log.seek(0)
            raise VllmError(_root_cause(log.read(), errors[0] if errors else f"exit code {proc.returncode}"))
    head, rest = lines[0], lines[1:]
    return VllmResult(version=head["vllm"], torch=head["torch"], startup_s=float(head["startup_s"]),
                      speculative_config=speculative_config,
                      runs=tuple(_run(r, r.get("label", "")) for r in rest))
