"""The Diagnose tab in a real headless Chromium (issue 45): after a Generate on the shipped pair, acceptance by
position and by kind of text, every shape replayed on the run's text as a heatmap, and "use this shape", which
moves the Playground's draft settings and the Deploy tab's commands.

EAGLE_DEMO_SCREENSHOTS=1 also saves docs/screenshots/diagnose.png and deploy-shape.png.
"""

from __future__ import annotations

import os
from pathlib import Path

from test_browser import PLOT_POINTS, app_url, browser, page, set_number, wait_state  # noqa: F401 (fixtures)
from test_ui_api import CODE_PROMPT

DOCS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def test_diagnose_shows_where_acceptance_falls_and_the_shapes_and_uses_one(page):  # noqa: F811
    page.click("#load-btn")
    page.wait_for_selector("#auto-tree :text('predicted speedup')")  # the costs the explorer's speedups need
    page.locator("#prompt-box textarea").fill(CODE_PROMPT)
    set_number(page, "max-new", 96)
    page.click("#generate-btn")
    wait_state(page, "done")

    page.get_by_role("tab", name="Diagnose").click()
    page.click("#diagnose-btn")
    page.wait_for_selector("#diagnose-msg :text('rounds.')")
    message = page.locator("#diagnose-msg").inner_text()
    assert "best on this text: " in message and "replayed tau" in message and "known error" in message
    assert page.evaluate(PLOT_POINTS, "plot-position") > 0 and page.evaluate(PLOT_POINTS, "plot-shapes") > 0
    marks = page.evaluate("() => document.querySelector('#plot-shapes .js-plotly-plot').data.map(t => t.name)")
    assert {"tau", "predicted speedup", "best"} <= set(marks)
    assert page.locator("#kind-table tbody tr").count() >= 1
    picked = page.locator("#shape-pick input").input_value()
    assert "(best)" in picked or "(ran)" in picked
    if os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        page.locator("#diagnose-msg").scroll_into_view_if_needed()
        page.screenshot(path=str(DOCS / "diagnose.png"), full_page=True)

    page.click("#use-shape-btn")
    page.wait_for_selector("#shape-flags :text('SGLang')")
    flags = page.locator("#shape-flags").inner_text()
    steps = flags.split("--speculative-num-steps ")[1].split()[0]
    page.get_by_role("tab", name="Deploy").click()
    page.wait_for_function(f"() => document.querySelector('#sglang-cmd').innerText.includes("
                           f"'--speculative-num-steps {steps} ')")
    assert page.get_by_text("vLLM's tree is static").count() + page.get_by_text('{"num_speculative_tokens"').count() > 0
    page.wait_for_function("() => document.querySelector('#vllm-ngram-cmd').innerText.includes('ngram')")
    ngram = page.locator("#vllm-ngram-cmd").inner_text()  # the target with the n-gram draft, the race's settings
    assert '"method": "ngram", "num_speculative_tokens": 10, "prompt_lookup_max": 2, "prompt_lookup_min": 1' in ngram
    assert "--speculative-algorithm NGRAM" in page.locator("#sglang-ngram-cmd").inner_text()
    assert "Not in either engine" in page.locator("#ngram-notes").inner_text()
    if os.environ.get("EAGLE_DEMO_SCREENSHOTS") == "1":
        page.screenshot(path=str(DOCS / "deploy-shape.png"), full_page=True)
