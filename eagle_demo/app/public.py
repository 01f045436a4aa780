"""Public mode: what a stranger on a public page may load, and what the messages may show them. No Gradio.

On by default where the app runs as a Hugging Face Space (`SPACE_ID` set), settable anywhere with `EAGLE_PUBLIC`
(1/0; `python app.py --public` sets it). Off, nothing here changes what a local user may load or sees.

In public mode:
- a target or draft is one of the shipped `assets/...` folders, a preset's repo, or a Hub repo the owner allows in
  `EAGLE_PUBLIC_REPOS` ("owner/*,other/name", fnmatch patterns, case-insensitive). Anything else gets one line
  (`refusal`) that is the same whether or not something exists there: no file-system lookup is made for it;
- a Hub download is capped at `EAGLE_PUBLIC_MAX_DOWNLOAD_GB` (default 20), checked on the repo's declared sizes
  before anything is fetched (`checkpoints.hub.resolve`'s `max_bytes`);
- the registry keeps up to `EAGLE_PUBLIC_PAIRS` pairs (default 2); a load frees only a pair no other visitor has
  used in the last `EAGLE_PUBLIC_HOLD_MINUTES` (default 10) and none is running on; when every slot is held the
  load is refused with a line that says which pairs are serving and when to try again (`to_free`);
- messages lose the server's paths (`scrub`): the app's folder, the home folder and the Hub cache.
Everywhere, a long input is cut in messages (`cut`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import time
from pathlib import Path

from ..checkpoints.hub import cut, repo_from_url
from ..common.config import ConfigError
from ..common.paths import ASSETS, ROOT

__all__ = ["Refused", "message", "PUBLIC_SETTING", "REPOS_SETTING", "CAP_SETTING", "PAIRS_SETTING", "HOLD_SETTING",
           "enabled",
           "allowed_patterns", "admit", "refusal", "cut", "scrub", "max_download_bytes", "slots", "hold_seconds",
           "to_free", "shown_path", "shown_report", "relative",
           "relative_text"]

PUBLIC_SETTING = "EAGLE_PUBLIC"
REPOS_SETTING = "EAGLE_PUBLIC_REPOS"
CAP_SETTING = "EAGLE_PUBLIC_MAX_DOWNLOAD_GB"
PAIRS_SETTING = "EAGLE_PUBLIC_PAIRS"
HOLD_SETTING = "EAGLE_PUBLIC_HOLD_MINUTES"
_ASSET = re.compile(r"^(?:\./)?assets/([A-Za-z0-9][A-Za-z0-9_-]*)/?$")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


class Refused(ConfigError):
    """A visitor's entry public mode does not offer: its message repeats only what the visitor typed."""


def enabled() -> bool:
    """Public mode: `EAGLE_PUBLIC` when it is set (1/true/yes/on or 0/false/no/off), else whether `SPACE_ID` is."""
    raw = os.environ.get(PUBLIC_SETTING)
    if raw is None:
        return bool(os.environ.get("SPACE_ID", "").strip())
    value = raw.strip().lower()
    if value not in _TRUE + _FALSE:
        raise ConfigError(f"{PUBLIC_SETTING}={cut(raw)!r} is not a switch; set it to 1 (public) or 0 (local)")
    return value in _TRUE


