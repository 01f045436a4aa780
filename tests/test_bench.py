"""The benchmark CLI on the shipped pair: JSON and CSV with every field, greedy equality with the baseline."""

import csv
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from eagle_demo.bench.run import CATEGORIES, PromptResult, _summary, load_suite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BENCH = [sys.executable, "-m", "eagle_demo", "bench", "--target", "assets/tiny-target"]  # the tiny pair: fast


def test_suite_has_every_category():
    items = load_suite()
    assert {i.category for i in items} == set(CATEGORIES)
    assert len({i.id for i in items}) == len(items)


@pytest.mark.slow
def test_bench_cli_writes_json_and_csv(tmp_path):
    out_json, out_csv = tmp_path / "bench.json", tmp_path / "bench.csv"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*BENCH, "--categories", "code", "--limit", "2",
                           "--max-new-tokens", "24", "--json", str(out_json), "--csv", str(out_csv)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "overall" in proc.stdout
    report = json.loads(out_json.read_text())
    assert (report["overall"]["prompts"] == 2 and report["overall"]["runs"] == 2
            and report["overall"]["all_equal"] is True)
    assert report["settings"]["draft_family"] == "eagle1" and report["machine"]["torch"]
    assert report["settings"]["attention"] == "sdpa_grouped_cpu"  # the shipped target's, as the loader set it
    row = report["results"][0]
    for key in ("id", "category", "new_tokens", "rounds", "tau", "eagle_tokens_per_second",
                "baseline_tokens_per_second", "speedup", "acceptance_by_depth", "equal_to_baseline", "round_cost"):
        assert key in row
    assert all(r["equal_to_baseline"] for r in report["results"])
    assert all(abs(r["tau"] / r["round_cost"] - r["speedup"]) < 1e-9 for r in report["results"])
    assert report["categories"][0]["category"] == "code"
    assert "most frequent misses" in proc.stdout or "missed nowhere" in proc.stdout
    for m in report["extra"]["top_misses"]:
        assert set(m) == {"draft_id", "target_id", "draft", "target", "count"} and m["draft_id"] != m["target_id"]
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 2 and rows[0]["equal_to_baseline"] == "True" and float(rows[0]["tau"]) >= 1.0


@pytest.mark.slow
def test_bench_cli_compares_drafts_on_one_target(tmp_path):
    out_json, out_csv = tmp_path / "cmp.json", tmp_path / "cmp.csv"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*BENCH, "--categories", "code", "--limit", "1",
                           "--max-new-tokens", "16", "--chain", "3", "--compare-draft", "assets/tiny-eagle3",
                           "--json", str(out_json), "--csv", str(out_csv)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-2:]
    assert last[0].startswith("tiny-eagle1") and last[1].startswith("tiny-eagle3")
    reports = json.loads(out_json.read_text())["drafts"]
    assert [r["settings"]["draft_family"] for r in reports] == ["eagle1", "eagle3"]
    assert all(r["overall"]["all_equal"] is True for r in reports)
    rows = list(csv.DictReader(out_csv.open()))
    assert [r["draft"] for r in rows] == ["tiny-eagle1", "tiny-eagle3"] and rows[1]["category"] == "code"


