"""The dtype a CPU target runs in when none is asked for, chosen by measuring this CPU.

Speculative decoding pays when a verify of many tokens costs little more than one plain step. On a CPU
with AMX, bfloat16 makes that nearly free (SmolLM2-135M on one thread: 16 new tokens cost 1.15x one token
in bfloat16 against 2.29x in float32), while a CPU without bf16 matrix units runs bfloat16 slower than
float32 at every size. So the choice is measured, once per CPU and shape, on the target's own matrix shapes:
bfloat16 when its 16-token cost is at most `MAX_VERIFY_RATIO` times its 1-token cost and its one-token step
is no slower than float32's by more than `MAX_STEP_LOSS`; float32 otherwise. Greedy output in float32 is
bit-exact against plain decoding; in bfloat16 a near tie may differ and the divergence explainer names it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

__all__ = ["DtypeChoice", "choose_cpu_dtype", "MIN_PARAMETERS"]

MIN_PARAMETERS = 50_000_000  # smaller targets stay float32: per-operation overhead, not FLOPs, sets their step
MAX_VERIFY_RATIO = 1.6
MAX_STEP_LOSS = 1.25


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str  # "bfloat16" or "float32"
    bf16_ratio: float  # cost of 16 tokens / 1 token in bfloat16
    fp32_ratio: float
    bf16_step_ms: float
    fp32_step_ms: float

    @property
    def reason(self) -> str:
        if self.dtype == "bfloat16":
            return (f"bfloat16 chosen by measurement: on this CPU a 16-token verify costs {self.bf16_ratio:.2f}x one "
                    f"token in bfloat16 against {self.fp32_ratio:.2f}x in float32, so drafted tokens are nearly free "
                    "(greedy output may differ from float32 at near ties; the divergence explainer names them)")
        return (f"float32 chosen by measurement: bfloat16 gives this CPU no cheap verify ({self.bf16_ratio:.2f}x for "
                f"16 tokens, one-token step {self.bf16_step_ms:.2f} ms against {self.fp32_step_ms:.2f} ms in float32)")


def _cpu_key(hidden: int, intermediate: int) -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}|torch {torch.__version__}|threads {torch.get_num_threads()}|{hidden}x{intermediate}"


def _layer_fn(hidden: int, intermediate: int, dtype: torch.dtype, n: int):
    """Eight decoder layers' matrices (q/k/v/o and the gated MLP) on n tokens."""
    gen = torch.Generator().manual_seed(0)
    mats = [torch.randn(hidden, hidden, generator=gen).to(dtype) for _ in range(4)]
    up = [torch.randn(hidden, intermediate, generator=gen).to(dtype) for _ in range(2)]
    down = torch.randn(intermediate, hidden, generator=gen).to(dtype)
    x = torch.randn(n, hidden, generator=gen).to(dtype)

    def run() -> None:
        with torch.inference_mode():
            for _ in range(8):
                for w in mats:
                    x @ w
                (torch.nn.functional.silu(x @ up[0]) * (x @ up[1])) @ down

    return run


def measure(hidden: int, intermediate: int, repeats: int = 15) -> DtypeChoice:
    """Both dtypes at 1 and 16 tokens, interleaved so that a busy machine slows all four alike; best of each."""
    cases = {(dtype, n): _layer_fn(hidden, intermediate, dtype, n)
             for dtype in (torch.float32, torch.bfloat16) for n in (1, 16)}
    best = {key: float("inf") for key in cases}
    for fn in cases.values():
        fn()  # first calls build the kernels
    for _ in range(repeats):
        for key, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            best[key] = min(best[key], time.perf_counter() - t0)
    bf16_ratio = best[(torch.bfloat16, 16)] / best[(torch.bfloat16, 1)]
    fp32_ratio = best[(torch.float32, 16)] / best[(torch.float32, 1)]
    bf16_ms, fp32_ms = best[(torch.bfloat16, 1)] * 1000 / 8, best[(torch.float32, 1)] * 1000 / 8
    cheap = bf16_ratio <= MAX_VERIFY_RATIO and bf16_ms <= MAX_STEP_LOSS * fp32_ms
    return DtypeChoice("bfloat16" if cheap else "float32", round(bf16_ratio, 3), round(fp32_ratio, 3),
                       round(bf16_ms, 4), round(fp32_ms, 4))


def choose_cpu_dtype(hidden: int, intermediate: int, cache: Path | None = None) -> DtypeChoice:
    """The measured choice, cached per CPU model, torch version, thread count and shape."""
    base = os.environ.get("EAGLE_DEMO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "eagle_demo")
    path = cache or Path(base) / "cpu_dtype.json"
    key = _cpu_key(hidden, intermediate)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        try:
            return DtypeChoice(**known[key])
        except TypeError:
            pass
    choice = measure(hidden, intermediate)
    known[key] = asdict(choice)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # an unwritable cache only costs a re-measure next time
    return choice
