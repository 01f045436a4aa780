"""The target's logits as its own causal-LM forward returns them, from its base model's last hidden states.

The engines run the base model and the output projection themselves (features for the draft, static buffers,
graphs). Some families change the projection's output before returning it, and sampling then draws from the
changed logits:
- Gemma 2/3/3n/4: `final_logit_softcapping` (logits / cap, tanh, x cap);
- Cohere, Cohere 2: `logit_scale` (x scale);
- Granite, Granite MoE: `logits_scaling` (/ scaling); HyperCLOVA X has the same key and multiplies.
`LogitHead` repeats those ops in the family's own order, so greedy and sampled output match the model's own
forward. `target_check.check_target` compares both on a few tokens at load and refuses a target whose forward does
something else after the projection, instead of sampling from another distribution without a word.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LogitHead"]

_MULTIPLY_BY_SCALING = ("hyperclovax",)  # model types whose `logits_scaling` multiplies (Granite's divides)


@dataclass(frozen=True)
class LogitHead:
    multiply: float | None = None  # logits x multiply
    divide: float | None = None  # logits / divide
    softcap: float | None = None  # tanh(logits / softcap) x softcap

    @classmethod
    def of(cls, model) -> "LogitHead":
        cfg = model.config.get_text_config()
        multiply = getattr(model, "logit_scale", None)  # Cohere keeps it on the causal LM
        divide = getattr(cfg, "logits_scaling", None)
        if divide is not None and getattr(cfg, "model_type", "") in _MULTIPLY_BY_SCALING:
            multiply, divide = divide, None
        cap = getattr(cfg, "final_logit_softcapping", None)
        return cls(multiply=None if multiply in (None, 1, 1.0) else float(multiply),
                   divide=None if divide in (None, 1, 1.0) else float(divide), softcap=float(cap) if cap else None)

    @property
    def identity(self) -> bool:
        return self.multiply is None and self.divide is None and self.softcap is None

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """logits [n, V] from the output projection -> the logits the model's own forward returns [n, V]."""
        if self.multiply is not None:
            logits = logits * self.multiply
        if self.divide is not None:
            logits = logits / self.divide
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def label(self) -> str:
        parts = [f"x {self.multiply:g}" if self.multiply is not None else "",
                 f"/ {self.divide:g}" if self.divide is not None else "",
                 f"softcap {self.softcap:g}" if self.softcap is not None else ""]
        return ", ".join(p for p in parts if p) or "none"