def _number(setting: str, default: float, low: float) -> float:
    raw = os.environ.get(setting, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= low:  # nan too
        raise ConfigError(f"{setting}={cut(raw)!r} is not a number of at least {low:g}; fix the Space's setting")
    return value


def max_download_bytes() -> int:
    """A visitor's download cap in bytes (`EAGLE_PUBLIC_MAX_DOWNLOAD_GB`, default 20)."""
    return int(_number(CAP_SETTING, 20.0, 0.0) * 1e9)


def slots() -> int:
    """How many pairs the registry keeps at once in public mode (`EAGLE_PUBLIC_PAIRS`, default 2)."""
    return int(_number(PAIRS_SETTING, 2, 1))


def hold_seconds() -> float:
    """How long a pair another visitor used stays protected from eviction (`EAGLE_PUBLIC_HOLD_MINUTES`, 10)."""
    return _number(HOLD_SETTING, 10.0, 0.0) * 60.0


def allowed_patterns(presets: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """The owner's `EAGLE_PUBLIC_REPOS` patterns, then the presets' Hub repos."""
    raw = os.environ.get(REPOS_SETTING, "")
    patterns = [p.strip() for p in raw.replace("\n", ",").replace(";", ",").split(",") if p.strip()]
    for target, draft in (presets or {}).values():
        patterns += [r for r in (target, draft) if r and not _ASSET.match(r)]
    return list(dict.fromkeys(patterns))


def _shipped(name: str) -> bool:
    return (ASSETS / name / "config.json").is_file()


def admit(text: str | None, kind: str, presets: dict[str, tuple[str, str]] | None = None) -> str | None:
    """A visitor's target or draft box in public mode: a shipped asset as its folder, an allowed Hub repo as its id,
    None when empty; anything else raises `refusal` (one line, the same whatever is or is not on the disk). No
    file-system lookup is made for text that is not a shipped asset's name."""
    text = (text or "").strip()
    if not text:
        return None
    shipped = _ASSET.match(text)
    if shipped and _shipped(shipped.group(1)):
        return str(ASSETS / shipped.group(1))
    patterns = allowed_patterns(presets)
    repo = repo_from_url(text)
    if repo:
        raise Refused(f"{kind} '{cut(text)}' is a web address; type the repo id '{cut(repo)}' instead")
    if repo is None and _repo_like(text) and any(fnmatch.fnmatchcase(text.lower(), p.lower()) for p in patterns):
        return text
    raise Refused(refusal(text, kind))


def _repo_like(text: str) -> bool:
    return (len(text) <= 96 and re.fullmatch(r"(?:pypi:)?[A-Za-z0-9][\w.=-]*(?:/[A-Za-z0-9][\w.-]*)?", text)
            is not None and ".." not in text)


def refusal(text: str, kind: str) -> str:
    """The one line a refused target or draft gets: it says nothing of what is on the server."""
    owner = allowed_patterns()
    listed = ", ".join(cut(p, 40) for p in owner[:6]) + (", ..." if len(owner) > 6 else "")
    return (f"{kind} '{cut(text)}' is not offered on this public Space; pick a preset, a shipped assets/ folder or "
            f"{'a Hub repo its owner allows (' + listed + ')' if owner else 'the presets Hub repos'}")


def _prefixes() -> list[tuple[str, str]]:
    """(server path, what a message shows instead), longest first."""
    from huggingface_hub import constants

    pairs = [(str(Path(constants.HF_HUB_CACHE)), "<hub cache>"), (str(ROOT), "."), (os.getcwd(), "."),
             (str(Path.home()), "~")]
    return sorted({(p.rstrip("/"), s) for p, s in pairs if len(p.rstrip("/")) > 1}, key=lambda x: -len(x[0]))


def shown_path(path: str | None) -> str | None:
    """A server path as a message may show it: relative to the app's folder or the working folder, a Hub cache
    snapshot as `<hub cache>/...`; anything else unchanged."""
    if path is None:
        return None
    for prefix, shown in _prefixes():
        if path == prefix:
            return shown
        if path.startswith(prefix + "/"):
            rest = path[len(prefix) + 1:]
            return rest if shown == "." else f"{shown}/{rest}"
    return path


def relative(path: str | None) -> str | None:
    """A local folder as a command line may name it: relative to the working folder, else to the app's folder,
    when it lies inside one of them (the shipped assets as `assets/...`); anything else (a repo id) unchanged."""
    if not path or not os.path.isabs(path):
        return path
    for base in sorted({os.getcwd(), str(ROOT)}, key=len, reverse=True):
        if path == base or path.startswith(base.rstrip("/") + "/"):
            return os.path.relpath(path, base)
    return path


def relative_text(text: str) -> str:
    """`text` with the working folder and the app's folder taken off the paths it names."""
    for base in sorted({os.getcwd(), str(ROOT)}, key=len, reverse=True):
        if len(base) > 1:
            text = text.replace(base.rstrip("/") + "/", "")
    return text


def shown_report(report: dict) -> dict:
    """A load report (`AdaptationReport.to_dict`) for the page: in public mode its folders as `shown_path`."""
    if not enabled():
        return report
    return {k: shown_path(v) if k in ("target", "draft", "target_path", "draft_path") and isinstance(v, str) else v
            for k, v in report.items()}


def message(exc: BaseException) -> str:
    """An error's line for the page: `scrub`bed, except a refusal, which holds only what the visitor typed."""
    from ..common.errors import one_line

    return scrub(one_line(exc), public=False if isinstance(exc, Refused) else None)


def scrub(message: str, public: bool | None = None) -> str:
    """A message for the page: each word longer than 160 characters cut (always); in public mode the server's
    paths replaced (`shown_path`)."""
    words = [w if len(w) <= 160 else cut(w, 60) for w in message.split(" ")]
    message = " ".join(words)
    if not (enabled() if public is None else public):
        return message
    for prefix, shown in _prefixes():
        replacement = "" if shown == "." else shown + "/"
        message = re.sub(re.escape(prefix) + r"(?=/|\b|$)/?", lambda _m, r=replacement: r, message)
    return message


def to_free(loaded: list, wanted, client: str | None, pairs_of: dict[str, object], used_at: dict,
            running: set, now: float | None = None) -> list:
    """Which loaded pairs (oldest first) a public load of `wanted` frees, keeping at most `slots()`.

    A pair is held when a run is going on it, or when another client's last pair is it and it was used within
    `hold_seconds()`. Raises a one-line ConfigError when freeing only unheld pairs leaves no room."""
    now = time.monotonic() if now is None else now
    if wanted in loaded:
        return []
    hold = hold_seconds()
    others = {key for c, key in pairs_of.items() if c != client}

    def held(key) -> bool:
        return key in running or (key in others and now - used_at.get(key, float("-inf")) < hold)

    excess = len(loaded) + 1 - slots()
    free = [k for k in loaded if not held(k)][:max(excess, 0)]
    if len(free) < excess:
        serving = "; ".join(k.label() for k in loaded if held(k))
        raise ConfigError(f"this public Space is serving {cut(serving, 200)} to other visitors and keeps "
                          f"{slots()} pair(s) at once; pick that pair, or load yours again in a few minutes")
    return free
