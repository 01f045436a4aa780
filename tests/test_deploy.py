"""Export to vLLM / SGLang: command lines per layout and adapted copies that load back."""

import json

import pytest
import torch

from eagle_demo.checkpoints import inspect_pair, load_pair
from eagle_demo.commands.cli import main
from eagle_demo.common.config import TreeConfig
from eagle_demo.deploy import deployment_commands, plan_for, write_adapted_copy
from layouts import (
    eagle1_weights,
    eagle3_weights,
    write_angelslim_eagle3,
    write_llama3_eagle1,
    write_official_eagle3,
    write_qwen2_eagle1,
    write_specforge_eagle3,
    write_target,
    write_vicuna_eagle1,
    write_vllm_eagle1,
)

TREE = TreeConfig(depth=5, top_k=8, total_tokens=48)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy")
    return {"llama": write_target(root / "t4"), "deep": write_target(root / "t8", layers=8),
            "qwen2": write_target(root / "tq", family="qwen2")}


def test_vllm_eagle1_command_and_bias_note(targets, tmp_path):
    draft = write_vicuna_eagle1(tmp_path / "d")
    report = inspect_pair(str(targets["llama"]), str(draft))
    plan = plan_for("vllm", "my/target", "my/draft", report, TREE)
    spec = json.loads(plan.command.split("--speculative-config ")[1].strip("'"))
    assert plan.command.startswith("vllm serve my/target")
    assert spec == {"method": "eagle", "model": "my/draft", "num_speculative_tokens": 5}
    # vLLM drops fc.bias (no bias in its EAGLE-1 fc): it loads, and a copy that folds the bias is recommended
    assert any("fc.bias" in n for n in plan.recommended) and not plan.needs_copy and plan.fold_fc_bias


def test_sglang_eagle1_without_bias_gets_zero_bias_copy(targets, tmp_path):
    draft = write_llama3_eagle1(tmp_path / "d")
    report = inspect_pair(str(targets["llama"]), str(draft))
    plan = plan_for("sglang", "t", "d", report, TREE)
    assert plan.add_zero_fc_bias and plan.config_changes["architectures"] == ["LlamaForCausalLMEagle"]
    assert "--speculative-algorithm EAGLE " in plan.command and "--speculative-num-steps 5" in plan.command
    assert "--speculative-eagle-topk 8 --speculative-num-draft-tokens 48" in plan.command
    out = write_adapted_copy(plan, report, tmp_path / "out")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle"]
    assert "fc.bias" in (out / "README.md").read_text()
    # the copy still loads here and gives the same greedy output (a zero bias changes nothing)
    a = load_pair(str(targets["llama"]), str(draft), dtype="float32", device="cpu")
    b = load_pair(str(targets["llama"]), str(out), dtype="float32", device="cpu")
    x = torch.randn(3, 64)
    ids = torch.tensor([1, 2, 3])
    pos = torch.arange(3)
    from transformers import DynamicCache
    with torch.no_grad():
        torch.testing.assert_close(a.head(x, ids, pos, DynamicCache(), None, from_target=True)[-1],
                                   b.head(x, ids, pos, DynamicCache(), None, from_target=True)[-1])


def test_sglang_qwen2_arch_and_bf16(targets, tmp_path):
    draft = write_qwen2_eagle1(tmp_path / "d")
    report = inspect_pair(str(targets["qwen2"]), str(draft))
    plan = plan_for("sglang", "Qwen/Qwen2-7B-Instruct", "yuhuili/EAGLE-Qwen2-7B-Instruct", report, TREE)
    assert plan.config_changes["architectures"] == ["Qwen2ForCausalLMEagle"] and "--dtype bfloat16" in plan.command
    vplan = plan_for("vllm", "t", "d", report, TREE)
    assert any("q/k/v" in n for n in vplan.notes)


def test_vllm_converted_layout_unwrapped_for_sglang(targets, tmp_path):
    draft = write_vllm_eagle1(tmp_path / "d", eagle1_weights())
    report = inspect_pair(str(targets["llama"]), str(draft))
    plan = plan_for("sglang", "t", "d", report, TREE)
    assert plan.unwrap_config
    out = write_adapted_copy(plan, report, tmp_path / "out")
    cfg = json.loads((out / "config.json").read_text())
    assert "model" not in cfg and cfg["architectures"] == ["LlamaForCausalLMEagle"]


