"""ZeroGPU emulated on this CPU, around the real `spaces` package (pinned in requirements-dev.txt).

What is emulated, and only that (the rest is the package's own code: its torch patching and packing, its worker
processes, the pickled transport of arguments and yields, and its calls to the scheduler):
- `Scheduler`: a loopback stand-in for the device scheduler's HTTP API (/schedule, /allow, /release,
  /startup-report), which records every call;
- `zerogpu_fork`: the few torch attributes the package reads that a CPU build lacks;
- `skip_device_start`: a worker's start on the device (the package sets CUDA_VISIBLE_DEVICES and moves the packed
  weights to the GPU) becomes restoring those weights on the CPU.

`start_space` runs the app as a ZeroGPU Space in a subprocess (`zerogpu_space.py`), since the package patches
torch for its whole process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from processes import end_session, start_session

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class Scheduler:
    """The device scheduler on 127.0.0.1: `gpus` devices, each lent to one call at a time; a device whose last
    call released it cleanly is offered as idle (its worker may be reused). `calls` records
    (verb, token, details) in order."""

    def __init__(self, gpus: int = 1):
        self.calls: list[tuple[str, str | None, dict]] = []
        self.lock = threading.Lock()
        self.free, self.warm, self.lent = list(range(gpus)), set(), {}
        scheduler = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                url = urlparse(self.path)
                status, body = scheduler.answer(url.path, {k: v[0] for k, v in parse_qs(url.query).items()})
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, query: dict) -> tuple[int, dict | None]:
        with self.lock:
            if path == "/startup-report":
                self.calls.append(("startup", None, {}))
                return 200, None
            if path == "/schedule":
                if not self.free:
                    return 503, None
                index, token = self.free.pop(0), uuid.uuid4().hex
                self.lent[token] = index
                self.calls.append(("schedule", token, dict(query, index=index, idle=index in self.warm)))
                return 200, {"idle": index in self.warm, "nvidiaIndex": index,
                             "nvidiaUUID": f"GPU-emulated-{index}", "allowToken": token}
            if path == "/allow":
                self.calls.append(("allow", query["allowToken"], {"pid": int(query["pid"])}))
                return 200, None
            if path == "/release":
                index = self.lent.pop(query["allowToken"], None)
                if index is None:
                    return 404, None
                fail = query.get("fail") == "true"
                self.free = sorted(self.free + [index])
                (self.warm.discard if fail else self.warm.add)(index)
                self.calls.append(("release", query["allowToken"], {"fail": fail}))
                return 200, None
        return 404, None

    def cool(self) -> None:
        """Offer no device as idle any more (its GPU went to another Space): the next call forks a new worker."""
        with self.lock:
            self.warm.clear()

    def count(self, verb: str) -> int:
        with self.lock:
            return sum(1 for v, _, _ in self.calls if v == verb)

    def unreleased(self) -> list[str]:
        """Tokens scheduled and never released."""
        with self.lock:
            released = {t for v, t, _ in self.calls if v == "release"}
            return [t for v, t, _ in self.calls if v == "schedule" and t not in released]

    def settle(self, timeout: float = 60.0) -> list[str]:
        """Wait until every schedule has its release; returns the tokens still out."""
        deadline = time.monotonic() + timeout
        while (out := self.unreleased()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def space_env(scheduler: Scheduler, folder: Path, pairs: str) -> dict[str, str]:
    """The environment of an emulated ZeroGPU Space serving `pairs` (EAGLE_ZEROGPU_PAIRS)."""
    folder.mkdir(parents=True, exist_ok=True)
    cgroup = folder / "cgroup"
    cgroup.write_text("1:devices:/emulated-space\n")
    env = dict(os.environ, SPACES_ZERO_GPU="true", SPACES_ZERO_DEVICE_API_URL=scheduler.url,
               ZEROGPU_PROC_SELF_CGROUP_PATH=str(cgroup), ZEROGPU_OFFLOAD_DIR=str(folder / "tensors"),
               EAGLE_ZEROGPU_PAIRS=pairs, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    return env


def start_space(scheduler: Scheduler, folder: Path, pairs: str, port: int, timeout: float = 240.0):
    """The app as an emulated ZeroGPU Space on 127.0.0.1:port; returns the running process once it serves. It runs in
    a session of its own with the GPU workers the package forks from it: end it with `processes.end_session`."""
    log = open(folder / "space.log", "w")
    proc = start_session([sys.executable, str(HERE / "zerogpu_space.py"), str(port)], cwd=ROOT,
                         env=space_env(scheduler, folder, pairs), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            end_session(proc)  # its forked workers, if any
            raise RuntimeError(f"the emulated Space exited: {(folder / 'space.log').read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
            return proc
        except OSError:
            time.sleep(0.5)
    end_session(proc)
    raise RuntimeError(f"the emulated Space did not start: {(folder / 'space.log').read_text()[-3000:]}")


def skip_device_start() -> None:
    """In each worker the package would point CUDA_VISIBLE_DEVICES at its GPU and move the packed weights there;
    here they are restored on the CPU instead (the same files the package packed at launch, read back)."""
    import torch
    from spaces.zero import torch as zero_torch
    from spaces.zero.torch import patching

    def restore(callback=None) -> None:
        for fake, original in patching.cuda_aliases.items():
            if original is not None:  # not packed
                fake.data = original
        for pack in patching.tensor_packs:  # tensors written one after another, each padded to a page
            data, offset = Path(pack.path()).read_bytes(), 0
            for meta, size, aligned in [t for batch in pack.batches for t in batch] + pack.big_tensors:
                raw = torch.frombuffer(bytearray(data[offset:offset + size]), dtype=torch.uint8)  # [size]
                tensor = torch.tensor([], dtype=meta.dtype).set_(raw.untyped_storage(), 0, meta.shape, meta.stride())
                for fake in pack.fakes[meta]:
                    fake.data = tensor
                offset += aligned

    zero_torch.init = lambda nvidia_uuid: None
    zero_torch.move = restore
