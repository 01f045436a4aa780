"""hub.resolve without a server: local folders, ids that are not repo ids, the offline cache, and our one-line
messages for Hub answers olah cannot give.

Every claim about the Hub itself (file selection, size guard, progress, refused and missing repos, a dataset id, a
bare legacy name, connection refused, a cut download, an unwritable cache) runs against a real Hub-compatible server
in tests/test_hub_server.py (olah 0.5.4 on loopback, huggingface_hub's real client). What is emulated here, and why:
olah offline answers a denied repo with 401 and never sends 403/gated, disabled, RevisionNotFound (it answers a
bad revision with 401 too) or a 5xx, and a full disk mid-download cannot be made on demand (the free-space check
refuses first). For those, the test builds the HTTP answer huggingface.co sends (status and X-Error-* headers),
lets huggingface_hub's own hf_raise_for_status turn it into its exception, and checks hub._hub_error's message:
a unit test of our mapping, with no stand-in for the Hub's API and nothing patched in hub.py.
"""

from __future__ import annotations

import errno
import re

import httpx2
import pytest
from huggingface_hub import constants as hub_constants
from huggingface_hub.errors import DisabledRepoError, GatedRepoError, HfHubHTTPError, RevisionNotFoundError
from huggingface_hub.utils import hf_raise_for_status

from eagle_demo.checkpoints import CheckpointError, hub

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

def test_offline_real_cache_miss_is_clean(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    with pytest.raises(CheckpointError) as err:
        hub.resolve("eagle-demo-tests/surely-not-cached-7f3a", None, "draft")
    assert str(err.value) == ("draft eagle-demo-tests/surely-not-cached-7f3a is not in the local cache and the Hub is "
                              "offline (HF_HUB_OFFLINE=1); download it once online or pass a local folder")


# ---- answers olah cannot give: our mapping of huggingface_hub's own exceptions ---------------------------------

def hub_answer(status: int, **headers: str) -> Exception:
    """The exception huggingface_hub's own hf_raise_for_status raises for an HTTP answer with this status and these
    headers (as huggingface.co sends them) to a request for meta/llama's model info."""
    request = httpx2.Request("GET", "https://huggingface.co/api/models/meta/llama/revision/v9")
    with pytest.raises(HfHubHTTPError) as err:
        hf_raise_for_status(httpx2.Response(status, headers=headers, request=request))
    return err.value


@pytest.mark.parametrize("answer,cls,expected", [
    ((403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model meta/llama is restricted."}),
     GatedRepoError, "target meta/llama is gated: accept its license on huggingface.co/meta/llama and log in (hf auth "
                     "login or HF_TOKEN)"),
    ((403, {"X-Error-Message": "Access to this resource is disabled."}),
     DisabledRepoError, "target meta/llama has been disabled on the Hub; pick another repo"),
    ((404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id: v9"}),
     RevisionNotFoundError, "revision 'v9' does not exist in meta/llama; check the branch, tag or commit"),
    ((503, {}), HfHubHTTPError,
     re.compile(r"the Hub refused target meta/llama \([^\n]*'503 Service Unavailable'[^\n]*\); "
                r"try again later or pass a local folder")),  # httpx's own words inside
], ids=["gated", "disabled", "revision not found", "server error"])
def test_hub_answers_map_to_one_line(answer, cls, expected):
    exc = hub_answer(answer[0], **answer[1])
    assert type(exc) is cls
    message = str(hub._hub_error(exc, "meta/llama", "v9", "target", None))
    assert expected.fullmatch(message) if isinstance(expected, re.Pattern) else message == expected, message


def test_a_full_disk_during_the_download_maps_to_one_line():
    exc = OSError(errno.ENOSPC, "No space left on device")
    assert str(hub._hub_error(exc, "meta/llama", None, "target", None)) == (
        "downloading target meta/llama failed ([Errno 28] No space left on device); check disk space and the cache "
        "folder, then retry")
