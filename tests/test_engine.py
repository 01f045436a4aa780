"""Greedy EAGLE output equals plain greedy decoding of the target, token for token (fp32)."""

import threading

import pytest
import torch

from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.events import Finish, Prefill, Round, RunStart
from eagle_demo.decoding.metrics import summarize
from fixtures import OracleHead, random_eagle1, random_eagle3, tiny_target

PROMPT = [1, 5, 9, 13, 4, 7, 22, 30]
TREES = [TreeConfig.chain(1), TreeConfig.chain(4), TreeConfig(depth=3, top_k=2, total_tokens=8),
         TreeConfig(depth=4, top_k=4, total_tokens=16), TreeConfig(depth=5, top_k=10, total_tokens=60)]
_MODELS = {}


def model_of(family, layers=4):
    key = (family, layers)
    if key not in _MODELS:
        _MODELS[key] = tiny_target(family, layers=layers)
    return _MODELS[key]


def hf_greedy(model, prompt, n, eos=None):
    out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=n, eos_token_id=eos,
                         pad_token_id=0, attention_mask=torch.ones(1, len(prompt), dtype=torch.long))
    return out[0, len(prompt):].tolist()


def run(engine, n=32, tree=TreeConfig(), ignore_eos=True, prompt=PROMPT):
    return list(engine.generate(prompt, RunConfig(max_new_tokens=n, ignore_eos=ignore_eos, tree=tree)))


@pytest.mark.parametrize("family", ["llama", "qwen2", "tied"])
@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.label())
@pytest.mark.parametrize("draft", ["random", "oracle"])
def test_greedy_equals_target_generate(family, tree, draft):
    model = model_of(family)
    head = random_eagle1(model) if draft == "random" else OracleHead(model, PROMPT[0])
    events = run(SpeculativeEngine(model, head), tree=tree)
    assert isinstance(events[0], RunStart) and isinstance(events[1], Prefill) and isinstance(events[-1], Finish)
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 32)


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen3"])
def test_greedy_eagle3_random_head(family):
    model = model_of(family, layers=8)
    events = run(SpeculativeEngine(model, random_eagle3(model, draft_vocab=48)), tree=TreeConfig(3, 3, 10))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 32)


def test_oracle_draft_really_accepts_many_tokens():
    model = model_of("llama")
    events = run(SpeculativeEngine(model, OracleHead(model, PROMPT[0], swap_rate=0.1)), n=48,
                 tree=TreeConfig(depth=5, top_k=2, total_tokens=12))
    stats = summarize(events)
    assert stats.tau > 2.0
    rounds = [e for e in events if isinstance(e, Round)]
    assert max(len(r.accepted_ids) for r in rounds) >= 3
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 48)


def _multi_token_rounds(events):
    return [r for r in events if isinstance(r, Round) and len(r.accepted_ids) >= 2]


def test_eos_inside_an_accepted_block():
    model = model_of("llama")
    head = OracleHead(model, PROMPT[0], swap_rate=0.1)
    free = run(SpeculativeEngine(model, head), n=48, tree=TreeConfig(5, 2, 12))
    tokens = list(free[-1].token_ids)
    chosen = None
    for r in _multi_token_rounds(free):
        cand = r.accepted_ids[0]
        first = tokens.index(cand)
        start = r.total_new_tokens - len(r.committed_ids)
        if first == start:  # the token's first appearance is this round's first accepted token
            chosen = cand
            break
    assert chosen is not None, "no suitable multi-token round"
    model.generation_config.eos_token_id = chosen
    try:
        events = run(SpeculativeEngine(model, head), n=48, ignore_eos=False, tree=TreeConfig(5, 2, 12))
    finally:
        model.generation_config.eos_token_id = 2
    expect = hf_greedy(model, PROMPT, 48, eos=chosen)
    assert list(events[-1].token_ids) == expect and expect[-1] == chosen
    assert events[-1].reason == "eos"
    last = [e for e in events if isinstance(e, Round)][-1]
    assert len(last.committed_ids) < len(last.accepted_ids) + 1  # the EOS cut the accepted block


def test_max_new_tokens_lands_mid_block():
    model = model_of("qwen2")
    head = OracleHead(model, PROMPT[0], swap_rate=0.1)
    free = run(SpeculativeEngine(model, head), n=48, tree=TreeConfig(5, 2, 12))
    r = _multi_token_rounds(free)[1]
    n = r.total_new_tokens - 1  # inside that round's block
    events = run(SpeculativeEngine(model, head), n=n, tree=TreeConfig(5, 2, 12))
    assert events[-1].new_tokens == n and events[-1].reason == "length"
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, n)


def test_baseline_engine_equals_generate_and_reports_steps():
    model = model_of("llama")
    events = run(BaselineEngine(model), n=20)
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 20)
    assert events[-1].rounds == 19  # the prefill produces the first token


def test_stop_event_ends_run_and_next_run_is_correct():
    model = model_of("llama")
    engine = SpeculativeEngine(model, OracleHead(model, PROMPT[0]))
    stop = threading.Event()
    gen = engine.generate(PROMPT, RunConfig(max_new_tokens=40, ignore_eos=True), stop)
    for e in gen:
        if isinstance(e, Round):
            stop.set()
    assert e.reason == "stopped" and e.new_tokens < 40
    assert list(run(engine, n=32)[-1].token_ids) == hf_greedy(model, PROMPT, 32)


def test_events_hold_plain_values_only():
    model = model_of("llama")
    events = run(SpeculativeEngine(model, OracleHead(model, PROMPT[0])), n=12)

    def plain(v):
        if isinstance(v, (int, float, str, bool)) or v is None:
            return True
        if isinstance(v, (tuple, list)):
            return all(plain(x) for x in v)
        if isinstance(v, dict):
            return all(plain(x) for x in v.values())
        if hasattr(v, "__dataclass_fields__"):
            return all(plain(getattr(v, f)) for f in v.__dataclass_fields__)
        return False

    assert all(plain(e) for e in events)
