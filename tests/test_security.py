"""Never run code from a checkpoint: remote-code configs are refused, pickles load weights-only."""

import json
import pathlib
import re

import pytest
import torch

from eagle_demo.checkpoints import CheckpointError, load_pair
from layouts import write_target, write_vicuna_eagle1

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_no_source_file_enables_remote_code():
    for path in (ROOT / "eagle_demo").rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"trust_remote_code\s*=\s*True", text), path
    assert not re.search(r"trust_remote_code\s*=\s*True",
                         (ROOT / "app.py").read_text() if (ROOT / "app.py").exists() else "")


def test_target_with_remote_code_is_refused_and_code_never_runs(tmp_path):
    target = write_target(tmp_path / "t")
    marker = tmp_path / "PWNED"
    cfg = json.loads((target / "config.json").read_text())
    cfg.update(model_type="evil_lm", architectures=["EvilForCausalLM"],
               auto_map={"AutoConfig": "modeling_evil.EvilConfig",
                         "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"})
    (target / "config.json").write_text(json.dumps(cfg))
    (target / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    draft = write_vicuna_eagle1(tmp_path / "d")
    with pytest.raises(CheckpointError, match="trust_remote_code"):
        load_pair(str(target), str(draft), device="cpu")
    assert not marker.exists()


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_hostile_pickle_target_weights_refused(tmp_path):
    target = write_target(tmp_path / "t")
    marker = str(tmp_path / "PWNED")
    for f in target.glob("*.safetensors"):
        f.unlink()
    torch.save({"model.embed_tokens.weight": _Payload(marker)}, target / "pytorch_model.bin")
    draft = write_vicuna_eagle1(tmp_path / "d")
    with pytest.raises(CheckpointError):
        load_pair(str(target), str(draft), device="cpu")
    assert not pathlib.Path(marker).exists()
