"""The draft tree of one round, and the attention mask of its single verify forward, as one plotly figure."""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from typing import Iterable

from ..decoding.events import Round
from .charts import (
    DEPTH_COLORS,
    EAGLE_COLOR,
    REJECTED_COLOR,
    ROOT_COLOR,
    TARGET_COLOR,
    UNREACHED_COLOR,
    Figure,
    axis,
    figure,
)
from .tokens import MAX_STYLED_DEPTH, Decode, fmt_prob, rejected_children, visible

__all__ = ["tree_figure", "tree_mask_trace"]


LABEL_CHARS = 8  # a node label's token text is cut past this (the hover has it whole)
MASK_LABELS = 40  # past this many nodes the mask's axes name nodes by index only


def _visible(text: str, cut: int = 0) -> str:
    """Token text for a chart label: whitespace made visible (a run of one mark counted: "␣×12"), cut past `cut`
    characters when given, HTML-escaped for plotly (<, > and &: plotly's text knows no &quot;, so quotes stay)."""
    shown = re.sub(r"([␣↵⇥])\1{3,}", lambda m: f"{m.group(1)}×{len(m.group(0))}", visible(text))
    if cut and len(shown) > cut:
        shown = shown[:cut - 1] + "…"
    return html.escape(shown, quote=False)


def _tree_positions(rnd: Round, extra_child: tuple[int, int] | None) -> dict[int, tuple[float, float]]:
    """x = depth; y from a depth-first walk (leaves in order, a parent at the mean of its children),
    children ordered by draft probability so the draft's favourite is on top."""
    children: dict[int, list[int]] = {}
    for i, n in enumerate(rnd.nodes):
        if n.parent >= 0:
            children.setdefault(n.parent, []).append(i)
    for kids in children.values():
        kids.sort(key=lambda i: -rnd.nodes[i].draft_prob)
    if extra_child is not None:  # the target's token hangs under the divergence point, listed first
        parent, child = extra_child
        children.setdefault(parent, []).insert(0, child)
    pos: dict[int, tuple[float, float]] = {}
    next_leaf = [0.0]

    def depth_of(i: int) -> int:
        return rnd.nodes[i].depth if i < len(rnd.nodes) else rnd.nodes[extra_child[0]].depth + 1

    def walk(i: int) -> float:
        kids = children.get(i, [])
        if not kids:
            y = next_leaf[0]
            next_leaf[0] += 1.0
        else:
            y = sum(walk(k) for k in kids) / len(kids)
        pos[i] = (float(depth_of(i)), -y)
        return y

    walk(0)
    return pos


def tree_figure(rnd: Round, decode: Decode) -> Figure:
    """The draft tree of one round: nodes by depth (x), edges parent -> child, the accepted path in green,
    the target's own token (bonus or correction) as an amber star, drafts the target checked and rejected
    as red crosses, drafts under a rejected node (never reached) in grey.

    Trace names: edges, accepted path, target edge, root, accepted, rejected, unreached, target token;
    node traces carry their node indices in `customdata` (the target token's index is len(nodes))."""
    nodes = rnd.nodes
    on_path = set(rnd.accepted_path)
    divergence = rnd.accepted_path[-1] if rnd.accepted_path else 0
    checked = set(rejected_children(rnd))
    for i in rnd.accepted_path:  # siblings of accepted nodes were checked by the target too
        checked.update(j for j, n in enumerate(nodes) if n.parent == nodes[i].parent and j not in on_path)
    bonus_index = len(nodes)
    has_bonus = len(rnd.committed_ids) > len(rnd.accepted_path)
    pos = _tree_positions(rnd, (divergence, bonus_index) if has_bonus else None)

    path_edges = list(zip((0, *rnd.accepted_path), rnd.accepted_path))
    other_edges = [(n.parent, i) for i, n in enumerate(nodes) if n.parent >= 0 and i not in on_path]
    traces = [_edge_trace(pos, "edges", other_edges, {"color": "#ced4da", "width": 1}, legend=False),
              _edge_trace(pos, "accepted path", path_edges, {"color": EAGLE_COLOR, "width": 4})]
    if has_bonus:
        traces.append(_edge_trace(pos, "target edge", [(divergence, bonus_index)],
                                  {"color": TARGET_COLOR, "width": 3, "dash": "dash"}, legend=False))
    accepted = list(rnd.accepted_path)
    rejected = [i for i in range(1, len(nodes)) if i not in on_path and i in checked]
    unreached = [i for i in range(1, len(nodes)) if i not in on_path and i not in checked]
    node = functools.partial(_node_trace, rnd, pos, decode)
    traces += [node("root", [0], Marker(ROOT_COLOR, "square", 16, where="top center")),
               node("accepted", accepted,  # labels above: the path line runs through the right side
                    Marker([DEPTH_COLORS[min(nodes[i].depth, MAX_STYLED_DEPTH) - 1] for i in accepted],
                           where="top center")),
               node("rejected", rejected, Marker(REJECTED_COLOR, "x", 12, 0.75)),
               node("unreached", unreached, Marker(UNREACHED_COLOR, "circle-open", 10, 0.7))]
    if has_bonus:
        traces.append(_target_token_trace(rnd, pos[bonus_index], decode))
    mask = tree_mask_trace(rnd, decode)
    traces.append(mask)
    return _tree_layout(rnd, traces, mask, pos, has_bonus)