@pytest.mark.slow
def test_bench_cli_sweeps_temperatures(tmp_path):
    out_json = tmp_path / "sweep.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*BENCH, "--categories", "code", "--limit", "1",
                           "--max-new-tokens", "16", "--chain", "3", "--temperatures", "0", "0.8",
                           "--json", str(out_json)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(out_json.read_text())["temperatures"]
    assert [r["settings"]["temperature"] for r in reports] == [0.0, 0.8]
    assert all(r["results"][0]["equal_to_baseline"] is True for r in reports)  # float32: seeded baseline too
    assert proc.stdout.strip().splitlines()[-1].startswith("0.8")
    both = subprocess.run([*BENCH, "--temperatures", "0", "--compare-draft",
                           "assets/tiny-eagle3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert both.returncode == 2 and "one at a time" in both.stderr


def _row(pid: str, repeat: int, eagle: float, base: float) -> PromptResult:
    return PromptResult(id=pid, category="code", repeat=repeat, prompt_tokens=5, new_tokens=10, rounds=4, tau=2.5,
                        eagle_tokens_per_second=eagle, baseline_tokens_per_second=base, speedup=eagle / base,
                        acceptance_by_depth=(0.5,), draft_seconds=0.0, verify_seconds=0.0, host_seconds=0.0,
                        equal_to_baseline=True)


def test_summary_counts_prompts_and_runs_and_takes_the_ratio_of_means():
    rows = [_row("a", 0, 300.0, 100.0), _row("a", 1, 100.0, 100.0), _row("b", 0, 200.0, 200.0)]
    s = _summary("code", rows)
    assert (s.prompts, s.runs) == (2, 3)
    assert abs(s.speedup - 200.0 / (400.0 / 3)) < 1e-9  # Spec-Bench: mean EAGLE tok/s over mean baseline tok/s
    assert s.all_equal is True
    # round cost pooled: mean round time (10 committed tokens over 4 rounds per run) over mean step time
    round_s = (10 / 300 + 10 / 100 + 10 / 200) / 12
    step_s = (10 / 100 + 10 / 100 + 10 / 200) / 30
    assert abs(s.round_cost - round_s / step_s) < 1e-9
    assert min(r.tau / r.speedup for r in rows) <= s.round_cost <= max(r.tau / r.speedup for r in rows)


@pytest.mark.slow
def test_bench_cli_reports_the_auto_choice_next_to_the_measured_speedup(tmp_path):
    out_json = tmp_path / "auto.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "EAGLE_DEMO_CACHE": str(tmp_path)}
    proc = subprocess.run([*BENCH, "--categories", "code", "--limit", "1",
                           "--max-new-tokens", "16", "--json", str(out_json)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out_json.read_text())
    auto = report["extra"]["auto"]
    assert set(auto) == {"tree", "predicted_tau", "predicted_round_cost", "predicted_speedup", "measured_speedup"}
    assert report["settings"]["tree"] == auto["tree"] and auto["measured_speedup"] == report["overall"]["speedup"]
    header = proc.stdout.splitlines()[0]
    assert header.startswith(f"auto: {auto['tree']}, ") and f"predicted {auto['predicted_speedup']:.2f}x" in header
    assert f"measured {auto['measured_speedup']:.2f}x" in header


def test_tau_over_a_category_is_pooled_over_its_rounds():
    """tau = committed tokens / rounds over all the category's runs, as the metric is defined (a mean of the
    per-prompt taus would weigh a short run that loops like a long one)."""
    short = dataclasses.replace(_row("a", 0, 300.0, 100.0), rounds=1, tau=8.0)
    s = _summary("code", [_row("b", 0, 200.0, 100.0), short])  # 4 rounds x 2.5 and 1 round x 8
    assert abs(s.tau - (10 + 8) / 5) < 1e-9


@pytest.mark.slow
def test_bench_cli_refuses_bad_counts_and_suites_before_loading(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    empty = tmp_path / "suite.jsonl"
    empty.write_text('{"id": "a", "category": "code", "prompt": "  "}\n')
    cases = [(["--repeats", "0"], "--repeats must be at least 1"), (["--limit", "0"], "--limit must be at least 1"),
             (["--suite", str(tmp_path / "none.jsonl")], "does not exist"),
             (["--categories", "poetry"], "unknown categories ['poetry']"),
             (["--suite", str(empty)], "suite.jsonl:1 has an empty prompt")]
    for flags, message in cases:
        proc = subprocess.run([sys.executable, "-m", "eagle_demo", "bench", "--target", str(tmp_path / "no-model"),
                               *flags], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        # the target does not exist: an error about it would mean the model was loaded first
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"error: {proc.stderr[7:].strip()}"]
        assert message in proc.stderr and "Error:" not in proc.stderr, (flags, proc.stderr)


def test_compared_drafts_drop_a_hot_vocabulary_only_where_the_head_has_its_own(tmp_path):
    """The page's benchmark runs the Playground's tree for every compared draft: an EAGLE-3 head (own vocabulary)
    runs it without the hot vocabulary, and its report's tree says so."""
    from eagle_demo.bench.run import compare_drafts
    from eagle_demo.common.config import RunConfig, TreeConfig
    from eagle_demo.session import SHIPPED_EAGLE3, SHIPPED_TARGET, load_session

    session = load_session(SHIPPED_TARGET, device="cpu")
    items = load_suite(None, ["code"])[:1]
    run = RunConfig(max_new_tokens=12, tree=TreeConfig.chain(4, 0.0, 512))
    reports = compare_drafts([session, session.with_draft(SHIPPED_EAGLE3)], items, run)
    assert [r.settings["tree"] for r in reports] == [run.tree.label(), TreeConfig.chain(4).label()]
    assert all(r.overall.all_equal for r in reports)


@pytest.mark.slow
def test_bench_cli_compares_drafts_each_at_its_own_automatic_tree(tmp_path):
    out_json = tmp_path / "cmp.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "EAGLE_DEMO_CACHE": str(tmp_path)}
    proc = subprocess.run([*BENCH, "--categories", "code", "--limit", "1",
                           "--max-new-tokens", "16", "--compare-draft", "assets/tiny-eagle3", "--json", str(out_json)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    reports = json.loads(out_json.read_text())["drafts"]
    assert [r["settings"]["draft_family"] for r in reports] == ["eagle1", "eagle3"]
    autos = [r["extra"]["auto"] for r in reports]  # each calibrated for its own head
    assert [a["tree"] for a in autos] == [r["settings"]["tree"] for r in reports]
    assert "first" not in reports[1]["settings"]["tree"]  # no hot vocabulary for the EAGLE-3 head
    assert proc.stderr.count("[auto: ") == 2 and all(r["overall"]["all_equal"] for r in reports)
