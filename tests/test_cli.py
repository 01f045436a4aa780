"""The CLI contract of `python -m eagle_demo generate` and `inspect` (used by outside checks)."""

import json
import os
import subprocess
import sys

import pytest
import torch

from layouts import write_medusa, write_target, write_vicuna_eagle1

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}
TINY = ("--target", "assets/tiny-target")  # the tiny pair, for speed (the default pair has its own tests)


def cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "eagle_demo", *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    target = write_target(root / "target", tokenizer=96)
    draft = write_vicuna_eagle1(root / "draft")
    return str(target), str(draft)


def test_generate_json_contract_and_greedy_equality(pair):
    target, draft = pair
    proc = cli("generate", "--target", target, "--draft", draft, "--prompt-ids", "1,5,9,13", "--max-new-tokens",
               "20", "--ignore-eos", "--depth", "3", "--draft-top-k", "2", "--total-tokens", "8", "--json",
               "--device", "cpu", "--dtype", "float32")
    lines = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    kinds = [e["event"] for e in lines]
    assert kinds[0] == "runstart" and kinds[1] == "prefill" and kinds[-2] == "finish" and kinds[-1] == "summary"
    assert "round" in kinds
    summary = lines[-1]
    for key in ("token_ids", "text", "new_tokens", "rounds", "tau", "decode_seconds", "prefill_seconds", "mode",
                "draft_family"):
        assert key in summary
    assert summary["new_tokens"] == 20 == len(summary["token_ids"])
    assert summary["mode"] == "eagle" and summary["draft_family"] == "eagle1"
    base = cli("generate", "--target", target, "--prompt-ids", "1,5,9,13", "--max-new-tokens", "20",
               "--ignore-eos", "--mode", "baseline", "--json")
    base_summary = json.loads(base.stdout.strip().splitlines()[-1])
    assert base_summary["token_ids"] == summary["token_ids"]
    assert base_summary["tau"] == 1.0 and base_summary["draft_family"] == ""


@pytest.mark.slow
def test_generate_text_prompt_chain_and_sampling(pair):
    target, draft = pair
    proc = cli("generate", "--target", target, "--draft", draft, "--prompt", "t5 t9 t13", "--chain", "3",
               "--max-new-tokens", "12", "--temperature", "0.7", "--top-p", "0.9", "--top-k", "20", "--seed", "3")
    assert proc.stdout.strip() and "tau" in proc.stderr


def test_generate_with_a_repetition_penalty_equals_its_baseline(pair):
    target, draft = pair
    args = ("--prompt-ids", "1,5,9,13", "--max-new-tokens", "20", "--ignore-eos", "--json",
            "--repetition-penalty", "1.4")
    eagle = json.loads(cli("generate", "--target", target, "--draft", draft, "--depth", "3", "--draft-top-k", "2",
                           "--total-tokens", "8", *args).stdout.strip().splitlines()[-1])
    base = json.loads(cli("generate", "--target", target, "--mode", "baseline", *args).stdout.strip().splitlines()[-1])
    plain = json.loads(cli("generate", "--target", target, "--mode", "baseline",
                           *args[:-2]).stdout.strip().splitlines()[-1])
    assert eagle["token_ids"] == base["token_ids"] != plain["token_ids"]


