"""Families whose causal-LM forward changes the projection's logits (Gemma 2/3's softcap, Cohere's logit scale,
Granite's logits scaling) get the model's own logits on every engine path, so sampling draws from the target's
distribution; a target that does something else after the projection is refused at load."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, CohereConfig, Gemma2Config, Gemma3TextConfig, GraniteConfig

from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.target.check import check_target
from eagle_demo.target.logit_head import LogitHead
from eagle_demo.target.runner import TargetRunner
from fixtures import random_eagle1, tiny_target
from test_engine import PROMPT, hf_greedy
from test_sampling import chi2_pvalue, enumerate_probs, sample_counts


def scaled_target(family: str, vocab: int = 96, hidden: int = 64, layers: int = 3, seed: int = 3):
    """A random tiny model of a family with a logit transform, set strong enough to change the distribution."""
    common = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if family == "gemma2":  # local layers with a 6-token window as well
        cfg = Gemma2Config(**common, head_dim=16, final_logit_softcapping=2.0, sliding_window=6,
                           tie_word_embeddings=False)
    elif family == "gemma3":  # Gemma 3's text model: a window on its local layers, a softcap set here
        cfg = Gemma3TextConfig(**common, head_dim=16, final_logit_softcapping=3.0, sliding_window=6,
                               layer_types=["sliding_attention", "full_attention", "sliding_attention"][:layers],
                               tie_word_embeddings=False)
    elif family == "cohere":
        cfg = CohereConfig(**common, logit_scale=0.25, tie_word_embeddings=False)
    elif family == "granite":
        cfg = GraniteConfig(**common, logits_scaling=4.0, tie_word_embeddings=False)
    else:
        raise ValueError(family)
    torch.manual_seed(seed)
    attn = "eager" if family == "gemma2" else "sdpa"  # Gemma 2 has no SDPA path (the loader falls back the same way)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
        model.get_output_embeddings().weight.mul_(8.0)  # logits of a few units, where a softcap of 2 bends them
    return model.eval()


FAMILIES = ["gemma2", "gemma3", "cohere", "granite"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_the_runners_logits_are_the_models_own(family, static):
    model = scaled_target(family)
    head = check_target(model)
    assert not head.identity and head == LogitHead.of(model)
    runner = TargetRunner(model, static=static)
    runner.reset(64)
    ids = torch.tensor(PROMPT)
    got = runner.forward(ids).logits  # [n, V]
    want = model(ids[None]).logits[0]  # [n, V]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert LogitHead.of(tiny_target("llama")).identity


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_scaled_families_greedy_equals_their_generate(family, static):
    model = scaled_target(family)
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=2, total_tokens=8))
    events = list(SpeculativeEngine(model, random_eagle1(model), static=static).generate(PROMPT, run))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 24)


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_softcapped_sampling_is_the_models_own_distribution(static):
    """A softcap of 2 flattens the distribution a lot: sampling from the raw projection fails this test."""
    small = scaled_target("gemma2", vocab=8, hidden=32, layers=2, seed=5)
    cfg = SamplingConfig(temperature=1.0)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5), static=static)
    counts = sample_counts(engine, cfg, TreeConfig(depth=3, top_k=3, total_tokens=10), n=800)
    assert chi2_pvalue(counts, enumerate_probs(small, cfg), n=800) > 1e-3
    plain = sample_counts(BaselineEngine(small, static=static), cfg, TreeConfig.chain(1), n=800)
    assert chi2_pvalue(plain, enumerate_probs(small, cfg), n=800) > 1e-3


def test_a_target_with_an_unrepeated_logit_change_is_refused(tmp_path):
    """A Llama config that names a softcap its forward never applies: the engine would apply it, the model would
    not, so the load stops with one line instead of sampling from another distribution."""
    from eagle_demo.checkpoints import CheckpointError, load_pair
    from layouts import write_target

    model = tiny_target("llama")
    model.config.final_logit_softcapping = 2.0
    with pytest.raises(ValueError, match="after the output projection"):
        check_target(model)
    folder = write_target(tmp_path / "t")
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "final_logit_softcapping": 2.0}))
    with pytest.raises(CheckpointError, match="does not repeat") as err:
        load_pair(str(folder), None, device="cpu", dtype="float32")
    assert "\n" not in str(err.value)


def test_the_load_report_names_the_logit_head_and_the_window(tmp_path):
    """A Gemma 2 folder loads (eager attention, as the loader falls back) and its report says what the engines do
    for it beyond the stock base model."""
    from eagle_demo.checkpoints import load_pair

    scaled_target("gemma2").save_pretrained(tmp_path / "gemma2")
    pair = load_pair(str(tmp_path / "gemma2"), None, device="cpu", dtype="float32")
    notes = pair.report.adaptations
    assert notes[0].startswith("target check: the engines' prefill, tree and compacted-cache logits equal")
    assert "logits after the output projection as the gemma2 forward does: softcap 2" in notes
    assert "sliding window of 6 tokens applied in the engines' own masks (full and sliding layers: a mask per " \
           "layer type)" in notes
    assert "softcap 2" in pair.report.to_markdown()


def test_generation_settings_the_pipeline_does_not_apply_are_named(tmp_path):
    """A target whose generation_config.json sets a repetition penalty (as Qwen2.5's instruct models do) or n-gram
    blocking loads with warnings that name them: the penalty applies only when a run sets it, the blocking never."""
    from transformers import GenerationConfig

    from eagle_demo.checkpoints import load_pair
    from eagle_demo.decoding.sampling import generation_warnings
    from layouts import write_target

    assert generation_warnings(GenerationConfig(temperature=0.7, top_p=0.8, top_k=20, do_sample=True)) == []
    assert generation_warnings(None) == []
    folder = write_target(tmp_path / "t")
    GenerationConfig(repetition_penalty=1.05, no_repeat_ngram_size=3, bos_token_id=1).save_pretrained(folder)
    warnings = load_pair(str(folder), None, device="cpu", dtype="float32").report.warnings
    assert any("sets no_repeat_ngram_size 3, which neither engine applies" in w for w in warnings)
    assert any("sets repetition_penalty 1.05; runs apply a penalty only when one is set" in w for w in warnings)
