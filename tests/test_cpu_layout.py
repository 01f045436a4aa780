"""Column-major linear weights on a CPU (`eagle_demo.target.cpu_layout`): the loader stores fp32 CPU weights
column-major, values and results unchanged, and EAGLE on a relaid pair stays exactly the stock target's
greedy decoding."""

import copy

import pytest
import torch

from eagle_demo.checkpoints import load_pair
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_EAGLE3, SHIPPED_TARGET
from eagle_demo.target.cpu_layout import column_major_linears, is_column_major, same_layout
from fixtures import random_eagle1, random_eagle3, tiny_target

PROMPT = [1, 5, 17, 33, 8, 61, 12, 40, 7]


def _greedy(model, n):
    out = model.generate(torch.tensor([PROMPT]), do_sample=False, max_new_tokens=n, pad_token_id=0,
                         attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long))
    return out[0, len(PROMPT):].tolist()


def test_relaid_linears_keep_their_values_and_the_logits():
    stock = tiny_target("llama")
    relaid = copy.deepcopy(stock)
    relaid_bytes = column_major_linears(relaid)
    assert relaid_bytes == sum(m.weight.numel() * 4 for m in relaid.modules() if isinstance(m, torch.nn.Linear))
    for (name, a), (_, b) in zip(stock.named_parameters(), relaid.named_parameters()):
        assert torch.equal(a, b), name
        if a.dim() == 2 and "embed" not in name and "norm" not in name:
            assert is_column_major(b) and not is_column_major(a), name
    ids = torch.tensor([PROMPT])
    with torch.inference_mode():
        torch.testing.assert_close(relaid(ids).logits, stock(ids).logits, rtol=1e-6, atol=1e-6)
    assert column_major_linears(relaid) == 0  # already relaid: nothing to do


def test_tied_embedding_keeps_its_row_layout():
    model = tiny_target("tied")
    column_major_linears(model)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert model.get_input_embeddings().weight.is_contiguous()
    assert is_column_major(model.model.layers[0].mlp.down_proj.weight)


def test_other_dtypes_keep_the_stock_layout():
    model = tiny_target("llama").to(torch.bfloat16)
    assert column_major_linears(model) == 0
    assert model.model.layers[0].self_attn.q_proj.weight.is_contiguous()


def test_a_fused_weight_follows_its_source():
    src = torch.randn(8, 4)
    fused = torch.cat([src, src])  # [16, 4]
    assert same_layout(fused, src) is fused
    col = same_layout(fused, src.t().contiguous().t())
    assert is_column_major(col) and torch.equal(col, fused)


@pytest.mark.parametrize("tree", [TreeConfig.chain(5), TreeConfig(depth=3, top_k=3, total_tokens=12)],
                         ids=lambda t: t.label())
@pytest.mark.parametrize("family", ["eagle1", "eagle3"])
def test_greedy_on_a_relaid_pair_equals_the_stock_target(family, tree):
    stock = tiny_target("llama", layers=6)
    want = _greedy(stock, 32)
    target = copy.deepcopy(stock)
    head = random_eagle1(target) if family == "eagle1" else random_eagle3(target, draft_vocab=48)
    column_major_linears(target)
    column_major_linears(head)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree)
    assert list(list(SpeculativeEngine(target, head).generate(PROMPT, run))[-1].token_ids) == want


@pytest.mark.parametrize("draft", [SHIPPED_EAGLE1, SHIPPED_EAGLE3])
def test_the_loader_relays_cpu_fp32_pairs_only(draft):
    pair = load_pair(SHIPPED_TARGET, draft, dtype="float32", device="cpu")
    layer = pair.target.model.layers[0]
    assert is_column_major(layer.self_attn.q_proj.weight) and is_column_major(pair.target.lm_head.weight)
    assert pair.target.get_input_embeddings().weight.is_contiguous()
    assert is_column_major(pair.head.fc.weight)
    engine = SpeculativeEngine(pair.target, pair.head)
    list(engine.generate([5, 6, 7], RunConfig(max_new_tokens=4, ignore_eos=True, tree=TreeConfig.chain(3))))
    layer = pair.head.layers[0] if hasattr(pair.head, "layers") else pair.head.midlayer
    fused = layer.self_attn.__dict__["_lean_qkv"][1][0]  # built by the first draft step
    assert is_column_major(fused)
    bf16 = load_pair(SHIPPED_TARGET, draft, dtype="bfloat16", device="cpu")
    assert bf16.target.model.layers[0].self_attn.q_proj.weight.is_contiguous()
    assert bf16.head.fc.weight.is_contiguous()
