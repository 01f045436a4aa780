"""Repo ids through a real Hub-compatible server on loopback: olah 0.5.4 (its own venv, built once by
scripts/hub_mirror.py) serving git repos of the shipped pair (hub_mirror.build_repos) and of the layouts the file
selection must handle (hub_layouts.build_layouts: both weight formats, an index with an extra file, an index that
escapes the repo, names outside the top level, no weights, no top-level config, a bare legacy name, a dataset), with
huggingface_hub's real client talking HTTP to it, through /load, the CLI and hub.resolve itself. Faults come from
a loopback TCP relay in front of olah (a cut after N bytes, a byte-rate limit), a closed loopback port (a real
refused connection) and a cache folder that cannot be created, never from a hand-written Hub API. olah is started
once for the module. It cannot send 403/gated, disabled, RevisionNotFound or 5xx answers offline (its deny rule and
a bad revision both answer 401, as the Hub does for a private repo without a token): test_hub.py unit-tests our
message for each from huggingface_hub's own exception for that HTTP answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub import constants as hub_constants

from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET
from test_ui_api import launch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import hub_layouts  # noqa: E402
import hub_mirror  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "def fibonacci(n):\n"
TARGET, DRAFT = "local/tiny-target", "local/tiny-eagle1"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """olah on loopback behind a relay; huggingface_hub pointed at the relay, online, with its own cache."""
    root = tmp_path_factory.mktemp("hub")
    repos = hub_mirror.build_repos(root)
    hub_layouts.build_layouts(repos.mirrors)
    server = hub_mirror.Olah(repos, root / "olah").start()
    relay = hub_mirror.Relay(server.port).up()
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("HF_HUB_OFFLINE", raising=False)
        mp.setattr(hub_constants, "HF_HUB_OFFLINE", False)
        mp.setattr(hub_constants, "ENDPOINT", relay.url)  # what HF_ENDPOINT sets at import
        mp.setattr(hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE", relay.url + "/{repo_id}/resolve/{revision}/{filename}")
        mp.setattr(hub_constants, "HF_HUB_CACHE", str(root / "hf-cache"))
        try:
            yield SimpleNamespace(root=root, repos=repos, server=server, relay=relay)
        finally:
            relay.down()
            server.stop()


@pytest.fixture(scope="module")
def app(mirror):
    """The app (default pair: the shipped local folders) and the local folders' reference tokens."""
    from gradio_client import Client

    from eagle_demo.app import REGISTRY

    demo, url = launch(SHIPPED_TARGET, SHIPPED_EAGLE1)
    client = Client(url, verbose=False)
    try:
        yield SimpleNamespace(client=client, reference=load_and_generate(client, SHIPPED_TARGET, SHIPPED_EAGLE1))
    finally:
        demo.close()
        REGISTRY.clear()


@pytest.fixture
def fresh_cache(mirror, tmp_path, monkeypatch):
    """An empty HF cache for this test; the relay without faults; no pair loaded (a Load reads the cache)."""
    from eagle_demo.app import REGISTRY

    REGISTRY.clear()
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    mirror.relay.cut_after, mirror.relay.rate = None, None
    yield tmp_path / "hf-cache"
    mirror.relay.cut_after, mirror.relay.rate = None, None
    if mirror.relay._listener is None:
        mirror.relay.up()


def load_and_generate(client, target: str, draft: str, revision: str = "", draft_revision: str = "") -> list[int]:
    client.predict(target, draft, revision, "auto", "cpu", draft_revision, api_name="/load")
    return client.predict(PROMPT, 16, depth=3, api_name="/generate")[1]["token_ids"]


def refused(client, *args) -> str:
    """The one-line message of a /load that fails; the page then still generates."""
    from gradio_client.exceptions import AppError

    padded = list(args) + [""] * (3 - len(args))
    with pytest.raises(AppError) as err:
        client.predict(*padded[:3], "auto", "cpu", *padded[3:], api_name="/load")
    message = str(err.value).strip()
    assert message and "\n" not in message and "Traceback" not in message, message
    return message


