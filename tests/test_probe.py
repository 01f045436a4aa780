"""Pre-flight probe: seeded misconfigurations of the shipped EAGLE-3 head (its real convention: HF
hidden_states (2, L // 2, L - 3) by the default rule, d2t as offsets, norm_before_residual false, rope_theta 10000,
an EAGLE-3 loop) are measured and, where the rule says so, fixed. Outputs stay the target's throughout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eagle_demo.checkpoints import load_pair
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.decoding.events import Finish
from eagle_demo.probe import evidence as probe_evidence
from eagle_demo.probe.measure import MARGIN, NEAR, adoptable, probe_pair

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "assets" / "tiny-target"
SHIPPED = ROOT / "assets" / "tiny-eagle3"
_LAYERS = json.loads((TARGET / "config.json").read_text())["num_hidden_layers"]
RULE = [2, _LAYERS // 2, _LAYERS - 3]  # the default EAGLE-3 feature rule: [2, 12, 21] for 24 layers


def shipped_copy(folder: Path, sd_change=None, **config_change) -> Path:
    folder.mkdir(parents=True)
    config = json.loads((SHIPPED / "config.json").read_text())
    config.update(config_change)
    if sd_change is None:
        shutil.copy(SHIPPED / "pytorch_model.bin", folder)
    else:
        sd = sd_change(torch.load(SHIPPED / "pytorch_model.bin", weights_only=True))
        torch.save(sd, folder / "pytorch_model.bin")
        config["draft_vocab_size"] = sd["lm_head.weight"].shape[0]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def absolute_d2t(sd: dict) -> dict:
    """A head that stores d2t as absolute target ids (verl-SpeCo #67, SpecForge #534). Keeping the draft
    tokens whose ids stay inside the target's vocabulary under both readings (the first 1663 for the shipped
    head) leaves nothing but acceptance to tell them apart."""
    vocab = json.loads((TARGET / "config.json").read_text())["vocab_size"]
    ids = torch.arange(sd["d2t"].shape[0]) + sd["d2t"].long()  # [Vd] the real target ids
    keep = int(((ids + torch.arange(ids.shape[0])) < vocab).long().cumprod(0).sum())
    return {k: v for k, v in sd.items() if k != "t2d"} | {"lm_head.weight": sd["lm_head.weight"][:keep],
                                                          "d2t": ids[:keep].clone()}


def check_rule(probe: dict) -> bool:
    """Recompute the decision from the measured evidence, with the probe's own rule (adopt an alternative past the
    margin and clear of the noise; a near tie within NEAR of the best goes to the first listed reading); return
    whether it switched."""
    alternatives = probe["alternatives"]
    winners = [a for a in alternatives if adoptable(a["evidence"])]
    if winners:
        top = max(a["evidence"]["tau"] for a in winners)
        best = next(a for a in winners if a["evidence"]["tau"] >= (1 - NEAR) * top)
        assert probe["used"] == best["conventions"] and probe["tau"] == best["tau"]
        return True
    declared_tau = probe["declared_tau"]
    kept = [a for a in alternatives if a["conventions"] == probe["loaded"] != probe["declared"]
            and a["tau"] >= declared_tau]
    assert probe["used"] == (kept[0]["conventions"] if kept else probe["declared"])
    assert probe["tau"] == (kept[0]["tau"] if kept else declared_tau)
    return False


def lossless(pair) -> None:
    prompt = pair.tokenizer("def read_file(path):")["input_ids"]
    finish = list(SpeculativeEngine(pair.target, pair.head).generate(
        prompt, RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=2, total_tokens=8))))[-1]
    assert isinstance(finish, Finish)
    ref = pair.target.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=24, eos_token_id=None,
                               pad_token_id=0, attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    assert list(finish.token_ids) == ref[0, len(prompt):].tolist()


@pytest.fixture(scope="module")
def shipped_tau():
    pair = probe_pair(load_pair(str(TARGET), str(SHIPPED), dtype="float32", device="cpu"))
    assert pair.report.probe["used"] == pair.report.probe["declared"]
    return pair.report.probe["tau"]


def test_eagle3_draft_described_as_eagle1_is_fixed(tmp_path, shipped_tau):
    folder = shipped_copy(tmp_path / "said-eagle1", architectures=["LlamaForCausalLMEagle"])
    pair = probe_pair(load_pair(str(TARGET), str(folder), dtype="float32", device="cpu"))
    probe = pair.report.probe
    assert probe["declared"]["feature_layers"] is None  # what an EAGLE-1 loop feeds: the unfused last state
    assert check_rule(probe)
    used = probe["used"]["feature_layers"]
    assert used is not None and pair.head.feature_layers == tuple(used)
    line = pair.report.adaptations[-1]
    assert line.startswith("probe: declared feature_layers=None") and "using it" in line and "\n" not in line
    declared = float(line.split("measured tau ")[1].split(";")[0])
    assert declared == round(probe["declared_tau"], 2) and probe["tau"] >= (1 + MARGIN) * declared
    assert probe["tau"] >= 0.95 * shipped_tau
    assert any("config declares EAGLE-1 but the weights are EAGLE-3" in a for a in pair.report.adaptations)
    assert probe["loaded"]["feature_layers"] == RULE  # weight-first loading read it fused; the line says so
    assert f"(as the config states; the weights showed feature_layers={RULE}, loaded so)" in line
    assert f"(the weights showed feature_layers={RULE})" in pair.report.to_markdown()
    lossless(pair)


def test_the_weights_reading_stays_when_the_rule_does_not_switch(tmp_path, monkeypatch):
    """Weight-first loading reads an EAGLE-3 draft described as EAGLE-1 fused. Where the declared (unfused)
    reading is not bad enough for the rule to switch (here: a threshold lowered under its tau), the probe
    must not hand the head back to the declared reading that measured worse."""
    monkeypatch.setattr(probe_evidence, "MARGIN", 10.0)  # no alternative can be adopted
    folder = shipped_copy(tmp_path / "said-eagle1-kept", architectures=["LlamaForCausalLMEagle"])
    pair = probe_pair(load_pair(str(TARGET), str(folder), dtype="float32", device="cpu"))
    probe = pair.report.probe
    assert probe["declared"]["feature_layers"] is None and probe["loaded"]["feature_layers"] == RULE
    assert probe["used"] == probe["loaded"] and pair.head.feature_layers == tuple(RULE)
    assert probe["tau"] > probe["declared_tau"]
    line = pair.report.adaptations[-1]
    assert f"kept the reading the weights showed, feature_layers={RULE}" in line and "\n" not in line
    lossless(pair)


def test_fused_draft_shipped_as_unfused_is_fixed(tmp_path, shipped_tau):
    """Trained on fused aux states, shipped with NVIDIA v2's `use_aux_hidden_state: false` (vLLM #40656)."""
    folder = shipped_copy(tmp_path / "said-unfused", eagle_config={"use_aux_hidden_state": False})
    pair = probe_pair(load_pair(str(TARGET), str(folder), dtype="float32", device="cpu"))
    probe = pair.report.probe
    assert probe["declared"]["feature_layers"] is None and check_rule(probe)
    shifted = [i - 1 for i in RULE]  # the same layers, read by the other index convention
    assert probe["used"]["feature_layers"] in (RULE, shifted) and probe["tau"] >= 0.95 * shipped_tau
    assert any("fc weights kept aside" in a for a in pair.report.adaptations)
    lossless(pair)


