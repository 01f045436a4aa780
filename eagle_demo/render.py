"""Run state -> HTML and plotly figures. No model code and no Gradio here: everything is a pure function
of engine events (eagle_demo.events) and a `decode(ids) -> str` callable.

- RunView collects one run's events (EAGLE or baseline) as they arrive.
- token_pieces / token_html: every committed token as a <span> whose class says where it came from
  (tok-prefill, tok-accepted d1..d8, tok-bonus, and struck-through tok-rejected drafts), text built from
  token ids, never by searching decoded text.
- stats_html / summary: the numbers of metrics.py (DESIGN.md section 5).
- *_figure: plotly charts, and the draft tree of one round.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import plotly.graph_objects as go

from .events import Event, Finish, Prefill, Round, RunStart, Step
from .metrics import RunStats, speedup, summarize

__all__ = ["RunView", "Piece", "TextCache", "token_pieces", "group_ids", "token_html", "rejected_children",
           "stats_html", "summary", "identical_to_baseline", "tokens_time_figure", "accepted_length_figure",
           "acceptance_depth_figure", "time_split_figure", "tree_figure", "empty_figure", "DEPTH_COLORS",
           "MAX_STYLED_DEPTH"]

Decode = Callable[[Sequence[int]], str]

MAX_STYLED_DEPTH = 8
# Accepted-draft colors by depth 1..8 (the same values as the .d1 .. .d8 rules in assets/style.css).
DEPTH_COLORS = ("#b7e4c7", "#95d5b2", "#74c69d", "#52b788", "#40a98f", "#2f9aa0", "#2b7fa8", "#3d5a98")
TARGET_COLOR = "#f59f00"
REJECTED_COLOR = "#e03131"
UNREACHED_COLOR = "#adb5bd"
ROOT_COLOR = "#495057"
BASELINE_COLOR = "#868e96"
EAGLE_COLOR = "#2b8a3e"

UNICODE_REPLACEMENT = "\ufffd"
MAX_GROUP = 4  # a UTF-8 character spans at most 4 bytes, so at most 4 byte-level tokens


# ---- run state -----------------------------------------------------------------------------------------

class RunView:
    """The events of one run, kept as they arrive (plain values; cheap to copy and to keep in gr.State)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.start: RunStart | None = None
        self.prefill: Prefill | None = None
        self.rounds: list[Round] = []
        self.steps: list[Step] = []
        self.finish: Finish | None = None

    def add(self, event: Event) -> None:
        self.events.append(event)
        if isinstance(event, RunStart):
            self.start = event
        elif isinstance(event, Prefill):
            self.prefill = event
        elif isinstance(event, Round):
            self.rounds.append(event)
        elif isinstance(event, Step):
            self.steps.append(event)
        elif isinstance(event, Finish):
            self.finish = event

    @classmethod
    def of(cls, events: Iterable[Event]) -> "RunView":
        view = cls()
        for e in events:
            view.add(e)
        return view

    def snapshot(self) -> "RunView":
        """A copy that later `add` calls do not change (the lists are copied, the events are frozen)."""
        return RunView.of(list(self.events))

    @property
    def mode(self) -> str:
        return self.start.mode if self.start else ""

    @property
    def done(self) -> bool:
        return self.finish is not None

    @property
    def token_ids(self) -> tuple[int, ...]:
        if self.finish is not None:
            return self.finish.token_ids
        ids = [self.prefill.token_id] if self.prefill else []
        for r in self.rounds:
            ids.extend(r.committed_ids)
        ids.extend(s.token_id for s in self.steps)
        return tuple(ids)

    def stats(self) -> RunStats:
        return summarize(self.events)

    def curve(self) -> tuple[list[float], list[int]]:
        """(decode seconds, new tokens) after the prefill and after every round or step."""
        if self.prefill is None:
            return [], []
        xs, ys = [0.0], [1]
        for e in self.rounds or self.steps:
            xs.append(e.elapsed)
            ys.append(e.total_new_tokens)
        return xs, ys


