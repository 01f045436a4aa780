"""One way from the Generate button to a verified round (docs/house.md): a run is checked once into a frozen
`ReadyRun` and run in one race order; everything a page owns sits in one record that its closing frees. (That no
function takes more than 8 parameters, the app's included, is test_architecture's.)"""

from __future__ import annotations

import dataclasses
import time

import pytest

from eagle_demo.app.pages import Page, Pages
from eagle_demo.common.config import RunConfig
from eagle_demo.prepare import ReadyRun, RunRequest, prepare_run, race, race_phases
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET, PromptError


@pytest.fixture(scope="module")
def session():
    from eagle_demo.session import load_session

    return load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu")


def test_the_race_order_is_written_once():
    assert race_phases(race=True, ngram=True) == ("eagle", "ngram", "baseline")
    assert race_phases(race=True) == ("eagle", "baseline")
    assert race_phases(race=False, ngram=True) == ("eagle",)
    assert race_phases("ngram", race=True, ngram=True) == ("ngram", "baseline")  # the n-gram draft races EAGLE only
    assert race_phases("baseline", race=True) == ("baseline",)


def test_a_run_is_checked_once_and_runs_as_prepared(session, monkeypatch):
    """prepare_run encodes, checks the length for every racer and the tree, and returns a frozen record; running it
    in race order checks nothing again (the engines take it as it is), and greedy EAGLE equals plain decoding."""
    checks = []
    for name in ("check_length", "check_tree"):
        real = getattr(session, name)
        monkeypatch.setattr(session, name, lambda *a, _real=real, _name=name, **k: (checks.append(_name),
                                                                                    _real(*a, **k))[1])
    asked = RunRequest("def add(a, b):\n", RunConfig(max_new_tokens=12), race_phases(race=True, ngram=True))
    ready = prepare_run(session, asked)
    assert isinstance(ready, ReadyRun) and ready.race and ready.phases == ("eagle", "ngram", "baseline")
    assert list(ready.prompt_ids) == session.encode("def add(a, b):\n") and ready.auto is None
    assert checks == ["check_length"] * 3 + ["check_tree"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ready.note = "changed"  # type: ignore[misc]
    checks.clear()
    runs: dict[str, list] = {}
    for phase, event in race(ready, lambda phase: session.run(ready, phase)):
        runs.setdefault(phase, []).append(event)
    assert checks == [] and list(runs) == ["eagle", "ngram", "baseline"]
    assert runs["eagle"][-1].token_ids == runs["ngram"][-1].token_ids == runs["baseline"][-1].token_ids


def test_the_tree_choice_runs_between_the_checks(session):
    """A bad prompt fails before the automatic tree is chosen (a calibration takes seconds); the chosen tree is
    checked, and its note joins the run's."""
    chosen = []

    def choose(run):
        chosen.append(run)
        return run, None, "auto: chose nothing"

    with pytest.raises(PromptError, match="exceeds the target's context"):
        prepare_run(session, RunRequest((1,) * 100_000, RunConfig(max_new_tokens=4)), choose)
    assert chosen == []
    with pytest.raises(ValueError, match="unknown mode 'fast'; use eagle, ngram or baseline"):
        prepare_run(session, RunRequest((1, 2), RunConfig(), ("fast",)), choose)
    ready = prepare_run(session, RunRequest((1, 2, 3), RunConfig(max_new_tokens=4)), choose)
    assert len(chosen) == 1 and ready.note == "auto: chose nothing"
    plain = prepare_run(session, RunRequest((1, 2, 3), RunConfig(max_new_tokens=4), ("baseline",)), choose)
    assert len(chosen) == 1 and plain.note == ""  # plain decoding has no tree to choose


def test_a_page_record_lives_until_its_page_closes():
    pages = Pages(capacity=2)
    first = pages.of("a")
    first.preset = "auto"
    assert pages.of("a") is first and "a" in pages
    pages.close("a")
    del first  # nothing holds the closed page's record any more
    assert "a" not in pages and pages.of("a").preset is None  # a new page under that hash starts empty
    pages.of("b"), pages.of("c")
    assert "a" not in pages and list(pages) == [pages.of("b"), pages.of("c")]  # the least recent one left
    held = pages.of("b")  # an event still going holds its page's record
    held.preset = "chain4"
    pages.close("b")
    assert any(record is held for record in pages)  # the exit's drain still stops what the event runs
    assert "b" not in pages and pages.of("b") is held  # the page's heartbeat came back: its Stop reaches the event
    pages.close("b")
    del held
    assert pages.of("b").preset is None  # nothing held it: freed
    lone = pages.of(None)  # no session hash: a record kept nowhere
    lone.preset = "chain4"
    assert pages.of(None).preset is None


def test_a_closed_page_holds_no_pair():
    """Public mode's holds (`public.to_free`) are the records' pairs: a closed page's goes with it, unless an event
    still holds its record."""
    pages = Pages()
    pages.of("alice").pair = "alice's pair"
    pages.of("bob")  # no pair yet
    assert pages.pairs() == {"alice": "alice's pair"}
    running = pages.of("carol")  # what a running event keeps
    running.pair = "carol's pair"
    pages.close("alice"), pages.close("carol")
    assert pages.pairs() == {"carol": "carol's pair"}
    del running
    assert pages.pairs() == {}


def test_stop_before_the_note_still_ends_that_click():
    page = Page()
    page.note_stop(2)
    page.note_click(2)
    assert page.stopped_before_start() and page.pending is None
    page.note_click(3)
    assert not page.stopped_before_start()


def test_a_page_that_closes_frees_its_entry(monkeypatch):
    """Gradio's unload (a closed tab, a closed API client) frees the client's record."""
    from gradio_client import Client

    from eagle_demo.app.pages import PAGES
    from test_ui_api import launch

    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.5")
    demo, url = launch(SHIPPED_TARGET, SHIPPED_EAGLE1)  # loads no model
    try:
        client = Client(url, verbose=False)
        PAGES.of(client.session_hash).preset = "auto"  # what the page's events note
        assert client.session_hash in PAGES
        client.close()
        deadline = time.monotonic() + 30
        while client.session_hash in PAGES:
            assert time.monotonic() < deadline, "the closed client's record was never freed"
            time.sleep(0.1)
    finally:
        demo.close()


def test_a_live_run_sets_every_field_in_its_constructor(session, monkeypatch):
    from eagle_demo.app import REGISTRY, make_key
    from eagle_demo.app.state import LiveRun, start_run

    key = make_key(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu")
    loaded = REGISTRY.load(key)
    try:
        ready = prepare_run(loaded, RunRequest((1, 2, 3), RunConfig(max_new_tokens=6), race_phases(race=True)))
        fields = set(vars(LiveRun(key, ready)))
        live = start_run(key, ready)
        live.done.wait()
        assert live.error is None and set(vars(live)) == fields
        assert live.prompt_ids == [1, 2, 3] and live.tree == ready.run.tree
        unstarted = LiveRun(key, ready, "stopped before it started", started=False)
        assert unstarted.done.is_set() and unstarted.prompt_ids is None and unstarted.tree is None
    finally:
        REGISTRY.clear()



def test_a_stop_after_the_benchmark_click_ends_that_benchmark_even_before_it_starts():
    """Run benchmark notes its click unqueued (`Page.note_benchmark`): a Stop while the benchmark waits for its
    turn, loads or calibrates reaches the event the benchmark then runs with; an API call gets a fresh one."""
    from eagle_demo.app.pages import Page

    page = Page()
    page.note_benchmark()
    page.note_stop(0)
    assert page.benchmark_stop().is_set()  # the click's benchmark sees the Stop pressed before it started
    assert not page.benchmark_stop().is_set()  # the next one (an API call, no click noted) starts afresh
