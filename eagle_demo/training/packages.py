"""Python source from well-known permissively licensed PyPI packages, for the second-generation corpus.

Each package in :data:`PACKAGES` is fetched at corpus-build time as its pure-Python wheel
(``pip download --no-deps --only-binary :all: --platform any``, pinned version) into
``<cache>/corpus/wheels``; nothing is vendored into the repository. The ``.py`` files are read straight
from the wheel (a zip), skipping vendored copies of other projects (``_vendor/``, ``vendored/``,
``extern/``, ``_distutils/``), generated tables (files over :data:`MAX_FILE_BYTES` or with a line over
:data:`MAX_LINE_CHARS` characters) and empty files. A package contributes at most
:data:`MAX_PACKAGE_BYTES`: its files are taken in the order of the SHA-256 of their path (a fixed,
spread-out sample of the package) until the cap is reached, so SymPy (26 MB) does not drown the rest.

The licence of every package is checked against the wheel's own metadata (``License-Expression``,
``License`` or the ``License ::`` classifiers) before anything is used; a mismatch stops the build.
"""

from __future__ import annotations

import email
import hashlib
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

MAX_PACKAGE_BYTES = 4_000_000
MAX_FILE_BYTES = 400_000
MAX_LINE_CHARS = 1000
SKIP_DIR_RE = re.compile(r"(^|/)(_vendor|vendor|_vendored|vendored|extern|_distutils)/")


@dataclass(frozen=True)
class Package:
    name: str  # the PyPI name
    version: str  # pinned, so the corpus is reproducible
    licence: str  # SPDX-style family; must appear in the wheel's metadata (see licence_matches)
    holdout: bool = False  # True: the whole package goes to the validation split


