"""Rotary scalings that follow the forward's length stay lossless past the original context: a "dynamic" (NTK)
Llama, a "longrope" Phi-3 and a "longrope" Llama, with an original context of 16 positions, equal their own
`generate` (Phi-3's drops its cache at the boundary and runs the whole sequence again; Llama's keeps its short
keys) on both engines, both caches, chains and trees."""

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Phi3Config

from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.target.rope_limit import RopeLimit
from fixtures import OracleHead, random_eagle1, tiny_target
from test_engine import PROMPT, hf_greedy

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
_MODELS = {}


def scaled(kind: str):
    if kind not in _MODELS:
        if kind == "dynamic":
            cfg = LlamaConfig(**COMMON, max_position_embeddings=16,
                              rope_scaling={"rope_type": "dynamic", "factor": 4.0})
        elif kind == "longrope-llama":  # longrope in a family whose generate keeps its short keys (no refill)
            cfg = LlamaConfig(**COMMON, max_position_embeddings=64,
                              rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 8,
                                            "long_factor": [3.0] * 8, "original_max_position_embeddings": 16})
        else:
            cfg = Phi3Config(**COMMON, max_position_embeddings=64, original_max_position_embeddings=16,
                             rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 8,
                                           "long_factor": [3.0] * 8})
        torch.manual_seed(3)
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 2:
                    p.mul_(3.0)
        _MODELS[kind] = model.eval()
    return _MODELS[kind]


def tokens(engine, run, prompt):
    return list(list(engine.generate(prompt, run))[-1].token_ids)


def test_the_limit_is_read_from_the_rotary_module():
    assert RopeLimit.of(scaled("dynamic")) == RopeLimit("dynamic", 16)
    assert RopeLimit.of(scaled("longrope")) == RopeLimit("longrope", 16, refill=True)
    assert RopeLimit.of(scaled("longrope-llama")) == RopeLimit("longrope", 16, refill=False)
    assert RopeLimit.of(tiny_target("llama")) == RopeLimit()
    dynamic, longrope = RopeLimit("dynamic", 16), RopeLimit("longrope", 16, refill=True)
    assert [dynamic.exact(s, 4) for s in (10, 11, 12, 20)] == [True, True, False, False]
    assert [longrope.exact(s, 4) for s in (11, 12, 16, 17)] == [True, False, False, True]
    assert [longrope.refills(s) for s in (15, 16, 17)] == [False, True, False] and not dynamic.refills(16)
    keeps = RopeLimit("longrope", 16)  # a family whose generate keeps its short keys: no refill
    assert [keeps.exact(s, 4) for s in (11, 12, 15, 16)] == [True, False, False, True] and not keeps.refills(16)
    assert RopeLimit().exact(10 ** 6, 60) and not RopeLimit().refills(0)


@pytest.mark.parametrize("kind", ["dynamic", "longrope", "longrope-llama"])
@pytest.mark.parametrize("prompt", [PROMPT, PROMPT * 2, PROMPT * 3], ids=["8", "16", "24"])  # before, at, past
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_greedy_equals_generate_across_the_original_context(kind, prompt, static):
    model = scaled(kind)
    want = hf_greedy(model, prompt, 40)
    assert tokens(BaselineEngine(model, static=static), RunConfig(max_new_tokens=40, ignore_eos=True), prompt) == want
    for tree in (TreeConfig.chain(4), TreeConfig(depth=3, top_k=2, total_tokens=8)):
        run = RunConfig(max_new_tokens=40, ignore_eos=True, tree=tree)
        for head in (random_eagle1(model), OracleHead(model, prompt[0])):
            assert tokens(SpeculativeEngine(model, head, static=static), run, prompt) == want


def test_longrope_drafts_again_past_the_boundary():
    """Only the rounds before the refill are plain: an oracle draft commits several tokens a round after it."""
    model = scaled("longrope")
    run = RunConfig(max_new_tokens=40, ignore_eos=True, tree=TreeConfig.chain(4))
    events = list(SpeculativeEngine(model, OracleHead(model, PROMPT[0])).generate(PROMPT, run))
    assert events[-1].rounds < 20


@pytest.mark.parametrize("kind", ["dynamic", "longrope"])
def test_seeded_sampling_equals_the_seeded_baseline(kind):
    model = scaled(kind)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=TreeConfig(depth=3, top_k=3, total_tokens=10),
                    sampling=SamplingConfig(temperature=0.8, top_p=0.95, seed=2))
    assert tokens(SpeculativeEngine(model, random_eagle1(model)), run, PROMPT) == tokens(BaselineEngine(model), run,
                                                                                          PROMPT)


def test_the_load_report_says_which_rounds_are_plain(tmp_path):
    from eagle_demo.checkpoints import load_pair

    scaled("longrope").save_pretrained(tmp_path / "phi3")
    notes = load_pair(str(tmp_path / "phi3"), None, device="cpu", dtype="float32").report.adaptations
    assert ("rope type longrope switches factors at 16 positions: the rounds that would straddle it are plain "
            "steps") in notes


def test_rope_rounds_are_counted_and_named_apart_from_the_gate():
    from eagle_demo.decoding.metrics import RunView, summarize
    from eagle_demo.view.stats import stats_html
    from eagle_demo.view.tokens import _plain_note

    model = scaled("dynamic")
    run = RunConfig(max_new_tokens=40, ignore_eos=True, tree=TreeConfig.chain(4))
    events = list(SpeculativeEngine(model, OracleHead(model, PROMPT[0])).generate(PROMPT, run))
    stats = summarize(events)
    plain = [e for e in events if getattr(e, "plain_for", "")]
    assert plain and {e.plain_for for e in plain} == {"rope"} and stats.rope_rounds == len(plain)
    assert stats.plain_rounds == 0 and stats.drafting_tau > 1.0  # the oracle's rounds before the limit
    assert _plain_note(plain[0]) == "no draft: the target's rotary scaling needs a plain step here"
    strip = stats_html(RunView.of(events), None, True, "done")
    assert f"{len(plain)} of {stats.rounds} rounds were plain target steps: the target&#x27;s rotary scaling" in strip