def still_serves(app) -> None:
    assert load_and_generate(app.client, SHIPPED_TARGET, SHIPPED_EAGLE1) == app.reference


def cached(cache: Path, repo: str) -> dict[str, int]:
    """{file: size} of the repo's snapshot files in the cache, plus "*.incomplete" parts by blob name."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    out = {p.name: p.stat().st_size for p in folder.glob("snapshots/*/*") if p.exists()}
    out.update({p.name: p.stat().st_size for p in folder.glob("blobs/*.incomplete")})
    return out


# ---- the happy path and revisions --------------------------------------------------------------------------------

def test_repo_ids_load_and_generate_as_the_local_folders(app, mirror, fresh_cache):
    assert load_and_generate(app.client, TARGET, DRAFT) == app.reference  # no revision: the default branch "main"
    assert cached(fresh_cache, TARGET) == {p.name: p.stat().st_size for p in Path(SHIPPED_TARGET).iterdir()}
    assert cached(fresh_cache, DRAFT) == {p.name: p.stat().st_size for p in Path(SHIPPED_EAGLE1).iterdir()}
    assert load_and_generate(app.client, "local/sharded-target", DRAFT) == app.reference
    assert sorted(cached(fresh_cache, "local/sharded-target"))[:3] == [
        "config.json", "generation_config.json", "model-00001-of-00002.safetensors"]


def test_revisions_by_branch_tag_and_commit(app, mirror, fresh_cache):
    perturbed = load_and_generate(app.client, str(mirror.repos.perturbed), SHIPPED_EAGLE1)
    assert perturbed != app.reference  # the branch's commit changed a weight file
    assert load_and_generate(app.client, TARGET, DRAFT, "perturbed") == perturbed
    assert load_and_generate(app.client, TARGET, DRAFT, "v1.0") == app.reference
    assert load_and_generate(app.client, TARGET, DRAFT, mirror.repos.first_commit, "main") == app.reference
    message = refused(app.client, TARGET, DRAFT, "v9")
    assert message == ("revision 'v9' does not exist in local/tiny-target (branches: main, perturbed; tags: v1.0); "
                       "check the branch, tag or commit")
    still_serves(app)


@pytest.mark.parametrize("target,draft,expected", [
    ("local/nope", DRAFT, "target local/nope was not found on the Hub (or it is private: log in with hf auth login); "
                          "check the repo id"),
    (TARGET, "local/refused", "draft local/refused was not found on the Hub (or it is private: log in with hf auth "
                              "login); check the repo id"),
    ("local/missing-shard", DRAFT, "target local/missing-shard: model.safetensors.index.json names "
                                   "model-00002-of-00002.safetensors, which the repo does not have (an incomplete "
                                   "upload); pick another revision or ask the repo's owner to add it"),
], ids=["missing repo", "refused repo (401)", "missing file"])
def test_missing_and_refused_are_one_line(app, fresh_cache, target, draft, expected):
    assert refused(app.client, target, draft) == expected
    still_serves(app)


# ---- faults ----------------------------------------------------------------------------------------------------

def test_server_gone_mid_file_then_back(app, mirror, fresh_cache):
    mirror.relay.cut_after = 4_000_000  # inside the 13 MB weights; the relay then stops listening
    message = refused(app.client, TARGET, DRAFT)
    print(message, sorted(cached(fresh_cache, TARGET)))
    assert mirror.relay.cuts >= 1
    assert message.startswith("could not reach the Hub for target local/tiny-target (") and message.endswith(
        "check the connection, or set HF_HUB_OFFLINE=1 to use the local cache"), message
    assert WEIGHTS not in cached(fresh_cache, TARGET)  # nothing half-written counts as cached
    still_serves(app)
    mirror.relay.cut_after = None
    mirror.relay.up()
    assert load_and_generate(app.client, TARGET, DRAFT) == app.reference
    assert cached(fresh_cache, TARGET)[WEIGHTS] == (Path(SHIPPED_TARGET) / WEIGHTS).stat().st_size


def _blob(cache: Path, repo: str, name: str) -> Path:
    return next((cache / f"models--{repo.replace('/', '--')}").glob(f"snapshots/*/{name}")).resolve()


@pytest.mark.parametrize("damage,fragment", [
    ("truncate",
     "the cached model.safetensors is 6538892 bytes but the repo lists 13077784 (truncated or overwritten)"),
    ("flip", "the cached model.safetensors does not match its checksum (corrupted on disk or in transit)"),
])
def test_damaged_cache_file_is_named_removed_and_fetched_again(app, mirror, fresh_cache, damage, fragment):
    assert load_and_generate(app.client, TARGET, DRAFT) == app.reference
    blob = _blob(fresh_cache, TARGET, WEIGHTS)
    data = bytearray(blob.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2] ^= 0xFF  # one byte inside a tensor: the header still parses
    blob.write_bytes(bytes(data))
    still_serves(app)  # another pair, so the next Load reads the cache again
    assert refused(app.client, TARGET, DRAFT) == (
        f"target local/tiny-target: {fragment}; it was removed from the cache, press Load again to download it afresh")
    assert WEIGHTS not in cached(fresh_cache, TARGET) and not blob.exists()
    still_serves(app)
    assert load_and_generate(app.client, TARGET, DRAFT) == app.reference


# ---- the command line ------------------------------------------------------------------------------------------

def cli(mirror, cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT=mirror.relay.url, HF_HUB_CACHE=str(cache), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "eagle_demo", "generate", "--prompt", PROMPT, "--max-new-tokens",
                           "16", "--depth", "3", "--json", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_cli_with_repo_ids(app, mirror, fresh_cache):
    import json

    done = cli(mirror, fresh_cache, "--target", TARGET, "--draft", DRAFT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["token_ids"] == app.reference
    done = cli(mirror, fresh_cache, "--target", TARGET, "--draft", DRAFT, "--revision", "v9")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: revision 'v9' does not exist in local/tiny-target (branches: main, perturbed; tags: v1.0); check "
        "the branch, tag or commit"], done.stderr[-2000:]


# ---- space, size limit, a slow server and Stop -----------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path, monkeypatch):
    """An HF cache on a real 6 MB tmpfs (skipped where this machine does not allow mounting one)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"no tmpfs mount here ({done.stderr.decode().strip()[:80]}); the free-space check is untested")
    from eagle_demo.app import REGISTRY

    REGISTRY.clear()
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(mount / "hf-cache"))
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_not_enough_disk_is_refused_before_downloading(app, mirror, small_disk):
    import shutil

    free = shutil.disk_usage(small_disk).free
    message = refused(app.client, TARGET, DRAFT)
    print(message)
    after = shutil.disk_usage(small_disk).free  # the configs and the 2.5 MB draft fit; the 13 MB weights do not
    assert message.startswith("target local/tiny-target needs 13.1 MB of downloads but the cache folder "), message
    assert message.endswith("free; free some space or point HF_HOME at a bigger disk"), message
    assert f"has {after / 1e6:.1f} MB free" in message and after < free
    assert WEIGHTS not in cached(small_disk / "hf-cache", TARGET)
    still_serves(app)


