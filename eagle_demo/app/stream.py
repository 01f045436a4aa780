"""The Playground's Generate event (`/generate_stream`), its Stop (shared by the Benchmark tab), and the redraws
of a finished run.

While a run streams, the token view and stats redraw at most every UPDATE_SECONDS, and one chart (in turn) every
CHART_SECONDS (everything at the end). Gradio's page rebuilds a Plot from scratch on every change and plotly draws
it twice (~0.1-0.2 s of a slow core each), so the live charts are the page's main cost: four at once came in
bursts, and with the charts off the page kept 0.97 of the engine's speed against 0.88 with one chart a second.
CHART_TURNS is the rotation: the race (tokens vs time) every other turn, each of the other three every sixth.
Measured with scripts/ui_overhead.py: see docs/perf.md, "The page's streaming cost".

The race stays fair: when EAGLE ends, its final state is drawn whole and the page gets DRAW_SETTLE to render it
before the baseline starts (the worker waits, untimed); while the baseline runs only the stats strip and the race
chart redraw. A short run's first redraw (0.5 s in) could land inside the baseline, slow it and inflate the
page's speedup (README "The page" has the figures); EAGLE runs beside the redraws, so the page can only
understate it.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import gradio as gr

from ..common.errors import one_line
from ..decoding.metrics import RunView
from ..prepare import RunRequest, prepare_run, race_phases
from ..view.charts import (
    acceptance_depth_figure,
    accepted_length_figure,
    empty_figure,
    time_split_figure,
    tokens_time_figure,
)
from ..view.stats import stats_html, summary
from ..view.tokens import TextCache, token_html
from ..view.tree_chart import tree_figure
from .autotune import page_tree_choice
from .forms import GenerateForm, progress_fn
from .pages import PAGES
from .registry import REGISTRY
from .state import LiveRun, best_round, decoder, ensure, start_run

__all__ = ["GenerateOutputs", "generate_ui", "note_generate", "stop_ui", "close_page", "COUNT_CLICK_JS", "CLICKS_JS",
           "rerender_tokens", "rerender_tree", "UPDATE_SECONDS", "CHART_SECONDS", "CHART_TURNS"]

UPDATE_SECONDS = 0.5
CHART_SECONDS = 1.5
CHART_TURNS = (0, 1, 0, 2, 0, 3)  # indices into (tokens vs time, accepted length, acceptance by depth, time split)
DRAW_SETTLE = 0.5  # seconds the page gets to render EAGLE's final state before the baseline starts
POLL_SECONDS = 0.05  # how often the page's generator looks at the run between redraws
STREAM_TAIL = 400  # tokens shown while streaming (the whole output at the end)
TREE_PENDING = empty_figure("Draft tree", "the rounds' trees appear when the run ends")


class GenerateOutputs(NamedTuple):
    """Every output of the Generate (and Stop) event, in the order the event lists them. The page's components
    carry the same names (`playground.Playground`), so the event's output list is built from these fields."""

    tokens: Any
    stats: Any
    fig_time: Any
    fig_accept: Any
    fig_depth: Any
    fig_split: Any
    round_slider: Any
    fig_tree: Any
    text_out: Any
    stats_json: Any
    result_state: Any
    report_md: Any
    report_json: Any
    pair_state: Any
    chat: Any

    @classmethod
    def skip(cls) -> "GenerateOutputs":
        return cls(*(gr.skip(),) * len(cls._fields))


class PairOutputs(NamedTuple):
    """The pair outputs a Generate sends with its first redraw (the report of the pair that runs)."""

    report_md: Any
    report_json: Any
    pair_state: Any
    chat: Any


def _figures(eagle: RunView, baseline: RunView | None, ngram: RunView | None = None) -> tuple:
    """Builders of the four live charts, in CHART_TURNS' numbering."""
    return (lambda: tokens_time_figure(eagle, baseline, ngram), lambda: accepted_length_figure(eagle),
            lambda: acceptance_depth_figure(eagle), lambda: time_split_figure(eagle))


