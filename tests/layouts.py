"""Write every public EAGLE checkpoint layout to disk from random tensors (tests only, no network).

Targets are `tests.fixtures.tiny_target` models saved with `save_pretrained`. Drafts are written the way
each producer writes them (the README's "Supported draft layouts"): raw yuhuili EAGLE-1 .bin
files with bare Llama/Qwen2 configs, vLLM-converted safetensors with a wrapped config, speculators
configs with `transformer_layer_config`, EAGLE-3 in the official / SpecForge / AngelSlim / speculators
flavours. Weight builders return canonical names (our heads' names) so the same tensors can be written
in several layouts.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from fixtures import tiny_target

HIDDEN = 64
VOCAB = 96


# ---- targets -------------------------------------------------------------------------------------------

def write_target(folder: Path, family: str = "llama", layers: int = 4, seed: int = 0, shard: bool = False,
                 tokenizer: int | None = None, vocab: int = VOCAB, hidden: int = HIDDEN) -> Path:
    model = tiny_target(family, layers=layers, vocab=vocab, hidden=hidden, seed=seed)
    model.save_pretrained(folder, max_shard_size="40KB" if shard else "5GB")
    if tokenizer is not None:
        write_tokenizer(folder, tokenizer)
    return Path(folder)


def write_tokenizer(folder: Path, size: int) -> None:
    """A word-level tokenizer with `size` tokens ("t0".."t{size-1}")."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", pad_token="t0", bos_token="t1",
                                   eos_token="t2")
    fast.save_pretrained(folder)


# ---- random weights (canonical names) ------------------------------------------------------------------

def _rand(*shape: int, scale: float = 0.2) -> torch.Tensor:
    return torch.randn(*shape) * scale


def _norm(n: int) -> torch.Tensor:
    return 1.0 + 0.1 * torch.randn(n)


def eagle1_weights(hidden: int = HIDDEN, vocab: int = VOCAB, heads: int = 4, kv: int = 4, inter: int = 128,
                   layers: int = 1, fc_bias: bool = True, qkv_bias: bool = False, embed: bool = True,
                   seed: int = 1) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    hd = hidden // heads
    sd = {"fc.weight": _rand(hidden, 2 * hidden)}
    if fc_bias:
        sd["fc.bias"] = _rand(hidden)
    if embed:
        sd["embed_tokens.weight"] = _rand(vocab, hidden, scale=1.0)
    for i in range(layers):
        p = f"layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = _rand(heads * hd, hidden)
        sd[p + "self_attn.k_proj.weight"] = _rand(kv * hd, hidden)
        sd[p + "self_attn.v_proj.weight"] = _rand(kv * hd, hidden)
        sd[p + "self_attn.o_proj.weight"] = _rand(hidden, heads * hd)
        if qkv_bias:
            sd[p + "self_attn.q_proj.bias"] = _rand(heads * hd)
            sd[p + "self_attn.k_proj.bias"] = _rand(kv * hd)
            sd[p + "self_attn.v_proj.bias"] = _rand(kv * hd)
        sd[p + "mlp.gate_proj.weight"] = _rand(inter, hidden)
        sd[p + "mlp.up_proj.weight"] = _rand(inter, hidden)
        sd[p + "mlp.down_proj.weight"] = _rand(hidden, inter)
        sd[p + "post_attention_layernorm.weight"] = _norm(hidden)
        if i > 0:
            sd[p + "input_layernorm.weight"] = _norm(hidden)
    return sd