class TextCache:
    """Memoized decode: one tokenizer call per distinct id (or id group) over a whole run."""

    def __init__(self, decode: Decode):
        self._decode = decode
        self._memo: dict[tuple[int, ...], str] = {}

    def __call__(self, ids: Sequence[int]) -> str:
        key = tuple(int(i) for i in ids)
        text = self._memo.get(key)
        if text is None:
            text = self._memo[key] = self._decode(list(key))
        return text


# ---- token provenance ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Piece:
    """One token of the output view."""

    token_id: int
    kind: str  # "prefill" | "accepted" | "bonus" | "rejected" | "target" (a baseline step)
    round: int | None = None  # None for the prefill token and baseline steps
    depth: int = 0  # draft depth (accepted and rejected drafts); 0 for tokens the target produced
    draft_prob: float | None = None
    target_prob: float | None = None
    note: str = ""  # "bonus" or "correction" for target tokens; other rejected drafts for a rejected one


def rejected_children(rnd: Round) -> list[int]:
    """Node indices drafted as children of the divergence point (the last accepted node, or the root),
    best draft probability first. These are the drafts the target checked and turned down; empty when
    the accepted path ended at a leaf of the tree.

    >>> # root 0 -> a(1), b(2); a -> c(3); accepted path (1,): the divergence point is node 1
    >>> # rejected_children -> [3]
    """
    divergence = rnd.accepted_path[-1] if rnd.accepted_path else 0
    kids = [i for i, n in enumerate(rnd.nodes) if n.parent == divergence and i not in rnd.accepted_path]
    return sorted(kids, key=lambda i: -rnd.nodes[i].draft_prob)


def token_pieces(view: RunView, show_rejected: bool = True, max_rejected: int = 1) -> list[Piece]:
    """Committed tokens in order, with each round's best rejected drafts placed after its accepted
    drafts and before the target's own token."""
    out: list[Piece] = []
    if view.prefill is not None:
        out.append(Piece(view.prefill.token_id, "prefill", target_prob=view.prefill.target_prob))
    for r in view.rounds:
        n_acc = len(r.accepted_path)
        rejected = rejected_children(r)
        for j, tok in enumerate(r.committed_ids):
            tp = r.target_probs[j] if j < len(r.target_probs) else None
            if j < n_acc:
                node = r.nodes[r.accepted_path[j]]
                out.append(Piece(tok, "accepted", r.index, node.depth, node.draft_prob, tp))
                continue
            if show_rejected and rejected:
                others = ", ".join(f"{r.nodes[i].token_id} ({r.nodes[i].draft_prob:.2f})"
                                   for i in rejected[max_rejected:])
                for i in rejected[:max_rejected]:
                    node = r.nodes[i]
                    out.append(Piece(node.token_id, "rejected", r.index, node.depth, node.draft_prob, None,
                                     f"other rejected drafts here (id, draft p): {others}" if others else ""))
            out.append(Piece(tok, "bonus", r.index, 0, None, tp, "correction" if rejected else "bonus"))
    for s in view.steps:
        out.append(Piece(s.token_id, "target", s.index, 0, None, s.target_prob))
    return out


def group_ids(ids: Sequence[int], decode: Decode) -> list[tuple[int, int, str]]:
    """Split ids into (start, end, text) groups that each decode to whole characters.

    A byte-level BPE token can hold part of a UTF-8 character, and decodes alone to U+FFFD. Such a token
    is grouped with the following ones until the group decodes cleanly (at most 4 tokens); a token that
    never completes (an invalid byte) stays alone with its replacement character.

    >>> # "é" = bytes C3 A9 as two tokens 7, 8: decode([7]) == decode([8]) == "\ufffd", decode([7, 8]) == "é"
    >>> # group_ids([5, 7, 8], decode) -> [(0, 1, "a"), (1, 3, "é")]
    """
    groups: list[tuple[int, int, str]] = []
    i, n = 0, len(ids)
    while i < n:
        text, end = decode([ids[i]]), i + 1
        if UNICODE_REPLACEMENT in text:
            for k in range(i + 2, min(n, i + MAX_GROUP) + 1):
                joined = decode(list(ids[i:k]))
                if UNICODE_REPLACEMENT not in joined:
                    text, end = joined, k
                    break
        groups.append((i, end, text))
        i = end
    return groups