def outputs_for(live: LiveRun, decode, *, show: bool, final: bool, report: PairOutputs | None = None,
                charts: bool = True, sent: dict | None = None, every_chart: bool = False) -> GenerateOutputs:
    """Every output of the Generate event: the run's final state (`final`) or a redraw while it streams. show: the
    token view shows the rejected drafts; report: the pair's outputs sent with this redraw. While streaming
    (`sent`: what the page has), an output that should not change is sent again with the value it had, never as
    gr.skip(): Gradio diffs each streamed output against the last one sent (an equal value costs nothing), but a
    skip is an update that rebuilds the component on the server each time (for a Plot ~5 ms, a dozen of them per
    redraw). charts: one chart redraws in turn; every_chart: all four redraw (EAGLE's final state)."""
    eagle, baseline, phase = live.snapshot()
    ngram = live.ngram_snapshot()
    state = live.state if final else (phase if phase in ("baseline", "ngram") else "running")
    note = "stopped: the engine finished its current round and ended cleanly" if state == "stopped" else ""
    if state == "stopped" and baseline is not None and baseline.finish is not None \
            and baseline.finish.reason == "stopped":  # Stop came while the baseline ran: it covers part of the text
        note = (f"stopped during the baseline, after {len(baseline.token_ids)} of EAGLE's {len(eagle.token_ids)} "
                "tokens: its tokens/s and the speedup are over those; the identity check needs both runs whole")
    note = "; ".join(n for n in (note, live.note) if n)
    pair = report or PairOutputs(*(gr.skip(),) * 4)
    stats_view = stats_html(eagle, baseline, live.greedy, state, note, live.auto, ngram, decode)
    if not final:
        if sent.get("eagle_events") != len(eagle.events):  # EAGLE's view moved (not during the baseline)
            sent["tokens"] = token_html(eagle, decode, show, tail=STREAM_TAIL)  # the tail: redraws
            sent["eagle_events"] = len(eagle.events)  # stay small
        builders = _figures(eagle, baseline, ngram)
        if "figures" not in sent or every_chart:  # the run's first redraw replaces the last run's charts at once
            sent["figures"], sent["turn"] = [build() for build in builders], 0
        elif charts:  # then one chart per turn: the page redraws a Plot from scratch on every change
            # (during the baseline only the race: the other three show EAGLE's finished run already)
            turn = 0 if phase in ("baseline", "ngram") else CHART_TURNS[sent["turn"] % len(CHART_TURNS)]
            sent["figures"][turn], sent["turn"] = builders[turn](), sent["turn"] + 1
        # slider and gr.State outputs stay skips: a slider value would fire its change event, and
        # gr.State outputs are never sent to the page
        return GenerateOutputs(sent["tokens"], stats_view, *sent["figures"], gr.skip(), TREE_PENDING, "", None,
                               gr.skip(), *pair)
    figures = [build() for build in _figures(eagle, baseline, ngram)]
    pick = best_round(eagle)
    slider = gr.update(minimum=0, maximum=max(1, len(eagle.rounds) - 1), value=pick)
    tree = tree_figure(eagle.rounds[pick], decode) if eagle.rounds else \
        empty_figure("Draft tree", "no rounds in this run")
    text = decode(list(eagle.token_ids)) if eagle.token_ids else ""
    stats_value = summary(eagle, baseline, live.greedy, text, live.auto, ngram, decode)
    result = {"key": live.key, "eagle": list(eagle.events),
              "baseline": list(baseline.events) if baseline else None, "greedy": live.greedy,
              "ngram": list(ngram.events) if ngram else None,
              "prompt_ids": live.prompt_ids, "tree": live.tree}
    return GenerateOutputs(token_html(eagle, decode, show), stats_view, *figures, slider, tree, text, stats_value,
                           result, *pair)


def generate_ui(form: GenerateForm, request: gr.Request | None, progress):
    """The Generate event. A failure leaves the stats strip at "failed" (the page said "starting..." on the click)
    and shows its one-line error."""
    try:
        yield from _generate(form, request, progress)
    except Exception as exc:  # a stamp makes each failure's strip new, so a second one in a row is drawn too
        failed = stats_html(None, None, True, "failed", one_line(exc)) + f"<!-- {time.monotonic_ns()} -->"
        yield GenerateOutputs.skip()._replace(stats=failed)
        raise


def _pair_outputs(key, session, *, chat_on: bool, was_loaded: bool) -> tuple[PairOutputs, PairOutputs, bool, str]:
    """The pair's outputs on the first redraw and on later ones, whether the prompt runs in the chat template, and
    a note when a ticked chat box could not apply."""
    report_value = session.report.to_dict()  # the report of the pair that runs, on the page as it streams
    loaded = PairOutputs(session.report_markdown(), report_value, gr.skip(), bool(chat_on))
    if not was_loaded:  # this Generate loaded the pair: the chat default Load would have set applies
        chat_on = session.has_chat_template
        first = PairOutputs(loaded.report_md, report_value, key, gr.update(value=chat_on, interactive=chat_on))
        loaded = loaded._replace(chat=chat_on)
    else:  # the page may have opened after another page loaded it: its pair state learns the key
        first = loaded._replace(pair_state=key)
    template_note = ""
    if chat_on and not session.has_chat_template:  # ticked on a page that opened before the pair was loaded
        chat_on, template_note = False, "this pair's tokenizer has no chat template: the prompt ran as plain text"
        first, loaded = first._replace(chat=gr.update(value=False, interactive=False)), loaded._replace(chat=False)
    return first, loaded, chat_on, template_note


