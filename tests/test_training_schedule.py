"""The one learning-rate schedule of every trainer (`training.shared.lr_at`): a linear warm-up times a decay to a
tenth, linear or half-cosine, and the heads' trainer (`heads.set_lr`) on it."""

import math

import pytest
import torch

from eagle_demo.training.heads import set_lr
from eagle_demo.training.shared import lr_at


def test_warm_up_then_hold_then_decay_to_a_tenth():
    assert lr_at(2.0, 0, 200, 0.0) == pytest.approx(2.0 / 200)
    assert lr_at(2.0, 199, 200, 0.0) == 2.0 == lr_at(2.0, 5000, 200, -0.3)  # the peak holds before the decay
    assert lr_at(2.0, 5000, 200, 0.5) == pytest.approx(2.0 * 0.55)
    assert lr_at(2.0, 5000, 200, 0.5, cosine=True) == pytest.approx(2.0 * 0.55)  # both curves meet half-way
    assert lr_at(2.0, 5000, 200, 0.25, cosine=True) == pytest.approx(2.0 * (0.1 + 0.45 * (1 + math.cos(math.pi / 4))))
    assert lr_at(2.0, 5000, 200, 1.0) == pytest.approx(0.2) == lr_at(2.0, 5000, 200, 1.7, cosine=True)


def test_the_heads_schedule_warms_up_while_its_cosine_runs_over_steps_or_minutes():
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    set_lr(opt, 9, 100, 1e-3)
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * 10 / 50 * (0.1 + 0.45 * (1 + math.cos(math.pi * 0.09))))
    set_lr(opt, 60, 100, 1e-3, elapsed=90.0, minutes=2.0)  # 75% of the time budget is further on than 60% of steps
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 * (0.1 + 0.45 * (1 + math.cos(math.pi * 0.75))))
