"""The n-gram draft (`ngram`): its proposals are transformers' prompt lookup's, and the engine stays lossless with
it: greedy equal to transformers' generate, seeded sampling equal to the seeded baseline, on the eager and static
paths, with drafts really accepted."""

import random

import pytest
import torch
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from eagle_demo.common.config import ConfigError, NgramConfig, RunConfig, SamplingConfig
from eagle_demo.decoding.engine import BaselineEngine
from eagle_demo.decoding.events import Round, RunStart
from eagle_demo.decoding.metrics import summarize
from eagle_demo.decoding.ngram import NgramEngine, NgramIndex, cut_all, propose, trie
from fixtures import tiny_target
from test_engine import hf_greedy, model_of
from test_sampling import N, chi2_pvalue, enumerate_probs, sample_runs

PROMPT = [1, 5, 9, 13, 4, 7, 22, 30, 5, 9, 13, 4, 7]  # repeats itself: the draft has something to look up


def test_the_index_proposes_what_a_scan_of_the_whole_context_proposes():
    rng = random.Random(0)
    for _trial in range(400):
        cfg = NgramConfig(min_n=rng.randint(1, 2), max_n=rng.randint(2, 4), tokens=rng.randint(1, 6),
                          branches=rng.randint(1, 3), repeat=rng.random() < 0.5, by_count=rng.random() < 0.5,
                          weak_tokens=rng.randint(0, 3))
        context = [rng.randint(0, 5) for _ in range(rng.randint(1, 40))]
        index = NgramIndex(cfg.min_n, cfg.max_n)
        cut = rng.randint(0, len(context))
        index.add(context[:cut])
        index.add(context[cut:])  # grown in two steps, as the engine grows it
        stops = {rng.randint(0, 5)} if rng.random() < 0.3 else set()
        assert cut_all(index.propose(cfg), stops) == propose(context, cfg, stops)


def test_one_branch_without_repeat_proposes_transformers_prompt_lookup_candidates():
    rng = random.Random(1)
    for _trial in range(200):
        max_n, k = rng.randint(1, 3), rng.randint(1, 8)
        context = [rng.randint(0, 6) for _ in range(rng.randint(2, 30))]
        hf = PromptLookupCandidateGenerator(num_output_tokens=k, max_matching_ngram_size=max_n, max_length=10_000)
        ids, _ = hf.get_candidates(torch.tensor([context]))
        ours = propose(context, NgramConfig.transformers(max_n, k))
        assert (ours[0] if ours else []) == ids[0, len(context):].tolist(), (context, max_n, k)


def test_a_continuation_that_reaches_the_end_repeats_its_period():
    context = [7, 1, 2, 3, 1, 2]  # the suffix (1, 2) first came at 1: period 3, the pattern 3 1 2
    assert propose(context, NgramConfig(1, 2, 7, branches=1, repeat=False)) == [[3, 1, 2]]
    assert propose(context, NgramConfig(1, 2, 7, branches=1, repeat=True)) == [[3, 1, 2, 3, 1, 2, 3]]
    assert propose([4, 4, 4], NgramConfig(1, 2, 3, branches=1)) == [[4, 4, 4]]  # period 1


def test_branches_are_the_next_distinct_continuations_merged_into_one_trie():
    context = [1, 2, 6, 1, 1, 2, 5, 9, 1, 2, 5, 8, 1, 2]  # (1, 2) went on with 6 1, 5 9, 5 8
    earliest = NgramConfig(1, 2, 2, branches=3, by_count=False)
    got = propose(context, earliest)
    assert got == [[6, 1], [5, 9], [5, 8]]
    tree = trie(0, got, torch.device("cpu"))
    assert tree.token_list == (0, 6, 5, 1, 9, 8) and tree.parents == (-1, 0, 0, 1, 2, 2)  # 5 drafted once
    assert tree.depth_list == (0, 1, 1, 2, 2, 2) and not tree.is_chain
    assert propose(context, earliest, stops={9, 6}) == [[5], [5, 8]]
    assert propose(context, NgramConfig(1, 2, 2, branches=3)) == [[5, 9], [5, 8], [6, 1]]  # by count: 5 came twice
    assert propose(context, NgramConfig(1, 2, 2, branches=1)) == [[5, 9]]


