"""MiMo-7B (model_type "mimo", auto_map to the repo's code): the body runs on transformers' own Qwen2 classes and
the MTP layer (`model.mtp_layers.0.*`) runs as a draft. Nothing from the repo runs; broken MiMo folders are
refused in one line. Greedy equality with plain decoding is in test_new_layouts.py (mimo-mtp*)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle_demo.checkpoints import (
    CheckpointError,
    CorruptCheckpointError,
    NotAnEagleDraftError,
    inspect_pair,
    load_pair,
)
from layouts import write_mimo_mtp_target, write_safetensors

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def mimo(tmp_path_factory):
    root = tmp_path_factory.mktemp("mimo")
    marker = root / "REMOTE_CODE_RAN"
    return write_mimo_mtp_target(root / "mimo", marker=marker), marker


def test_mimo_target_loads_every_weight_from_the_file_quietly(mimo, capfd, caplog):
    folder, marker = mimo
    pair = load_pair(str(folder), str(folder), dtype="float32", device="cpu")
    out = capfd.readouterr()
    noise = out.out + out.err + caplog.text
    assert "UNEXPECTED" not in noise and "mtp_layers" not in noise and "MISSING" not in noise, noise
    assert not marker.exists()
    assert type(pair.target).__mro__[1].__name__ == "Qwen2ForCausalLM"
    assert pair.target.config.model_type == "qwen2" and pair.report.target_model_type == "mimo"
    stored = load_file(str(folder / "model.safetensors"))
    state = pair.target.state_dict()
    assert not any("mtp_layers" in k for k in state)
    for key, value in state.items():  # nothing left randomly initialised
        assert torch.equal(value, stored[key]), key
    assert set(state) == {k for k in stored if not k.startswith("model.mtp_layers.")}


def test_mimo_head_computes_the_engines_formula(mimo):
    """hidden FIRST in input_proj's concat, the embedding zeroed at position 0, the Qwen2 block, final_layernorm
    (vLLM/SGLang mimo_mtp.py), computed here from the raw checkpoint tensors with a fresh Qwen2DecoderLayer."""
    from transformers import DynamicCache
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer, Qwen2RMSNorm, Qwen2RotaryEmbedding
    folder, _ = mimo
    pair = load_pair(str(folder), str(folder), dtype="float32", device="cpu")
    raw = load_file(str(folder / "model.safetensors"))
    p = "model.mtp_layers.0."
    cfg = pair.head.config
    block = Qwen2DecoderLayer(cfg, layer_idx=cfg.num_hidden_layers - 1).eval()
    extras = ("token_layernorm", "hidden_layernorm", "final_layernorm", "input_proj")
    block.load_state_dict({k[len(p):]: v for k, v in raw.items() if k.startswith(p) and k[len(p):].split(".")[0]
                           not in extras})
    block.self_attn.layer_idx = 0

    def norm(name, x):
        n = Qwen2RMSNorm(x.shape[-1], eps=cfg.rms_norm_eps)
        n.weight.data.copy_(raw[p + name + ".weight"])
        return n(x)

    torch.manual_seed(0)
    hidden, tokens, positions = torch.randn(5, cfg.hidden_size), torch.tensor([3, 8, 1, 40, 7]), torch.arange(5)
    with torch.no_grad():
        emb = raw["model.embed_tokens.weight"][tokens].clone()
        emb[0] = 0.0
        x = (torch.cat([norm("hidden_layernorm", hidden), norm("token_layernorm", emb)], -1)
             @ raw[p + "input_proj.weight"].T)
        rope = Qwen2RotaryEmbedding(config=cfg)(x[None], positions[None])
        y = block(x[None], attention_mask=None, position_ids=positions[None], cache=DynamicCache(), use_cache=True,
                  position_embeddings=rope)
        want = norm("final_layernorm", (y if isinstance(y, torch.Tensor) else y[0])[0])
        got = pair.head(hidden, tokens, positions, DynamicCache(), None, from_target=True)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    pair.head.hidden_first = False  # DeepSeek's order gives another result: the order is really in the forward
    with torch.no_grad():
        swapped = pair.head(hidden, tokens, positions, DynamicCache(), None, from_target=True)
    assert not torch.allclose(swapped, want, atol=1e-3)


def _broken(tmp_path, edit) -> Path:
    folder = write_mimo_mtp_target(tmp_path / "broken")
    sd = load_file(str(folder / "model.safetensors"))
    edit(sd)
    write_safetensors(folder, sd)
    return folder


@pytest.mark.parametrize("case,edit,error,words", [
    ("input_proj-shape", lambda sd: sd.update({"model.mtp_layers.0.input_proj.weight": torch.zeros(64, 64)}),
     CorruptCheckpointError, "MTP input_proj in"),
    ("block-weight-missing", lambda sd: sd.pop("model.mtp_layers.0.self_attn.q_proj.bias"),
     CorruptCheckpointError, "missing required weight block.self_attn.q_proj.bias"),
    ("block-weight-shape", lambda sd: sd.update({"model.mtp_layers.0.mlp.up_proj.weight": torch.zeros(64, 64)}),
     CorruptCheckpointError, "MTP weight model.mtp_layers.0.mlp.up_proj.weight is [64, 64]"),
    ("no-mtp-weights", lambda sd: [sd.pop(k) for k in [k for k in sd if "mtp_layers" in k]],
     NotAnEagleDraftError, "declares num_nextn_predict_layers 1 but whose weights hold no MTP layer"),
    ("body-weight-missing", lambda sd: sd.pop("model.layers.1.mlp.up_proj.weight"),
     CorruptCheckpointError, "is missing weights (e.g. model.layers.1.mlp.up_proj.weight"),
])
@pytest.mark.slow
def test_broken_mimo_is_refused_in_one_line(tmp_path, case, edit, error, words):
    folder = _broken(tmp_path, edit)
    with pytest.raises(error) as info:
        load_pair(str(folder), str(folder), dtype="float32", device="cpu")
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "inspect", "--target", str(folder), "--draft",
                           str(folder)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    if case != "body-weight-missing":  # inspect reads headers only; the body is checked at load
        assert proc.returncode != 0 or "problem" in text.lower(), text
        assert words in text, text


def test_mimo_config_without_weights_and_other_remote_code_stay_refused(tmp_path):
    import json
    folder = write_mimo_mtp_target(tmp_path / "noweights")
    for f in folder.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(CheckpointError, match="has no weight files") as info:
        load_pair(str(folder), None, dtype="float32", device="cpu")
    assert "\n" not in str(info.value)
    other = write_mimo_mtp_target(tmp_path / "other")
    cfg = json.loads((other / "config.json").read_text())
    cfg.update(model_type="mimo_v3", architectures=["MiMoV3ForCausalLM"])
    (other / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="needs its own modeling code"):
        inspect_pair(str(other), None)


def test_mimo_config_with_bad_fields_is_refused_in_one_line(tmp_path):
    import json
    folder = write_mimo_mtp_target(tmp_path / "badcfg")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["hidden_size"] = "wide"
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="not a valid Qwen2-style config") as info:
        inspect_pair(str(folder), str(folder))
    assert "\n" not in str(info.value)
