"""The export's note for an EAGLE-3 draft whose config names no aux layer ids (yuhuili's official layout,
nvidia/Llama-3.3-70B-Instruct-Eagle3): both engines guess the layers (vLLM 0.32 and SGLang 0.5.23:
(2, L//2, L-3), eagle_demo/deploy/aux_layers.py); the note names the guess, the layers read here and whether they agree,
and where they do not (the probe measured other layers) the copy carries the layers read here."""

from __future__ import annotations

import dataclasses
import json

import pytest

from eagle_demo.checkpoints import inspect_pair
from eagle_demo.common.config import TreeConfig
from eagle_demo.deploy import deployment_commands, plan_for, write_adapted_copy
from layouts import eagle3_weights, write_official_eagle3, write_target
from real_shapes import EAGLE3_LLAMA31_8B, LLAMA31_8B, eagle3_shapes, model_shapes, write_header_only

TREE = TreeConfig.chain(3)
# meta-llama/Llama-3.3-70B-Instruct's depth (80 layers) on the 8B's config with the width reduced (8192 -> 2048,
# 64 -> 16 heads), so the header-only file stays mappable; the layer count is what the engines' guess depends on
LLAMA33_70B_REDUCED = LLAMA31_8B | {"hidden_size": 2048, "intermediate_size": 7168, "num_hidden_layers": 80,
                                    "num_attention_heads": 16}


@pytest.fixture(scope="module")
def llama70(tmp_path_factory):
    """An 80-layer Llama-3.3-70B-like target and an official-layout EAGLE-3 head for it (no aux ids in its config, as
    yuhuili/EAGLE3-LLaMA3.3-Instruct-70B), header-only."""
    from transformers import AutoConfig
    root = tmp_path_factory.mktemp("llama70")
    target, draft = root / "target", root / "draft"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(LLAMA33_70B_REDUCED))
    write_header_only(target, model_shapes(AutoConfig.from_pretrained(target)))
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(EAGLE3_LLAMA31_8B | {"hidden_size": 2048, "num_attention_heads": 16,
                                                                       "intermediate_size": 7168}))
    write_header_only(draft, {k.replace("layers.0.", "midlayer."): v for k, v in
                              eagle3_shapes(2048, 2048, 128256, 32000, 16, 8, 128, 7168).items()})
    return inspect_pair(str(target), str(draft))


def test_both_engines_guess_and_agree_for_an_80_layer_target(llama70):
    assert llama70.feature_layers == (2, 40, 77) and llama70.problem is None
    for engine, name in (("vllm", "vLLM 0.32"), ("sglang", "SGLang 0.5.23")):
        plan = plan_for(engine, "meta-llama/Llama-3.3-70B-Instruct", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", llama70,
                        TREE)
        note = next(n for n in plan.notes if "names no aux layer ids" in n)
        assert f"so {name} guesses the target layers: hidden_states [2, 40, 77] for this 80-layer target" in note
        assert "guesses the same); this playground reads [2, 40, 77]" in note and "all three agree" in note
        assert "eagle_aux_hidden_state_layer_ids" not in plan.config_changes
    assert "**sglang**: the draft's config names no aux layer ids" in deployment_commands("t", "d", llama70,
                                                                                           TREE)["notes"]


def test_layers_the_probe_moved_are_a_recommended_change_for_both_engines(llama70):
    """After the probe adopts other layers the engines' guess no longer matches: the copy writes them, as a
    recommendation (the published draft loads and runs on the guess)."""
    moved = dataclasses.replace(llama70, feature_layers=(3, 41, 78),
                                feature_convention="probe: measured best, hidden_states [3, 41, 78]")
    v = plan_for("vllm", "t", "d", moved, TREE)
    assert v.loads_as_published and v.config_changes["eagle_aux_hidden_state_layer_ids"] == [3, 41, 78]
    assert any("names none, so vLLM 0.32 would guess hidden_states [2, 40, 77]" in r for r in v.recommended)
    s = plan_for("sglang", "t", "d", moved, TREE)
    assert s.config_changes["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [2, 40, 77]}  # SGLang adds 1
    assert s.config_changes["eagle_aux_hidden_state_layer_ids"] == [3, 41, 78]
    assert any("so SGLang would guess [2, 40, 77]" in r for r in s.recommended)
    assert all("they disagree" in next(n for n in p.notes if "names no aux" in n) for p in (v, s))


def test_the_copy_carries_the_layers_read_here(tmp_path):
    """Round trip on real weights: the SGLang copy's ids read back here as the layers the probe chose, and neither
    engine's plan for the copy guesses any more."""
    target = write_target(tmp_path / "t", layers=8)
    report = inspect_pair(str(target), str(write_official_eagle3(tmp_path / "d", eagle3_weights())))
    assert report.feature_layers == (2, 4, 5)
    moved = dataclasses.replace(report, feature_layers=(3, 4, 6))
    out = write_adapted_copy(plan_for("sglang", "t", "d", moved, TREE), moved, tmp_path / "copy")
    again = inspect_pair(str(target), str(out))
    assert again.feature_layers == (3, 4, 6)
    for engine in ("vllm", "sglang"):
        plan = plan_for(engine, "t", str(out), again, TREE)
        assert not plan.changes and not any("names no aux" in n for n in plan.notes)


def test_a_shallow_target_repeats_a_layer(tmp_path):
    """(2, L//2, L-3) names layer 3 twice for 6 layers; both engines capture a layer once."""
    target = write_target(tmp_path / "t", layers=6)
    report = inspect_pair(str(target), str(write_official_eagle3(tmp_path / "d", eagle3_weights())))
    note = next(n for n in plan_for("vllm", "t", "d", report, TREE).notes if "names no aux" in n)
    assert "[2, 3, 3]" in note and "all three agree" in note and "2 of the 3 features" in note
