"""Where a target goes: one device, or spread with device_map="auto" when it fits no single GPU.

CUDA is faked (device count and free memory); the decision is what is tested, not a GPU run.
"""

from types import SimpleNamespace

import pytest
import torch

from eagle_demo.checkpoints import build


def info(params: int):
    tensor = SimpleNamespace(numel=params)
    return SimpleNamespace(weights=SimpleNamespace(tensors={"w": tensor}))


@pytest.fixture
def gpus(monkeypatch):
    def fake(count: int, free_bytes: int):
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: (free_bytes, 2 * free_bytes))
    return fake


def test_cpu_loads_plainly():
    assert build._device_map(info(10), torch.float32, torch.device("cpu"), "auto") is None


def test_a_target_that_fits_one_gpu_stays_on_it(gpus):
    gpus(4, 80 * 2**30)
    bf16_8b = info(8_000_000_000)  # 16 GB in bf16
    assert build._device_map(bf16_8b, torch.bfloat16, torch.device("cuda:0"), "auto") == {"": "cuda:0"}


def test_a_target_larger_than_one_gpu_is_spread_over_all(gpus):
    gpus(4, 80 * 2**30)
    bf16_70b = info(70_000_000_000)  # 140 GB in bf16
    assert build._device_map(bf16_70b, torch.bfloat16, torch.device("cuda:0"), "auto") == "auto"


def test_an_explicit_device_or_a_single_gpu_is_never_spread(gpus):
    gpus(4, 80 * 2**30)
    big = info(70_000_000_000)
    assert build._device_map(big, torch.bfloat16, torch.device("cuda:1"), "cuda:1") == {"": "cuda:1"}
    gpus(1, 80 * 2**30)
    assert build._device_map(big, torch.bfloat16, torch.device("cuda:0"), "auto") == {"": "cuda:0"}


def test_cpu_threads_one_for_small_models_explicit_otherwise():
    from eagle_demo.common.devices import apply_cpu_threads
    from fixtures import tiny_target

    before = torch.get_num_threads()
    try:
        model = tiny_target()
        assert apply_cpu_threads(model, 0) == 1  # small model on CPU: one thread
        assert apply_cpu_threads(model, 2) == 2  # explicit wins
        assert apply_cpu_threads(model, -1) == 2  # negative: left alone
    finally:
        torch.set_num_threads(before)
