"""The page's three-way race (EAGLE, the n-gram draft, plain decoding) and the divergence explainer in a real
headless Chromium, on the shipped pair. EAGLE_DEMO_SCREENSHOTS=1 also saves assets/screenshots/race_ngram.png and
divergence.png."""

from __future__ import annotations

import os

import eagle_demo.decoding.engine as engine_mod
from fixtures import accept_every_draft
from test_browser import SHOTS, app_url, browser, page, set_number, wait_state  # noqa: F401,F811 (fixtures)
from test_ui_api import CODE_PROMPT

NAMES = "() => document.querySelector('#plot-time .js-plotly-plot').data.map(t => t.name)"


def _generate(page, ngram: bool) -> str:
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    box = page.locator("#race-ngram-box input")
    if box.is_checked() != ngram:
        box.click()
    set_number(page, "max-new", 64)
    page.click("#generate-btn")
    wait_state(page, "done")
    return page.locator("#eagle-stats").inner_text()


def test_the_race_shows_eagle_ngram_and_plain_on_one_chart_and_one_strip(page):
    stats = _generate(page, ngram=True)
    assert "N-GRAM TOK/S" in stats.upper() and "N-GRAM IDENTICAL" in stats.upper()
    assert page.locator("#eagle-stats .stat.ngram").count() >= 3
    assert page.locator("#eagle-stats .stat-diverge").count() == 0  # lossless: nothing to explain
    assert page.evaluate(NAMES) == ["EAGLE", "n-gram draft", "baseline (plain decoding)"]
    if os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#eagle-stats").screenshot(path=str(SHOTS / "race_strip.png"))
        page.locator("#plot-time").screenshot(path=str(SHOTS / "race_ngram.png"))


def test_a_broken_verifier_is_explained_as_a_defect_on_the_page(page, monkeypatch):
    """The negative control on the page: a verifier that accepts every draft token splits from plain decoding, and
    the strip names the position, both tokens, both gaps and calls it a defect."""
    monkeypatch.setattr(engine_mod, "verify_tree", accept_every_draft)
    stats = _generate(page, ngram=False)
    line = page.locator('#eagle-stats .stat-diverge[data-kind="defect"]')
    assert line.count() == 1 and "NO" in stats
    text = line.inner_text()
    assert "first difference at new token" in text and "top-2 gap" in text and "this is a defect" in text
    if os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1":
        page.locator("#eagle-stats").screenshot(path=str(SHOTS / "divergence.png"))
