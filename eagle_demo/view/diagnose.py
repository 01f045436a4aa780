"""The Diagnose tab's figures: acceptance by position in the output, by kind of text, and the shape explorer's
heatmap of replayed tau and predicted speedup per shape. Plain plotly JSON (`charts.figure`), no Gradio."""

from __future__ import annotations

from html import escape

from ..autotree.explore import KNOWN_ERROR, Exploration
from ..diagnose.falloff import WINDOW, KindFigures
from .charts import EAGLE_COLOR, Figure, axis, empty_figure, figure

__all__ = ["position_figure", "kinds_html", "shapes_figure", "shape_choices"]


def position_figure(rounds: list[tuple[int, int]], smoothed: list[tuple[int, float]]) -> Figure:
    """Tokens per round against the position in the output: each round as a dot, the curve smoothed over WINDOW
    tokens."""
    if not rounds:
        return empty_figure("Acceptance by position", "no drafting rounds in the last run")
    dots = {"type": "scatter", "mode": "markers", "name": "a round", "x": [s for s, _ in rounds],
            "y": [n for _, n in rounds], "marker": {"size": 5, "color": "#adb5bd"},
            "hovertemplate": "from token %{x}: %{y} tokens<extra></extra>"}
    curve = {"type": "scatter", "mode": "lines", "name": f"smoothed ({WINDOW} tokens)",
             "x": [s for s, _ in smoothed], "y": [round(v, 3) for _, v in smoothed],
             "line": {"color": EAGLE_COLOR, "width": 3, "shape": "spline"},
             "hovertemplate": "around token %{x}: %{y:.2f} tokens per round<extra></extra>"}
    return figure([dots, curve], "Acceptance by position: tokens per round", "position in the output (tokens)",
                  "tokens per round", height=300)


def kinds_html(kinds: dict[str, KindFigures]) -> str:
    """A small table: tau by kind of text (the rule: `falloff.line_kinds`)."""
    if not kinds:
        return "<p class='kind-table'>no drafting rounds in the last run</p>"
    rows = "".join(f"<tr><td>{escape(k)}</td><td>{f.tau:.2f}</td><td>{f.rounds}</td><td>{f.tokens}</td></tr>"
                   for k, f in kinds.items())
    return ("<table class='kind-table'><thead><tr><th>kind of line</th><th>tokens per round</th><th>rounds</th>"
            f"<th>tokens</th></tr></thead><tbody>{rows}</tbody></table>"
            "<p><small>A round counts for the line its first committed token starts on. Lines: docstring (inside "
            "triple quotes), comment (# or //), code (keywords, assignments, calls, a line ending in : { } ; ), "
            "or inside a ``` fence), else prose.</small></p>")


def _row_name(tree) -> str:
    return "chain" if tree.is_chain else f"top-{tree.top_k}, depth {tree.depth}"


def shapes_figure(x: Exploration) -> Figure:
    """Two heatmaps side by side, rows = chain or (top-k, depth), columns = tokens verified per round: replayed tau
    and predicted speedup; the shape that ran (square) and the best (star) marked. Stopping chains and chains over
    a hot vocabulary are in the list below the chart (`shape_choices`), not the grid."""
    rows = [r for r in x.rows if not r.tree.stops and not r.tree.hot_vocab]
    if not rows:
        return empty_figure("Shapes on this run's text", "nothing to show")
    names = list(dict.fromkeys(_row_name(r.tree) for r in sorted(rows, key=lambda r: (r.tree.top_k, r.tree.depth))))
    cols = sorted({r.tree.total_tokens for r in rows})
    grid = {(names.index(_row_name(r.tree)), cols.index(r.tree.total_tokens)): r for r in rows}
    traces = []
    for n, (field, title) in enumerate((("tau", "tau"), ("speedup", "predicted speedup"))):
        z = [[round(getattr(grid[(i, j)], field), 3) if (i, j) in grid else None for j in range(len(cols))]
             for i in range(len(names))]
        traces.append({"type": "heatmap", "x": [str(c) for c in cols], "y": names, "z": z, "colorscale": "YlGn",
                       "xaxis": f"x{n + 1}" if n else "x", "yaxis": "y", "showscale": False, "name": title,
                       "texttemplate": "%{z:.1f}", "textfont": {"size": 9},
                       "hovertemplate": f"%{{y}}, %{{x}} tokens: {title} %{{z:.2f}}<extra></extra>"})
    for mark, tree, symbol in (("ran", x.ran, "square-open"), ("best", x.best.tree, "star")):
        if tree is None or tree.stops or tree.hot_vocab:
            continue
        for n in (0, 1):
            traces.append({"type": "scatter", "mode": "markers", "name": mark, "showlegend": n == 0,
                           "x": [str(tree.total_tokens)], "y": [_row_name(tree)], "xaxis": f"x{n + 1}" if n else "x",
                           "marker": {"symbol": symbol, "size": 16, "color": "#c92a2a" if mark == "best" else "#212529",
                                      "line": {"width": 2}}})
    low, high = KNOWN_ERROR
    return figure(traces, f"Every shape replayed on this run's text (speedup predicted within /{high:g} to /{low:g})",
                  "", "", height=120 + 26 * len(names),
                  xaxis=axis("tokens per round verified: tau", domain=[0, 0.48], type="category"),
                  xaxis2=axis("tokens per round verified: predicted speedup", domain=[0.52, 1], type="category"),
                  yaxis=axis("", type="category"))


def shape_choices(x: Exploration, limit: int = 12) -> list[tuple[str, str]]:
    """(label, value) of the best shapes first, the shape that ran included: the "use this shape" list."""
    key = (lambda r: r.speedup) if any(r.speedup for r in x.rows) else (lambda r: r.tau)
    ranked = sorted(x.rows, key=key, reverse=True)[:limit]
    ran = x.row(x.ran)
    if ran is not None and ran not in ranked:
        ranked.append(ran)
    out = []
    for r in ranked:
        pay = f", predicted {r.speedup:.2f}x" if r.speedup else ""
        tag = " (ran)" if r.tree == x.ran else (" (best)" if r.tree == x.best.tree else "")
        out.append((f"{r.tree.label()}: tau {r.tau:.2f}{pay}{tag}", _encode(r.tree)))
    return out


def _encode(tree) -> str:
    return f"{tree.depth},{tree.top_k},{tree.total_tokens},{tree.stop_below:g},{tree.hot_vocab}"
