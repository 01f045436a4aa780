"""Read checkpoint folders without materializing weights: JSON configs, tensor names, shapes and dtypes.

Supported weight files, in order of preference (safetensors first when both exist):
  model.safetensors.index.json + shards | model.safetensors | other top-level *.safetensors
  pytorch_model.bin.index.json + shards | pytorch_model.bin | other top-level *.bin | medusa_lm_head.pt
Pickled files are only ever opened with `torch.load(weights_only=True)`.
"""

from __future__ import annotations

import json
import pickle
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import torch
from safetensors import safe_open

from ..common.errors import brief as _short
from .errors import CheckpointError, CorruptCheckpointError

__all__ = ["TensorInfo", "WeightFiles", "read_json", "read_config", "scan_weights", "safe_child",
           "DTYPE_BYTES"]

_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2", "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
    "BOOL": "bool",
}
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
               "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
_SKIP_BIN = {"training_args.bin", "optimizer.bin", "scheduler.bin", "rng_state.bin"}


@dataclass(frozen=True)
class TensorInfo:
    name: str  # key as stored in the file
    shape: tuple[int, ...]
    dtype: str  # torch dtype name without "torch.", e.g. "float16"
    file: str  # file name inside the folder

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= int(d)
        return n

    def nbytes(self, dtype: str | None = None) -> int:
        return self.numel * DTYPE_BYTES.get(dtype or self.dtype, 4)


@dataclass(frozen=True)
class WeightFiles:
    """The tensors of one checkpoint folder, described from file headers only."""

    folder: Path
    format: str  # "safetensors" | "bin"
    files: tuple[str, ...]
    tensors: dict[str, TensorInfo]

    def load(self, names: Iterable[str] | None = None) -> dict[str, torch.Tensor]:
        """Materialize the named tensors (all when None) on CPU, in their stored dtype."""
        wanted = set(self.tensors) if names is None else set(names)
        by_file: dict[str, list[str]] = {}
        for name in wanted:
            by_file.setdefault(self.tensors[name].file, []).append(name)
        out: dict[str, torch.Tensor] = {}
        for file, keys in by_file.items():
            path = safe_child(self.folder, file)
            if self.format == "safetensors":
                try:
                    with safe_open(str(path), framework="pt") as handle:
                        for key in keys:
                            out[key] = handle.get_tensor(key)
                except Exception as exc:  # noqa: BLE001 - safetensors raises its own untyped errors
                    raise CorruptCheckpointError(
                        f"{file} in {self.folder} could not be read ({_short(exc)}); re-download the checkpoint"
                    ) from exc
            else:
                state = _torch_load(path, "cpu")
                for key in keys:
                    out[key] = state[key]
        return out


def safe_child(folder: Path, name: str) -> Path:
    """folder/name, refusing names that would leave the folder (absolute paths, '..', drive letters).

    Only the name is checked: symlinks inside a folder (the Hub cache's snapshot links, a user's own links)
    are followed as the folder's owner set them up.
    """
    parts = Path(name).parts
    if (not name or name.startswith(("/", "\\")) or "\\" in name or ":" in name or ".." in parts
            or Path(name).is_absolute()):
        raise CorruptCheckpointError(f"refusing file name {name!r} in {folder}: it points outside the folder")
    return folder / name


