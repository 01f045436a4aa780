"""Public mode (eagle_demo/app/public.py): what a stranger on a public Space may load and what the messages show.

Each probe from issue 54 ("map the server's files", "learn paths they never typed", "load any folder", "fill the
screen") is sent to a served app in public mode through the named API: it gets a one-line refusal that is the same
whatever is on the disk and names no server path, and the app keeps serving. The registry's eviction rule is tested
with real loads of the shipped pairs: one visitor's load never frees the pair another visitor is using.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import test_hub_server as hub_test
from eagle_demo.app import public
from eagle_demo.common.config import ConfigError
from eagle_demo.common.paths import ROOT
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET
from test_hub_server import mirror  # noqa: F401 - olah on loopback, for the download cap's test

PROMPT = "def fibonacci(n):\n"
LONG = "/tmp/" + "x" * 10_000


def _probes(tmp_path: Path) -> dict[str, str]:
    """Each thing a visitor might type to learn about the server: existing and missing, file and folder."""
    (tmp_path / "a-file").write_text("hello")
    (tmp_path / "no-config").mkdir()
    return {"/proc/self": "/proc/self", "/proc/self/cwd": "/proc/self/cwd", "home": "~", "home sub": "~/.cache",
            "/etc/passwd": "/etc/passwd", "missing folder": str(tmp_path / "missing"),
            "a file": str(tmp_path / "a-file"),
            "folder without config.json": str(tmp_path / "no-config"), "a 10,000-character path": LONG,
            "relative escape": "assets/../eagle_demo", "asset without config": "assets/prompts",
            "the app's own folder": str(ROOT / "assets" / "tiny-target"), "dot": ".", "repo not allowed": "some/model",
            "traversal repo": "../../etc"}


def _leaks(message: str) -> list[str]:
    """Server facts a refusal must not contain."""
    found = [s for s in (str(ROOT), os.getcwd(), str(Path.home()), f"/{os.getpid()}", "[Errno")
             if len(s) > 2 and s in message]
    for word in ("no such", "is a file", "has no config", "exists", "not found"):
        if word in message.lower():
            found.append(word)
    return found


def _template(message: str, typed: str) -> str:
    """The message with the visitor's own (cut) text taken out: what it says about the server."""
    return message.replace(f"'{public.cut(typed)}'", "'<typed>'")


@pytest.fixture
def public_on(monkeypatch):
    monkeypatch.setenv("EAGLE_PUBLIC", "1")
    monkeypatch.setenv("EAGLE_PUBLIC_REPOS", "local/*,owner/allowed")
    yield


# ---- the switch ---------------------------------------------------------------------------------------------------