def _fmt(p: float | None) -> str:
    return "-" if p is None else f"{p:.2f}"


def _tooltip(p: Piece) -> str:
    if p.kind == "prefill":
        head = "prefill: target token"
    elif p.kind == "accepted":
        head = f"round {p.round}: accepted draft, depth {p.depth}"
    elif p.kind == "bonus":
        head = f"round {p.round}: target token ({p.note})"
    elif p.kind == "rejected":
        head = f"round {p.round}: rejected draft, depth {p.depth}"
    else:
        head = f"step {p.round}: target token"
    parts = [head, f"draft p {_fmt(p.draft_prob)}", f"target p {_fmt(p.target_prob)}", f"id {p.token_id}"]
    if p.kind == "rejected" and p.note:
        parts.append(p.note)
    return " · ".join(parts)


def _classes(p: Piece) -> str:
    if p.kind == "accepted":
        return f"tok tok-accepted d{min(max(p.depth, 1), MAX_STYLED_DEPTH)}"
    if p.kind == "prefill":
        return "tok tok-prefill"
    if p.kind == "bonus":
        return "tok tok-bonus" + (" tok-correction" if p.note == "correction" else "")
    return f"tok tok-{p.kind}"


def _escape(text: str) -> str:
    # html.escape covers <, >, &, quotes; `$`, `{` and `}` are escaped too so no template engine on the
    # page can read generated text as a placeholder.
    return html.escape(text, quote=True).replace("$", "&#36;").replace("{", "&#123;").replace("}", "&#125;")


def _span(classes: str, title: str, text: str, extra: str = "") -> str:
    return f'<span class="{classes}" title="{_escape(title)}"{extra}>{_escape(text)}</span>'


def token_html(view: RunView, decode: Decode, show_rejected: bool = True, max_rejected: int = 1,
               placeholder: str = "") -> str:
    """The output as HTML spans (whitespace kept by `white-space: pre-wrap` on the container)."""
    pieces = token_pieces(view, show_rejected, max_rejected)
    committed = [p for p in pieces if p.kind != "rejected"]
    before: dict[int, list[Piece]] = {}  # committed index -> rejected drafts shown just before it
    k = 0
    for p in pieces:
        if p.kind == "rejected":
            before.setdefault(k, []).append(p)
        else:
            k += 1
    parts = []
    for start, end, text in group_ids([p.token_id for p in committed], decode):
        for idx in range(start, end):  # a rejected draft inside a multi-token character goes before it
            for rej in before.get(idx, ()):
                parts.append(_span(_classes(rej), _tooltip(rej), decode([rej.token_id])))
        members = committed[start:end]
        if len(members) == 1:
            parts.append(_span(_classes(members[0]), _tooltip(members[0]), text))
        else:
            title = " | ".join(_tooltip(m) for m in members)
            parts.append(_span(_classes(members[0]) + " tok-group", title, text, f' data-tokens="{len(members)}"'))
    body = "".join(parts) if parts else f'<span class="tok-placeholder">{_escape(placeholder)}</span>'
    return f'<div class="eagle-tokens" style="white-space: pre-wrap">{body}</div>'


# ---- numbers ---------------------------------------------------------------------------------------------

def identical_to_baseline(eagle: RunView, baseline: RunView | None, greedy: bool) -> bool | None:
    """Greedy, both finished normally: are the token ids equal? None when the check does not apply."""
    if baseline is None or not greedy or not eagle.done or not baseline.done:
        return None
    if "stopped" in (eagle.finish.reason, baseline.finish.reason):
        return None
    return eagle.token_ids == baseline.token_ids


