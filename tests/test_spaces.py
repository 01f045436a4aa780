"""Spaces readiness: the README front matter, and ZeroGPU's decorator applied when `spaces` exists."""

import importlib
import sys
import types
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_readme_front_matter_is_a_gradio_space():
    text = (ROOT / "README.md").read_text()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["sdk"] == "gradio" and meta["app_file"] == "app.py"
    assert meta["title"] and meta["short_description"]
    assert (ROOT / meta["app_file"]).is_file()


def test_requirements_pin_cpu_friendly_torch():
    reqs = (ROOT / "requirements.txt").read_text().split()
    assert "torch==2.13.0" in reqs


def test_gpu_decorator_uses_spaces_when_present(monkeypatch):
    calls = []
    fake = types.ModuleType("spaces")

    def GPU(fn=None, **kwargs):
        def wrap(f):
            def inner(*a, **k):
                calls.append(f.__name__)
                return f(*a, **k)
            return inner
        return wrap(fn) if fn is not None else wrap

    fake.GPU = GPU
    monkeypatch.setitem(sys.modules, "spaces", fake)
    import eagle_demo.spaces_compat as compat
    compat = importlib.reload(compat)
    try:
        assert compat.ON_SPACES_GPU

        @compat.gpu
        def generate(x):
            return x + 1

        assert generate(1) == 2 and calls == ["generate"]
    finally:
        monkeypatch.delitem(sys.modules, "spaces")
        importlib.reload(compat)
    assert not compat.ON_SPACES_GPU and compat.gpu(len) is len


def test_app_imports_without_loading_a_model():
    import gc

    import torch.nn as nn

    gc.collect()  # modules left over by earlier tests must not be freed between the two counts
    before = sum(isinstance(o, nn.Module) for o in gc.get_objects())
    sys.modules.pop("app", None)
    importlib.import_module("app")
    gc.collect()
    after = sum(isinstance(o, nn.Module) for o in gc.get_objects())
    assert after == before
