"""The drafter contract (`decoding.draft_source.DraftSource`): the EAGLE head's `Drafter` and the n-gram
`NgramDrafter` pass the same checks. `begin` starts a run afresh, `draft` proposes a well-formed tree after the
root and commits nothing, `extend` commits (in pieces or at once alike), and the one engine, given either drafter,
decodes greedily exactly as plain decoding does, on the eager and the static path."""

import pytest
import torch

from eagle_demo.common.config import RunConfig
from eagle_demo.decoding.draft_source import DraftSource
from eagle_demo.decoding.drafter import Drafter
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.events import Round, RunStart
from eagle_demo.decoding.ngram import NgramDrafter, NgramEngine
from fixtures import random_eagle1
from test_engine import hf_greedy, model_of

PROMPT = [1, 5, 9, 13, 4, 7, 22, 30, 5, 9, 13, 4, 7]  # repeats itself: the n-gram draft has something to look up
RUN = RunConfig(max_new_tokens=40, ignore_eos=True)


def eagle(model, static=False):
    return Drafter(random_eagle1(model), static=static)


def ngram(model, static=False):
    return NgramDrafter(model.get_output_embeddings().weight.device)


DRAFTERS = pytest.mark.parametrize("make", [eagle, ngram], ids=["eagle", "ngram"])


def started(make, prompt=PROMPT, pieces=1, drafter=None):
    """A drafter (a new one from `make`, or `drafter`) begun on `prompt` and given its pairs as the engine gives
    them after the prefill (pair i is the target's feature i and token i+1), in `pieces` extends; returns
    (drafter, the run's tree shape)."""
    model = model_of("llama")
    drafter = drafter or make(model)
    engine = SpeculativeEngine(model, drafter)
    run = drafter.run_for(RUN)
    need = len(prompt) + RUN.max_new_tokens + run.tree.total_tokens
    drafter.begin(prompt[:-1], run, frozenset(), need, run.tree.depth * run.tree.top_k)
    engine.runner.reset(need)
    features = engine.runner.forward(torch.tensor(prompt[:-1])).features  # [n, F]
    tokens = torch.tensor(prompt[1:])
    for part in torch.arange(len(tokens)).tensor_split(pieces):
        drafter.extend(features[part], tokens[part])
    engine.runner.reset()
    return drafter, run.tree


def shape_of(tree):
    return tree.token_list, tree.parents, tree.depth_list


@DRAFTERS
def test_both_drafters_keep_the_contract(make):
    drafter = make(model_of("llama"))
    assert isinstance(drafter, DraftSource)
    assert drafter.mode in ("eagle", "ngram") and drafter.family


@DRAFTERS
def test_a_draft_is_a_tree_after_the_root(make):
    drafter, cfg = started(make)
    tree = drafter.draft(PROMPT[-1], cfg)
    tokens, parents, depths = shape_of(tree)
    assert tokens[0] == PROMPT[-1] and parents[0] == -1 and depths[0] == 0
    assert 1 < len(tokens) <= cfg.total_tokens  # the prompt repeats: both drafts propose something
    for i in range(1, len(tokens)):
        assert 0 <= parents[i] < i and depths[i] == depths[parents[i]] + 1 <= cfg.depth
    assert tree.mask.shape == (len(tokens), len(tokens))


@DRAFTERS
def test_a_draft_commits_nothing(make):
    drafter, cfg = started(make)
    first = shape_of(drafter.draft(PROMPT[-1], cfg))
    assert shape_of(drafter.draft(PROMPT[-1], cfg)) == first


@DRAFTERS
def test_extending_in_pieces_commits_what_one_extend_does(make):
    whole, cfg = started(make, pieces=1)
    pieces, _ = started(make, pieces=3)
    assert shape_of(pieces.draft(PROMPT[-1], cfg)) == shape_of(whole.draft(PROMPT[-1], cfg))


@DRAFTERS
def test_begin_starts_afresh(make):
    fresh, cfg = started(make)
    used, _ = started(make, prompt=[7, 7, 3, 8, 7, 7, 3, 2, 9])  # a drafter that ran on another prompt
    used.draft(9, cfg)
    again, _ = started(make, drafter=used)
    assert shape_of(again.draft(PROMPT[-1], cfg)) == shape_of(fresh.draft(PROMPT[-1], cfg))


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
@DRAFTERS
def test_greedy_equals_plain_decoding(make, static):
    model = model_of("llama")
    events = list(SpeculativeEngine(model, make(model, static), static=static).generate(PROMPT, RUN))
    plain = list(BaselineEngine(model, static=static).generate(PROMPT, RUN))
    assert events[-1].token_ids == plain[-1].token_ids
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, RUN.max_new_tokens)
    start = events[0]
    assert isinstance(start, RunStart) and start.mode == make.__name__
    assert any(len(e.nodes) > 1 for e in events if isinstance(e, Round))  # rounds really drafted


def test_the_engine_takes_a_head_or_a_drafter_alike():
    model = model_of("llama")
    head = random_eagle1(model)
    by_head = list(SpeculativeEngine(model, head).generate(PROMPT, RUN))
    by_drafter = list(SpeculativeEngine(model, Drafter(head)).generate(PROMPT, RUN))
    assert by_head[-1].token_ids == by_drafter[-1].token_ids
    assert [e.accepted_path for e in by_head if isinstance(e, Round)] == \
        [e.accepted_path for e in by_drafter if isinstance(e, Round)]
    by_engine = list(NgramEngine(model).generate(PROMPT, RUN))
    by_source = list(SpeculativeEngine(model, ngram(model)).generate(PROMPT, RUN))
    assert by_engine[0] == by_source[0] and by_engine[-1].token_ids == by_source[-1].token_ids