def eagle3_weights(hidden: int = HIDDEN, target_hidden: int = HIDDEN, vocab: int = VOCAB, draft_vocab: int = 64,
                   heads: int = 4, kv: int = 2, head_dim: int = 16, inter: int = 128, embed: bool = False,
                   n_features: int = 3, seed: int = 2) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    p = "midlayer."
    sd = {
        p + "self_attn.q_proj.weight": _rand(heads * head_dim, 2 * hidden),
        p + "self_attn.k_proj.weight": _rand(kv * head_dim, 2 * hidden),
        p + "self_attn.v_proj.weight": _rand(kv * head_dim, 2 * hidden),
        p + "self_attn.o_proj.weight": _rand(hidden, heads * head_dim),
        p + "mlp.gate_proj.weight": _rand(inter, hidden),
        p + "mlp.up_proj.weight": _rand(inter, hidden),
        p + "mlp.down_proj.weight": _rand(hidden, inter),
        p + "input_layernorm.weight": _norm(hidden),
        p + "hidden_norm.weight": _norm(hidden),
        p + "post_attention_layernorm.weight": _norm(hidden),
        "fc.weight": _rand(hidden, n_features * target_hidden, scale=0.1),
        "norm.weight": _norm(hidden),
        "lm_head.weight": _rand(draft_vocab, hidden, scale=1.0),
    }
    used = torch.sort(torch.randperm(vocab)[:draft_vocab]).values if draft_vocab < vocab else torch.arange(vocab)
    sd["d2t"] = used - torch.arange(draft_vocab)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[used] = True
    sd["t2d"] = t2d
    if embed:
        sd["embed_tokens.weight"] = _rand(vocab, hidden, scale=1.0)
    return sd


def cast(sd: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in sd.items()}


# ---- file writers ---------------------------------------------------------------------------------------

def write_json(folder: Path, data: dict, name: str = "config.json") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data, indent=2))


def write_bin(folder: Path, sd: dict[str, torch.Tensor], name: str = "pytorch_model.bin") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.contiguous() for k, v in sd.items()}, folder / name)


def write_safetensors(folder: Path, sd: dict[str, torch.Tensor], name: str = "model.safetensors") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sd.items()}, str(folder / name), metadata={"format": "pt"})


def write_sharded(folder: Path, sd: dict[str, torch.Tensor], fmt: str = "safetensors", shards: int = 2) -> None:
    """Split into `shards` files plus the HF index (model.safetensors.index.json / pytorch_model.bin.index.json)."""
    keys = sorted(sd)
    ext = "safetensors" if fmt == "safetensors" else "bin"
    stem = "model" if fmt == "safetensors" else "pytorch_model"
    weight_map = {}
    for i in range(shards):
        name = f"{stem}-{i + 1:05d}-of-{shards:05d}.{ext}"
        part = {k: sd[k] for k in keys[i::shards]}
        (write_safetensors if fmt == "safetensors" else write_bin)(folder, part, name)
        weight_map.update({k: name for k in part})
    write_json(folder, {"metadata": {"total_size": 0}, "weight_map": weight_map}, f"{stem}.{ext}.index.json")


def llama_config(hidden: int = HIDDEN, vocab: int = VOCAB, heads: int = 4, kv: int | None = None,
                 inter: int = 128, layers: int = 1, **extra) -> dict:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
           "intermediate_size": inter, "num_attention_heads": heads, "num_hidden_layers": layers,
           "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "vocab_size": vocab, "pad_token_id": 0,
           "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False, "torch_dtype": "float16",
           "transformers_version": "4.28.1"}
    if kv is not None:
        cfg["num_key_value_heads"] = kv
    cfg.update(extra)
    return cfg


# ---- EAGLE-1 layouts -------------------------------------------------------------------------------------

def write_raw_eagle1(folder: Path, sd: dict, config: dict | None = None, fmt: str = "bin") -> Path:
    """yuhuili EAGLE-1/2: bare Llama config with num_hidden_layers 1, unprefixed keys, pytorch_model.bin."""
    write_json(folder, config or llama_config())
    (write_bin if fmt == "bin" else write_safetensors)(folder, sd)
    return folder


def write_vicuna_eagle1(folder: Path, seed: int = 1) -> Path:
    """Vicuna/LLaMA2 style: fp32 .bin, fc.bias, config without num_key_value_heads / rope_theta / bias."""
    return write_raw_eagle1(folder, eagle1_weights(seed=seed), llama_config())


def write_llama3_eagle1(folder: Path, seed: int = 1) -> Path:
    """LLaMA3 style: "bias": false (no fc.bias), fp16 .bin, rope_theta 500000, GQA draft."""
    sd = cast(eagle1_weights(kv=2, fc_bias=False, seed=seed), torch.float16)
    return write_raw_eagle1(folder, sd, llama_config(kv=2, rope_theta=500000.0, bias=False, vocab_size=VOCAB))