def summary(eagle: RunView, baseline: RunView | None, greedy: bool, text: str = "") -> dict:
    """JSON-ready numbers of a run (the `generate` API's stats and the stats strip)."""
    e = eagle.stats()
    b = baseline.stats() if baseline is not None and baseline.done else None
    return {
        "text": text,
        "token_ids": list(eagle.token_ids),
        "new_tokens": len(eagle.token_ids),
        "rounds": e.rounds,
        "tau": e.tau,
        "tokens_per_second": e.tokens_per_second,
        "baseline_tokens_per_second": b.tokens_per_second if b else None,
        "speedup": speedup(e, b) if b else None,
        "identical_to_baseline": identical_to_baseline(eagle, baseline, greedy),
        "acceptance_by_depth": list(e.acceptance_by_depth),
        "prefill_seconds": e.prefill_seconds,
        "decode_seconds": e.decode_seconds,
        "draft_seconds": e.draft_seconds,
        "verify_seconds": e.verify_seconds,
        "host_seconds": e.host_seconds,
        "finish_reason": e.finish_reason,
        "tree": eagle.start.tree if eagle.start else "",
        "draft_family": eagle.start.draft_family if eagle.start else "",
        "device": eagle.start.device if eagle.start else "",
        "dtype": eagle.start.dtype if eagle.start else "",
    }


def stats_html(eagle: RunView | None, baseline: RunView | None, greedy: bool, state: str,
               note: str = "") -> str:
    """The stats strip. state: idle | running | baseline | done | stopped (kept in data-state)."""
    cells: list[tuple[str, str, str]] = []  # (label, value, extra class)
    if eagle is not None and eagle.prefill is not None:
        s = summary(eagle, baseline, greedy)
        cells += [("tau", f"{s['tau']:.2f}", ""), ("EAGLE tok/s", f"{s['tokens_per_second']:.1f}", "")]
        base = s["baseline_tokens_per_second"]
        cells.append(("baseline tok/s", "-" if base is None else f"{base:.1f}", ""))
        cells.append(("speedup", "-" if s["speedup"] is None else f"{s['speedup']:.2f}x", ""))
        cells += [("rounds", str(s["rounds"]), ""), ("new tokens", str(s["new_tokens"]), ""),
                  ("prefill", f"{1000 * s['prefill_seconds']:.0f} ms", "")]
        same = s["identical_to_baseline"]
        if same is not None:
            cells.append(("identical to baseline", "yes" if same else "NO", "ok" if same else "bad"))
        if s["finish_reason"]:
            cells.append(("finish", s["finish_reason"], ""))
    status = {"idle": "ready", "running": "generating...", "baseline": "racing the baseline...",
              "done": "done", "stopped": "stopped"}.get(state, state)
    body = "".join(f'<div class="stat {cls}"><span class="stat-label">{_escape(label)}</span>'
                   f'<span class="stat-value">{_escape(value)}</span></div>' for label, value, cls in cells)
    extra = f'<div class="stat-note">{_escape(note)}</div>' if note else ""
    return (f'<div class="eagle-stats" data-state="{_escape(state)}"><div class="stat status">'
            f'<span class="stat-label">status</span><span class="stat-value">{_escape(status)}</span></div>'
            f"{body}{extra}</div>")


# ---- charts ----------------------------------------------------------------------------------------------

def _layout(fig: go.Figure, title: str, x: str, y: str, height: int = 280) -> go.Figure:
    fig.update_layout(title=dict(text=title, font=dict(size=14)), height=height, template="plotly_white",
                      margin=dict(l=50, r=16, t=44, b=44), legend=dict(orientation="h", y=-0.25),
                      xaxis_title=x, yaxis_title=y, uirevision=title.split(":")[0])
    return fig


def empty_figure(title: str, message: str = "run a generation to see this chart") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(color="#868e96"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, title, "", "")


def tokens_time_figure(eagle: RunView, baseline: RunView | None = None) -> go.Figure:
    """New tokens against decode time (0 = end of each run's prefill), EAGLE and the measured baseline."""
    fig = go.Figure()
    xs, ys = eagle.curve()
    fig.add_trace(go.Scatter(x=xs, y=ys, name="EAGLE", mode="lines+markers", line=dict(color=EAGLE_COLOR),
                             marker=dict(size=4), hovertemplate="%{x:.3f} s: %{y} tokens<extra>EAGLE</extra>"))
    if baseline is not None:
        bx, by = baseline.curve()
        fig.add_trace(go.Scatter(x=bx, y=by, name="baseline (plain decoding)", mode="lines",
                                 line=dict(color=BASELINE_COLOR, dash="dot"),
                                 hovertemplate="%{x:.3f} s: %{y} tokens<extra>baseline</extra>"))
    return _layout(fig, "Tokens vs decode time", "seconds since prefill", "new tokens")