def test_download_size_limit_against_the_servers_sizes(app, mirror, fresh_cache, monkeypatch):
    monkeypatch.setenv("EAGLE_DEMO_MAX_DOWNLOAD_GB", "0.01")
    assert refused(app.client, TARGET, DRAFT) == (
        "target local/tiny-target needs 13.6 MB of downloads, above the limit of 10.0 MB; raise "
        "EAGLE_DEMO_MAX_DOWNLOAD_GB (or max_download_bytes) or pick a smaller model")
    assert WEIGHTS not in cached(fresh_cache, TARGET)
    still_serves(app)


def test_slow_server_shows_progress_and_stop_ends_the_download(app, mirror, fresh_cache, monkeypatch):
    import re

    from gradio_client.exceptions import AppError

    from eagle_demo.app.stream import stop_ui

    mirror.relay.rate = 1_000_000  # bytes per second on each connection
    monkeypatch.setattr(hub_constants, "DOWNLOAD_CHUNK_SIZE", 1 << 20)  # huggingface_hub reports every 10 MB
    job = app.client.submit(TARGET, DRAFT, "", "auto", "cpu", "", api_name="/load")
    line, deadline, seen = None, time.monotonic() + 120, []
    while line is None and time.monotonic() < deadline and not job.done():
        seen.append((round(time.monotonic(), 1), job.status().code, job.status().progress_data))
        for unit in (job.status().progress_data or []):
            if unit.desc and re.fullmatch(r"downloading target local/tiny-target: [\d.]+ [kM]?B of 13\.1 MB at "
                                          r"[\d.]+ [kM]?B/s", unit.desc) and "MB of" in unit.desc:
                line = unit.desc
        time.sleep(0.2)
    assert line is not None, f"no progress line: {[x for x in seen if x[2]]}"
    print(line)
    stop_ui(0, SimpleNamespace(session_hash=app.client.session_hash))  # what the page's Stop button calls
    with pytest.raises(AppError) as err:
        job.result(timeout=60)
    assert str(err.value) == "the load was stopped (Stop); press Load to start it again"
    assert WEIGHTS not in cached(fresh_cache, TARGET)
    mirror.relay.rate = None
    assert load_and_generate(app.client, TARGET, DRAFT) == app.reference


