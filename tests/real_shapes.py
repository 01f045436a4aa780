"""Real-shaped checkpoints without their bytes: public configs, and safetensors files whose headers name
every tensor with its real shape while the data region is a sparse hole (no disk, no memory). `inspect`
reads headers only, so these exercise detection and planning at full size."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch

_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}


def write_header_only(folder: Path, shapes: dict[str, tuple[int, ...]], dtype: str = "BF16",
                      name: str = "model.safetensors") -> Path:
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for key, shape in shapes.items():
        dt = "I64" if key.endswith("d2t") else ("BOOL" if key.endswith("t2d") else dtype)
        size = _BYTES[dt]
        for d in shape:
            size *= int(d)
        header[key] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + offset)  # sparse: the tensors' bytes are never written
    return folder


def model_shapes(config, mtp_layer: bool = False) -> dict[str, tuple[int, ...]]:
    """Checkpoint names and shapes of a transformers model built on the meta device (MoE experts stored one
    tensor per expert, as published checkpoints store them); with mtp_layer, a DeepSeek-style MTP layer."""
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
        shapes = _split_experts({k: tuple(v.shape) for k, v in model.state_dict().items()})
        if mtp_layer:
            index = config.num_hidden_layers
            block = type(model.model.layers[-1])(config, layer_idx=index)
            p = f"model.layers.{index}."
            h, v = config.hidden_size, config.vocab_size
            shapes.update({p + k: s for k, s in _split_experts({k: tuple(t.shape) for k, t in
                                                                  block.state_dict().items()}).items()})
            shapes.update({p + "enorm.weight": (h,), p + "hnorm.weight": (h,), p + "eh_proj.weight": (h, 2 * h),
                           p + "shared_head.norm.weight": (h,), p + "shared_head.head.weight": (v, h),
                           p + "embed_tokens.weight": (v, h)})
    return shapes


def _split_experts(shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    out = {}
    for k, s in shapes.items():
        if k.endswith("experts.gate_up_proj"):
            stem = k[:-len("gate_up_proj")]
            for e in range(s[0]):
                out[f"{stem}{e}.gate_proj.weight"] = (s[1] // 2, s[2])
                out[f"{stem}{e}.up_proj.weight"] = (s[1] // 2, s[2])
        elif k.endswith("experts.down_proj"):
            stem = k[:-len("down_proj")]
            for e in range(s[0]):
                out[f"{stem}{e}.down_proj.weight"] = (s[1], s[2])
        else:
            out[k] = s
    return out


# Public configs (the model repos' config.json, fields that matter here).
LLAMA31_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"},
              "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "tie_word_embeddings": False,
              "hidden_act": "silu", "torch_dtype": "bfloat16"}
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "bfloat16",
            "bos_token_id": 151643, "eos_token_id": 151645}
# deepseek-ai/DeepSeek-V3 config.json with the width reduced (hidden 7168 -> 512, 256 -> 8 routed experts,
# 128 -> 8 heads); layer count, MLA ranks' structure, MoE layout and the MTP layer index (61) kept.
DEEPSEEK_V3_REDUCED = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 512,
                       "intermediate_size": 1536, "moe_intermediate_size": 256, "num_hidden_layers": 61,
                       "num_attention_heads": 8, "num_key_value_heads": 8, "n_routed_experts": 8, "n_shared_experts": 1,
                       "num_experts_per_tok": 2, "n_group": 4, "topk_group": 2, "first_k_dense_replace": 3,
                       "q_lora_rank": 192, "kv_lora_rank": 64, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                       "v_head_dim": 128, "vocab_size": 129280, "max_position_embeddings": 163840,
                       "rms_norm_eps": 1e-6, "rope_theta": 10000, "num_nextn_predict_layers": 1,
                       "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                        "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                        "type": "yarn"},
                       "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
                       "tie_word_embeddings": False, "torch_dtype": "bfloat16", "bos_token_id": 0, "eos_token_id": 1}
# XiaomiMiMo/MiMo-7B-Base / -RL config.json (model_type "mimo", remote code that subclasses Qwen2). hidden 4096,
# 36 layers, 32 heads, 8 kv heads, intermediate 11008, vocab 151680 and rope_theta 640000 match the public
# MiMo-Audio config built on MiMo-7B; num_nextn_predict_layers 1 as vLLM/SGLang mimo_mtp.py read it.
MIMO_7B = {"architectures": ["MiMoForCausalLM"], "model_type": "mimo",
           "auto_map": {"AutoConfig": "configuration_mimo.MiMoConfig", "AutoModel": "modeling_mimo.MiMoModel",
                        "AutoModelForCausalLM": "modeling_mimo.MiMoForCausalLM"},
           "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "vocab_size": 151680, "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
           "rope_theta": 640000, "attention_bias": True, "hidden_act": "silu", "tie_word_embeddings": False,
           "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 36,
           "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645}


def mimo_shapes(raw: dict) -> dict[str, tuple[int, ...]]:
    """A MiMo checkpoint's names and shapes: the Qwen2 body plus `model.mtp_layers.0.*` (block stored flat)."""
    from transformers import Qwen2Config
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer
    config = Qwen2Config(**{k: v for k, v in raw.items() if k not in ("model_type", "architectures", "auto_map")})
    shapes = model_shapes(config)
    with torch.device("meta"):
        block = Qwen2DecoderLayer(config, layer_idx=config.num_hidden_layers - 1)
    p, h = "model.mtp_layers.0.", config.hidden_size
    shapes.update({p + k: tuple(t.shape) for k, t in block.state_dict().items()})
    shapes.update({p + "token_layernorm.weight": (h,), p + "hidden_layernorm.weight": (h,),
                   p + "input_proj.weight": (h, 2 * h), p + "final_layernorm.weight": (h,)})
    return shapes


# yuhuili/EAGLE3-LLaMA3.1-Instruct-8B config.json
EAGLE3_LLAMA31_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                     "intermediate_size": 14336, "num_hidden_layers": 1, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "vocab_size": 128256, "draft_vocab_size": 32000,
                     "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                     "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "torch_dtype": "float16"}


def eagle3_shapes(hidden: int, target_hidden: int, vocab: int, draft_vocab: int, heads: int, kv: int,
                  head_dim: int, inter: int, layers: int = 1, fc_norm: bool = False) -> dict[str, tuple[int, ...]]:
    q, k = heads * head_dim, kv * head_dim
    out: dict[str, tuple[int, ...]] = {"fc.weight": (hidden, 3 * target_hidden), "norm.weight": (hidden,),
                                       "lm_head.weight": (draft_vocab, hidden), "d2t": (draft_vocab,), "t2d": (vocab,)}
    for i in range(layers):
        p, width = (f"layers.{i}.", 2 * hidden if i == 0 else hidden)
        out.update({p + "self_attn.q_proj.weight": (q, width), p + "self_attn.k_proj.weight": (k, width),
                    p + "self_attn.v_proj.weight": (k, width), p + "self_attn.o_proj.weight": (hidden, q),
                    p + "mlp.gate_proj.weight": (inter, hidden), p + "mlp.up_proj.weight": (inter, hidden),
                    p + "mlp.down_proj.weight": (hidden, inter), p + "input_layernorm.weight": (hidden,),
                    p + "post_attention_layernorm.weight": (hidden,)})
        if i == 0:
            out[p + "hidden_norm.weight"] = (hidden,)
    if fc_norm:
        out.update({f"fc_norm.{i}.weight": (target_hidden,) for i in range(3)})
    return out
