"""A real Hub-compatible server on loopback for tests and the soak: olah 0.5.4 (PyPI, MIT) serving local git repos.

    python scripts/hub_mirror.py              # build olah's venv (once), the repos, start olah; print HF_ENDPOINT
    python scripts/hub_mirror.py --venv-only  # only the venv (what the tests' fixture builds first)

olah pins its own fastapi, so it runs in its own virtualenv, built once by `olah_runtime()` at
$EAGLE_DEMO_OLAH_VENV (default ~/.cache/eagle_demo/olah-venv). `build_repos(root)` commits the shipped pair into
git repos laid out as olah's mirrors-path expects (ROOT/models/ORG/NAME): branches, a tag, a commit that changes a
weight file, a sharded target. `Olah` starts the server offline on 127.0.0.1; `Relay` is a loopback TCP relay put
in front of it to make a faulty network (a cut after N bytes, a byte-rate limit). Nothing here speaks the Hub's
API: olah does, and huggingface_hub's own client talks to it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

OLAH_PIN = "olah==0.5.4"
ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets"
ORG = "local"


def olah_venv() -> Path:
    env = os.environ.get("EAGLE_DEMO_OLAH_VENV")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo" / "olah-venv"


def olah_runtime() -> Path:
    """The python of olah's own virtualenv, built once (about 15 s from PyPI); the olah-cli next to it serves."""
    venv = olah_venv()
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import importlib.metadata as m; assert m.version('olah') == '0.5.4'"]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"building olah's virtualenv at {venv} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", OLAH_PIN], check=True)
    subprocess.run(probe, check=True)
    return python


# ---- repos -----------------------------------------------------------------------------------------------------

def _git(folder: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="EAGLE dev", GIT_AUTHOR_EMAIL="dev@eagle.local",
               GIT_COMMITTER_NAME="EAGLE dev", GIT_COMMITTER_EMAIL="dev@eagle.local")
    done = subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


def _commit_folder(repo: Path, source: Path | None, message: str) -> str:
    """Commit everything now in `repo` (after copying `source`'s files in); returns the commit id."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        _git(repo, "init", "-q", "-b", "main")
    if source is not None:
        for file in source.iterdir():
            if file.is_file():
                shutil.copy2(file, repo / file.name)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _perturbed(source: Path, out: Path) -> Path:
    """A copy of the shipped target whose output rows of two tokens are swapped: same shapes, other tokens."""
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    for file in source.iterdir():
        shutil.copy2(file, out / file.name)
    weights = load_file(str(source / "model.safetensors"))
    name = "lm_head.weight" if "lm_head.weight" in weights else "model.embed_tokens.weight"
    head = weights[name].clone()  # [V, H]
    head[[199, 258]] = head[[258, 199]]  # a newline and an indent trade places
    weights[name] = head
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def _sharded(source: Path, out: Path, drop_last: bool = False) -> Path:
    """The shipped target split into two safetensors shards with a model.safetensors.index.json."""
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    for file in source.iterdir():
        if file.name != "model.safetensors":
            shutil.copy2(file, out / file.name)
    weights = load_file(str(source / "model.safetensors"))
    names = sorted(weights)
    half = len(names) // 2
    weight_map, total = {}, 0
    for i, part in enumerate((names[:half], names[half:])):
        shard = f"model-{i + 1:05d}-of-00002.safetensors"
        save_file({n: weights[n] for n in part}, str(out / shard), metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
        total += sum(weights[n].numel() * weights[n].element_size() for n in part)
    if drop_last:
        (out / "model-00002-of-00002.safetensors").unlink()
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return out


@dataclass(frozen=True)
class Repos:
    """The mirrors folder and the facts tests check against."""

    mirrors: Path  # olah's mirrors-path
    first_commit: str  # local/tiny-target's main before nothing else: tag v1.0 points here
    perturbed: Path  # a local folder equal to local/tiny-target at branch "perturbed"
    refused: str  # a repo that exists in the mirrors but olah's rules refuse


def build_repos(root: Path) -> Repos:
    """Git repos of the shipped pair under root/mirrors/models/local/ (built once per root):
    - tiny-target: main (tagged v1.0), branch perturbed (a commit that changes model.safetensors);
    - tiny-eagle1, tiny-eagle3: the shipped drafts on main;
    - sharded-target: the target in two shards with an index; missing-shard: its index names a shard not committed;
    - refused: a copy of tiny-eagle1 that the server's rules refuse (401, as the Hub answers a private repo)."""
    root = Path(root)
    models = root / "mirrors" / "models" / ORG
    perturbed = root / "perturbed-target"
    stamp = root / "repos.json"
    if stamp.is_file():
        data = json.loads(stamp.read_text())
        return Repos(root / "mirrors", data["first_commit"], perturbed, data["refused"])
    target = models / "tiny-target"
    first = _commit_folder(target, ASSETS / "tiny-target", "the shipped target")
    _git(target, "tag", "v1.0")
    _git(target, "checkout", "-q", "-b", "perturbed")
    _commit_folder(target, _perturbed(ASSETS / "tiny-target", perturbed), "scale the final norm")
    _git(target, "checkout", "-q", "main")
    for name in ("tiny-eagle1", "tiny-eagle3"):
        _commit_folder(models / name, ASSETS / name, f"the shipped {name}")
    _commit_folder(models / "sharded-target", _sharded(ASSETS / "tiny-target", root / "work" / "sharded"), "shards")
    _commit_folder(models / "missing-shard", _sharded(ASSETS / "tiny-target", root / "work" / "missing", True),
                   "an index that names a shard not committed")
    _commit_folder(models / "refused", ASSETS / "tiny-eagle1", "refused by the server's rules")
    stamp.write_text(json.dumps({"first_commit": first, "refused": f"{ORG}/refused"}))
    return Repos(root / "mirrors", first, perturbed, f"{ORG}/refused")


