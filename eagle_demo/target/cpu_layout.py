"""Column-major linear weights for decoding on a CPU.

`nn.Linear` stores its weight [out, in] row-major, so `F.linear(x, W)` multiplies by a transposed operand.
For the few rows a decode step (1) or a verify (2-12) has, the CPU's matrix kernels read the same values
faster when they are stored column-major: `W = Wt.t()` with `Wt` [in, out] contiguous, which makes
`F.linear` a plain product with a contiguous operand. Values, shapes, modules and results are unchanged;
only the order of the bytes in memory differs.

Measured on the first-generation shipped target (16 layers, hidden 192, fp32, one thread, thread CPU time
after 200 tokens): a plain step 8.06 -> 7.45 ms, a verify of 8 tokens 10.94 -> 10.30 ms, logits bit-identical.
The baseline and EAGLE share the target, so both decode faster; docs/perf-history.md has the figures.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["column_major_linears", "same_layout", "is_column_major", "wanted"]


def wanted(device: torch.device, dtype: torch.dtype) -> bool:
    """Where the layout is used: fp32 on a CPU (measured there; GPUs and other dtypes keep the stock layout)."""
    return device.type == "cpu" and dtype == torch.float32


def is_column_major(w: torch.Tensor) -> bool:
    return w.dim() == 2 and w.shape[0] > 1 and w.shape[1] > 1 and w.stride() == (1, w.shape[0])


def _relaid(w: torch.Tensor) -> torch.Tensor:
    return w.t().contiguous().t()  # same [out, in] values, stored [in, out] row-major


def column_major_linears(module: nn.Module) -> int:
    """Store every fp32 CPU `nn.Linear` weight of `module` column-major, in place; returns the bytes relaid.
    A weight an `nn.Embedding` also holds (tied embeddings) keeps its layout: a token lookup reads rows."""
    embedded = {id(m.weight) for m in module.modules() if isinstance(m, nn.Embedding)}
    done, total = set(), 0
    for sub in module.modules():
        if not isinstance(sub, nn.Linear):
            continue
        w = sub.weight
        if id(w) in done or id(w) in embedded or not wanted(w.device, w.dtype) or not w.is_contiguous():
            continue
        done.add(id(w))
        with torch.no_grad():
            w.data = _relaid(w.data)
        total += w.numel() * w.element_size()
    return total


def same_layout(w: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`w` (a weight built from others, e.g. fused q|k|v) in the layout of `like`, one of its sources."""
    return _relaid(w) if is_column_major(like) and w.is_contiguous() else w
