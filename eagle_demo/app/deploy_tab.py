"""The Deploy tab: vLLM and SGLang command lines for the loaded pair with the current draft settings, the target
with the n-gram draft (no head; `deploy.ngram`), and "Run in vLLM" (`vllm_panel`)."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import gradio as gr

from ..common.errors import one_line
from . import public
from .forms import make_ngram, make_tree
from .playground import Playground
from .registry import REGISTRY, PairKey
from .vllm_panel import VllmPanel, build_vllm_panel, wire_vllm_panel

__all__ = ["DeployTab", "DeployOutputs", "build_deploy_tab", "wire_deploy_tab", "deploy"]


class DeployOutputs(NamedTuple):
    """The Deploy event's outputs, in order (values, or the components that show them)."""

    message: Any
    vllm: Any = ""
    sglang: Any = ""
    notes: Any = ""
    ngram_vllm: Any = ""
    ngram_sglang: Any = ""
    ngram_notes: Any = ""


@dataclasses.dataclass
class DeployTab:
    button: Any
    out: DeployOutputs  # of components
    vllm: VllmPanel


def build_deploy_tab() -> DeployTab:
    with gr.Tab("Deploy", id="deploy"):
        gr.Markdown("Serve the loaded pair with the current draft settings.")
        button = gr.Button("Refresh commands", elem_id="deploy-btn")
        message = gr.Markdown("Load a pair to see its commands.", elem_id="deploy-message")
        code = dict(language="shell", interactive=False, lines=2, max_lines=6, wrap_lines=True,
                    value="# load a pair (Playground tab) to see this command")
        vllm = gr.Code(label="vLLM", elem_id="vllm-cmd", **code)
        sglang = gr.Code(label="SGLang", elem_id="sglang-cmd", **code)
        notes = gr.Markdown()
        gr.Markdown("### N-gram draft, no head\nThe loaded target served with the n-gram draft (prompt lookup) at the "
                    "settings the page races it with (Playground, \"N-gram draft settings\").")
        ngram = [gr.Code(label=f"{name} n-gram", elem_id=f"{name.lower()}-ngram-cmd", **code)
                 for name in ("vLLM", "SGLang")]
        ngram_notes = gr.Markdown(elem_id="ngram-notes")
        panel = build_vllm_panel()
    return DeployTab(button, DeployOutputs(message, vllm, sglang, notes, *ngram, ngram_notes), panel)


def ngram_section(target: str, *settings) -> tuple[str, str, str]:
    """(vLLM command, SGLang command, notes) for the target with the n-gram draft as the page races it: `settings`
    are the page's n-gram settings (`forms.make_ngram`'s arguments; none: NgramConfig's defaults)."""
    from ..deploy.ngram import ngram_commands

    cfg = make_ngram(*settings)
    out = ngram_commands(target, cfg)
    return out.vllm, out.sglang, f"Settings: {cfg.label()}.\n\n" + out.markdown()


def deploy(key: PairKey | None, mode_value, depth_value, topk_value, total_value, chain_value,
           chain_stop_value=0.0, hot_value=0, *ngram_settings) -> DeployOutputs:
    """The tab's commands; `ngram_settings`: the Playground's n-gram settings (`ngram_settings.NgramInputs`). Paths
    are shown relative to where the commands run (`public.relative`), never as the server's absolute paths."""
    session = REGISTRY.get(key) if key is not None else None
    if session is None:
        return DeployOutputs("Load a pair to see its commands.")
    return DeployOutputs(*(public.relative_text(v) if isinstance(v, str) else v for v in
                           _commands(key, session, (mode_value, depth_value, topk_value, total_value, chain_value,
                                                    chain_stop_value, hot_value), ngram_settings)))


def _commands(key: PairKey, session, draft_settings: tuple, ngram_settings: tuple) -> DeployOutputs:
    """`deploy`'s commands with the server's paths: `draft_settings` are the Draft panel's seven settings
    (`forms.make_tree`'s arguments), `ngram_settings` the Playground's n-gram settings."""
    target, draft = public.relative(key.target), public.relative(key.draft)
    try:
        ngram = ngram_section(target, *ngram_settings)
    except Exception as exc:
        ngram = ("", "", f"Cannot build the n-gram commands: {one_line(exc)}")
    if not key.draft:
        return DeployOutputs(f"**{key.label()}**: no draft head, so the n-gram draft's commands below serve it.",
                             "", "", "", *ngram)
    try:
        from ..deploy import deployment_commands
    except ImportError:
        return DeployOutputs("Deployment commands are not available in this version (eagle_demo.deploy is missing).")
    try:
        tree = make_tree(*draft_settings)
        out = deployment_commands(target, draft, session.report, tree)
    except Exception as exc:
        return DeployOutputs(f"Cannot build commands: {one_line(exc)}", "", "", "", *ngram)
    from ..serving.flags import shape_flags
    from .diagnose_tab import pair_rank

    flags = shape_flags(tree, pair_rank(key))
    shape = (f"**shape {tree.label()}**: SGLang `{flags['sglang']}`; vLLM `{flags['vllm_json']}`"
             + "".join(f"; {n}" for n in flags["notes"]))
    return DeployOutputs(f"Commands for **{key.label()}**, draft settings: {tree.label()}.", out.get("vllm", ""),
                         out.get("sglang", ""), "\n\n".join(filter(None, [out.get("notes", ""), shape])), *ngram)


def wire_deploy_tab(tab: DeployTab, pg: Playground, *after_pair) -> None:
    """Refresh on the button and after every Load, Probe and Generate (`after_pair`: those events' last steps; a
    probe can change the conventions the commands carry, a Generate can load a pair)."""
    outputs, inputs = list(tab.out), [pg.out.pair_state, *pg.tree_inputs, *pg.ngram]
    for event in after_pair:
        event.then(deploy, inputs, outputs, api_visibility="private")
    tab.button.click(deploy, inputs, outputs, api_visibility="private", queue=False)
    wire_vllm_panel(tab.vllm, pg, *after_pair)
