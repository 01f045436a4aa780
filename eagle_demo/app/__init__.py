"""The Gradio page and its named API, above the engine and the views (see README, "Architecture").

- `state`: the loaded pairs, one run's live events, and which pair and run each page has (no Gradio);
- `forms`: one dataclass per event's inputs, and `handler`, which makes an event function of it;
- `playground`, `bench_tab`, `deploy_tab`: one builder per tab returning a dataclass of its components, its
  handlers and its wiring; `stream`: the Generate event and Stop; `api`: `/generate`;
- `page`: `build_app`, which composes them.
"""

from .forms import CHAIN_MODE, TREE_MODE
from .page import PROGRESS_POLL_SECONDS, QUEUE_POLL_SECONDS, build_app, launch_options
from .playground import PRESETS, definitions_markdown
from .registry import REGISTRY, PairKey, make_key
from .state import in_worker
from .stream import CHART_TURNS

__all__ = ["build_app", "launch_options", "REGISTRY", "PairKey", "make_key", "in_worker", "PRESETS", "TREE_MODE",
           "CHAIN_MODE", "CHART_TURNS", "QUEUE_POLL_SECONDS", "PROGRESS_POLL_SECONDS", "definitions_markdown"]
