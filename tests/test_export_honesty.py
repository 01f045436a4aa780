"""Export honesty: 'loads as published' is kept apart from 'an adapted copy is required / recommended
because ...', and the new families (EAGLE-3.1, multi-layer, NVIDIA, MTP) export."""

from __future__ import annotations

import json

import pytest

from eagle_demo.checkpoints import inspect_pair
from eagle_demo.commands.cli import main
from eagle_demo.common.config import TreeConfig
from eagle_demo.deploy import deployment_commands, plan_for, write_adapted_copy
from layouts import (
    eagle3_weights,
    write_eagle31,
    write_mimo_mtp_target,
    write_multilayer_eagle3,
    write_nvidia_eagle3,
    write_official_eagle3,
    write_qwen_mtp_target,
    write_specforge_eagle3,
    write_target,
)
from real_shapes import EAGLE3_LLAMA31_8B, LLAMA31_8B, eagle3_shapes, model_shapes, write_header_only

TREE = TreeConfig.chain(3)


@pytest.fixture(scope="module")
def llama8(tmp_path_factory):
    return write_target(tmp_path_factory.mktemp("exp") / "t8", layers=8)


def test_yuhuili_eagle3_llama31_loads_as_published_in_vllm(tmp_path):
    from transformers import AutoConfig
    target = tmp_path / "llama31"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(LLAMA31_8B))
    write_header_only(target, model_shapes(AutoConfig.from_pretrained(target)))
    draft = tmp_path / "yuhuili"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(EAGLE3_LLAMA31_8B))
    write_header_only(draft, {k.replace("layers.0.", "midlayer."): v for k, v in
                              eagle3_shapes(4096, 4096, 128256, 32000, 32, 8, 128, 14336).items()})
    report = inspect_pair(str(target), str(draft))
    v = plan_for("vllm", "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", report, TREE)
    assert v.loads_as_published and not v.needs_copy
    assert json.loads(v.command.split("--speculative-config ")[1].strip("'"))["model"] == \
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert v.recommended and "before PR #49343" in v.recommended[0]
    s = plan_for("sglang", "t", "d", report, TREE)
    assert not s.loads_as_published and any("architectures" in r for r in s.required)
    notes = deployment_commands("t", "d", report, TREE)["notes"]
    assert "**vllm** loads this draft as published; an adapted copy is recommended because" in notes
    assert "**sglang** cannot load this draft as published" in notes


