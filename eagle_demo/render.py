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
import json
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from .events import Event, Finish, Prefill, Round, RunStart, Step
from .metrics import RunStats, breakdown, speedup, summarize

__all__ = ["RunView", "Piece", "TextCache", "token_pieces", "group_ids", "token_html", "rejected_children",
           "stats_html", "summary", "identical_to_baseline", "tokens_time_figure", "accepted_length_figure",
           "acceptance_depth_figure", "time_split_figure", "tree_figure", "empty_figure", "DEPTH_COLORS",
           "MAX_STYLED_DEPTH", "report_markdown", "bench_rows", "bench_figure", "bench_compare_rows",
           "bench_compare_figure", "bench_misses_rows", "bench_sweep_figure", "MISSES_COLUMNS", "Figure"]

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
    note: str = ""  # "bonus" or "correction" for a target token ending a round
    others: tuple[tuple[int, float], ...] = ()  # a rejected draft's siblings not shown: (token id, draft prob)


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
                others = tuple((r.nodes[i].token_id, r.nodes[i].draft_prob) for i in rejected[max_rejected:])
                for i in rejected[:max_rejected]:
                    node = r.nodes[i]
                    out.append(Piece(node.token_id, "rejected", r.index, node.depth, node.draft_prob, None,
                                     others=others))
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


def _tooltip(p: Piece, decode: Decode) -> str:
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
    if p.others:
        parts.append("also rejected here: " + ", ".join(f"{decode([t])!r} ({q:.2f})" for t, q in p.others))
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
               placeholder: str = "", tail: int | None = None) -> str:
    """The output as HTML spans (whitespace kept by `white-space: pre-wrap` on the container).
    tail: show only the last `tail` committed tokens (and a note saying how many are hidden)."""
    pieces = token_pieces(view, show_rejected, max_rejected)
    hidden = 0
    if tail is not None:
        positions = [i for i, p in enumerate(pieces) if p.kind != "rejected"]
        if len(positions) > tail:
            hidden = len(positions) - tail
            pieces = pieces[positions[hidden]:]
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
                parts.append(_span(_classes(rej), _tooltip(rej, decode), decode([rej.token_id])))
        members = committed[start:end]
        if len(members) == 1:
            parts.append(_span(_classes(members[0]), _tooltip(members[0], decode), text))
        else:
            title = " | ".join(_tooltip(m, decode) for m in members)
            parts.append(_span(_classes(members[0]) + " tok-group", title, text, f' data-tokens="{len(members)}"'))
    body = "".join(parts) if parts else f'<span class="tok-placeholder">{_escape(placeholder)}</span>'
    if hidden:
        body = f'<span class="tok-hidden">[{hidden} earlier tokens, shown when the run ends] </span>{body}'
    return f'<div class="eagle-tokens" style="white-space: pre-wrap">{body}</div>'


# ---- numbers ---------------------------------------------------------------------------------------------

def identical_to_baseline(eagle: RunView, baseline: RunView | None, greedy: bool) -> bool | None:
    """Both finished normally: are the token ids equal? None when the check does not apply.

    Greedy: always checked. Sampled: checked in float32 only. Both engines draw position i's random number from
    the seed, so a lossless verifier gives the seeded baseline's text; in bf16/fp16 the tree forward's rounding
    moves the cumulative probabilities enough to flip a draw now and then, which says nothing about the
    distribution, so the page does not claim it there."""
    if baseline is None or not eagle.done or not baseline.done:
        return None
    if "stopped" in (eagle.finish.reason, baseline.finish.reason):
        return None
    if not greedy and (eagle.start is None or eagle.start.dtype != "float32"):
        return None
    return eagle.token_ids == baseline.token_ids


