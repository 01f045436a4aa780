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


SPACES_DEFAULT_PYTHON = "3.10"  # what a Space builds on when the front matter names no python_version


def _front_matter() -> dict:
    return yaml.safe_load((ROOT / "README.md").read_text().split("---\n")[1])


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[name.strip()] = version.strip()
    return pins


def test_space_python_satisfies_every_pinned_package():
    """A Space builds on the front matter's python_version; every pinned package must install there."""
    from importlib.metadata import PackageNotFoundError, metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    python = str(_front_matter().get("python_version", SPACES_DEFAULT_PYTHON))
    refused = []
    for name, version in _pins().items():
        try:
            meta = metadata(name)
        except PackageNotFoundError:  # pragma: no cover - the test environment installs requirements.txt
            raise AssertionError(f"{name} is pinned in requirements.txt but not installed")
        installed = Version(meta["Version"]).public  # a local build tag (torch's +cpu) is the same release
        assert installed == version, f"installed {name} {installed} is not the pinned {version}"
        needs = meta.get("Requires-Python")
        if needs and Version(python) not in SpecifierSet(needs):
            refused.append(f"{name}=={version} needs Python {needs}")
    assert not refused, f"the Space's Python {python} cannot install: " + "; ".join(refused)
    running = Version(f"{sys.version_info.major}.{sys.version_info.minor}")
    assert running >= Version(python), f"tests run on {running}, older than the Space's {python}"


def test_space_sdk_version_is_the_pinned_gradio():
    assert str(_front_matter()["sdk_version"]) == _pins()["gradio"]


def test_pyproject_requires_the_space_python():
    import tomllib

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    pyproject = ROOT / "pyproject.toml"
    needs = tomllib.loads(pyproject.read_text())["project"]["requires-python"]
    assert Version(str(_front_matter()["python_version"])) in SpecifierSet(needs)


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
    import eagle_demo.app.zerogpu as compat
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
