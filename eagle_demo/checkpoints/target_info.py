"""The target as the adapter sees it, from its config and weight headers only: a decoder-only causal LM, its
layers, widths, vocabulary (the tokenizer's too) and tied embeddings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from huggingface_hub.errors import StrictDataclassError
from transformers import AutoConfig, PretrainedConfig
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from .errors import CheckpointError
from .files import WeightFiles, read_json, scan_weights
from .mimo import MIMO_NOTE, is_mimo, mimo_config

__all__ = ["TargetInfo", "read_target", "tokenizer_vocab_size"]

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


@dataclass(frozen=True)
class TargetInfo:
    folder: Path
    config: PretrainedConfig
    model_type: str
    num_layers: int
    hidden: int
    vocab: int
    max_positions: int | None
    tied: bool
    weights: WeightFiles | None
    has_tokenizer: bool
    tokenizer_vocab: int | None
    notes: tuple[str, ...] = ()  # how the target itself was adapted (MiMo: run as Qwen2)


def read_target(folder: Path, require_weights: bool = True) -> TargetInfo:
    """Read and vet the target's config (and weight headers when present): a decoder-only causal LM."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"target folder {folder} has no config.json; pass a transformers model folder or repo")
    raw = read_json(folder / "config.json")
    model_type = str(raw.get("model_type") or "")
    if not model_type:
        raise CheckpointError(f"target config.json in {folder} has no model_type; pass a transformers causal LM")
    if model_type == "eagle" or "transformer_layer_config" in raw or "medusa_num_heads" in raw:
        raise CheckpointError(f"target {folder} is a draft/speculator checkpoint, not a full model; pass it as the "
                              "draft and a full causal LM as the target")
    mimo = is_mimo(raw)
    if raw.get("auto_map") and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not mimo:
        raise CheckpointError(f"target {folder} needs its own modeling code ('{model_type}', auto_map); this app never "
                              "runs code from a repo (trust_remote_code stays off), pick a model transformers supports")
    if not mimo and (raw.get("is_encoder_decoder") or model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        raise CheckpointError(f"target {folder} is a '{model_type}' model, not a decoder-only causal LM; pick a "
                              "causal LM target (e.g. Llama, Qwen2, Qwen3, Mistral)")
    config = mimo_config(raw, folder) if mimo else _auto_config(folder)
    if getattr(config, "is_encoder_decoder", False):
        raise CheckpointError(f"target {folder} is an encoder-decoder model, not a decoder-only causal LM; pick a "
                              "causal LM target")
    text = config.get_text_config()
    weights = scan_weights(folder)
    if weights is None and require_weights:
        raise CheckpointError(f"target folder {folder} has no weight files (*.safetensors or pytorch_model*.bin); "
                              "pass a complete model folder or repo")
    if weights is not None:
        names = {n[len("model."):] if n.startswith("model.") else n for n in weights.tensors}
        if names & {"fc.weight", "fusion_fc.weight", "d2t", "t2d"} or any(n.startswith("midlayer.") for n in names):
            raise CheckpointError(f"target {folder} looks like an EAGLE draft (fc/midlayer weights), not a full "
                                  "model; pass it as the draft and its base model as the target")
    tok_vocab = tokenizer_vocab_size(folder)
    return TargetInfo(
        folder=folder, config=config, model_type=model_type, num_layers=int(text.num_hidden_layers),
        hidden=int(text.hidden_size), vocab=int(text.vocab_size),
        max_positions=int(getattr(text, "max_position_embeddings", 0) or 0) or None,
        tied=bool(getattr(text, "tie_word_embeddings", False) or getattr(config, "tie_word_embeddings", False)),
        weights=weights, has_tokenizer=any((folder / f).is_file() for f in _TOKENIZER_FILES),
        tokenizer_vocab=tok_vocab, notes=(MIMO_NOTE,) if mimo else ())


def _auto_config(folder: Path) -> PretrainedConfig:
    try:
        return AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except StrictDataclassError as exc:  # transformers validates each field's type
        raise CheckpointError(f"target config.json in {folder} has a field of the wrong type "
                              f"({' '.join(str(exc).split())[:160]}); correct that field in config.json") from exc
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise CheckpointError(f"target config in {folder} could not be loaded by transformers "
                              f"({' '.join(str(exc).split())[:160]}); this app never enables trust_remote_code, "
                              "pick a model supported by the installed transformers") from exc


def tokenizer_vocab_size(folder: Path) -> int | None:
    """1 + the largest token id in tokenizer.json (base vocab and added tokens), or None without one."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    data = read_json(path)
    model = found if isinstance(found := data.get("model"), dict) else {}
    vocab = model.get("vocab")
    top = -1
    if isinstance(vocab, dict) and vocab:
        top = max(int(v) for v in vocab.values())
    elif isinstance(vocab, list):
        top = len(vocab) - 1
    for token in data.get("added_tokens") or []:
        if isinstance(token, dict) and "id" in token:
            top = max(top, int(token["id"]))
    return top + 1 if top >= 0 else None


