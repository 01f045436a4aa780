"""The load-time target check: families the engines run faithfully pass; one whose tree forward is silently wrong
(MPT's ALiBi follows cache slots, not the engine's position ids) and ones whose forward fails on a 4-D mask
(Bloom, Falcon with ALiBi) or that keep a state besides attention (LFM2's convolutions) are refused in one line,
before any run."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.target.check import check_target
from fixtures import OracleHead, tiny_target
from test_engine import PROMPT, hf_greedy

SMALL = {
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4),
    "gpt_neox": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
    "phi3": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, pad_token_id=0),
    "mpt": dict(d_model=64, n_layers=2, n_heads=4),
    "bloom": dict(hidden_size=64, n_layer=2, n_head=4),
    "falcon": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, alibi=True),
    "lfm2": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, layer_types=["conv", "full_attention"]),
}


def family(name: str):
    cfg = AutoConfig.for_model(name, vocab_size=96, bos_token_id=1, eos_token_id=2, **SMALL[name])
    torch.manual_seed(0)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
    except ValueError:  # no SDPA path: eager, as the loader falls back
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return model.eval()


@pytest.mark.parametrize("name", ["gpt2", "gpt_neox", "phi3"])
def test_families_the_engines_run_faithfully_pass(name):
    assert check_target(family(name)).identity
    assert check_target(tiny_target("qwen2", layers=3, window=2)).identity  # a window inside the check's tokens


def test_a_silently_wrong_tree_forward_is_refused():
    """MPT's output really differs from its own greedy decoding once a tree accepts a second sibling."""
    model = family("mpt")
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=2, total_tokens=8))
    events = list(SpeculativeEngine(model, OracleHead(model, PROMPT[0])).generate(PROMPT, run))
    assert list(events[-1].token_ids) != hf_greedy(model, PROMPT, 24)
    with pytest.raises(ValueError, match="computes a tree of drafts on the growing cache differently"):
        check_target(model)


@pytest.mark.parametrize("name", ["bloom", "falcon"])
def test_a_forward_that_fails_on_the_engines_inputs_is_refused_in_one_line(name):
    with pytest.raises(ValueError, match="fails on the engine's inputs") as err:
        check_target(family(name))
    assert "\n" not in str(err.value)


def test_layers_besides_attention_are_named_and_refused():
    """LFM2's convolution layers keep a state the engines' cache cannot take back after rejected drafts."""
    with pytest.raises(ValueError, match="conv layers besides attention"):
        check_target(family("lfm2"))


def test_layers_besides_attention_are_refused_before_any_weights_are_fetched(tmp_path):
    """A config alone (no weight files yet, as before a download) is enough to refuse a hybrid target."""
    from eagle_demo.checkpoints import CheckpointError, inspect_pair, load_pair

    family("lfm2").config.save_pretrained(tmp_path / "lfm2")
    with pytest.raises(CheckpointError, match="conv layers besides attention"):
        load_pair(str(tmp_path / "lfm2"), None, device="cpu", dtype="float32")
    assert "conv layers besides attention" in inspect_pair(str(tmp_path / "lfm2"), None).problem


def test_the_static_cache_is_checked_too(monkeypatch):
    """A static path that lost the target's window (a 2-token window, inside the check's tokens) is caught."""
    from eagle_demo.target.static import StaticTarget
    from eagle_demo.target.windows import AttentionWindow

    model = tiny_target("qwen2", layers=3, window=2)
    check_target(model)
    init = StaticTarget.__init__

    def windowless(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.window = AttentionWindow(None)

    monkeypatch.setattr(StaticTarget, "__init__", windowless)
    with pytest.raises(ValueError, match="computes a prefill on the static cache differently"):
        check_target(model)


def test_the_load_refuses_such_a_target(tmp_path):
    from eagle_demo.checkpoints import CheckpointError, load_pair

    family("mpt").save_pretrained(tmp_path / "mpt")
    assert json.loads((tmp_path / "mpt" / "config.json").read_text())["model_type"] == "mpt"
    with pytest.raises(CheckpointError, match="pick another target family") as err:
        load_pair(str(tmp_path / "mpt"), None, device="cpu", dtype="float32")
    assert "\n" not in str(err.value)
