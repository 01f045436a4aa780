"""The playground page: Gradio Blocks and their event wiring. No tensors here.

- Models live in a module-level registry keyed by PairKey, loaded lazily (first Generate) or by Load, so
  browsers using the same pair share one loaded model; the engines' locks and a concurrency limit of 1 on
  every model event keep runs on it one at a time. Loading another pair frees the previous one.
- A generation runs in a worker thread that records events into a LiveRun; the page's generator reads a
  snapshot every UPDATE_SECONDS and renders it (render.py), so drawing never pauses the engine's clock.
- Named API endpoints: `load` (the Load button) and `generate` (a plain function returning text + stats).
  See docs/api.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import inspect
import json
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import gradio as gr

from . import render
from .config import TREE_PRESETS, ConfigError, RunConfig, SamplingConfig, TreeConfig
from .devices import resolve_device
from .metrics import DEFINITIONS
from .spaces_compat import gpu

if TYPE_CHECKING:
    from .session import Session

__all__ = ["build_app", "launch_options", "PRESETS", "PairKey", "REGISTRY", "UPDATE_SECONDS"]

log = logging.getLogger(__name__)

# Model code (session, engines, transformers) is imported on first use, so importing this module (and app.py)
# stays light: a Space starts serving the page before any of it loads.
ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
STYLE = ASSETS / "style.css"
SUITE = ASSETS / "prompts" / "suite.jsonl"
# While a run streams, the token view and stats redraw at most every UPDATE_SECONDS, and one chart (in turn)
# every CHART_SECONDS (everything at the end). Gradio's page rebuilds a Plot from scratch on every change and
# plotly draws it twice (~0.1-0.2 s of a slow core each), so the live charts are the page's main cost: four at
# once came in bursts, and with the charts off the page kept 0.97 of the engine's speed against 0.88 with one
# chart a second. CHART_TURNS is the rotation: the race (tokens vs time) every other turn, each of the other
# three every sixth. Measured with scripts/ui_overhead.py: see the README's "The page".
UPDATE_SECONDS = 0.5
CHART_SECONDS = 1.5
CHART_TURNS = (0, 1, 0, 2, 0, 3)  # indices into (tokens vs time, accepted length, acceptance by depth, time split)
POLL_SECONDS = 0.05  # how often the page's generator looks at the run between redraws
STREAM_TAIL = 400  # tokens shown while streaming (the whole output at the end)
TREE_PENDING = render.empty_figure("Draft tree", "the rounds' trees appear when the run ends")

PRESETS: dict[str, tuple[str, str]] = {
    "tiny (shipped) + EAGLE-1 head": ("assets/tiny-target", "assets/tiny-eagle1"),
    "tiny (shipped) + EAGLE-3 head": ("assets/tiny-target", "assets/tiny-eagle3"),
    "Llama-3.1-8B-Instruct + EAGLE-3": ("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    "Llama-3-8B-Instruct + EAGLE": ("meta-llama/Meta-Llama-3-8B-Instruct", "yuhuili/EAGLE-LLaMA3-Instruct-8B"),
    "Vicuna-7B-v1.3 + EAGLE": ("lmsys/vicuna-7b-v1.3", "yuhuili/EAGLE-Vicuna-7B-v1.3"),
    "Qwen2-7B-Instruct + EAGLE": ("Qwen/Qwen2-7B-Instruct", "yuhuili/EAGLE-Qwen2-7B-Instruct"),
    "Qwen3-8B + EAGLE-3 (AngelSlim)": ("Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3"),
    "Vicuna-13B-v1.3 + EAGLE-3": ("lmsys/vicuna-13b-v1.3", "yuhuili/EAGLE3-Vicuna1.3-13B"),
}
CUSTOM = "custom"
TREE_MODE, CHAIN_MODE = "dynamic tree", "chain"
DTYPES = ["auto", "float32", "bfloat16", "float16"]
DEVICES = ["auto", "cpu", "cuda"]

NUMBERS_NOTE = """
- Every time is measured in this process, on this device, with a device sync around each phase; the baseline
  is plain decoding of the same target through the same logits pipeline, run right after EAGLE.
- Greedy EAGLE is lossless: the token ids equal the baseline's ("identical to baseline"). In bfloat16/float16
  the two computations can round differently at near-ties and drift apart; float32 does not.
