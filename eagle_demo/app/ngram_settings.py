"""The Playground's n-gram settings: a small accordion under "race the n-gram draft too", read by the race
(`forms.GenerateForm.run`, also on ZeroGPU, where the settings travel inside the run's frozen `RunConfig`), by the
Deploy tab's n-gram commands and by its "Run the n-gram draft in vLLM"."""

from __future__ import annotations

from typing import Any, NamedTuple

import gradio as gr

from ..common.config import NgramConfig

__all__ = ["NgramInputs", "build_ngram_settings"]


class NgramInputs(NamedTuple):
    """The five settings, in `forms.make_ngram`'s order (components, or their values)."""

    min_n: Any
    max_n: Any
    tokens: Any
    branches: Any
    transformers: Any


def build_ngram_settings() -> NgramInputs:
    """Inside the prompt column. The initial values are NgramConfig's defaults, which are also the API's defaults
    (Gradio takes them from the components)."""
    d = NgramConfig()
    with gr.Accordion("N-gram draft settings", open=False, elem_id="ngram-settings"):
        with gr.Row():
            min_n = gr.Number(d.min_n, precision=0, label="n-gram min", elem_id="ngram-min",
                              info="shortest suffix matched (1-16)")
            max_n = gr.Number(d.max_n, precision=0, label="n-gram max", elem_id="ngram-max",
                              info="longest suffix matched, tried first")
            tokens = gr.Number(d.tokens, precision=0, label="tokens", elem_id="ngram-tokens",
                               info="most tokens a branch proposes per round (1-32)")
            branches = gr.Number(d.branches, precision=0, label="branches",
                                 elem_id="ngram-branches", info="continuations verified as one tree (1-8)")
        transformers = gr.Checkbox(False, label="transformers' rule", elem_id="ngram-transformers",
                                   info="one chain, the earliest occurrence, no repeat: transformers' prompt lookup "
                                        "and vLLM's ngram (branches is then 1)")
    return NgramInputs(min_n, max_n, tokens, branches, transformers)