def test_cli_says_loads_as_published(llama8, tmp_path, capsys):
    draft = write_official_eagle3(tmp_path / "d", eagle3_weights())
    assert main(["export", "--target", str(llama8), "--draft", str(draft), "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "# vllm loads this draft as published" in out and "cannot load" not in out


@pytest.mark.parametrize("writer,vllm_copy", [
    (lambda f: write_eagle31(f, eagle3_weights(seed=50)), True),  # no "fc_norm": true: vLLM 0.32 fails (docs/vllm.md)
    (lambda f: write_nvidia_eagle3(f, "v3"), True),  # eagle_config ids: vLLM 0.32 reads them one layer early
    (lambda f: write_nvidia_eagle3(f, "v2"), False),
])
def test_eagle3_variants_export(llama8, tmp_path, writer, vllm_copy):
    report = inspect_pair(str(llama8), str(writer(tmp_path / "d")))
    v = plan_for("vllm", "t", "d", report, TREE)
    assert '"method": "eagle3"' in v.command and v.loads_as_published is not vllm_copy
    s = plan_for("sglang", "t", "d", report, TREE)
    assert "--speculative-algorithm EAGLE3" in s.command and s.loads_as_published


def test_multilayer_config_that_lies_needs_a_copy(llama8, tmp_path):
    report = inspect_pair(str(llama8), str(write_multilayer_eagle3(tmp_path / "d", layers=2, config_layers=40)))
    for engine in ("vllm", "sglang"):
        plan = plan_for(engine, "t", "d", report, TREE)
        assert plan.needs_copy and plan.config_changes["num_hidden_layers"] == 2
        assert any("num_hidden_layers 40 -> 2" in r for r in plan.required)


def test_mtp_exports_for_both_engines(tmp_path):
    target = write_qwen_mtp_target(tmp_path / "qwen-mtp")
    report = inspect_pair(str(target), str(target))
    v = plan_for("vllm", "Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct", report, TREE)
    spec = json.loads(v.command.split("--speculative-config ")[1].strip("'"))
    assert spec["method"] == "mtp" and spec["num_speculative_tokens"] == 3 and v.loads_as_published
    s = plan_for("sglang", "Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct", report, TREE)
    assert "--speculative-algorithm EAGLE --speculative-draft-model-path Qwen/Qwen3-Next-80B-A3B-Instruct" in s.command
    assert s.loads_as_published


def test_mimo_mtp_exports_for_both_engines(tmp_path):
    target = write_mimo_mtp_target(tmp_path / "mimo")
    report = inspect_pair(str(target), str(target))
    repo = "XiaomiMiMo/MiMo-7B-RL"
    v = plan_for("vllm", repo, repo, report, TREE)
    spec = json.loads(v.command.split("--speculative-config ")[1].strip("'"))
    assert spec == {"method": "mtp", "num_speculative_tokens": 3} and v.loads_as_published
    assert v.command.startswith(f"vllm serve {repo} ")
    s = plan_for("sglang", repo, repo, report, TREE)
    assert f"--model-path {repo} --speculative-algorithm EAGLE --speculative-draft-model-path {repo}" in s.command
    assert s.loads_as_published
    assert any("MiMo: the engine builds its MiMo MTP draft" in n for n in v.notes + s.notes)
    beside = tmp_path / "mimo-mtp-only"
    write_mimo_mtp_target(tmp_path / "mimo2", beside=beside)
    apart = inspect_pair(str(tmp_path / "mimo2"), str(beside))
    v2 = plan_for("vllm", "t", str(beside), apart, TREE)
    assert json.loads(v2.command.split("--speculative-config ")[1].strip("'"))["model"] == str(beside)
    assert any("needs the target's config.json" in n for n in v2.notes)


def _modelopt_keys_only(folder):
    """SpecForge-shaped (fc, no input_norm, use_aux_hidden_state true) but with ModelOpt's eagle_config keys."""
    write_specforge_eagle3(folder, eagle3_weights(seed=51), ids=(1, 3, 4))
    cfg = json.loads((folder / "config.json").read_text())
    cfg["eagle_config"] |= {"use_input_layernorm_in_first_layer": True, "use_last_layernorm": True}
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("writer,layout", [
    (lambda f: write_nvidia_eagle3(f, "v3", ids=(1, 3, 4)), "nvidia-eagle3"),  # output-of-layer ids, input_norm
    (lambda f: write_nvidia_eagle3(f, "v3", ids=(2, 4, 8)), "nvidia-eagle3"),  # boundary ids
    (lambda f: write_nvidia_eagle3(f, "v2"), "nvidia-eagle3"),  # use_aux_hidden_state false, no fc
    (_modelopt_keys_only, "nvidia-eagle3"),
    (lambda f: write_specforge_eagle3(f, eagle3_weights(seed=52)), "specforge-eagle3"),
    (lambda f: write_eagle31(f, eagle3_weights(seed=53)), "specforge-eagle3"),
])
def test_nvidia_modelopt_drafts_are_named_as_such(llama8, tmp_path, capsys, writer, layout):
    """inspect, the page's report and the export's README name NVIDIA ModelOpt EAGLE-3 drafts `nvidia-eagle3`;
    SpecForge ones stay `specforge-eagle3`. Only the label: both load through the same readers."""
    draft = writer(tmp_path / "d")
    report = inspect_pair(str(llama8), str(draft))
    assert report.source_layout == layout and report.problem is None
    assert f"(`{layout}` layout)" in report.to_markdown()  # the page's adaptation report
    assert main(["inspect", "--target", str(llama8), "--draft", str(draft)]) == 0
    assert f"({layout} layout)" in capsys.readouterr().out
    copy = write_adapted_copy(plan_for("sglang", "t", str(draft), report, TREE), report, tmp_path / "copy")
    assert f"({layout})." in (copy / "README.md").read_text()
