"""The Draft panel's handlers: the settings "auto" and the tree presets put on the panel after Load, Probe, a
preset change and a Generate, and the note of what auto put there (`pages.Page.auto_shown`), so that those
settings never count as moved by hand."""

from __future__ import annotations

import gradio as gr

from ..common.config import TREE_PRESETS, default_preset, default_tree
from .autotune import AUTO, auto_line, tuning
from .forms import make_tree, tree_settings, tree_values
from .pages import PAGES
from .registry import REGISTRY, PairKey

__all__ = ["after_load", "after_generate", "apply_tree_preset", "draft_line", "hand_line"]


def after_load(key: PairKey | None, request: gr.Request = None):
    """The loaded pair's chat default and its tree preset: "auto" with a draft (the panel shows the static
    default tree of the device and family until the calibration has chosen), that static preset without one."""
    session = REGISTRY.get(key) if key is not None else None
    if session is None:
        return (gr.skip(),) * 10
    has_template = session.has_chat_template
    static = default_preset(session.device.type, session.family)
    t = tuning(key)
    shown = tree_settings(t.choice.tree) if t is not None and t.choice is not None else tree_values(static)
    name = AUTO if session.eagle is not None else static
    if name == AUTO:
        _note_auto_shown(request, shown)
    return (gr.update(value=has_template, interactive=has_template), name, *shown, auto_line(key))


def after_generate(key: PairKey | None, request: gr.Request = None):
    """After a page's Generate: the draft panel shows what ran when auto chose it (a Generate can load the pair
    and calibrate it), and the auto line follows the pair that ran. Settings moved by hand stay as they are."""
    page = PAGES.of(request.session_hash if request is not None else None)
    live = page.run
    if live is not None and live.auto is None and live.key == key and live.tree is not None:
        return (gr.skip(),) * 7 + (draft_line(page.preset, key, *tree_settings(live.tree),
                                              request=request),)  # what ran: settings by hand say so
    if live is None or live.auto is None or live.key != key:
        return (gr.skip(),) * 7 + (auto_line(key),)
    shown = tree_settings(live.auto.tree)
    _note_auto_shown(request, shown)
    return (*shown, auto_line(key))


def _note_auto_shown(request: gr.Request | None, shown: tuple) -> None:
    """Note the draft settings "auto" puts on this page's panel: they are not settings moved by hand, even after
    the panel's pair changes (`autotune.page_tree`)."""
    PAGES.of(request.session_hash if request is not None else None).auto_shown = make_tree(*shown)


def apply_tree_preset(name: str, key: PairKey | None = None, request: gr.Request = None):
    """A preset's draft settings; "auto": the loaded pair's choice once its calibration has chosen. The page's
    preset is noted for its Generate (`autotune.page_tree`)."""
    PAGES.of(request.session_hash if request is not None else None).preset = name
    if name == AUTO:
        t = tuning(key)
        if t is None or t.choice is None:
            return (gr.skip(),) * 7
        shown = tree_settings(t.choice.tree)
        _note_auto_shown(request, shown)
        return shown
    return tree_values(name) if name in TREE_PRESETS else (gr.skip(),) * 7


def hand_line(tree, key: PairKey | None, preset: str | None = None) -> str:
    """The line under the draft panel when the settings that run are not auto's: what runs, and auto's choice."""
    t = tuning(key)
    chose = f"; auto chose {t.choice.tree.label()} for this pair" if t is not None and t.choice is not None else ""
    how = f"the preset {preset}" if preset and preset != AUTO else "settings moved by hand"
    return f"runs {tree.label()} ({how}{chose}; pick the preset auto to run its choice)"


def draft_line(preset: str | None, key: PairKey | None, *settings, request: gr.Request = None) -> str:
    """The line under the draft panel once its settings change: auto's line while they are auto's (the static
    default while it calibrates), else what will run (`hand_line`)."""
    session = REGISTRY.get(key) if key is not None else None
    if session is None or session.eagle is None:
        return auto_line(key)
    try:
        tree = make_tree(*settings)
    except Exception:  # noqa: BLE001 - a half-typed value: Generate will name it
        return auto_line(key)
    t = tuning(key)
    auto_trees = {default_tree(session.device.type, session.family),
                  t.choice.tree if t is not None and t.choice is not None else None,
                  PAGES.of(request.session_hash if request is not None else None).auto_shown}
    if (preset in (None, AUTO)) and tree in auto_trees:
        return auto_line(key)
    return hand_line(tree, key, preset)
