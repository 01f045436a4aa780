"""A trained head written in the original public layouts (the yuhuili EAGLE-1 and EAGLE-3 repos), so the shipped
heads go through the adapter like any published draft, and vLLM and SGLang read them as they read those repos."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import LlamaConfig

from eagle_demo.drafts import Eagle1Head, Eagle3Head

__all__ = ["export_eagle1", "export_eagle3"]


def _config_json(cfg: LlamaConfig, **extra) -> dict:
    """A plain old-style Llama config, as the yuhuili repos ship it."""
    out = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size, "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads, "num_hidden_layers": 1, "hidden_act": "silu",
        "max_position_embeddings": 2048, "rms_norm_eps": cfg.rms_norm_eps, "vocab_size": cfg.vocab_size,
        "bos_token_id": cfg.bos_token_id, "eos_token_id": cfg.eos_token_id, "pad_token_id": 0,
        "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.28.1",
    }
    out.update(extra)
    return out


def export_eagle1(head: Eagle1Head, out_dir: Path, embedding: bool = True) -> None:
    """embedding: ship a copy of the target's embedding, as the yuhuili EAGLE-1 repos do (the loader then
    shares the target's anyway); False leaves it out, which the loader reads as shared (a 49k x 576 copy is
    57 MB in fp16)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().half().contiguous().cpu() for k, v in head.state_dict().items()}
    if embedding:  # as yuhuili ships it
        state["embed_tokens.weight"] = head.shared_embed.module.weight.detach().half().cpu().clone()
    assert not any(k.startswith("lm_head") or "input_layernorm" in k for k in state)
    torch.save(state, out_dir / "pytorch_model.bin")
    cfg = _config_json(head.config, bias=True)
    cfg.pop("rope_theta", None)  # absent in the original files: EAGLE's default 10000 applies
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def export_eagle3(head: Eagle3Head, t2d: torch.Tensor, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {}
    for k, v in head.state_dict().items():
        state[k] = v.detach().cpu().clone() if k == "d2t" else v.detach().half().contiguous().cpu()
    state["t2d"] = t2d.cpu().clone()
    assert not any(k.startswith("embed_tokens") for k in state)
    torch.save(state, out_dir / "pytorch_model.bin")
    cfg = _config_json(head.config, draft_vocab_size=int(head.lm_head.out_features))
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
