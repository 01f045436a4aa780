"""The run's live charts as plotly figures, and the figure type every chart of the page uses.

Figures are plotly's JSON form ({"data": [...], "layout": {...}}) built from plain dicts: building one with
plotly.graph_objects costs 20-50 ms of validation per chart, and the page redraws four of them several times a
second while the engine runs on the same CPU. `plotly.graph_objects.Figure(fig)` turns any of them into a validated
object (the tests do).
"""

from __future__ import annotations

import json

from ..decoding.metrics import RunView, depth_counts
from .tokens import MAX_STYLED_DEPTH

__all__ = ["Figure", "figure", "axis", "empty_figure", "tokens_time_figure", "accepted_length_figure",
           "acceptance_depth_figure", "time_split_figure", "DEPTH_COLORS", "TARGET_COLOR", "REJECTED_COLOR",
           "UNREACHED_COLOR", "ROOT_COLOR", "BASELINE_COLOR", "EAGLE_COLOR"]

# Accepted-draft colors by depth 1..8 (the same values as the .d1 .. .d8 rules in assets/style.css).
DEPTH_COLORS = ("#b7e4c7", "#95d5b2", "#74c69d", "#52b788", "#40a98f", "#2f9aa0", "#2b7fa8", "#3d5a98")
TARGET_COLOR = "#f59f00"
REJECTED_COLOR = "#e03131"
UNREACHED_COLOR = "#adb5bd"
FEW_ROUNDS = 10  # a depth reached in fewer rounds is drawn pale on the acceptance chart: its rate is a guess
ROOT_COLOR = "#495057"
BASELINE_COLOR = "#868e96"
EAGLE_COLOR = "#2b8a3e"
NGRAM_COLOR = "#7048e8"

class Figure(dict):
    """A plotly figure as JSON-ready data. gr.Plot accepts it (it calls `to_json`, as for a plotly Figure)."""

    @property
    def data(self) -> list[dict]:
        return self["data"]

    @property
    def layout(self) -> dict:
        return self["layout"]

    def to_json(self) -> str:
        return json.dumps(self)

    def to_plotly(self):
        """A validated plotly.graph_objects.Figure (slow; for notebooks and tests)."""
        import plotly.graph_objects as go

        return go.Figure(self)


def axis(title: str, **extra) -> dict:
    return {"title": {"text": title}, "gridcolor": "#e9ecef", "linecolor": "#adb5bd", "zerolinecolor": "#dee2e6",
            "automargin": True, **extra}


def figure(traces: list[dict], title: str, x: str, y: str, height: int = 280, **layout) -> Figure:
    base = {"title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"}, "height": height,
            "paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"color": "#343a40", "size": 12},
            "hovermode": "closest", "margin": {"l": 50, "r": 16, "t": 44, "b": 40},
            "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom",
                       "bgcolor": "rgba(255,255,255,0.6)"},
            "xaxis": axis(x), "yaxis": axis(y), "uirevision": title.split(":")[0]}
    for key, value in layout.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return Figure(data=traces, layout=base)


def empty_figure(title: str, message: str = "run a generation to see this chart") -> Figure:
    note = {"text": message, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper",
            "font": {"color": "#868e96"}}
    return figure([], title, "", "", annotations=[note], xaxis={"visible": False}, yaxis={"visible": False})


def tokens_time_figure(eagle: RunView, baseline: RunView | None = None, ngram: RunView | None = None) -> Figure:
    """New tokens against decode time (0 = end of each run's prefill), EAGLE, the n-gram draft when it raced, and
    the measured baseline."""
    xs, ys = eagle.curve()
    traces = [{"type": "scatter", "x": xs, "y": ys, "name": "EAGLE", "mode": "lines+markers",
               "line": {"color": EAGLE_COLOR}, "marker": {"size": 4},
               "hovertemplate": "%{x:.3f} s: %{y} tokens<extra>EAGLE</extra>"}]
    if ngram is not None:
        nx, ny = ngram.curve()
        traces.append({"type": "scatter", "x": nx, "y": ny, "name": "n-gram draft", "mode": "lines",
                       "line": {"color": NGRAM_COLOR, "dash": "dash"},
                       "hovertemplate": "%{x:.3f} s: %{y} tokens<extra>n-gram</extra>"})
    if baseline is not None:
        bx, by = baseline.curve()
        traces.append({"type": "scatter", "x": bx, "y": by, "name": "baseline (plain decoding)", "mode": "lines",
                       "line": {"color": BASELINE_COLOR, "dash": "dot"},
                       "hovertemplate": "%{x:.3f} s: %{y} tokens<extra>baseline</extra>"})
    return figure(traces, "Tokens vs decode time", "seconds since prefill", "new tokens")


