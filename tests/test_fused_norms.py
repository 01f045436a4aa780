"""The target's RMS norms in one call (`eagle_demo.target.fused_norms`): the same bits as the stock forward, other
formulas and dtypes left alone, and EAGLE over a fused target still the stock model's greedy decoding."""

import copy

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from eagle_demo.checkpoints import load_pair
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET
from eagle_demo.target.fused_norms import fuse_rms_norms, is_fused
from fixtures import random_eagle1, tiny_target

PROMPT = [1, 5, 17, 33, 8, 61, 12, 40, 7]


def _norms(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if type(m).__name__.endswith("RMSNorm")]


def _with_random_norm_weights(family: str) -> nn.Module:
    model = tiny_target(family)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for norm in _norms(model):
            norm.weight.copy_(torch.rand(norm.weight.shape, generator=gen) * 2)
    return model


@pytest.mark.parametrize("family", ["llama", "qwen3", "mistral"])
def test_fused_norms_give_the_stock_bits(family):
    stock = _with_random_norm_weights(family)
    fused = copy.deepcopy(stock)
    assert fuse_rms_norms(fused) == len(_norms(fused)) > 0  # qwen3 adds per-head q/k norms
    assert all(is_fused(m) for m in _norms(fused)) and not any(is_fused(m) for m in _norms(stock))
    ids = torch.tensor([PROMPT * 3])
    with torch.inference_mode():
        assert torch.equal(fused(ids).logits, stock(ids).logits)
        x = torch.randn(2, 5, 64) * 40
        assert torch.equal(fused.model.norm(x), LlamaRMSNorm.forward(stock.model.norm, x))
    assert fuse_rms_norms(fused) == 0  # bound already


class OffsetRMSNorm(LlamaRMSNorm):
    """Gemma's formula: the weight is an offset from one. The fused call does not reproduce it."""

    def forward(self, hidden):
        var = hidden.pow(2).mean(-1, keepdim=True)
        return (1.0 + self.weight) * (hidden * torch.rsqrt(var + self.variance_epsilon))


def test_a_norm_with_another_formula_keeps_its_forward():
    model = tiny_target("llama")
    model.model.norm = OffsetRMSNorm(64)
    assert fuse_rms_norms(model) == len(_norms(model)) - 1
    assert not is_fused(model.model.norm) and is_fused(model.model.layers[0].input_layernorm)


def test_other_dtypes_keep_the_stock_forward():
    model = tiny_target("llama").to(torch.bfloat16)
    assert fuse_rms_norms(model) == 0
    norm = LlamaRMSNorm(8)
    fuse_rms_norms(norm)
    x = torch.randn(3, 8, dtype=torch.bfloat16)  # an fp32 norm given bf16 input: the module's own forward
    assert is_fused(norm) and torch.equal(norm(x), LlamaRMSNorm.forward(norm, x))


@pytest.mark.parametrize("tree", [TreeConfig.chain(6), TreeConfig(depth=3, top_k=3, total_tokens=12)],
                         ids=lambda t: t.label())
def test_greedy_on_a_fused_target_equals_the_stock_generate(tree):
    stock = _with_random_norm_weights("llama")
    want = stock.generate(torch.tensor([PROMPT]), do_sample=False, max_new_tokens=32, pad_token_id=0,
                          attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long))[0, len(PROMPT):].tolist()
    target = copy.deepcopy(stock)
    fuse_rms_norms(target)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree)
    got = list(SpeculativeEngine(target, random_eagle1(target)).generate(PROMPT, run))[-1].token_ids
    assert list(got) == want


def test_the_loader_fuses_the_shipped_target_with_the_stock_logits():
    pair = load_pair(SHIPPED_TARGET, SHIPPED_EAGLE1, dtype="float32", device="cpu")
    norms = _norms(pair.target)
    assert norms and all(is_fused(m) for m in norms)
    stock = AutoModelForCausalLM.from_pretrained(SHIPPED_TARGET, dtype=torch.float32).eval()
    ids = torch.arange(3, 40)[None]  # [1, 37]
    with torch.inference_mode():
        assert torch.equal(pair.target(ids).logits, stock(ids).logits)
