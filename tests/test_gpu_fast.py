"""scripts/gpu_fast.py's report helpers, on the CPU: where two greedy outputs part, and the card's bandwidth."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

from fixtures import tiny_target

ROOT = Path(__file__).resolve().parents[1]


def _gpu_fast():
    spec = importlib.util.spec_from_file_location("gpu_fast", ROOT / "scripts" / "gpu_fast.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@torch.inference_mode()
def test_divergence_names_the_first_differing_token_and_the_targets_own_gap():
    gpu_fast = _gpu_fast()
    model = tiny_target().eval()
    prompt = [5, 17, 33, 8]
    plain = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False)[0, len(prompt):].tolist()
    assert gpu_fast.divergence(model, prompt, plain, list(plain)) is None
    at = 6
    logits = model(input_ids=torch.tensor([prompt + plain[:at]])).logits[0, -1]  # [V]
    top = logits.topk(2)
    assert int(top.indices[0]) == plain[at]
    other = plain[:at] + [int(top.indices[1])] + plain[at + 1:]
    got = gpu_fast.divergence(model, prompt, plain, other)
    assert got["index"] == at and got["plain"] == plain[at] and got["eagle"] == int(top.indices[1])
    assert got["top2"] == [plain[at], int(top.indices[1])]
    assert abs(got["top2_gap"] - float(top.values[0] - top.values[1])) < 1e-4 and got["top2_gap"] > 0


def test_bandwidth_comes_from_the_cards_name():
    gpu_fast = _gpu_fast()
    assert gpu_fast.hbm_tbps("NVIDIA H100 80GB HBM3") == 3.35
    assert gpu_fast.hbm_tbps("NVIDIA H200") == 4.8
    assert gpu_fast.hbm_tbps("NVIDIA L40S") == 0.864
    assert gpu_fast.hbm_tbps("some other card") == 4.8