def summary(eagle: RunView, baseline: RunView | None, greedy: bool, text: str = "") -> dict:
    """JSON-ready numbers of a run (the `generate` API's stats and the stats strip)."""
    e = eagle.stats()
    b = baseline.stats() if baseline is not None and baseline.done else None
    why = breakdown(e, b) if b else None
    return {
        "text": text,
        "token_ids": list(eagle.token_ids),
        "prompt_tokens": eagle.start.prompt_tokens if eagle.start else 0,
        "new_tokens": len(eagle.token_ids),
        "rounds": e.rounds,
        "tau": e.tau,
        "tokens_per_second": e.tokens_per_second,
        "baseline_tokens_per_second": b.tokens_per_second if b else None,
        "speedup": speedup(e, b) if b else None,
        "round_cost": None if why is None else {
            "steps": why.round_cost, "draft": why.draft, "verify": why.verify, "host": why.host, "other": why.other,
            "step_ms": why.step_ms, "round_ms": why.round_ms, "line": why.line()},
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
        if s["round_cost"] is not None:
            cells.append(("round cost", f"{s['round_cost']['steps']:.2f} steps", ""))
        cells += [("rounds", str(s["rounds"]), ""), ("new tokens", str(s["new_tokens"]), ""),
                  ("prefill", f"{1000 * s['prefill_seconds']:.0f} ms", "")]
        same = s["identical_to_baseline"]
        if same is not None:
            label = "identical to baseline" if greedy else "same as seeded baseline"
            cells.append((label, "yes" if same else "NO", "ok" if same else "bad"))
        if s["finish_reason"]:
            cells.append(("finish", s["finish_reason"], ""))
    status = {"idle": "ready", "running": "generating...", "baseline": "racing the baseline...",
              "done": "done", "stopped": "stopped"}.get(state, state)
    body = "".join(f'<div class="stat {cls}"><span class="stat-label">{_escape(label)}</span>'
                   f'<span class="stat-value">{_escape(value)}</span></div>' for label, value, cls in cells)
    extra = f'<div class="stat-note">{_escape(note)}</div>' if note else ""
    if eagle is not None and eagle.prefill is not None and s["round_cost"] is not None:
        extra += (f'<div class="stat-why" title="speedup = tau / round cost; a round\'s cost is counted in plain '
                  f'decoding steps of the same target">why: {_escape(s["round_cost"]["line"])}</div>')
    return (f'<div class="eagle-stats" data-state="{_escape(state)}"><div class="stat status">'
            f'<span class="stat-label">status</span><span class="stat-value">{_escape(status)}</span></div>'
            f"{body}{extra}</div>")


# ---- charts ----------------------------------------------------------------------------------------------
#
# Figures are plotly's JSON form ({"data": [...], "layout": {...}}) built from plain dicts: building one
# with plotly.graph_objects costs 20-50 ms of validation per chart, and the page redraws four of them
# several times a second while the engine runs on the same CPU. `plotly.graph_objects.Figure(fig)` turns
# any of them into a validated object (the tests do).

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


def _axis(title: str, **extra) -> dict:
    return {"title": {"text": title}, "gridcolor": "#e9ecef", "linecolor": "#adb5bd", "zerolinecolor": "#dee2e6",
            "automargin": True, **extra}


def _figure(traces: list[dict], title: str, x: str, y: str, height: int = 280, **layout) -> Figure:
    base = {"title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"}, "height": height,
            "paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"color": "#343a40", "size": 12},
            "hovermode": "closest", "margin": {"l": 50, "r": 16, "t": 44, "b": 40},
            "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom",
                       "bgcolor": "rgba(255,255,255,0.6)"},
            "xaxis": _axis(x), "yaxis": _axis(y), "uirevision": title.split(":")[0]}
    for key, value in layout.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return Figure(data=traces, layout=base)


def empty_figure(title: str, message: str = "run a generation to see this chart") -> Figure:
    note = {"text": message, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper",
            "font": {"color": "#868e96"}}
    return _figure([], title, "", "", annotations=[note], xaxis={"visible": False}, yaxis={"visible": False})


def tokens_time_figure(eagle: RunView, baseline: RunView | None = None) -> Figure:
    """New tokens against decode time (0 = end of each run's prefill), EAGLE and the measured baseline."""
    xs, ys = eagle.curve()
    traces = [{"type": "scatter", "x": xs, "y": ys, "name": "EAGLE", "mode": "lines+markers",
               "line": {"color": EAGLE_COLOR}, "marker": {"size": 4},
               "hovertemplate": "%{x:.3f} s: %{y} tokens<extra>EAGLE</extra>"}]
    if baseline is not None:
        bx, by = baseline.curve()
        traces.append({"type": "scatter", "x": bx, "y": by, "name": "baseline (plain decoding)", "mode": "lines",
                       "line": {"color": BASELINE_COLOR, "dash": "dot"},
                       "hovertemplate": "%{x:.3f} s: %{y} tokens<extra>baseline</extra>"})
    return _figure(traces, "Tokens vs decode time", "seconds since prefill", "new tokens")


