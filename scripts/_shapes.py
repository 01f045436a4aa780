"""Draft shapes named on a script's command line: `auto`, `chainK`, `treeT/D/K` (total/depth/top-k), or `plain`
(plain decoding of the target, no draft: tree None)."""

from __future__ import annotations

from eagle_demo.config import TreeConfig


def parse_tree(text: str, session) -> tuple[str, TreeConfig | None]:
    """(label, tree); `auto` runs (or reads the cached) autotree calibration for `session`; `plain` is None."""
    if text == "plain":
        return "plain decoding", None
    if text == "auto":
        from eagle_demo.autotree import auto_tree

        choice = auto_tree(session)
        return f"auto ({choice.tree.label()})", choice.tree
    if text.startswith("chain"):
        return text, TreeConfig.chain(int(text[5:]))
    total, depth, top_k = (int(x) for x in text[4:].split("/"))
    return text, TreeConfig(depth=depth, top_k=top_k, total_tokens=total)