def accepted_length_figure(eagle: RunView) -> go.Figure:
    """Tokens committed per round: accepted drafts plus the target's own token (their mean is tau)."""
    idx = [r.index for r in eagle.rounds]
    drafts = [min(len(r.accepted_ids), len(r.committed_ids)) for r in eagle.rounds]
    target = [len(r.committed_ids) - d for r, d in zip(eagle.rounds, drafts)]
    fig = go.Figure([
        go.Bar(x=idx, y=drafts, name="accepted drafts", marker_color=DEPTH_COLORS[3]),
        go.Bar(x=idx, y=target, name="target token", marker_color=TARGET_COLOR),
    ])
    fig.update_layout(barmode="stack", bargap=0.1)
    tau = (sum(drafts) + sum(target)) / len(idx) if idx else 0.0
    return _layout(fig, f"Accepted length per round: tau {tau:.2f}", "round", "tokens committed")


def acceptance_depth_figure(stats: RunStats) -> go.Figure:
    depths = list(range(1, len(stats.acceptance_by_depth) + 1))
    rates = list(stats.acceptance_by_depth)
    colors = [DEPTH_COLORS[min(d, MAX_STYLED_DEPTH) - 1] for d in depths]
    fig = go.Figure(go.Bar(x=depths, y=rates, marker_color=colors, text=[f"{r:.0%}" for r in rates],
                           textposition="outside", name="acceptance",
                           hovertemplate="depth %{x}: %{y:.1%}<extra></extra>"))
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    fig.update_xaxes(dtick=1)
    return _layout(fig, "Acceptance rate by depth", "draft depth", "accepted / reached")


def time_split_figure(eagle: RunView) -> go.Figure:
    """Draft, verify and host milliseconds per round (stacked)."""
    idx = [r.index for r in eagle.rounds]
    fig = go.Figure()
    for name, attr, color in (("draft", "draft_seconds", DEPTH_COLORS[4]), ("verify", "verify_seconds", TARGET_COLOR),
                              ("host", "host_seconds", UNREACHED_COLOR)):
        fig.add_trace(go.Bar(x=idx, y=[1000 * getattr(r, attr) for r in eagle.rounds], name=name,
                             marker_color=color, hovertemplate="round %{x}: %{y:.2f} ms<extra>" + name + "</extra>"))
    fig.update_layout(barmode="stack", bargap=0.1)
    s = eagle.stats()
    total = s.draft_seconds + s.verify_seconds + s.host_seconds
    split = (f": draft {s.draft_seconds / total:.0%}, verify {s.verify_seconds / total:.0%}, "
             f"host {s.host_seconds / total:.0%}") if total > 0 else ""
    return _layout(fig, "Time per round" + split, "round", "milliseconds")


# ---- the draft tree of one round ---------------------------------------------------------------------------

def _visible(text: str) -> str:
    """Token text for a chart label: whitespace made visible, HTML-escaped for plotly."""
    text = text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍").replace(" ", "␣")
    return html.escape(text or "∅")


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


