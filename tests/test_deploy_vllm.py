"""The vLLM export's EAGLE-1 corrections without vLLM itself (tests/test_vllm.py runs them in vLLM): the fold of
fc.bias into the embedding is exact, the official EAGLE-1 config's `"bias": true` makes the copy required, the copy
drafts exactly what the published head drafts here; the Deploy tab's install hint and batch table."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import DynamicCache

from eagle_demo.checkpoints import inspect_pair, load_pair
from eagle_demo.checkpoints.fc_fold import fold_fc_bias
from eagle_demo.common.config import TreeConfig
from eagle_demo.deploy import plan_for, write_adapted_copy
from layouts import eagle1_weights, llama_config, write_llama3_eagle1, write_raw_eagle1, write_target

K = TreeConfig.chain(5)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("vllm-deploy") / "t")



def assert_same_head(target, draft, out) -> None:
    """The copy's head computes what the published one does (the fold is exact up to float32 rounding)."""
    a = load_pair(str(target), str(draft), dtype="float32", device="cpu")
    b = load_pair(str(target), str(out), dtype="float32", device="cpu")
    x, ids, pos = torch.randn(3, 64), torch.tensor([1, 2, 3]), torch.arange(3)
    with torch.no_grad():
        torch.testing.assert_close(b.head(x, ids, pos, DynamicCache(), None, from_target=True),
                                   a.head(x, ids, pos, DynamicCache(), None, from_target=True), rtol=1e-3, atol=1e-3)

def test_the_fold_is_exact_and_refuses_a_singular_fc():
    sd = eagle1_weights(seed=3)
    folded = fold_fc_bias(sd).tensors
    assert "fc.bias" not in folded and folded["embed_tokens.weight"].dtype == torch.float32
    h, ids = torch.randn(5, 64), torch.tensor([0, 7, 9, 50, 95])
    before = torch.nn.functional.linear(torch.cat([sd["embed_tokens.weight"][ids], h], -1), sd["fc.weight"],
                                        sd["fc.bias"])
    after = torch.nn.functional.linear(torch.cat([folded["embed_tokens.weight"][ids], h], -1), folded["fc.weight"])
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)
    sd["fc.weight"][:, :64] = 0.0  # the embedding block cannot carry the bias
    with pytest.raises(ValueError, match="near-singular"):
        fold_fc_bias(sd)


def test_official_eagle1_needs_the_copy_and_the_copy_drafts_the_same(target, tmp_path):
    draft = write_raw_eagle1(tmp_path / "d", eagle1_weights(seed=4), llama_config(bias=True))
    report = inspect_pair(str(target), str(draft))
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.needs_copy and plan.config_changes == {"bias": False} and plan.fold_fc_bias
    assert "uninitialized" in plan.required[0] and "fc.bias" in plan.recommended[0]
    assert "<ADAPTED_DRAFT_DIR>" in plan.command
    out = write_adapted_copy(plan, report, tmp_path / "copy")
    assert json.loads((out / "config.json").read_text())["bias"] is False
    again = inspect_pair(str(target), str(out))
    assert not again.fc_bias and not plan_for("vllm", "t", str(out), again, K).changes  # loads as published
    assert_same_head(target, draft, out)


def test_eagle1_without_bias_loads_as_published(target, tmp_path):
    draft = write_llama3_eagle1(tmp_path / "d")  # "bias": false, no fc.bias
    report = inspect_pair(str(target), str(draft))
    plan = plan_for("vllm", "t", "d", report, K)
    assert not plan.changes and '"model": "d"' in plan.command


def test_the_deploy_tab_says_how_to_install_vllm(monkeypatch, tmp_path):
    from eagle_demo.app.vllm_panel import run_in_vllm, run_ngram_in_vllm, vllm_status
    from eagle_demo.serving.runtime import INSTALL_HINT

    monkeypatch.setenv("EAGLE_DEMO_VLLM_VENV", str(tmp_path / "none"))
    assert vllm_status(None) == INSTALL_HINT and "\n" not in INSTALL_HINT
    assert "peer_vllm.py --install" in INSTALL_HINT
    assert run_in_vllm(None, "x", False, 8, "chain", 4, 1, 8, 4).summary.startswith("Load a pair")
    assert run_ngram_in_vllm(None, "x", False, 8, 1, 2, 10, 2, False).summary.startswith("Load a target")


def test_the_batch_table_is_labelled_as_this_cpu(tmp_path):
    from eagle_demo.serving.results import batch_table, load_measurement, save_measurement

    row = {"batch": {"1": {"plain_tps": 50.0, "eagle_tps": 150.0, "ratio": 3.0, "acceptance_length": 4.4},
                     "16": {"plain_tps": 400.0, "eagle_tps": 300.0, "ratio": 0.75, "acceptance_length": 4.2}}}
    save_measurement(str(tmp_path / "t"), str(tmp_path / "d"), row, {"vllm": "0.32.0", "threads": 1, "k": 5,
                                                                    "max_new_tokens": 64})
    table = batch_table(load_measurement(str(tmp_path / "t"), str(tmp_path / "d")))
    assert "on this CPU" in table and "not a GPU prediction" in table
    assert "| 1 | 50 | 150 | 3.00x | 4.40 |" in table and "| 16 | 400 | 300 | 0.75x | 4.20 |" in table
    assert load_measurement(str(tmp_path / "t"), str(tmp_path / "other")) is None


