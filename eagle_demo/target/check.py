"""A few forwards at load that hold a target to what the engines assume of it.

The engines run the target's base model themselves: a prefill, a tree of drafts under a 4-D additive mask with
depth-based position ids, then a cache compacted to the accepted path. A family whose forward departs from that
(logits changed after the projection in a way `LogitHead` does not know, attention that ignores the given mask or
positions, biases built from a 2-D mask) would make outputs differ from plain decoding without a word. Here the
same few tokens run both ways, through the engines' runner and through the model's own forward, and a target
whose logits differ by more than rounding is refused with one line naming the part that differs.
"""

from __future__ import annotations

import torch

from .logit_head import LogitHead
from .runner import TargetRunner

__all__ = ["check_target", "layer_problem", "ATTENTION_KINDS"]

ATTENTION_KINDS = {"full_attention", "sliding_attention"}  # layer types the engines' masks and cache cover


def layer_problem(config) -> str | None:
    """The one-line refusal of a target whose config names layers besides attention (read before any weights are
    fetched), or None."""
    others = sorted(set(getattr(config.get_text_config(), "layer_types", None) or ()) - ATTENTION_KINDS)
    if not others:
        return None
    return (f"the target has {', '.join(others)} layers besides attention, which the engines' cache cannot take "
            "back after rejected drafts (or mask as the family does); pick an attention-only target")


def _gap(ours: torch.Tensor, own: torch.Tensor, tolerance: float) -> float | None:
    """The largest difference when it exceeds rounding (relative to the logits' size), else None."""
    ours, own = ours.float().to(own.device), own.float()
    gap = float((ours - own).abs().max())
    return gap if gap > tolerance * (1.0 + float(own.abs().max())) else None


@torch.inference_mode()
def check_target(model) -> LogitHead:
    """Raises ValueError (one line) when the runner's prefill, tree or compacted-cache logits, on the growing cache
    and on the static one (a GPU's default; checked where the target sits on one device), differ from the model's
    own forward over the same tokens; returns the logit head the runners apply."""
    text = model.config.get_text_config()
    problem = layer_problem(model.config)
    if problem is not None:
        raise ValueError(problem)
    vocab = int(text.vocab_size)
    # rounding only; half precision on a GPU runs other kernels for other row counts (a CPU gives equal logits)
    tol = 1e-4 if model.get_output_embeddings().weight.dtype == torch.float32 else 5e-2
    device = model.get_output_embeddings().weight.device
    ids = (torch.arange(6, device=device) * 7 + 3) % vocab  # [6] three prefix tokens, a root, two children
    devices = {str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()}
    caches = ("growing", "static") if len(devices) <= 1 else ("growing",)  # static needs one device
    try:
        own = model(input_ids=torch.cat([ids[:4], ids[5:], ids[:1]])[None], use_cache=False).logits[0]  # [6, V]
        sibling = model(input_ids=ids[None, :5], use_cache=False).logits[0, -1]  # [V] after prefix, root, child a
        runs = {cache: _engine_path(TargetRunner(model, static=cache == "static", graphs=False), ids)
                for cache in caches}
    except Exception as exc:  # noqa: BLE001 - whatever the family's forward raises on a 4-D mask or a cache
        raise ValueError(f"the target's forward fails on the engine's inputs ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:120]}): its layers need what the engine does not give "
                         "(a 2-D mask for ALiBi biases, a cache of their own); pick another target family") from exc
    head = LogitHead.of(model)
    for cache, (prefill, tree, after) in runs.items():
        gap = _gap(prefill, own[:3], tol)
        if gap is not None and cache == "growing":  # the model's own causal mask: only the projection differs
            raise ValueError(f"the target's own forward changes its logits after the output projection in a way "
                             f"this engine does not repeat (largest difference {gap:.3g}; known: {head.label()}); "
                             "pick another target family")
        pairs = (("a prefill", prefill, own[:3]), ("a tree of drafts", tree[[0, 2]], own[3:5]),
                 ("a tree of drafts", tree[1], sibling), ("the cache after a round", after[0], own[5]))
        for what, ours, theirs in pairs:
            gap = _gap(ours, theirs, tol)
            if gap is not None:
                raise ValueError(f"the target computes {what} on the {cache} cache differently from the same tokens "
                                 f"in sequence (largest difference {gap:.3g}): its attention does not follow the "
                                 "engine's 4-D mask and position ids; pick another target family")
    return head


def _engine_path(runner: TargetRunner, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The engines' calls on ids [6]: a prefill of 3, a tree of a root with two children, the cache compacted to
    the second child, one more step. Returns their logits [3, V], [3, V], [1, V]."""
    device = ids.device
    runner.reset(16)
    prefill = runner.forward(ids[:3]).logits  # [3, V]
    runner.commit([0, 1, 2])
    block = torch.tensor([[True, False, False], [True, True, False], [True, False, True]], device=device)  # [3, 3]
    tree = runner.forward(ids[3:6], torch.tensor([0, 1, 1], device=device), block).logits  # [3, V] root, a, b
    runner.commit([0, 2])  # the root and its second child, as an accepted path
    after = runner.forward(ids[:1]).logits  # [1, V]
    return prefill.clone(), tree.clone(), after.clone()
