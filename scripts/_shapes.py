"""Draft shapes named on a script's command line: auto, chainK, chainK@P, treeT/D/K or plain.

Draft shapes named on a script's command line: `auto`, `auto-retune`, `auto-fixed`, `chainK`, `chainK@P` (a
chain of at most K that stops under path probability P), `treeT/D/K` (total/depth/top-k), or `plain` (plain
decoding of the target, no draft: tree None). `auto` is the automatic tree as every entry point runs it: its draft
paused while it does not pay (`eagle_demo.decoding.gate`); `auto-retune` also moves its shape on the run's own
acceptance (`eagle_demo.autotree.retune`, the CLI's --retune); `auto-fixed` keeps the calibration's shape drafting
every round."""

from __future__ import annotations

from eagle_demo.common.config import RunConfig, TreeConfig


def parse_tree(text: str, session) -> tuple[str, TreeConfig | None]:
    """(label, tree); `auto` runs (or reads the cached) autotree calibration for `session`; `plain` is None."""
    return parse_shape(text, session)[:2]


def parse_shape(text: str, session) -> tuple[str, TreeConfig | None, dict]:
    """(label, tree, fields): the RunConfig fields a shape sets besides the tree (pause_below, retune)."""
    if text in ("auto", "auto-retune", "auto-fixed"):
        from eagle_demo.autotree.choose import auto_tree

        choice = auto_tree(session)
        if text == "auto-fixed":
            return f"auto, never paused or retuned ({choice.tree.label()})", choice.tree, {}
        run = choice.run_config(RunConfig(), retune=text == "auto-retune")  # as the entry points set it up
        fields = {"pause_below": run.pause_below, "pause_by_length": run.pause_by_length, "retune": run.retune}
        label = "auto, retuned" if run.retune is not None else "auto"
        return f"{label} ({choice.tree.label()})", choice.tree, fields
    return (*_fixed(text), {})


def _fixed(text: str) -> tuple[str, TreeConfig | None]:
    if text == "plain":
        return "plain decoding", None
    if text.startswith("chain"):  # chainK, or chainK@P: a chain of at most K that stops under path probability P;
        # a tail hN drafts over the first N ids and the context's (chain16@0.005h2048)
        shape, _, hot = text[5:].partition("h")
        longest, _, stop = shape.partition("@")
        return text, TreeConfig.chain(int(longest), float(stop or 0.0), int(hot or 0))
    total, depth, top_k = (int(x) for x in text[4:].split("/"))
    return text, TreeConfig(depth=depth, top_k=top_k, total_tokens=total)
