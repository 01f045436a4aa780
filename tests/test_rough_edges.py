"""Issue 54's rough edges that need no browser (the page's are in tests/test_browser_public.py): the API's types,
a legacy pickle, Deploy's paths and typo, the benchmark's temporary folder, the gate line, the acceptance counts
and the draft line after settings moved by hand."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
import torch

from eagle_demo.app.api_types import coerce, parse_bool
from eagle_demo.common.config import ConfigError
from eagle_demo.common.paths import ROOT
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET

PROMPT = "def fibonacci(n):\n"


# ---- the API's types -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [("false", False), ("False", False), ("0", False), ("no", False),
                                        ("off", False), ("", False), ("true", True), ("1", True), ("Yes", True),
                                        (True, True), (0, False), (1, True)])
def test_boolean_strings_are_parsed_not_truth_tested(text, value):
    assert parse_bool("chat", text) is value


@pytest.mark.parametrize("name,value,hint,message", [
    ("chat", "maybe", bool, "chat must be true or false, got 'maybe'"),
    ("chat", 2, bool, "chat must be true or false, got 2"),
    ("max_new_tokens", "abc", int, "max_new_tokens must be a whole number, got 'abc'"),
    ("max_new_tokens", 2.5, int, "max_new_tokens must be a whole number, got 2.5"),
    ("max_new_tokens", [1], int, "max_new_tokens must be a whole number, got [1]"),
    ("temperature", "hot", float, "temperature must be a number, got 'hot'"),
    ("depth", "x", int | None, "depth must be a whole number, got 'x'"),
    ("prompt", 12, str, "prompt must be text, got 12"),
])
def test_wrong_types_name_the_parameter(name, value, hint, message):
    with pytest.raises(ConfigError) as err:
        coerce(name, value, hint)
    assert str(err.value) == message


def test_numbers_as_text_are_read():
    assert coerce("max_new_tokens", "12", int) == 12 and coerce("max_new_tokens", 12.0, int) == 12
    assert coerce("temperature", "0.7", float) == 0.7 and coerce("depth", None, int | None) is None


@pytest.fixture(scope="module")
def served():
    from gradio_client import Client

    from eagle_demo.app import REGISTRY
    from test_ui_api import launch

    demo, url = launch(SHIPPED_TARGET, SHIPPED_EAGLE1)
    client = Client(url, verbose=False)
    client.predict(SHIPPED_TARGET, SHIPPED_EAGLE1, "", "auto", "cpu", api_name="/load")
    try:
        yield client
    finally:
        demo.close()
        REGISTRY.clear()


def test_api_wrong_types_get_one_line_and_false_is_false(served):
    from gradio_client.exceptions import AppError

    for kwargs, expected in ((dict(max_new_tokens="lots"), "max_new_tokens must be a whole number, got 'lots'"),
                             (dict(race="perhaps"), "race must be true or false, got 'perhaps'"),
                             (dict(prompt=12), "prompt must be text, got 12"),
                             (dict(temperature="warm"), "temperature must be a number, got 'warm'")):
        with pytest.raises(AppError) as err:
            served.predict(**{"prompt": PROMPT, "max_new_tokens": 8, **kwargs}, api_name="/generate")
        assert str(err.value).strip() == expected
    # the tiny target has no chat template: chat="true" fails as chat, chat="false" runs as plain text
    with pytest.raises(AppError, match="chat template"):
        served.predict(PROMPT, 8, chat="true", api_name="/generate")
    text, stats = served.predict(PROMPT, "8", chat="false", race="false", api_name="/generate")
    assert stats["new_tokens"] == 8 and "baseline_tokens_per_second" not in stats or \
        stats.get("baseline_tokens_per_second") is None
    with pytest.raises(AppError) as err:  # a form event: /load's probe
        served.predict(SHIPPED_TARGET, SHIPPED_EAGLE1, "", "auto", "cpu", "", "sometimes", api_name="/load")
    assert str(err.value).strip() == "probe must be true or false, got 'sometimes'"


# ---- a legacy pickle ----------------------------------------------------------------------------------------------

class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("how", ["torch legacy format", "plain pickle"])
def test_a_legacy_malicious_pickle_is_refused_as_unsafe(tmp_path, how):
    from eagle_demo.checkpoints import CheckpointError, load_pair
    from eagle_demo.checkpoints.errors import CorruptCheckpointError
    from layouts import eagle1_weights, write_vicuna_eagle1

    draft = write_vicuna_eagle1(tmp_path / "d")
    marker = tmp_path / "PWNED"
    state = {k: v for k, v in eagle1_weights().items()}
    state["fc.weight"] = _Payload(str(marker))
    if how == "plain pickle":
        with open(draft / "pytorch_model.bin", "wb") as f:
            pickle.dump(state, f, protocol=4)
    else:
        torch.save(state, draft / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError) as err:
        load_pair(SHIPPED_TARGET, str(draft), device="cpu")
    assert not isinstance(err.value, CorruptCheckpointError), str(err.value)
    assert "refused" in str(err.value) and "corrupt" not in str(err.value).lower(), str(err.value)
    assert not marker.exists()


def test_a_truncated_legacy_file_is_corrupt_not_a_crash(tmp_path):
    from eagle_demo.checkpoints.errors import CorruptCheckpointError
    from eagle_demo.checkpoints.files import scan_weights
    from layouts import eagle1_weights, write_vicuna_eagle1

    draft = write_vicuna_eagle1(tmp_path / "d")
    torch.save(eagle1_weights(), draft / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    data = (draft / "pytorch_model.bin").read_bytes()
    (draft / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptCheckpointError, match="re-download"):
        scan_weights(draft)


# ---- Deploy ---------------------------------------------------------------------------------------------------------

def test_deploy_shows_relative_paths_and_no_typo():
    from eagle_demo.app.deploy_tab import deploy
    from eagle_demo.app.registry import REGISTRY, PairKey

    key = PairKey(SHIPPED_TARGET, SHIPPED_EAGLE1, dtype="float32", device="cpu")  # absolute, as keys hold them
    try:
        REGISTRY.load(key)
        out = deploy(key, "chain", 4, 1, 5, 4)
        text = "\n".join(str(v) for v in out)
        assert str(ROOT) not in text, text
        assert "vllm serve assets/tiny-target" in out.vllm and "--model-path assets/tiny-target" in out.sglang
        assert "earliest earlier" not in text and "assets/tiny-target + assets/tiny-eagle1" in out.message
    finally:
        REGISTRY.clear()


# ---- the benchmark's temporary folder -------------------------------------------------------------------------------

def test_benchmark_files_leave_no_folder_behind(tmp_path):
    """Each write goes to one eagle-bench-* folder of the process (the few latest runs kept); at exit it is gone."""
    code = (
        "import tempfile, pathlib\n"
        f"tempfile.tempdir = {str(tmp_path)!r}\n"
        "from eagle_demo.app.bench_tab import BenchOutputs\n"
        "paths = [BenchOutputs.write(None, None, None, 'a,b', '{}').csv for _ in range(7)]\n"
        "folders = sorted(p.name for p in pathlib.Path(tempfile.gettempdir()).glob('eagle-bench-*'))\n"
        "assert len(folders) == 1, folders\n"
        "assert all(pathlib.Path(p).exists() for p in paths[-4:]) and not pathlib.Path(paths[0]).exists()\n"
        "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]
    assert not list(tmp_path.glob("eagle-bench-*"))  # removed when the process ended


# ---- the gate line --------------------------------------------------------------------------------------------------

def test_the_gate_line_shows_the_threshold_it_used():
    from eagle_demo.decoding.gate import paused_line

    ngram = paused_line(5, 40, 0.0)
    assert "0.00" not in ngram and "break-even" not in ngram and "proposed nothing in 5 of 40" in ngram
    assert "break-even 1.54 (" in paused_line(3, 40, 1.54)
    chain = paused_line(3, 40, 1.54, by_length=(1.1, 1.3, 1.54))
    assert "break-even 1.10-1.54 (by the length the chain drafted)" in chain
    assert paused_line(0, 40, 1.54) == ""


# ---- acceptance by depth --------------------------------------------------------------------------------------------

def test_acceptance_by_depth_shows_counts():
    from eagle_demo.common.config import RunConfig, TreeConfig
    from eagle_demo.decoding.metrics import RunView, depth_counts
    from eagle_demo.session import load_session
    from eagle_demo.view.charts import FEW_ROUNDS, UNREACHED_COLOR, acceptance_depth_figure

    session = load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu")
    view = RunView()
    for event in session.eagle.generate(session.encode(PROMPT), RunConfig(max_new_tokens=40,
                                                                             tree=TreeConfig.chain(10))):
        view.add(event)
    got, tried = depth_counts(view.rounds)
    figure = acceptance_depth_figure(view)
    bar = figure["data"][0] if isinstance(figure, dict) else figure.data[0]
    bar = bar if isinstance(bar, dict) else bar.to_plotly_json()
    assert bar["text"] == [f"{g}/{t}" for g, t in zip(got, tried) if t][:len(bar["text"])]
    assert [c == UNREACHED_COLOR for c in bar["marker"]["color"]] == [t < FEW_ROUNDS for t in tried[:len(bar["text"])]]
    assert list(view.stats().acceptance_by_depth)[:len(bar["y"])] == pytest.approx(bar["y"])


# ---- the draft line after settings moved by hand -------------------------------------------------------------------

def test_draft_line_says_what_runs():
    from eagle_demo.app.autotune import AUTO
    from eagle_demo.app.draft_panel import draft_line, hand_line
    from eagle_demo.app.registry import REGISTRY, PairKey
    from eagle_demo.common.config import TreeConfig, default_tree

    key = PairKey(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu")
    try:
        session = REGISTRY.load(key)
        static = default_tree(session.device.type, session.family)
        from eagle_demo.app.forms import tree_settings

        assert draft_line(AUTO, key, *tree_settings(static)).startswith("auto")  # auto's own settings
        line = draft_line(AUTO, key, *tree_settings(TreeConfig.chain(4)))
        assert line.startswith("runs chain k=4 (settings moved by hand") and "pick the preset auto" in line
        assert "the preset chain-4" in hand_line(TreeConfig.chain(4), key, "chain-4")
    finally:
        REGISTRY.clear()