def write_qwen2_eagle1(folder: Path, seed: int = 1) -> Path:
    """Qwen2 style: Qwen2ForCausalLM arch, qkv_bias key, q/k/v + fc bias, MHA draft, bf16, no kv key."""
    sd = cast(eagle1_weights(kv=4, qkv_bias=True, seed=seed), torch.bfloat16)
    cfg = llama_config(architectures=["Qwen2ForCausalLM"], model_type="qwen2", qkv_bias=True,
                       rope_theta=1000000.0, torch_dtype="bfloat16", max_position_embeddings=32768)
    return write_raw_eagle1(folder, sd, cfg)


def write_vllm_eagle1(folder: Path, sd: dict, target_lm_head: torch.Tensor | None = None) -> Path:
    """vLLM-converted: {"model_type": "eagle", "model": {...}}, eagle_fc_bias, lm_head inside, safetensors,
    `model.` prefixes on the decoder keys."""
    inner = llama_config(rope_theta=10000.0)
    inner["eagle_fc_bias"] = "fc.bias" in sd
    write_json(folder, {"model_type": "eagle", "model": inner, "architectures": ["EAGLEModel"]})
    out = {}
    for k, v in sd.items():
        out[k if k.startswith("fc.") else "model." + k] = v
    out["lm_head.weight"] = target_lm_head if target_lm_head is not None else _rand(VOCAB, HIDDEN)
    write_safetensors(folder, out)
    return folder


def write_speculators_eagle1(folder: Path, sd: dict) -> Path:
    """speculators EagleSpeculator: transformer_layer_config, fusion_fc.*, transformer.* (layer 0)."""
    write_json(folder, {
        "architectures": ["EagleSpeculator"], "speculators_model_type": "eagle",
        "transformer_layer_config": llama_config(kv=4), "fusion_bias": "fc.bias" in sd, "layernorms": False,
        "speculators_config": {"algorithm": "eagle", "default_proposal_method": "greedy",
                               "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                               "verifier": {"name_or_path": "tiny", "architectures": ["LlamaForCausalLM"]}},
    })
    out = {}
    for k, v in sd.items():
        if k.startswith("fc."):
            out["fusion_fc." + k[3:]] = v
        elif k.startswith("layers.0."):
            out["transformer." + k[len("layers.0."):]] = v
        else:
            out[k] = v
    write_safetensors(folder, out)
    return folder


def write_hass_eagle1(folder: Path) -> Path:
    sd = eagle1_weights()
    for name in ("embed_layernorm.weight", "hidden_layernorm.weight", "lm_head_layernorm.weight"):
        sd[name] = _norm(HIDDEN)
    return write_raw_eagle1(folder, sd)


# ---- EAGLE-3 layouts -------------------------------------------------------------------------------------

def eagle3_config(draft_vocab: int = 64, **extra) -> dict:
    cfg = llama_config(kv=2, inter=128, draft_vocab_size=draft_vocab, torch_dtype="float16")
    cfg.update(extra)
    return cfg


def write_official_eagle3(folder: Path, sd: dict, **config) -> Path:
    """yuhuili EAGLE3-*: LlamaForCausalLM config, no rope_theta, max_pos 2048, fp16 pytorch_model.bin."""
    write_json(folder, eagle3_config(draft_vocab=sd["lm_head.weight"].shape[0], **config))
    write_bin(folder, cast(sd, torch.float16))
    return folder


def write_specforge_eagle3(folder: Path, sd: dict, ids=(1, 3, 4)) -> Path:
    """SpecForge/SGLang: LlamaForCausalLMEagle3, eagle_config ids (output-of-layer), safetensors."""
    write_json(folder, eagle3_config(draft_vocab=sd["lm_head.weight"].shape[0],
                                     architectures=["LlamaForCausalLMEagle3"], rope_theta=10000.0,
                                     max_position_embeddings=4096, torch_dtype="bfloat16",
                                     eagle_config={"eagle_aux_hidden_state_layer_ids": list(ids),
                                                   "use_aux_hidden_state": True}))
    write_safetensors(folder, sd)
    return folder


def write_angelslim_eagle3(folder: Path, sd: dict) -> Path:
    """AngelSlim: Eagle3LlamaForCausalLM, explicit head_dim (heads x head_dim != hidden), tie true."""
    q_rows = sd["midlayer.self_attn.q_proj.weight"].shape[0]
    write_json(folder, eagle3_config(draft_vocab=sd["lm_head.weight"].shape[0],
                                     architectures=["Eagle3LlamaForCausalLM"], head_dim=q_rows // 4,
                                     tie_word_embeddings=True, target_model_type="qwen3", rope_theta=1000000.0,
                                     max_position_embeddings=40960, torch_dtype="bfloat16"))
    write_safetensors(folder, {k: v for k, v in sd.items() if "embed" not in k})
    return folder


def write_speculators_eagle3(folder: Path, sd: dict, ids=(2, 4, 5), norm_before_residual: bool | None = None,
                             fmt: str = "safetensors") -> Path:
    """speculators Eagle3Speculator: transformer_layer_config, layers.0. instead of midlayer., top-level ids."""
    cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
           "transformer_layer_config": llama_config(kv=2, max_position_embeddings=2048),
           "draft_vocab_size": sd["lm_head.weight"].shape[0], "target_hidden_size": sd["fc.weight"].shape[1] // 3,
           "eagle_aux_hidden_state_layer_ids": list(ids),
           "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                  "proposal_methods": [], "verifier": {"name_or_path": "tiny"}}}
    if norm_before_residual is not None:
        cfg["norm_before_residual"] = norm_before_residual
    write_json(folder, cfg)
    out = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v for k, v in sd.items()}
    (write_safetensors if fmt == "safetensors" else write_bin)(folder, out)
    return folder


