"""Checkpoint auto-adaptation: every public layout loads, adapts and decodes losslessly; every failure is
one clear CheckpointError. All files are written from random tensors by tests/layouts.py (offline, CPU)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from transformers import DynamicCache, LlamaConfig

from eagle_demo.checkpoints import (
    AdaptationReport,
    CheckpointError,
    IncompatiblePairError,
    LoadedPair,
    NotAnEagleDraftError,
    inspect_pair,
    load_pair,
)
from eagle_demo.checkpoints.files import WeightFiles
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.decoding.events import Finish
from eagle_demo.target import attention
from layouts import (
    VOCAB,
    cast,
    eagle1_weights,
    eagle3_weights,
    llama_config,
    write_angelslim_eagle3,
    write_hass_eagle1,
    write_json,
    write_llama3_eagle1,
    write_medusa,
    write_official_eagle3,
    write_qwen2_eagle1,
    write_raw_eagle1,
    write_safetensors,
    write_sharded,
    write_specforge_eagle3,
    write_speculators_eagle1,
    write_speculators_eagle3,
    write_target,
    write_tokenizer,
    write_vicuna_eagle1,
    write_vllm_eagle1,
)

torch.set_num_threads(1)
PROMPT = [1, 5, 9, 13, 4, 7, 22, 30]
TREE = TreeConfig(depth=3, top_k=2, total_tokens=8)

TARGETS = {  # name -> write_target kwargs
    "llama4": dict(family="llama", layers=4, tokenizer=VOCAB),
    "qwen2_4": dict(family="qwen2", layers=4),
    "tied4": dict(family="tied", layers=4),
    "sharded4": dict(family="llama", layers=4, shard=True),
    "llama8": dict(family="llama", layers=8),
    "qwen3_8": dict(family="qwen3", layers=8),
}


@pytest.fixture(scope="session")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("checkpoints")


@pytest.fixture(scope="session")
def target(root):
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            made[name] = write_target(root / f"target-{name}", **TARGETS[name])
        return made[name]

    return get


def target_embedding(folder: Path) -> torch.Tensor:
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return f.get_tensor("model.embed_tokens.weight")


def greedy_matches(pair: LoadedPair, tree: TreeConfig = TREE) -> None:
    """Greedy EAGLE equals the target's own generate, on the growing path and on the static one (fixed pools
    for the target and the draft: what CUDA graphs replay on a GPU)."""
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=tree)
    ref = pair.target.generate(torch.tensor([PROMPT]), do_sample=False, max_new_tokens=24, eos_token_id=None,
                               pad_token_id=0, attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long))
    for static in (False, True):
        finish = list(SpeculativeEngine(pair.target, pair.head, static=static).generate(PROMPT, run))[-1]
        assert isinstance(finish, Finish)
        assert list(finish.token_ids) == ref[0, len(PROMPT):].tolist(), f"static={static}"


# ---- every layout: load, report, sharing, lossless greedy --------------------------------------------------

def _embed_equal_to_target(folder, target_folder):
    sd = eagle1_weights(embed=False, seed=4)
    sd["embed_tokens.weight"] = target_embedding(target_folder)
    return write_raw_eagle1(folder, sd, fmt="safetensors")


def _vicuna_style_eagle3(folder, _):
    sd = eagle3_weights(draft_vocab=VOCAB, seed=5)
    return write_official_eagle3(folder, sd, num_hidden_layers=40, draft_vocab_size=VOCAB)


def _specforge_with_embed(folder, target_folder):
    sd = eagle3_weights(seed=6)
    sd["embed_tokens.weight"] = target_embedding(target_folder)
    return write_specforge_eagle3(folder, sd, ids=(1, 3, 4))


def _wide_target_eagle3(folder, _):
    """70B-style: draft hidden 48 != target hidden 64, so the draft brings its own embedding."""
    sd = eagle3_weights(hidden=48, target_hidden=64, heads=4, kv=2, head_dim=12, embed=True, seed=7)
    return write_official_eagle3(folder, sd, hidden_size=48, target_hidden_size=64)


def _sharded_draft(folder, _):
    write_json(folder, llama_config())
    write_sharded(folder, eagle1_weights(seed=8), "safetensors")
    return folder


def _sharded_bin_draft(folder, _):
    write_json(folder, llama_config())
    write_sharded(folder, eagle1_weights(seed=9), "bin")
    return folder


LAYOUTS = [
    # id, target, writer(folder, target_folder), family, layout, extra expectations
    ("vicuna", "llama4", lambda f, t: write_vicuna_eagle1(f), "eagle1", "yuhuili-eagle1",
     dict(fc_bias=True, qkv_bias=False, num_kv_heads=4, embedding="own", source_dtype="float32",
          notes=["k/v heads 4 from k_proj rows (config has none)", "rope_theta 10000 (absent in config, EAGLE default)",
                 "own embedding kept (differs from the target's)", "lm_head shared from target (same tensor)"])),
    ("llama3", "llama4", lambda f, t: write_llama3_eagle1(f), "eagle1", "yuhuili-eagle1",
     dict(fc_bias=False, num_kv_heads=2, rope_theta=500000.0, source_dtype="float16",
          notes=["weights cast float16 -> float32", "rope_theta 500000 (draft config)"])),
    ("qwen2", "qwen2_4", lambda f, t: write_qwen2_eagle1(f), "eagle1", "yuhuili-eagle1",
     dict(fc_bias=True, qkv_bias=True, num_kv_heads=4, source_dtype="bfloat16",
          notes=["q/k/v biases found in weights (Qwen2-style), kept", "weights cast bfloat16 -> float32"])),
    ("vllm", "llama4", lambda f, t: write_vllm_eagle1(f, eagle1_weights(seed=3)), "eagle1", "vllm-eagle1",
     dict(fc_bias=True, ignored=["lm_head.weight"],
          notes=["config wrapped {model_type: eagle} -> inner llama config",
                 "lm_head inside the draft ignored; the target's lm_head is shared (same tensor)"])),
    ("no-embed-tied", "tied4", lambda f, t: write_raw_eagle1(f, eagle1_weights(embed=False), fmt="safetensors"),
     "eagle1", "yuhuili-eagle1", dict(embedding="shared", notes=["embedding shared from target"])),
    ("no-embed-sharded-target", "sharded4",
     lambda f, t: write_raw_eagle1(f, eagle1_weights(embed=False, fc_bias=False)), "eagle1", "yuhuili-eagle1",
     dict(embedding="shared", fc_bias=False)),
    ("embed-equal", "llama4", _embed_equal_to_target, "eagle1", "yuhuili-eagle1",
     dict(embedding="shared", notes=["embedding in the draft equals the target's; shared from target"])),
    ("sharded-draft", "llama4", _sharded_draft, "eagle1", "yuhuili-eagle1", dict()),
    ("sharded-bin-draft", "llama4", _sharded_bin_draft, "eagle1", "yuhuili-eagle1", dict()),
    ("speculators-eagle1", "llama4", lambda f, t: write_speculators_eagle1(f, eagle1_weights(embed=False)),
     "eagle1", "speculators-eagle1",
     dict(embedding="shared", notes=["speculators config: layer settings from transformer_layer_config (llama)"])),
    ("eagle3-official", "llama8", lambda f, t: write_official_eagle3(f, eagle3_weights()), "eagle3", "yuhuili-eagle3",
     dict(feature_layers=(2, 4, 5), feature_convention="default [2, L//2, L-3]", draft_vocab=64, rope_theta=10000.0,
          norm_before_residual=False, ignored=["t2d"],
          notes=["rope_theta 10000 (absent in config, EAGLE default)", "weights cast float16 -> float32",
                 "t2d ignored (d2t maps draft ids to target ids)"])),
    ("eagle3-vicuna", "llama8", _vicuna_style_eagle3, "eagle3", "yuhuili-eagle3",
     dict(draft_vocab=VOCAB, notes=["config says num_hidden_layers 40, weights hold 1 layer; following the weights",
                                    "d2t identity (draft vocab == target vocab)"])),
    ("eagle3-specforge", "llama8", _specforge_with_embed, "eagle3", "specforge-eagle3",
     dict(feature_layers=(2, 4, 5), feature_convention="specforge/sglang eagle_config ids +1", embedding="shared",
          notes=["embedding in the draft equals the target's; shared from target"])),
    ("eagle3-angelslim", "qwen3_8", lambda f, t: write_angelslim_eagle3(f, eagle3_weights(head_dim=32)), "eagle3",
     "angelslim-eagle3",
     dict(head_dim=32, num_heads=4, lm_head="own",
          notes=["head_dim 32 from config (heads x head_dim = 128 != hidden 64)",
                 "tie_word_embeddings true in config ignored: the draft lm_head is never tied"])),
    ("eagle3-speculators", "llama8", lambda f, t: write_speculators_eagle3(f, eagle3_weights(), ids=(1, 4, 6)),
     "eagle3", "speculators-eagle3",
     dict(feature_layers=(1, 4, 6), feature_convention="speculators ids as given", norm_before_residual=True,
          notes=["norm_before_residual true (speculators default)"])),
    ("eagle3-own-embed", "llama8", _wide_target_eagle3, "eagle3", "yuhuili-eagle3",
     dict(draft_hidden=48, embedding="own",
          notes=["own embedding kept (draft hidden size differs from the target's)"])),
]


@pytest.fixture(scope="session")
def loaded(root, target):
    cache: dict[str, LoadedPair] = {}

    def get(layout_id: str) -> LoadedPair:
        if layout_id not in cache:
            _, tname, writer, *_ = next(x for x in LAYOUTS if x[0] == layout_id)
            folder = writer(root / f"draft-{layout_id}", target(tname))
            cache[layout_id] = load_pair(str(target(tname)), str(folder), dtype="float32", device="cpu")
        return cache[layout_id]

    return get


@pytest.mark.parametrize("layout_id,tname,writer,family,layout,expect", LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_layout_loads_adapts_and_decodes_losslessly(loaded, layout_id, tname, writer, family, layout, expect):
    pair = loaded(layout_id)
    report = pair.report
    assert report.family == family and report.source_layout == layout
    assert report.problem is None and report.target_path == pair.target_path
    assert pair.target.config._attn_implementation in ("sdpa", attention.NAME) and not pair.target.training
    assert report.draft_hidden == expect.get("draft_hidden", 64)
    for key in ("fc_bias", "qkv_bias", "num_kv_heads", "num_heads", "head_dim", "embedding", "lm_head",
                "feature_layers", "feature_convention", "draft_vocab", "rope_theta", "norm_before_residual",
                "source_dtype"):
        if key in expect:
            assert getattr(report, key) == expect[key], key
    for note in expect.get("notes", []):
        assert note in report.adaptations, (note, report.adaptations)
    for key in expect.get("ignored", []):
        assert key in report.ignored_keys
    head, lm = pair.head, pair.target.get_output_embeddings()
    assert head.family == family and not head.training
    assert all(p.device == lm.weight.device and p.dtype == lm.weight.dtype for p in head.parameters())
    if family == "eagle1":
        assert head.lm_head.module.weight.data_ptr() == lm.weight.data_ptr()
        assert report.lm_head == "target" and report.feature_layers is None
    else:
        assert head.feature_layers == report.feature_layers
        assert isinstance(head.lm_head, torch.nn.Linear)
        assert head.lm_head.weight.data_ptr() not in (lm.weight.data_ptr(),
                                                      pair.target.get_input_embeddings().weight.data_ptr())
    if report.embedding == "shared":
        assert head.embed_tokens is None
        assert head.shared_embed.module is pair.target.get_input_embeddings()
    else:
        assert head.embed_tokens is not None
    assert report.draft_param_bytes > 0
    assert (report.shared_bytes > 0) == (report.embedding == "shared" or report.lm_head == "target")
    greedy_matches(pair)


@pytest.mark.parametrize("layout_id", ["vicuna", "eagle3-official"])
def test_chain_drafting_is_lossless(loaded, layout_id):
    greedy_matches(loaded(layout_id), TreeConfig.chain(3))


def test_report_is_json_and_readable(loaded):
    report = loaded("eagle3-official").report
    data = json.loads(report.to_json())
    assert data["family"] == "eagle3" and data["feature_layers"] == [2, 4, 5] and data["loadable"] is True
    for key in ("source_layout", "target_model_type", "target_layers", "target_hidden", "draft_hidden",
                "target_vocab", "draft_vocab", "feature_convention", "adaptations", "ignored_keys", "warnings",
                "draft_param_bytes", "shared_bytes"):
        assert key in data
    text = report.summary()
    assert "eagle3 (yuhuili-eagle3" in text and "hidden_states [2, 4, 5]" in text
    assert isinstance(report, AdaptationReport)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.family = "x"  # frozen


def test_target_tokenizer_is_loaded_when_present(loaded):
    assert loaded("vicuna").tokenizer is not None and len(loaded("vicuna").tokenizer) == VOCAB
    assert loaded("eagle3-official").tokenizer is None


# ---- converting a draft between layouts gives identical draft outputs --------------------------------------

def _draft_outputs(pair: LoadedPair, seed: int = 0):
    torch.manual_seed(seed)
    head = pair.head
    width = pair.report.target_hidden * (3 if head.family == "eagle3" else 1)
    hidden = torch.randn(5, width)
    tokens = torch.tensor([3, 8, 1, 40, 77])
    positions = torch.arange(5)
    with torch.no_grad():
        g = head(hidden, tokens, positions, DynamicCache(), None, from_target=True)
        values, ids = head.topk(g, 4)
    return g, values, ids


@pytest.mark.parametrize("pair_of", ["eagle1", "eagle3"])
def test_same_weights_in_two_layouts_give_identical_outputs(root, target, pair_of):
    if pair_of == "eagle1":
        sd = eagle1_weights(seed=11)
        a = write_raw_eagle1(root / "conv-raw", sd)
        b = write_vllm_eagle1(root / "conv-vllm", sd)
        tgt = target("llama4")
    else:
        sd = cast(eagle3_weights(seed=12), torch.float16)
        a = write_official_eagle3(root / "conv-official", sd)
        b = write_speculators_eagle3(root / "conv-speculators", sd, ids=(2, 4, 5), norm_before_residual=False)
        tgt = target("llama8")
    pa, pb = (load_pair(str(tgt), str(d), device="cpu") for d in (a, b))
    assert pa.report.source_layout != pb.report.source_layout
    assert pa.report.feature_layers == pb.report.feature_layers
    for x, y in zip(_draft_outputs(pa), _draft_outputs(pb)):
        assert torch.equal(x, y)


@pytest.mark.parametrize("family", ["eagle1", "eagle3"])
def test_our_own_heads_round_trip(root, target, family):
    """A head saved as config.json + its state_dict (how the shipped tiny heads are saved) loads back unchanged."""
    from transformers import AutoModelForCausalLM

    from eagle_demo.target.cpu_layout import column_major_linears
    from fixtures import random_eagle1, random_eagle3

    tgt_folder = target("llama8")
    model = AutoModelForCausalLM.from_pretrained(str(tgt_folder)).eval()
    head = random_eagle1(model) if family == "eagle1" else random_eagle3(model, draft_vocab=64)
    folder = root / f"roundtrip-{family}"
    head.config.save_pretrained(folder)
    write_safetensors(folder, head.state_dict())
    pair = load_pair(str(tgt_folder), str(folder), device="cpu")
    assert pair.report.family == family and pair.report.ignored_keys == ()
    loaded = pair.head.state_dict()
    assert all(torch.equal(v, loaded[k]) for k, v in head.state_dict().items())  # the same values
    for module in (model, head):  # in the loader's CPU layout (`cpu_layout`): matrix kernels round by layout
        column_major_linears(module)
    ours = LoadedPair(target=model, tokenizer=None, head=head, report=pair.report, target_path="", draft_path=None)
    for x, y in zip(_draft_outputs(ours), _draft_outputs(pair)):
        assert torch.equal(x, y)


def test_d2t_rebuilt_from_t2d_when_absent(root, target):
    sd = eagle3_weights(seed=13)
    expected = sd.pop("d2t")
    folder = write_official_eagle3(root / "t2d-only", sd)
    pair = load_pair(str(target("llama8")), str(folder), device="cpu")
    assert torch.equal(pair.head.d2t, expected)
    assert "d2t rebuilt from t2d (64 draft ids)" in pair.report.adaptations


def test_bfloat16_target_casts_the_draft(root, target):
    pair = load_pair(str(target("llama4")), str(write_vicuna_eagle1(root / "bf16-draft")), dtype="bfloat16",
                     device="cpu")
    assert all(p.dtype == torch.bfloat16 for p in pair.head.parameters())
    assert pair.head.rotary_emb.inv_freq.dtype == torch.float32
    assert "weights cast float32 -> bfloat16" in pair.report.adaptations


def test_no_draft_loads_target_only(target):
    pair = load_pair(str(target("llama4")), None, device="cpu")
    assert pair.head is None and pair.draft_path is None and pair.report.family == "none"
    assert pair.tokenizer is not None


def test_progress_is_reported(root, target):
    seen = []
    load_pair(str(target("llama4")), str(write_vicuna_eagle1(root / "progress")), device="cpu",
              progress=lambda msg, frac: seen.append((msg, frac)))
    assert seen[0][1] == 0.0 and seen[-1] == ("ready", 1.0)
    assert all(0.0 <= f <= 1.0 for _, f in seen)


# ---- detection details --------------------------------------------------------------------------------------

def test_fc_bias_follows_the_weights_not_the_config(root, target):
    cfg = llama_config(bias=False)
    folder = write_raw_eagle1(root / "bias-lies", eagle1_weights(fc_bias=True), cfg)
    report = inspect_pair(str(target("llama4")), str(folder))
    assert report.fc_bias is True
    assert "fc bias found in weights, kept (config says bias=false)" in report.adaptations


def test_max_positions_raised_to_the_target_context(root, target):
    folder = write_raw_eagle1(root / "short-ctx", eagle1_weights(), llama_config(max_position_embeddings=256))
    pair = load_pair(str(target("llama4")), str(folder), device="cpu")
    assert "max_position_embeddings raised 256 -> 512 (target context)" in pair.report.adaptations
    assert pair.head.config.max_position_embeddings == 512


def test_transformers5_rope_parameters_are_read(root, target):
    cfg = llama_config(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 50000.0})
    folder = write_raw_eagle1(root / "rope-v5", eagle1_weights(), cfg)
    pair = load_pair(str(target("llama4")), str(folder), device="cpu")
    assert pair.report.rope_theta == 50000.0 and pair.report.rope_type == "linear"
    assert pair.head.rotary_emb.rope_type == "linear"


def test_safetensors_preferred_over_bin(root, target):
    folder = write_raw_eagle1(root / "both-formats", eagle1_weights(), fmt="safetensors")
    (folder / "pytorch_model.bin").write_bytes(b"this would not load")
    assert load_pair(str(target("llama4")), str(folder), device="cpu").head is not None


def test_inspect_reads_headers_only(root, target, monkeypatch):
    folder = write_official_eagle3(root / "inspect-only", eagle3_weights())

    def boom(self, names=None):
        raise AssertionError("inspect_pair materialized weights")

    monkeypatch.setattr(WeightFiles, "load", boom)
    report = inspect_pair(str(target("llama8")), str(folder))
    assert report.family == "eagle3" and report.loadable and report.ignored_keys == ("t2d",)


@pytest.mark.parametrize("layers,rule,ids,expected,convention", [
    (8, "specforge", [1, 3, 4], (2, 4, 5), "specforge/sglang eagle_config ids +1"),
    (12, "specforge", [1, 5, 8], (2, 6, 9), "specforge/sglang eagle_config ids +1"),
    (12, "speculators", [2, 6, 9], (2, 6, 9), "speculators ids as given"),
    (12, "speculators", [1, 3, 4], (1, 3, 4), "speculators ids as given"),
    (8, "default", None, (2, 4, 5), "default [2, L//2, L-3]"),
    (12, "default", None, (2, 6, 9), "default [2, L//2, L-3]"),
])
def test_feature_conventions(root, layers, rule, ids, expected, convention):
    tgt = root / f"cfg-target-{layers}"
    if not tgt.exists():
        LlamaConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
                    intermediate_size=128).save_pretrained(tgt)
    folder = root / f"conv-{rule}-{layers}-{ids}"
    sd = eagle3_weights(seed=14)
    if rule == "specforge":
        write_specforge_eagle3(folder, sd, ids=ids)
    elif rule == "speculators":
        write_speculators_eagle3(folder, sd, ids=ids)
    else:
        write_official_eagle3(folder, sd)
    report = inspect_pair(str(tgt), str(folder))
    assert report.feature_layers == expected and report.feature_convention == convention


def test_specforge_id_of_last_layer_is_the_last_layers_output(root, target):
    """Id L - 1 (output of the last layer) is hidden_states[L], read before the final norm (target/features.py, as
    vLLM and SGLang capture it; tests/test_target.py checks the features), so nothing to warn about."""
    folder = write_specforge_eagle3(root / "last-layer-id", eagle3_weights(), ids=(1, 3, 7))
    report = inspect_pair(str(target("llama8")), str(folder))
    assert report.feature_layers == (2, 4, 8)
    assert not any("final norm" in w for w in report.warnings)


# ---- failures: one clear line each ---------------------------------------------------------------------------

def _raises(target_folder, draft_folder, match, exc=CheckpointError):
    with pytest.raises(exc, match=match) as info:
        load_pair(str(target_folder), str(draft_folder), device="cpu")
    assert "\n" not in str(info.value)
    return info.value


def test_hidden_size_mismatch(root, target):
    folder = write_raw_eagle1(root / "h48", eagle1_weights(hidden=48, heads=4, kv=4),
                              llama_config(hidden=48))
    _raises(target("llama4"), folder, r"draft hidden size 48 \(fc input 96\) does not match the target hidden size 64",
            IncompatiblePairError)


def test_vocab_mismatch_from_embedding(root, target):
    folder = write_raw_eagle1(root / "v100", eagle1_weights(vocab=100), llama_config(vocab=100))
    _raises(target("llama4"), folder, "draft embed_tokens has 100 rows but the target vocab size is 96",
            IncompatiblePairError)


def test_vocab_mismatch_from_config(root, target):
    folder = write_raw_eagle1(root / "cv100", eagle1_weights(embed=False), llama_config(vocab=100))
    _raises(target("llama4"), folder, "draft config vocab_size 100 does not match the target vocab size 96")


def test_tokenizer_mismatch(root, target):
    folder = write_vicuna_eagle1(root / "tok90")
    write_tokenizer(folder, 90)
    _raises(target("llama4"), folder, "tokenizer mismatch: the draft's tokenizer has 90 tokens, the target's 96",
            IncompatiblePairError)


def test_eagle3_made_for_another_target(root, target):
    folder = write_official_eagle3(root / "e3-ht48", eagle3_weights(target_hidden=48))
    err = _raises(target("llama8"), folder, r"fuses 3 target features of width 48 \(fc input 144\) but the target "
                  "hidden size is 64; this draft was made for another target", IncompatiblePairError)
    report = inspect_pair(str(target("llama8")), str(folder))
    assert report.problem == str(err) and not report.loadable


def test_eagle3_feature_layer_out_of_range(root, target):
    folder = write_speculators_eagle3(root / "e3-deep", eagle3_weights(), ids=(2, 20, 37))
    _raises(target("llama8"), folder, "asks for target feature layer 20 but the target has only 8 layers")


def test_eagle3_other_hidden_without_embedding(root, target):
    sd = eagle3_weights(hidden=48, target_hidden=64, head_dim=12, embed=False)
    folder = write_official_eagle3(root / "e3-noembed", sd, hidden_size=48)
    _raises(target("llama8"), folder, "draft hidden size 48 differs from the target hidden size 64 and the draft "
            "ships no embed_tokens.weight")


def test_eagle3_small_vocab_without_mapping(root, target):
    sd = eagle3_weights()
    del sd["d2t"], sd["t2d"]
    folder = write_official_eagle3(root / "e3-nomap", sd)
    _raises(target("llama8"), folder, "draft vocab 64 is smaller than the target vocab 96 but the checkpoint has no "
            "d2t/t2d mapping")


def test_missing_required_key_is_named(root, target):
    sd = eagle1_weights()
    del sd["layers.0.mlp.up_proj.weight"]
    folder = write_raw_eagle1(root / "no-up", sd)
    _raises(target("llama4"), folder, "missing required weight layers.0.mlp.up_proj.weight; the checkpoint is "
            "incomplete")


def test_truncated_safetensors(root, target):
    folder = write_raw_eagle1(root / "trunc-st", eagle1_weights(), fmt="safetensors")
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-500])
    _raises(target("llama4"), folder, "model.safetensors in .* is not a readable safetensors file .*truncated")


def test_corrupted_safetensors_header(root, target):
    folder = write_raw_eagle1(root / "garbage-st", eagle1_weights(), fmt="safetensors")
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)
    _raises(target("llama4"), folder, "is not a readable safetensors file")


def test_truncated_bin(root, target):
    folder = write_vicuna_eagle1(root / "trunc-bin")
    path = folder / "pytorch_model.bin"
    path.write_bytes(path.read_bytes()[:1000])
    _raises(target("llama4"), folder, "pytorch_model.bin in .* is not a readable PyTorch weight file")


def test_bin_that_is_not_a_zip(root, target):
    folder = write_vicuna_eagle1(root / "garbage-bin")
    (folder / "pytorch_model.bin").write_bytes(b"not a zip archive at all")
    _raises(target("llama4"), folder, "is not a readable PyTorch weight file")


def test_index_pointing_at_missing_shard(root, target):
    folder = _sharded_draft(root / "lost-shard", None)
    (folder / "model-00002-of-00002.safetensors").unlink()
    _raises(target("llama4"), folder, "model.safetensors.index.json in .* names shard model-00002-of-00002."
            "safetensors, which is missing")


def test_index_escaping_the_folder_is_refused(root, target):
    folder = root / "escape-index"
    write_json(folder, llama_config())
    write_json(folder, {"weight_map": {"fc.weight": "../target-llama4/model.safetensors"}},
               "model.safetensors.index.json")
    _raises(target("llama4"), folder, "refusing file name '../target-llama4/model.safetensors'")


def test_no_weight_files(root, target):
    folder = root / "config-only"
    write_json(folder, llama_config())
    _raises(target("llama4"), folder, "has no weight files")


def test_nan_in_draft_weights(root, target):
    sd = eagle1_weights()
    sd["layers.0.mlp.down_proj.weight"][0, 0] = float("nan")
    folder = write_raw_eagle1(root / "nan", sd)
    _raises(target("llama4"), folder, "draft weight layers.0.mlp.down_proj.weight in .* contains NaN/inf values")


def test_invalid_draft_config_json(root, target):
    folder = write_vicuna_eagle1(root / "bad-json")
    (folder / "config.json").write_text('{"hidden_size": 64,,}')
    _raises(target("llama4"), folder, r"config.json in .* is not valid JSON \(line 1")


def test_invalid_target_config_json(root, target):
    folder = root / "bad-json-target"
    write_json(folder, {})
    (folder / "config.json").write_text("{oops")
    _raises(folder, write_vicuna_eagle1(root / "ok-draft"), "config.json in .* is not valid JSON")


def test_target_config_field_of_the_wrong_type(root):
    folder = root / "typed-target"
    write_target(folder, "llama", layers=2)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["hidden_size"] = "sixty-four"
    (folder / "config.json").write_text(json.dumps(cfg))
    _raises(folder, write_vicuna_eagle1(root / "ok-draft-typed"), "target config.json in .* has a field of the wrong "
            "type .*hidden_size.*correct that field in config.json")


def test_target_that_is_not_a_causal_lm(root):
    folder = root / "t5-target"
    write_json(folder, {"model_type": "t5", "is_encoder_decoder": True, "d_model": 64})
    _raises(folder, write_vicuna_eagle1(root / "ok-draft2"), "is a 't5' model, not a decoder-only causal LM")


def test_target_that_is_a_draft(root):
    draft = write_vicuna_eagle1(root / "swapped")
    _raises(draft, draft, "looks like an EAGLE draft .* pass it as the draft")


def test_corrupted_target_weights(root, target):
    folder = root / "broken-target"
    write_target(folder, "llama", layers=2)
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-2000])
    _raises(folder, write_vicuna_eagle1(root / "ok-draft3"), "model.safetensors in .*broken-target is not a readable "
            "safetensors file")


def test_target_config_disagreeing_with_its_weights(root):
    folder = root / "resized-target"
    write_target(folder, "llama", layers=2)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["intermediate_size"] = 96
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="target .*(could not be loaded|wrong shape)"):
        load_pair(str(folder), None, device="cpu")


def test_medusa_is_recognized_and_refused(root, target):
    folder = write_medusa(root / "medusa")
    _raises(target("llama4"), folder, r"is a Medusa head \(2 heads\), not an EAGLE draft; pick an EAGLE-1/2 or "
            "EAGLE-3 draft for this target", NotAnEagleDraftError)
    report = inspect_pair(str(target("llama4")), str(folder))
    assert report.family == "medusa" and "Medusa" in report.problem


def test_causal_lm_draft_is_recognized_and_refused(root, target):
    folder = write_target(root / "small-lm", "llama", layers=2)
    _raises(target("llama4"), folder, r"is a full causal LM \(llama, 2 layers\), not an EAGLE draft",
            NotAnEagleDraftError)
    assert inspect_pair(str(target("llama4")), str(folder)).family == "causal_lm"


def test_unknown_checkpoint(root, target):
    folder = root / "unknown"
    write_json(folder, {"model_type": "whatever"})
    write_safetensors(folder, {"foo.weight": torch.zeros(3, 3)})
    _raises(target("llama4"), folder, "is an unrecognized checkpoint", NotAnEagleDraftError)
    assert inspect_pair(str(target("llama4")), str(folder)).family == "unknown"


def test_hass_norms_are_reported_and_loaded(root, target):
    """Issue 23: HASS drafts were refused; they now load (norm placement in tests/test_new_layouts.py)."""
    folder = write_hass_eagle1(root / "hass")
    report = inspect_pair(str(target("llama4")), str(folder))
    assert report.source_layout == "hass-eagle1" and report.loadable
    assert any("extra norms found" in a for a in report.adaptations)
    greedy_matches(load_pair(str(target("llama4")), str(folder), device="cpu"))


def test_multi_layer_eagle3_loads(root, target):
    """Issue 23: multi-layer EAGLE-3 drafts were refused; they now load with every layer."""
    sd = eagle3_weights()
    for name in [k for k in sd if k.startswith("midlayer.")]:
        sd["layers.1." + name[len("midlayer."):]] = sd[name][..., :64].clone() if "self_attn.q_proj" in name or \
            "self_attn.k_proj" in name or "self_attn.v_proj" in name else sd[name].clone()
    sd["layers.1.input_layernorm.weight"] = sd["midlayer.input_layernorm.weight"].clone()
    del sd["layers.1.hidden_norm.weight"]
    folder = write_speculators_eagle3(root / "two-layers", sd)
    pair = load_pair(str(target("llama8")), str(folder), device="cpu")
    assert pair.report.draft_layers == 2 and len(pair.head.layers) == 1
    greedy_matches(pair)


def test_bin_loading_is_weights_only(root, target):
    marker = root / "pwned-marker"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    folder = root / "evil"
    write_json(folder, llama_config())
    torch.save({"fc.weight": torch.zeros(64, 128), "x": Payload()}, folder / "pytorch_model.bin")
    _raises(target("llama4"), folder, r"holds pickled objects besides tensors and was refused \(only weights-only "
            r"loading is allowed\)")
    with pytest.raises(CheckpointError):
        inspect_pair(str(target("llama4")), str(folder))
    assert not marker.exists()


def test_bad_dtype_is_a_checkpoint_error(root, target):
    with pytest.raises(CheckpointError, match="float16 is not supported for generation on CPU"):
        load_pair(str(target("llama4")), None, dtype="float16", device="cpu")


def test_missing_local_folder(root):
    with pytest.raises(CheckpointError, match="no such folder: ./does-not-exist"):
        load_pair("./does-not-exist", None)


@pytest.mark.slow
def test_a_run_past_the_drafts_own_context_gets_a_note(tmp_path):
    """The adapter raises a draft's max positions to the target's so it keeps running; a run that goes past
    what the draft was configured for gets a one-line note (CLI, API, page), not a refusal."""
    import subprocess
    import sys

    from eagle_demo.common.config import RunConfig
    from eagle_demo.session import load_session
    from layouts import eagle1_weights, llama_config, write_raw_eagle1, write_target

    tgt = write_target(tmp_path / "target", layers=2)  # 512 positions
    draft = write_raw_eagle1(tmp_path / "draft", eagle1_weights(), llama_config(max_position_embeddings=128))
    s = load_session(str(tgt), str(draft), device="cpu", dtype="float32")
    assert (s.report.draft_context, s.report.max_position_embeddings) == (128, 512)
    assert s.context_note(100, RunConfig(max_new_tokens=28)) == ""
    note = s.context_note(100, RunConfig(max_new_tokens=64))
    assert "position 164" in note and "128 positions" in note and "\n" not in note
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "generate", "--target", str(tgt), "--draft",
                           str(draft), "--prompt-ids", ",".join(["5"] * 100), "--max-new-tokens", "40",
                           "--ignore-eos"], capture_output=True, text=True, timeout=300,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert proc.returncode == 0 and "[note] this run can reach position 140" in proc.stderr
