"""MiMo-7B targets (XiaomiMiMo/MiMo-7B-Base, -RL, ...) run on transformers' own Qwen2 classes.

The repo's config says model_type "mimo" with an auto_map to its own code, but that code only subclasses
Qwen2 (`MiMoConfig(Qwen2Config)` adds `num_nextn_predict_layers`; `MiMoModel(Qwen2Model)` adds the MTP layers
under `model.mtp_layers.*`), and vLLM's `mimo.py` serves the body as its Qwen2 model. So the config's fields
build a `Qwen2Config`, the body loads into `Qwen2ForCausalLM`, and the MTP layers stay out of the target (they
are the draft, see `mtp.py`). No code from the repo is imported or run.
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub.errors import StrictDataclassError
from transformers import Qwen2Config, Qwen2ForCausalLM

from .errors import CheckpointError

__all__ = ["is_mimo", "mimo_config", "MimoBody", "MIMO_NOTE"]

_ARCH = "MiMoForCausalLM"
_NOT_FIELDS = ("model_type", "architectures", "auto_map", "transformers_version")
MIMO_NOTE = ("target 'mimo' (MiMoForCausalLM) loaded as transformers Qwen2ForCausalLM (its body is Qwen2); "
             "its model.mtp_layers.* are the MTP draft, not part of the target")


def is_mimo(raw: dict) -> bool:
    """A MiMo config: model_type "mimo" or the MiMoForCausalLM architecture."""
    archs = raw.get("architectures") or []
    return raw.get("model_type") == "mimo" or (isinstance(archs, list) and _ARCH in archs)


def mimo_config(raw: dict, folder: Path) -> Qwen2Config:
    """Qwen2Config from a MiMo config.json's fields (num_nextn_predict_layers kept as an attribute)."""
    fields = {k: v for k, v in raw.items() if k not in _NOT_FIELDS}
    try:
        config = Qwen2Config(**fields)
        int(config.hidden_size), int(config.num_hidden_layers), int(config.vocab_size)
    except (ValueError, TypeError, KeyError, AttributeError, StrictDataclassError) as exc:
        raise CheckpointError(f"MiMo config.json in {folder} is not a valid Qwen2-style config "
                              f"({' '.join(str(exc).split())[:160]}); re-download the target") from exc
    config.architectures = ["Qwen2ForCausalLM"]
    return config


class MimoBody(Qwen2ForCausalLM):
    """transformers' Qwen2ForCausalLM, told that the checkpoint's MTP layers are expected extras (so loading
    does not report them as unexpected keys). Nothing else differs."""

    _keys_to_ignore_on_load_unexpected = [r"(^|\.)mtp_layers\."]