# ---- other families --------------------------------------------------------------------------------------

def write_medusa(folder: Path, heads: int = 2) -> Path:
    write_json(folder, {"base_model_name_or_path": "tiny", "medusa_num_heads": heads, "medusa_num_layers": 1})
    sd = {}
    for h in range(heads):
        sd[f"{h}.0.linear.weight"] = _rand(HIDDEN, HIDDEN)
        sd[f"{h}.0.linear.bias"] = _rand(HIDDEN)
        sd[f"{h}.1.weight"] = _rand(VOCAB, HIDDEN)
    write_bin(folder, sd, "medusa_lm_head.pt")
    return folder


# ---- layouts published in 2025-2026 (docs/checkpoint-formats.md, "Newer layouts") ------------------------

def write_eagle31(folder: Path, sd: dict, norm_output: bool = True, ids=(1, 3, 4)) -> Path:
    """EAGLE-3.1 (SpecForge #568 / vLLM #42764): fc_norm.{0,1,2}.weight [Ht] and a norm_output flag."""
    ht = sd["fc.weight"].shape[1] // 3
    sd = dict(sd, **{f"fc_norm.{i}.weight": _norm(ht) for i in range(3)})
    write_json(folder, eagle3_config(draft_vocab=sd["lm_head.weight"].shape[0],
                                     architectures=["LlamaForCausalLMEagle3"],
                                     norm_output=norm_output, rope_theta=10000.0,
                                     eagle_config={"eagle_aux_hidden_state_layer_ids": list(ids),
                                                   "use_aux_hidden_state": True}))
    write_safetensors(folder, sd)
    return folder


def multilayer_eagle3_weights(layers: int = 2, seed: int = 21, **kw) -> dict[str, torch.Tensor]:
    """EAGLE-3 with `layers` decoder layers, keys layers.N.* (vLLM #26164): layer 0 reads 2H, later ones H."""
    sd = eagle3_weights(seed=seed, **kw)
    out = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v for k, v in sd.items()}
    hidden, q_rows = sd["fc.weight"].shape[0], sd["midlayer.self_attn.q_proj.weight"].shape[0]
    kv_rows, inter = sd["midlayer.self_attn.k_proj.weight"].shape[0], sd["midlayer.mlp.gate_proj.weight"].shape[0]
    for i in range(1, layers):
        p = f"layers.{i}."
        out.update({p + "self_attn.q_proj.weight": _rand(q_rows, hidden),
                    p + "self_attn.k_proj.weight": _rand(kv_rows, hidden),
                    p + "self_attn.v_proj.weight": _rand(kv_rows, hidden),
                    p + "self_attn.o_proj.weight": _rand(hidden, q_rows),
                    p + "mlp.gate_proj.weight": _rand(inter, hidden), p + "mlp.up_proj.weight": _rand(inter, hidden),
                    p + "mlp.down_proj.weight": _rand(hidden, inter), p + "input_layernorm.weight": _norm(hidden),
                    p + "post_attention_layernorm.weight": _norm(hidden)})
    return out


