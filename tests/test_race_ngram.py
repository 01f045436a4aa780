"""EAGLE, the n-gram draft and plain decoding in one race: the page's strip, chart and stats, `/generate`'s
"race" and "divergence" blocks (the explainer shown where a racer's output differs)."""

from __future__ import annotations

import pytest

import eagle_demo.decoding.engine as engine_mod
from eagle_demo.app.registry import REGISTRY, make_key
from eagle_demo.app.state import start_run
from eagle_demo.common.config import RunConfig
from eagle_demo.prepare import RunRequest, prepare_run, race_phases
from eagle_demo.race.racers import race_all, race_table, short_labels
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET
from eagle_demo.view.charts import tokens_time_figure
from eagle_demo.view.stats import stats_html, summary
from fixtures import accept_every_draft
from test_ui_api import CODE_PROMPT, app  # noqa: F401 (the launched app fixture)


@pytest.fixture(scope="module")
def shipped():
    key = make_key(SHIPPED_TARGET, SHIPPED_EAGLE1)
    session = REGISTRY.load(key)
    yield key, session
    REGISTRY.clear()


def _race(key, session, ngram=True, n=48):
    asked = RunRequest(CODE_PROMPT, RunConfig(max_new_tokens=n), race_phases(race=True, ngram=ngram))
    live = start_run(key, prepare_run(session, asked))
    live.done.wait()
    assert live.error is None
    return live


def test_the_page_races_three_decoders_on_one_chart_and_one_strip(shipped):
    key, session = shipped
    live = _race(key, session)
    eagle, baseline, _ = live.snapshot()
    ngram = live.ngram_snapshot()
    assert ngram is not None and ngram.done and ngram.start.mode == "ngram"
    s = summary(eagle, baseline, True, ngram=ngram, decode=session.decode)
    race = s["race"]
    assert set(race) == {"eagle", "ngram", "baseline"} and s["divergence"] is None
    assert race["ngram"]["identical_to_baseline"] is True and race["eagle"]["identical_to_baseline"] is True
    assert race["ngram"]["draft"] == "n-gram 1..2, up to 10 tokens, 2 branches, repeating, by count, weak matches 2"
    assert race["ngram"]["speedup"] > 0
    names = [t["name"] for t in tokens_time_figure(eagle, baseline, ngram).data]
    assert names == ["EAGLE", "n-gram draft", "baseline (plain decoding)"]
    racers = race_all({"eagle": eagle.events, "ngram": ngram.events, "baseline": baseline.events}, True)
    table = race_table(racers, short_labels(RunConfig(max_new_tokens=48))).splitlines()
    assert [line.split()[0] for line in table] == ["decoder", "EAGLE", "n-gram", "plain"]
    assert table[2].startswith("n-gram   n-gram 1..2 x10 ") and max(map(len, table)) <= 80
    assert "n-gram 1..2, up to 10 tokens" in race_table(racers)  # without short labels, the racers' own
    html = stats_html(eagle, baseline, True, live.state, ngram=ngram, decode=session.decode)
    assert "n-gram tok/s" in html and "n-gram identical" in html and "stat-diverge" not in html


def test_a_broken_verifier_shows_its_divergence_as_a_defect_on_the_strip(shipped, monkeypatch):
    key, session = shipped

    monkeypatch.setattr(engine_mod, "verify_tree", accept_every_draft)
    live = _race(key, session, ngram=False)
    eagle, baseline, _ = live.snapshot()
    s = summary(eagle, baseline, True, decode=session.decode)
    d = s["divergence"]
    assert s["identical_to_baseline"] is False and d["kind"] == "defect"
    assert d["baseline_token"] == session.decode([d["baseline_id"]]) and "please report it" in d["line"]
    html = stats_html(eagle, baseline, True, live.state, decode=session.decode)
    assert 'class="stat-diverge" data-kind="defect"' in html


def test_generate_api_races_the_ngram_draft_too(app):  # noqa: F811
    client, _, _ = app
    text, stats = client.predict(CODE_PROMPT, 40, race_ngram=True, api_name="/generate")
    race = stats["race"]
    assert set(race) == {"eagle", "ngram", "baseline"} and stats["divergence"] is None
    assert race["ngram"]["identical_to_baseline"] is True and race["ngram"]["tokens_per_second"] > 0
    _, plain = client.predict(CODE_PROMPT, 40, api_name="/generate")
    assert "race" not in plain and plain["divergence"] is None


def test_the_page_races_the_ngram_draft_at_its_settings_and_refuses_bad_ones_in_one_line(app):  # noqa: F811
    """The Playground's n-gram settings (the accordion's five inputs, last in /generate_stream's inputs) reach the
    race: tokens 3 and one branch cap every round's proposal at 3 tokens, and the output stays the baseline's. A bad
    setting fails the run with one line naming the field and the fix."""
    import gradio as gr

    from eagle_demo.app import TREE_MODE
    from eagle_demo.app.forms import make_ngram
    from eagle_demo.decoding.events import Round
    from eagle_demo.decoding.metrics import RunView
    from test_ui_api import _generate_stream_fn

    _, target, draft = app
    fn = _generate_stream_fn(target, draft)
    head = (target, draft, "", "auto", "cpu", "", CODE_PROMPT, False, 48, 0.0, 1.0, 0, 0, TREE_MODE, 5, 4, 16, 4, 0.0,
            0, True, True, False, 1.0, True)
    *_, out = fn.fn(*head, 1, 2, 3, 1, False)
    stats, result = out[9], out[10]
    race = stats["race"]["ngram"]
    assert race["draft"] == make_ngram(1, 2, 3, 1).label() == "n-gram 1..2, up to 3 tokens, repeating, by count, " \
        "weak matches 2" and race["identical_to_baseline"] is True
    proposed = [len(ev.nodes) - 1 for ev in RunView.of(result["ngram"]).events if isinstance(ev, Round)]
    assert max(proposed) == 3  # the cap, reached (the defaults propose up to 10 on this prompt's repeats)
    for bad, line in (((3, 2, 10, 2), "n-gram min 3 is above n-gram max 2; use min <= max"),
                      ((1, 2, 0, 2), "n-gram tokens 0 is out of range; use 1 to 32"),
                      ((1, 2, None, 2), "n-gram tokens must be a whole number from 1 to 32, got None")):
        with pytest.raises(gr.Error) as err:
            list(fn.fn(*head, *bad, False))
        assert err.value.message == line