def read_json(path: Path, what: str = "") -> dict:
    """Parse a JSON object file; one-line CheckpointError when it is missing, unreadable or not an object."""
    label = what or path.name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CorruptCheckpointError(f"{label} is missing: {path}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptCheckpointError(f"{label} could not be read ({_short(exc)}): {path}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptCheckpointError(
            f"{path.name} in {path.parent} is not valid JSON (line {exc.lineno}: {exc.msg}); fix or re-download it"
        ) from exc
    if not isinstance(data, dict):
        raise CorruptCheckpointError(f"{path.name} in {path.parent} is not a JSON object; fix or re-download it")
    return data


def read_config(folder: Path) -> dict | None:
    """config.json of a folder, or None when the folder has none."""
    path = folder / "config.json"
    return read_json(path) if path.is_file() else None


def scan_weights(folder: Path) -> WeightFiles | None:
    """Describe the weights of a folder from headers only; None when it holds no weight file."""
    folder = Path(folder)
    for index_name, fmt in (("model.safetensors.index.json", "safetensors"),
                            ("pytorch_model.bin.index.json", "bin")):
        index = folder / index_name
        if index.is_file():
            return _scan_index(folder, index, fmt)
        if fmt == "safetensors":
            single = folder / "model.safetensors"
            files = [single.name] if single.is_file() else sorted(
                p.name for p in folder.glob("*.safetensors") if p.is_file())
            if files:
                return _scan_files(folder, files, "safetensors")
        else:
            single = folder / "pytorch_model.bin"
            files = [single.name] if single.is_file() else sorted(
                p.name for p in folder.glob("*.bin") if p.is_file() and p.name not in _SKIP_BIN)
            if not files and (folder / "medusa_lm_head.pt").is_file():
                files = ["medusa_lm_head.pt"]
            if files:
                return _scan_files(folder, files, "bin")
    return None


def _scan_index(folder: Path, index: Path, fmt: str) -> WeightFiles:
    data = read_json(index)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CorruptCheckpointError(f"{index.name} in {folder} has no weight_map; re-download the checkpoint")
    files = sorted(set(str(f) for f in weight_map.values()))
    for file in files:
        if not safe_child(folder, file).is_file():
            raise CorruptCheckpointError(
                f"{index.name} in {folder} names shard {file}, which is missing; re-download the checkpoint")
    weights = _scan_files(folder, files, fmt)
    missing = [k for k in weight_map if k not in weights.tensors]
    if missing:
        raise CorruptCheckpointError(
            f"{index.name} in {folder} lists {missing[0]} in {weight_map[missing[0]]}, but that shard lacks it; "
            "re-download the checkpoint")
    return weights


def _scan_files(folder: Path, files: list[str], fmt: str) -> WeightFiles:
    tensors: dict[str, TensorInfo] = {}
    for file in files:
        path = safe_child(folder, file)
        found = _safetensors_header(path) if fmt == "safetensors" else _bin_header(path)
        for info in found:
            tensors[info.name] = TensorInfo(info.name, info.shape, info.dtype, file)
    return WeightFiles(folder=folder, format=fmt, files=tuple(files), tensors=tensors)


def _safetensors_header(path: Path) -> list[TensorInfo]:
    try:
        with safe_open(str(path), framework="pt") as handle:
            out = []
            for key in handle.keys():
                piece = handle.get_slice(key)
                dtype = _SAFETENSORS_DTYPES.get(piece.get_dtype(), piece.get_dtype().lower())
                out.append(TensorInfo(key, tuple(int(d) for d in piece.get_shape()), dtype, path.name))
            return out
    except Exception as exc:  # noqa: BLE001 - SafetensorError is not importable as a stable type
        raise CorruptCheckpointError(
            f"{path.name} in {path.parent} is not a readable safetensors file ({_short(exc)}); it may be truncated "
            "or corrupted, re-download it") from exc


def _bin_header(path: Path) -> list[TensorInfo]:
    state = _torch_load(path, "meta")
    return [TensorInfo(k, tuple(int(d) for d in v.shape), str(v.dtype).replace("torch.", ""), path.name)
            for k, v in state.items()]


def _torch_load(path: Path, map_location: str) -> dict[str, torch.Tensor]:
    """torch.load with weights_only=True (never plain pickle); mmap when the file format allows it."""
    try:
        try:
            obj = torch.load(str(path), map_location=map_location, weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            obj = torch.load(str(path), map_location=map_location, weights_only=True)  # legacy format
    except pickle.UnpicklingError as exc:
        text = str(exc).lower()
        # a class/function reference, or anything else torch's weights-only unpickler would not run in a file that
        # is a pickle (a legacy file's payload, an opcode it does not allow): refused as unsafe, not called corrupt.
        # Bytes that are no pickle at all (no protocol marker, no zip) are corrupt, whatever the unpickler said.
        with open(path, "rb") as fh:
            start = fh.read(2)
        pickled = start[:1] == b"\x80" or start == b"PK"
        unsafe = "unsupported global" in text or (pickled and "weights only load failed" in text)
        if unsafe and "truncated" not in text:
            raise CheckpointError(
                f"{path.name} in {path.parent} holds pickled objects besides tensors and was refused (only "
                "weights-only loading is allowed); use a safetensors copy from a trusted source") from exc
        raise CorruptCheckpointError(
            f"{path.name} in {path.parent} is not a readable PyTorch weight file ({_short(exc)}); re-download it"
        ) from exc
    except (RuntimeError, EOFError, OSError, ValueError, struct.error) as exc:
        raise CorruptCheckpointError(
            f"{path.name} in {path.parent} is not a readable PyTorch weight file ({_short(exc)}); it may be "
            "truncated or corrupted, re-download it") from exc
    if isinstance(obj, dict) and len(obj) == 1 and isinstance(next(iter(obj.values())), dict):
        obj = next(iter(obj.values()))  # {"state_dict": {...}} / {"model": {...}}
    if not isinstance(obj, dict):
        raise CorruptCheckpointError(f"{path.name} in {path.parent} does not hold a state dict; re-download it")
    return {str(k): v for k, v in obj.items() if isinstance(v, torch.Tensor)}