# ---- many users while the pair changes -------------------------------------------------------------------------

def test_eight_clients_while_another_pair_loads_from_the_server(app, mirror, fresh_cache):
    """Four clients generate on pair A while a fifth loads pair B from the (slowed) server and three more, also on
    A, press Generate during that load: the four end complete on A, the three are told the pair changed (and get B
    when they press again), nobody hangs or sees a traceback or a mixed pair; RSS after A is freed stays within 10%
    of the one-pair level."""
    import gc
    from concurrent.futures import ThreadPoolExecutor

    import psutil
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    pair_b = "local/tiny-eagle3"
    clients = [Client(app.client.src, verbose=False) for _ in range(8)]
    for i in (0, 1, 2, 3, 5, 6, 7):
        clients[i].predict(TARGET, DRAFT, "", "auto", "cpu", "", api_name="/load")  # one load; the rest share it
    alone = clients[0].predict(PROMPT, 48, depth=3, api_name="/generate")[1]
    gc.collect()
    one_pair = psutil.Process().memory_info().rss
    mirror.relay.rate = 2_000_000  # B's 1.6 MB draft takes about a second to arrive
    def queued(job):  # in the server's queue (or past it), so what follows is queued behind it
        while job.status().code.name in ("STARTING", "JOINING_QUEUE"):
            time.sleep(0.05)
        return job

    runs = [queued(c.submit(PROMPT, 48, depth=3, api_name="/generate")) for c in clients[:4]]
    loading = queued(clients[4].submit(TARGET, pair_b, "", "auto", "cpu", "", api_name="/load"))
    late = [c.submit(PROMPT, 48, depth=3, api_name="/generate") for c in clients[5:]]

    def outcome(job):
        try:
            return job.result(timeout=300)
        except AppError as exc:
            return str(exc)

    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(outcome, runs + [loading] + late))
    assert not [d for d in done[:5] if isinstance(d, str)], [d for d in done[:5] if isinstance(d, str)]
    for _text, stats in done[:4]:
        assert stats["token_ids"] == alone["token_ids"] and stats["draft_family"] == "eagle1"
    assert done[4][1]["family"] == "eagle3"
    for message in done[5:]:
        assert message == ("the pair changed to local/tiny-target + local/tiny-eagle3 while you waited; press "
                           "Generate again"), message
    again = [c.predict(PROMPT, 48, depth=3, api_name="/generate")[1] for c in clients[5:]]
    assert all(s["token_ids"] == alone["token_ids"] and s["draft_family"] == "eagle3" for s in again)
    gc.collect()
    after = psutil.Process().memory_info().rss
    print(f"RSS one pair {one_pair / 1e6:.1f} MB, after the change {after / 1e6:.1f} MB "
          f"({after / one_pair - 1:+.1%}); open files {psutil.Process().num_fds()}")
    assert after <= one_pair * 1.10


