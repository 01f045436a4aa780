"""What the page's events read: one frozen dataclass per event form (its fields are the event's inputs, in order,
and keep the API's parameter names), the settings built from them, and `handler`, which turns a function of a form
into a Gradio event function whose errors reach the page as one line."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import threading
import typing
from typing import Any, Callable

import gradio as gr

from ..checkpoints.errors import CheckpointError
from ..common.config import TREE_PRESETS, ConfigError, NgramConfig, RunConfig, SamplingConfig, TreeConfig
from . import public
from .api_types import coerce
from .pages import PAGES
from .registry import PairKey, make_key

__all__ = ["TREE_MODE", "CHAIN_MODE", "flag", "PairForm", "LoadForm", "GenerateForm", "BenchForm", "make_tree",
           "make_run", "make_ngram", "tree_values", "tree_settings", "temperatures", "handler", "friendly",
           "progress_fn"]

log = logging.getLogger(__name__)

TREE_MODE, CHAIN_MODE = "dynamic tree", "chain"


def make_tree(mode: str, depth, draft_top_k, total_tokens, chain_k, chain_stop=0.0, hot_vocab=0) -> TreeConfig:
    if mode == CHAIN_MODE:
        return TreeConfig.chain(int(chain_k), float(chain_stop or 0.0), int(hot_vocab or 0))
    return TreeConfig(depth=int(depth), top_k=int(draft_top_k), total_tokens=int(total_tokens))


def make_run(max_new_tokens, temperature, top_p, top_k, seed, tree: TreeConfig, *, ignore_eos: bool = False,
             repetition_penalty=1.0) -> RunConfig:
    sampling = SamplingConfig(temperature=float(temperature), top_p=float(top_p), top_k=int(top_k or 0),
                              seed=int(seed or 0),
                              repetition_penalty=1.0 if repetition_penalty is None else float(repetition_penalty))
    return RunConfig(max_new_tokens=int(max_new_tokens), ignore_eos=bool(ignore_eos), tree=tree, sampling=sampling)


def _whole(name: str, value, low: int, high: int) -> int:
    """A page's or an API's number as an integer, or a one-line ConfigError naming the field and its range."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a whole number from {low} to {high}, got {value!r}") from None
    if not number.is_integer():  # 2.5, inf, nan
        raise ConfigError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(number)


def make_ngram(min_n=1, max_n=2, tokens=10, branches=2, transformers=False) -> NgramConfig:
    """The page's n-gram settings (the CLI's --ngram-min, --ngram-max, --ngram-tokens, --ngram-branches and
    --ngram-transformers, which fixes one branch, no repeat, the earliest occurrence: vLLM's and transformers' rule).
    Bad values raise a one-line ConfigError naming the field and the fix."""
    low_n, high_n, n_tokens = (_whole(f"n-gram {name}", v, 1, high) for name, v, high in
                               (("min", min_n, 16), ("max", max_n, 16), ("tokens", tokens, 32)))
    if transformers:
        return NgramConfig.transformers(high_n, n_tokens, low_n)
    return NgramConfig(min_n=low_n, max_n=high_n, tokens=n_tokens, branches=_whole("n-gram branches", branches, 1, 8))


def tree_values(name: str) -> tuple[str, int, int, int, int, float, int]:
    """A tree preset as the page's seven draft settings (mode, depth, draft top-k, total tokens, chain k, chain
    stop, hot vocabulary)."""
    return tree_settings(TREE_PRESETS[name])


def tree_settings(t: TreeConfig) -> tuple[str, int, int, int, int, float, int]:
    """A tree as the page's seven draft settings (mode, depth, draft top-k, total tokens, chain k, chain stop, hot
    vocabulary)."""
    if t.is_chain:
        return CHAIN_MODE, t.depth, t.top_k, t.total_tokens, t.depth, t.stop_below, t.hot_vocab
    return TREE_MODE, t.depth, t.top_k, t.total_tokens, 4, 0.0, 0


def temperatures(text: str | None) -> list[float]:
    """"0, 0.7 1.0" -> [0.0, 0.7, 1.0]; each checked against the sampling range."""
    parts = (text or "").replace(",", " ").split()
    try:
        temps = [float(p) for p in parts]
    except ValueError:
        raise ConfigError(f"temperatures must be numbers like 0, 0.7, 1.0; got {text.strip()!r}") from None
    for t in temps:
        SamplingConfig(temperature=t)
    return temps


# ---- the forms: field names are the API's parameter names ----------------------------------------------------

def flag(default: Any = dataclasses.MISSING) -> Any:
    """A form's boolean field: keyword-only where a form is built in Python (the event's inputs keep their order)."""
    return dataclasses.field(default=default, kw_only=True)


@dataclasses.dataclass(frozen=True)
class PairForm:
    """The model panel's six fields: the Load event's form."""

    target_text: str
    draft_text: str
    revision_text: str
    dtype_name: str
    device_name: str
    draft_revision_text: str

    def key(self) -> PairKey:
        return make_key(self.target_text, self.draft_text, self.revision_text, self.dtype_name, self.device_name,
                        self.draft_revision_text)


@dataclasses.dataclass(frozen=True)
class LoadForm(PairForm):
    """The Load event's form: the model panel, then whether to probe the pair once it is loaded (`/load`'s
    trailing `probe`, off unless given, so older clients get what they got before)."""

    probe: bool = flag(False)