def write_multilayer_eagle3(folder: Path, layers: int = 2, config_layers: int = 40, seed: int = 21) -> Path:
    """Multi-layer EAGLE-3 whose config lies about num_hidden_layers (SGLang #33966)."""
    sd = multilayer_eagle3_weights(layers, seed)
    write_json(folder, eagle3_config(draft_vocab=sd["lm_head.weight"].shape[0], num_hidden_layers=config_layers,
                                     architectures=["LlamaForCausalLMEagle3"], rope_theta=10000.0))
    write_safetensors(folder, sd)
    return folder


def write_nvidia_eagle3(folder: Path, version: str = "v3", ids=(1, 3, 4), seed: int = 22) -> Path:
    """NVIDIA Eagle3: aux ids under eagle_config (v3 for gpt-oss-120b: boundaries [24, 30, 36], SGLang #32334);
    v3 norm_before_fc with input_norm.weight [3Ht]; v2
    use_aux_hidden_state false and no fc (vLLM #40656, SGLang #32334)."""
    sd = eagle3_weights(draft_vocab=VOCAB, seed=seed)
    del sd["d2t"], sd["t2d"]
    eagle_config = {"eagle_aux_hidden_state_layer_ids": list(ids), "use_aux_hidden_state": version != "v2"}
    extra: dict = {"eagle_config": eagle_config}
    if version == "v2":
        del sd["fc.weight"]
    else:  # NVIDIA writes the flag inside eagle_config (vLLM PR #42143)
        sd["input_norm.weight"] = _norm(sd["fc.weight"].shape[1])
        eagle_config["norm_before_fc"] = True
    write_json(folder, eagle3_config(draft_vocab=VOCAB, architectures=["LlamaForCausalLMEagle3"], rope_theta=10000.0,
                                     **extra))
    write_safetensors(folder, {k: v for k, v in sd.items() if k != "lm_head.weight"} if version == "v2" else sd)
    return folder


MLA_DRAFT = {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": HIDDEN,
             "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32,
             "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "num_hidden_layers": 1,
             "rms_norm_eps": 1e-6, "vocab_size": VOCAB, "draft_vocab_size": VOCAB, "rope_theta": 10000.0,
             "max_position_embeddings": 512, "torch_dtype": "bfloat16"}


def write_mla_eagle3(folder: Path, seed: int = 23) -> Path:
    """Kimi-style MLA EAGLE-3 (`Eagle3DeepseekV2ForCausalLM`, vLLM deepseek_eagle3.py) without an lm_head: MLA
    projections reading the 2H concat, dense MLP, full draft vocabulary (so the target's lm_head serves)."""
    from transformers import DeepseekV3Config

    from eagle_demo.drafts.eagle3_mla import MlaEagle3Layer
    torch.manual_seed(seed)
    cfg = {k: v for k, v in MLA_DRAFT.items() if k not in ("architectures", "model_type", "draft_vocab_size")}
    with torch.device("meta"):
        layer = MlaEagle3Layer(DeepseekV3Config(**cfg))
    sd = {"midlayer." + k: v for k, v in _random_state(layer).items()}
    sd.update({"fc.weight": _rand(HIDDEN, 3 * HIDDEN, scale=0.1), "norm.weight": _norm(HIDDEN)})
    write_json(folder, MLA_DRAFT)
    write_safetensors(folder, sd)
    return folder


def write_speculators_hass(folder: Path, seed: int = 24) -> Path:
    """speculators EagleSpeculator with layernorms true: embedding_layernorm, pre_lm_head_layernorm and the
    layer's own input_layernorm."""
    sd = eagle1_weights(embed=False, seed=seed)
    sd["layers.0.input_layernorm.weight"] = _norm(HIDDEN)
    sd["embedding_layernorm.weight"] = _norm(HIDDEN)
    sd["pre_lm_head_layernorm.weight"] = _norm(HIDDEN)
    write_speculators_eagle1(folder, sd)
    cfg = json.loads((folder / "config.json").read_text())
    write_json(folder, dict(cfg, layernorms=True))
    return folder