- Sampling (temperature > 0) keeps the target's distribution exactly. Both engines draw the random number of
  each output position from the seed, so the same seed gives the same text; the page checks it ("same as
  seeded baseline") in float32. In bfloat16/float16 a draw near a boundary of the cumulative probabilities can
  flip, so there it is not checked; the distribution is the target's either way.
- On a CPU with a tiny model, per-call overhead dominates; speedups on a GPU with a 7-8B target differ.
"""


# ---- loaded pairs -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairKey:
    target: str
    draft: str | None
    revision: str | None = None
    draft_revision: str | None = None
    dtype: str = "auto"
    device: str = "auto"

    def label(self) -> str:
        return f"{self.target} + {self.draft or 'no draft'}"


def _local_or_repo(text: str | None) -> str | None:
    """A local folder as an absolute path (one key per folder, however it is typed; paths relative to the
    repository, like assets/tiny-target, work from any working directory); anything else unchanged."""
    text = (text or "").strip()
    if not text:
        return None
    for path in (Path(text).expanduser(), ROOT / text):
        if path.exists():
            return str(path.resolve())
    return text


def make_key(target: str, draft: str | None, revision: str | None = None, dtype: str = "auto",
             device: str = "auto", draft_revision: str | None = None) -> PairKey:
    target_path = _local_or_repo(target)
    if target_path is None:
        raise ConfigError("the target is empty; pick a preset or type a repo id or folder")
    return PairKey(target_path, _local_or_repo(draft), (revision or "").strip() or None,
                   (draft_revision or "").strip() or None, dtype or "auto", device or "auto")


class Registry:
    """Loaded sessions by key; keeps at most `capacity` (a Space has memory for one real pair).

    Loads run one at a time (`_loading`); lookups only take the short `_lock`, so pages that redraw or stop
    are never held up by a long download."""

    def __init__(self, capacity: int = 1):
        self.capacity = capacity
        self._sessions: OrderedDict[PairKey, Session] = OrderedDict()
        self._lock = threading.Lock()
        self._loading = threading.Lock()

    def get(self, key: PairKey) -> Session | None:
        with self._lock:
            return self._sessions.get(key)

    def current(self) -> PairKey | None:
        with self._lock:
            return next(reversed(self._sessions), None)

    def load(self, key: PairKey, progress: Callable[[str, float], None] | None = None) -> Session:
        from .checkpoints import CheckpointError, inspect_pair
        from .session import load_session

        with self._loading:
            with self._lock:
                if key in self._sessions:
                    self._sessions.move_to_end(key)
                    return self._sessions[key]
            say = progress or (lambda stage, fraction: None)
            say("checking the pair", 0.0)
            report = inspect_pair(key.target, key.draft, key.revision, key.draft_revision)  # fails before freeing
            if report.problem:
                raise CheckpointError(report.problem)
            self._evict(self.capacity - 1)
            session = load_session(key.target, key.draft, revision=key.revision, draft_revision=key.draft_revision,
                                   dtype=key.dtype, device=key.device, progress=say,
                                   threads=int(os.environ.get("EAGLE_DEMO_THREADS", "0") or 0))
            with self._lock:
                self._sessions[key] = session
            return session

    def _evict(self, keep: int) -> None:
        """Drop all but the `keep` most recent sessions and hand their memory back."""
        with self._lock:
            dropped = []
            while len(self._sessions) > max(keep, 0):
                dropped.append(self._sessions.popitem(last=False)[1])
        if not dropped:
            return
        del dropped  # a run still streaming keeps its session alive until it ends
        gc.collect()
        import torch  # only to return cached GPU memory

        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def clear(self) -> None:
        with self._loading:
            self._evict(0)


REGISTRY = Registry()


# ---- one run --------------------------------------------------------------------------------------------

class LiveRun:
    """Events of one EAGLE run (and its baseline race), filled by a worker thread."""

    def __init__(self, key: PairKey, race: bool, greedy: bool, note: str = ""):
        self.key, self.race, self.greedy = key, race, greedy
        self.note = note  # shown under the stats (e.g. a run that reaches past the draft's context)
        self.eagle = render.RunView()
        self.baseline = render.RunView() if race else None
        self.phase = "eagle"
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.done = threading.Event()
        self.error: str | None = None

    def add(self, phase: str, event) -> None:
        with self.lock:
            self.phase = phase
            (self.eagle if phase == "eagle" else self.baseline).add(event)

    def count(self) -> int:
        """Events received so far (both runs)."""
        with self.lock:
            return len(self.eagle.events) + (len(self.baseline.events) if self.baseline else 0)

    def snapshot(self) -> tuple[render.RunView, render.RunView | None, str]:
        with self.lock:
            return self.eagle.snapshot(), (self.baseline.snapshot() if self.baseline else None), self.phase

    @property
    def state(self) -> str:
        if not self.done.is_set():
            return "baseline" if self.phase == "baseline" else "running"
        views = [self.eagle] + ([self.baseline] if self.baseline is not None else [])
        return "stopped" if any(v.finish is None or v.finish.reason == "stopped" for v in views) else "done"


@gpu
def stream_pair(key: PairKey, prompt_ids: list[int], run: RunConfig, race: bool, stop: threading.Event):
    """EAGLE, then (when racing) plain decoding of the same prompt, sequentially in this worker.
    Yields (phase, event); this is the function ZeroGPU runs on a GPU."""
    session = REGISTRY.get(key)
    if session is None:
        raise RuntimeError("the model was unloaded by another load; press Generate again")
    for event in session.stream(prompt_ids, run, "eagle", stop):
        yield "eagle", event
    if race and not stop.is_set():
        for event in session.stream(prompt_ids, run, "baseline", stop):
            yield "baseline", event


def in_worker(fn: Callable, *args, **kwargs):
    """Run fn in a fresh thread (with this request's context) and return its result or raise its error.
    Generation and benchmarks both run in fresh threads so their timings are measured the same way."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc

    thread = threading.Thread(target=contextvars.copy_context().run, args=(work,), name="eagle-bench", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


_RUNS: list[LiveRun] = []  # runs whose worker may still be going
_RUNS_LOCK = threading.Lock()


def start_run(key: PairKey, prompt_ids: list[int], run: RunConfig, race: bool, note: str = "") -> LiveRun:
    """Start the worker. Model events run one at a time, so a run still going here was abandoned (its page
    was cancelled or closed): it is told to stop, and ends at its next round instead of holding the engine."""
    live = LiveRun(key, race, run.sampling.greedy, note)
    with _RUNS_LOCK:
        for old in _RUNS:
            old.stop.set()
        _RUNS[:] = [r for r in _RUNS if not r.done.is_set()] + [live]

    def work() -> None:
        try:
            for phase, event in stream_pair(key, prompt_ids, run, race, live.stop):
                live.add(phase, event)
        except Exception as exc:  # reported to the page as one line; the traceback goes to the log
            log.exception("generation failed")
            live.error = _one_line(exc)
        finally:
            live.done.set()

    ctx = contextvars.copy_context()  # keeps the request context (ZeroGPU reads it)
    threading.Thread(target=ctx.run, args=(work,), name="eagle-run", daemon=True).start()
    return live


class _PerPage:
    """session hash -> value, keeping the most recent `capacity` pages (the pair a page or API client loaded,
    the LiveRun its Stop button ends)."""

    def __init__(self, capacity: int = 512):
        self.capacity = capacity
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, session_hash: str | None, value: Any) -> None:
        if not session_hash:
            return
        with self._lock:
            self._items[session_hash] = value
            self._items.move_to_end(session_hash)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def get(self, session_hash: str | None) -> Any:
        with self._lock:
            return self._items.get(session_hash) if session_hash else None

    def pop(self, session_hash: str | None) -> Any:
        with self._lock:
            return self._items.pop(session_hash, None) if session_hash else None


_LAST_RUNS = _PerPage()  # session hash -> LiveRun
_CLIENT_PAIRS = _PerPage()  # session hash -> the PairKey that page or API client used last
_PENDING = _PerPage()  # session hash -> GenerateRequest of the Generate click waiting for its turn in the queue
_BENCH_STOPS = _PerPage()  # session hash -> threading.Event of that page's running benchmark


class GenerateRequest:
    """One Generate click, noted before it joins the queue, so that a Stop pressed while it waits ends it."""

    def __init__(self):
        self.stopped = threading.Event()


class BenchmarkStopped(RuntimeError):
    """Raised from a benchmark's progress callback when its page pressed Stop."""


# ---- helpers -----------------------------------------------------------------------------------------------

def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if isinstance(exc, (ValueError, OSError, RuntimeError)) else f"{type(exc).__name__}: {first}"


@contextlib.contextmanager
def _one_line_errors():
    try:
        yield
    except gr.Error:
        raise
    except Exception as exc:
        log.info("request failed: %s", exc, exc_info=not isinstance(exc, ValueError))
        raise gr.Error(_one_line(exc), print_exception=False) from None


def friendly(fn: Callable) -> Callable:
    """Turn any exception into a one-line gr.Error (no traceback on the page); the app keeps serving."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(*args, **kwargs):
            with _one_line_errors():
                yield from fn(*args, **kwargs)
        return gen

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with _one_line_errors():
            return fn(*args, **kwargs)
    return call


def _progress_fn(progress) -> Callable[[str, float], None]:
    def say(stage: str, fraction: float) -> None:
        if progress is not None:
            progress(min(max(float(fraction), 0.0), 1.0), desc=stage)
    return say


def make_tree(mode: str, depth, draft_top_k, total_tokens, chain_k) -> TreeConfig:
    if mode == CHAIN_MODE:
        return TreeConfig.chain(int(chain_k))
    return TreeConfig(depth=int(depth), top_k=int(draft_top_k), total_tokens=int(total_tokens))


def make_run(max_new_tokens, temperature, top_p, top_k, seed, tree: TreeConfig, ignore_eos: bool = False) -> RunConfig:
    sampling = SamplingConfig(temperature=float(temperature), top_p=float(top_p), top_k=int(top_k or 0),
                              seed=int(seed or 0))
    return RunConfig(max_new_tokens=int(max_new_tokens), ignore_eos=bool(ignore_eos), tree=tree, sampling=sampling)


def _decoder(key: PairKey | None) -> render.TextCache:
    session = REGISTRY.get(key) if key is not None else None
    if session is None:
        return render.TextCache(lambda ids: "".join(f"⟨{i}⟩" for i in ids))
    return render.TextCache(session.decode)


def _has_chat_template(session: Session) -> bool:
    return bool(getattr(session.tokenizer, "chat_template", None))


def _default_preset(device_type: str, family: str = "") -> str:
    if device_type == "cpu":
        return "cpu"
    return "gpu-eagle3" if family == "eagle3" else "gpu-eagle2"


def _tree_values(name: str) -> tuple[str, int, int, int, int]:
    t = TREE_PRESETS[name]
    if t.is_chain:
        return CHAIN_MODE, t.depth, t.top_k, t.total_tokens, t.depth
    return TREE_MODE, t.depth, t.top_k, t.total_tokens, 4


def _suite_prompts() -> tuple[list[str], list[str]]:
    """(code prompts for the examples, categories) of the shipped suite, read without importing the engine."""
    try:
        rows = [json.loads(line) for line in SUITE.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return [], []
    categories = list(dict.fromkeys(str(r.get("category", "")) for r in rows))
    return [str(r["prompt"]) for r in rows if r.get("category") == "code" and "prompt" in r], categories


def _best_round(view: render.RunView) -> int:
    """The round to show first: the one with the longest accepted path (the first such)."""
    if not view.rounds:
        return 0
    return max(view.rounds, key=lambda r: (len(r.accepted_path), -r.index)).index


HOW_A_ROUND_WORKS = """
**How one round works** (and where the page shows it)

1. **Draft.** The EAGLE head reads the target's features at the last committed position (EAGLE-3 fuses three of
   the target's layers) together with the token that followed, and proposes next tokens. EAGLE-2 grows a tree:
   each step expands the `top-k` most probable nodes (`depth` steps), then keeps the `total tokens - 1` nodes with
   the highest path probability. A chain is the tree with top-k 1.
2. **Verify.** The target runs once over the whole tree. Each drafted token sees the prompt, its ancestors and
   itself, nothing else (the mask beside the draft tree), at position prompt + depth, so every path is checked
   in that one forward.
3. **Accept.** From the root down, the target's own choice at a node (its argmax, or its sample when sampling)
   is looked for among the node's children; a match is accepted (green tokens, darker = deeper) and the walk
   goes on from it.
4. **Bonus.** Where the walk stops, the target's own choice there is committed as well (amber): a correction
   when drafts were rejected (struck-through red), a free extra token when the whole path was accepted.
5. **Commit.** Accepted tokens and the bonus join the output; the target's KV cache keeps the accepted path and
   drops the rest; the draft reads the new features. tau counts the tokens a round commits.

Every committed token is the target's own choice at its position, which is why greedy output equals plain
decoding token for token and sampled output keeps the target's distribution.
"""


def _temperatures(text: str | None) -> list[float]:
    """"0, 0.7 1.0" -> [0.0, 0.7, 1.0]; each checked against the sampling range."""
    parts = (text or "").replace(",", " ").split()
    try:
        temps = [float(p) for p in parts]
    except ValueError:
        raise ConfigError(f"temperatures must be numbers like 0, 0.7, 1.0; got {text.strip()!r}") from None
    for t in temps:
        SamplingConfig(temperature=t)
    return temps


def _bench_outputs(table, figure, misses, csv_text: str, json_text: str) -> tuple:
    """The Benchmark event's outputs, the CSV and JSON written to a fresh folder for download."""
    folder = Path(tempfile.mkdtemp(prefix="eagle-bench-"))
    (folder / "bench.csv").write_text(csv_text, encoding="utf-8")
    (folder / "bench.json").write_text(json_text, encoding="utf-8")
    return table, figure, misses, str(folder / "bench.csv"), str(folder / "bench.json")


def _definitions_markdown() -> str:
    rows = "\n".join(f"- **{name}**: {text}" for name, text in DEFINITIONS.items())
    return f"{HOW_A_ROUND_WORKS}\n**What the numbers mean**\n\n{rows}\n{NUMBERS_NOTE}"


# Gradio's queue loop wakes every 1 ms while it has nothing to start, and its progress loop every 10 ms; each
# wake takes the GIL from the engine's thread. With the server up and idle, the shipped pair decoded at a median
# 76.7 tokens/s with those intervals and 90.0 with 20 ms / 100 ms (same process, alternating, 8 runs each,
# 2 cores). Polling every 20 ms costs at most 20 ms before a queued event starts.
QUEUE_POLL_SECONDS = 0.02
PROGRESS_POLL_SECONDS = 0.1


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


LEGEND = ('<div class="eagle-legend"><span class="legend-item"><span class="legend-swatch d1"></span>'
          '<span class="legend-swatch d2"></span><span class="legend-swatch d4"></span>'
          '<span class="legend-swatch d6"></span><span class="legend-swatch d8"></span> accepted draft token '
          '(darker = deeper in the tree)</span><span class="legend-item"><span class="legend-swatch target">'
          '</span> the target\'s own token (bonus or correction; also the first token after the prompt)</span>'
          '<span class="legend-item"><span class="legend-swatch rejected">x</span> rejected draft token</span>'
          '<span class="legend-item">hover a token for its round, depth and probabilities</span></div>')


# ---- the page --------------------------------------------------------------------------------------------------

def build_app(default_target: str | None = None, default_draft: str | None = None) -> gr.Blocks:
    """The whole app. Loads no model: the pair loads on Load or on the first Generate."""
    if default_target is None:
        default_target, default_draft = PRESETS["tiny (shipped) + EAGLE-1 head"]
    same = (_local_or_repo(default_target), _local_or_repo(default_draft))
    default_preset = next((name for name, (t, d) in PRESETS.items() if (_local_or_repo(t), _local_or_repo(d)) == same),
                          CUSTOM)
    if default_preset != CUSTOM:  # show a preset's own spelling (assets/tiny-target, not an absolute path)
        default_target, default_draft = PRESETS[default_preset]
    device_type = resolve_device("auto").type
    tree_default = _default_preset(device_type)
    mode0, depth0, topk0, total0, chain0 = _tree_values(tree_default)
    code_prompts, categories = _suite_prompts()
    empty_tokens = render.token_html(render.RunView(), lambda ids: "", placeholder="The output appears here, "
                                     "one colored span per token.")

    with gr.Blocks(title="EAGLE Playground", analytics_enabled=False) as demo:
        pair_state = gr.State(None)
        result_state = gr.State(None)
        gr.Markdown("# EAGLE Playground\nLossless EAGLE speculative decoding over a stock transformers target: "
                    "watch which tokens the draft guessed, which the target corrected, and how much faster it is "
                    "than plain decoding of the same model.", elem_id="eagle-header")
        with gr.Tab("Playground", id="playground"):
            with gr.Accordion("Model", open=True, elem_id="model-panel"):
                with gr.Row():
                    preset = gr.Dropdown([*PRESETS, CUSTOM], value=default_preset, label="preset", scale=2)
                    target = gr.Textbox(default_target, label="target (repo id or folder)", scale=3,
                                        elem_id="target-box")
                    draft = gr.Textbox(default_draft or "", label="EAGLE draft (repo id or folder)", scale=3,
                                       elem_id="draft-box")
                with gr.Row():
                    revision = gr.Textbox("", label="target revision", placeholder="main", scale=1)
                    draft_revision = gr.Textbox("", label="draft revision", placeholder="main", scale=1)
                    dtype = gr.Dropdown(DTYPES, value="auto", label="dtype", scale=1)
                    device = gr.Dropdown(DEVICES, value="auto", label="device", scale=1)
                    load_btn = gr.Button("Load", variant="secondary", scale=1, elem_id="load-btn")
                report_md = gr.Markdown("No pair loaded yet: it loads on **Load** or on the first **Generate**.",
                                        elem_id="report")
                with gr.Accordion("Adaptation report (JSON)", open=False):
                    report_json = gr.JSON(label="report")
            with gr.Row():
                with gr.Column(scale=3):
                    prompt = gr.Textbox(label="prompt", lines=5, elem_id="prompt-box",
                                        value=code_prompts[0] if code_prompts else "")
                    if code_prompts:
                        gr.Examples([[p] for p in code_prompts], inputs=[prompt], label="code prompts")
                    with gr.Row():
                        race = gr.Checkbox(True, label="race the baseline", elem_id="race-box")
                        show_rejected = gr.Checkbox(True, label="show rejected drafts", elem_id="rejected-box")
                        chat = gr.Checkbox(False, label="chat template", elem_id="chat-box")
                        ignore_eos = gr.Checkbox(False, label="ignore EOS", elem_id="ignore-eos-box")
                    max_new = gr.Slider(1, 8192, value=128, step=1, label="max new tokens", elem_id="max-new")
                    with gr.Row():
                        generate_btn = gr.Button("Generate", variant="primary", elem_id="generate-btn")
                        stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-btn")
                with gr.Column(scale=2):
                    with gr.Accordion("Draft", open=True):
                        tree_preset = gr.Dropdown(list(TREE_PRESETS), value=tree_default, label="tree preset")
                        mode = gr.Radio([TREE_MODE, CHAIN_MODE], value=mode0, label="draft mode")
                        with gr.Row():
                            depth = gr.Slider(1, 16, value=depth0, step=1, label="depth")
                            draft_top_k = gr.Slider(1, 16, value=topk0, step=1, label="draft top-k")
                        with gr.Row():
                            total_tokens = gr.Slider(2, 128, value=total0, step=1, label="total tokens")
                            chain_k = gr.Slider(1, 16, value=chain0, step=1, label="chain k")
                    with gr.Accordion("Sampling", open=False):
                        temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="temperature (0 = greedy)")
                        top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p")
                        with gr.Row():
                            top_k = gr.Number(0, precision=0, minimum=0, label="top-k (0 = off)")
                            seed = gr.Number(0, precision=0, minimum=0, label="seed")
            stats = gr.HTML(render.stats_html(None, None, True, "idle"), elem_id="eagle-stats", js_on_load=None)
            gr.HTML(LEGEND, js_on_load=None)
            tokens = gr.HTML(empty_tokens, elem_id="eagle-output", js_on_load=None, padding=True)
            with gr.Row():
                fig_time = gr.Plot(render.empty_figure("Tokens vs decode time"), label="tokens vs time",
                                   elem_id="plot-time")
                fig_accept = gr.Plot(render.empty_figure("Accepted length per round"), label="accepted length",
                                     elem_id="plot-accept")
            with gr.Row():
                fig_depth = gr.Plot(render.empty_figure("Acceptance rate by depth"), label="acceptance by depth",
                                    elem_id="plot-depth")
                fig_split = gr.Plot(render.empty_figure("Time per round"), label="time split", elem_id="plot-split")
            with gr.Row():
                with gr.Column(scale=1, min_width=200):
                    round_slider = gr.Slider(0, 1, value=0, step=1, label="round to inspect", elem_id="round-slider")
                    gr.Markdown("Green: the accepted path. Amber star: the target's own token. Red x: drafts the "
                                "target checked and rejected. Grey: drafts under a rejected node (never reached). "
                                "Labels: token and draft probability.\n\nRight: the attention mask of the round's "
                                "single target forward. Each drafted token (row) sees the prompt, itself and its "
                                "ancestors (columns), so every path of the tree is checked at once; +d is its "
                                "position after the prefix.")
                with gr.Column(scale=4):
                    fig_tree = gr.Plot(render.empty_figure("Draft tree", "run a generation, then pick a round"),
                                       label="draft tree", elem_id="plot-tree")
            with gr.Accordion("Plain text and raw stats", open=False):
                text_out = gr.Textbox(label="text", lines=6, buttons=["copy"], elem_id="text-out")
                stats_json = gr.JSON(label="stats")
            with gr.Accordion("How a round works, and what the numbers mean", open=False, elem_id="about-numbers"):
                gr.Markdown(_definitions_markdown())

        with gr.Tab("Benchmark", id="benchmark"):
            gr.Markdown("Baseline and EAGLE on each prompt of the suite, interleaved, with the loaded pair and the "
                        "draft settings of the Playground tab; greedy unless you sweep temperatures. Speedup = ratio "
                        "of mean tokens/s; round cost = tau / speedup, a round's price in plain decoding steps.")
            with gr.Row():
                bench_categories = gr.CheckboxGroup(categories, value=categories[:2], label="categories",
                                                    elem_id="bench-categories")
                bench_repeats = gr.Slider(1, 5, value=1, step=1, label="repeats")
                bench_max_new = gr.Slider(8, 512, value=64, step=8, label="max new tokens")
            with gr.Row():
                bench_compare = gr.Textbox(label="compare with other drafts for this target (optional)", lines=2,
                                           placeholder="repo ids or folders, one per line, e.g. assets/tiny-eagle3",
                                           elem_id="bench-compare")
                bench_temps = gr.Textbox(label="or sweep sampling temperatures (optional)", lines=2,
                                         placeholder="e.g. 0, 0.7, 1.0 (0 = greedy; top-p, top-k and seed from "
                                                     "the Playground's sampling settings)", elem_id="bench-temps")
            with gr.Row():
                bench_btn = gr.Button("Run benchmark", variant="primary", elem_id="bench-btn")
                bench_stop_btn = gr.Button("Stop", variant="stop", elem_id="bench-stop-btn")
            bench_table = gr.Dataframe(label="results by category", interactive=False, elem_id="bench-table",
                                       headers=render.BENCH_COLUMNS)
            bench_plot = gr.Plot(render.empty_figure("Speedup and tau by category", "run the benchmark"),
                                 label="speedup and tau")
            bench_misses = gr.Dataframe(label="where the draft missed most (its favourite token where the target "
                                              "said another)", interactive=False, elem_id="bench-misses",
                                        headers=["draft", *render.MISSES_COLUMNS])
            with gr.Row():
                bench_csv = gr.File(label="per-prompt CSV")
                bench_json = gr.File(label="full report JSON")

        with gr.Tab("Deploy", id="deploy"):
            gr.Markdown("Serve the loaded pair with the current draft settings.")
            deploy_btn = gr.Button("Refresh commands", elem_id="deploy-btn")
            deploy_msg = gr.Markdown("Load a pair to see its commands.")
            code = dict(language="shell", interactive=False, lines=2, max_lines=6, wrap_lines=True,
                        value="# load a pair (Playground tab) to see this command")
            vllm_cmd = gr.Code(label="vLLM", elem_id="vllm-cmd", **code)
            sglang_cmd = gr.Code(label="SGLang", elem_id="sglang-cmd", **code)
            deploy_notes = gr.Markdown()

        # ---- handlers -------------------------------------------------------------------------------------

        panel = [target, draft, revision, dtype, device, draft_revision]
        tree_inputs = [mode, depth, draft_top_k, total_tokens, chain_k]

        def ensure(key: PairKey, progress=None) -> Session:
            session = REGISTRY.get(key)
            return session if session is not None else REGISTRY.load(key, _progress_fn(progress))

        @friendly
        def load(target_text: str, draft_text: str, revision_text: str, dtype_name: str, device_name: str,
                 draft_revision_text: str = "", request: gr.Request = None, progress=gr.Progress()):
            key = make_key(target_text, draft_text, revision_text, dtype_name, device_name, draft_revision_text)
            session = REGISTRY.load(key, _progress_fn(progress))
            _CLIENT_PAIRS.put(request.session_hash if request is not None else None, key)
            return render.report_markdown(session.report), session.report.to_dict(), key

        def after_load(key: PairKey | None):
            session = REGISTRY.get(key) if key is not None else None
            if session is None:
                return (gr.skip(),) * 7
            has_template = _has_chat_template(session)
            family = session.pair.head.family if session.pair.head is not None else ""
            name = _default_preset(session.pair.target.device.type, family)
            return (gr.update(value=has_template, interactive=has_template), name, *_tree_values(name))

        def apply_preset(name: str):
            if name not in PRESETS:
                return gr.skip(), gr.skip()
            return PRESETS[name]

        def apply_tree_preset(name: str):
            return _tree_values(name) if name in TREE_PRESETS else (gr.skip(),) * 5

        def outputs_for(live: LiveRun, decode, show: bool, final: bool, report: tuple | None = None,
                        charts: bool = True, sent: dict | None = None):
            """Every output of the Generate event. While streaming (`sent` given), an output that should not
            change is sent again with the value it had, never as gr.skip(): Gradio diffs each streamed output
            against the last one sent (an equal value costs nothing), but a skip is an update that rebuilds the
            component on the server each time (for a Plot ~5 ms, a dozen of them per redraw)."""
            eagle, baseline, phase = live.snapshot()
            state = live.state if final else ("baseline" if phase == "baseline" else "running")
            note = "stopped: the engine finished its current round and ended cleanly" if state == "stopped" else ""
            note = "; ".join(n for n in (note, live.note) if n)
            report_out = list(report) if report else [gr.skip()] * 4
            stats_view = render.stats_html(eagle, baseline, live.greedy, state, note)
            if not final:
                if sent.get("eagle_events") != len(eagle.events):  # EAGLE's view moved (not during the baseline)
                    sent["tokens"] = render.token_html(eagle, decode, show, tail=STREAM_TAIL)  # the tail: redraws
                    sent["eagle_events"] = len(eagle.events)  # stay small
                builders = (lambda: render.tokens_time_figure(eagle, baseline),
                            lambda: render.accepted_length_figure(eagle), lambda: render.acceptance_depth_figure(eagle),
                            lambda: render.time_split_figure(eagle))
                if "figures" not in sent:  # the run's first redraw replaces the last run's charts at once
                    sent["figures"], sent["turn"] = [build() for build in builders], 0
                elif charts:  # then one chart per turn: the page redraws a Plot from scratch on every change
                    turn = CHART_TURNS[sent["turn"] % len(CHART_TURNS)]
                    sent["figures"][turn], sent["turn"] = builders[turn](), sent["turn"] + 1
                # slider and gr.State outputs stay skips: a slider value would fire its change event, and
                # gr.State outputs are never sent to the page
                return (sent["tokens"], stats_view, *sent["figures"], gr.skip(), TREE_PENDING, "", None, gr.skip(),
                        *report_out)
            figures = [render.tokens_time_figure(eagle, baseline), render.accepted_length_figure(eagle),
                       render.acceptance_depth_figure(eagle), render.time_split_figure(eagle)]
            pick = _best_round(eagle)
            slider = gr.update(minimum=0, maximum=max(1, len(eagle.rounds) - 1), value=pick)
            tree = render.tree_figure(eagle.rounds[pick], decode) if eagle.rounds else \
                render.empty_figure("Draft tree", "no rounds in this run")
            text = decode(list(eagle.token_ids)) if eagle.token_ids else ""
            summary = render.summary(eagle, baseline, live.greedy, text)
            result = {"key": live.key, "eagle": list(eagle.events),
                      "baseline": list(baseline.events) if baseline else None, "greedy": live.greedy}
            return (render.token_html(eagle, decode, show), stats_view, *figures, slider, tree, text, summary, result,
                    *report_out)

        @friendly
        def generate_ui(target_text, draft_text, revision_text, dtype_name, device_name, draft_revision_text,
                        prompt_text, chat_on, max_new_tokens, temp, top_p_value, top_k_value, seed_value,
                        mode_value, depth_value, topk_value, total_value, chain_value, race_on, show,
                        ignore_eos_on, request: gr.Request = None, progress=gr.Progress()):
            key = make_key(target_text, draft_text, revision_text, dtype_name, device_name, draft_revision_text)
            was_loaded = REGISTRY.get(key) is not None
            session = ensure(key, progress)
            report_value = session.report.to_dict()  # the report of the pair that runs, on the page as it streams
            loaded = [render.report_markdown(session.report), report_value, gr.skip(), bool(chat_on)]
            if not was_loaded:  # this Generate loaded the pair: the chat default Load would have set applies
                chat_on = _has_chat_template(session)
                first = (loaded[0], report_value, key, gr.update(value=chat_on, interactive=chat_on))
                loaded[3] = chat_on
            else:
                first = tuple(loaded)
            tree = make_tree(mode_value, depth_value, topk_value, total_value, chain_value)
            run = make_run(max_new_tokens, temp, top_p_value, top_k_value, seed_value, tree, ignore_eos_on)
            ids = session.encode(prompt_text, chat=bool(chat_on))
            session.check_length(ids, run)
            hash_ = request.session_hash if request is not None else None
            pending = _PENDING.pop(hash_)
            if pending is not None and pending.stopped.is_set():  # Stop was pressed while this waited its turn
                live = LiveRun(key, bool(race_on), run.sampling.greedy, "stopped before it started")
                live.done.set()
                yield outputs_for(live, render.TextCache(session.decode), show, True, first)
                return
            live = start_run(key, ids, run, bool(race_on), session.context_note(len(ids), run))
            _LAST_RUNS.put(hash_, live)
            _CLIENT_PAIRS.put(hash_, key)
            decode = render.TextCache(session.decode)
            try:
                seen, drawn_at, charts_at, sent = -1, time.monotonic(), 0.0, {}
                while not live.done.wait(POLL_SECONDS):  # short waits: a cancel or the end is seen at once
                    now = time.monotonic()
                    if now - drawn_at < UPDATE_SECONDS or live.stop.is_set():  # Stop draws the final state
                        continue
                    count = live.count()
                    if count == seen:
                        continue
                    charts = now - charts_at >= CHART_SECONDS
                    yield outputs_for(live, decode, show, False, first if seen < 0 else loaded, charts, sent)
                    seen, drawn_at, charts_at = count, now, (now if charts else charts_at)
                if live.error:
                    raise gr.Error(live.error, print_exception=False)
                yield outputs_for(live, decode, show, True, first if seen < 0 else loaded)
            finally:
                if not live.done.is_set():  # cancelled or the page went away: end the engine cleanly
                    live.stop.set()

        def note_generate(request: gr.Request = None):
            """Runs (unqueued) before each Generate joins the queue: a Stop that comes while it waits ends it."""
            _PENDING.put(request.session_hash if request is not None else None, GenerateRequest())

        def stop_ui(request: gr.Request = None):
            """Tell this page's run to stop, and nothing else. The Generate event itself sees the stop, lets the
            engine finish its round, draws the final state and ends normally. Stop deliberately does not use
            Gradio's `cancels=`: the page's cancel finishes asynchronously and then clears whatever submission
            the Generate button has at that moment, so a Generate pressed before the cancel came back lost
            its run's output (the page stayed at 'stopped'; tests/test_browser.py flaked on this)."""
            hash_ = request.session_hash if request is not None else None
            pending = _PENDING.get(hash_)
            if pending is not None:
                pending.stopped.set()
            live = _LAST_RUNS.get(hash_)
            if live is not None:
                live.stop.set()
            bench_stop = _BENCH_STOPS.get(hash_)
            if bench_stop is not None:
                bench_stop.set()

        def rerender_tokens(result, show):
            if not result:
                return gr.skip()
            return render.token_html(render.RunView.of(result["eagle"]), _decoder(result["key"]), show)

        def rerender_tree(result, index):
            if not result:
                return gr.skip()
            view = render.RunView.of(result["eagle"])
            if not view.rounds:
                return render.empty_figure("Draft tree", "no rounds in this run")
            i = min(max(int(index or 0), 0), len(view.rounds) - 1)
            return render.tree_figure(view.rounds[i], _decoder(result["key"]))

        @friendly
        def benchmark(target_text, draft_text, revision_text, dtype_name, device_name, draft_revision_text,
                      chosen, repeats, max_new_tokens, chat_on, mode_value, depth_value, topk_value, total_value,
                      chain_value, compare_text="", temps_text="", top_p_value=1.0, top_k_value=0, seed_value=0,
                      request: gr.Request = None, progress=gr.Progress()):
            if not chosen:
                raise ConfigError("pick at least one category")
            others = [d for d in (_local_or_repo(x) for x in (compare_text or "").replace(",", "\n").splitlines()) if d]
            temps = _temperatures(temps_text)
            if others and temps:
                raise ConfigError("compare drafts or sweep temperatures, one at a time; clear one of the two boxes")
            key = make_key(target_text, draft_text, revision_text, dtype_name, device_name, draft_revision_text)
            if others and key.draft is None:
                raise ConfigError("load a pair with a draft first; the drafts to compare run next to it")
            session = ensure(key, progress)
            tree = make_tree(mode_value, depth_value, topk_value, total_value, chain_value)
            run = make_run(max_new_tokens, 0.0, top_p_value, top_k_value, seed_value, tree)  # sweeps set temperature
            from .bench import comparison_csv, comparison_json, compare_drafts, load_suite, run_bench, sweep_temperatures

            items = load_suite(None, chosen)
            stop = threading.Event()  # this page's Stop sets it; the benchmark ends after the prompt it is on
            _BENCH_STOPS.put(request.session_hash if request is not None else None, stop)

            def step(done: int, total: int, name: str) -> None:
                if stop.is_set():
                    raise BenchmarkStopped(f"benchmark stopped after {done} of {total} runs; press Run benchmark "
                                           "to start again")
                progress(done / total, desc=f"{name} ({done}/{total})")

            if not others and not temps:
                report = in_worker(gpu(run_bench), session, items, run, repeats=int(repeats), chat=bool(chat_on),
                                   progress=step)
                return _bench_outputs(render.bench_rows(report), render.bench_figure(report),
                                      render.bench_misses_rows([report]), report.to_csv(), report.to_json())
            if temps:
                by, figure = "temperature", render.bench_sweep_figure
                reports = in_worker(gpu(sweep_temperatures), session, items, run, temps, repeats=int(repeats),
                                    chat=bool(chat_on), progress=step)
            else:
                by, figure, sessions = "draft", render.bench_compare_figure, [session]
                for n, draft in enumerate(others):  # each shares the loaded target; freed when this call returns
                    progress(0.0, desc=f"loading draft {n + 1} of {len(others)}: {draft}")
                    sessions.append(session.with_draft(draft))
                reports = in_worker(gpu(compare_drafts), sessions, items, run, repeats=int(repeats),
                                    chat=bool(chat_on), progress=step)
            return _bench_outputs(render.bench_compare_rows(reports, by), figure(reports),
                                  render.bench_misses_rows(reports, by), comparison_csv(reports, by),
                                  comparison_json(reports, by))

        def deploy(key: PairKey | None, mode_value, depth_value, topk_value, total_value, chain_value):
            session = REGISTRY.get(key) if key is not None else None
            if session is None:
                return "Load a pair to see its commands.", "", "", ""
            try:
                from .deploy import deployment_commands
            except ImportError:
                return "Deployment commands are not available in this version (eagle_demo.deploy is missing).", \
                    "", "", ""
            try:
                tree = make_tree(mode_value, depth_value, topk_value, total_value, chain_value)
                out = deployment_commands(key.target, key.draft, session.report, tree)
            except Exception as exc:
                return f"Cannot build commands: {_one_line(exc)}", "", "", ""
            return (f"Commands for **{key.label()}**, draft settings: {tree.label()}.", out.get("vllm", ""),
                    out.get("sglang", ""), out.get("notes", ""))

        @friendly
        def generate(prompt: str, max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
                     top_k: int = 0, seed: int = 0, draft_mode: str = "tree", depth: int = 5,
                     draft_top_k: int = 4, total_tokens: int = 16, chain_k: int = 4, race: bool = True,
                     chat: bool = False, ignore_eos: bool = False, request: gr.Request = None) -> tuple[str, dict]:
            """Generate with EAGLE on the pair this client loaded (/load), else the last loaded pair, else the
            app's default pair. draft_mode: "tree" or "chain". Returns (text, stats)."""
            hash_ = request.session_hash if request is not None else None
            key = _CLIENT_PAIRS.get(hash_) or REGISTRY.current() or make_key(default_target, default_draft)
            if draft_mode not in ("tree", "chain"):
                raise ConfigError(f"draft_mode must be 'tree' or 'chain', got {draft_mode!r}")
            session = ensure(key)
            tree = make_tree(CHAIN_MODE if draft_mode == "chain" else TREE_MODE, depth, draft_top_k, total_tokens,
                             chain_k)
            run = make_run(max_new_tokens, temperature, top_p, top_k, seed, tree, ignore_eos)
            ids = session.encode(prompt, chat=bool(chat))
            session.check_length(ids, run)
            live = start_run(key, ids, run, bool(race), session.context_note(len(ids), run))
            live.done.wait()
            if live.error:
                raise gr.Error(live.error, print_exception=False)
            eagle, baseline, _ = live.snapshot()
            text = session.decode(list(eagle.token_ids))
            return text, {**render.summary(eagle, baseline, live.greedy, text), "notes": [live.note] if live.note else []}

        # ---- wiring -----------------------------------------------------------------------------------------

        gen_outputs = [tokens, stats, fig_time, fig_accept, fig_depth, fig_split, round_slider, fig_tree, text_out,
                       stats_json, result_state, report_md, report_json, pair_state, chat]
        preset.change(apply_preset, preset, [target, draft], api_visibility="private", queue=False)
        tree_preset.change(apply_tree_preset, tree_preset, tree_inputs, api_visibility="private", queue=False)
        load_event = load_btn.click(load, panel, [report_md, report_json, pair_state], api_name="load",
                                    concurrency_limit=1, concurrency_id="model")
        load_event.success(after_load, pair_state, [chat, tree_preset, *tree_inputs], api_visibility="private") \
            .then(deploy, [pair_state, *tree_inputs], [deploy_msg, vllm_cmd, sglang_cmd, deploy_notes],
                  api_visibility="private")
        gen_event = generate_btn.click(note_generate, None, None, queue=False, api_visibility="private").then(
            generate_ui, [*panel, prompt, chat, max_new, temperature, top_p, top_k, seed, *tree_inputs, race,
                          show_rejected, ignore_eos], gen_outputs,
            api_name="generate_stream", api_visibility="undocumented", concurrency_limit=1, concurrency_id="model",
            show_progress="hidden", show_progress_on=result_state)
        stop_btn.click(stop_ui, None, None, queue=False, api_visibility="private")
        bench_stop_btn.click(stop_ui, None, None, queue=False, api_visibility="private")
        show_rejected.change(rerender_tokens, [result_state, show_rejected], tokens, api_visibility="private",
                             queue=False)
        round_slider.change(rerender_tree, [result_state, round_slider], fig_tree, api_visibility="private",
                            queue=False)
        bench_btn.click(benchmark, [*panel, bench_categories, bench_repeats, bench_max_new, chat, *tree_inputs,
                                    bench_compare, bench_temps, top_p, top_k, seed],
                        [bench_table, bench_plot, bench_misses, bench_csv, bench_json], api_name="benchmark",
                        concurrency_limit=1, concurrency_id="model")
        deploy_btn.click(deploy, [pair_state, *tree_inputs], [deploy_msg, vllm_cmd, sglang_cmd, deploy_notes],
                         api_visibility="private", queue=False)
        gr.api(generate, api_name="generate", concurrency_limit=1, concurrency_id="model")

    demo.queue(default_concurrency_limit=1, max_size=32)
    calm_queue(demo)
    return demo
