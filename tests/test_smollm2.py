"""The real default pair: SmolLM2-135M-Instruct (PyPI's GGUF, converted once per machine) with the heads trained
for it here, lossless on every path.

float32: greedy EAGLE output equals plain greedy decoding token for token, for both heads, chain and tree,
growing and static caches; seeded sampling equals seeded plain sampling. The chat template is on, as the page
runs this pair."""

from __future__ import annotations

import pytest

from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.decoding.metrics import summarize
from eagle_demo.session import SMOLLM2_EAGLE1, SMOLLM2_EAGLE3, SMOLLM2_TARGET, load_session

pytestmark = pytest.mark.slow

PROMPTS = ["What is a Python generator?", "Write a short poem about autumn leaves."]
SHAPES = {"chain": TreeConfig(depth=5, top_k=1, total_tokens=6), "tree": TreeConfig(depth=4, top_k=3, total_tokens=10)}
NEW = 40


@pytest.fixture(scope="module", params=["eagle3", "eagle1"])
def session(request):
    draft = {"eagle3": SMOLLM2_EAGLE3, "eagle1": SMOLLM2_EAGLE1}[request.param]
    return load_session(SMOLLM2_TARGET, draft, device="cpu", dtype="float32", threads=2)


@pytest.fixture(scope="module")
def plain(session):
    """Plain greedy decoding of each prompt, once per module (the same target for both heads)."""
    return {p: summarize(session.stream(session.encode(p, chat=True), RunConfig(max_new_tokens=NEW),
                                        mode="baseline")).token_ids for p in PROMPTS}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_greedy_equals_plain_decoding(session, plain, shape, static):
    engine = SpeculativeEngine(session.pair.target, session.pair.head, static=True) if static else session.eagle
    for prompt in PROMPTS:
        run = RunConfig(max_new_tokens=NEW, tree=SHAPES[shape])
        stats = summarize(engine.generate(session.encode(prompt, chat=True), run))
        assert stats.token_ids == plain[prompt], f"{prompt!r}: EAGLE ({shape}, static={static}) left plain decoding"
        assert stats.rounds < stats.new_tokens  # the head drafts something the target accepts


@pytest.mark.parametrize("seed", [0, 1])
def test_seeded_sampling_equals_seeded_plain_sampling(session, seed):
    sampling = SamplingConfig(temperature=0.7, seed=seed)
    ids = session.encode(PROMPTS[0], chat=True)
    run = RunConfig(max_new_tokens=NEW, tree=SHAPES["tree"], sampling=sampling)
    eagle = summarize(session.stream(ids, run)).token_ids
    base = summarize(session.stream(ids, RunConfig(max_new_tokens=NEW, sampling=sampling), mode="baseline")).token_ids
    assert eagle == base


def test_the_pair_loads_in_its_public_layouts(session):
    report = session.report
    assert report.target_layers == 30 and report.family in {"eagle1", "eagle3"}
    assert session.has_chat_template


def test_every_entry_point_defaults_to_this_pair():
    """The page's first preset, `load_session()`'s default and the command line's default are SmolLM2 with its
    EAGLE-3 head; the tiny target keeps its own head."""
    from eagle_demo.app.playground import default_pair
    from eagle_demo.commands.args import pair_from_args
    from eagle_demo.commands.cli import build_parser
    from eagle_demo.session import DEFAULT_DRAFT, DEFAULT_TARGET, SHIPPED_EAGLE1, SHIPPED_TARGET, default_draft_for

    assert (DEFAULT_TARGET, DEFAULT_DRAFT) == (SMOLLM2_TARGET, SMOLLM2_EAGLE3)
    target, draft, name = default_pair(None, None)
    assert target == SMOLLM2_TARGET and draft == "assets/smollm2-eagle3" and name.startswith("SmolLM2")
    assert pair_from_args(build_parser().parse_args(["inspect"])) == (SMOLLM2_TARGET, SMOLLM2_EAGLE3)
    assert default_draft_for(SHIPPED_TARGET) == SHIPPED_EAGLE1 and default_draft_for("other/model") is None


def test_doctor_runs_the_default_pair_end_to_end():
    import subprocess
    import sys

    from eagle_demo.common.paths import ROOT

    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "doctor", "--device", "cpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(line.startswith("ok    default target: SmolLM2-135M-Instruct (Apache-2.0") and "cached at" in line
               for line in lines)
    assert any(line.startswith("ok    default pair: loaded in") and "eagle3" in line for line in lines)
    assert any(line.startswith("ok    lossless: greedy EAGLE equals plain decoding") for line in lines)


def test_a_follow_up_is_encoded_after_the_earlier_turns(session):
    history = (("What is a Python generator?", "A function that yields values one at a time."),)
    ids = session.encode("Show me one.", chat=True, history=history)
    messages = [{"role": "user", "content": history[0][0]}, {"role": "assistant", "content": history[0][1]},
                {"role": "user", "content": "Show me one."}]
    expected = session.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                     return_dict=False)
    assert ids == [int(i) for i in expected]
    assert ids[:len(session.encode(history[0][0], chat=True))] == session.encode(history[0][0], chat=True)
