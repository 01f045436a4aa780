"""The lean hot paths compute exactly what the stock modules compute: the draft head's own attention against
the stock `transformers` decoder layer, the draft's KV buffers and the pooled target cache against
DynamicCache, and a pooled compaction against a per-layer one."""

import torch
from transformers import DynamicCache

from eagle_demo import kv
from eagle_demo.drafts.lean import DraftKV
from eagle_demo.kv import BufferCache
from eagle_demo.target import tree_attention_mask
from fixtures import random_eagle1, replay_like_dynamic_cache, tiny_target


def test_eagle1_lean_layer_equals_stock_decoder_layer():
    target = tiny_target("llama")
    head = random_eagle1(target, seed=3)
    n = 6
    torch.manual_seed(0)
    hidden, tokens = torch.randn(n, 64), torch.randint(0, 96, (n,))
    positions = torch.arange(4, 4 + n)
    mask = tree_attention_mask(0, torch.ones(n, n, dtype=torch.bool).tril(), torch.float32)
    with torch.inference_mode():
        x = head.fc(torch.cat([head.embed(tokens), hidden], -1))[None]  # [1, n, H]
        rope = head.rotary_emb(x, positions[None])
        want = head.layers[0](x, attention_mask=mask, position_ids=positions[None], cache=DynamicCache(),
                              use_cache=True, position_embeddings=rope)
        want = want[0] if isinstance(want, tuple) else want
        got = head(hidden, tokens, positions, DraftKV(capacity=4), None, from_target=True)  # grows the buffers
    torch.testing.assert_close(got, want[0], rtol=1e-5, atol=1e-5)


def test_draft_kv_matches_dynamic_cache_through_crops():
    torch.manual_seed(1)
    replay_like_dynamic_cache(DraftKV(capacity=2), [(3, 0), (4, -2), (1, 0), (5, -5), (6, 0)])


def test_pooled_cache_grows_and_compacts_like_per_layer(monkeypatch):
    monkeypatch.setattr(kv, "INITIAL_CAPACITY", 3)
    torch.manual_seed(2)
    pooled, single, ref = BufferCache(num_layers=3), BufferCache(), DynamicCache()
    for n in (2, 4, 5):
        for layer in range(3):
            k, v = torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 4)
            for cache in (pooled, single, ref):
                cache.update(k, v, layer)
    assert pooled.fully_pooled and not single.fully_pooled
    src = torch.tensor([6, 8, 10])
    pooled.compact(5, src)
    single.compact(5, src)
    for cache in (pooled, single):
        cache.crop(-3)
    for a, b, r in zip(pooled.layers, single.layers, ref.layers):
        want_k = torch.cat([r.keys[..., :5, :], r.keys[..., src, :]], -2)
        torch.testing.assert_close(a.keys, want_k, rtol=0, atol=0)
        torch.testing.assert_close(b.keys, want_k, rtol=0, atol=0)
        torch.testing.assert_close(a.values, torch.cat([r.values[..., :5, :], r.values[..., src, :]], -2))
