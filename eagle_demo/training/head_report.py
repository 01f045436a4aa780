"""The held-out report of a trained head: what the engine accepts on conversations the head never saw.

Acceptance is measured the way the product runs it, not estimated from training metrics: the exported head
is loaded through the adapter like any published draft, and the engine decodes each held-out conversation's
first request (chat template on, greedy) with a fixed chain. Reported per category and pooled: tau (tokens
committed per round), and the acceptance rate at each draft position (accepted / offered at that depth).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tqdm import tqdm

from ..common.config import RunConfig, TreeConfig
from ..decoding.metrics import summarize
from .prompts import Conversation

__all__ = ["ReportSettings", "heldout_report"]


@dataclass(frozen=True)
class ReportSettings:
    max_new_tokens: int = 128
    chain: int = 6
    limit: int = 40  # conversations measured (the first of the held-out split, in its order)
    dtype: str = "float32"


def _chat_ids(tokenizer, text: str) -> list[int]:
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False)
    return [int(i) for i in ids]


def heldout_report(target: str, draft: str, conversations: list[Conversation], settings: ReportSettings) -> dict:
    from ..checkpoints import load_pair
    from ..decoding.engine import SpeculativeEngine

    pair = load_pair(target, draft, dtype=settings.dtype)
    engine = SpeculativeEngine(pair.target, pair.head)
    run = RunConfig(max_new_tokens=settings.max_new_tokens, tree=TreeConfig(depth=settings.chain, top_k=1,
                                                                          total_tokens=settings.chain + 1))
    pooled = defaultdict(lambda: {"rounds": 0, "tokens": 0, "offered": [0] * settings.chain,
                                  "accepted": [0] * settings.chain, "prompts": 0})
    for conv in tqdm(conversations[:settings.limit], desc="held-out conversations", unit="conv"):
        stats = summarize(engine.generate(_chat_ids(pair.tokenizer, conv.turns[0]), run))
        for key in (conv.category, "all"):
            row = pooled[key]
            row["rounds"] += stats.rounds
            row["tokens"] += stats.new_tokens
            row["prompts"] += 1
            for a in stats.accepted_per_round:
                for d in range(settings.chain):
                    row["offered"][d] += int(a >= d)  # depth d+1 is offered when the first d drafts were accepted
                    row["accepted"][d] += int(a > d)
    out = {}
    for key, row in sorted(pooled.items()):
        out[key] = {"prompts": row["prompts"], "tau": round(row["tokens"] / max(1, row["rounds"]), 3),
                    "acceptance_by_position": [round(a / o, 3) if o else None
                                               for a, o in zip(row["accepted"], row["offered"])]}
    return {"target": target, "draft": draft, "chain": settings.chain, "max_new_tokens": settings.max_new_tokens,
            "dtype": settings.dtype, "by_category": out}
