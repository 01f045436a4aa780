"""The EAGLE-3 features of one target forward, as the serving engines capture them (`runner.py`, `static.py`)."""

from __future__ import annotations

import torch

__all__ = ["Features"]


class Features:
    """The EAGLE-3 features of one forward: `with Features(base, layers) as f: out = base(...,
    output_hidden_states=True)`, then `f.of(out.hidden_states)`. Index L is read from the final norm's input (a hook
    for that forward only; a base model without `norm` keeps HF's post-norm state)."""

    def __init__(self, base, layers: tuple[int, ...]):
        self.layers, self.norm, self.value, self.hook = layers, getattr(base, "norm", None), None, None
        config = getattr(base, "config", None)
        self.last = int(config.get_text_config().num_hidden_layers) if config is not None else -1

    def __enter__(self) -> "Features":
        if self.norm is not None and self.last in self.layers:
            self.hook = self.norm.register_forward_pre_hook(self._keep)
        return self

    def _keep(self, module, args) -> None:
        self.value = args[0] if args else None  # [1, n, H]

    def __exit__(self, *exc) -> None:
        if self.hook is not None:
            self.hook.remove()

    def of(self, hidden_states, device=None) -> torch.Tensor:
        """[n, k*H] on `device` (a target spread over GPUs leaves each layer's output on its own device)."""
        parts = [p[0].to(device) if device is not None else p[0] for p in self._parts(hidden_states)]  # k x [n, H]
        return torch.cat(parts, dim=-1)

    def of_batch(self, hidden_states) -> torch.Tensor:
        """[b, T, k*H]: every row of a batched forward (training reads the features the engines read)."""
        return torch.cat(self._parts(hidden_states), dim=-1)

    def _parts(self, hidden_states) -> list:
        return [self.value if i == self.last and self.value is not None else hidden_states[i] for i in self.layers]
