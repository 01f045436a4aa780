"""hub.resolve: local folders, repo ids, offline cache, size guard, file selection, one-line errors.

No network: HfApi, snapshot_download and hf_hub_download are replaced by fakes; "online" is simulated by
patching `hub.is_offline`.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from huggingface_hub.errors import (GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                    RevisionNotFoundError)

from eagle_demo.checkpoints import hub
from eagle_demo.checkpoints import CheckpointError, load_pair
from layouts import write_target, write_vicuna_eagle1


def hub_error(cls, message="boom"):
    return cls(message, response=SimpleNamespace(headers={}, request=None))


class FakeApi:
    """HfApi stand-in: model_info returns the given {file: size} listing or raises the given error."""

    files: dict[str, int] = {}
    error: Exception | None = None
    datasets: set[str] = set()
    calls: list = []

    def model_info(self, repo_id, revision=None, files_metadata=False, **kwargs):
        FakeApi.calls.append((repo_id, revision, files_metadata))
        if FakeApi.error is not None:
            raise FakeApi.error
        siblings = [SimpleNamespace(rfilename=name, size=size) for name, size in FakeApi.files.items()]
        return SimpleNamespace(siblings=siblings, sha="0123abcd")

    def dataset_info(self, repo_id, **kwargs):
        if repo_id in FakeApi.datasets:
            return SimpleNamespace(id=repo_id)
        raise hub_error(RepositoryNotFoundError)


@pytest.fixture
def online(monkeypatch, tmp_path):
    """Simulated online Hub; returns the dict of snapshot_download calls."""
    FakeApi.files, FakeApi.error, FakeApi.datasets, FakeApi.calls = {}, None, set(), []
    downloads: dict = {}

    def fake_snapshot(repo_id, revision=None, allow_patterns=None, local_files_only=False, **kwargs):
        downloads.update(repo=repo_id, revision=revision, patterns=list(allow_patterns or []),
                         local_files_only=local_files_only)
        return str(tmp_path / "snapshot")

    monkeypatch.setattr(hub, "is_offline", lambda: False)
    monkeypatch.setattr(hub, "HfApi", FakeApi)
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot)
    monkeypatch.delenv("EAGLE_DEMO_MAX_DOWNLOAD_GB", raising=False)
    return downloads


# ---- local paths and ids ------------------------------------------------------------------------------------

def test_local_folder_is_used_as_is(tmp_path):
    assert hub.resolve(str(tmp_path), None, "draft") == str(tmp_path.resolve())


@pytest.mark.parametrize("text", ["./missing", "/definitely/not/here", "~/nope-nope", "a/b/c"])
def test_missing_local_looking_path(text):
    with pytest.raises(CheckpointError, match="no such folder"):
        hub.resolve(text, None, "target")


def test_file_instead_of_folder(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{}")
    with pytest.raises(CheckpointError, match="is a file; pass the folder"):
        hub.resolve(str(path), None, "draft")


@pytest.mark.parametrize("text", ["bad id!", "owner/na me", "-owner/x"])
def test_invalid_repo_id(text):
    with pytest.raises(CheckpointError, match="neither a local folder nor a"):
        hub.resolve(text, None, "target")


def test_dataset_prefix_and_empty():
    with pytest.raises(CheckpointError, match="is a dataset id, not a model"):
        hub.resolve("datasets/owner/name", None, "draft")
    with pytest.raises(CheckpointError, match="no draft given"):
        hub.resolve("  ", None, "draft")


# ---- offline ----------------------------------------------------------------------------------------------

def test_offline_and_not_cached(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def not_cached(*args, **kwargs):
        assert kwargs.get("local_files_only") is True
        raise LocalEntryNotFoundError("not in cache")

    monkeypatch.setattr(hub, "snapshot_download", not_cached)
    with pytest.raises(CheckpointError, match=r"draft owner/eagle is not in the local cache and the Hub is offline "
                       r"\(HF_HUB_OFFLINE=1\); download it once online or pass a local folder"):
        hub.resolve("owner/eagle", None, "draft")


def test_offline_real_cache_miss_is_clean(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match="is not in the local cache"):
        hub.resolve("eagle-demo-tests/surely-not-cached-7f3a", None, "target")


def test_offline_cached_pair_loads_through_repo_ids(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folders = {"org/tiny-target": write_target(tmp_path / "t", "llama", layers=2),
               "org/tiny-eagle": write_vicuna_eagle1(tmp_path / "d")}

    def cached(repo_id, revision=None, local_files_only=False, **kwargs):
        assert local_files_only is True
        return str(folders[repo_id])

    monkeypatch.setattr(hub, "snapshot_download", cached)
    pair = load_pair("org/tiny-target", "org/tiny-eagle", device="cpu")
    assert pair.report.family == "eagle1" and pair.report.target == "org/tiny-target"
    assert pair.target_path == str(folders["org/tiny-target"]) and pair.draft_path == str(folders["org/tiny-eagle"])


# ---- online: file selection and size guard ----------------------------------------------------------------

def test_safetensors_preferred_and_tokenizer_for_target(online):
    FakeApi.files = {"config.json": 600, "generation_config.json": 100, "model.safetensors": 1000,
                     "pytorch_model.bin": 1000, "tokenizer.json": 50, "tokenizer_config.json": 10, "README.md": 5,
                     "training_args.bin": 7, "original/consolidated.pth": 10**12}
    hub.resolve("owner/target", "main", "target")
    assert FakeApi.calls == [("owner/target", "main", True)]
    assert sorted(online["patterns"]) == sorted(["config.json", "generation_config.json", "model.safetensors",
                                                 "tokenizer.json", "tokenizer_config.json"])
    assert online["revision"] == "0123abcd" and online["local_files_only"] is False


def test_bin_when_no_safetensors_and_no_tokenizer_for_drafts(online):
    FakeApi.files = {"config.json": 600, "pytorch_model.bin": 1000, "tokenizer.json": 50}
    hub.resolve("yuhuili/EAGLE-Vicuna-7B-v1.3", None, "draft")
    assert sorted(online["patterns"]) == ["config.json", "pytorch_model.bin"]


def test_sharded_index_selects_only_its_shards(online, monkeypatch, tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                "b": "model-00002-of-00002.safetensors"}}))
    monkeypatch.setattr(hub, "hf_hub_download", lambda repo, name, revision=None, **kw: str(index))
    FakeApi.files = {"config.json": 1, "model.safetensors.index.json": 1, "model-00001-of-00002.safetensors": 10,
                     "model-00002-of-00002.safetensors": 10, "consolidated.safetensors": 20}
    hub.resolve("owner/big", None, "draft")
    assert sorted(online["patterns"]) == ["config.json", "model-00001-of-00002.safetensors",
                                          "model-00002-of-00002.safetensors", "model.safetensors.index.json"]


def test_index_naming_a_shard_outside_the_repo_is_refused(online, monkeypatch, tmp_path):
    index = tmp_path / "idx.json"
    index.write_text(json.dumps({"weight_map": {"a": "../../../etc/passwd"}}))
    monkeypatch.setattr(hub, "hf_hub_download", lambda repo, name, revision=None, **kw: str(index))
    FakeApi.files = {"config.json": 1, "model.safetensors.index.json": 1}
    with pytest.raises(CheckpointError, match="points outside the repo; refusing it"):
        hub.resolve("owner/evil", None, "draft")


def test_repo_file_names_outside_the_repo_are_never_selected(online):
    FakeApi.files = {"config.json": 1, "../evil.safetensors": 1, "sub/x.safetensors": 1, "model.safetensors": 3}
    hub.resolve("owner/x", None, "draft")
    assert sorted(online["patterns"]) == ["config.json", "model.safetensors"]


def test_size_guard(online, monkeypatch):
    FakeApi.files = {"config.json": 1, "model-1.safetensors": 30 * 10**9, "model-2.safetensors": 20 * 10**9}
    with pytest.raises(CheckpointError, match=r"target owner/huge needs 50.0 GB of downloads, above the limit of "
                       r"40.0 GB; raise EAGLE_DEMO_MAX_DOWNLOAD_GB"):
        hub.resolve("owner/huge", None, "target")
    assert "repo" not in online  # nothing downloaded
    monkeypatch.setenv("EAGLE_DEMO_MAX_DOWNLOAD_GB", "60")
    hub.resolve("owner/huge", None, "target")
    with pytest.raises(CheckpointError, match="limit of 1.0 kB"):
        hub.resolve("owner/huge", None, "target", max_bytes=1000)


def test_config_only_resolution_skips_weights(online):
    FakeApi.files = {"config.json": 1, "model.safetensors": 10**12, "tokenizer.json": 1}
    hub.resolve("owner/huge", None, "target", weights=False)
    assert sorted(online["patterns"]) == ["config.json", "tokenizer.json"]


def test_bad_size_limit_env(online, monkeypatch):
    FakeApi.files = {"config.json": 1, "model.safetensors": 1}
    monkeypatch.setenv("EAGLE_DEMO_MAX_DOWNLOAD_GB", "lots")
    with pytest.raises(CheckpointError, match="EAGLE_DEMO_MAX_DOWNLOAD_GB='lots' is not a number"):
        hub.resolve("owner/x", None, "draft")


# ---- online: errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("error,datasets,match", [
    (hub_error(GatedRepoError), set(), r"target meta/llama is gated: accept its license on huggingface.co/meta/llama"),
    (hub_error(RepositoryNotFoundError), set(), r"target meta/llama was not found on the Hub \(or it is private"),
    (hub_error(RepositoryNotFoundError), {"meta/llama"}, "meta/llama is a dataset, not a model"),
    (hub_error(RevisionNotFoundError), set(), "revision 'v9' does not exist in meta/llama"),
    (ConnectionError("Name or service not known"), set(), r"could not reach the Hub for target meta/llama"),
])
def test_hub_errors_are_one_line(online, error, datasets, match):
    FakeApi.error, FakeApi.datasets = error, datasets
    with pytest.raises(CheckpointError, match=match) as info:
        hub.resolve("meta/llama", "v9", "target")
    assert "\n" not in str(info.value)


def test_httpx_connect_error_is_a_network_error(online):
    httpx = pytest.importorskip("httpx")
    FakeApi.error = httpx.ConnectError("connection refused")
    with pytest.raises(CheckpointError, match="could not reach the Hub"):
        hub.resolve("meta/llama", None, "target")


def test_repo_without_weights_or_config(online):
    FakeApi.files = {"config.json": 1, "README.md": 1}
    with pytest.raises(CheckpointError, match="draft owner/empty has no weight files"):
        hub.resolve("owner/empty", None, "draft")
    FakeApi.files = {"README.md": 1, "model.safetensors": 1}
    with pytest.raises(CheckpointError, match="has no config.json at the top level"):
        hub.resolve("owner/empty", None, "draft")


def test_download_failure_is_one_line(online, monkeypatch):
    FakeApi.files = {"config.json": 1, "model.safetensors": 1}

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hub, "snapshot_download", fail)
    with pytest.raises(CheckpointError, match="downloading draft owner/x failed .*No space left"):
        hub.resolve("owner/x", None, "draft")


def test_bare_legacy_repo_name_is_a_valid_id(online):
    FakeApi.files = {"config.json": 1, "model.safetensors": 1}
    assert hub.resolve("gpt2", None, "target").endswith("snapshot")
    assert online["repo"] == "gpt2"


def test_download_progress_is_reported(online):
    FakeApi.files = {"config.json": 1, "model.safetensors": 2 * 10**9}
    seen = []
    hub.resolve("owner/x", None, "draft", progress=lambda msg, frac: seen.append((msg, frac)))
    assert seen == [("downloading draft owner/x (2.0 GB)", 0.0), ("downloaded draft owner/x", 1.0)]
