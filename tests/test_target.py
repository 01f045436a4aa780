"""The target runner: tree forward equals plain causal forwards; compaction equals a fresh prefill."""

import pytest
import torch

from eagle_demo.decoding.tree import make_tree
from eagle_demo.target.features import Features
from eagle_demo.target.runner import TargetRunner
from fixtures import tiny_target

PREFIX = [1, 7, 3, 9, 12, 4]
# root 20; children 21, 22; 21 -> 23, 24; 23 -> 25; 22 -> 26
TOKENS = [20, 21, 22, 23, 24, 26, 25]
PARENTS = [-1, 0, 0, 1, 1, 2, 3]


def tree():
    depths = []
    for p in PARENTS:
        depths.append(0 if p < 0 else depths[p] + 1)
    return make_tree(TOKENS, PARENTS, depths, [1.0] * 7, [1.0] * 7)


@pytest.mark.parametrize("family", ["llama", "qwen2", "tied", "qwen3"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_tree_forward_matches_path_forwards(family, attn):
    model = tiny_target(family, attn=attn)
    runner = TargetRunner(model)
    runner.forward(torch.tensor(PREFIX))
    runner.commit(list(range(len(PREFIX))))
    t = tree()
    out = runner.forward(t.tokens, t.depths, t.mask)
    for node in range(t.size):
        path = [0] + t.path_to(node)
        seq = PREFIX + [TOKENS[i] for i in path]
        with torch.no_grad():
            ref = model(torch.tensor([seq])).logits[0, -1]
        torch.testing.assert_close(out.logits[node], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_compaction_equals_fresh_prefill(family):
    model = tiny_target(family)
    runner = TargetRunner(model)
    runner.forward(torch.tensor(PREFIX))
    runner.commit(list(range(len(PREFIX))))
    t = tree()
    runner.forward(t.tokens, t.depths, t.mask)
    keep = [0, 1, 3, 6]  # root -> 21 -> 23 -> 25
    runner.commit(keep)
    fresh = TargetRunner(model)
    fresh.forward(torch.tensor(PREFIX + [TOKENS[i] for i in keep]))
    fresh.commit(list(range(len(PREFIX) + len(keep))))
    assert runner.cache_length() == fresh.cache_length() == len(PREFIX) + len(keep)
    for a, b in zip(runner.cache.layers, fresh.cache.layers):
        torch.testing.assert_close(a.keys, b.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(a.values, b.values, rtol=1e-4, atol=1e-5)
    # one more decode step gives identical logits
    nxt = torch.tensor([5])
    torch.testing.assert_close(runner.forward(nxt).logits, fresh.forward(nxt).logits, rtol=1e-4, atol=1e-4)


def test_features_are_lm_head_inputs_and_hidden_states():
    model = tiny_target("llama", layers=8)
    ids = torch.tensor(PREFIX)
    with torch.no_grad():
        ref = model(ids[None], output_hidden_states=True)
    out = TargetRunner(model).forward(ids)
    torch.testing.assert_close(out.features, ref.hidden_states[-1][0])
    with torch.no_grad():
        torch.testing.assert_close(model.lm_head(out.features), ref.logits[0])
    runner3 = TargetRunner(model, (2, 4, 5))
    out3 = runner3.forward(ids)
    expect = torch.cat([ref.hidden_states[i][0] for i in (2, 4, 5)], -1)
    torch.testing.assert_close(out3.features, expect)


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_feature_index_l_is_the_last_layers_output_before_the_final_norm(static):
    """vLLM and SGLang capture index L (after the last layer) before the final norm; HF's hidden_states[L] is after
    it. The runner gives the engines' reading (a draft fed the normed state drafts differently: docs/vllm.md)."""
    model = tiny_target("llama", layers=8)
    ids = torch.tensor(PREFIX)
    kept = {}
    hook = model.model.layers[-1].register_forward_hook(lambda m, a, o: kept.setdefault("h", o[0] if isinstance(
        o, tuple) else o))
    with torch.no_grad():
        ref = model(ids[None], output_hidden_states=True)
    hook.remove()
    assert not torch.allclose(kept["h"], ref.hidden_states[8])  # the two readings differ
    runner = TargetRunner(model, (2, 4, 8), static=static, graphs=False)
    runner.reset(64)
    assert (runner.static is not None) is static
    out = runner.forward(ids)
    torch.testing.assert_close(out.features, torch.cat([ref.hidden_states[2][0], ref.hidden_states[4][0],
                                                        kept["h"][0]], -1), rtol=1e-4, atol=1e-5)


def test_training_features_match_the_engines_reading_of_index_l():
    """Training builds a head's data with the engines' reading (`Features.of_batch`): row by row equal to what the
    runner hands the draft, index L included (before the final norm, not HF's hidden_states[L])."""
    model = tiny_target("llama", layers=8)
    ids = torch.tensor([PREFIX, PREFIX[::-1]])  # [2, T]
    with Features(model.model, (2, 8)) as taken, torch.no_grad():
        out = model.model(ids, output_hidden_states=True)
    batch = taken.of_batch(out.hidden_states)  # [2, T, 2H]
    assert not torch.allclose(batch[..., -model.config.hidden_size:], out.hidden_states[8])
    for row in range(2):
        features = TargetRunner(model, (2, 8)).forward(ids[row]).features  # [T, 2H]
        torch.testing.assert_close(batch[row], features, rtol=1e-4, atol=1e-5)