def test_vllm_converted_eagle1_needs_an_unprefixed_copy(target, tmp_path):
    """vLLM 0.32 adds `model.` to an EAGLE-1 draft's names itself: its own V0-converted layout fails to load
    ("There is no module or parameter named 'model'", scripts/vllm_layouts.py); the copy is the plain layout."""
    from layouts import write_vllm_eagle1

    draft = write_vllm_eagle1(tmp_path / "d", eagle1_weights(seed=5))
    report = inspect_pair(str(target), str(draft))
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.needs_copy and plan.unwrap_config and plan.strip_model_prefix and plan.fold_fc_bias
    out = write_adapted_copy(plan, report, tmp_path / "copy")
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert not any(n.startswith("model.") for n in names) and "fc.bias" not in names
    assert "model" not in json.loads((out / "config.json").read_text())
    again = inspect_pair(str(target), str(out))
    assert again.family == "eagle1" and not plan_for("vllm", "t", str(out), again, K).changes
    assert_same_head(target, draft, out)


def test_speculators_eagle1_is_not_read_by_vllm_032(target, tmp_path):
    """vLLM 0.32 registers speculators readers for eagle3 and peagle only: the export says so, folds nothing."""
    from layouts import write_speculators_eagle1

    draft = write_speculators_eagle1(tmp_path / "d", eagle1_weights(kv=4, seed=6))
    report = inspect_pair(str(target), str(draft))
    plan = plan_for("vllm", "t", "d", report, K)
    assert not plan.fold_fc_bias and any("EAGLE-3 only" in n for n in plan.notes)


def test_eagle31_without_the_fc_norm_flag_needs_a_copy_for_vllm(tmp_path):
    """vLLM 0.32 builds fc_norm only when the config says `"fc_norm": true`; a draft with fc_norm.* weights and no
    flag failed to load there (scripts/vllm_layouts.py)."""
    from layouts import eagle3_weights, write_eagle31

    target = write_target(tmp_path / "t", layers=6)  # ids (1, 3, 4) read + 1: hidden_states 5 exists
    draft = write_eagle31(tmp_path / "d", eagle3_weights(seed=7))
    report = inspect_pair(str(target), str(draft))
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.needs_copy and plan.config_changes == {"fc_norm": True, "eagle_aux_hidden_state_layer_ids": [2, 4, 5]}
    out = write_adapted_copy(plan, report, tmp_path / "copy")
    assert json.loads((out / "config.json").read_text())["fc_norm"] is True
    assert not plan_for("vllm", "t", str(out), inspect_pair(str(target), str(out)), K).changes


def test_specforge_nested_ids_need_a_copy_with_the_ids_vllm_reads(tmp_path):
    """SpecForge/SGLang `eagle_config` ids are output-of-layer ids (hidden_states[id + 1], read so here); vLLM 0.32
    reads them as hidden_states[id] (gpu_model_runner.py `_get_eagle3_aux_layers_from_config`, docs/vllm.md). The copy
    adds top-level ids + 1, which vLLM reads first and as given, and reads the same features here."""
    from layouts import eagle3_weights, write_specforge_eagle3

    target = write_target(tmp_path / "t", layers=6)
    draft = write_specforge_eagle3(tmp_path / "d", eagle3_weights(seed=8), ids=(1, 3, 4))
    report = inspect_pair(str(target), str(draft))
    assert report.feature_layers == (2, 4, 5)
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.needs_copy and "<ADAPTED_DRAFT_DIR>" in plan.command
    assert plan.config_changes == {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}
    assert "hidden_states[id]" in plan.required[0]
    out = write_adapted_copy(plan, report, tmp_path / "copy")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]  # vLLM sizes fc from it
    again = inspect_pair(str(target), str(out))
    assert again.feature_layers == (2, 4, 5) and not plan_for("vllm", "t", str(out), again, K).changes
    assert not plan_for("sglang", "t", "d", report, K).needs_copy  # SGLang reads them +1 itself


def _nvidia(tmp_path, ids, edit=None, **kw):
    """An NVIDIA Eagle3 draft (tests/layouts.py) for a 6-layer target, its config edited by `edit(cfg, tensors)`."""
    from safetensors.torch import load_file, save_file

    from layouts import write_nvidia_eagle3

    target = write_target(tmp_path / "t", layers=6)
    draft = write_nvidia_eagle3(tmp_path / "d", ids=ids, **kw)
    if edit:
        cfg, sd = json.loads((draft / "config.json").read_text()), load_file(str(draft / "model.safetensors"))
        edit(cfg, sd)
        (draft / "config.json").write_text(json.dumps(cfg))
        save_file(sd, str(draft / "model.safetensors"))
    return target, draft, inspect_pair(str(target), str(draft))


