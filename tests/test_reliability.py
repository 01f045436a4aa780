"""Bad input never breaks the app: a catalogue of bad inputs through the named API endpoints, each a
one-line error followed by a correct generation; concurrent clients; repeated stops."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from eagle_demo.common.config import RunConfig
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET, load_session
from layouts import eagle1_weights, llama_config, write_json, write_medusa, write_raw_eagle1, write_vicuna_eagle1
from test_ui_api import launch

PROMPT = "def fibonacci(n):\n"


def _shipped_shape() -> dict:
    """The shipped target's shape, read from its config (so a new shipped pair needs no edit here)."""
    cfg = json.loads((Path(SHIPPED_TARGET) / "config.json").read_text())
    return dict(hidden=cfg["hidden_size"], vocab=cfg["vocab_size"], heads=cfg["num_attention_heads"],
                kv=cfg["num_key_value_heads"], inter=cfg["intermediate_size"])


def _compatible(folder, **mutate):
    """An EAGLE-1 draft shaped for the shipped target."""
    shape = _shipped_shape()
    sd = eagle1_weights(**shape)
    for key, value in mutate.items():
        sd[key.replace("__", ".")] = value
    return write_raw_eagle1(folder, sd, llama_config(**shape))


def _bad_drafts(root):
    """(name, draft folder or id, expected fragment or None)."""
    cases = []
    cases.append(("missing folder", str(root / "nope"), "no such folder"))
    cases.append(("invalid repo id", "a/b/c/d", None))
    cases.append(("uncached repo offline", "someone-unknown/not-cached-eagle", "offline"))
    empty = root / "empty"
    empty.mkdir()
    write_json(empty, llama_config())
    cases.append(("no weights", str(empty), "no weight files"))
    notjson = root / "notjson"
    notjson.mkdir()
    (notjson / "config.json").write_text("{not json")
    cases.append(("config not JSON", str(notjson), "not valid JSON"))
    cases.append(("medusa", str(write_medusa(root / "medusa")), "Medusa"))
    cases.append(("full LM as draft", SHIPPED_TARGET, "causal LM"))
    cases.append(("hidden mismatch", str(write_vicuna_eagle1(root / "small")), None))
    hidden = _shipped_shape()["hidden"]
    nan = torch.full((hidden, 2 * hidden), float("nan"))  # [H, 2H] the EAGLE-1 fusion layer
    cases.append(("NaN weights", str(_compatible(root / "nan", fc__weight=nan)), "NaN"))
    trunc = _compatible(root / "trunc")
    data = (trunc / "pytorch_model.bin").read_bytes()
    (trunc / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    cases.append(("truncated bin", str(trunc), None))
    sft = root / "sft"
    sft.mkdir()
    write_json(sft, llama_config(**_shipped_shape()))
    (sft / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    cases.append(("corrupted safetensors", str(sft), None))
    return cases


BAD_GENERATE = [
    ("empty prompt", dict(prompt=""), "empty"),
    ("blank prompt", dict(prompt="  \n\t "), "empty"),
    ("max_new_tokens 0", dict(max_new_tokens=0), "max_new_tokens"),
    ("absurd max_new_tokens", dict(max_new_tokens=10**9), "max_new_tokens"),
    ("negative temperature", dict(temperature=-1.0), "temperature"),
    ("huge temperature", dict(temperature=1e6), "temperature"),
    ("top_p 0", dict(temperature=0.7, top_p=0.0), "top_p"),
    ("top_p 2", dict(temperature=0.7, top_p=2.0), "top_p"),
    ("negative top_k", dict(temperature=0.7, top_k=-5), "top_k"),
    ("negative seed", dict(temperature=0.7, seed=-1), "seed"),
    ("depth 0", dict(depth=0), "depth"),
    ("depth 1000", dict(depth=1000), "depth"),
    ("total tokens 1", dict(total_tokens=1), "total_tokens"),
    ("draft top_k 0", dict(draft_top_k=0), "top_k"),
    ("chain k 0", dict(draft_mode="chain", chain_k=0), "chain"),
    ("chain stop 1.5", dict(draft_mode="chain", chain_k=4, chain_stop=1.5), "chain stop"),
    ("hot vocabulary 1", dict(draft_mode="chain", chain_k=4, hot_vocab=1), "hot vocabulary"),
    ("hot vocabulary past the vocabulary", dict(draft_mode="chain", chain_k=4, hot_vocab=9000), "hot vocabulary"),
    ("hot vocabulary on a tree", dict(draft_mode="tree", depth=3, hot_vocab=512), "hot vocabulary"),
    ("prompt longer than the context", dict(prompt="x = 1\n" * 3000), "context"),
    ("chat template missing", dict(chat=True), "chat template"),
]


@pytest.fixture(scope="module")
def served():
    from gradio_client import Client

    from eagle_demo.app import REGISTRY

    demo, url = launch(SHIPPED_TARGET, SHIPPED_EAGLE1)
    client = Client(url, verbose=False)
    client.predict(SHIPPED_TARGET, SHIPPED_EAGLE1, "", "auto", "cpu", api_name="/load")
    reference = client.predict(PROMPT, 16, api_name="/generate")[1]["token_ids"]
    try:
        yield client, reference
    finally:
        demo.close()
        REGISTRY.clear()


def _still_serving(client, reference):
    _, stats = client.predict(PROMPT, 16, api_name="/generate")
    assert stats["token_ids"] == reference and stats["identical_to_baseline"] is True


def _assert_one_line(err, fragment):
    message = str(err.value).strip()
    assert message and "\n" not in message and "Traceback" not in message, message
    if fragment:
        assert fragment.lower() in message.lower(), message


def test_bad_loads_are_one_liners_and_the_pair_keeps_serving(served, tmp_path):
    from gradio_client.exceptions import AppError

    client, reference = served
    cases = _bad_drafts(tmp_path) + [
        ("float16 on cpu", SHIPPED_EAGLE1, "float16"),
        ("cuda without a GPU", SHIPPED_EAGLE1, "CUDA") if not torch.cuda.is_available() else None,
    ]
    for case in filter(None, cases):
        name, draft, fragment = case
        dtype = "float16" if name == "float16 on cpu" else "auto"
        device = "cuda" if name == "cuda without a GPU" else "cpu"
        with pytest.raises(AppError) as err:
            client.predict(SHIPPED_TARGET, draft, "", dtype, device, api_name="/load")
        _assert_one_line(err, fragment)
        _still_serving(client, reference)
    with pytest.raises(AppError) as err:
        client.predict(str(tmp_path / "no-target"), SHIPPED_EAGLE1, "", "auto", "cpu", api_name="/load")
    _assert_one_line(err, "no such folder")
    _still_serving(client, reference)


@pytest.mark.parametrize("name,overrides,fragment", BAD_GENERATE, ids=[c[0] for c in BAD_GENERATE])
def test_bad_generation_inputs(served, name, overrides, fragment):
    from gradio_client.exceptions import AppError

    client, reference = served
    kwargs = dict(prompt=PROMPT, max_new_tokens=16)
    kwargs.update(overrides)
    with pytest.raises(AppError) as err:
        client.predict(**kwargs, api_name="/generate")
    _assert_one_line(err, fragment)
    _still_serving(client, reference)


def test_unicode_and_control_characters_are_generated_and_escaped(served):
    client, reference = served
    text, stats = client.predict("s = 'héllo ✓ \x07\x1b[31m <b>&amp;</b>'\n", 12, api_name="/generate")
    assert stats["identical_to_baseline"] is True and stats["new_tokens"] >= 1
    _still_serving(client, reference)


def test_eight_concurrent_clients_get_the_same_output_as_alone(served):
    from gradio_client import Client

    client, _ = served
    prompts = ["def fibonacci(n):\n", "class Stack:\n", "import os\n\n", "def read_config(path):\n"]
    alone = {p: client.predict(p, 20, api_name="/generate")[1]["token_ids"] for p in prompts}
    clients = [Client(client.src, verbose=False) for _ in range(8)]

    def work(i):
        out = []
        for j in range(3):
            p = prompts[(i + j) % len(prompts)]
            out.append((p, clients[i].predict(p, 20, api_name="/generate")[1]["token_ids"]))
        return out

    with ThreadPoolExecutor(8) as pool:
        results = [r for chunk in pool.map(work, range(8)) for r in chunk]
    assert len(results) == 24
    assert all(ids == alone[p] for p, ids in results)


def test_twenty_stops_then_correct_generations():
    session = load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu", dtype="float32")
    ids = session.encode(PROMPT)
    run = RunConfig(max_new_tokens=48)
    reference = list(session.stream(ids, run, "baseline"))[-1].token_ids
    for i in range(20):
        stop = threading.Event()
        for event in session.stream(ids, RunConfig(max_new_tokens=400), "eagle", stop):
            if type(event).__name__ == "Round" and event.index == i % 3:
                stop.set()
        assert event.reason == "stopped"
        assert list(session.stream(ids, run, "eagle"))[-1].token_ids == reference


def test_memory_stays_flat_over_repeated_generations():
    """The short variant of scripts/soak.py (100 runs there: +0.00% RSS on the development machine)."""
    import gc

    import psutil

    session = load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu", dtype="float32")
    ids = session.encode(PROMPT)
    run = RunConfig(max_new_tokens=16)
    for _ in range(5):
        list(session.stream(ids, run, "eagle"))
    gc.collect()
    start = psutil.Process().memory_info().rss
    for i in range(30):
        list(session.stream(ids, run, "eagle" if i % 3 else "baseline"))
    gc.collect()
    growth = (psutil.Process().memory_info().rss - start) / start
    assert growth < 0.05, f"RSS grew {growth:.1%}"


def test_load_during_a_generation_waits_and_never_disturbs_it(served):
    from gradio_client import Client

    from eagle_demo.session import SHIPPED_EAGLE3

    client, reference = served
    alone = client.predict(PROMPT, 96, api_name="/generate")[1]["token_ids"]
    other = Client(client.src, verbose=False)
    running = client.submit(PROMPT, 96, api_name="/generate")
    _started(running)  # the Load must come after the generation has its turn, not race it into the queue
    loading = other.submit(SHIPPED_TARGET, SHIPPED_EAGLE3, "", "auto", "cpu", api_name="/load")
    _, report = loading.result(timeout=300)  # queued behind the generation (same concurrency id, limit 1)
    _, stats = running.result(timeout=300)
    assert stats["token_ids"] == alone and stats["identical_to_baseline"] is True
    assert report["family"] == "eagle3"
    client.predict(SHIPPED_TARGET, SHIPPED_EAGLE1, "", "auto", "cpu", api_name="/load")
    _still_serving(client, reference)


def _started(job, timeout: float = 60.0) -> None:
    """Wait until the server runs `job` (or has finished it)."""
    import time

    from gradio_client.utils import Status

    deadline = time.monotonic() + timeout
    while not job.done() and job.status().code not in (Status.PROCESSING, Status.ITERATING, Status.PROGRESS):
        assert time.monotonic() < deadline, f"the job did not start in {timeout:.0f} s: {job.status().code}"
        time.sleep(0.01)


EXIT_SCRIPT = """
import sys, time
from eagle_demo.app import state
from eagle_demo.app.registry import make_key
from eagle_demo.common.config import RunConfig
from eagle_demo.prepare import RunRequest, prepare_run, race_phases
from eagle_demo.session import SHIPPED_EAGLE3, SHIPPED_TARGET
key = make_key(SHIPPED_TARGET, SHIPPED_EAGLE3, None, "float32", "cpu", None)
session = state.ensure(key)
asked = RunRequest("def f(x):\\n", RunConfig(max_new_tokens=1500), race_phases(race=True))
live = state.start_run(key, prepare_run(session, asked))
while not live.snapshot()[0].rounds:
    time.sleep(0.05)
time.sleep(1.0)  # the worker is inside the target's forward now
assert not live.done.is_set(), "the run ended before the interpreter exit it is meant to race"
print("exiting with", [t.name for t in state.WORKERS], flush=True)
"""


def test_exit_with_a_run_going_waits_for_its_worker(tmp_path):
    """A daemon worker still inside torch when the interpreter finalizes aborts the process (status 134,
    "terminate called without an active exception"): exit stops the run and waits for its worker."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert "exiting with ['eagle-run']" in done.stdout, done.stdout + done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "terminate called" not in done.stderr
