"""Sampling is exactly the target's distribution: enumerated chi-square tests, a negative control that
must fail, and seeded token-for-token equality with the baseline."""


import pytest
import torch
from scipy.stats import chisquare

import eagle_demo.decoding.engine as engine_mod
from eagle_demo.common.config import ConfigError, RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.acceptance import Verdict
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.sampling import PositionSampler, process_logits
from fixtures import random_eagle1, tiny_target

PROMPT = [1, 3, 5]
L = 3
N = 1500


@pytest.fixture(scope="module")
def small():
    return tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)


def enumerate_probs(model, cfg, processor=None):
    """Exact probability of every length-L continuation under the processed target distribution. processor: a
    transformers logits processor applied first (called with the ids so far), e.g. a repetition penalty."""
    probs = {}
    with torch.no_grad():
        def rec(prefix, p):
            if len(prefix) == len(PROMPT) + L:
                probs[tuple(prefix[len(PROMPT):])] = p
                return
            scores = model(torch.tensor([prefix])).logits[0, -1:]
            if processor is not None:
                scores = processor(torch.tensor([prefix]), scores.float())
            dist = process_logits(scores, cfg)[0]
            for t in range(dist.shape[0]):
                if dist[t] > 0:
                    rec(prefix + [t], p * float(dist[t]))
        rec(list(PROMPT), 1.0)
    return probs


def sample_counts(engine, cfg, tree, n=N):
    return sample_runs(engine, n, cfg, tree=tree)[0]


def sample_runs(engine, n: int, cfg: SamplingConfig, **fields):
    """One run per seed 0..n-1 (L new tokens from PROMPT, sampled as `cfg` says, other RunConfig fields as
    given): (how often each token sequence came, every run's events)."""
    tally, runs = {}, []
    for seed in range(n):
        s = SamplingConfig(temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k, seed=seed)
        run = RunConfig(max_new_tokens=L, ignore_eos=True, sampling=s, **fields)
        events = list(engine.generate(PROMPT, run))
        key = tuple(events[-1].token_ids)
        tally[key] = tally.get(key, 0) + 1
        runs.append(events)
    return tally, runs


def chi2_pvalue(counts, probs, n=N):
    assert set(counts) <= set(probs), "a sequence with zero target probability was produced"
    cells = sorted(probs, key=lambda k: probs[k])
    obs, exp, acc_o, acc_e = [], [], 0, 0.0
    for c in cells:  # merge small cells (expected < 5) from the rare end
        acc_o += counts.get(c, 0)
        acc_e += probs[c] * n
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o, acc_e = 0, 0.0
    if acc_e > 0:
        obs[-1] += acc_o
        exp[-1] += acc_e
    scale = sum(obs) / sum(exp)
    return chisquare(obs, [e * scale for e in exp]).pvalue


SETTINGS = [
    ("chain", TreeConfig.chain(3), SamplingConfig(temperature=1.3)),
    ("hot-chain", TreeConfig.chain(3, 0.05, hot_vocab=4), SamplingConfig(temperature=1.3)),  # drafts over ids 0..3
    ("tree", TreeConfig(depth=3, top_k=3, total_tokens=10), SamplingConfig(temperature=1.3)),
    ("tree-topk-topp", TreeConfig(depth=2, top_k=2, total_tokens=5),
     SamplingConfig(temperature=0.9, top_k=5, top_p=0.9)),
]


@pytest.mark.parametrize("name,tree,cfg", SETTINGS, ids=[s[0] for s in SETTINGS])
@pytest.mark.slow
def test_speculative_sampling_matches_enumerated_distribution(small, name, tree, cfg):
    probs = enumerate_probs(small, cfg)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5))
    counts = sample_counts(engine, cfg, tree)
    # the drafts were really used: some rounds accepted draft tokens
    assert chi2_pvalue(counts, probs) > 1e-3


@pytest.mark.slow
def test_negative_control_biased_verifier_fails(small, monkeypatch):
    """Accepting any drafted child the target finds plausible (p >= 0.05) is NOT lossless: it must fail."""
    cfg = SamplingConfig(temperature=1.3)

    def biased(tree, logits, sampling, sampler, position, seen=None):
        path, node = [], 0
        while True:
            p = process_logits(logits[node:node + 1], sampling)[0]
            kids = [c for t, c in tree.children[node].items() if p[t] >= 0.05]
            if not kids:
                token = sampler.sample(p, position + len(path))
                return Verdict(tuple(path), token, (1.0,) * (len(path) + 1))
            path.append(kids[0])
            node = kids[0]

    monkeypatch.setattr(engine_mod, "verify_tree", biased)
    probs = enumerate_probs(small, cfg)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5))
    counts = sample_counts(engine, cfg, TreeConfig(depth=3, top_k=3, total_tokens=10))
    assert chi2_pvalue(counts, probs) < 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_seeded_sampling_equals_seeded_baseline(seed):
    model = tiny_target("qwen2", seed=seed)
    cfg = SamplingConfig(temperature=0.8, top_p=0.95, top_k=40, seed=seed)
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=3, total_tokens=10),
                    sampling=cfg)
    prompt = [1, 4, 8, 15, 16, 23, 42]
    eagle = list(SpeculativeEngine(model, random_eagle1(model)).generate(prompt, run))[-1].token_ids
    base = list(BaselineEngine(model).generate(prompt, run))[-1].token_ids
    assert eagle == base


def test_top_k_and_top_p_pipeline():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    p = process_logits(logits, SamplingConfig(temperature=1.0, top_k=3))[0]
    assert (p[3:] == 0).all() and p.sum().item() == pytest.approx(1.0)
    full = torch.softmax(logits[0], -1)
    p = process_logits(logits, SamplingConfig(temperature=1.0, top_p=0.7))[0]
    keep = (full.cumsum(0) - full) < 0.7
    assert ((p > 0) == keep).all()
    p = process_logits(logits, SamplingConfig(temperature=1.0, top_p=1e-6))[0]
    assert p.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_position_sampler_never_picks_zero_probability():
    probs = torch.tensor([0.0, 0.5, 0.0, 0.5, 0.0])
    s = PositionSampler(7)
    picks = {s.sample(probs, i) for i in range(500)}
    assert picks == {1, 3}


def test_sampling_config_rejects_out_of_range():
    for bad in (dict(temperature=-1), dict(temperature=11), dict(top_p=0), dict(top_p=1.5), dict(top_k=-1)):
        with pytest.raises(ConfigError):
            SamplingConfig(**bad)