def test_offline_load_checks_the_cache_against_the_recorded_listing(mirror, fresh_cache, monkeypatch):
    from eagle_demo.checkpoints import CheckpointError, hub

    folder = Path(hub.resolve(TARGET, None, "target"))
    blob = (folder / WEIGHTS).resolve()
    blob.write_bytes(blob.read_bytes()[:1000])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError) as err:
        hub.resolve(TARGET, None, "target")
    assert str(err.value) == (
        "target local/tiny-target: the cached model.safetensors is 1000 bytes but the repo lists 13077784 (truncated "
        "or overwritten); it was removed from the cache, unset HF_HUB_OFFLINE and Load again to download it afresh")
    assert not blob.exists()


# ---- which files a repo id fetches: hub.resolve against the server ---------------------------------------------

def files(folder: str | Path) -> list[str]:
    """The files of a snapshot folder, relative, sorted (subfolders included)."""
    return sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file())


def head(mirror, repo: str) -> str:
    return hub_mirror._git(mirror.repos.mirrors / "models" / repo, "rev-parse", "HEAD")


def test_safetensors_preferred_and_tokenizer_only_for_a_target(mirror, fresh_cache):
    from eagle_demo.checkpoints import hub

    repo = "local/both-weights"  # also pytorch_model.bin, training_args.bin, README.md, original/consolidated.pth
    draft = hub.resolve(repo, None, "draft")
    assert files(draft) == ["config.json", "generation_config.json", "model.safetensors"]
    assert Path(draft).name == head(mirror, repo)  # asked for "main", downloaded by the commit it names
    target = hub.resolve(repo, None, "target")
    assert target == draft and files(target) == ["config.json", "generation_config.json", "model.safetensors",
                                                 "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]


@pytest.mark.parametrize("repo,expected", [
    ("local/sharded-extra", ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                             "model.safetensors.index.json"]),  # not consolidated.safetensors
    ("local/odd-names", ["config.json", "weights.safetensors"]),  # not sub/x, ..\\evil, c:evil
    ("tinybare", ["config.json", "pytorch_model.bin"]),  # a legacy id without an owner; .bin without safetensors
], ids=["index selects its shards", "names outside the top level", "bare legacy name"])
def test_files_selected_from_the_listing(mirror, fresh_cache, repo, expected):
    from eagle_demo.checkpoints import hub

    folder = hub.resolve(repo, None, "draft")
    assert files(folder) == expected
    assert Path(folder).parent.parent.name == f"models--{repo.replace('/', '--')}"


@pytest.mark.parametrize("repo,expected", [
    ("local/escaping-index", "draft local/escaping-index: model.safetensors.index.json names shard '../x.safetensors', "
                             "which points outside the repo; no weights were fetched: ask the repo's owner to fix the "
                             "index, or pass a local folder"),
    ("local/no-weights", "draft local/no-weights has no weight files (*.safetensors or pytorch_model*.bin); pick a "
                         "repo that ships its weights"),
    ("local/no-config", "draft local/no-config has no config.json at the top level; it is not a transformers model "
                        "repo (pass the repo that holds config.json and the weights)"),
    ("local/chat-data", "local/chat-data is a dataset, not a model; pass a model repo id as the draft"),
], ids=["index escapes the repo", "no weights", "config only in a subfolder", "a dataset"])
def test_unusable_repos_are_refused_in_one_line(mirror, fresh_cache, repo, expected):
    from eagle_demo.checkpoints import CheckpointError, hub

    with pytest.raises(CheckpointError) as err:
        hub.resolve(repo, None, "draft")
    assert str(err.value) == expected
    assert not [f for f in cached(fresh_cache, repo) if f.endswith((".safetensors", ".bin"))]  # no weights fetched


