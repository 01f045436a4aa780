"""The torch attributes the `spaces` package reads, on a CPU build of torch (part of the ZeroGPU emulation,
`zerogpu_emulation`). Import this module, to the end, before `spaces`: at import the package checks
`torch.cuda._is_in_bad_fork` in a forked process pool, which pickles the function by reference. A CPU build's is a
lambda (it cannot be sent), and a stand-in defined in a module still being imported makes the pool's child wait
forever on the import lock its parent held when it forked."""

from __future__ import annotations

import torch


def not_in_bad_fork() -> bool:
    """No CUDA was initialized before the fork (none ever is on this CPU)."""
    return False


def no_cuda_init() -> None:
    raise RuntimeError("emulated ZeroGPU: this CPU build of torch has no CUDA to initialize")


torch.cuda._is_in_bad_fork = not_in_bad_fork
if torch.version.cuda is None:  # the package picks its memory-stats table by the CUDA version
    torch.version.cuda = "12.8"
if not hasattr(torch._C, "_cuda_init"):  # the package keeps it to restore in the worker
    torch._C._cuda_init = no_cuda_init
