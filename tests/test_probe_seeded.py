"""The probe finds and fixes each seeded misconfiguration: heads that depend on a convention, shipped with
a config that states another (eagle_demo/training/seeded.py builds them from the shipped head and the
trained tensors in tests/seeded/). For each: the rule switches, to the convention the head was trained
with, the report says so in one line, tau comes back, and the output stays the target's."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors import safe_open

from eagle_demo.checkpoints import load_pair
from eagle_demo.drafts.eagle3x import Unfused
from eagle_demo.probe.measure import NEAR, adoptable, probe_pair
from eagle_demo.training.seeded import CASES, OUT, SEEDED, seeded_draft
from test_probe import TARGET, lossless

torch.set_num_threads(1)
NEW = ("aux ids: heuristic for the wrong depth", "draft rope_theta", "norm_before_residual")


def truthful_tau(case, folder) -> float:
    """Tau of the same seeded head with a config that states its real conventions: what the probe should
    bring back (the seeded constructions change the head itself, so not the shipped head's tau)."""
    draft = seeded_draft(dataclasses.replace(case, config=case.truthful), folder)
    return probe_pair(load_pair(str(TARGET), str(draft), dtype="float32", device="cpu")).report.probe["declared_tau"]


def _applied(head, key: str):
    if key == "feature_layers":
        return None if isinstance(head.fc, Unfused) else list(head.feature_layers)
    if key == "rope_theta":
        return float(head.rotary_emb.config.rope_parameters["rope_theta"])
    if key == "norm_before_residual":
        return head.midlayer.norm_before_residual
    raise KeyError(key)


@pytest.mark.parametrize("case", [c for c in SEEDED if c.name in NEW], ids=lambda c: c.fixture.split(":")[-1])
def test_seeded_misconfiguration_is_found_and_fixed(tmp_path, case):
    pair = probe_pair(load_pair(str(TARGET), str(seeded_draft(case, tmp_path / "draft")), dtype="float32",
                                device="cpu"))
    probe, report = pair.report.probe, pair.report
    assert all(probe["declared"][k] != v for k, v in case.truth.items())  # the config misstates the truth
    winners = [a for a in probe["alternatives"] if adoptable(a["evidence"])]
    top = max(a["evidence"]["tau"] for a in winners)
    best = next(a for a in winners if a["evidence"]["tau"] >= (1 - NEAR) * top)  # a near tie: the likelier reading
    assert probe["used"] == best["conventions"] and probe["tau"] == best["tau"]
    assert probe["used"] == probe["declared"] | case.truth  # exactly the trained conventions, nothing else moved
    for key, value in case.truth.items():
        assert _applied(pair.head, key) == value
    line = report.adaptations[-1]
    assert line.startswith("probe: declared ") and "\n" not in line and "), using it; every alternative: " in line
    changed = ", ".join(f"{k}={v}" for k, v in case.truth.items())
    assert f"measured tau {probe['declared_tau']:.2f}; {changed} measured tau {probe['tau']:.2f} (+" in line
    assert "used" in report.to_markdown() and f"{changed} instead" in report.to_markdown()
    if "feature_layers" in case.truth:
        assert report.feature_layers == tuple(case.truth["feature_layers"])
    if "rope_theta" in case.truth:
        assert report.rope_theta == case.truth["rope_theta"]
    if "norm_before_residual" in case.truth:
        assert report.norm_before_residual is case.truth["norm_before_residual"]
    assert probe["tau"] >= 0.9 * truthful_tau(case, tmp_path / "truthful")  # the speed the misstatement cost comes back
    lossless(pair)


def test_fixtures_are_small_and_say_what_they_are():
    trained = {c.fixture for c in SEEDED if c.fixture and not c.fixture.startswith("build:")}
    assert trained == {"aux"}
    for name in trained:
        names, truth, misread = CASES[name]
        path = OUT / f"{name}.safetensors"
        assert path.stat().st_size < 400_000
        with safe_open(str(path), "pt") as f:
            meta = f.metadata()
            assert sorted(f.keys()) == sorted(names)
        assert json.loads(meta["truth"]) == truth and json.loads(meta["misread"]) == misread
        assert meta["command"].startswith("python -m eagle_demo.training.seeded " + name)


def test_a_correctly_declared_seeded_head_is_kept(tmp_path):
    """The trained aux head with a config that states its real layers (none: the default rule): kept."""
    case = next(c for c in SEEDED if c.fixture == "aux")
    truthful = type(case)(case.name, case.source, case.fixture, case.truth, {})
    pair = probe_pair(load_pair(str(TARGET), str(seeded_draft(truthful, tmp_path / "d")), dtype="float32",
                                device="cpu"))
    probe = pair.report.probe
    assert probe["declared"]["feature_layers"] == case.truth["feature_layers"] and probe["used"] == probe["declared"]
    assert not any(adoptable(a["evidence"]) for a in probe["alternatives"])
    assert pair.head.feature_layers == tuple(case.truth["feature_layers"])
    assert "kept" in pair.report.adaptations[-1]