def test_generate_api_takes_the_ngram_settings_and_keeps_its_defaults(app):  # noqa: F811
    client, _, _ = app
    _, stats = client.predict(CODE_PROMPT, 40, race_ngram=True, ngram_max=3, ngram_tokens=4, ngram_branches=5,
                              ngram_transformers=True, api_name="/generate")
    race = stats["race"]["ngram"]  # transformers' rule: one branch whatever branches says
    assert race["draft"] == "n-gram 1..3, up to 4 tokens" and race["identical_to_baseline"] is True
    with pytest.raises(Exception, match="n-gram branches 9 is out of range; use 1 to 8"):
        client.predict(CODE_PROMPT, 8, race_ngram=True, ngram_branches=9, api_name="/generate")
    info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]["/generate"]["parameters"]
    defaults = {p["parameter_name"]: p["parameter_default"] for p in info if p["parameter_name"].startswith("ngram")}
    assert defaults == {"ngram_min": 1, "ngram_max": 2, "ngram_tokens": 10, "ngram_branches": 2,
                        "ngram_transformers": False}


def _cli(*args):
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc, (json.loads(proc.stdout.strip().splitlines()[-1]) if "--json" in args else None)


def test_cli_races_three_decoders_in_one_table():
    proc, s = _cli("generate", "--target", SHIPPED_TARGET, "--draft", SHIPPED_EAGLE1, "--prompt", CODE_PROMPT,
                   "--max-new-tokens", "32", "--chain", "5", "--race", "ngram", "--ngram-max", "3",
                   "--ngram-transformers", "--json")
    assert set(s["race"]) == {"eagle", "ngram", "baseline"} and s["identical_to_baseline"] is True
    assert s["race"]["ngram"]["identical_to_baseline"] is True and s["divergence"] is None
    assert s["race"]["ngram"]["draft"] == "n-gram 1..3, up to 10 tokens"


def test_cli_race_table_shows_short_draft_labels_and_the_settings_in_full_below():
    proc, _ = _cli("generate", "--target", SHIPPED_TARGET, "--draft", SHIPPED_EAGLE1, "--prompt", CODE_PROMPT,
                   "--max-new-tokens", "16", "--chain", "5", "--race", "ngram")
    lines = proc.stderr.splitlines()
    rows = {line.split()[0]: line for line in lines[lines.index(next(x for x in lines if x.startswith("decoder"))):]}
    assert rows["EAGLE"].startswith("EAGLE    chain 5 ") and rows["n-gram"].startswith("n-gram   n-gram 1..2 x10 ")
    assert "[draft: n-gram] n-gram 1..2, up to 10 tokens, 2 branches, repeating, by count, weak matches 2" in lines
    assert "[draft: EAGLE] chain k=5" in lines


def test_the_ngram_draft_runs_on_a_target_without_a_head_and_benches_beside_eagle(shipped):
    from eagle_demo.bench.run import category_table, load_suite, run_bench
    from eagle_demo.session import load_session

    headless = load_session(SHIPPED_TARGET, draft=None)
    assert headless.eagle is None
    ids = headless.encode(CODE_PROMPT)
    run = RunConfig(max_new_tokens=32)
    ngram = list(headless.stream(ids, run, "ngram"))
    assert ngram[-1].token_ids == list(headless.stream(ids, run, "baseline"))[-1].token_ids
    _, session = shipped
    items = load_suite(categories=["code"])[:1]
    reports = [run_bench(session, items, RunConfig(max_new_tokens=16)),
               run_bench(session, items, RunConfig(max_new_tokens=16), racer="ngram")]
    assert reports[1].settings["draft"] == "n-gram" and reports[1].overall.all_equal is True
    table = category_table(reports)
    assert table.splitlines()[0].split()[-2:] == ["n-gram", "plain"] and table.splitlines()[1].startswith("code")


def test_the_benchmark_tab_runs_the_ngram_draft_beside_the_head(app):  # noqa: F811
    import json
    from pathlib import Path

    from eagle_demo.app import CHAIN_MODE

    client, target, draft = app
    table, _plot, _missed, _csv, json_path = client.predict(
        target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0, 0, "ngram",
        "", 1.0, 0, 0, api_name="/benchmark")
    reports = json.loads(Path(json_path).read_text(encoding="utf-8"))["drafts"]
    assert [r["settings"]["draft_family"] for r in reports] == ["eagle1", "ngram"]
    assert all(r["overall"]["all_equal"] is True for r in reports)
    rows = table["data"] if isinstance(table, dict) else table
    assert [r[0] for r in rows][-2:] == ["n-gram", "n-gram"]