def accepted_length_figure(eagle: RunView) -> Figure:
    """Tokens committed per round: accepted drafts plus the target's own token (their mean is tau)."""
    idx = [r.index for r in eagle.rounds]
    drafts = [min(len(r.accepted_ids), len(r.committed_ids)) for r in eagle.rounds]
    target = [len(r.committed_ids) - d for r, d in zip(eagle.rounds, drafts)]
    traces = [{"type": "bar", "x": idx, "y": drafts, "name": "accepted drafts", "marker": {"color": DEPTH_COLORS[3]}},
              {"type": "bar", "x": idx, "y": target, "name": "target token", "marker": {"color": TARGET_COLOR}}]
    tau = (sum(drafts) + sum(target)) / len(idx) if idx else 0.0
    return _figure(traces, f"Accepted length per round: tau {tau:.2f}", "round", "tokens committed",
                   barmode="stack", bargap=0.1)


def acceptance_depth_figure(eagle: RunView) -> Figure:
    """metrics' acceptance rate at each depth the tree could reach (deeper depths are left out)."""
    rates = list(eagle.stats().acceptance_by_depth)
    drafted = max((n.depth for r in eagle.rounds for n in r.nodes), default=0)
    rates = rates[:drafted]
    depths = list(range(1, len(rates) + 1))
    colors = [DEPTH_COLORS[min(d, MAX_STYLED_DEPTH) - 1] for d in depths]
    traces = [{"type": "bar", "x": depths, "y": rates, "name": "acceptance", "marker": {"color": colors},
               "text": [f"{r:.0%}" for r in rates], "textposition": "outside", "cliponaxis": False,
               "hovertemplate": "depth %{x}: %{y:.1%}<extra></extra>"}]
    return _figure(traces, "Acceptance rate by depth", "draft depth", "accepted / reached",
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
    return _figure(traces, "Time per round" + split, "round", "milliseconds", barmode="stack", bargap=0.1)


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

    def edge_trace(name: str, pairs: Iterable[tuple[int, int]], line: dict, legend: bool = True) -> dict:
        xs, ys = [], []
        for a, b in pairs:
            xs += [pos[a][0], pos[b][0], None]
            ys += [pos[a][1], pos[b][1], None]
        return {"type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": name, "line": line,
                "hoverinfo": "skip", "showlegend": legend}

    path_edges = list(zip((0, *rnd.accepted_path), rnd.accepted_path))
    other_edges = [(n.parent, i) for i, n in enumerate(nodes) if n.parent >= 0 and i not in on_path]
    traces = [edge_trace("edges", other_edges, {"color": "#ced4da", "width": 1}, legend=False),
              edge_trace("accepted path", path_edges, {"color": EAGLE_COLOR, "width": 4})]
    if has_bonus:
        traces.append(edge_trace("target edge", [(divergence, bonus_index)],
                                 {"color": TARGET_COLOR, "width": 3, "dash": "dash"}, legend=False))

    def node_trace(name: str, idx: list[int], color, symbol: str = "circle", size: int = 14,
                   opacity: float = 1.0, where: str = "middle right") -> dict:
        labels, hovers = [], []
        for i in idx:
            n = nodes[i]
            text = decode([n.token_id])
            labels.append(f"{_visible(text)} {n.draft_prob:.2f}" if i else _visible(text))
            hovers.append(f"node {i} · depth {n.depth} · id {n.token_id} · {html.escape(repr(text))}<br>"
                          f"draft p {n.draft_prob:.3f} · path score {n.score:.3g}")
        return {"type": "scatter", "x": [pos[i][0] for i in idx], "y": [pos[i][1] for i in idx],
                "mode": "markers+text", "name": name, "text": labels, "textposition": where,
                "hovertext": hovers, "hoverinfo": "text", "customdata": idx, "textfont": {"size": 11},
                "marker": {"color": color, "size": size, "symbol": symbol, "opacity": opacity,
                           "line": {"color": "#343a40", "width": 1}}}

    accepted = list(rnd.accepted_path)
    rejected = [i for i in range(1, len(nodes)) if i not in on_path and i in checked]
    unreached = [i for i in range(1, len(nodes)) if i not in on_path and i not in checked]
    traces += [node_trace("root", [0], ROOT_COLOR, "square", 16, where="top center"),
               node_trace("accepted", accepted,  # labels above: the path line runs through the right side
                          [DEPTH_COLORS[min(nodes[i].depth, MAX_STYLED_DEPTH) - 1] for i in accepted],
                          where="top center"),
               node_trace("rejected", rejected, REJECTED_COLOR, "x", 12, 0.75),
               node_trace("unreached", unreached, UNREACHED_COLOR, "circle-open", 10, 0.7)]
    if has_bonus:
        j = len(rnd.accepted_path)
        tok = rnd.committed_ids[j]
        text = decode([tok])
        tp = rnd.target_probs[j] if len(rnd.target_probs) > j else None
        kind = "correction" if rejected_children(rnd) else "bonus"
        traces.append({"type": "scatter", "x": [pos[bonus_index][0]], "y": [pos[bonus_index][1]],
                       "mode": "markers+text", "name": "target token", "text": [f"{_visible(text)} ({kind})"],
                       "textposition": "middle right", "customdata": [bonus_index], "hoverinfo": "text",
                       "hovertext": [f"target's own token ({kind}) · id {tok} · target p {_fmt(tp)}"],
                       "marker": {"color": TARGET_COLOR, "size": 16, "symbol": "star",
                                  "line": {"color": "#343a40", "width": 1}}})
    mask = tree_mask_trace(rnd, decode)
    traces.append(mask)
    depth = max((n.depth for n in nodes), default=0) + (1 if has_bonus else 0)
    leaves = max(1.0, -min(y for _, y in pos.values()) + 1)
    title = f"Round {rnd.index}: {len(rnd.accepted_path)} accepted of {len(nodes) - 1} drafted, +1 target token"
    note = {"text": "one verify forward: row sees column (and the prefix)", "showarrow": False,
            "xref": "x2 domain", "yref": "y2 domain", "x": 0.5, "y": 1.0, "yanchor": "bottom",
            "font": {"size": 11, "color": "#495057"}}
    return _figure(traces, title, "depth", "", height=int(min(900, max(340, 28 * leaves + 90))), uirevision=None,
                   xaxis={"range": [-0.4, depth + 1.2], "dtick": 1, "zeroline": False, "domain": [0, 0.6]},
                   yaxis={"visible": False},
                   xaxis2={**_axis("key (node index)"), "domain": [0.7, 1.0], "anchor": "y2", "tickfont": {"size": 9},
                           "showgrid": False, "tickmode": "array", "tickvals": mask["x"],
                           "ticktext": [str(i) for i in range(len(nodes))], "tickangle": 0},
                   yaxis2={**_axis(""), "domain": [0.0, 0.82], "anchor": "x2", "autorange": "reversed",
                           "tickfont": {"size": 9}, "showgrid": False},
                   annotations=[note])


def tree_mask_trace(rnd: Round, decode: Decode) -> dict:
    """The tree attention mask of a round's single target forward as a heatmap on axes x2/y2: row i (a query)
    sees column j when j is i or an ancestor of i (and every row sees the whole prefix, not drawn). Cells on
    the accepted path (root included) are green; other visible cells grey."""
    nodes = rnd.nodes
    on_path = {0, *rnd.accepted_path}
    labels = [f"{i} {_visible(decode([n.token_id]))} +{n.depth}" for i, n in enumerate(nodes)]
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


# ---- the adaptation report ------------------------------------------------------------------------------------

def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _md(text) -> str:
    """Inline markdown code span (backticks inside are replaced, not escaped)."""
    return "`" + str(text).replace("`", "'") + "`"


def report_markdown(report) -> str:
    """checkpoints.AdaptationReport -> readable markdown: what was detected, adapted, ignored, warned."""
    r = report
    lines = [f"**Target** {_md(r.target)}: {r.target_model_type}, {r.target_layers} layers, hidden {r.target_hidden}, "
             f"vocab {r.target_vocab}" + (f" ({r.dtype} on {r.device})" if r.dtype else "")]
    if r.draft is None:
        lines.append("**Draft**: none, plain decoding only")
    else:
        family = {"eagle1": "EAGLE-1/2 head", "eagle3": "EAGLE-3 head"}.get(r.family, r.family)
        lines.append(f"**Draft** {_md(r.draft)}: **{family}**, layout {_md(r.source_layout)}")
        if r.draft_hidden:
            lines.append(f"- shape: hidden {r.draft_hidden}, {r.draft_layers} layer(s), heads {r.num_heads}/"
                         f"{r.num_kv_heads} x {r.head_dim}, draft vocab {r.draft_vocab}")
        if r.family == "eagle3":
            convention = r.feature_convention or "default"
            lines.append(f"- features: hidden states {list(r.feature_layers or ())} ({convention})")
        elif r.family == "eagle1":
            lines.append("- features: the target's last hidden state after its final norm")
        if r.embedding or r.lm_head:
            lines.append(f"- embedding: {r.embedding or '-'}; lm_head: {r.lm_head or '-'}")
        if r.draft_param_bytes or r.shared_bytes:
            lines.append(f"- weights: {_bytes(r.draft_param_bytes)} own + {_bytes(r.shared_bytes)} shared with the "
                         "target")
    if r.adaptations:
        lines.append("\n**Adaptations**")
        lines += [f"- {a}" for a in r.adaptations]
    if r.ignored_keys:
        shown = ", ".join(_md(k) for k in r.ignored_keys[:8]) + (" ..." if len(r.ignored_keys) > 8 else "")
        lines.append(f"\n**Ignored keys** ({len(r.ignored_keys)}): {shown}")
    if r.warnings:
        lines.append("\n**Warnings**")
        lines += [f"- ⚠ {w}" for w in r.warnings]
    if r.problem:
        lines.append(f"\n**Cannot load**: {r.problem}")
    return "\n".join(lines)


# ---- benchmark ---------------------------------------------------------------------------------------------------

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
        same = "-" if c.all_equal is None else ("yes" if c.all_equal else "NO")
        rows.append([c.category, c.prompts, c.runs, round(c.tau, 2), round(c.eagle_tokens_per_second, 1),
                     round(c.baseline_tokens_per_second, 1), round(c.speedup, 2), round(c.round_cost, 2), same])
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
    return _figure(traces, "Speedup and tau by category", "category", "speedup vs plain decoding", height=340,
                   barmode="group", shapes=[PLAIN_DECODING_LINE],
                   yaxis2={"title": {"text": "tau"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})


def bench_compare_rows(reports, by: str = "draft"):
    """Several bench reports (drafts on one target, or one draft at several temperatures) -> one DataFrame
    whose first column tells them apart."""
    import pandas as pd

    from .bench import report_label

    frames = []
    for r in reports:
        frame = bench_rows(r)
        frame.insert(0, by, report_label(r, by))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def bench_compare_figure(reports) -> Figure:
    """Speedup per category, one bar group per draft, tau in each bar's label."""
    from .bench import draft_label

    colors = (EAGLE_COLOR, TARGET_COLOR, DEPTH_COLORS[6], REJECTED_COLOR, DEPTH_COLORS[2], BASELINE_COLOR)
    traces = []
    for i, r in enumerate(reports):
        cats = [*r.categories, r.overall]
        label = f"{draft_label(r.settings['draft'])} ({r.settings['draft_family']})"
        traces.append({"type": "bar", "x": [c.category for c in cats], "y": [c.speedup for c in cats], "name": label,
                       "marker": {"color": colors[i % len(colors)]},
                       "text": [f"{c.speedup:.2f}x<br>tau {c.tau:.2f}" for c in cats], "textposition": "outside",
                       "cliponaxis": False,
                       "hovertemplate": "%{x}: %{y:.2f}x<extra>" + _escape(label) + "</extra>"})
    return _figure(traces, "Speedup by category, one bar per draft (tau in the labels)", "category",
                   "speedup vs plain decoding", height=360, barmode="group", shapes=[PLAIN_DECODING_LINE])


MISSES_COLUMNS = ["the draft guessed", "the target said", "times"]


def bench_misses_rows(reports, by: str = "draft"):
    """Where each draft missed most over a benchmark: its favourite token against the target's token."""
    import pandas as pd

    from .bench import report_label

    rows = [[report_label(r, by), repr(m["draft"]), repr(m["target"]), m["count"]]
            for r in reports for m in r.extra.get("top_misses", [])[:10]]
    return pd.DataFrame(rows, columns=[by, *MISSES_COLUMNS])


def bench_sweep_figure(reports) -> Figure:
    """Overall speedup (left axis) and tau (right axis) against the sampling temperature."""
    temps = [r.settings["temperature"] for r in reports]
    traces = [{"type": "scatter", "mode": "lines+markers+text", "x": temps, "y": [r.overall.speedup for r in reports],
               "name": "speedup (x)", "line": {"color": EAGLE_COLOR}, "text": [f"{r.overall.speedup:.2f}x" for r in reports],
               "textposition": "top center", "cliponaxis": False},
              {"type": "scatter", "mode": "lines+markers", "x": temps, "y": [r.overall.tau for r in reports],
               "name": "tau (tokens per round)", "yaxis": "y2", "line": {"color": TARGET_COLOR, "dash": "dash"}}]
    return _figure(traces, "Speedup and tau against sampling temperature (all categories)", "temperature",
                   "speedup vs plain decoding", height=340, shapes=[PLAIN_DECODING_LINE],
                   yaxis={"rangemode": "tozero"},
                   yaxis2={"title": {"text": "tau"}, "overlaying": "y", "side": "right", "rangemode": "tozero"})
