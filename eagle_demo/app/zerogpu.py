"""ZeroGPU on Hugging Face Spaces: `gpu` is `spaces.GPU` when the `spaces` package imports, else a no-op.

    @gpu
    def generate(...): ...

Both forms work: `@gpu` and `@gpu(duration=120)`.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["gpu", "ON_SPACES_GPU"]

try:  # the `spaces` package exists on Hugging Face Spaces only
    import spaces as _spaces
except ImportError:  # pragma: no cover - depends on the environment
    _spaces = None

ON_SPACES_GPU = _spaces is not None


def _identity(fn: Callable | None = None, **_: Any):
    if fn is None:  # used as @gpu(duration=...)
        return lambda f: f
    return fn


gpu = _spaces.GPU if _spaces is not None else _identity
