"""The Benchmark tab (`/benchmark`): the loaded pair on the shipped suite with the Playground's draft settings
(its "auto" preset: the pair's automatic tree with its gate, each compared draft at its own); optionally other
drafts for the same target, or a sweep of sampling temperatures."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, NamedTuple

import gradio as gr

from ..bench import run as suite
from ..common.config import ConfigError
from ..view.bench_view import (
    BENCH_COLUMNS,
    MISSES_COLUMNS,
    bench_compare_figure,
    bench_compare_rows,
    bench_figure,
    bench_misses_rows,
    bench_rows,
    bench_sweep_figure,
)
from ..view.charts import empty_figure
from . import public
from .autotune import page_tree_choice
from .downloads import BENCH_FILES
from .forms import BenchForm, PairForm, handler, progress_fn, temperatures
from .gpu_tasks import BenchTask, run_to_end
from .pages import PAGES, BenchmarkStopped
from .playground import Playground
from .registry import REGISTRY, entry
from .state import ensure, in_worker, suite_prompts
from .stream import stop_ui

__all__ = ["BenchTab", "BenchOutputs", "build_bench_tab", "wire_bench_tab", "benchmark"]


class BenchOutputs(NamedTuple):
    """The Benchmark event's outputs, in order (values, or the components that show them)."""

    table: Any
    plot: Any
    misses: Any
    csv: str
    json: str

    @classmethod
    def write(cls, table, figure, misses, csv_text: str, json_text: str) -> "BenchOutputs":
        """The CSV and JSON written for download (`downloads.BENCH_FILES`: one folder per process, removed at exit)."""
        folder = BENCH_FILES.fresh()
        (folder / "bench.csv").write_text(csv_text, encoding="utf-8")
        (folder / "bench.json").write_text(json_text, encoding="utf-8")
        return cls(table, figure, misses, str(folder / "bench.csv"), str(folder / "bench.json"))


@dataclasses.dataclass
class BenchTab:
    categories: Any
    repeats: Any
    max_new: Any
    compare: Any
    temps: Any
    button: Any
    stop: Any
    out: BenchOutputs  # of components


def build_bench_tab() -> BenchTab:
    _, categories = suite_prompts()
    with gr.Tab("Benchmark", id="benchmark"):
        gr.Markdown("Baseline and EAGLE on each prompt of the suite, interleaved, with the loaded pair and the "
                    "draft settings of the Playground tab; greedy unless you sweep temperatures. Speedup = ratio "
                    "of mean tokens/s; round cost = tau / speedup, a round's price in plain decoding steps.")
        with gr.Row():
            chosen = gr.CheckboxGroup(categories, value=categories[:2], label="categories", elem_id="bench-categories")
            repeats = gr.Slider(1, 5, value=1, step=1, label="repeats")
            max_new = gr.Slider(8, 512, value=128, step=8, label="max new tokens",
                                elem_id="bench-max-new")  # as `bench` and the README
        with gr.Row():
            compare = gr.Textbox(label="compare with other drafts for this target (optional)", lines=2,
                                 placeholder="repo ids or folders, one per line, e.g. assets/tiny-eagle3; "
                                             "ngram: the n-gram draft (no head)",
                                 elem_id="bench-compare")
            temps = gr.Textbox(label="or sweep sampling temperatures (optional)", lines=2,
                               placeholder="e.g. 0, 0.7, 1.0 (0 = greedy; top-p, top-k and seed from "
                                           "the Playground's sampling settings)", elem_id="bench-temps")
        with gr.Row():
            button = gr.Button("Run benchmark", variant="primary", elem_id="bench-btn")
            stop = gr.Button("Stop", variant="stop", elem_id="bench-stop-btn")
        table = gr.Dataframe(label="results by category", interactive=False, elem_id="bench-table",
                             headers=BENCH_COLUMNS)
        plot = gr.Plot(empty_figure("Speedup and tau by category", "run the benchmark"), label="speedup and tau")
        misses = gr.Dataframe(label="where the draft missed most (its favourite token where the target "
                                    "said another)", interactive=False, elem_id="bench-misses",
                              headers=["draft", *MISSES_COLUMNS])
        with gr.Row():
            csv = gr.File(label="per-prompt CSV")
            json = gr.File(label="full report JSON")
    return BenchTab(chosen, repeats, max_new, compare, temps, button, stop,
                    BenchOutputs(table, plot, misses, csv, json))


NGRAM_NAMES = ("ngram", "n-gram")  # in the compare box: the n-gram draft, beside the heads


