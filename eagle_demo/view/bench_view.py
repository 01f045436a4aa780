"""Benchmark reports as page views: tables (pandas DataFrames) and plotly figures."""

from __future__ import annotations

from ..bench.report import draft_label, report_label
from ..race.speedup import verdict
from .charts import BASELINE_COLOR, DEPTH_COLORS, EAGLE_COLOR, REJECTED_COLOR, TARGET_COLOR, Figure, figure
from .tokens import escape, visible

__all__ = ["BENCH_COLUMNS", "MISSES_COLUMNS", "bench_rows", "bench_figure", "bench_compare_rows",
           "bench_compare_figure", "bench_misses_rows", "bench_sweep_figure"]

BENCH_COLUMNS = ["category", "prompts", "runs", "tau", "EAGLE tok/s", "baseline tok/s", "speedup",
                 "round cost (steps)", "identical"]


# speedup 1.0 (plain decoding) across a bench chart
PLAIN_DECODING_LINE = {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                       "line": {"dash": "dot", "color": BASELINE_COLOR}}


def bench_rows(report):
    """bench.BenchReport -> a pandas DataFrame, one row per category plus the overall row."""
    import pandas as pd

    rows = []
    for c in (*report.categories, report.overall):
        rows.append([c.category, c.prompts, c.runs, round(c.tau, 2), round(c.eagle_tokens_per_second, 1),
                     round(c.baseline_tokens_per_second, 1), round(c.speedup, 2), round(c.round_cost, 2),
                     verdict(c.all_equal)])
    return pd.DataFrame(rows, columns=BENCH_COLUMNS)


def bench_figure(report) -> Figure:
    """Speedup (left axis) and tau (right axis) per category, the overall figure last."""
    cats = [*report.categories, report.overall]
    names = [c.category for c in cats]
    traces = [
        {"type": "bar", "x": names, "y": [c.speedup for c in cats], "name": "speedup (x)", "offsetgroup": 0,
         "marker": {"color": EAGLE_COLOR}, "text": [f"{c.speedup:.2f}x" for c in cats], "textposition": "outside",
         "cliponaxis": False},
        {"type": "bar", "x": names, "y": [c.tau for c in cats], "name": "tau (tokens per round)", "offsetgroup": 1,
         "yaxis": "y2", "marker": {"color": TARGET_COLOR}, "text": [f"{c.tau:.2f}" for c in cats],
         "textposition": "outside", "cliponaxis": False},
    ]
    tree = report.settings.get("tree")
    title = "Speedup and tau by category" + (f" ({tree})" if tree else "")
    return figure(traces, title, "category", "speedup vs plain decoding", height=340,
                   barmode="group", shapes=[PLAIN_DECODING_LINE],
                   yaxis2={"title": {"text": "tau"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})


def bench_compare_rows(reports, by: str = "draft"):
    """Several bench reports (drafts on one target, or one draft at several temperatures) -> one DataFrame
    whose first column tells them apart."""
    import pandas as pd

    frames = []
    for r in reports:
        frame = bench_rows(r)
        frame.insert(0, by, report_label(r, by))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def bench_compare_figure(reports) -> Figure:
    """Speedup per category, one bar group per draft, tau in each bar's label."""
    colors = (EAGLE_COLOR, TARGET_COLOR, DEPTH_COLORS[6], REJECTED_COLOR, DEPTH_COLORS[2], BASELINE_COLOR)
    traces = []
    for i, r in enumerate(reports):
        cats = [*r.categories, r.overall]
        label = f"{draft_label(r.settings['draft'])} ({r.settings['draft_family']})"
        traces.append({"type": "bar", "x": [c.category for c in cats], "y": [c.speedup for c in cats], "name": label,
                       "marker": {"color": colors[i % len(colors)]},
                       "text": [f"{c.speedup:.2f}x<br>tau {c.tau:.2f}" for c in cats], "textposition": "outside",
                       "cliponaxis": False,
                       "hovertemplate": "%{x}: %{y:.2f}x<extra>" + escape(label) + "</extra>"})
    return figure(traces, "Speedup by category, one bar per draft (tau in the labels)", "category",
                   "speedup vs plain decoding", height=360, barmode="group", shapes=[PLAIN_DECODING_LINE])


MISSES_COLUMNS = ["the draft guessed", "the target said", "times"]


def bench_misses_rows(reports, by: str = "draft"):
    """Where each draft missed most over a benchmark: its favourite token against the target's token."""
    import pandas as pd

    rows = [[report_label(r, by), visible(m["draft"]), visible(m["target"]), m["count"]]
            for r in reports for m in r.extra.get("top_misses", [])[:10]]
    return pd.DataFrame(rows, columns=[by, *MISSES_COLUMNS])


def bench_sweep_figure(reports) -> Figure:
    """Overall speedup (left axis) and tau (right axis) against the sampling temperature."""
    temps = [r.settings["temperature"] for r in reports]
    traces = [{"type": "scatter", "mode": "lines+markers+text", "x": temps, "y": [r.overall.speedup for r in reports],
               "name": "speedup (x)", "line": {"color": EAGLE_COLOR},
               "text": [f"{r.overall.speedup:.2f}x" for r in reports],
               "textposition": "top center", "cliponaxis": False},
              {"type": "scatter", "mode": "lines+markers", "x": temps, "y": [r.overall.tau for r in reports],
               "name": "tau (tokens per round)", "yaxis": "y2", "line": {"color": TARGET_COLOR, "dash": "dash"}}]
    return figure(traces, "Speedup and tau against sampling temperature (all categories)", "temperature",
                   "speedup vs plain decoding", height=340, shapes=[PLAIN_DECODING_LINE],
                   yaxis={"rangemode": "tozero"},
                   yaxis2={"title": {"text": "tau"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})