def _edge_trace(pos: dict, name: str, pairs: Iterable[tuple[int, int]], line: dict, legend: bool = True) -> dict:
    xs, ys = [], []
    for a, b in pairs:
        xs += [pos[a][0], pos[b][0], None]
        ys += [pos[a][1], pos[b][1], None]
    return {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": name, "line": line,
            "hoverinfo": "skip", "showlegend": legend}


@dataclass(frozen=True)
class Marker:
    """How a group of tree nodes is drawn: colour (one, or one per node), plotly symbol, size, opacity, and where
    its labels sit."""
    color: object
    symbol: str = "circle"
    size: int = 14
    opacity: float = 1.0
    where: str = "middle right"


def _node_trace(rnd: Round, pos: dict, decode: Decode, name: str, idx: list[int], marker: Marker) -> dict:
    where = marker.where
    labels, hovers = [], []
    for i in idx:
        n = rnd.nodes[i]
        text = decode([n.token_id])
        labels.append(f"{_visible(text, LABEL_CHARS)} {n.draft_prob:.2f}" if i else _visible(text, LABEL_CHARS))
        hovers.append(f"node {i} · depth {n.depth} · id {n.token_id} · {html.escape(repr(text), quote=False)}<br>"
                      f"draft p {n.draft_prob:.3f} · path score {n.score:.3g}")
    # along a row (a node level with its parent) labels at odd depths go below, so neighbours do not collide:
    # above the node ("top center", the accepted path) becomes "bottom center", beside it becomes "bottom right"
    where_each = [_alternate(where) if i and pos[i][0] % 2 and pos[rnd.nodes[i].parent][1] == pos[i][1] else where
                  for i in idx]
    return {"type": "scatter", "x": [pos[i][0] for i in idx], "y": [pos[i][1] for i in idx],
            "mode": "markers+text", "name": name, "text": labels, "textposition": where_each, "cliponaxis": False,
            "hovertext": hovers, "hoverinfo": "text", "customdata": idx, "textfont": {"size": 11},
            "marker": {"color": marker.color, "size": marker.size, "symbol": marker.symbol, "opacity": marker.opacity,
                       "line": {"color": "#343a40", "width": 1}}}


def _alternate(where: str) -> str:
    return where.replace("top", "bottom") if where.startswith("top") else where.replace("middle", "bottom")


def _target_token_trace(rnd: Round, xy: tuple[float, float], decode: Decode) -> dict:
    """The target's own token ending the round (a bonus, or a correction when drafts were rejected)."""
    j = len(rnd.accepted_path)
    tok = rnd.committed_ids[j]
    text = decode([tok])
    tp = rnd.target_probs[j] if len(rnd.target_probs) > j else None
    kind = "plain step" if len(rnd.nodes) == 1 else "correction" if rejected_children(rnd) else "bonus"
    return {"type": "scatter", "x": [xy[0]], "y": [xy[1]], "mode": "markers+text", "name": "target token",
            "text": [f"{_visible(text, LABEL_CHARS)} ({kind})"], "textposition": "top center", "cliponaxis": False,
            "customdata": [len(rnd.nodes)],
            "hoverinfo": "text", "hovertext": [f"target's own token ({kind}) · id {tok} · target p {fmt_prob(tp)}"],
            "marker": {"color": TARGET_COLOR, "size": 16, "symbol": "star", "line": {"color": "#343a40", "width": 1}}}