PACKAGES: tuple[Package, ...] = (
    Package("alembic", "1.20.1", "MIT"),
    Package("anyio", "4.16.0", "MIT"),
    Package("arrow", "1.4.0", "Apache", holdout=True),
    Package("attrs", "26.1.0", "MIT"),
    Package("babel", "2.19.0", "BSD"),
    Package("black", "26.10.1", "MIT"),
    Package("boto3", "1.44.8", "Apache"),
    Package("botocore", "1.44.8", "Apache"),
    Package("bottle", "0.13.5", "MIT", holdout=True),
    Package("celery", "5.7.0", "BSD"),
    Package("click", "8.5.1", "BSD"),
    Package("dask", "2026.8.0", "BSD"),
    Package("django", "5.2.19", "BSD"),
    Package("fastapi", "0.165.0", "MIT"),
    Package("flake8", "7.5.0", "MIT"),
    Package("flask", "3.1.3", "BSD"),
    Package("h11", "0.16.0", "MIT", holdout=True),
    Package("httpcore", "1.0.9", "BSD"),
    Package("httpx", "0.29.0", "BSD"),
    Package("idna", "3.20", "BSD"),
    Package("ipython", "9.18.1", "BSD"),
    Package("isort", "9.0.2", "MIT"),
    Package("jedi", "0.20.1", "MIT"),
    Package("jinja2", "3.1.6", "BSD"),
    Package("jsonschema", "4.26.0", "MIT"),
    Package("kombu", "5.7.0", "BSD"),
    Package("mako", "1.4.3", "MIT"),
    Package("marshmallow", "4.4.0", "MIT", holdout=True),
    Package("more-itertools", "11.2.1", "MIT"),
    Package("mpmath", "1.4.1", "BSD"),
    Package("mypy", "2.4.1", "MIT"),
    Package("networkx", "3.6.1", "BSD"),
    Package("nltk", "3.10.4", "Apache"),
    Package("packaging", "26.4", "Apache"),
    Package("parso", "0.8.7", "MIT"),
    Package("pip", "26.3", "MIT"),
    Package("pluggy", "1.7.0", "MIT"),
    Package("poetry-core", "2.5.0", "MIT"),
    Package("prompt-toolkit", "3.0.53", "BSD"),
    Package("pycodestyle", "2.15.0", "MIT"),
    Package("pydantic", "2.14.4", "MIT"),
    Package("pyflakes", "4.1.0", "MIT", holdout=True),
    Package("pygments", "2.21.0", "BSD"),
    Package("pyparsing", "3.3.3", "MIT"),
    Package("pytest", "9.2.0", "MIT"),
    Package("python-dateutil", "4.0.0", "BSD"),
    Package("pytz", "2026.6", "MIT"),
    Package("redis", "8.2.0", "MIT"),
    Package("rich", "15.0.0", "MIT"),
    Package("scrapy", "2.19.0", "BSD"),
    Package("seaborn", "0.13.2", "BSD"),
    Package("setuptools", "84.2.1", "MIT"),
    Package("six", "1.17.0", "MIT"),
    Package("sphinx", "9.0.4", "BSD"),
    Package("sqlalchemy", "2.1.9", "MIT"),
    Package("starlette", "1.10.0", "BSD"),
    Package("sympy", "1.14.0", "BSD"),
    Package("tomlkit", "0.15.3", "MIT", holdout=True),
    Package("toolz", "1.2.0", "BSD", holdout=True),
    Package("tox", "4.67.17", "MIT"),
    Package("traitlets", "5.16.1", "BSD"),
    Package("trio", "0.35.0", "MIT"),
    Package("twisted", "26.10.0", "MIT"),
    Package("typer", "0.29.2", "MIT"),
    Package("urllib3", "2.8.0", "MIT"),
    Package("virtualenv", "21.15.14", "MIT"),
    Package("werkzeug", "3.1.9", "BSD"),
    Package("wheel", "0.48.0", "MIT"),
    Package("xarray", "2026.9.0", "Apache"),
)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def download_wheel(pkg: Package, wheel_dir: Path) -> Path:
    """The package's pure-Python wheel in ``wheel_dir`` (fetched with pip unless already there)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    prefix = _normalise(f"{pkg.name}-{pkg.version}-")
    found = [p for p in wheel_dir.glob("*.whl") if _normalise(p.name).startswith(prefix)]
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               "--python-version", "3.11", "--implementation", "py", "--abi", "none", "--platform", "any",
               "--dest", str(wheel_dir), f"{pkg.name}=={pkg.version}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip could not download {pkg.name}=={pkg.version}: "
                             f"{done.stderr.strip().splitlines()[-1:]}; check PyPI access or the pin")
        found = [p for p in wheel_dir.glob("*.whl") if _normalise(p.name).startswith(prefix)]
    if len(found) != 1:
        raise SystemExit(f"expected one wheel for {pkg.name}=={pkg.version} in {wheel_dir}, found {found}")
    return found[0]


def wheel_licence(zf: zipfile.ZipFile) -> str:
    """The licence fields of the wheel's METADATA, joined (expression, licence text head, classifiers)."""
    meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    meta = email.message_from_bytes(zf.read(meta_name))
    parts = [meta.get("License-Expression") or "", (meta.get("License") or "")[:200]]
    parts += [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    return " | ".join(p for p in parts if p)


def licence_matches(expected: str, found: str) -> bool:
    return expected.lower() in found.lower()


def _usable(path: str, text: str) -> bool:
    if SKIP_DIR_RE.search(path) or not text.strip():
        return False
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        return False
    return max(len(line) for line in text.split("\n")) <= MAX_LINE_CHARS


def package_documents(pkg: Package, wheel: Path) -> tuple[list[tuple[str, str]], str]:
    """``(name, text)`` of the selected ``.py`` files of one wheel, and its licence metadata."""
    with zipfile.ZipFile(wheel) as zf:
        licence = wheel_licence(zf)
        if not licence_matches(pkg.licence, licence):
            raise SystemExit(f"{pkg.name} {pkg.version}: licence metadata {licence!r} does not name "
                             f"{pkg.licence}; fix the PACKAGES entry or drop the package")
        names = sorted((n for n in zf.namelist() if n.endswith(".py")),
                       key=lambda n: hashlib.sha256(n.encode()).hexdigest())
        docs, total = [], 0
        for name in names:
            try:
                text = zf.read(name).decode("utf-8")
            except UnicodeDecodeError:
                continue
            text = text.replace("\r\n", "\n").replace("\r", "\n")
            if not _usable(name, text):
                continue
            size = len(text.encode("utf-8"))
            if total + size > MAX_PACKAGE_BYTES:
                continue
            docs.append((f"pypi/{pkg.name}/{name}", text))
            total += size
    return docs, licence