def test_d2t_trained_as_ids_but_read_as_offsets_is_fixed(tmp_path):
    folder = shipped_copy(tmp_path / "d2t-ids", sd_change=absolute_d2t)
    pair = probe_pair(load_pair(str(TARGET), str(folder), dtype="float32", device="cpu"))
    probe = pair.report.probe
    assert probe["declared"]["d2t"] == "offsets" and probe["used"]["d2t"] == "absolute" and check_rule(probe)
    ids = torch.arange(pair.head.d2t.shape[0]) + pair.head.d2t.cpu()
    assert torch.equal(ids, absolute_d2t(torch.load(SHIPPED / "pytorch_model.bin", weights_only=True))["d2t"])
    lossless(pair)


def test_d2t_ids_that_cannot_be_offsets_are_read_as_ids_at_load(tmp_path, shipped_tau):
    def as_ids(sd):
        return sd | {"d2t": torch.arange(sd["d2t"].shape[0]) + sd["d2t"].long()}

    folder = shipped_copy(tmp_path / "d2t-ids-full", sd_change=as_ids)
    pair = probe_pair(load_pair(str(TARGET), str(folder), dtype="float32", device="cpu"))
    assert "d2t read as absolute target ids (as offsets they point past the target vocab)" in pair.report.adaptations
    assert pair.report.probe["tau"] == shipped_tau  # the very same draft as the shipped one


@pytest.mark.parametrize("name,change", [
    ("ids-plus-one-as-given", {"eagle_aux_hidden_state_layer_ids": [i - 1 for i in RULE]}),
    ("nested-ids-one-layer-late", {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [i + 1 for i in RULE]}}),
    ("norm-before-residual", {"norm_before_residual": True}),
    ("rope-theta", {"rope_theta": 10.0}),
])
def test_open_choices_are_measured_and_the_rule_holds(tmp_path, shipped_tau, name, change):
    pair = probe_pair(load_pair(str(TARGET), str(shipped_copy(tmp_path / name, **change)), dtype="float32",
                                device="cpu"))
    probe = pair.report.probe
    tried = [a["conventions"] for a in probe["alternatives"]]
    if "eagle_aux_hidden_state_layer_ids" in change or "eagle_config" in change:
        assert any(c["feature_layers"] == RULE for c in tried)
    if name == "norm-before-residual":
        assert any(c["norm_before_residual"] is False for c in tried)
    if name == "rope-theta":
        assert any(c["rope_theta"] == 10000.0 for c in tried)
    check_rule(probe)
    assert all(a["tau"] >= 1.0 for a in probe["alternatives"])
    assert max(a["tau"] for a in probe["alternatives"]) >= 0.95 * shipped_tau  # the shipped convention is among them


def test_inspect_probe_cli_json(tmp_path):
    folder = shipped_copy(tmp_path / "cli", architectures=["LlamaForCausalLMEagle"])
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "inspect", "--target", str(TARGET), "--draft",
                           str(folder), "--probe", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-500:]
    probe = json.loads(proc.stdout)["probe"]
    assert set(probe) >= {"tau", "used", "declared", "alternatives"}
    assert all(set(a) == {"conventions", "tau", "evidence"} for a in probe["alternatives"])
    bad = subprocess.run([sys.executable, "-m", "eagle_demo", "inspect", "--target", str(TARGET), "--draft",
                          str(tmp_path / "missing"), "--probe"],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
