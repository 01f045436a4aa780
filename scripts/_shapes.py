"""Draft shapes named on a script's command line: `auto`, `auto-fixed`, `chainK`, `treeT/D/K` (total/depth/top-k),
or `plain` (plain decoding of the target, no draft: tree None). `auto` is the automatic tree with its draft paused
while it does not pay (`eagle_demo.gate`, as every entry point runs it); `auto-fixed` is the same tree drafting
every round."""

from __future__ import annotations

from eagle_demo.config import TreeConfig


def parse_tree(text: str, session) -> tuple[str, TreeConfig | None]:
    """(label, tree); `auto` runs (or reads the cached) autotree calibration for `session`; `plain` is None."""
    return parse_shape(text, session)[:2]


def parse_shape(text: str, session) -> tuple[str, TreeConfig | None, float]:
    """(label, tree, pause_below): the RunConfig fields a shape sets (pause_below 0: the draft never pauses)."""
    if text in ("auto", "auto-fixed"):
        from eagle_demo.autotree import auto_tree

        choice = auto_tree(session)
        if text == "auto-fixed":
            return f"auto, never paused ({choice.tree.label()})", choice.tree, 0.0
        return f"auto ({choice.tree.label()})", choice.tree, choice.predicted_round_cost
    return (*_fixed(text), 0.0)


def _fixed(text: str) -> tuple[str, TreeConfig | None]:
    if text == "plain":
        return "plain decoding", None
    if text.startswith("chain"):
        return text, TreeConfig.chain(int(text[5:]))
    total, depth, top_k = (int(x) for x in text[4:].split("/"))
    return text, TreeConfig(depth=depth, top_k=top_k, total_tokens=total)
