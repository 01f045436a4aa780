"""The CPU target's grouped-query SDPA (`attention`): the same attention as transformers' stock SDPA call, and
engines over it as lossless as over the stock call (greedy equal to the stock model's own generate, seeded
sampling equal to the stock baseline), eager and static."""

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

from eagle_demo.checkpoints import load_pair
from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET
from eagle_demo.target import attention
from eagle_demo.target.runner import TargetRunner
from fixtures import random_eagle1, random_eagle3, tiny_target
from test_engine import PROMPT, hf_greedy, model_of

TREES = [TreeConfig.chain(1), TreeConfig.chain(6), TreeConfig.chain(16, 0.05), TreeConfig(depth=3, top_k=2,
                                                                                          total_tokens=8),
         TreeConfig(depth=4, top_k=4, total_tokens=16)]
_GROUPED = {}


def grouped(family: str, layers: int = 4, attn: str = attention.NAME):
    """The same weights as `model_of(family)` (same seed), attention through `attn`."""
    if (family, layers, attn) not in _GROUPED:
        _GROUPED[family, layers, attn] = tiny_target(family, layers=layers, attn=attn)
    return _GROUPED[family, layers, attn]


class _Module:
    num_key_value_groups = 2
    is_causal = True


@pytest.mark.parametrize("n", [1, 2, 7])
@pytest.mark.parametrize("kind", ["bool", "additive", "none"])
def test_forward_equals_the_stock_sdpa_call(n, kind):
    torch.manual_seed(n)
    q, k, v = torch.randn(1, 4, n, 32), torch.randn(1, 2, 20, 32), torch.randn(1, 2, 20, 32)  # [b, h|kv, ., d]
    visible = torch.ones(1, 1, n, 20, dtype=torch.bool).tril(20 - n)  # [1, 1, n, 20] causal after a prefix
    visible[..., -1, 3] = False  # a hole, as a tree mask has
    mask = {"bool": visible, "none": None,
            "additive": torch.zeros(visible.shape).masked_fill_(~visible, torch.finfo(torch.float32).min)}[kind]
    want, _ = sdpa_attention_forward(_Module(), q, k, v, mask, scaling=0.2)
    for call in (attention.grouped_sdpa_forward, attention.packed_sdpa_forward):
        got, _ = call(_Module(), q, k, v, mask, scaling=0.2)  # [1, n, 4, 32]
        assert got.shape == want.shape == (1, n, 4, 32)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_additive_mask_is_the_stock_mask_made_additive():
    args = dict(batch_size=1, q_length=3, kv_length=9, q_offset=6, device="cpu")
    stock = sdpa_mask(**args)  # [1, 1, 3, 9] bool
    ours = attention.additive_sdpa_mask(**args, dtype=torch.float32)
    assert stock.dtype == torch.bool and ours.dtype == torch.float32 and ours.shape == stock.shape
    assert torch.equal(ours == 0, stock) and bool((ours[~stock] == torch.finfo(torch.float32).min).all())
    # a causal block with nothing before it: None, as stock (SDPA's is_causal covers it)
    assert attention.additive_sdpa_mask(batch_size=1, q_length=4, kv_length=4, device="cpu") is None
    assert sdpa_mask(batch_size=1, q_length=4, kv_length=4, device="cpu") is None


def test_verify_logits_equal_the_stock_call():
    """Chain and tree verifies of the grouped model against the stock one, after the same prefix."""
    stock, ours = TargetRunner(model_of("llama")), TargetRunner(grouped("llama"))
    tree_mask = torch.eye(5, dtype=torch.bool)
    tree_mask[:, 0] = True  # [5, 5] a root with four children
    for runner in (stock, ours):
        runner.reset(64)
        runner.forward(torch.tensor(PROMPT))
        runner.commit(list(range(len(PROMPT))))
    for depths, mask in ((None, None), (torch.tensor([0, 1, 1, 1, 1]), tree_mask)):
        a = stock.forward(torch.tensor([3, 4, 5, 6, 7]), depths, mask)
        b = ours.forward(torch.tensor([3, 4, 5, 6, 7]), depths, mask)
        torch.testing.assert_close(b.logits, a.logits, rtol=1e-5, atol=1e-5)
        stock.commit([0])
        ours.commit([0])


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.label())
@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_greedy_equals_the_stock_generate(family, tree, static):
    model, stock = grouped(family), model_of(family)
    want = hf_greedy(stock, PROMPT, 32)
    assert engine_tokens(model, tree, static) == [want, want]


