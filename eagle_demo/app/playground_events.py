"""The Playground tab's events: presets, Load (`/load`), Probe, Generate (`/generate_stream`), Stop and the
redraws, wired to the components `playground.build_playground` made."""

from __future__ import annotations

import gradio as gr

from . import public
from .autotune import calibrate_ui
from .conversation import conversation_line, new_conversation
from .draft_panel import after_generate, after_load, apply_tree_preset, draft_line
from .forms import GenerateForm, LoadForm, PairForm, handler, progress_fn, stoppable
from .page_limits import max_new_update
from .pages import PAGES
from .playground import Playground, offered_presets
from .registry import REGISTRY
from .stream import CLICKS_JS, COUNT_CLICK_JS, generate_ui, note_generate, rerender_tokens, rerender_tree, stop_ui

__all__ = ["load", "probe", "apply_preset", "probe_by_default", "wire_playground"]


def load(form: LoadForm, request: gr.Request | None, progress):
    """Load the panel's pair (`/load`); with `probe`, probe it too (a pair without a draft has nothing to probe)."""
    key, say = form.key(), stoppable(progress_fn(progress), request)
    session = REGISTRY.load(key, say, client=request.session_hash if request is not None else None)
    if form.probe and session.eagle is not None:
        session = REGISTRY.probe(key, say)
    PAGES.of(request.session_hash if request is not None else None).pair = key
    return public.scrub(session.report_markdown()), public.shown_report(session.report.to_dict()), key


def probe(form: PairForm, request: gr.Request | None, progress):
    """The Probe button: probe the panel's pair, loading it first when it is not loaded. The fourth output is
    the key when this click loaded the pair (then the pair's chat and tree defaults apply, as after Load)."""
    key = form.key()
    loaded_now = REGISTRY.get(key) is None
    session = REGISTRY.probe(key, progress_fn(progress))
    PAGES.of(request.session_hash if request is not None else None).pair = key
    return (public.scrub(session.report_markdown()), public.shown_report(session.report.to_dict()), key,
            key if loaded_now else None)


def apply_preset(name: str):
    offered = offered_presets()
    if name not in offered:
        return gr.skip(), gr.skip()
    return offered[name]


def probe_by_default(demo: gr.Blocks, pg: Playground, device_type: str) -> None:
    """Check "probe after load" when each page opens on a GPU, where a probe costs seconds; leave it off on a
    CPU, where measuring each convention (3 prompts x 32 tokens) of a real pair can take minutes. Done in the
    browser, so `/load`'s `probe` stays off by default for API clients (they ask for it)."""
    if device_type != "cpu":
        demo.load(None, None, pg.probe_box, js="() => true", api_visibility="private", queue=False)


def wire_playground(pg: Playground) -> tuple:
    """Presets, Load (`/load`), Probe, Generate (`/generate_stream`), Stop and the redraws. Returns the last steps
    of Load, of Probe and of Generate (which can load a pair), which the Deploy tab follows. Load, Probe and
    Generate share the "model" concurrency id: a probe changes the draft head, so it never runs beside a
    generation."""
    pg.preset.change(apply_preset, pg.preset, [pg.target, pg.draft], api_visibility="private", queue=False)
    line_inputs = [pg.tree_preset, pg.out.pair_state, *pg.tree_inputs]  # the line says what will run
    pg.tree_preset.change(apply_tree_preset, [pg.tree_preset, pg.out.pair_state], pg.tree_inputs,
                          api_visibility="private", queue=False).then(
        draft_line, line_inputs, pg.auto_line, api_visibility="private", queue=False)
    for box in pg.tree_inputs:
        box.input(draft_line, line_inputs, pg.auto_line, api_visibility="private", queue=False)
    pair_outputs = [pg.out.report_md, pg.out.report_json, pg.out.pair_state]
    load_event = pg.load_btn.click(handler(LoadForm, load), [*pg.panel, pg.probe_box], pair_outputs, api_name="load",
                                   concurrency_limit=1, concurrency_id="model")
    probe_event = pg.probe_btn.click(handler(PairForm, probe), pg.panel, [*pair_outputs, pg.probe_loaded],
                                     api_visibility="private", concurrency_limit=1, concurrency_id="model")
    # Generate notes its click (numbered in the page) and Stop sends the count it has seen: the two unqueued
    # requests may be served in either order, and a Stop must still end the Generate it followed
    generated = pg.generate_btn.click(note_generate, pg.clicks, None, js=COUNT_CLICK_JS, queue=False,
                                      api_visibility="private").then(
        handler(GenerateForm, generate_ui), pg.generate_inputs(), list(pg.out),
        api_name="generate_stream", api_visibility="undocumented", concurrency_limit=1, concurrency_id="model",
        show_progress="hidden", show_progress_on=pg.out.result_state).then(
        after_generate, pg.out.pair_state, [*pg.tree_inputs, pg.auto_line], api_visibility="private", queue=False)
    pg.stop_btn.click(stop_ui, pg.clicks, None, js=CLICKS_JS, queue=False, api_visibility="private")
    pg.new_conversation.click(new_conversation, None, pg.conversation, api_visibility="private", queue=False)
    pg.show_rejected.change(rerender_tokens, [pg.out.result_state, pg.show_rejected], pg.out.tokens,
                            api_visibility="private", queue=False)
    pg.out.round_slider.change(rerender_tree, [pg.out.result_state, pg.out.round_slider], pg.out.fig_tree,
                               api_visibility="private", queue=False)
    defaults = [pg.out.chat, pg.tree_preset, *pg.tree_inputs, pg.auto_line]
    after = load_event.success(after_load, pg.out.pair_state, defaults, api_visibility="private")
    # the automatic tree: calibrate in the background as a model event (runs wait for it), then show the choice
    after.then(calibrate_ui, pg.out.pair_state, pg.auto_line, api_visibility="private", concurrency_limit=1,
               concurrency_id="model", show_progress="hidden").then(
        apply_tree_preset, [pg.tree_preset, pg.out.pair_state], pg.tree_inputs, api_visibility="private")
    probed = probe_event.success(after_load, pg.probe_loaded, defaults, api_visibility="private")
    for event in (after, probed, generated):  # the slider stops at the loaded target's context
        event.then(max_new_update, [pg.out.pair_state, pg.max_new], pg.max_new, api_visibility="private",
                   queue=False)
        event.then(conversation_line, pg.out.pair_state, pg.conversation, api_visibility="private", queue=False)
    # a probe that switched the draft's conventions makes the pair's auto choice stale: tune it again
    probed.then(calibrate_ui, pg.out.pair_state, pg.auto_line, api_visibility="private", concurrency_limit=1,
                concurrency_id="model", show_progress="hidden").then(
        apply_tree_preset, [pg.tree_preset, pg.out.pair_state], pg.tree_inputs, api_visibility="private")
    return after, probed, generated
