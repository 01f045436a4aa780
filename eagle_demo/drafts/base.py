"""What every draft head offers the drafter."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, PretrainedConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

__all__ = ["DraftHead", "Shared", "embedding", "linear", "shares_target_vocab", "top_logp"]


# A stock transformers submodule of any family (LlamaAttention, Qwen2MLP, LlamaRMSNorm, ...), read by attribute name:
# nn.Module's __getattr__ types each of its attributes as Tensor | Module, so what it holds is only known at run time.
StockModule = Any

BLOCK = 128  # vocabulary block of the two-stage top-k
MANY_ROWS = 16  # from this many rows a CPU takes the two-stage top-k


def top_logp(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best tokens of logits [m, V]: their log-probabilities [m, k] (fp32, best first) and ids [m, k].
    k = 1 takes a max, which a CPU runs several times faster than a top-k over the vocabulary. Many rows on
    a CPU (the calibration replay's): `_blocked_top`, 3-5x faster, the same values, and the same ids wherever
    the values are not tied."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # [m, V]
    m, v = logp.shape
    if logp.device.type == "cpu" and m >= MANY_ROWS and v % BLOCK == 0 and k * BLOCK < v:
        return _blocked_top(logp, k)
    top = logp.max(dim=-1, keepdim=True) if k == 1 else torch.topk(logp, k, dim=-1)
    return top.values, top.indices  # [m, k], [m, k]


def _blocked_top(logp: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k in two stages: each block of `BLOCK` ids keeps its maximum, the k blocks with the highest maxima
    hold the k best values (a block outside them has k values at least as good in them), and a top-k over
    those k * BLOCK values picks them. A CPU's max-with-index and top-k over the whole vocabulary cost several
    times its plain max; these run over V / BLOCK and k * BLOCK values."""
    m, v = logp.shape
    blocks = logp.view(m, v // BLOCK, BLOCK)  # [m, nb, B]
    best = blocks.amax(-1)  # [m, nb]
    chosen = best.argmax(-1, keepdim=True) if k == 1 else best.topk(k, -1).indices  # [m, k] block ids
    values = blocks.gather(1, chosen[..., None].expand(m, k, BLOCK)).reshape(m, k * BLOCK)  # [m, k*B]
    top = values.max(-1, keepdim=True) if k == 1 else values.topk(k, -1)  # [m, k]
    ids = chosen.gather(1, top.indices // BLOCK) * BLOCK + top.indices % BLOCK  # [m, k]
    return top.values, ids


class Shared:
    """Holds a module of the target without registering it, so the draft's state_dict, `.to()` and
    parameter counts never include (or copy) the target's tensors."""

    def __init__(self, module: nn.Module):
        self.module = module

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def qk_heads(config: LlamaConfig) -> int:
    """Query plus key heads (a config without num_key_value_heads has one key head per query head)."""
    return int(config.num_attention_heads) + int(config.num_key_value_heads or config.num_attention_heads)


def linear(module, x: torch.Tensor) -> torch.Tensor:
    """`module(x)` for an `nn.Linear` (or a `Shared` one) without the module call, whose hook handling costs a few
    microseconds a call on a CPU (a draft depth makes five); any other module is called."""
    inner = module.module if type(module) is Shared else module
    if type(inner) is nn.Linear:
        return F.linear(x, inner.weight, inner.bias)
    return module(x)


def embedding(module, ids: torch.Tensor) -> torch.Tensor:
    """`module(ids)` for an `nn.Embedding` (or a `Shared` one) without the module call; any other module is called."""
    inner = module.module if type(module) is Shared else module
    if type(inner) is nn.Embedding and inner.max_norm is None:
        return F.embedding(ids, inner.weight, inner.padding_idx)
    return module(ids)


def shares_target_vocab(head) -> bool:
    """The head's logits are the target's own lm_head (bias-free) of `lm_head_input(g)`, over the whole vocabulary
    (EAGLE-1/2 heads), so a hot vocabulary (`TreeConfig.hot_vocab`, `hot_vocab.HotVocab`) can take rows of it."""
    lm = getattr(head, "lm_head", None)
    return (getattr(head, "lm_head_logits", False) and type(lm) is Shared and type(lm.module) is nn.Linear
            and lm.module.bias is None)


class DraftHead(nn.Module):
    """Interface used by the drafter.

    forward(hidden, tokens [n], positions [n], cache, mask [1, 1, n, kv], from_target) -> g [n, H]
        hidden is either target features [n, F] (from_target=True) or the draft's own output [n, H].
        The pair at draft position i is (feature_i, token_{i+1}).
    topk(g [m, H], k) -> (logp [m, k], token ids [m, k] in the target vocabulary)
    """

    family: str = ""
    lm_head_logits: bool = False  # topk's logits are `lm_head(lm_head_input(g))` of the target's lm_head (shared)
    feature_layers: tuple[int, ...] | None = None  # None: post-norm last hidden state
    # set by each head: the target's embedding (not registered) and, when the checkpoint brings one, its own
    shared_embed: Shared | None
    embed_tokens: nn.Embedding | None
    lm_head: Any  # the target's lm_head (Shared) or the draft's own nn.Linear
    fc: nn.Module  # every head has one (Unfused where the draft has none): its weight carries device and dtype

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config: PretrainedConfig = config  # a head of another family (MLA) sets its own
        self.hidden_size = int(config.hidden_size)
        self.rotary_emb: nn.Module = LlamaRotaryEmbedding(config=config)

    def position_embeddings(self, hidden: torch.Tensor, positions: torch.Tensor):
        return self.rotary_emb(hidden[None], positions[None])  # cos, sin [1, n, hd]

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token embeddings: the draft's own table when its checkpoint brings one, else the target's (shared)."""
        table = self.embed_tokens if self.embed_tokens is not None else self.shared_embed
        return embedding(table, tokens)  # [n, H]

    def topk(self, g: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def lm_head_input(self, g: torch.Tensor) -> torch.Tensor:
        """What the lm_head reads, g [m, H] -> [m, H] (a head with `lm_head_logits`; a norm in some layouts)."""
        return g