# ---- MTP targets ------------------------------------------------------------------------------------------

def _with_extra_tensors(folder: Path, extra: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import load_file
    sd = load_file(str(folder / "model.safetensors"))
    sd.update(extra)
    write_safetensors(folder, sd)


def deepseek_target(folder: Path, layers: int = 3, seed: int = 30):
    """A tiny DeepSeek-V3 (MLA attention, MoE from layer 1) saved with save_pretrained."""
    from transformers import AutoModelForCausalLM, DeepseekV3Config
    torch.manual_seed(seed)
    cfg = DeepseekV3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, moe_intermediate_size=32,
                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                           n_shared_experts=1, num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1,
                           q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                           max_position_embeddings=512, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                           tie_word_embeddings=False, num_nextn_predict_layers=1)
    return _scaled_and_saved(AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32),
                             folder)


def _scaled_and_saved(model, folder: Path):
    """Matrices x3 (a random tiny MoE model otherwise predicts nearly uniformly), saved with save_pretrained."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    model.save_pretrained(folder)
    return model.eval()


def _random_state(module) -> dict[str, torch.Tensor]:
    """Fresh values for every tensor of a module built without init: norms near 1, matrices random, the rest 0."""
    out = {}
    for k, v in module.state_dict().items():
        if k.endswith("norm.weight"):
            out[k] = _norm(v.shape[0])
        elif v.dim() >= 2:
            out[k] = _rand(*v.shape, scale=0.3)
        else:
            out[k] = torch.zeros(v.shape, dtype=v.dtype)
    return out


def glm_target(folder: Path, layers: int = 3, seed: int = 33):
    """A tiny GLM-4.5 (glm4_moe: GQA attention with partial RoPE, MoE from layer 1) saved with save_pretrained."""
    from transformers import AutoModelForCausalLM, Glm4MoeConfig
    torch.manual_seed(seed)
    cfg = Glm4MoeConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=128, moe_intermediate_size=32,
                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                        n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1,
                        n_group=1, topk_group=1, max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
                        pad_token_id=0, tie_word_embeddings=False, num_nextn_predict_layers=1,
                        partial_rotary_factor=0.5)
    return _scaled_and_saved(AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32),
                             folder)


def write_glm_mtp_target(folder: Path) -> Path:
    """GLM-4.5-style target carrying its MTP layer (the DeepSeek-V3 key layout, `model.layers.{L}.*`)."""
    model = glm_target(folder)
    _with_extra_tensors(folder, deepseek_mtp_weights(model, seed=34))
    return folder


def deepseek_mtp_weights(model, seed: int = 31, head: bool = True, embed: bool = True) -> dict[str, torch.Tensor]:
    """The MTP layer of a DeepSeek-V3 checkpoint (`model.layers.{L}.*`, experts stored one by one) from a fresh
    decoder layer of the target's own class."""
    torch.manual_seed(seed)
    cfg = model.config
    index = cfg.num_hidden_layers
    block = type(model.model.layers[-1])(cfg, layer_idx=index)
    p = f"model.layers.{index}."
    out: dict[str, torch.Tensor] = {}
    for k, v in _random_state(block).items():
        if k.endswith("experts.gate_up_proj"):
            inter = v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{p}{k[:-len('gate_up_proj')]}{e}.gate_proj.weight"] = v[e, :inter].clone()
                out[f"{p}{k[:-len('gate_up_proj')]}{e}.up_proj.weight"] = v[e, inter:].clone()
        elif k.endswith("experts.down_proj"):
            for e in range(v.shape[0]):
                out[f"{p}{k[:-len('down_proj')]}{e}.down_proj.weight"] = v[e].clone()
        else:
            out[p + k] = v.clone()
    h = cfg.hidden_size
    out.update({p + "enorm.weight": _norm(h), p + "hnorm.weight": _norm(h), p + "eh_proj.weight": _rand(h, 2 * h),
                p + "shared_head.norm.weight": _norm(h)})
    if head:
        out[p + "shared_head.head.weight"] = model.lm_head.weight.detach().clone()
    if embed:
        out[p + "embed_tokens.weight"] = model.model.embed_tokens.weight.detach().clone()
    return out


