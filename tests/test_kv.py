"""The preallocated KV cache behaves exactly like transformers' DynamicCache."""

import torch
from transformers import DynamicCache

from eagle_demo.target import kv
from eagle_demo.target.kv import BufferCache
from fixtures import replay_like_dynamic_cache, tiny_target


def test_updates_crops_and_growth_match_dynamic_cache(monkeypatch):
    monkeypatch.setattr(kv, "INITIAL_CAPACITY", 4)  # force several doublings
    torch.manual_seed(0)
    ours = BufferCache()
    replay_like_dynamic_cache(ours, [(3, 0), (2, -1), (5, -3), (1, 0), (7, -2), (9, 0)], layers=(0, 1))
    assert ours.layers[0]._keys.shape[-2] >= ours.get_seq_length() > 4


def test_model_forward_with_buffer_cache_equals_dynamic_cache():
    model = tiny_target("qwen2")
    ids = torch.tensor([[1, 5, 9, 3, 7, 11, 2, 8]])
    with torch.no_grad():
        logits = {}
        for name, cache in (("buffer", BufferCache()), ("dynamic", DynamicCache())):
            first = model(ids[:, :5], cache=cache, use_cache=True).logits
            cache.crop(-2)  # drop two positions, then decode the rest after them
            rest = model(ids[:, 5:], cache=cache, use_cache=True,
                         position_ids=torch.arange(3, 6)[None]).logits
            logits[name] = torch.cat([first, rest], 1)
    torch.testing.assert_close(logits["buffer"], logits["dynamic"], rtol=1e-6, atol=1e-6)
