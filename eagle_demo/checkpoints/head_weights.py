"""Fill the adapted draft head from its checkpoint.

The head is first built on the meta device (cheap, and it gives the exact expected state-dict keys and
shapes), the key diff is checked, then real storage is allocated on the target's lm_head device in the
target's dtype and the checkpoint tensors are copied in.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from ..drafts import DraftHead
from ..target.cpu_layout import column_major_linears
from .adapt import DraftPlan
from .build import key_plan, make_head
from .errors import CorruptCheckpointError
from .mtp import load_mtp_head

__all__ = ["HeadResult", "load_head"]


class HeadResult:
    def __init__(self, head: DraftHead, notes: list[str], ignored: list[str], embedding: str,
                 draft_bytes: int, shared_bytes: int):
        self.head, self.notes, self.ignored, self.embedding = head, notes, ignored, embedding
        self.draft_bytes, self.shared_bytes = draft_bytes, shared_bytes


@torch.no_grad()
def load_head(plan: DraftPlan, target: PreTrainedModel) -> HeadResult:
    spec = plan.spec
    if spec.family == "mtp":
        return load_mtp_head(plan, target, HeadResult)
    lm_head, embed = target.get_output_embeddings(), target.get_input_embeddings()
    device, dtype = lm_head.weight.device, lm_head.weight.dtype
    notes: list[str] = []
    probe = make_head(plan, lm_head, embed, own_embedding=plan.embedding == "own")
    needed, ignored = key_plan(probe, plan)
    tensors = spec.weights.load(needed.values())
    for stored in needed.values():
        t = tensors[stored]
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CorruptCheckpointError(f"draft weight {stored} in {spec.folder} contains NaN/inf values; the "
                                         "checkpoint is corrupted, re-download it or pick another draft")
    own_embedding = plan.embedding == "own"
    embed_source = tensors[needed["embed_tokens.weight"]] if "embed_tokens.weight" in needed else None
    if plan.embedding == "own":
        notes.append("own embedding kept (draft hidden size differs from the target's)")
    elif plan.embedding == "compare":
        mine = embed_source.to(device=embed.weight.device, dtype=embed.weight.dtype)
        own_embedding = not torch.equal(mine, embed.weight)
        notes.append("own embedding kept (differs from the target's)" if own_embedding else
                     "embedding in the draft equals the target's; shared from target")
        del mine
    if not own_embedding and embed.weight.device != device:
        # subtle: a target split over devices keeps its embedding away from the lm_head, where the draft runs
        own_embedding, embed_source = True, embed.weight
        notes.append(f"target embedding copied to the draft's device {device} (target split over devices)")
    head = make_head(plan, lm_head, embed, own_embedding)
    head.to(dtype=dtype)
    head.to_empty(device=device)
    state = {}
    for key in head.state_dict():
        if key == "d2t":
            state[key] = _d2t(plan, tensors, needed, notes)
        elif key == "embed_tokens.weight":
            state[key] = embed_source
        else:
            state[key] = tensors[needed[key]]
    head.load_state_dict(state, strict=True)
    head.rotary_emb = type(head.rotary_emb)(config=plan.config).to(device)  # real fp32 inv_freq (not meta, not cast)
    head.eval().requires_grad_(False)
    column_major_linears(head)  # as the target's (fp32 on a CPU only)
    if spec.source_dtype != str(dtype).replace("torch.", ""):
        notes.append(f"weights cast {spec.source_dtype} -> {str(dtype).replace('torch.', '')}")
    if getattr(target, "hf_device_map", None) and len(set(target.hf_device_map.values())) > 1:
        notes.append(f"target spread over {len(set(target.hf_device_map.values()))} devices; draft placed on the "
                     f"lm_head device {device}")
    draft_bytes = _bytes(head.state_dict().values())
    shared = [lm_head.weight] if (spec.family == "eagle1" or plan.lm_head == "target") else []
    if not own_embedding:
        shared.append(embed.weight)
    return HeadResult(head, notes, ignored, "own" if own_embedding else "shared", draft_bytes, _bytes(shared))


def _d2t(plan: DraftPlan, tensors: dict[str, torch.Tensor], needed: dict[str, str], notes: list[str]) -> torch.Tensor:
    vd, v = plan.draft_vocab, plan.target.vocab
    if plan.d2t == "identity":
        return torch.zeros(vd, dtype=torch.long)
    if plan.d2t == "t2d":
        used = torch.nonzero(tensors[needed["t2d"]].bool()).flatten()
        if used.numel() != vd:
            raise CorruptCheckpointError(f"draft t2d marks {used.numel()} target ids but the draft vocab has {vd}; "
                                         "the checkpoint is inconsistent")
        return used - torch.arange(vd)
    d2t = tensors[needed["d2t"]].long().flatten()
    ids = torch.arange(vd) + d2t
    if bool((ids < 0).any()) or bool((ids >= v).any()):
        # d2t written as absolute target ids (verl-SpeCo #67, SpecForge #534): as offsets they leave the vocab,
        # as ids they are valid and strictly increasing, so read them as ids
        if bool((d2t >= 0).all()) and bool((d2t < v).all()) and bool((d2t[1:] > d2t[:-1]).all()):
            notes.append("d2t read as absolute target ids (as offsets they point past the target vocab)")
            return d2t - torch.arange(vd)
        raise CorruptCheckpointError(f"draft d2t maps draft ids outside the target vocab 0..{v - 1}; pick a draft made "
                                     "for this target's tokenizer")
    return d2t


def _bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        key = (t.device, t.data_ptr()) if t.device.type != "meta" else id(t)
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total
