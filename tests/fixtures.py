"""Random tiny models and test-only draft heads, built in memory (no network, no files)."""

from __future__ import annotations

import hashlib

import torch
from torch import nn
from transformers import AutoModelForCausalLM, DynamicCache, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

from eagle_demo.drafts import DraftHead, Eagle1Head, Eagle3Head

FAMILIES = ("llama", "qwen2", "tied", "mistral", "qwen3")


def tiny_target(family: str = "llama", layers: int = 4, hidden: int = 64, vocab: int = 96, seed: int = 0,
                eos: int = 2, attn: str = "sdpa", window: int | None = None) -> nn.Module:
    """A random fp32 decoder-only model of the given family (GQA everywhere, biases where the family has them).
    window: a sliding attention window in use, on every layer (mistral) or on all but the first (qwen2)."""
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  bos_token_id=1, eos_token_id=eos, pad_token_id=0)
    if family == "llama":
        cfg = LlamaConfig(**common, tie_word_embeddings=False)
    elif family == "tied":
        cfg = LlamaConfig(**common, tie_word_embeddings=True)
    elif family == "qwen2":
        cfg = Qwen2Config(**common, tie_word_embeddings=False, use_sliding_window=window is not None,
                          sliding_window=window, max_window_layers=1)
    elif family == "mistral":
        cfg = MistralConfig(**common, tie_word_embeddings=False, sliding_window=window)
    elif family == "qwen3":
        cfg = Qwen3Config(**common, head_dim=32, tie_word_embeddings=True)
    else:
        raise ValueError(family)
    if window is not None and family not in ("qwen2", "mistral"):
        raise ValueError(f"no sliding window in the {family} fixture")
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.float32)
    with torch.no_grad():  # sharper distributions than the default init, so greedy paths are stable
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(3.0)
    return model.eval()


def draft_config(target, **over) -> LlamaConfig:
    t = target.config
    cfg = LlamaConfig(vocab_size=t.vocab_size, hidden_size=t.hidden_size, intermediate_size=2 * t.hidden_size,
                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=over.pop("kv", 4),
                      max_position_embeddings=512, rms_norm_eps=1e-6, **over)
    cfg._attn_implementation = "sdpa"
    return cfg


def random_eagle1(target, seed: int = 1, fc_bias: bool = True) -> Eagle1Head:
    torch.manual_seed(seed)
    head = Eagle1Head(draft_config(target), target.get_output_embeddings(), target.get_input_embeddings(),
                      fc_bias=fc_bias)
    return head.eval()


def random_eagle3(target, seed: int = 1, draft_vocab: int | None = None) -> Eagle3Head:
    torch.manual_seed(seed)
    t = target.config
    layers = t.num_hidden_layers
    vd = draft_vocab or t.vocab_size
    head = Eagle3Head(draft_config(target), t.hidden_size, vd, target.get_input_embeddings(),
                      (2, layers // 2, layers - 3))
    if vd < t.vocab_size:
        used = torch.sort(torch.randperm(t.vocab_size)[:vd]).values
        head.d2t.copy_(used - torch.arange(vd))
    return head.eval()


class OracleHead(DraftHead):
    """Test-only draft that knows the target: for each drafted row it rebuilds the row's context from the
    attention mask and runs the real target on it, then proposes the target's own ranking. A fraction of
    rows get their top-2 swapped (deterministically), so rejections and corrections happen too.

    Draft-cache slots store token ids as fake keys, so the drafter's own cache crops keep it in step.
    """

    family = "oracle"

    def __init__(self, target, first_token: int, swap_rate: float = 0.25):
        super().__init__(draft_config(target))
        self.target = [target]  # not a submodule
        self.first_token = first_token
        self.swap_rate = swap_rate
        self.fc = nn.Linear(1, 1)  # gives the drafter a device and dtype

    def forward(self, hidden, tokens, positions, cache, mask, from_target=False):
        n = tokens.shape[0]
        fake = tokens.float().view(1, 1, n, 1)
        keys, _ = cache.update(fake, fake, 0)
        slots = keys[0, 0, :, 0].long()  # [kv]
        visible = torch.ones(n, slots.shape[0], dtype=torch.bool) if mask is None else (mask[0, 0] == 0)
        if mask is None and n > 1:
            visible = torch.ones(n, slots.shape[0], dtype=torch.bool).tril(slots.shape[0] - n)
        rows = []
        model = self.target[0]
        for r in range(n):
            context = [self.first_token] + slots[visible[r]].tolist()
            with torch.no_grad():
                logits = model(torch.tensor([context])).logits[0, -1].float()
            logp = torch.log_softmax(logits, -1)
            h = int(hashlib.sha256(str(context).encode()).hexdigest()[:8], 16) / 16**8
            if h < self.swap_rate:
                top2 = torch.topk(logp, 2).indices
                a, b = logp[top2[0]].clone(), logp[top2[1]].clone()
                logp[top2[0]], logp[top2[1]] = b, a
            rows.append(logp)
        return torch.stack(rows)  # [n, V] (stands in for the hidden state)

    def topk(self, g, k):
        top = torch.topk(g, k, dim=-1)
        return top.values, top.indices


def replay_like_dynamic_cache(ours, steps: list[tuple[int, int]], layers: tuple[int, ...] = (0,), width: int = 8):
    """Feed `ours` and a DynamicCache the same random updates and crops ((new positions, crop count) per
    step, layer by layer) and check every returned key/value and length is exactly the DynamicCache's."""
    ref = DynamicCache()
    for n, drop in steps:
        k, v = torch.randn(1, 2, n, width), torch.randn(1, 2, n, width)  # [b, kv, n, d]
        for layer in layers:
            got, want = ours.update(k + layer, v - layer, layer), ref.update(k + layer, v - layer, layer)
            torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
            torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
        if drop:
            ours.crop(drop)
            ref.crop(drop)
        assert ours.get_seq_length() == ref.get_seq_length()


def accept_every_draft(tree, logits, sampling, sampler, position, seen=None):
    """A broken verifier (the explainer's negative control): it accepts the first child at every depth, whatever the
    target says, and takes the target's top token after the last."""
    from eagle_demo.decoding.acceptance import Verdict

    path, node = [], 0
    while tree.children[node]:
        node = next(iter(tree.children[node].values()))
        path.append(node)
    return Verdict(tuple(path), int(logits[node].argmax()), (1.0,) * (len(path) + 1))