class _Tree:
    """Reads the Draft panel's seven fields."""

    mode_value: str
    depth_value: int
    topk_value: int
    total_value: int
    chain_value: int
    chain_stop_value: float
    hot_value: int

    def tree(self) -> TreeConfig:
        return make_tree(self.mode_value, self.depth_value, self.topk_value, self.total_value, self.chain_value,
                         self.chain_stop_value, self.hot_value)


@dataclasses.dataclass(frozen=True)
class GenerateForm(PairForm, _Tree):
    prompt_text: str
    chat_on: bool = flag()
    max_new_tokens: int
    temp: float
    top_p_value: float
    top_k_value: int
    seed_value: int
    mode_value: str
    depth_value: int
    topk_value: int
    total_value: int
    chain_value: int
    chain_stop_value: float
    hot_value: int
    race_on: bool = flag()
    show: bool = flag()
    ignore_eos_on: bool = flag()
    repetition_value: float = 1.0
    race_ngram_on: bool = flag(False)  # the n-gram draft races too (`decoding.ngram`), set by the five fields below
    ngram_min: int = 1
    ngram_max: int = 2
    ngram_tokens: int = 10
    ngram_branches: int = 2
    ngram_transformers: bool = flag(False)

    def run(self) -> RunConfig:
        """The run; its n-gram settings are read (and checked) only when the n-gram draft races."""
        run = make_run(self.max_new_tokens, self.temp, self.top_p_value, self.top_k_value, self.seed_value,
                       self.tree(), ignore_eos=self.ignore_eos_on, repetition_penalty=self.repetition_value)
        if not self.race_ngram_on:
            return run
        return dataclasses.replace(run, ngram=make_ngram(self.ngram_min, self.ngram_max, self.ngram_tokens,
                                                         self.ngram_branches, self.ngram_transformers))


@dataclasses.dataclass(frozen=True)
class BenchForm(PairForm, _Tree):
    chosen: list
    repeats: int
    max_new_tokens: int
    chat_on: bool = flag()
    mode_value: str
    depth_value: int
    topk_value: int
    total_value: int
    chain_value: int
    chain_stop_value: float
    hot_value: int
    compare_text: str = ""
    temps_text: str = ""
    top_p_value: float = 1.0
    top_k_value: int = 0
    seed_value: int = 0

    def run(self) -> RunConfig:
        """Greedy (a temperature sweep sets each temperature) with the form's top-p, top-k and seed."""
        return make_run(self.max_new_tokens, 0.0, self.top_p_value, self.top_k_value, self.seed_value, self.tree())


# ---- event functions ----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _one_line_errors():
    try:
        yield
    except gr.Error:
        raise
    except Exception as exc:
        log.info("request failed: %s", exc, exc_info=not isinstance(exc, ValueError))
        raise gr.Error(public.message(exc), print_exception=False) from None


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


def progress_fn(progress) -> Callable[[str, float], None]:
    """(stage, fraction) -> the page's progress bar (nothing without one)."""
    def say(stage: str, fraction: float) -> None:
        if progress is not None:
            progress(min(max(float(fraction), 0.0), 1.0), desc=stage)
    return say


def stoppable(say: Callable[[str, float], None], request: gr.Request | None) -> Callable[[str, float], None]:
    """`say`, which raises once this page pressed Stop: a download reports its progress through it, so Stop ends
    the download (what is whole stays cached; huggingface_hub keeps the part of a file as .incomplete)."""
    stop = threading.Event()
    PAGES.of(request.session_hash if request is not None else None).load_stop = stop

    def check(stage: str, fraction: float) -> None:
        if stop.is_set():
            raise CheckpointError("the load was stopped (Stop); press Load to start it again")
        say(stage, fraction)
    return check


def handler(form: type, fn: Callable[..., Any], *, progress: bool = True) -> Callable:
    """An event function for Gradio from `fn(form, request, progress)` (`fn(form, request)` without `progress`): its
    parameters are the form's fields in order, typed as the form types them (so the event's inputs, the API's
    parameter names and `gr.api`'s schema follow the form), then `request` (and `progress`), which Gradio fills in.
    Errors become one-line gr.Errors."""
    fields = dataclasses.fields(form)
    hints = typing.get_type_hints(form)
    params = [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=hints[f.name],
                                default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default)
              for f in fields]
    params.append(inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                    annotation=gr.Request))
    if progress:
        params.append(inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=gr.Progress()))
    # resolved in fn's own module: a name left as a string would fail Gradio's type-hint read of the event, which
    # then fills in no `request` (the benchmark's Stop never reached it)
    returns = typing.get_type_hints(fn).get("return", inspect.Signature.empty)
    signature = inspect.Signature(params, return_annotation=returns)

    def call(args: tuple, kwargs: dict) -> tuple:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = bound.arguments
        built = form(**{f.name: coerce(f.name, values[f.name], hints.get(f.name)) for f in fields})
        return (built, values["request"], values["progress"]) if progress else (built, values["request"])

    if inspect.isgeneratorfunction(fn):
        def event(*args, **kwargs):
            yield from fn(*call(args, kwargs))
    else:
        def event(*args, **kwargs):
            return fn(*call(args, kwargs))
    event.__name__, event.__qualname__, event.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    event.__signature__ = signature
    event.__annotations__ = {**{f.name: hints[f.name] for f in fields}, "request": gr.Request,
                             **({"return": returns} if returns is not inspect.Signature.empty else {})}
    return friendly(event)