def test_a_weak_match_proposes_fewer_tokens():
    context = [3, 1, 4, 1, 5, 9, 2, 6, 8]  # the last token, 8, never came before; (6, 8) neither
    assert propose(context, NgramConfig(1, 2, 5)) == []
    context += [5]  # (8, 5) never came, 5 did: a weak match, one token long
    assert propose(context, NgramConfig(1, 2, 5, weak_tokens=2)) == [[9, 2]]
    assert propose(context, NgramConfig(1, 2, 5, weak_tokens=0)) == [[9, 2, 6, 8, 5]]
    assert propose(context + [9], NgramConfig(1, 2, 5, weak_tokens=2)) == [[2, 6, 8, 5, 9]]  # (5, 9) matched: full


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="n-gram branches"):
        NgramConfig(branches=0)
    with pytest.raises(ConfigError, match="repeat must be true or false"):
        NgramConfig(repeat=1)
    with pytest.raises(ConfigError, match="above"):
        NgramConfig(min_n=3, max_n=2)
    with pytest.raises(ConfigError, match="n-gram tokens"):
        NgramConfig(tokens=0)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
@pytest.mark.parametrize("cfg", [NgramConfig(), NgramConfig(1, 3, 5, branches=3), NgramConfig(2, 4, 1),
                                 NgramConfig.transformers()], ids=lambda c: c.label())
def test_greedy_equals_target_generate(static, cfg):
    model = model_of("llama")
    events = list(NgramEngine(model, static=static).generate(PROMPT, RunConfig(max_new_tokens=48, ignore_eos=True,
                                                                              ngram=cfg)))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 48)
    start = events[0]
    assert isinstance(start, RunStart) and start.mode == "ngram" and start.tree == cfg.label()
    rounds = [e for e in events if isinstance(e, Round)]
    assert sum(len(r.accepted_ids) for r in rounds) > 0  # the drafts were really used
    assert max(len(r.nodes) - 1 for r in rounds) <= cfg.tokens * cfg.branches
    assert max(r.nodes[-1].depth for r in rounds) <= cfg.tokens
    if cfg.branches > 1 and cfg.tokens > 1:  # a round took a branch other than the first (node 1 starts that one)
        assert any(r.accepted_path and r.accepted_path[0] != 1 for r in rounds)


@pytest.fixture(scope="module")
def small():
    return tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)  # a small vocabulary repeats itself


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeded_sampling_equals_seeded_baseline(small, static, seed):
    run = RunConfig(max_new_tokens=40, ignore_eos=True, sampling=SamplingConfig(temperature=1.0, seed=seed))
    ngram = list(NgramEngine(small, static=static).generate([1, 3, 5, 1, 3], run))
    base = list(BaselineEngine(small, static=static).generate([1, 3, 5, 1, 3], run))
    assert ngram[-1].token_ids == base[-1].token_ids
    assert summarize(ngram).tau > 1.0  # drafts accepted under sampling too


@pytest.mark.parametrize("ngram", [NgramConfig.transformers(2, 3), NgramConfig(1, 2, 3, branches=3)],
                         ids=["chain", "trie"])
def test_sampling_is_the_target_distribution(small, ngram):
    cfg = SamplingConfig(temperature=1.3)
    tally, runs = sample_runs(NgramEngine(small), N, cfg, ngram=ngram)
    assert chi2_pvalue(tally, enumerate_probs(small, cfg)) > 1e-3
    if ngram.branches > 1:  # tries were drafted and a later branch accepted
        rounds = [e for events in runs for e in events if isinstance(e, Round)]
        assert any(r.accepted_path and r.accepted_path[0] != 1 for r in rounds)


def test_an_eos_ends_the_run_as_plain_decoding_ends_it():
    model = model_of("llama")
    plain = hf_greedy(model, PROMPT, 48)
    eos = plain[20]  # a token the run produces: it must stop right there
    run = RunConfig(max_new_tokens=48)
    engine = NgramEngine(model)
    engine.eos = frozenset({eos})
    out = list(engine.generate(PROMPT, run))[-1]
    assert list(out.token_ids) == plain[:plain.index(eos) + 1] and out.reason == "eos"
