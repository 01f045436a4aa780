"""Rotary scalings that follow the forward's length, and the verify forwards that stay exact under them.

`transformers` rescales two rotary types from the largest position of each forward call (`dynamic_rope_update`):
- "dynamic" (NTK): past the original context, each call whose last position passes the largest seen so far
  recomputes the frequencies for that length. Plain decoding's step at position p uses the length p + 1; a
  verify of positions start..start+depth would rotate every node (and the next steps) for start + depth + 1.
- "longrope" (Phi-3): one call uses the long factors for all its tokens when its last position passes the
  original context, the short ones otherwise. Phi-3's `generate` (and its MoE and multimodal kin's) drops its
  cache at the step that first passes it and runs the whole sequence again, so every key is rotated with the long
  factors from then on; another family with longrope keeps its short keys.
A round whose verify would not be exact runs as a plain step (the engine's round without a draft: what plain
decoding computes), and both engines refill the cache where Phi-3's `generate` does (`refills`), so output stays
plain decoding's token for token. A "dynamic" target decodes plainly past its original context, a "longrope" one
only for the few rounds before the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RopeLimit", "rope_line"]


REFILLING = ("phi3", "phimoe", "phi4_multimodal")  # model types whose `generate` runs the whole sequence again at
# the longrope boundary (their prepare_inputs_for_generation drops the cache there)


@dataclass(frozen=True)
class RopeLimit:
    kind: str | None = None  # "dynamic" | "longrope"; None: the rotary tables do not depend on the length
    positions: int = 0  # the original context the rescaling starts past
    refill: bool = False  # longrope: the family's `generate` runs the whole sequence again at the boundary

    @classmethod
    def of(cls, model) -> "RopeLimit":
        for module in model.modules():
            rope_type = getattr(module, "rope_type", None)
            if rope_type is None or not hasattr(module, "inv_freq"):
                continue
            kinds = set(rope_type.values()) if isinstance(rope_type, dict) else {rope_type}
            if any("dynamic" in str(k) for k in kinds):
                return cls("dynamic", int(module.original_max_seq_len))
            if "longrope" in kinds:
                cfg = module.config
                params = getattr(cfg, "rope_parameters", None) or {}
                layered = [p for p in params.values() if isinstance(p, dict)] or [params]
                found = [int(p["original_max_position_embeddings"]) for p in layered
                         if "original_max_position_embeddings" in p]
                refill = getattr(model.config, "model_type", "") in REFILLING
                return cls("longrope", min(found) if found else int(cfg.original_max_position_embeddings), refill)
        return cls()

    def exact(self, start: int, depth: int) -> bool:
        """Whether one forward over positions start..start+depth rotates every token as plain decoding's steps
        do (start: the cache length, where the round's root goes)."""
        end = start + depth + 1  # the forward's length, as transformers reads it
        if self.kind == "dynamic":
            return end <= self.positions
        if self.kind == "longrope":  # all short, or all long (past the refill, where the family refills)
            return end <= self.positions or start > self.positions - (0 if self.refill else 1)
        return True

    def refills(self, start: int) -> bool:
        """Whether a plain step with `start` cached positions runs the whole sequence again (Phi-3's `generate`
        at the boundary: the cache holds the original context, the step's token passes it)."""
        return self.kind == "longrope" and self.refill and start == self.positions

    def label(self) -> str:
        if self.kind == "dynamic":
            return (f"rope type dynamic rescales past {self.positions} positions: rounds that reach past them are "
                    "plain steps (what plain decoding computes)")
        if self.kind == "longrope":
            return (f"rope type longrope switches factors at {self.positions} positions: the rounds that would "
                    "straddle it are plain steps")
        return ""


def rope_line(rope_rounds: int, rounds: int) -> str:
    """What the page and the CLI say of a run whose target's rotary scaling made rounds plain steps."""
    return (f"{rope_rounds} of {rounds} rounds were plain target steps: the target's rotary scaling follows the "
            "forward's length, and a verify there would not rotate its tokens as plain decoding does (see the "
            "load report)")