def benchmark(form: BenchForm, request: gr.Request | None, progress) -> BenchOutputs:
    if not form.chosen:
        raise ConfigError("pick at least one category")
    names = [x.strip() for x in (form.compare_text or "").replace(",", "\n").splitlines()]
    ngram = any(x.lower() in NGRAM_NAMES for x in names)  # the n-gram draft races too (`decoding.ngram`)
    others = [d for d in (entry(x, "draft") for x in names if x.lower() not in NGRAM_NAMES) if d]
    temps = temperatures(form.temps_text)
    if (others or ngram) and temps:
        raise ConfigError("compare drafts or sweep temperatures, one at a time; clear one of the two boxes")
    key = form.key()
    if others and key.draft is None:
        raise ConfigError("load a pair with a draft first; the drafts to compare run next to it")
    if (others or ngram) and REGISTRY.served is not None:
        raise ConfigError("comparing drafts is off on a ZeroGPU Space (each draft runs inside one GPU call); "
                          "compare them on a dedicated GPU or locally")
    page = PAGES.of(request.session_hash if request is not None else None)
    stop = page.benchmark_stop()  # the page's Stop sets it (since the click): the benchmark ends after its prompt
    session = ensure(key, progress_fn(progress))
    run = form.run()  # sweeps set the temperature
    # the Playground's "auto" runs here as there: the pair's choice with its gate (waits for a calibration)
    run, auto, _ = page_tree_choice(page, key, session)(run)
    session.check_tree(run)

    items = suite.load_suite(None, form.chosen)
    options = dict(repeats=int(form.repeats), chat=bool(form.chat_on), progress=_steps(progress, stop))
    if REGISTRY.served is not None:  # ZeroGPU: one GPU call that takes and returns data (`gpu_tasks`)
        task = BenchTask(tuple(items), run, tuple(temps), int(form.repeats), bool(form.chat_on))
        return _on_gpu(key, session, task, auto, progress_fn(progress), stop)
    if not others and not temps and not ngram:
        report = suite.with_auto(in_worker(suite.run_bench, session, items, run, **options), auto)
        return BenchOutputs.write(bench_rows(report), bench_figure(report), bench_misses_rows([report]),
                                  report.to_csv(), report.to_json())
    if temps:
        by, figure = "temperature", bench_sweep_figure
        reports = in_worker(suite.sweep_temperatures, session, items, run, temps, **options)
        reports = [suite.with_auto(r, auto) if r.settings["temperature"] == 0 else r for r in reports]  # tuned greedy
    else:
        by, figure, sessions = "draft", bench_compare_figure, [session]
        for n, draft in enumerate(others):  # each shares the loaded target; freed when this call returns
            if progress is not None:
                progress(0.0, desc=f"loading draft {n + 1} of {len(others)}: {draft}")
            sessions.append(session.with_draft(draft, max_download_bytes=public.max_download_bytes()
                                               if public.enabled() else None))
        autos = [auto] + (in_worker(_own_autos, sessions[1:], progress) if auto is not None
                          else [None] * len(others))
        runs = [a.run_config(run) for a in autos] if auto is not None else None  # each head at its own auto tree
        reports = in_worker(suite.compare_drafts, sessions, items, run, runs=runs, **options)
        reports = [suite.with_auto(r, a) for r, a in zip(reports, autos)]
        if ngram:
            plain_run = dataclasses.replace(run, pause_below=0.0, pause_by_length=(), pause_first=False, retune=None)
            reports.append(in_worker(suite.run_bench, session, items, plain_run, racer="ngram", **options))
    return BenchOutputs.write(bench_compare_rows(reports, by), figure(reports), bench_misses_rows(reports, by),
                              suite.comparison_csv(reports, by), suite.comparison_json(reports, by))


def _on_gpu(key, session, task: BenchTask, auto, say, stop) -> BenchOutputs:
    """The benchmark on ZeroGPU: one GPU call (`gpu_tasks.BenchTask`) whose progress comes back as yields (to
    `say`); the page's Stop closes it after the prompt it is on."""
    from ..bench.run import comparison_csv, comparison_json, with_auto

    result = run_to_end(key, session, task, say, stop)
    if not task.temperatures:
        report = with_auto(result, auto)
        return BenchOutputs.write(bench_rows(report), bench_figure(report), bench_misses_rows([report]),
                                  report.to_csv(), report.to_json())
    reports = [with_auto(r, auto) if r.settings["temperature"] == 0 else r for r in result]
    return BenchOutputs.write(bench_compare_rows(reports, "temperature"), bench_sweep_figure(reports),
                              bench_misses_rows(reports, "temperature"), comparison_csv(reports, "temperature"),
                              comparison_json(reports, "temperature"))


def _own_autos(sessions, progress) -> list:
    """Each compared draft's own automatic tree (calibrated once per pair, then read from the disk cache)."""
    from ..autotree.choose import auto_tree

    autos = []
    for n, session in enumerate(sessions):
        if progress is not None:
            progress(0.0, desc=f"the automatic tree of draft {n + 1} of {len(sessions)}")
        autos.append(auto_tree(session))
    return autos


def _steps(progress, stop: threading.Event):
    def step(done: int, total: int, name: str) -> None:
        if stop.is_set():
            raise BenchmarkStopped(f"benchmark stopped after {done} of {total} runs; press Run benchmark "
                                   "to start again")
        if progress is not None:
            progress(done / total, desc=f"{name} ({done}/{total})")
    return step


def bench_pair(*panel):
    """The pair a finished benchmark ran on: the page's pair from then on (Deploy shows its commands)."""
    return PairForm(*panel).key()


def note_benchmark(request: gr.Request = None) -> None:
    """The click, noted unqueued (`pages.Page.note_benchmark`): a Stop pressed while it waits is not lost."""
    PAGES.of(request.session_hash if request is not None else None).note_benchmark()


def wire_bench_tab(tab: BenchTab, pg: Playground):
    """Wires the tab; returns the step after a benchmark that succeeded (it sets the page's pair)."""
    inputs = [*pg.panel, tab.categories, tab.repeats, tab.max_new, pg.out.chat, *pg.tree_inputs, tab.compare, tab.temps,
              pg.top_p, pg.top_k, pg.seed]  # BenchForm's fields, in order
    done = tab.button.click(note_benchmark, None, None, queue=False, api_visibility="private").then(
        handler(BenchForm, benchmark), inputs, list(tab.out), api_name="benchmark", concurrency_limit=1,
        concurrency_id="model")
    tab.stop.click(stop_ui, None, None, queue=False, api_visibility="private")  # the Playground's Stop
    return done.success(bench_pair, pg.panel, pg.out.pair_state, api_visibility="private", queue=False)