def engine_tokens(model, tree: TreeConfig, static: bool) -> list[list[int]]:
    """Greedy tokens of EAGLE (a random EAGLE-1 head) and of the baseline on `model`, 32 new, EOS ignored."""
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree)
    return [list(list(engine.generate(PROMPT, run))[-1].token_ids)
            for engine in (SpeculativeEngine(model, random_eagle1(model), static=static),
                           BaselineEngine(model, static=static))]


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("tree", TREES[1::2], ids=lambda t: t.label())
@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_packed_heads_greedy_equals_the_stock_generate(family, tree, static):
    """The GPU candidate (`attention.PACKED`), checked on the CPU: the same tokens, eager and static."""
    model, stock = grouped(family, attn=attention.PACKED), model_of(family)
    want = hf_greedy(stock, PROMPT, 32)
    assert hf_greedy(model, PROMPT, 32) == want
    assert engine_tokens(model, tree, static) == [want, want]


def test_greedy_eagle3_equals_the_stock_generate():
    model, stock = grouped("llama", 8), model_of("llama", 8)
    engine = SpeculativeEngine(model, random_eagle3(model, draft_vocab=48))
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=TreeConfig(3, 3, 10))
    assert list(list(engine.generate(PROMPT, run))[-1].token_ids) == hf_greedy(stock, PROMPT, 32)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_seeded_sampling_equals_the_stock_baseline(static):
    model, stock = grouped("qwen2"), model_of("qwen2")
    for seed in (0, 1):
        run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(3, 2, 6),
                        sampling=SamplingConfig(temperature=0.9, top_p=0.95, seed=seed))
        want = list(BaselineEngine(stock).generate(PROMPT, run))[-1].token_ids
        got = list(SpeculativeEngine(model, random_eagle1(model), static=static).generate(PROMPT, run))[-1]
        assert got.token_ids == want


def test_the_loader_switches_cpu_grouped_targets_only():
    pair = load_pair(SHIPPED_TARGET, SHIPPED_EAGLE1)
    assert pair.target.config._attn_implementation == attention.NAME  # 4 query heads over 2 key/value heads
    small = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**small, num_key_value_heads=4), attn_implementation="sdpa")
    assert not attention.use_grouped_sdpa(model) and model.config._attn_implementation == "sdpa"
    eager = AutoModelForCausalLM.from_config(LlamaConfig(**small, num_key_value_heads=2), attn_implementation="eager")
    assert not attention.use_grouped_sdpa(eager) and eager.config._attn_implementation == "eager"


def test_sliding_window_target_equals_the_stock_generate():
    """A Mistral target whose window is shorter than the text: the mask builder passes the window through."""
    from transformers import MistralConfig

    cfg = MistralConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=6, bos_token_id=1,
                        eos_token_id=2, pad_token_id=0)
    models = []
    for attn in ("sdpa", attention.NAME):
        torch.manual_seed(3)
        models.append(AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.float32).eval())
    stock, ours = models
    with torch.no_grad():
        for p in (*stock.parameters(), *ours.parameters()):
            if p.dim() == 2:  # sharper distributions, as fixtures.tiny_target
                p.mul_(3.0)
    assert hf_greedy(ours, PROMPT, 24) == hf_greedy(stock, PROMPT, 24)
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig.chain(4))
    assert list(list(SpeculativeEngine(ours, random_eagle1(ours)).generate(PROMPT, run))[-1].token_ids) == \
        hf_greedy(stock, PROMPT, 24)
