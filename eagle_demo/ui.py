"""Compatibility: the page lives in `eagle_demo.app` (`app.page.build_app`)."""

from .app import (CHAIN_MODE, PRESETS, PROGRESS_POLL_SECONDS, QUEUE_POLL_SECONDS, REGISTRY, TREE_MODE, PairKey,
                  build_app, launch_options, make_key)

__all__ = ["build_app", "launch_options", "PRESETS", "PairKey", "REGISTRY", "make_key", "TREE_MODE", "CHAIN_MODE",
           "QUEUE_POLL_SECONDS", "PROGRESS_POLL_SECONDS"]
