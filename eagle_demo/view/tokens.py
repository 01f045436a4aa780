"""Token provenance as HTML: every committed token a <span> whose class says where it came from (tok-prefill,
tok-accepted d1..d8, tok-bonus, and struck-through tok-rejected drafts), text built from token ids, never by
searching decoded text. Pure functions of engine events and a `decode(ids) -> str` callable."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, Sequence

from ..decoding.events import Round
from ..decoding.metrics import RunView

__all__ = ["Decode", "TextCache", "Piece", "rejected_children", "token_pieces", "group_ids", "token_html", "escape",
           "visible",
           "fmt_prob", "MAX_STYLED_DEPTH"]

Decode = Callable[[Sequence[int]], str]

MAX_STYLED_DEPTH = 8  # .d1 .. .d8 in assets/style.css
UNICODE_REPLACEMENT = "\ufffd"
MAX_GROUP = 4  # a UTF-8 character spans at most 4 bytes, so at most 4 byte-level tokens


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
            note = "correction" if rejected else _plain_note(r) if len(r.nodes) == 1 else "bonus"
            out.append(Piece(tok, "bonus", r.index, 0, None, tp, note))
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


def fmt_prob(p: float | None) -> str:
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
    parts = [head, f"draft p {fmt_prob(p.draft_prob)}", f"target p {fmt_prob(p.target_prob)}", f"id {p.token_id}"]
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


def visible(text: str) -> str:
    """Token text with its whitespace made visible (a label or a table cell, where whitespace would collapse)."""
    return text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍").replace(" ", "␣") or "∅"


def escape(text: str) -> str:
    # html.escape covers <, >, &, quotes; `$`, `{` and `}` are escaped too so no template engine on the
    # page can read generated text as a placeholder.
    return html.escape(text, quote=True).replace("$", "&#36;").replace("{", "&#123;").replace("}", "&#125;")


def _span(classes: str, title: str, text: str, extra: str = "") -> str:
    return f'<span class="{classes}" title="{escape(title)}"{extra}>{escape(text)}</span>'


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
    body = "".join(parts) if parts else f'<span class="tok-placeholder">{escape(placeholder)}</span>'
    if hidden:
        body = f'<span class="tok-hidden">[{hidden} earlier tokens, shown when the run ends] </span>{body}'
    return f'<div class="eagle-tokens" style="white-space: pre-wrap">{body}</div>'


def _plain_note(r: Round) -> str:
    """Why a round had no draft (`Round.plain_for`)."""
    if r.plain_for == "rope":
        return "no draft: the target's rotary scaling needs a plain step here"
    return "no draft: drafting paused"
