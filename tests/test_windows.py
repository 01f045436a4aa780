"""Targets with a sliding attention window in use stay lossless on every path that passes its own 4-D mask: tree
verifies on the growing cache, every forward on the static cache, and the packed calibration texts. The window
(6 tokens) is shorter than the prompt, so every round attends across its edge."""

import pytest
import torch
from transformers import Gemma2Config, MistralConfig, Qwen2Config

from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.target.windows import AttentionWindow
from fixtures import OracleHead, random_eagle1, random_eagle3, tiny_target
from test_engine import PROMPT, hf_greedy

WINDOW = 6
TREES = [TreeConfig.chain(4), TreeConfig(depth=3, top_k=2, total_tokens=8),
         TreeConfig(depth=4, top_k=4, total_tokens=16)]
_MODELS = {}


def windowed(family: str):
    """mistral: every layer slides; qwen2: the first layer is full and the others slide (a mask per layer type)."""
    if family not in _MODELS:
        _MODELS[family] = tiny_target(family, layers=3, seed=3, window=WINDOW)
    return _MODELS[family]


def tokens(engine, run, prompt=PROMPT):
    return list(list(engine.generate(prompt, run))[-1].token_ids)


def test_the_window_is_read_from_the_config():
    class Model:
        def __init__(self, config):
            self.config = config

    assert AttentionWindow.of(Model(MistralConfig(sliding_window=4096))) == AttentionWindow(4096)
    assert AttentionWindow.of(Model(MistralConfig(sliding_window=None))) == AttentionWindow(None)
    assert AttentionWindow.of(Model(Qwen2Config(use_sliding_window=False))) == AttentionWindow(None)
    every_layer_full = Qwen2Config(use_sliding_window=True, num_hidden_layers=4, max_window_layers=4)
    assert AttentionWindow.of(Model(every_layer_full)) == AttentionWindow(None)
    assert AttentionWindow.of(Model(Qwen2Config(use_sliding_window=True, num_hidden_layers=4,
                                                max_window_layers=2))) == AttentionWindow(4096, mixed=True)
    assert AttentionWindow.of(Model(Gemma2Config(num_hidden_layers=4))) == AttentionWindow(4096, mixed=True)


def test_the_window_hides_keys_more_than_its_size_behind():
    mask = torch.zeros(1, 1, 2, 10)  # [1, 1, n, K]
    keys, queries = torch.arange(10), torch.tensor([8, 9])
    got = AttentionWindow(3).apply(mask, keys, queries)[0, 0]  # [n, K]
    assert (got == 0).tolist() == [[k > q - 3 for k in range(10)] for q in (8, 9)]
    both = AttentionWindow(3, mixed=True).apply(mask, keys, queries)
    assert both["full_attention"] is mask and torch.equal(both["sliding_attention"][0, 0], got)
    assert AttentionWindow(None).apply(mask, keys, queries) is mask


@pytest.mark.parametrize("family", ["mistral", "qwen2"])
@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.label())
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_windowed_target_greedy_equals_its_generate(family, tree, static):
    model = windowed(family)
    want = hf_greedy(model, PROMPT, 32)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree)
    for head in (random_eagle1(model), OracleHead(model, PROMPT[0])):  # rejections, then long accepted paths
        assert tokens(SpeculativeEngine(model, head, static=static), run) == want
    assert tokens(BaselineEngine(model, static=static), run) == want


def test_windowed_target_eagle3_features():
    model = windowed("qwen2")
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=TreeConfig(3, 3, 10))
    assert tokens(SpeculativeEngine(model, random_eagle3(model, draft_vocab=48)), run) == hf_greedy(model, PROMPT, 32)


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_windowed_target_seeded_sampling_equals_the_seeded_baseline(static):
    model = windowed("mistral")
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=3, total_tokens=10),
                    sampling=SamplingConfig(temperature=0.8, top_p=0.95, seed=4))
    assert (tokens(SpeculativeEngine(model, random_eagle1(model), static=static), run)
            == tokens(BaselineEngine(model), run))


@pytest.mark.parametrize("family", ["mistral", "qwen2"])
def test_windowed_packed_texts_equal_each_prompts_own_plain_decoding(family):
    from eagle_demo.autotree.packed_text import greedy_texts

    model = windowed(family)
    plain = BaselineEngine(model)
    prompts = [[5, 9, 20, 17, 3, 44, 91], [1], list(range(40, 60))]
    want = [tokens(plain, RunConfig(max_new_tokens=16, ignore_eos=True), p) for p in prompts]
    assert greedy_texts(plain.runner, prompts, 16) == want
