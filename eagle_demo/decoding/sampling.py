"""One logits pipeline, shared by the baseline and the verifier.

Order: repetition penalty -> temperature -> top-k -> top-p -> softmax, as transformers' `generate` applies them.
Greedy is argmax of the (penalized) logits. The penalty reads which tokens each row has seen (`penalize`): the
committed text for a plain step, and for a tree node the committed text plus the drafts on its path.

Sampling uses a *position-keyed* inverse-CDF sampler: the uniform for the i-th new token is fixed by
(seed, i). Because EAGLE drafts are point masses, "sample from p at the node and descend into the child
carrying that token" is an exact verifier (the README's "What lossless means"), and with this sampler the EAGLE engine
reproduces the seeded baseline token for token (up to logit numerics).
"""

from __future__ import annotations

import random

import torch

from ..common.config import SamplingConfig

__all__ = ["process_logits", "PositionSampler", "pick", "penalize", "generation_warnings", "top_two"]


def penalize(logits: torch.Tensor, seen: torch.Tensor | None, cfg: SamplingConfig,
             path: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """logits [n, V] -> float32 logits [n, V] under the repetition penalty (transformers' rule: a seen token's
    logit > 0 is divided by the penalty, < 0 multiplied by it). seen [V] bool: the prompt and the committed text,
    seen by every row. path: a tree's (tokens [n], ancestor mask [n, n]); row i has also seen the tokens on its
    own path, itself included. None or a penalty of 1: the logits unchanged. Only seen entries are touched."""
    x = logits.float()  # [n, V]
    if seen is None or cfg.repetition_penalty == 1.0:
        return x
    x = x.clone()  # float() of float32 logits is the same tensor: the caller's logits stay as they are
    cols = seen.nonzero()[:, 0]  # [S] the seen ids (a few, of V)
    x[:, cols] = _penalized(x[:, cols], cfg.repetition_penalty)  # [n, S]
    if path is not None:
        tokens, mask = path
        rows, on_path = mask.to(x.device).nonzero(as_tuple=True)  # [P] every (node, node on its path) pair
        ids = tokens.to(x.device)[on_path]  # [P]
        fresh = ~seen[ids]  # not penalized above
        keys = torch.unique(rows[fresh] * x.shape[1] + ids[fresh])  # [Q] each (row, id) once
        rows, ids = keys // x.shape[1], keys % x.shape[1]
        x[rows, ids] = _penalized(x[rows, ids], cfg.repetition_penalty)  # [Q]
    return x


def _penalized(x: torch.Tensor, p: float) -> torch.Tensor:
    return torch.where(x < 0, x * p, x / p)


def process_logits(logits: torch.Tensor, cfg: SamplingConfig) -> torch.Tensor:
    """Logits [n, V] -> probabilities [n, V] (float32) after temperature, top-k and top-p.

    For greedy settings returns the plain softmax (used only for reporting probabilities).
    """
    x = logits.float()  # [n, V]
    if cfg.greedy:
        return torch.softmax(x, dim=-1)
    x = x / cfg.temperature
    vocab = x.shape[-1]
    if 0 < cfg.top_k < vocab:
        kth = torch.topk(x, cfg.top_k, dim=-1).values[..., -1:]  # [n, 1]
        x = x.masked_fill(x < kth, float("-inf"))
    probs = torch.softmax(x, dim=-1)  # [n, V]
    if cfg.top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)  # [n, V]
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass strictly before each token
        drop_sorted = before >= cfg.top_p  # keep the smallest prefix reaching top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


class PositionSampler:
    """Inverse-CDF sampling with one uniform per output position, fixed by the seed."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def uniform(self, position: int) -> float:
        return random.Random(f"{self.seed}:{position}").random()  # string seeds hash with SHA-512

    def sample(self, probs: torch.Tensor, position: int) -> int:
        """probs [V] (sums to 1) -> token id drawn with the uniform of `position`."""
        cdf = torch.cumsum(probs.double(), dim=0)  # [V]
        u = self.uniform(position) * float(cdf[-1])
        token = int(torch.searchsorted(cdf, torch.tensor([u], dtype=torch.float64, device=cdf.device),
                                       right=True).item())
        token = min(token, probs.shape[0] - 1)
        while probs[token] <= 0 and token > 0:  # never land on a zero-probability token
            token -= 1
        return token


def top_two(logits: torch.Tensor) -> tuple[tuple[int, float, int, float], ...]:
    """logits [n, V] -> per row (top id, its logit, runner-up id, its logit), in one host read: the target's margin
    at each token, which the divergence explainer reads (`divergence`). The raw logits, before the sampling pipeline."""
    values, ids = torch.topk(logits.float(), min(2, logits.shape[-1]), dim=-1)  # [n, 2], [n, 2]
    rows = torch.cat([values, ids.float()], 1).tolist()  # ids below 2**24 are exact in float32
    return tuple((int(r[2]), r[0], int(r[3]), r[1]) if len(r) == 4 else (int(r[1]), r[0], int(r[1]), r[0])
                 for r in rows)


def pick(logits_row: torch.Tensor, probs_row: torch.Tensor, cfg: SamplingConfig,
         sampler: PositionSampler | None, position: int) -> int:
    """The target's token at one node: argmax for greedy, else the position-keyed sample."""
    if cfg.greedy or sampler is None:
        return int(torch.argmax(logits_row).item())
    return sampler.sample(probs_row, position)


_NEUTRAL = {"no_repeat_ngram_size": 0, "typical_p": 1.0, "epsilon_cutoff": 0.0,
            "eta_cutoff": 0.0, "min_p": None, "min_length": 0, "min_new_tokens": None, "bad_words_ids": None,
            "suppress_tokens": None, "begin_suppress_tokens": None, "sequence_bias": None,
            "forced_bos_token_id": None, "forced_eos_token_id": None}


def generation_warnings(generation_config) -> list[str]:
    """The load report's warnings on a target's generation_config.json: a repetition penalty (runs apply one only
    when they set it) and the settings that change `generate`'s distribution that this pipeline has no setting for
    (n-gram blocking, suppressed tokens, ...)."""
    if generation_config is None:
        return []
    out = []
    unapplied = []
    for name, neutral in _NEUTRAL.items():
        value = getattr(generation_config, name, neutral)
        if value is not None and value != neutral and not (neutral is None and value in (0, 0.0, [], {})):
            unapplied.append(f"{name} {value}")
    if unapplied:
        out.append(f"the target's generation_config sets {', '.join(unapplied)}, which neither engine applies: plain "
                   "decoding here is the model's logits under the repetition penalty, temperature, top-k and top-p "
                   "only, so `model.generate()` with those defaults may give other text")
    penalty = getattr(generation_config, "repetition_penalty", 1.0)
    if penalty not in (None, 1, 1.0):
        out.append(f"the target's generation_config sets repetition_penalty {penalty}; runs apply a penalty only "
                   "when one is set (the page's slider, --repetition-penalty, the API's repetition_penalty)")
    return out
