"""The whole page: the three tabs composed, the named API, and the queue. Loads no model."""

from __future__ import annotations

from typing import Any

import gradio as gr

from ..common.devices import resolve_device
from ..common.paths import STYLE
from .api import register_api
from .bench_tab import build_bench_tab, wire_bench_tab
from .deploy_tab import build_deploy_tab, wire_deploy_tab
from .deploy_tab import deploy as deploy_fn
from .diagnose_tab import build_diagnose_tab, wire_diagnose_tab
from .gpu_tasks import serve
from .playground import build_playground, default_pair
from .playground_events import probe_by_default, wire_playground
from .registry import REGISTRY, make_key
from .stream import close_page
from .zerogpu import ZERO_GPU, served_pairs

__all__ = ["build_app", "launch_options", "calm_queue", "QUEUE_POLL_SECONDS", "PROGRESS_POLL_SECONDS"]

# Gradio's queue loop wakes every 1 ms while it has nothing to start, and its progress loop every 10 ms; each
# wake takes the GIL from the engine's thread. With the server up and idle, the shipped pair decoded at a median
# 76.7 tokens/s with those intervals and 90.0 with 20 ms / 100 ms (same process, alternating, 8 runs each,
# 2 cores). Polling every 20 ms costs at most 20 ms before a queued event starts.
QUEUE_POLL_SECONDS = 0.02
PROGRESS_POLL_SECONDS = 0.1


def build_app(default_target: str | None = None, default_draft: str | None = None) -> gr.Blocks:
    """The whole app. Loads no model: the pair loads on Load or on the first Generate. On a ZeroGPU Space
    (`zerogpu`) the pairs it serves load here, in the main thread, before the page is built."""
    if ZERO_GPU and REGISTRY.served is None:
        pairs = served_pairs()
        serve([make_key(t, d, owner=True) for t, d in pairs])  # a pair that fails is listed, and Load says why
        if default_target is None:
            default_target, default_draft = next(((t, d) for t, d in pairs if make_key(t, d, owner=True)
                                                  in (REGISTRY.served or [])), pairs[0])
    target, draft, _ = default_pair(default_target, default_draft)
    REGISTRY.fallback = make_key(target, draft, owner=True)  # what /generate loads when no pair is loaded
    with gr.Blocks(title="EAGLE Playground", analytics_enabled=False) as demo:
        gr.Markdown("# EAGLE Playground\nLossless EAGLE speculative decoding over a stock transformers target: "
                    "watch which tokens the draft guessed, which the target corrected, and how much faster it is "
                    "than plain decoding of the same model.", elem_id="eagle-header")
        device_type = resolve_device("auto").type
        playground = build_playground(default_target, default_draft, device_type)
        bench, diagnose, deploy = build_bench_tab(), build_diagnose_tab(), build_deploy_tab()
        after_pair = wire_playground(playground)  # the last steps of Load, Probe and Generate
        benched = wire_bench_tab(bench, playground)  # a benchmark sets the page's pair too
        wire_deploy_tab(deploy, playground, *after_pair, benched)
        wire_diagnose_tab(diagnose, playground, deploy_fn, list(deploy.out))
        probe_by_default(demo, playground, device_type)
        register_api()
        demo.unload(close_page)  # a page that closes frees what it owned (`pages.Pages.close`)
    demo.queue(default_concurrency_limit=1, max_size=32)
    calm_queue(demo)
    return demo


def calm_queue(demo: gr.Blocks) -> None:
    """Slow the queue's idle polling (see QUEUE_POLL_SECONDS). Call after `demo.queue(...)`, which replaces
    the queue. Gradio has no public setting for it; if a release renames these attributes, nothing changes."""
    queue = getattr(demo, "_queue", None)
    if queue is None:
        return
    if hasattr(queue, "sleep_when_free"):
        queue.sleep_when_free = max(queue.sleep_when_free, QUEUE_POLL_SECONDS)
    if hasattr(queue, "progress_update_sleep_when_free"):
        queue.progress_update_sleep_when_free = max(queue.progress_update_sleep_when_free, PROGRESS_POLL_SECONDS)


def launch_options() -> dict[str, Any]:
    """Keyword arguments for `demo.launch` (Gradio 6 takes css and theme there)."""
    return {"css_paths": [str(STYLE)] if STYLE.exists() else None,
            "theme": gr.themes.Soft(primary_hue="emerald", secondary_hue="amber")}
