"""The layouts published in 2025-2026: EAGLE-3.1, multi-layer EAGLE-3, NVIDIA Eagle3 variants, HASS and MTP
heads. Each loads from files written by tests/layouts.py, reports its adaptations, and decodes exactly like
plain greedy decoding (fp32, tree and chain)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle_demo.checkpoints import LoadedPair, UnsupportedLayoutError, inspect_pair, load_pair
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.decoding.events import Finish
from layouts import (
    VOCAB,
    deepseek_target,
    eagle3_weights,
    write_deepseek_mtp_target,
    write_eagle31,
    write_glm_mtp_target,
    write_hass_eagle1,
    write_mimo_mtp_target,
    write_mla_eagle3,
    write_multilayer_eagle3,
    write_nvidia_eagle3,
    write_qwen_mtp_target,
    write_speculators_hass,
    write_target,
)

torch.set_num_threads(1)
PROMPT = [1, 5, 9, 13, 4, 7, 22, 30]
TREES = {"tree": TreeConfig(depth=3, top_k=2, total_tokens=8), "chain": TreeConfig.chain(3)}


def greedy_equal(pair: LoadedPair, tree: TreeConfig) -> None:
    """On the growing path and the static one (fixed target and draft pools, as CUDA graphs replay them)."""
    run = RunConfig(max_new_tokens=20, ignore_eos=True, tree=tree)
    ref = pair.target.generate(torch.tensor([PROMPT]), do_sample=False, max_new_tokens=20, eos_token_id=None,
                               pad_token_id=0, attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long))
    for static in (False, True):
        finish = list(SpeculativeEngine(pair.target, pair.head, static=static).generate(PROMPT, run))[-1]
        assert isinstance(finish, Finish)
        assert list(finish.token_ids) == ref[0, len(PROMPT):].tolist(), f"static={static}"


def _mtp_beside(style):
    def write(folder: Path, root: Path) -> tuple[Path, Path]:
        writer = {"deepseek": write_deepseek_mtp_target, "qwen": write_qwen_mtp_target,
                  "mimo": write_mimo_mtp_target}[style]
        target = writer(root / f"mtp-target-{style}-beside", beside=folder)
        return target, folder
    return write


def _in_target(writer):
    def write(folder: Path, root: Path) -> tuple[Path, Path]:
        target = writer(folder)
        return target, target  # the draft is the target folder itself
    return write


def _on_deepseek(writer):
    def write(folder: Path, root: Path) -> tuple[Path, Path]:
        target = root / "deepseek6"
        if not target.exists():
            deepseek_target(target, layers=6)
        return target, writer(folder)
    return write


def _on_llama8(writer):
    def write(folder: Path, root: Path) -> tuple[Path, Path]:
        target = root / "llama8"
        if not target.exists():
            write_target(target, "llama", layers=8)
        return target, writer(folder)
    return write


NEW = [  # id, writer(folder, root) -> (target, draft), family, layout, notes that must appear
    ("eagle31", _on_llama8(lambda f: write_eagle31(f, eagle3_weights(seed=40))), "eagle3", "specforge-eagle3",
     ["EAGLE-3.1 fc_norm: 3 per-feature RMSNorms before fc",
      "norm_output true (draft config; EAGLE-3.1: the normed state is fed back)"]),
    ("eagle31-no-norm-output", _on_llama8(lambda f: write_eagle31(f, eagle3_weights(seed=41), norm_output=False)),
     "eagle3", "specforge-eagle3", ["norm_output false (draft config)"]),
    ("multilayer", _on_llama8(lambda f: write_multilayer_eagle3(f, layers=2)), "eagle3", "specforge-eagle3",
     ["multi-layer EAGLE-3: 2 decoder layers (layer 0 reads the 2H concat, later layers H)",
      "config says num_hidden_layers 40, weights hold 2 layers; following the weights"]),
    ("multilayer3", _on_llama8(lambda f: write_multilayer_eagle3(f, layers=3, config_layers=1)), "eagle3",
     "specforge-eagle3", ["config says num_hidden_layers 1, weights hold 3 layers; following the weights"]),
    ("nvidia-v3", _on_llama8(lambda f: write_nvidia_eagle3(f, "v3")), "eagle3", "nvidia-eagle3",
     ["norm_before_fc: input_norm over the concatenated features before fc (NVIDIA Eagle3)"]),
    ("nvidia-v2", _on_llama8(lambda f: write_nvidia_eagle3(f, "v2")), "eagle3", "nvidia-eagle3",
     ["use_aux_hidden_state false: the target's post-norm last hidden state goes in unfused (fc not used)",
      "lm_head shared from target (draft has none; full vocabulary)"]),
    ("mla-eagle3", _on_deepseek(write_mla_eagle3), "eagle3", "mla-eagle3",
     ["MLA attention in the draft layer (kv_lora_rank 16, q_lora_rank 32, rope 8, nope 8, v 16); dense MLP",
      "lm_head shared from target (draft has none; full vocabulary)"]),
    ("hass", _on_llama8(write_hass_eagle1), "eagle1", "hass-eagle1",
     ["HASS norm embed_layernorm applied on the embedding before fc",
      "HASS norm hidden_layernorm applied on the feature before fc",
      "HASS norm lm_head_layernorm applied before the lm_head only"]),
    ("speculators-hass", _on_llama8(write_speculators_hass), "eagle1", "speculators-eagle1",
     ["layers.0.input_layernorm kept (HASS drafts keep layer 0's input norm)"]),
    ("deepseek-mtp", _in_target(write_deepseek_mtp_target), "mtp", "deepseek-mtp",
     ["embedding in the MTP layer equals the target's; shared from target", "shared_head.head kept (own lm_head)"]),
    ("deepseek-mtp-beside", _mtp_beside("deepseek"), "mtp", "deepseek-mtp", []),
    ("deepseek-mtp-headless", _in_target(lambda f: write_deepseek_mtp_target(f, head=False, embed=False)), "mtp",
     "deepseek-mtp", ["lm_head shared from target (the MTP layer has none)", "embedding shared from target"]),
    ("glm-mtp", _in_target(write_glm_mtp_target), "mtp", "deepseek-mtp",
     ["decoder block built as Glm4MoeDecoderLayer (layer index 3), norms Glm4MoeRMSNorm, RoPE Glm4MoeRotaryEmbedding"]),
    ("qwen-mtp", _in_target(write_qwen_mtp_target), "mtp", "qwen3next-mtp",
     ["decoder block built as Qwen3DecoderLayer (layer index 4), norms Qwen3RMSNorm, RoPE Qwen3RotaryEmbedding"]),
    ("qwen-mtp-beside", _mtp_beside("qwen"), "mtp", "qwen3next-mtp", []),
    ("mimo-mtp", _in_target(write_mimo_mtp_target), "mtp", "mimo-mtp",
     ["target 'mimo' (MiMoForCausalLM) loaded as transformers Qwen2ForCausalLM (its body is Qwen2); its "
      "model.mtp_layers.* are the MTP draft, not part of the target",
      "MiMo-style MTP layer 0 found under 'model.mtp_layers.0.' (mimo-mtp); run as an EAGLE-style draft over the "
      "target's post-norm last hidden state",
      "decoder block built as Qwen2DecoderLayer (layer index 4), norms Qwen2RMSNorm, RoPE Qwen2RotaryEmbedding",
      "lm_head shared from target (the MTP layer has none)", "embedding shared from target"]),
    ("mimo-mtp-beside", _mtp_beside("mimo"), "mtp", "mimo-mtp", []),
    ("mimo-mtp-nested", _in_target(lambda f: write_mimo_mtp_target(f, nested=True)), "mtp", "mimo-mtp", []),
]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("new-layouts")
    made: dict[str, LoadedPair] = {}

    def get(layout_id: str) -> LoadedPair:
        if layout_id not in made:
            _, writer, *_ = next(x for x in NEW if x[0] == layout_id)
            target, draft = writer(root / layout_id, root)
            made[layout_id] = load_pair(str(target), str(draft), dtype="float32", device="cpu")
        return made[layout_id]

    return get


@pytest.mark.parametrize("layout_id,writer,family,layout,notes", NEW, ids=[x[0] for x in NEW])
def test_new_layout_loads_and_reports(pairs, layout_id, writer, family, layout, notes):
    pair = pairs(layout_id)
    report = pair.report
    assert (report.family, report.source_layout, report.problem) == (family, layout, None)
    for note in notes:
        assert note in report.adaptations, (note, report.adaptations)
    assert pair.head.family == family and not pair.head.training
    assert all(p.dtype == torch.float32 for p in pair.head.parameters())
    assert report.draft_param_bytes > 0


@pytest.mark.parametrize("shape", ["tree", "chain"])
@pytest.mark.parametrize("layout_id", [x[0] for x in NEW])
def test_new_layout_greedy_equals_plain_decoding(pairs, layout_id, shape):
    greedy_equal(pairs(layout_id), TREES[shape])


def test_variants_change_the_draft(pairs):
    """The variant pieces are in the forward: dropping them changes what the draft proposes."""
    head = pairs("eagle31").head
    hidden, tokens = torch.randn(4, 3 * 64), torch.tensor([3, 8, 1, 40])
    from transformers import DynamicCache
    with torch.no_grad():
        a = head(hidden, tokens, torch.arange(4), DynamicCache(), None, from_target=True)
        saved = head.fc_norm
        head.fc_norm = None
        b = head(hidden, tokens, torch.arange(4), DynamicCache(), None, from_target=True)
        head.fc_norm = saved
    assert not torch.allclose(a, b)
    assert len(pairs("multilayer3").head.layers) == 2
    assert pairs("nvidia-v2").head.feature_layers is None and pairs("nvidia-v2").report.feature_layers is None


def test_mtp_head_uses_the_target_family_block(pairs):
    head = pairs("deepseek-mtp").head
    assert type(head.block).__name__ == "DeepseekV3DecoderLayer" and type(head.block.mlp).__name__ == "DeepseekV3MoE"
    assert head.embed_tokens is None and isinstance(head.lm_head, torch.nn.Linear)
    headless = pairs("deepseek-mtp-headless").head
    assert headless.lm_head.module is pairs("deepseek-mtp-headless").target.get_output_embeddings()


def test_multi_layer_mla_eagle3_is_refused_in_one_line(tmp_path):
    from safetensors.torch import load_file

    from layouts import write_safetensors
    target = write_target(tmp_path / "t", "llama", layers=8)
    draft = write_mla_eagle3(tmp_path / "mla")
    sd = load_file(str(draft / "model.safetensors"))
    sd.update({"layers.1." + k[len("midlayer."):]: v.clone() for k, v in sd.items() if k.startswith("midlayer.")})
    write_safetensors(draft, sd)
    with pytest.raises(UnsupportedLayoutError, match="only single-layer MLA drafts") as info:
        load_pair(str(target), str(draft), device="cpu")
    assert "\n" not in str(info.value)
    assert inspect_pair(str(target), str(draft)).problem == str(info.value)


def test_linear_attention_target_refuses_mtp(tmp_path):
    from transformers import Qwen3NextConfig

    from layouts import write_safetensors
    target = tmp_path / "qwen3next"
    cfg = Qwen3NextConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                          num_key_value_heads=2, intermediate_size=128)
    cfg.save_pretrained(target)
    h = 64
    write_safetensors(target, {"mtp.fc.weight": torch.zeros(h, 2 * h), "mtp.pre_fc_norm_hidden.weight": torch.ones(h),
                               "mtp.pre_fc_norm_embedding.weight": torch.ones(h), "mtp.norm.weight": torch.ones(h)})
    report = inspect_pair(str(target), str(target))
    assert report.family == "mtp" and "linear_attention layers whose recurrent state cannot be rolled back" in \
        report.problem and "\n" not in report.problem
