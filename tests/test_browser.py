"""The playground page end to end in a real headless Chromium (Debian's /usr/bin/chromium) via Playwright.

EAGLE_DEMO_SCREENSHOTS=1 also saves assets/screenshots/playground.png, tree.png and benchmark.png.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from test_ui_api import CODE_PROMPT, demo_pair, launch

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
SHOTS = Path(__file__).resolve().parent.parent / "assets" / "screenshots"
TIMEOUT_MS = 120_000

PLOT_POINTS = """(id) => {
  const el = document.querySelector(`#${id} .js-plotly-plot`);
  if (!el || !el.data) return -1;
  return el.data.reduce((n, t) => n + ((t.x && t.x.length) || 0), 0);
}"""
TREE_TITLE = "() => { const el = document.querySelector('#plot-tree .js-plotly-plot'); " \
             "return el && el.layout && el.layout.title ? el.layout.title.text : ''; }"


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from eagle_demo.app import REGISTRY

    pair = demo_pair(tmp_path_factory.mktemp("pair"))
    demo, url = launch(*pair)
    try:
        yield url, pair[0]
    finally:
        demo.close()
        REGISTRY.clear()


@pytest.fixture(scope="module")
def browser(app_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser, app_url):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(app_url[0], wait_until="domcontentloaded")
    page.wait_for_selector("#generate-btn")
    yield page
    page.close()


def set_number(page, elem_id: str, value: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def wait_state(page, *states: str) -> None:
    page.wait_for_selector(", ".join(f'#eagle-stats [data-state="{s}"]' for s in states))


def test_generate_shows_provenance_charts_and_tree(page):
    page.click("#load-btn")
    page.wait_for_selector("#report :text('EAGLE-1/2 head')")
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    assert page.locator("#race-box input").is_checked()
    assert page.locator("#rejected-box input").is_checked()
    set_number(page, "max-new", 64)
    page.click("#generate-btn")
    wait_state(page, "done")

    out = page.locator("#eagle-output")
    for kind in ("tok-prefill", "tok-accepted", "tok-bonus", "tok-rejected"):
        assert out.locator(f".{kind}").count() > 0, kind
    assert "draft p" in out.locator(".tok-accepted").first.get_attribute("title")
    stats = page.locator("#eagle-stats").inner_text()
    assert "IDENTICAL TO BASELINE" in stats.upper() and "yes" in stats
    assert "why:" in stats and "round cost" in stats.lower()  # speedup = tau / round cost, spelled out

    assert page.locator(".js-plotly-plot").count() >= 5
    for plot in ("plot-time", "plot-accept", "plot-depth", "plot-split", "plot-tree"):
        assert page.evaluate(PLOT_POINTS, plot) > 0, plot
    names = page.evaluate("() => document.querySelector('#plot-time .js-plotly-plot').data.map(t => t.name)")
    assert names == ["EAGLE", "baseline (plain decoding)"]

    if os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1":  # the tree shows the round with the longest accepted path
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "playground.png"), full_page=True)
        page.locator("#plot-tree").screenshot(path=str(SHOTS / "tree.png"))

    shown = page.evaluate(TREE_TITLE)
    other = 1 if not shown.startswith("Round 1:") else 0
    set_number(page, "round-slider", other)
    page.wait_for_function(f"() => ({TREE_TITLE})().startsWith('Round {other}:')")
    traces = page.evaluate("() => document.querySelector('#plot-tree .js-plotly-plot').data.map(t => t.name)")
    assert {"accepted path", "root", "target token"} <= set(traces)


def test_load_picks_the_auto_tree_and_the_strip_shows_predicted_next_to_measured(page):
    """After Load the tree preset is "auto": the page calibrates (or reads the pair's choice), shows the choice and
    its predicted speedup, and a Generate's stats strip shows the predicted speedup next to the measured one."""
    page.click("#load-btn")
    page.wait_for_selector("#auto-tree :text('predicted speedup')")
    assert page.locator("#tree-preset input").input_value() == "auto"
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    set_number(page, "max-new", 32)
    page.click("#generate-btn")
    wait_state(page, "done")
    line = page.locator("#eagle-stats .stat-auto").inner_text()
    assert line.startswith("auto: ") and "predicted " in line and "measured " in line


def long_run(target: str) -> int:
    """Max new tokens for a run that lasts seconds even on a fast machine, within the target's context."""
    context = json.loads((Path(target) / "config.json").read_text())["max_position_embeddings"]
    return max(64, min(8000, context - 128))


def stop_then_generate(page, long: int, *running: str) -> str:
    """Generate a long run, Stop it while one of the `running` states shows, then Generate 24 tokens to the end;
    the stats strip's text."""
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    set_number(page, "max-new", long)
    page.locator("#ignore-eos-box input").check()
    page.click("#generate-btn")
    wait_state(page, *running)
    page.click("#stop-btn")
    wait_state(page, "stopped")
    assert page.locator("#eagle-output .tok").count() > 0
    set_number(page, "max-new", 24)
    page.locator("#ignore-eos-box input").uncheck()
    page.click("#generate-btn")
    wait_state(page, "done")
    return page.locator("#eagle-stats").inner_text()


def test_stop_then_generate_again(page, app_url):
    stats = stop_then_generate(page, long_run(app_url[1]), "running", "baseline")
    assert "yes" in stats  # identical to baseline
    assert page.locator("#eagle-output .tok-prefill").count() == 1


def _generate(page, max_new: int, ignore_eos: bool) -> None:
    set_number(page, "max-new", max_new)
    box = page.locator("#ignore-eos-box input")
    box.check() if ignore_eos else box.uncheck()
    page.click("#generate-btn")


def _short_run_is_identical(page) -> None:
    wait_state(page, "done")
    stats = page.locator("#eagle-stats").inner_text()
    assert "yes" in stats  # identical to baseline
    assert page.locator("#eagle-output .tok-prefill").count() == 1


@pytest.mark.parametrize("phase", ["running", "baseline"])
def test_stop_then_generate_twenty_cycles(page, app_url, phase):
    """Generate (long) -> Stop (in EAGLE's phase, or in the race's baseline phase) -> Generate (short) -> done,
    20 times on one page; every short run is complete and identical to its baseline."""
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    long = long_run(app_url[1]) if phase == "running" else 400  # EAGLE ends quickly, the baseline takes seconds
    for _cycle in range(20):
        _generate(page, long, ignore_eos=True)
        wait_state(page, phase)
        page.click("#stop-btn")
        wait_state(page, "stopped")
        _generate(page, 24, ignore_eos=False)
        _short_run_is_identical(page)


def test_stop_in_one_tab_never_ends_another_tabs_run(browser, app_url):
    first, second = (browser.new_page(viewport={"width": 1400, "height": 1000}) for _ in range(2))
    try:
        for page in (first, second):
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(app_url[0], wait_until="domcontentloaded")
            page.wait_for_selector("#generate-btn")
            page.locator("#prompt-box textarea").fill(CODE_PROMPT)
        _generate(first, long_run(app_url[1]), ignore_eos=True)
        wait_state(first, "running")
        _generate(second, 24, ignore_eos=False)  # waits in the queue behind the first tab's run
        second.click("#stop-btn")  # ends the second tab's waiting Generate, not the first tab's run
        first.wait_for_timeout(1500)
        assert first.locator('#eagle-stats [data-state="running"]').count() == 1
        first.click("#stop-btn")
        wait_state(first, "stopped")
        wait_state(second, "stopped")
        assert "stopped before it started" in second.locator("#eagle-stats").inner_text()
        _generate(second, 24, ignore_eos=False)  # and the second tab still works
        _short_run_is_identical(second)
    finally:
        first.close()
        second.close()


def test_a_stop_served_before_the_generates_note_ends_that_generate(page, monkeypatch):
    """Generate sends a note (unqueued) before it joins the queue, and Stop is another unqueued request: the
    server may serve the Stop first. Here the note is held back until the Stop has been served, so it always
    is; the Stop must still end the Generate it followed (it did not: the two-tab test once waited 120 s)."""
    import threading

    from eagle_demo.app.pages import Page

    note_click, note_stop, stop_served = Page.note_click, Page.note_stop, threading.Event()

    def stop_then_mark(record, clicks):
        note_stop(record, clicks)
        stop_served.set()

    def note_after_the_stop(record, click):
        assert stop_served.wait(60), "the page's Stop never reached the server"
        note_click(record, click)

    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    monkeypatch.setattr(Page, "note_stop", stop_then_mark)
    monkeypatch.setattr(Page, "note_click", note_after_the_stop)
    _generate(page, 24, ignore_eos=False)
    page.click("#stop-btn")
    wait_state(page, "stopped")
    assert "stopped before it started" in page.locator("#eagle-stats").inner_text()
    monkeypatch.setattr(Page, "note_click", note_click)
    _generate(page, 24, ignore_eos=False)  # the Stop ended that click only
    _short_run_is_identical(page)


def test_benchmark_stop_ends_the_benchmark_and_the_page_keeps_serving(page):
    page.get_by_role("tab", name="Benchmark").click()
    for box in page.locator("#bench-categories input[type=checkbox]").all():
        box.check()
    page.click("#bench-btn")
    page.wait_for_timeout(1500)
    page.click("#bench-stop-btn")
    page.wait_for_selector(":text('benchmark stopped after')")
    page.get_by_role("tab", name="Playground").click()
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    _generate(page, 24, ignore_eos=False)
    _short_run_is_identical(page)


def test_benchmark_compares_the_two_shipped_heads(page, app_url):
    """The Benchmark tab races a second draft for the loaded target: a row per draft and category, every run
    identical to plain decoding. EAGLE_DEMO_SCREENSHOTS=1 runs every category and saves
    assets/screenshots/benchmark.png."""
    from eagle_demo.common.paths import ASSETS

    if Path(app_url[1]).resolve() != (ASSETS / "tiny-target").resolve():
        pytest.skip("the page serves a stand-in pair, not the shipped one")
    shots = os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1"
    page.get_by_role("tab", name="Benchmark").click()
    if shots:
        for box in page.locator("#bench-categories input[type=checkbox]").all():
            box.check()
    page.locator("#bench-compare textarea").fill(str(ASSETS / "tiny-eagle3"))
    page.click("#bench-btn")
    page.wait_for_function("() => (document.querySelector('#bench-table').innerText.match(/overall/g) || [])"
                           ".length >= 2", timeout=600_000 if shots else TIMEOUT_MS)  # both drafts' rows
    rows = page.locator("#bench-table").inner_text()
    assert "tiny-eagle1" in rows and "tiny-eagle3" in rows and "Traceback" not in rows
    assert "yes" in rows.split() and "NO" not in rows.split()  # every category's runs equal plain decoding
    if shots:
        page.wait_for_timeout(1000)
        page.screenshot(path=str(SHOTS / "benchmark.png"), full_page=True)


def _probe_line(page) -> str:
    page.wait_for_function("() => document.querySelector('#report').innerText.includes('Probe (')")
    report = page.locator("#report").inner_text()
    assert report.count("Probe (") == 1 and "Traceback" not in report
    return next(line for line in report.splitlines() if line.startswith("Probe ("))


def test_probe_button_and_probe_after_load_show_the_probe_line(page):
    from eagle_demo.app import REGISTRY

    box = page.locator("#probe-box input")
    assert not box.is_checked()  # off on a CPU page (a GPU page checks it as it opens)
    REGISTRY.clear()  # a fresh load each time, so each step shows its own report
    box.check()
    page.click("#load-btn")
    line = _probe_line(page)
    assert "declared" in line and "measured tau" in line and ("used as declared" in line or "instead" in line)

    REGISTRY.clear()
    box.uncheck()
    page.click("#load-btn")
    page.wait_for_function("() => { const t = document.querySelector('#report').innerText; "
                           "return t.includes('Adaptations') && !t.includes('Probe ('); }")
    page.click("#probe-btn")
    assert _probe_line(page) == line  # greedy measurements: the same figures


def test_a_gpu_page_probes_after_load_by_default_and_the_api_does_not(browser, app_url, monkeypatch):
    """Built as on a GPU machine (no model loads): the page's box opens checked; `/load`'s `probe` stays off."""
    import torch
    from gradio_client import Client

    import eagle_demo.app.page as page_module

    monkeypatch.setattr(page_module, "resolve_device", lambda name="auto": torch.device("cuda"))
    demo, url = launch(*demo_pair(Path(app_url[1]).parent))
    page = browser.new_page()
    try:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_function("() => { const b = document.querySelector('#probe-box input'); return b && b.checked; }")
        params = Client(url, verbose=False).view_api(print_info=False, return_format="dict")["named_endpoints"][
            "/load"]["parameters"]
        assert params[-1]["parameter_name"] == "probe" and params[-1]["parameter_default"] is False
    finally:
        page.close()
        demo.close()


def test_a_pair_switched_after_load_runs_its_own_auto_tree_and_a_failure_says_failed(page, app_url):
    """Load the EAGLE-1 pair (auto puts its hot vocabulary on the panel), then name the EAGLE-3 head and press
    Generate: the run uses the EAGLE-3 pair's own automatic tree (EAGLE-1's would be refused: that head has its own
    vocabulary) and the panel then shows it. A Generate that fails leaves the strip at "failed"."""
    from eagle_demo.common.paths import ASSETS

    if Path(app_url[1]).resolve() != (ASSETS / "tiny-target").resolve():
        pytest.skip("the page serves a stand-in pair, not the shipped one")
    page.click("#load-btn")
    page.wait_for_selector("#auto-tree :text('predicted speedup')")
    page.locator("#draft-box textarea").fill(str(ASSETS / "tiny-eagle3"))
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    set_number(page, "max-new", 24)
    page.click("#generate-btn")
    wait_state(page, "done")
    assert "auto: " in page.locator("#eagle-stats .stat-auto").inner_text()
    page.wait_for_function("() => document.querySelector('#hot-vocab input').value === '0'")
    page.locator("#draft-box textarea").fill(str(ASSETS / "no-such-draft"))
    page.click("#generate-btn")
    wait_state(page, "failed")
    page.locator("#draft-box textarea").fill(str(ASSETS / "tiny-eagle1"))  # the page keeps serving
    page.click("#generate-btn")
    wait_state(page, "done")