def write_deepseek_mtp_target(folder: Path, beside: Path | None = None, **kw) -> Path:
    """DeepSeek-V3 target carrying its MTP layer (or, with `beside`, the MTP weights in their own folder)."""
    model = deepseek_target(folder)
    mtp = deepseek_mtp_weights(model, **kw)
    if beside is None:
        _with_extra_tensors(folder, mtp)
    else:
        write_safetensors(beside, mtp)
    return folder


def write_qwen_mtp_target(folder: Path, seed: int = 32, beside: Path | None = None) -> Path:
    """Qwen3 target with a Qwen3-Next-style `mtp.*` module (fc, pre_fc_norm_embedding/_hidden, layers.0, norm)."""
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer
    model = tiny_target("qwen3", layers=4, seed=seed)
    model.save_pretrained(folder)
    torch.manual_seed(seed + 1)
    block = Qwen3DecoderLayer(model.config, layer_idx=3)
    h = model.config.hidden_size
    mtp = {"mtp.layers.0." + k: v for k, v in _random_state(block).items()}
    mtp.update({"mtp.fc.weight": _rand(h, 2 * h), "mtp.pre_fc_norm_embedding.weight": _norm(h),
                "mtp.pre_fc_norm_hidden.weight": _norm(h), "mtp.norm.weight": _norm(h)})
    if beside is None:
        _with_extra_tensors(folder, mtp)
    else:
        write_safetensors(beside, mtp)
    return folder


MIMO_AUTO_MAP = {"AutoConfig": "configuration_mimo.MiMoConfig", "AutoModel": "modeling_mimo.MiMoModel",
                 "AutoModelForCausalLM": "modeling_mimo.MiMoForCausalLM"}


def mimo_mtp_weights(model, seed: int = 36, nested: bool = False) -> dict[str, torch.Tensor]:
    """MiMo-7B's MTP layer 0 (`model.mtp_layers.0.*`): the Qwen2 block's tensors (q/k/v with bias) stored flat
    under the layer prefix as the MiMo repo stores them (`mtp_block.` in between with nested), plus
    token_layernorm, hidden_layernorm, input_proj and final_layernorm."""
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer
    torch.manual_seed(seed)
    cfg = model.config
    block = Qwen2DecoderLayer(cfg, layer_idx=cfg.num_hidden_layers - 1)
    p = "model.mtp_layers.0."
    state = _random_state(block)
    state.update({k: _rand(*v.shape) for k, v in state.items() if k.endswith(".bias")})  # biases that matter
    h = cfg.hidden_size
    out = {p + ("mtp_block." if nested else "") + k: v for k, v in state.items()}
    out.update({p + "token_layernorm.weight": _norm(h), p + "hidden_layernorm.weight": _norm(h),
                p + "input_proj.weight": _rand(h, 2 * h), p + "final_layernorm.weight": _norm(h)})
    return out


def write_mimo_mtp_target(folder: Path, seed: int = 35, beside: Path | None = None, nested: bool = False,
                          marker: Path | None = None) -> Path:
    """A tiny MiMo-7B: a Qwen2 body saved with its config rewritten the way the MiMo repo ships it (model_type
    "mimo", MiMoForCausalLM, auto_map to its own code, num_nextn_predict_layers 1), plus random MTP weights in
    MiMo's key names (in the target file, or with `beside` in their own folder). The repo's modeling file is
    written too; with `marker`, importing it would create that file (it must never run)."""
    model = tiny_target("qwen2", layers=4, seed=seed)
    model.save_pretrained(folder)
    cfg = json.loads((Path(folder) / "config.json").read_text())
    cfg.update(model_type="mimo", architectures=["MiMoForCausalLM"], auto_map=MIMO_AUTO_MAP,
               num_nextn_predict_layers=1)
    write_json(folder, cfg)
    code = f"open({str(marker)!r}, 'w').write('ran')\n" if marker else "raise RuntimeError('remote code ran')\n"
    for name in ("modeling_mimo.py", "configuration_mimo.py"):
        (Path(folder) / name).write_text(code)
    mtp = mimo_mtp_weights(model, seed=seed + 1, nested=nested)
    if beside is None:
        _with_extra_tensors(folder, mtp)
    else:
        write_safetensors(beside, mtp)
    return Path(folder)
