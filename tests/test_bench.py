"""The benchmark CLI on the shipped pair: JSON and CSV with every field, greedy equality with the baseline."""

import csv
import json
import os
import subprocess
import sys

from eagle_demo.bench import CATEGORIES, load_suite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_suite_has_every_category():
    items = load_suite()
    assert {i.category for i in items} == set(CATEGORIES)
    assert len({i.id for i in items}) == len(items)


def test_bench_cli_writes_json_and_csv(tmp_path):
    out_json, out_csv = tmp_path / "bench.json", tmp_path / "bench.csv"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", "bench", "--categories", "code", "--limit", "2",
                           "--max-new-tokens", "24", "--json", str(out_json), "--csv", str(out_csv)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "overall" in proc.stdout
    report = json.loads(out_json.read_text())
    assert report["overall"]["prompts"] == 2 and report["overall"]["all_equal"] is True
    assert report["settings"]["draft_family"] == "eagle1" and report["machine"]["torch"]
    row = report["results"][0]
    for key in ("id", "category", "new_tokens", "rounds", "tau", "eagle_tokens_per_second",
                "baseline_tokens_per_second", "speedup", "acceptance_by_depth", "equal_to_baseline"):
        assert key in row
    assert all(r["equal_to_baseline"] for r in report["results"])
    assert report["categories"][0]["category"] == "code"
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 2 and rows[0]["equal_to_baseline"] == "True" and float(rows[0]["tau"]) >= 1.0