def test_config_only_resolution_and_the_size_limit_argument(mirror, fresh_cache, monkeypatch):
    from eagle_demo.checkpoints import CheckpointError, hub

    folder = hub.resolve(TARGET, None, "target", max_bytes=600_000, weights=False)  # 540 kB of configs and tokenizer
    assert files(folder) == ["config.json", "generation_config.json", "special_tokens_map.json", "tokenizer.json",
                             "tokenizer_config.json"]
    with pytest.raises(CheckpointError) as err:
        hub.resolve(TARGET, None, "target", max_bytes=600_000)
    assert str(err.value) == ("target local/tiny-target needs 13.6 MB of downloads, above the limit of 600.0 kB; "
                              "raise EAGLE_DEMO_MAX_DOWNLOAD_GB (or max_download_bytes) or pick a smaller model")
    monkeypatch.setenv("EAGLE_DEMO_MAX_DOWNLOAD_GB", "lots")
    with pytest.raises(CheckpointError) as err:
        hub.resolve(TARGET, None, "target")
    assert str(err.value) == "EAGLE_DEMO_MAX_DOWNLOAD_GB='lots' is not a number; set it to a size in GB"
    assert WEIGHTS not in cached(fresh_cache, TARGET)


def test_download_progress_is_reported(mirror, fresh_cache):
    import re

    from eagle_demo.checkpoints import hub

    seen: list[tuple[str, float]] = []
    mirror.relay.rate = 2_000_000  # the 2.5 MB draft takes over a second: at least one report on the way
    started = time.monotonic()
    hub.resolve(DRAFT, None, "draft", progress=lambda message, fraction: seen.append((message, fraction)))
    assert time.monotonic() - started > 1.0  # the relay's limit held (the replies before it earn no credit)
    assert seen[0] == ("downloading draft local/tiny-eagle1 (2.5 MB)", 0.0)
    assert seen[-1] == ("downloaded draft local/tiny-eagle1", 1.0)
    middle = seen[1:-1]
    assert middle and all(re.fullmatch(r"downloading draft local/tiny-eagle1: [\d.]+ [kM]?B of 2\.5 MB at "
                                       r"[\d.]+ [kM]?B/s", m) for m, _ in middle), middle
    assert [f for _, f in middle] == sorted(f for _, f in middle) and 0 <= middle[0][1] <= middle[-1][1] <= 1
    seen.clear()
    mirror.relay.rate = None
    hub.resolve(DRAFT, None, "draft", progress=lambda message, fraction: seen.append((message, fraction)))
    assert seen == [("draft local/tiny-eagle1 is cached", 0.0), ("downloaded draft local/tiny-eagle1", 1.0)]


def test_connection_refused_is_one_line(mirror, fresh_cache, monkeypatch):
    from eagle_demo.checkpoints import CheckpointError, hub

    closed = f"http://127.0.0.1:{hub_mirror.free_port()}"  # nothing listens there: a real refused connection
    monkeypatch.setattr(hub_constants, "ENDPOINT", closed)
    monkeypatch.setattr(hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        closed + "/{repo_id}/resolve/{revision}/{filename}")
    with pytest.raises(CheckpointError) as err:
        hub.resolve(TARGET, None, "target")
    assert str(err.value) == ("could not reach the Hub for target local/tiny-target ([Errno 111] Connection refused); "
                              "check the connection, or set HF_HUB_OFFLINE=1 to use the local cache")


def test_cache_that_cannot_be_written_is_one_line(mirror, fresh_cache, monkeypatch):
    from eagle_demo.checkpoints import CheckpointError, hub

    blocker = fresh_cache.parent / "not-a-folder"
    blocker.write_text("a file where the cache's folder should be")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(blocker / "hf-cache"))
    with pytest.raises(CheckpointError) as err:
        hub.resolve(DRAFT, None, "draft")
    print(err.value)
    assert str(err.value).startswith("downloading draft local/tiny-eagle1 failed ([Errno 20] Not a directory")
    assert str(err.value).endswith("); check disk space and the cache folder, then retry")


def test_pair_downloaded_once_then_loads_offline_through_repo_ids(mirror, fresh_cache, monkeypatch):
    from eagle_demo.checkpoints import hub, load_pair

    folders = {repo: hub.resolve(repo, None, kind) for repo, kind in ((TARGET, "target"), (DRAFT, "draft"))}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mirror.relay.down()  # nothing answers now (fresh_cache brings the relay back)
    pair = load_pair(TARGET, DRAFT, device="cpu")
    assert pair.report.family == "eagle1" and pair.report.target == TARGET
    assert (pair.target_path, pair.draft_path) == (folders[TARGET], folders[DRAFT])
