"""Device and dtype choice: CUDA when present, bf16 where the GPU supports it, fp32 on CPU."""

from __future__ import annotations

import torch

__all__ = ["resolve_device", "resolve_dtype", "apply_cpu_threads", "device_failure", "DeviceError", "DTYPES"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class DeviceError(ValueError):
    """The requested device or dtype cannot be used here; the message says what to pick instead."""


def resolve_device(name: str = "auto") -> torch.device:
    name = (name or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(f"device '{name}' was requested but no CUDA GPU is available; use --device cpu or auto")
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise DeviceError("device 'mps' was requested but Metal is not available; use --device cpu or auto")
        return torch.device("mps")
    raise DeviceError(f"unknown device '{name}'; use auto, cpu, cuda or cuda:N")


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    name = (name or "auto").strip().lower()
    if name == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if name not in DTYPES:
        raise DeviceError(f"unknown dtype '{name}'; use auto, float32, bfloat16 or float16")
    dtype = DTYPES[name]
    if device.type == "cpu" and dtype == torch.float16:
        raise DeviceError("float16 is not supported for generation on CPU here; use float32 or bfloat16")
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise DeviceError("this GPU does not support bfloat16; use float16 or float32")
    return dtype


SMALL_MODEL_PARAMETERS = 50_000_000


def apply_cpu_threads(model: torch.nn.Module, threads: int = 0) -> int:
    """Set torch's CPU thread count for generating with `model` and return it.

    threads > 0: that many. threads == 0 (automatic): one thread for a model under 50 M parameters on
    CPU, where a forward is per-operation overhead rather than FLOPs and extra OpenMP threads only add
    synchronization (and lose badly when the cores are shared, e.g. with the browser showing the page);
    torch's own default otherwise. A target on a GPU also gets one thread: the host only launches kernels
    there, and more OpenMP threads slowed eager launches 2x on an H200 host (10.4 vs 20.6 ms a tiny-target
    step with 1 vs 16 threads). threads < 0: leave torch's setting alone.
    """
    if threads == 0:
        device = next(model.parameters()).device.type
        small = sum(p.numel() for p in model.parameters()) < SMALL_MODEL_PARAMETERS
        threads = 1 if device == "cuda" or (device == "cpu" and small) else -1
    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


DEVICE_MARKERS = ("cuda", "cudnn", "cublas", "nccl", "out of memory", "device-side", "no kernel image", "hip error",
                  "mps backend", "accelerator")


def device_failure(exc: BaseException) -> bool:
    """Whether an error came from the device (CUDA failing to start, out of memory, a kernel for another GPU)
    rather than from the files being loaded: such an error is never a corrupt checkpoint."""
    if isinstance(exc, getattr(torch, "AcceleratorError", ())) or isinstance(exc, torch.OutOfMemoryError):
        return True
    text = f"{type(exc).__name__} {exc}".lower()
    return any(marker in text for marker in DEVICE_MARKERS)