def _copy_reads_the_same(target, report, plan, tmp_path) -> dict:
    """The copy's config; it loads here as the published draft does and needs no further copy."""
    out = write_adapted_copy(plan, report, tmp_path / "copy")
    again = inspect_pair(str(target), str(out))
    assert again.feature_layers == report.feature_layers and not plan_for("vllm", "t", str(out), again, K).changes
    return json.loads((out / "config.json").read_text())


def test_nvidia_v3_boundary_ids_load_as_published(tmp_path):
    """NVIDIA v3 names hidden-state boundaries under eagle_config (gpt-oss-120b-Eagle3-v3: [24, 30, 36] of 36 blocks,
    SGLang #32334), read as given here when the first id is not 1 (SGLang #25454), as vLLM 0.32 reads them."""
    target, draft, report = _nvidia(tmp_path, ids=(2, 4, 6))
    assert report.feature_layers == (2, 4, 6) and "boundaries" in report.feature_convention  # 6 = L, before the norm
    plan = plan_for("vllm", "t", "d", report, K)
    assert not plan.changes and not plan.notes
    pair = load_pair(str(target), str(draft), dtype="float32", device="cpu")
    assert pair.head.input_norm is not None and pair.head.feature_layers == (2, 4, 6)


def test_nvidia_v3_output_of_layer_ids_get_top_level_ids_and_keep_the_norm(tmp_path):
    target, draft, report = _nvidia(tmp_path, ids=(1, 3, 4))
    assert report.feature_layers == (2, 4, 5)
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.config_changes == {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}  # the norm flag is read as it is
    nested = _copy_reads_the_same(target, report, plan, tmp_path)["eagle_config"]
    assert nested["norm_before_fc"] is True and nested["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]


def test_input_norm_without_the_flag_needs_it_for_vllm(tmp_path):
    """vLLM 0.32 drops input_norm.* unless norm_before_fc is set (llama_eagle3.py's load_weights)."""
    target, draft, report = _nvidia(tmp_path, ids=(2, 4, 5),
                                    edit=lambda cfg, sd: cfg["eagle_config"].pop("norm_before_fc"))
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.needs_copy and plan.config_changes == {"norm_before_fc": True}
    assert "drops the weight" in plan.required[0]
    assert _copy_reads_the_same(target, report, plan, tmp_path)["norm_before_fc"] is True


def test_the_flag_without_input_norm_is_turned_off_for_vllm(tmp_path):
    """vLLM 0.32 builds the norm from the flag with weight 1; none is applied here: the copy says false where vLLM
    reads it (eagle_config first)."""
    target, draft, report = _nvidia(tmp_path, ids=(2, 4, 5), edit=lambda cfg, sd: sd.pop("input_norm.weight"))
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.needs_copy and plan.config_changes["eagle_config"]["norm_before_fc"] is False
    assert set(plan.config_changes) == {"eagle_config"} and "weight 1" in plan.required[0]
    nested = _copy_reads_the_same(target, report, plan, tmp_path)["eagle_config"]
    assert nested["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5] and nested["use_aux_hidden_state"] is True


def test_no_fc_without_the_flag_tells_vllm_not_to_fuse(tmp_path):
    """A draft with no fc.weight runs unfused here; vLLM 0.32 fuses unless eagle_config's use_aux_hidden_state is
    false."""
    def edit(cfg, sd):
        del sd["fc.weight"], sd["input_norm.weight"]
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}

    target, draft, report = _nvidia(tmp_path, ids=(2, 4, 5), edit=edit)
    assert report.feature_layers is None
    plan = plan_for("vllm", "t", "d", report, K)
    assert plan.config_changes == {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 5],
                                                    "use_aux_hidden_state": False}}
    _copy_reads_the_same(target, report, plan, tmp_path)


def test_nvidia_v2_and_v3_without_ids_load_as_published(tmp_path):
    """v2 (use_aux_hidden_state false): vLLM skips fc as this playground does. No ids: both take (2, L//2, L-3)."""
    _, _, v2 = _nvidia(tmp_path / "v2", ids=(1, 3, 4), version="v2")
    assert v2.feature_layers is None and not plan_for("vllm", "t", "d", v2, K).changes
    _, _, v3 = _nvidia(tmp_path / "v3", ids=(1, 3, 4), edit=lambda cfg, sd: cfg["eagle_config"].pop(
        "eagle_aux_hidden_state_layer_ids"))
    assert v3.feature_layers == (2, 3, 3) and not plan_for("vllm", "t", "d", v3, K).changes
