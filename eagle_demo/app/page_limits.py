"""Limits the page learns once a pair is loaded: the `max new tokens` slider capped by the target's context window
(a value past it would fail only after the click). No model is loaded here."""

from __future__ import annotations

import gradio as gr

from .registry import REGISTRY, PairKey

__all__ = ["SLIDER_MAX", "max_new_update"]

SLIDER_MAX = 8192  # the slider's range before a pair is loaded


def max_new_update(key: PairKey | None, value: float | None = None):
    """The slider's range for the loaded pair: up to its target's context (less a token of prompt), never above
    SLIDER_MAX; the value is brought inside. Unchanged while no pair is loaded or the context is unknown."""
    session = REGISTRY.get(key) if key is not None else None
    limit = session.context_limit() if session is not None else 0
    if not limit:
        return gr.skip()
    top = max(1, min(SLIDER_MAX, int(limit) - 1))
    shown = None if value is None else min(int(value), top)
    return gr.update(maximum=top, value=shown, info=f"at most {top}: the target's context is {int(limit)} tokens")
