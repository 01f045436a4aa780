"""`/generate`: a plain function for code (text and stats, no rendering). See docs/api.md. `/load`,
`/generate_stream` and `/benchmark` are the page's own events (playground, bench_tab)."""

from __future__ import annotations

import dataclasses

import gradio as gr

from ..common.config import default_tree, tree_from
from ..diagnose.run import too_short
from ..view.stats import summary
from .api_types import typed
from .autotune import choice_for
from .diagnose_tab import diagnose
from .forms import friendly, make_ngram, make_run
from .pages import CLIENT_PAIRS
from .registry import REGISTRY
from .state import ensure, start_run

__all__ = ["generate", "request_tree", "register_api"]


def generate(prompt: str, max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0,
             seed: int = 0, draft_mode: str = "auto", depth: int | None = None, draft_top_k: int | None = None,
             total_tokens: int | None = None, chain_k: int | None = None, race: bool = True, chat: bool = False,
             ignore_eos: bool = False, chain_stop: float | None = None, hot_vocab: int | None = None,
             repetition_penalty: float = 1.0, race_ngram: bool = False, explore: bool = False, ngram_min: int = 1,
             ngram_max: int = 2, ngram_tokens: int = 10, ngram_branches: int = 2, ngram_transformers: bool = False,
             request: gr.Request = None) -> tuple[str, dict]:
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
    hash_ = request.session_hash if request is not None else None
    key = REGISTRY.for_client(hash_)
    if (newer := REGISTRY.replaced_by(key)) is not None:  # another client's Load freed this client's pair
        CLIENT_PAIRS.put(hash_, newer)
        raise gr.Error(f"the pair changed to {newer.label()} while you waited; press Generate again",
                       print_exception=False)
    session = ensure(key)
    if explore and session.eagle is None:
        raise gr.Error("explore replays the draft's shapes, and this pair has no draft; load a pair with a draft "
                       "head, or call /generate without explore", print_exception=False)
    tree = request_tree(session.device.type, session.family, draft_mode, depth, draft_top_k, total_tokens, chain_k,
                        chain_stop, hot_vocab)
    run = make_run(max_new_tokens, temperature, top_p, top_k, seed, tree, ignore_eos, repetition_penalty)
    if race_ngram:
        run = dataclasses.replace(run, ngram=make_ngram(ngram_min, ngram_max, ngram_tokens, ngram_branches,
                                                        ngram_transformers))
    ids = session.encode(prompt, chat=bool(chat))
    session.check_length(ids, run)
    auto, auto_note = None, ""
    if draft_mode == "auto" and (depth, draft_top_k, total_tokens, chain_k, chain_stop, hot_vocab) == (None,) * 6:
        auto, auto_note = choice_for(key, session)  # None without a draft (the run then says so)
        run = auto.run_config(run) if auto is not None else run
    session.check_tree(run)
    note = "; ".join(n for n in (auto_note, session.context_note(len(ids), run)) if n)
    live = start_run(key, ids, run, bool(race), note, auto, ngram=bool(race_ngram))
    live.done.wait()
    if live.error:
        raise gr.Error(live.error, print_exception=False)
    eagle, baseline, _ = live.snapshot()
    text = session.decode(list(eagle.token_ids))
    stats = summary(eagle, baseline, live.greedy, text, auto, live.ngram_snapshot(), session.decode)
    notes = [live.note] if live.note else []
    if explore:  # the page's Diagnose tab on this run (on ZeroGPU the replay is a GPU call)
        why = too_short(eagle.events)
        notes += [f"explore: {why}"] if why else []
        stats["diagnose"] = None if why else diagnose(key, session, list(eagle.events), ids, live.tree,
                                                      live.greedy).to_dict()
    return text, {**stats, "notes": notes}


def request_tree(device: str, family: str, draft_mode: str = "auto", depth: int | None = None,
                 draft_top_k: int | None = None, total_tokens: int | None = None, chain_k: int | None = None,
                 chain_stop: float | None = None, hot_vocab: int | None = None):
    """/generate's static tree: `config.default_tree` of the pair, changed by the settings given (without
    settings and with draft_mode "auto", `generate` runs the automatic tree instead, as the page and the CLI)."""
    return tree_from(default_tree(device, family), depth, draft_top_k, total_tokens, chain_k, draft_mode, chain_stop,
                     hot_vocab)


def register_api() -> None:
    """Inside a gr.Blocks: the named `/generate` endpoint (one model event at a time, like the page's)."""
    gr.api(friendly(typed(generate)), api_name="generate", concurrency_limit=1, concurrency_id="model")