def tree_figure(rnd: Round, decode: Decode) -> go.Figure:
    """The draft tree of one round: nodes by depth (x), edges parent -> child, the accepted path in green,
    the target's own token (bonus or correction) in amber, rejected drafts in red, drafts never reached
    (under a rejected node) in grey. Trace names: edges, accepted path, root, accepted, rejected,
    unreached, target token."""
    nodes = rnd.nodes
    on_path = set(rnd.accepted_path)
    divergence = rnd.accepted_path[-1] if rnd.accepted_path else 0
    checked = set(rejected_children(rnd))
    for i in rnd.accepted_path:  # siblings of accepted nodes were checked by the target too
        checked.update(j for j, n in enumerate(nodes) if n.parent == nodes[i].parent and j not in on_path)
    bonus_index = len(nodes)
    has_bonus = len(rnd.committed_ids) > len(rnd.accepted_path)
    pos = _tree_positions(rnd, (divergence, bonus_index) if has_bonus else None)

    def edge_xy(pairs: Iterable[tuple[int, int]]) -> tuple[list, list]:
        xs, ys = [], []
        for a, b in pairs:
            xs += [pos[a][0], pos[b][0], None]
            ys += [pos[a][1], pos[b][1], None]
        return xs, ys

    path_edges = list(zip((0, *rnd.accepted_path), rnd.accepted_path))
    other_edges = [(n.parent, i) for i, n in enumerate(nodes) if n.parent >= 0 and i not in on_path]
    fig = go.Figure()
    ex, ey = edge_xy(other_edges)
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", name="edges", line=dict(color="#ced4da", width=1),
                             hoverinfo="skip", showlegend=False))
    px, py = edge_xy(path_edges)
    fig.add_trace(go.Scatter(x=px, y=py, mode="lines", name="accepted path", line=dict(color=EAGLE_COLOR, width=4),
                             hoverinfo="skip"))
    if has_bonus:
        bx, by = edge_xy([(divergence, bonus_index)])
        fig.add_trace(go.Scatter(x=bx, y=by, mode="lines", name="target edge", hoverinfo="skip", showlegend=False,
                                 line=dict(color=TARGET_COLOR, width=3, dash="dash")))

    def node_trace(name: str, idx: list[int], color, symbol: str = "circle", size: int = 14, opacity: float = 1.0):
        labels, hovers = [], []
        for i in idx:
            n = nodes[i]
            text = decode([n.token_id])
            labels.append(f"{_visible(text)} {n.draft_prob:.2f}" if i else _visible(text))
            hovers.append(f"node {i} · depth {n.depth} · id {n.token_id} · {html.escape(repr(text))}<br>"
                          f"draft p {n.draft_prob:.3f} · path score {n.score:.3g}")
        fig.add_trace(go.Scatter(
            x=[pos[i][0] for i in idx], y=[pos[i][1] for i in idx], mode="markers+text", name=name,
            text=labels, textposition="middle right", hovertext=hovers, hoverinfo="text", customdata=idx,
            marker=dict(color=color, size=size, symbol=symbol, opacity=opacity, line=dict(color="#343a40", width=1)),
            textfont=dict(size=11)))

    accepted = list(rnd.accepted_path)
    rejected = [i for i in range(1, len(nodes)) if i not in on_path and i in checked]
    unreached = [i for i in range(1, len(nodes)) if i not in on_path and i not in checked]
    node_trace("root", [0], ROOT_COLOR, "square", 16)
    node_trace("accepted", accepted, [DEPTH_COLORS[min(nodes[i].depth, MAX_STYLED_DEPTH) - 1] for i in accepted])
    node_trace("rejected", rejected, REJECTED_COLOR, "x", 12, 0.75)
    node_trace("unreached", unreached, UNREACHED_COLOR, "circle-open", 10, 0.7)
    if has_bonus:
        tok = rnd.committed_ids[len(rnd.accepted_path)]
        text = decode([tok])
        tp = rnd.target_probs[len(rnd.accepted_path)] if len(rnd.target_probs) > len(rnd.accepted_path) else None
        kind = "correction" if rejected_children(rnd) else "bonus"
        fig.add_trace(go.Scatter(
            x=[pos[bonus_index][0]], y=[pos[bonus_index][1]], mode="markers+text", name="target token",
            text=[f"{_visible(text)} ({kind})"], textposition="middle right", customdata=[bonus_index],
            hovertext=[f"target's own token ({kind}) · id {tok} · target p {_fmt(tp)}"], hoverinfo="text",
            marker=dict(color=TARGET_COLOR, size=16, symbol="star", line=dict(color="#343a40", width=1))))
    depth = max((n.depth for n in nodes), default=0) + (1 if has_bonus else 0)
    fig.update_xaxes(range=[-0.4, depth + 1.2], dtick=1, zeroline=False)
    fig.update_yaxes(visible=False)
    leaves = max(1.0, -min(y for _, y in pos.values()) + 1)
    title = (f"Round {rnd.index}: {len(rnd.accepted_path)} accepted of {len(nodes) - 1} drafted, "
             f"+1 target token")
    fig = _layout(fig, title, "depth", "", height=int(min(900, max(300, 28 * leaves + 90))))
    fig.update_layout(uirevision=None)
    return fig