# ---- the server ------------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float, alive=lambda: True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


class Olah:
    """olah 0.5.4 serving `repos.mirrors` offline on 127.0.0.1 (its own venv); `refused` is denied by its rules."""

    def __init__(self, repos: Repos, workdir: Path, port: int | None = None):
        self.repos, self.workdir = repos, Path(workdir)
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Olah":
        python = olah_runtime()
        self.workdir.mkdir(parents=True, exist_ok=True)
        rules = [{"repo": "*", "allow": True}, {"repo": "*/*", "allow": True},
                 {"repo": self.repos.refused, "allow": False}]  # olah: the last rule that matches decides
        toml = "\n".join([
            "[basic]", 'host = "127.0.0.1"', f"port = {self.port}", f'repos-path = "{self.workdir / "repos"}"',
            f'mirrors-path = ["{self.repos.mirrors}"]', "", "[accessibility]", "offline = true",
            *[f'[[accessibility.proxy]]\nrepo = "{r["repo"]}"\nallow = {str(r["allow"]).lower()}' for r in rules]])
        (self.workdir / "olah.toml").write_text(toml + "\n")
        log = open(self.workdir / "olah.log", "ab")
        # a session of its own: `stop` ends olah with whatever it started
        self.proc = subprocess.Popen([str(python.parent / "olah-cli"), "-c", "olah.toml"], cwd=self.workdir,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        _wait_port(self.port, 60, lambda: self.proc.poll() is None)
        return self

    def stop(self) -> None:
        """Ends olah's whole process group: SIGTERM, then SIGKILL after 10 s."""
        if self.proc is not None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(10)
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # what olah started and left, if anything
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None


# ---- a faulty network in front of it ---------------------------------------------------------------------------

class Relay:
    """A loopback TCP relay in front of a server: clients connect to `port`, bytes go to and from `upstream` as
    they are. Faults, set any time: `cut_after` (a connection that has carried that many bytes to the client is cut
    and the relay stops listening, as a server that died mid-file: connections are then refused until `up()`),
    `rate` (bytes per second to the client on each connection, a slow server). It does not read HTTP."""

    def __init__(self, upstream: int, port: int | None = None):
        self.upstream, self.port = upstream, port or free_port()
        self.cut_after: int | None = None
        self.rate: float | None = None
        self.cuts = 0
        self.sent = 0  # bytes to clients, all connections
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> "Relay":
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="relay-accept").start()
        return self

    def down(self) -> None:
        """Stop listening and drop every open connection (clients then see refused connections)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            _close(conn)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._conns.update((client, server))
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, to_client: bool) -> None:
        carried, last = 0, time.monotonic()
        due = last  # when the bytes sent so far are due at `rate`; credit for idle time is capped at 50 ms
        try:
            while True:
                data = src.recv(16384 if self.rate is None else max(1024, int(self.rate // 20)))
                if not data:
                    break
                if to_client and self.cut_after is not None and carried + len(data) > self.cut_after:
                    dst.sendall(data[: max(0, self.cut_after - carried)])
                    self.cuts += 1
                    self.down()
                    return
                dst.sendall(data)
                if to_client:
                    now = time.monotonic()
                    if now - last > 0.25:  # idle (a keep-alive connection between requests): a new transfer
                        carried = 0
                    last = now
                    carried += len(data)
                    self.sent += len(data)
                    if self.rate:  # a slow link: small replies in a row earn no credit for a large one
                        due = max(due, now - 0.05) + len(data) / self.rate
                        if due > now:
                            time.sleep(due - now)
        except OSError:
            pass
        finally:
            _close(src)
            _close(dst)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="olah 0.5.4 on loopback serving git repos of the shipped pair.")
    parser.add_argument("--root", default=None, help="where the repos go (default: a new temporary folder)")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--venv-only", action="store_true", help="build olah's virtualenv (once) and exit")
    args = parser.parse_args()
    started = time.monotonic()
    python = olah_runtime()
    print(f"olah's virtualenv: {python.parent.parent} ({time.monotonic() - started:.1f} s)", flush=True)
    if args.venv_only:
        return 0
    import tempfile

    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="hub-mirror-"))
    repos = build_repos(root)
    from hub_layouts import build_layouts  # the layouts tests/test_hub_server.py resolves (it imports this module)

    build_layouts(repos.mirrors)
    server = Olah(repos, root / "olah", args.port).start()
    print(f"HF_ENDPOINT={server.url}  (repos {ORG}/tiny-target, {ORG}/tiny-eagle1, {ORG}/tiny-eagle3, "
          f"{ORG}/sharded-target and the layouts of scripts/hub_layouts.py; Ctrl-C stops)", flush=True)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