def _generate(form: GenerateForm, request: gr.Request | None, progress):
    key = form.key()
    was_loaded = REGISTRY.get(key) is not None
    session = ensure(key, progress_fn(progress))
    first, loaded, chat_on, template_note = _pair_outputs(key, session, chat_on=form.chat_on, was_loaded=was_loaded)
    page = PAGES.of(request.session_hash if request is not None else None)
    phases = race_phases(race=bool(form.race_on), ngram=bool(form.race_ngram_on))
    history = page.turns_for(key) if chat_on else ()  # a chat follow-up continues the page's conversation
    asked = RunRequest(form.prompt_text, form.run(), phases, chat=bool(chat_on), history=history)
    ready = prepare_run(session, asked, page_tree_choice(page, key, session))  # waits for a calibration
    if page.stopped_before_start():  # Stop was pressed while this waited its turn
        live = LiveRun(key, ready, "stopped before it started", started=False)
        yield outputs_for(live, TextCache(session.decode), show=form.show, final=True, report=first)
        return
    note = "; ".join(n for n in (template_note, ready.note, session.graph_note()) if n)
    live = start_run(key, ready, note, watched=True)
    page.run, page.pair = live, key
    decode, show = TextCache(session.decode), form.show
    try:
        seen, drawn_at, charts_at, sent = -1, time.monotonic(), 0.0, {}
        while not live.done.wait(POLL_SECONDS):  # short waits: a cancel or the end is seen at once
            if live.race and not live.eagle_drawn.is_set() and not live.stop.is_set() and live.eagle_finished():
                # EAGLE's final state, drawn whole now, and given time to render before its baseline starts
                # (the worker waits for it): no heavy redraw runs beside the baseline, which would slow it and
                # inflate the speedup. Later redraws are the stats and the race chart only.
                yield outputs_for(live, decode, show=show, final=False, report=first if seen < 0 else loaded,
                                  sent=sent, every_chart=True)
                time.sleep(DRAW_SETTLE)
                live.eagle_drawn.set()
                seen, drawn_at = live.count(), time.monotonic()
                charts_at = drawn_at
                continue
            now = time.monotonic()
            if now - drawn_at < UPDATE_SECONDS or live.stop.is_set():  # Stop draws the final state
                continue
            count = live.count()
            if count == seen:
                continue
            charts = now - charts_at >= CHART_SECONDS
            yield outputs_for(live, decode, show=show, final=False, report=first if seen < 0 else loaded,
                              charts=charts, sent=sent)
            seen, drawn_at, charts_at = count, now, (now if charts else charts_at)
        if live.error:
            raise gr.Error(live.error, print_exception=False)
        yield outputs_for(live, decode, show=show, final=True, report=first if seen < 0 else loaded)
        finish = live.eagle.finish
        if chat_on and finish is not None and finish.reason != "stopped":
            page.add_turn(key, form.prompt_text, session.answer_text(finish.token_ids))
    finally:
        if not live.done.is_set():  # cancelled or the page went away: end the engine cleanly
            live.stop.set()


# the click also shows "starting..." at once (the server's first redraw can be seconds away: a load, a calibration)
COUNT_CLICK_JS = """(n) => {
  const strip = document.querySelector('#eagle-stats .eagle-stats');
  if (strip) {
    strip.dataset.state = 'starting';
    const status = strip.querySelector('.status .stat-value');
    if (status) status.textContent = 'starting...';
  }
  return (window.eagleGenerateClicks = (window.eagleGenerateClicks || 0) + 1);
}"""
CLICKS_JS = "(n) => window.eagleGenerateClicks || 0"


def note_generate(click: float | None = None, request: gr.Request = None):
    """Runs (unqueued) before each Generate joins the queue: a Stop that comes while it waits ends it.
    `click` is the page's count of its Generate clicks (COUNT_CLICK_JS), so a Stop whose request is served
    before this one still finds the click it followed."""
    PAGES.of(request.session_hash if request is not None else None).note_click(int(click or 0))


def stop_ui(clicks: float | None = None, request: gr.Request = None):
    """Tell this page's run to stop, and nothing else. The Generate event itself sees the stop, lets the
    engine finish its round, draws the final state and ends normally. Stop deliberately does not use
    Gradio's `cancels=`: the page's cancel finishes asynchronously and then clears whatever submission
    the Generate button has at that moment, so a Generate pressed before the cancel came back lost
    its run's output (the page stayed at 'stopped'; tests/test_browser.py flaked on this)."""
    # the page's Generate clicks so far (CLICKS_JS): a note still on its way is ended too
    PAGES.of(request.session_hash if request is not None else None).note_stop(int(clicks or 0))


def close_page(request: gr.Request = None) -> None:
    """The page closed (Gradio's unload): what it owned is freed (`pages.Pages.close`)."""
    PAGES.close(request.session_hash if request is not None else None)


def rerender_tokens(result, show):
    if not result:
        return gr.skip()
    return token_html(RunView.of(result["eagle"]), decoder(result["key"]), show)


def rerender_tree(result, index):
    if not result:
        return gr.skip()
    view = RunView.of(result["eagle"])
    if not view.rounds:
        return empty_figure("Draft tree", "no rounds in this run")
    i = min(max(int(index or 0), 0), len(view.rounds) - 1)
    return tree_figure(view.rounds[i], decoder(result["key"]))