def accepted_length_figure(eagle: RunView) -> Figure:
    """Tokens committed per round: accepted drafts plus the target's own token (their mean is tau)."""
    idx = [r.index for r in eagle.rounds]
    drafts = [min(len(r.accepted_ids), len(r.committed_ids)) for r in eagle.rounds]
    target = [len(r.committed_ids) - d for r, d in zip(eagle.rounds, drafts)]
    traces = [{"type": "bar", "x": idx, "y": drafts, "name": "accepted drafts", "marker": {"color": DEPTH_COLORS[3]}},
              {"type": "bar", "x": idx, "y": target, "name": "target token", "marker": {"color": TARGET_COLOR}}]
    tau = (sum(drafts) + sum(target)) / len(idx) if idx else 0.0
    return figure(traces, f"Accepted length per round: tau {tau:.2f}", "round", "tokens committed",
                   barmode="stack", bargap=0.1)


def acceptance_depth_figure(eagle: RunView) -> Figure:
    """metrics' acceptance rate at each depth the tree could reach (deeper depths are left out), each bar labelled
    with its counts ("2/2"), so a rate from a few rounds reads as such; a depth reached in fewer than
    `FEW_ROUNDS` rounds is drawn pale."""
    got, tried = depth_counts(eagle.rounds)
    drafted = max((n.depth for r in eagle.rounds for n in r.nodes), default=0)
    pairs = [(g, t) for g, t in zip(got, tried) if t][:drafted]
    rates = [g / t for g, t in pairs]
    depths = list(range(1, len(rates) + 1))
    colors = [DEPTH_COLORS[min(d, MAX_STYLED_DEPTH) - 1] if t >= FEW_ROUNDS else UNREACHED_COLOR
              for d, (_, t) in zip(depths, pairs)]
    traces = [{"type": "bar", "x": depths, "y": rates, "name": "acceptance", "marker": {"color": colors},
               "text": [f"{g}/{t}" for g, t in pairs], "textposition": "outside", "cliponaxis": False,
               "customdata": [[g, t] for g, t in pairs],
               "hovertemplate": "depth %{x}: %{y:.1%} (%{customdata[0]} of %{customdata[1]} rounds)<extra></extra>"}]
    few = sum(1 for _, t in pairs if t < FEW_ROUNDS)
    title = "Acceptance by depth (accepted/reached)" + (f"; pale: under {FEW_ROUNDS} rounds" if few else "")
    return figure(traces, title, "draft depth", "accepted / reached",
                   yaxis={"range": [0, 1.15], "tickformat": ".0%"}, xaxis={"dtick": 1})


def time_split_figure(eagle: RunView) -> Figure:
    """Draft, verify and host milliseconds per round (stacked)."""
    idx = [r.index for r in eagle.rounds]
    traces = []
    totals = {}
    for name, attr, color in (("draft", "draft_seconds", DEPTH_COLORS[4]), ("verify", "verify_seconds", TARGET_COLOR),
                              ("host", "host_seconds", UNREACHED_COLOR)):
        values = [1000 * getattr(r, attr) for r in eagle.rounds]
        totals[name] = sum(values)
        traces.append({"type": "bar", "x": idx, "y": values, "name": name, "marker": {"color": color},
                       "hovertemplate": "round %{x}: %{y:.2f} ms<extra>" + name + "</extra>"})
    total = sum(totals.values())
    split = (": " + ", ".join(f"{k} {v / total:.0%}" for k, v in totals.items())) if total > 0 else ""
    return figure(traces, "Time per round" + split, "round", "milliseconds", barmode="stack", bargap=0.1)