@pytest.mark.parametrize("args,message", [
    (["--prompt-ids", "1,x"], "--prompt-ids must be comma-separated integers"),
    (["--prompt-ids", "1,2", "--repetition-penalty", "0"], "repetition penalty 0.0 is out of range"),
    (["--prompt-ids", "1,2", "--temperature", "-1"], "temperature -1.0 is out of range"),
    (["--prompt-ids", "1,2", "--depth", "0"], "depth 0 is out of range"),
    (["--prompt-ids", "1,2", "--device", "cuda"] if not torch.cuda.is_available() else ["--prompt-ids", "1,999999"],
     "no CUDA GPU is available" if not torch.cuda.is_available() else "outside the target vocabulary"),
    (["--prompt-ids", "1,999999"], "outside the target vocabulary"),
    (["--prompt", "   "], "the prompt is empty"),
    (["--prompt-ids", "1,2", "--chain-stop", "0.5"], "a chain stop applies to chains only"),
])
def test_generate_errors_are_one_line_exit_2(pair, args, message):
    target, draft = pair
    proc = cli("generate", "--target", target, "--draft", draft, *args, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_generate_missing_draft_folder(pair):
    target, _ = pair
    proc = cli("generate", "--target", target, "--draft", "./no/such/folder", "--prompt-ids", "1,2", check=False)
    assert proc.returncode == 2 and "no such folder" in proc.stderr.lower()
    assert len(proc.stderr.strip().splitlines()) == 1


def test_inspect_reports_and_refuses(pair, tmp_path):
    target, draft = pair
    report = json.loads(cli("inspect", "--target", target, "--draft", draft, "--json").stdout)
    assert report["family"] == "eagle1" and report["source_layout"] == "yuhuili-eagle1"
    text = cli("inspect", "--target", target, "--draft", draft).stdout
    assert "eagle1" in text
    medusa = write_medusa(tmp_path / "medusa")
    proc = cli("inspect", "--target", target, "--draft", str(medusa), check=False)
    assert proc.returncode == 2 and "Medusa" in proc.stderr and "Traceback" not in proc.stderr


def test_inspect_eagle3_names_the_convention(tmp_path):
    from layouts import eagle3_weights, write_specforge_eagle3

    target = write_target(tmp_path / "t8", layers=8)
    draft = write_specforge_eagle3(tmp_path / "d3", eagle3_weights())
    report = json.loads(cli("inspect", "--target", str(target), "--draft", str(draft), "--json").stdout)
    assert report["family"] == "eagle3" and report["feature_layers"] == [2, 4, 5]
    assert report["feature_convention"] == "specforge/sglang eagle_config ids +1"


def test_generate_race_reports_speedup_identity_and_why(pair):
    target, draft = pair
    proc = cli("generate", "--target", target, "--draft", draft, "--prompt-ids", "1,5,9,13", "--max-new-tokens",
               "16", "--ignore-eos", "--chain", "3", "--race", "--json")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["identical_to_baseline"] is True and summary["baseline_tokens_per_second"] > 0
    assert summary["speedup"] == pytest.approx(summary["tau"] / summary["round_cost"], rel=1e-3)
    assert summary["why"].startswith(f"{summary['speedup']:.2f}x = tau ")
    text = cli("generate", "--target", target, "--draft", draft, "--prompt-ids", "1,5,9,13", "--max-new-tokens",
               "16", "--chain", "3", "--race", "--temperature", "0.8")
    # sampled in float32: checked against the seeded baseline, as the page and the API do
    assert "[baseline]" in text.stderr and "same as seeded baseline: yes" in text.stderr and "[why]" in text.stderr


def test_generate_static_runs_both_engines_over_fixed_caches_losslessly(pair):
    """--static (CUDA graphs on a GPU, the same fixed-size path eagerly here): greedy output equals plain decoding
    and the run without it, token for token, for a chain and a tree; sampled, it equals the seeded baseline."""
    target, draft = pair
    base = ("generate", "--target", target, "--draft", draft, "--prompt-ids", "1,5,9,13", "--max-new-tokens", "16",
            "--ignore-eos", "--race", "--json", "--device", "cpu", "--dtype", "float32")
    for shape in (("--chain", "3"), ("--depth", "3", "--draft-top-k", "2", "--total-tokens", "6")):
        static = [json.loads(line) for line in cli(*base, *shape, "--static").stdout.strip().splitlines()]
        growing = [json.loads(line) for line in cli(*base, *shape).stdout.strip().splitlines()]
        assert static[0]["event"] == "runstart" and static[0]["static"] is True and growing[0]["static"] is False
        static, growing = static[-1], growing[-1]
        assert static["identical_to_baseline"] is True and static["token_ids"] == growing["token_ids"]
        assert static["rounds"] == growing["rounds"]  # the same drafts accepted round by round
    text = cli("generate", "--target", target, "--draft", draft, "--prompt-ids", "1,5,9,13", "--max-new-tokens",
               "16", "--chain", "3", "--race", "--temperature", "0.8", "--static")
    assert "same as seeded baseline: yes" in text.stderr


def test_doctor_checks_versions_devices_and_the_shipped_pair(tmp_path):
    from eagle_demo.commands.doctor import pinned, version_checks

    proc = cli("doctor", "--device", "cpu", "--pair", "tiny")  # the default pair's run: test_smollm2.py
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("ok    default target: SmolLM2-135M-Instruct (Apache-2.0") for line in lines)
    assert proc.returncode == 0 and all(line.split()[0] in ("ok", "warn") for line in lines)
    assert any(line.startswith("ok    lossless: greedy EAGLE equals plain decoding") for line in lines)
    assert any(line.startswith(("ok    torch:", "warn  torch:")) for line in lines)
    req = tmp_path / "requirements.txt"
    req.write_text("torch==0.0.1\nno-such-package-here==1.0  # comment\n-r other.txt\n", encoding="utf-8")
    assert pinned(req) == {"torch": "0.0.1", "no-such-package-here": "1.0"}
    checks = {c.name: c for c in version_checks(pinned(req))}
    assert checks["torch"].status == "warn" and "pinned 0.0.1" in checks["torch"].detail
    assert checks["no-such-package-here"].status == "FAIL" and "pip install" in checks["no-such-package-here"].detail
    bad = cli("doctor", "--device", "nonsense", check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_generate_without_tree_flags_runs_the_auto_tree_and_prints_its_line(pair, tmp_path):
    """No tree flag: the automatic tree (calibrated once for this pair, then cached); its choice and predicted
    speedup are printed next to the measured one. Which shape it picks does not matter here."""
    target, draft = pair
    env = {**ENV, "EAGLE_DEMO_CACHE": str(tmp_path)}
    args = [sys.executable, "-m", "eagle_demo", "generate", "--target", target, "--draft", draft, "--prompt-ids",
            "1,5,9,13", "--max-new-tokens", "12", "--race", "--device", "cpu"]
    first = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    chosen = [line for line in first.stderr.splitlines() if line.startswith("[auto: ")]
    assert len(chosen) == 2 and "calibrated in" in chosen[0] and "predicted speedup" in chosen[0]
    assert "predicted " in chosen[1] and ", measured " in chosen[1] and "identical to baseline: yes" in first.stderr
    again = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "from the cache" in again.stderr and len(list((tmp_path / "autotree").iterdir())) == 1
    pinned = subprocess.run(args + ["--chain", "3"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert pinned.returncode == 0 and "[auto" not in pinned.stderr  # a tree flag: no auto


def test_generate_a_chain_over_a_hot_vocabulary_and_its_one_line_errors(pair):
    target, draft = pair
    args = ["generate", "--target", target, "--prompt-ids", "1,5,9,13", "--max-new-tokens", "16", "--ignore-eos",
            "--json"]
    hot = json.loads(cli(*args, "--draft", draft, "--chain", "5", "--hot-vocab", "40").stdout.strip().splitlines()[-1])
    base = json.loads(cli(*args, "--mode", "baseline").stdout.strip().splitlines()[-1])
    assert hot["token_ids"] == base["token_ids"] and hot["mode"] == "eagle"
    wide = cli(*args, "--draft", draft, "--chain", "5", "--hot-vocab", "500", check=False)
    assert wide.returncode != 0 and "hot vocabulary 500 is out of range" in wide.stderr
    assert "Traceback" not in wide.stderr
    tree = cli(*args, "--draft", draft, "--depth", "3", "--hot-vocab", "40", check=False)
    assert tree.returncode != 0 and "applies to chains only" in tree.stderr and "Traceback" not in tree.stderr


def test_generate_refuses_a_hot_vocabulary_it_cannot_run_before_any_output():
    """An EAGLE-3 head has its own vocabulary, and a size past the vocabulary fits no head: both fail before the
    prefill's token is printed."""
    for flags, message in ((["--draft", "assets/tiny-eagle3", "--hot-vocab", "100"], "use hot vocabulary 0"),
                           (["--hot-vocab", "100000"], "hot vocabulary 100000 is out of range")):
        proc = cli("generate", *TINY, "--prompt", "def f(", "--chain", "4", *flags, check=False)
        assert proc.returncode == 2 and message in proc.stderr and proc.stdout == "", (flags, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1


def test_the_shipped_target_keeps_its_draft_however_its_folder_is_spelled():
    for spelling in ("assets/tiny-target", "assets/tiny-target/", os.path.join(ROOT, "assets", "tiny-target") + "/"):
        proc = cli("generate", "--target", spelling, "--prompt", "def f(", "--max-new-tokens", "4", "--chain", "2",
                   "--json")
        assert json.loads(proc.stdout.strip().splitlines()[-1])["draft_family"] == "eagle1", spelling


def test_one_new_token_races_without_a_speedup():
    """max new tokens 1: only the prefill's token, so there is no decode time to compare (null, not 0)."""
    proc = cli("generate", *TINY, "--prompt", "def f(", "--max-new-tokens", "1", "--chain", "2", "--race", "--json")
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last["new_tokens"] == 1 and last["speedup"] is None and last["baseline_tokens_per_second"] is None
    text = cli("generate", *TINY, "--prompt", "def f(", "--max-new-tokens", "1", "--race")
    assert "no decode time to compare" in text.stderr and "measured 0.00x" not in text.stderr


def test_plain_decoding_needs_no_room_for_a_tree():
    from eagle_demo.common.config import RunConfig, TreeConfig
    from eagle_demo.session import SHIPPED_TARGET, PromptError, load_session

    session = load_session(SHIPPED_TARGET, device="cpu")
    limit = session.context_limit()
    run = RunConfig(max_new_tokens=8, tree=TreeConfig.chain(7))
    ids = [5] * (limit - 8)
    session.check_length(ids, run, "baseline")  # fits: plain decoding drafts nothing
    with pytest.raises(PromptError, match=r"\+ tree \(8\) exceeds .* \(or draft a smaller tree\)"):
        session.check_length(ids, run)


def test_flags_a_run_does_not_use_are_named_in_a_note():
    from eagle_demo.commands.args import flag_notes
    from eagle_demo.commands.cli import build_parser

    parse = build_parser().parse_args
    quiet = parse(["generate", "--prompt", "x"])
    assert flag_notes(quiet) == []
    notes = flag_notes(parse(["generate", "--prompt-ids", "1,2", "--chat", "--mode", "baseline", "--race",
                              "--chain", "3", "--retune", "--threads", "100000",
                              "--target", "assets/tiny-target", "--revision", "v1"]))
    for words in ("nothing to race", "the draft and the tree flags are not used", "--retune moves the automatic",
                  "--prompt-ids run as given", "--threads 100000 is more than", "--revision names a Hub revision"):
        assert any(words in n for n in notes), words
    proc = cli("generate", *TINY, "--prompt", "def f(", "--mode", "baseline", "--race", "--max-new-tokens", "2")
    assert proc.stderr.startswith("[note] --race races EAGLE against plain decoding")