def _tree_layout(rnd: Round, traces: list[dict], mask: dict, pos: dict, has_bonus: bool) -> Figure:
    """The tree on the left (x = depth), the mask heatmap on axes x2/y2 on the right."""
    nodes = rnd.nodes
    depth = max((n.depth for n in nodes), default=0) + (1 if has_bonus else 0)
    leaves = max(1.0, -min(y for _, y in pos.values()) + 1)
    title = f"Round {rnd.index}: {len(rnd.accepted_path)} accepted of {len(nodes) - 1} drafted"
    title += ", +1 target token" if has_bonus else " (run ended: no target token)"
    if len(nodes) == 1:  # the gate paused the draft (`gate`), or the rotary scaling (`rope_limit`): one plain step
        why = ("the target's rotary scaling needs a plain step here" if rnd.plain_for == "rope"
               else "paused while it did not pay")
        title = f"Round {rnd.index}: no draft ({why}), one plain target step"
    caption = "one plain step: no draft to verify" if len(nodes) == 1 else \
        "one verify forward: row sees column (and the prefix)"
    note = {"text": caption, "showarrow": False,
            "xref": "x2 domain", "yref": "y2 domain", "x": 0.5, "y": 1.0, "yanchor": "bottom",
            "font": {"size": 11, "color": "#495057"}}
    fig = figure(traces, title, "depth", "", height=int(min(900, max(340, 32 * leaves + 90))), uirevision=None,
                 xaxis={"range": [-0.4, depth + 1.2], "dtick": 1, "zeroline": False, "domain": [0, 0.6]},
                 yaxis={"visible": False}, margin={"t": 104},
                 # the title at the top, the legend from the left between it and the plot: in a narrow window
                 # the legend wraps there instead of hiding items or running into the title
                 legend={"x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
                 xaxis2={**axis("key (node index)"), "domain": [0.7, 1.0], "anchor": "y2", "tickfont": {"size": 9},
                         "showgrid": False, "tickmode": "array", "tickvals": mask["x"],
                         "ticktext": [str(i) for i in range(len(nodes))], "tickangle": 0},
                 yaxis2={**axis(""), "domain": [0.0, 0.82], "anchor": "x2", "autorange": "reversed",
                         "tickfont": {"size": 9}, "showgrid": False},
                 annotations=[note])
    # the title under the page's label badge (36 px), the legend under the title
    fig["layout"]["title"].update(y=1.0, yanchor="top", yref="container", pad={"t": 36})
    return fig


def tree_mask_trace(rnd: Round, decode: Decode) -> dict:
    """The tree attention mask of a round's single target forward as a heatmap on axes x2/y2: row i (a query)
    sees column j when j is i or an ancestor of i (and every row sees the whole prefix, not drawn). Cells on
    the accepted path (root included) are green; other visible cells grey."""
    nodes = rnd.nodes
    on_path = {0, *rnd.accepted_path}
    labels = [f"{i} {_visible(decode([n.token_id]), LABEL_CHARS)} +{n.depth}" if len(nodes) <= MASK_LABELS
              else str(i) for i, n in enumerate(nodes)]
    z, hover = [], []
    for i in range(len(nodes)):
        seen, j = set(), i
        while j >= 0:  # the node and its ancestors
            seen.add(j)
            j = nodes[j].parent
        z.append([0 if j not in seen else (2 if i in on_path and j in on_path else 1) for j in range(len(nodes))])
        hover.append([f"{labels[i]} {'sees' if j in seen else 'does not see'} {labels[j]}" for j in range(len(nodes))])
    scale = [[0.0, "#ffffff"], [0.33, "#ffffff"], [0.34, "#ced4da"], [0.66, "#ced4da"], [0.67, EAGLE_COLOR],
             [1.0, EAGLE_COLOR]]
    return {"type": "heatmap", "name": "attention mask", "x": labels, "y": labels, "z": z, "zmin": 0, "zmax": 2,
            "colorscale": scale, "showscale": False, "xaxis": "x2", "yaxis": "y2", "xgap": 1, "ygap": 1,
            "hovertext": hover, "hoverinfo": "text"}
