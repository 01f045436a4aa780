"""`inspect` on real-shaped copies of the newer public pairs (configs from the model repos, tensors header-only)."""

from __future__ import annotations

import json

import pytest
from transformers import AutoConfig

from eagle_demo.checkpoints import inspect_pair
from real_shapes import (
    DEEPSEEK_V3_REDUCED,
    EAGLE3_LLAMA31_8B,
    LLAMA31_8B,
    MIMO_7B,
    QWEN3_8B,
    eagle3_shapes,
    mimo_shapes,
    model_shapes,
    write_header_only,
)


def _target(folder, config: dict, mtp: bool = False):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    write_header_only(folder, model_shapes(AutoConfig.from_pretrained(folder), mtp_layer=mtp))
    return folder


def _draft(folder, config: dict, shapes: dict):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return write_header_only(folder, shapes)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("real-shapes")


def test_llama31_8b_with_eagle31(root):
    target = _target(root / "llama31-8b", LLAMA31_8B)
    config = dict(EAGLE3_LLAMA31_8B, architectures=["LlamaForCausalLMEagle3"], norm_output=True,
                  eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 15, 28], "use_aux_hidden_state": True})
    draft = _draft(root / "eagle31", config, eagle3_shapes(4096, 4096, 128256, 32000, 32, 8, 128, 14336,
                                                           fc_norm=True))
    report = inspect_pair(str(target), str(draft))
    assert report.loadable, report.problem
    assert (report.family, report.source_layout, report.draft_vocab) == ("eagle3", "specforge-eagle3", 32000)
    assert report.feature_layers == (2, 16, 29) and report.target_layers == 32
    assert "EAGLE-3.1 fc_norm: 3 per-feature RMSNorms before fc" in report.adaptations
    assert "norm_output true (draft config; EAGLE-3.1: the normed state is fed back)" in report.adaptations
    assert "max_position_embeddings raised 2048 -> 131072 (target context)" in report.adaptations


def test_qwen3_8b_with_two_layer_eagle3(root):
    target = _target(root / "qwen3-8b", QWEN3_8B)
    config = dict(EAGLE3_LLAMA31_8B, vocab_size=151936, intermediate_size=12288, head_dim=128,
                  rope_theta=1000000.0, architectures=["LlamaForCausalLMEagle3"])  # still says 1 layer
    draft = _draft(root / "eagle3-2l", config, eagle3_shapes(4096, 4096, 151936, 32000, 32, 8, 128, 12288, layers=2))
    report = inspect_pair(str(target), str(draft))
    assert report.loadable, report.problem
    assert report.draft_layers == 2 and report.head_dim == 128 and report.feature_layers == (2, 18, 33)
    assert "config says num_hidden_layers 1, weights hold 2 layers; following the weights" in report.adaptations
    assert "multi-layer EAGLE-3: 2 decoder layers (layer 0 reads the 2H concat, later layers H)" in report.adaptations


def test_deepseek_v3_mtp_at_reduced_width(root):
    target = _target(root / "deepseek-v3-reduced", DEEPSEEK_V3_REDUCED, mtp=True)
    report = inspect_pair(str(target), str(target))
    assert report.loadable, report.problem
    assert (report.family, report.source_layout, report.draft_hidden) == ("mtp", "deepseek-mtp", 512)
    assert "DeepSeek-V3-style MTP layer 61 found under 'model.layers.61.' (deepseek-mtp); run as an EAGLE-style " \
           "draft over the target's post-norm last hidden state" in report.adaptations
    assert any("DeepseekV3DecoderLayer (layer index 61)" in a for a in report.adaptations)
    assert 0 < report.draft_param_bytes < 2e9 and report.lm_head == "own" and all(
        not k.startswith("model.layers.61.") for k in report.ignored_keys)


def test_mimo_7b_mtp(root):
    target = root / "mimo-7b"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(MIMO_7B))
    write_header_only(target, mimo_shapes(MIMO_7B))
    report = inspect_pair(str(target), str(target))
    assert report.loadable, report.problem
    assert (report.family, report.source_layout, report.target_model_type) == ("mtp", "mimo-mtp", "mimo")
    assert (report.target_layers, report.target_hidden, report.target_vocab, report.draft_hidden) == (36, 4096, 151680,
                                                                                                       4096)
    assert any(a.startswith("target 'mimo' (MiMoForCausalLM) loaded as transformers Qwen2ForCausalLM")
               for a in report.adaptations)
    assert "decoder block built as Qwen2DecoderLayer (layer index 36), norms Qwen2RMSNorm, RoPE " \
           "Qwen2RotaryEmbedding" in report.adaptations
    assert report.lm_head == "target" and report.ignored_keys == ()
    # the MTP layer alone (5 norms, q/k/v biases), in bf16: the target's body is not counted
    h, kv, inter = 4096, 8 * 128, 11008
    params = h * h + h + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h * h + 5 * h  # q, k, v, o, mlp, proj, norms
    assert report.draft_param_bytes == 2 * params