def test_eagle3_official_for_both_engines(targets, tmp_path):
    draft = write_official_eagle3(tmp_path / "d", eagle3_weights())
    report = inspect_pair(str(targets["deep"]), str(draft))
    v = plan_for("vllm", "t", "d", report, TREE)
    assert '"method": "eagle3"' in v.command
    s = plan_for("sglang", "t", "d", report, TREE)
    assert "--speculative-algorithm EAGLE3" in s.command
    assert s.config_changes["architectures"] == ["LlamaForCausalLMEagle3"]


def test_specforge_eagle3_needs_nothing_for_sglang(targets, tmp_path):
    draft = write_specforge_eagle3(tmp_path / "d", eagle3_weights())
    report = inspect_pair(str(targets["deep"]), str(draft))
    s = plan_for("sglang", "t", "d", report, TREE)
    assert not s.needs_copy and "<ADAPTED" not in s.command


def test_angelslim_untied_for_sglang(targets, tmp_path):
    draft = write_angelslim_eagle3(tmp_path / "d", eagle3_weights())
    report = inspect_pair(str(targets["deep"]), str(draft))
    s = plan_for("sglang", "t", "d", report, TREE)
    assert s.config_changes.get("tie_word_embeddings") is False


def test_chain_tree_maps_to_topk_1(targets, tmp_path):
    draft = write_official_eagle3(tmp_path / "d", eagle3_weights())
    report = inspect_pair(str(targets["deep"]), str(draft))
    s = plan_for("sglang", "t", "d", report, TreeConfig.chain(4))
    assert "--speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5" in s.command
    cmds = deployment_commands("t", "d", report, TreeConfig.chain(4))
    assert set(cmds) == {"vllm", "sglang", "notes"}


def test_export_cli_writes_copy(targets, tmp_path, capsys):
    draft = write_llama3_eagle1(tmp_path / "d")
    code = main(["export", "--target", str(targets["llama"]), "--draft", str(draft), "--engine", "sglang",
                 "--out", str(tmp_path / "copy")])
    out = capsys.readouterr().out
    assert code == 0 and "adapted draft written" in out and str(tmp_path / "copy") in out.splitlines()[-1]
    assert (tmp_path / "copy" / "model.safetensors").is_file()


def test_export_never_writes_into_the_draft_or_over_files(targets, tmp_path, capsys):
    draft = write_llama3_eagle1(tmp_path / "d")
    before = {p.name: p.read_bytes() for p in draft.iterdir()}
    base = ["export", "--target", str(targets["llama"]), "--draft", str(draft), "--engine", "sglang", "--out"]
    assert main([*base, str(draft)]) == 2
    assert "is the draft's own folder" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in draft.iterdir()} == before  # untouched
    used = tmp_path / "used"
    used.mkdir()
    (used / "model.safetensors").write_bytes(b"old")
    assert main([*base, str(used)]) == 2
    assert "is not an empty folder" in capsys.readouterr().err and (used / "model.safetensors").read_bytes() == b"old"


def test_playground_only_settings_are_named_in_the_commands(targets, tmp_path):
    draft = write_llama3_eagle1(tmp_path / "d")
    report = inspect_pair(str(targets["llama"]), str(draft))
    for engine in ("vllm", "sglang"):
        notes = plan_for(engine, "t", "d", report, TreeConfig.chain(6, 0.01, 512)).notes
        assert any("chain stop (p=0.01) and the hot vocabulary (512 ids)" in n and "all 6 tokens" in n for n in notes)
        assert not any("chain stop" in n for n in plan_for(engine, "t", "d", report, TreeConfig.chain(6)).notes)


