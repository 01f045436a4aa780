"""`/generate`: a plain function for code (text and stats, no rendering). See docs/api.md. `/load`,
`/generate_stream` and `/benchmark` are the page's own events (playground, bench_tab)."""

from __future__ import annotations

import dataclasses

import gradio as gr

from ..common.config import RunConfig, TreeConfig, default_tree, tree_from
from ..diagnose.run import too_short
from ..prepare import RunRequest, prepare_run, race_phases
from ..view.stats import summary
from .autotune import api_tree_choice
from .diagnose_tab import diagnose
from .forms import flag, handler, make_ngram, make_run
from .pages import PAGES
from .registry import REGISTRY
from .state import ensure, start_run

__all__ = ["GenerateRequest", "generate", "request_tree", "register_api"]


@dataclasses.dataclass(frozen=True)
class GenerateRequest:
    """`/generate`'s parameters, in its order and with its defaults (docs/api.md says what each does): the
    endpoint's signature is built from these fields (`forms.handler`). Flags are keyword-only in Python."""

    prompt: str
    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    draft_mode: str = "auto"
    depth: int | None = None
    draft_top_k: int | None = None
    total_tokens: int | None = None
    chain_k: int | None = None
    race: bool = flag(True)
    chat: bool | None = flag(None)  # None: on when the target has a chat template
    ignore_eos: bool = flag(False)
    chain_stop: float | None = None
    hot_vocab: int | None = None
    repetition_penalty: float = 1.0
    race_ngram: bool = flag(False)
    explore: bool = flag(False)
    ngram_min: int = 1
    ngram_max: int = 2
    ngram_tokens: int = 10
    ngram_branches: int = 2
    ngram_transformers: bool = flag(False)

    @property
    def auto(self) -> bool:
        """Whether the pair's automatic tree runs: draft_mode "auto" and no tree setting given."""
        settings = (self.depth, self.draft_top_k, self.total_tokens, self.chain_k, self.chain_stop, self.hot_vocab)
        return self.draft_mode == "auto" and settings == (None,) * 6

    def run(self, device: str, family: str) -> RunConfig:
        """The run's settings over the pair's static tree (`request_tree`); the n-gram settings are read (and
        checked) only when the n-gram draft races."""
        run = make_run(self.max_new_tokens, self.temperature, self.top_p, self.top_k, self.seed,
                       request_tree(device, family, self), ignore_eos=self.ignore_eos,
                       repetition_penalty=self.repetition_penalty)
        if not self.race_ngram:
            return run
        return dataclasses.replace(run, ngram=make_ngram(self.ngram_min, self.ngram_max, self.ngram_tokens,
                                                         self.ngram_branches, self.ngram_transformers))


def generate(form: GenerateRequest, request: gr.Request | None = None) -> tuple[str, dict]:
    """Generate with EAGLE on the pair this client loaded (/load), else the last loaded pair, else the
    app's default pair. draft_mode: "auto" (without tree settings: the automatic tree of the pair on this device,
    calibrated once and cached, reported in the stats' "auto" block; with some: the static default tree of the
    pair's device and draft changed by them), "tree" or "chain"; a chain's chain_stop and hot_vocab as the page's
    draft settings. repetition_penalty: transformers' rule (1 = off), lossless as the rest. race_ngram: with race, the
    n-gram draft races too (the stats' "race" block), set by ngram_min, ngram_max, ngram_tokens, ngram_branches and
    ngram_transformers (the CLI's --ngram-* flags; the defaults are NgramConfig's). A racer whose output differs from
    the baseline's has the first difference explained in "divergence". explore: the stats gain a "diagnose" block,
    the run taken apart as the Diagnose tab does (`diagnosis.RunDiagnosis.to_dict`: tau by position and by kind of
    line, every draft shape replayed on the run's text). Returns (text, stats)."""
    page = PAGES.of(request.session_hash if request is not None else None)
    key = REGISTRY.for_client(page.pair)
    if (newer := REGISTRY.replaced_by(key)) is not None:  # another client's Load freed this client's pair
        page.pair = newer
        raise gr.Error(f"the pair changed to {newer.label()} while you waited; press Generate again",
                       print_exception=False)
    session = ensure(key)
    if form.explore and session.eagle is None:
        raise gr.Error("explore replays the draft's shapes, and this pair has no draft; load a pair with a draft "
                       "head, or call /generate without explore", print_exception=False)
    run = form.run(session.device.type, session.family)
    asked = RunRequest(form.prompt, run, race_phases(race=bool(form.race), ngram=bool(form.race_ngram)),
                       chat=session.has_chat_template if form.chat is None else bool(form.chat))
    ready = prepare_run(session, asked, api_tree_choice(key, session) if form.auto else None)
    live = start_run(key, ready)
    live.done.wait()
    if live.error:
        raise gr.Error(live.error, print_exception=False)
    eagle, baseline, _ = live.snapshot()
    text = session.decode(list(eagle.token_ids))
    stats = summary(eagle, baseline, live.greedy, text, ready.auto, live.ngram_snapshot(), session.decode)
    notes = [live.note] if live.note else []
    if form.explore:  # the page's Diagnose tab on this run (on ZeroGPU the replay is a GPU call)
        why = too_short(eagle.events)
        notes += [f"explore: {why}"] if why else []
        stats["diagnose"] = None if why else diagnose(key, session, list(eagle.events), list(ready.prompt_ids),
                                                      live.tree, live.greedy).to_dict()
    return text, {**stats, "notes": notes}


def request_tree(device: str, family: str, form: GenerateRequest | None = None) -> TreeConfig:
    """/generate's static tree: `config.default_tree` of the pair, changed by the request's tree settings (without
    settings and with draft_mode "auto", `generate` runs the automatic tree instead, as the page and the CLI)."""
    form = form or GenerateRequest("")
    return tree_from(default_tree(device, family), form.depth, form.draft_top_k, form.total_tokens, form.chain_k,
                     form.draft_mode, form.chain_stop, form.hot_vocab)


def register_api() -> None:
    """Inside a gr.Blocks: the named `/generate` endpoint (one model event at a time, like the page's)."""
    gr.api(handler(GenerateRequest, generate, progress=False), api_name="generate", concurrency_limit=1,
           concurrency_id="model")