def test_public_mode_follows_space_id_and_the_setting(monkeypatch):
    monkeypatch.delenv("EAGLE_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert public.enabled() is False
    monkeypatch.setenv("SPACE_ID", "someone/eagle")
    assert public.enabled() is True
    monkeypatch.setenv("EAGLE_PUBLIC", "0")  # the owner may turn it off on a Space
    assert public.enabled() is False
    monkeypatch.delenv("SPACE_ID")
    monkeypatch.setenv("EAGLE_PUBLIC", "1")
    assert public.enabled() is True
    monkeypatch.setenv("EAGLE_PUBLIC", "maybe")
    with pytest.raises(ConfigError, match="EAGLE_PUBLIC='maybe' is not a switch"):
        public.enabled()


def test_local_mode_is_unchanged(monkeypatch, tmp_path):
    """Outside public mode a local folder still loads by its path, and a missing one still says so."""
    from eagle_demo.app.registry import make_key

    monkeypatch.delenv("EAGLE_PUBLIC", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    key = make_key(str(tmp_path), "assets/tiny-eagle1")
    assert key.target == str(tmp_path.resolve()) and key.draft == str(ROOT / "assets" / "tiny-eagle1")


def test_app_py_public_flag_sets_the_switch():
    text = (ROOT / "app.py").read_text()
    assert '"--public" in sys.argv' in text and 'os.environ["EAGLE_PUBLIC"] = "1"' in text
    assert text.index("--public") < text.index("build_app()")  # before the app reads it


# ---- what a visitor may name -------------------------------------------------------------------------------------

def test_every_probe_gets_the_same_one_line_refusal(public_on, tmp_path):
    from eagle_demo.app.registry import make_key

    templates = {}
    for name, typed in _probes(tmp_path).items():
        for kind, args in (("target", (typed, None)), ("draft", ("assets/tiny-target", typed))):
            with pytest.raises(ConfigError) as err:
                make_key(*args)
            message = str(err.value)
            assert "\n" not in message and len(message) < 400, (name, message)
            assert not _leaks(_template(message, typed)), (name, message)  # what it typed may come back
            templates.setdefault(kind, {})[name] = _template(message, typed)
    for by_probe in templates.values():
        assert len(set(by_probe.values())) == 1, by_probe  # nothing tells one probe from another
        assert "is not offered on this public Space" in next(iter(by_probe.values()))
        assert "local/*, owner/allowed" in next(iter(by_probe.values()))  # the owner's list, as the fix


def test_shipped_assets_presets_and_allowed_repos_are_admitted(public_on):
    from eagle_demo.app.registry import make_key

    key = make_key("assets/tiny-target", "./assets/tiny-eagle3/")
    assert (key.target, key.draft) == (str(ROOT / "assets/tiny-target"), str(ROOT / "assets/tiny-eagle3"))
    assert key.label() == "assets/tiny-target + assets/tiny-eagle3"  # no server path in messages
    assert make_key("local/tiny-target", "Owner/Allowed").draft == "Owner/Allowed"  # patterns, any case
    assert make_key("Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3").target == "Qwen/Qwen3-8B"  # a preset's repos
    with pytest.raises(ConfigError, match="is not offered"):
        make_key("owner/allowed-not", None)


def test_a_url_gets_the_repo_id_to_type(public_on, monkeypatch):
    from eagle_demo.app.registry import make_key
    from eagle_demo.checkpoints import CheckpointError
    from eagle_demo.checkpoints.hub import resolve

    with pytest.raises(ConfigError, match="is a web address; type the repo id 'local/tiny-target'"):
        make_key("https://huggingface.co/local/tiny-target/tree/main", None)
    monkeypatch.setenv("EAGLE_PUBLIC", "0")  # the same help outside public mode, from the resolver
    with pytest.raises(CheckpointError, match="is a web address; type the Hub repo id 'Qwen/Qwen3-8B'"):
        resolve("https://huggingface.co/Qwen/Qwen3-8B", kind="target")
    with pytest.raises(CheckpointError, match=r"is a web address; type the Hub repo id \(owner/name\)"):
        resolve("https://example.com/model.bin", kind="draft")


def test_long_input_is_cut_everywhere(monkeypatch):
    """Outside public mode too: a 10,000-character path never comes back whole (was "[Errno 36] ... <all of it>")."""
    from eagle_demo.checkpoints import CheckpointError
    from eagle_demo.checkpoints.hub import resolve

    monkeypatch.delenv("EAGLE_PUBLIC", raising=False)
    with pytest.raises(CheckpointError) as err:
        resolve(LONG, kind="target")
    message = str(err.value)
    assert len(message) < 300 and "(10005 characters)" in message and "File name too long" in message, message
    assert len(public.scrub("x " + "y" * 5000, public=False)) < 150


def test_scrub_takes_server_paths_out_of_messages(public_on):
    from huggingface_hub import constants

    message = (f"draft {ROOT}/assets/tiny-eagle1/model.safetensors is corrupt; see {Path.home()}/notes and "
               f"{constants.HF_HUB_CACHE}/models--a--b/snapshots/1/config.json")
    shown = public.scrub(message)
    assert str(ROOT) not in shown and str(Path.home()) not in shown, shown
    assert "assets/tiny-eagle1/model.safetensors" in shown and "<hub cache>/models--a--b" in shown, shown
    assert public.scrub(message, public=False) == message  # a local user sees the real paths
    report = public.shown_report({"target_path": str(ROOT / "assets/tiny-target"), "draft_path": None, "x": 1})
    assert report == {"target_path": "assets/tiny-target", "draft_path": None, "x": 1}


# ---- eviction: one visitor's load never frees another visitor's pair --------------------------------------------

class _Key:
    def __init__(self, name):
        self.name = name

    def label(self):
        return self.name


def test_to_free_keeps_pairs_other_visitors_hold(monkeypatch):
    monkeypatch.setenv("EAGLE_PUBLIC_PAIRS", "2")
    monkeypatch.setenv("EAGLE_PUBLIC_HOLD_MINUTES", "10")
    a, b, c = _Key("A"), _Key("B"), _Key("C")
    used = {a: 1000.0, b: 1000.0}
    pairs = {"alice": a, "bob": b}
    with pytest.raises(ConfigError, match="serving A; B to other visitors and keeps 2 pair"):
        public.to_free([a, b], c, "carol", pairs, used, set(), now=1100.0)
    assert public.to_free([a, b], c, "bob", pairs, used, set(), now=1100.0) == [b]  # bob's own pair may go
    assert public.to_free([a, b], c, "carol", pairs, used, set(), now=1000.0 + 601) == [a]  # held 10 minutes
    assert public.to_free([a, b], c, "carol", {}, used, {a}, now=5000.0) == [b]  # a run going holds its pair
    assert public.to_free([a], c, "carol", pairs, used, set(), now=1100.0) == []  # room left: nothing freed
    assert public.to_free([a, b], a, "carol", pairs, used, set(), now=1100.0) == []  # already loaded


def test_a_visitors_load_cannot_evict_another_visitors_pair(public_on, monkeypatch):
    """Real loads on a public registry with one slot: Bob's load is refused while Alice uses her pair, and her
    session stays the same object; once her hold runs out, Bob's load frees it."""
    from eagle_demo.app.pages import PAGES
    from eagle_demo.app.registry import Registry, make_key

    monkeypatch.setenv("EAGLE_PUBLIC_PAIRS", "1")
    registry = Registry()
    alice = make_key("assets/tiny-target", "assets/tiny-eagle1", device="cpu")
    bob = make_key("assets/tiny-target", "assets/tiny-eagle3", device="cpu")
    session = registry.load(alice, client="alice-page")
    PAGES.of("alice-page").pair = alice
    try:
        with pytest.raises(ConfigError) as err:
            registry.load(bob, client="bob-page")
        assert "serving assets/tiny-target + assets/tiny-eagle1 to other visitors" in str(err.value)
        assert registry.get(alice) is session and registry.get(bob) is None
        monkeypatch.setenv("EAGLE_PUBLIC_PAIRS", "2")  # a second slot: both serve
        assert registry.load(bob, client="bob-page") is not None and registry.get(alice) is session
        monkeypatch.setenv("EAGLE_PUBLIC_PAIRS", "1")
        monkeypatch.setenv("EAGLE_PUBLIC_HOLD_MINUTES", "0")  # Alice's hold is over: her pair may be freed
        registry.load(alice, client="alice-page")  # already loaded: no eviction needed
        registry._evict(1)
        PAGES.of("bob-page").pair = bob
        registry.load(bob, client="bob-page")
        assert registry.get(alice) is None and registry.get(bob) is not None
    finally:
        PAGES.close("alice-page")
        PAGES.close("bob-page")
        registry.clear()


# ---- the served app in public mode --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served_public(tmp_path_factory):
    from gradio_client import Client

    from eagle_demo.app import REGISTRY
    from test_ui_api import launch

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EAGLE_PUBLIC", "1")
        mp.setenv("EAGLE_PUBLIC_REPOS", "owner/allowed")
        demo, url = launch(SHIPPED_TARGET, SHIPPED_EAGLE1)
        client = Client(url, verbose=False)
        client.predict("assets/tiny-target", "assets/tiny-eagle1", "", "auto", "cpu", api_name="/load")
        reference = client.predict(PROMPT, 12, api_name="/generate")[1]["token_ids"]
        try:
            yield client, reference, tmp_path_factory.mktemp("probes")
        finally:
            demo.close()
            REGISTRY.clear()


def test_served_probes_are_refused_alike_and_the_app_keeps_serving(served_public):
    from gradio_client.exceptions import AppError

    client, reference, tmp = served_public
    seen = set()
    for name, typed in _probes(tmp).items():
        for args in ((typed, ""), ("assets/tiny-target", typed)):
            with pytest.raises(AppError) as err:
                client.predict(*args, "", "auto", "cpu", api_name="/load")
            message = str(err.value).strip()
            assert message and "\n" not in message and "Traceback" not in message and len(message) < 400, message
            assert not _leaks(_template(message, typed)), (name, message)
            seen.add(_template(message, typed).split("'<typed>'", 1)[-1])
        _, stats = client.predict(PROMPT, 12, api_name="/generate")
        assert stats["token_ids"] == reference, name
    assert len(seen) == 1, "\n".join(seen)
    report = client.predict("assets/tiny-target", "assets/tiny-eagle1", "", "auto", "cpu", api_name="/load")[1]
    assert report["target_path"] == "assets/tiny-target" and str(ROOT) not in str(report)


def test_served_long_and_url_inputs(served_public):
    from gradio_client.exceptions import AppError

    client, reference, _ = served_public
    with pytest.raises(AppError) as err:
        client.predict("https://huggingface.co/owner/allowed", "", "", "auto", "cpu", api_name="/load")
    assert "type the repo id 'owner/allowed'" in str(err.value)
    with pytest.raises(AppError) as err:
        client.predict("owner/" + "x" * 10_000, "", "", "auto", "cpu", api_name="/load")
    assert len(str(err.value)) < 400 and "(10006 characters)" in str(err.value), str(err.value)
    assert client.predict(PROMPT, 12, api_name="/generate")[1]["token_ids"] == reference


# ---- a visitor's Hub download: capped on the declared sizes, before anything is fetched -----------------------------

def test_download_cap_is_checked_on_the_listing_before_downloading(public_on, mirror, monkeypatch, tmp_path):
    """Through a real Hub server (olah on loopback, tests/test_hub_server.py's `mirror`): with the cap below the
    tiny draft's declared size the load is refused before its weights are fetched; with room it loads."""
    from huggingface_hub import constants as hub_constants

    from eagle_demo.app.registry import Registry, make_key

    cache = tmp_path / "visitor-cache"
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    registry = Registry()
    key = make_key(hub_test.TARGET, hub_test.DRAFT, device="cpu")
    weights = (ROOT / "assets/tiny-eagle1/pytorch_model.bin").stat().st_size
    monkeypatch.setenv("EAGLE_PUBLIC_MAX_DOWNLOAD_GB", str(weights / 2 / 1e9))
    try:
        with pytest.raises(Exception) as err:
            registry.load(key, client="visitor")
        message = public.message(err.value)
        assert "above the limit" in message and "\n" not in message and str(cache) not in message, message
        assert "pytorch_model.bin" not in hub_test.cached(cache, hub_test.DRAFT)  # nothing big was fetched
        assert registry.get(key) is None
        monkeypatch.setenv("EAGLE_PUBLIC_MAX_DOWNLOAD_GB", "1")
        assert registry.load(key, client="visitor").eagle is not None
    finally:
        registry.clear()