def test_ngram_commands_carry_vllm_and_sglang_keys_and_name_what_neither_has():
    """The n-gram draft served without a head: vLLM 0.32's ngram keys (vllm/config/speculative.py) and SGLang's
    NGRAM flags (server_args.py), from our min_n/max_n/tokens; our additions named as not in either engine."""
    import shlex

    from eagle_demo.common.config import NgramConfig
    from eagle_demo.deploy.ngram import ngram_commands
    from eagle_demo.serving.harness import speculative_config_of

    out = ngram_commands("my org/target", NgramConfig(min_n=2, max_n=4, tokens=6))
    spec = {"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert out.spec == spec and speculative_config_of(out.vllm) == spec
    assert shlex.split(out.vllm)[:3] == ["vllm", "serve", "my org/target"]
    words = shlex.split(out.sglang)
    flags = dict(zip(words[3::2], words[4::2]))
    assert words[:3] == ["python", "-m", "sglang.launch_server"] and flags == {
        "--model-path": "my org/target", "--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": "13",
        "--speculative-ngram-min-match-window-size": "2", "--speculative-ngram-max-match-window-size": "4",
        "--speculative-ngram-min-bfs-breadth": "1", "--speculative-ngram-max-bfs-breadth": "2"}
    text = out.markdown()
    for own in ("2 branches", "repeat", "by count", "weak matches capped at 2"):
        assert own in text
    assert "Not in either engine" in text and "CUDA only" in text and "--ngram-transformers" in text
    plain = ngram_commands("t", NgramConfig.transformers(3, 5))  # vLLM's own rule: nothing of ours is on
    assert not any("Not in either engine" in n for n in plain.notes)
    assert plain.spec["prompt_lookup_min"] == 1 and "--speculative-num-draft-tokens 6" in plain.sglang


def test_export_ngram_prints_the_engine_command_without_a_head(capsys):
    code = main(["export", "--engine", "vllm", "--ngram", "--ngram-max", "3", "--ngram-tokens", "5",
                 "--ngram-transformers"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0 and out[0] == "# vllm: the n-gram draft (no head)" and out[-1].startswith("vllm serve ")
    assert '"num_speculative_tokens": 5, "prompt_lookup_max": 3, "prompt_lookup_min": 1' in out[-1]
    assert not any("Not in either engine" in line for line in out)
    assert main(["export", "--engine", "sglang", "--ngram", "--draft", "x"]) == 0
    captured = capsys.readouterr()
    assert "--speculative-algorithm NGRAM" in captured.out.splitlines()[-1] and "--draft" in captured.err
    assert main(["export", "--engine", "vllm", "--ngram", "--ngram-min", "3", "--ngram-max", "2"]) == 2
    assert "n-gram min 3 is above n-gram max 2" in capsys.readouterr().err


def test_deploy_tab_gives_the_ngram_commands_with_and_without_a_head():
    """The Deploy tab's "N-gram draft, no head" section: for the loaded target, also when no draft is loaded (the
    EAGLE commands then stay empty), at the settings the page's race runs (NgramConfig's defaults, or those chosen in
    the Playground's "N-gram draft settings"; a bad one is named in one line)."""
    from eagle_demo.app.deploy_tab import deploy
    from eagle_demo.app.registry import REGISTRY, PairKey
    from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET

    try:
        for draft in (None, SHIPPED_EAGLE1):
            key = PairKey(SHIPPED_TARGET, draft, dtype="float32", device="cpu")
            REGISTRY.load(key)
            out = deploy(key, "chain", 4, 1, 5, 4)
            assert '"method": "ngram", "num_speculative_tokens": 10, "prompt_lookup_max": 2' in out.ngram_vllm
            assert "--speculative-algorithm NGRAM" in out.ngram_sglang and "Not in either engine" in out.ngram_notes
            assert bool(out.vllm) == bool(draft) and ("no draft head" in out.message) == (draft is None)
        chosen = deploy(key, "chain", 4, 1, 5, 4, 0.0, 0, 2, 4, 6, 3, True)  # the page's n-gram settings
        assert '"num_speculative_tokens": 6, "prompt_lookup_max": 4, "prompt_lookup_min": 2' in chosen.ngram_vllm
        assert "--speculative-ngram-max-bfs-breadth 1" in chosen.ngram_sglang  # transformers' rule: one branch
        assert "Settings: n-gram 2..4, up to 6 tokens." in chosen.ngram_notes and "Not in either" not in \
            chosen.ngram_notes and chosen.vllm  # the EAGLE commands are unaffected
        bad = deploy(key, "chain", 4, 1, 5, 4, 0.0, 0, 1, 2, 40, 2, False)
        assert bad.ngram_notes == "Cannot build the n-gram commands: n-gram tokens 40 is out of range; use 1 to 32"
        assert bad.vllm and not bad.ngram_vllm
    finally:
        REGISTRY.clear()
