"""The lean hot paths compute exactly what the stock modules compute: the draft head's own attention against
the stock `transformers` decoder layer, the draft's KV buffers and the pooled target cache against
DynamicCache, and a pooled compaction against a per-layer one."""

import torch
from transformers import DynamicCache

from eagle_demo.drafts.lean import DraftKV
from eagle_demo.target import kv
from eagle_demo.target.kv import BufferCache
from eagle_demo.target.runner import tree_attention_mask
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


def test_fused_weights_are_checked_once_per_drafter_call():
    """Inside one drafter call (`lean.one_call`) the fused q|k|v and gate|up weights are reused unchecked; a weight
    written between calls is picked up by the next one, and outside any call every forward checks."""
    from eagle_demo.drafts import lean

    target = tiny_target("llama")
    head = random_eagle1(target, seed=3)
    torch.manual_seed(0)
    hidden, tokens, positions = torch.randn(3, 64), torch.randint(0, 96, (3,)), torch.arange(3)

    def run():
        return head(hidden, tokens, positions, DraftKV(), None, from_target=True)  # [3, H]

    with torch.inference_mode():
        with lean.one_call():
            before = run()
            call = head.layers[0].self_attn.__dict__["_lean_qkv"][2]
            assert call != 0 and head.layers[0].mlp.__dict__["_lean_gate_up"][2] == call
            torch.testing.assert_close(run(), before, rtol=0, atol=0)
        with torch.no_grad():
            head.layers[0].self_attn.q_proj.weight.mul_(1.5)
            head.layers[0].mlp.up_proj.weight.mul_(0.5)
        with lean.one_call():
            changed = run()
            assert head.layers[0].self_attn.__dict__["_lean_qkv"][2] not in (0, call)
        head.layers[0].mlp.gate_proj.weight.mul_(2.0)  # outside a call: checked at once
        again = run()
    assert not torch.allclose(changed, before) and not torch.allclose(again, changed)
    fresh = random_eagle1(target, seed=3)
    with torch.no_grad():
        fresh.load_state_dict(head.state_dict())
    with torch.inference_mode():
        torch.testing.assert_close(fresh(hidden, tokens, positions, DraftKV(), None, from_target=True), again)


def test_drafter_calls_in_two_threads_keep_their_own_ids():
    """A call that ends in one thread does not end (or leave behind) another thread's call."""
    import threading

    from eagle_demo.drafts import lean

    inside, release, seen = threading.Event(), threading.Event(), {}

    def other():
        with lean.one_call():
            seen["other"] = lean._call()
            inside.set()
            release.wait(5)
        seen["other after"] = lean._call()

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    with lean.one_call():
        mine = lean._call()
    release.set()
    t.join(5)
    assert mine and seen["other"] and mine != seen["other"]
    assert lean._call() == 0 and seen["other after"] == 0


def test_the_blocked_top_k_of_many_rows_equals_a_top_k_over_the_whole_vocabulary():
    """Many rows on a CPU take the two-stage top-k: the same log-probabilities and ids as torch's max / top-k
    over the whole row, best first; tied values give the tied values (ids of those values); a vocabulary
    that is no multiple of the block falls back to torch's."""
    from eagle_demo.drafts import base

    torch.manual_seed(0)
    for rows, vocab in ((16, 8192), (57, 1024), (300, 32000), (20, 1000)):
        logits = torch.randn(rows, vocab) * 4
        logits[3, 5:9] = logits[3].max() + 1  # four tied best values in one row
        logp = torch.log_softmax(logits, -1)
        for k in (1, 2, 4, 8):
            values, ids = base.top_logp(logits, k)
            want = logp.topk(k, -1)
            assert torch.equal(values, want.values), (rows, vocab, k)
            assert torch.equal(logp.gather(1, ids), values)
            untied = torch.arange(rows) != 3
            assert torch.equal(ids[untied], want.indices[untied]), (rows, vocab, k)
            assert set(ids[3].tolist()) <= set(range(5, 9)) or k > 4
    big = torch.randn(64, 4096)
    assert torch.equal(base._blocked_top(torch.log_softmax(big, -1), 3)[1], torch.log_softmax(big, -1).topk(3).indices)
