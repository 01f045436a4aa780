"""Where acceptance falls within a run: by position in the output and by kind of text. Plain values, no torch.

- By position: each round starts at the position of its first committed token among the new tokens (the
  prefill's token is position 0); the curve is, at each round's start, the tokens per round of the rounds that
  start within WINDOW tokens of it (centred), pooled as tau is (tokens / rounds).
- By kind of text: each line of prompt + output gets a kind by the rule below, and each round the kind of the
  line its first committed token starts on; a kind's tau = tokens its rounds committed / its rounds.

The rule, applied to lines top to bottom (``` fences and open triple quotes carry over from the prompt):
  1. inside a triple-quoted string, or a line that opens or closes one: "docstring";
  2. a line whose text starts with `#` or `//`: "comment";
  3. inside a ``` fence, or a line that looks like code (starts with a keyword such as def/class/import/return/
     if/for/while/with/try/except/elif/else or `@`, ends with `:`/`{`/`}`/`;`/`)`, holds an assignment `x = ...`
     or a call `name(...)`, or is indented by 4+ spaces after a code line): "code";
  4. any other line with text: "prose". A blank line takes the kind of the line before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KINDS", "WINDOW", "POSITION_BLOCK", "line_kinds", "token_lines", "by_position", "by_kind", "KindFigures",
           "round_starts", "position_blocks", "Where"]

KINDS = ("code", "comment", "docstring", "prose")
WINDOW = 32  # tokens: the smoothing window of the position curve
POSITION_BLOCK = 16  # the bench report's position figures: tokens per round of the rounds starting in each 16 tokens
_KEYWORD = re.compile(r"^(def|class|import|from\s+\S+\s+import|return|if|elif|else|for|while|with|try|except|"
                      r"finally|raise|yield|lambda|async|await|assert|pass|break|continue|print)\b|^@")
_ENDS = re.compile(r"[:{};)\]]\s*$")
_ASSIGN = re.compile(r"^[A-Za-z_][\w.\[\], ]*\s*[-+*/%|&]?=[^=]")
_CALL = re.compile(r"^[A-Za-z_][\w.]*\(.*\)\s*$")


def _looks_like_code(text: str) -> bool:
    s = text.strip()
    return bool(_KEYWORD.match(s) or _ENDS.search(s) or _ASSIGN.match(s) or _CALL.match(s))


def line_kinds(text: str) -> list[str]:
    """The kind of every line of `text` (split on "\\n"), by the module's rule."""
    kinds: list[str] = []
    quote: str | None = None  # the open triple quote, if any
    fence = False
    for line in text.split("\n"):
        s = line.strip()
        count = {q: s.count(q) for q in ('"""', "'''")}
        if quote is not None or any(count.values()):
            opened = next((q for q in ('"""', "'''") if count[q] % 2), None)
            quote = (None if quote == opened else quote) if quote is not None else opened
            kinds.append("docstring")
            continue
        if s.startswith("```"):
            fence = not fence
            kinds.append("code")
            continue
        if not s:
            kinds.append(kinds[-1] if kinds else "prose")
        elif s.startswith(("#", "//")):
            kinds.append("comment")
        elif fence or _looks_like_code(s):
            kinds.append("code")
        elif line.startswith(("    ", "\t")) and kinds and kinds[-1] == "code":
            kinds.append("code")
        else:
            kinds.append("prose")
    return kinds


def token_lines(prompt: str, pieces: list[str]) -> tuple[list[int], list[str]]:
    """(line index of each new token, kinds of every line of prompt + output). A token's line is where its
    first character that is not a newline falls (a token of newlines only: the line it closes)."""
    lines_before = prompt.count("\n")
    at, text = [], prompt
    for piece in pieces:
        stripped = piece.lstrip("\n")
        lead = len(piece) - len(stripped)
        at.append(lines_before + text[len(prompt):].count("\n") + (lead if stripped else 0))
        text += piece
    return at, line_kinds(text)


def by_position(rounds: list[tuple[int, int]], window: int = WINDOW) -> list[tuple[int, float]]:
    """rounds: (start position, tokens committed) in order. Returns (start, smoothed tokens per round) per round."""
    out = []
    for start, _ in rounds:
        near = [n for s, n in rounds if abs(s - start) <= window // 2]
        out.append((start, sum(near) / len(near)))
    return out


@dataclass(frozen=True)
class KindFigures:
    kind: str
    rounds: int
    tokens: int

    @property
    def tau(self) -> float:
        return self.tokens / self.rounds if self.rounds else 0.0


def by_kind(rounds: list[tuple[int, int]], lines: list[int], kinds: list[str]) -> dict[str, KindFigures]:
    """Tokens per round by the kind of the line each round starts on (`token_lines`' lines and kinds); kinds with
    no round are left out."""
    got = {k: [0, 0] for k in KINDS}
    for start, n in rounds:
        if 0 <= start < len(lines):
            kind = kinds[min(lines[start], len(kinds) - 1)]
            got[kind][0] += 1
            got[kind][1] += n
    return {k: KindFigures(k, r, t) for k, (r, t) in got.items() if r}


def position_blocks(rounds: list[tuple[int, int]], size: int = POSITION_BLOCK) -> dict[int, list[int]]:
    """rounds: (start position, tokens committed). Returns {first position of a block of `size` tokens: [rounds,
    tokens]} for the rounds that start in each block, in order."""
    blocks: dict[int, list[int]] = {}
    for start, n in rounds:
        block = blocks.setdefault(start // size * size, [0, 0])
        block[0] += 1
        block[1] += n
    return dict(sorted(blocks.items()))


def round_starts(events) -> list[tuple[int, int]]:
    """(start position, tokens committed) of every round in an event stream (plain rounds included)."""
    return [(ev.total_new_tokens - len(ev.committed_ids), len(ev.committed_ids)) for ev in events
            if hasattr(ev, "committed_ids")]  # the Round events (`decoding.events`)


class Where:
    """Accumulates a report's rounds by kind of text and by position over its prompts."""

    def __init__(self) -> None:
        self.kinds = {k: [0, 0] for k in KINDS}  # kind -> [rounds, tokens]
        self.blocks: dict[int, list[int]] = {}  # first position of a block -> [rounds, tokens]

    def add(self, prompt: str, events, decode) -> dict:
        """Add one EAGLE run; returns its per-kind taus as PromptResult fields (tau_code, ...; 0: no round)."""
        rounds = round_starts(events)
        ids = [t for ev in events if hasattr(ev, "token_ids") and hasattr(ev, "decode_seconds") for t in ev.token_ids]
        lines, kinds = token_lines(prompt, [decode([t]) for t in ids])
        mine = by_kind(rounds, lines, kinds)
        for k, f in mine.items():
            self.kinds[k][0] += f.rounds
            self.kinds[k][1] += f.tokens
        for first, (r, n) in position_blocks(rounds).items():
            block = self.blocks.setdefault(first, [0, 0])
            block[0] += r
            block[1] += n
        return {f"tau_{k}": round(mine[k].tau, 4) if k in mine else 0.0 for k in KINDS}

    def to_dict(self) -> dict:
        return {"rule": "falloff.line_kinds (docs in eagle_demo/diagnose/falloff.py)",
                "by_kind": {k: {"tau": t / r, "rounds": r, "tokens": t} for k, (r, t) in self.kinds.items() if r},
                "by_position": [{"from": b, "tau": t / r, "rounds": r}
                                for b, (r, t) in sorted(self.blocks.items())]}
