"""The adapted copy's weights (`write_weights`), and the fold of an EAGLE-1 draft's `fc.bias` into its token
embedding, for engines whose EAGLE-1 fc has no bias (vLLM's `llama_eagle.py` builds `ReplicatedLinear(2H, H,
bias=False)` and its weight loader skips any unexpected `.bias`).

The draft's first step is fc(concat(emb, feature)) = W_e emb + W_f feature + b. With W_e the fc's [H, H] block
that reads the embedding, every embedding row e becomes e + s where W_e s = b, so W_e (e + s) = W_e e + b: the same
fc output for every token and every feature, with no bias. Exact up to rounding when W_e is invertible (s is solved
in float64 and the folded tensors are written in float32); refused when W_e is near-singular."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import CorruptCheckpointError

__all__ = ["Folded", "fold_fc_bias", "target_embedding", "write_weights"]

MAX_RESIDUAL = 1e-4  # |W_e s - b| / |b| above this: the fold would change the draft's outputs


@dataclass(frozen=True)
class Folded:
    tensors: dict  # name -> tensor, without fc.bias, embedding shifted, floating tensors in float32
    residual: float  # relative error of the solved shift


def fold_fc_bias(tensors: dict[str, torch.Tensor], embedding: torch.Tensor | None = None) -> Folded:
    """tensors: the draft's state (names `fc.*` / `embed_tokens.weight`, or with a `model.` prefix). embedding: the
    target's input embedding [V, H] when the draft has none of its own (the fold then gives it one).
    Raises ValueError when there is no fc.bias or the fold is not exact."""
    prefix = "model." if any(k.startswith("model.fc.") for k in tensors) else ""
    bias, fc = tensors.get(prefix + "fc.bias"), tensors[prefix + "fc.weight"]  # [H], [H, 2H]
    if bias is None:
        raise ValueError("the draft has no fc.bias to fold")
    name = prefix + "embed_tokens.weight"
    embed = tensors.get(name, embedding)  # [V, H]
    if embed is None:
        raise ValueError("the draft has no embedding and none was given to fold fc.bias into")
    hidden = fc.shape[0]
    w_e, b = fc[:, :hidden].double(), bias.double()  # [H, H], [H]
    shift = torch.linalg.lstsq(w_e, b[:, None]).solution[:, 0]  # [H]
    residual = float((w_e @ shift - b).norm() / b.norm().clamp_min(1e-30))
    if residual > MAX_RESIDUAL:
        raise ValueError(f"fc.bias cannot be folded exactly (the fc's embedding block is near-singular, relative "
                         f"error {residual:.1e})")
    out = {k: (v.float() if v.is_floating_point() else v) for k, v in tensors.items() if k != prefix + "fc.bias"}
    out[name] = (embed.double() + shift).float()  # [V, H]
    return Folded(out, residual)


def target_embedding(target: Path) -> torch.Tensor:
    """The target's input embedding [V, H], read alone from its weight files (for a draft without its own)."""
    from .files import read_config, scan_weights

    weights = scan_weights(target)
    if weights is None:
        raise CorruptCheckpointError(f"target folder {target} has no weight files to read its embedding from")
    names = [n for n in weights.tensors if n.endswith("embed_tokens.weight")]
    if not names and (read_config(target) or {}).get("tie_word_embeddings"):  # a tied file may keep only lm_head
        names = [n for n in weights.tensors if n.endswith("lm_head.weight")]
    if not names:
        raise CorruptCheckpointError(f"target folder {target} has no embed_tokens.weight to fold fc.bias into")
    return weights.load(names[:1])[names[0]]


def write_weights(src: Path, out: Path, zero_fc_bias: bool = False, fold: bool = False, strip_prefix: bool = False,
                  target: Path | None = None) -> None:
    """The draft's weights from src into out: copied as they are, or rewritten as one safetensors file with the
    `model.` prefixes dropped, fc.bias folded into the embedding, or a zero fc.bias added (SGLang)."""
    import shutil

    from safetensors.torch import save_file

    from .files import scan_weights

    weights = scan_weights(src)
    if weights is None:
        raise CorruptCheckpointError(f"draft folder {src} has no weight files to copy")
    if not (zero_fc_bias or fold or strip_prefix):
        for name in list(weights.files) + [p.name for p in src.glob("*.index.json")]:
            shutil.copy2(src / name, out / name)
        return
    tensors = weights.load()
    if strip_prefix:
        tensors = {k.removeprefix("model."): v for k, v in tensors.items()}
    prefix = "model." if any(k.startswith("model.fc.") for k in tensors) else ""
    if fold:
        own = prefix + "embed_tokens.weight" in tensors
        tensors = fold_fc_bias(tensors, None if own or target is None else target_embedding(target)).tensors
    elif zero_fc_bias:
        fc = tensors[prefix + "fc.weight"]  # [H, 2H]
        tensors[prefix + "fc.bias"] = torch.zeros(fc.shape[0], dtype=fc.dtype)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"))
