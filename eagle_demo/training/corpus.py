"""Build the training corpus for the shipped tiny model pair from text that ships with CPython.

Sources (all local, nothing is downloaded):

* every ``.py`` file of the running interpreter's standard library
  (``sysconfig.get_paths()["stdlib"]``), in sorted path order, EXCLUDING any file below a
  ``test`` / ``tests`` / ``idle_test`` directory, ``site-packages``, ``__pycache__`` and the
  generated charmap-codec tables in ``encodings/`` (70 files, ~1.3 MB of ``'\\x00'  #  0x00 ->
  NULL`` lines that would spend model capacity on lookup tables; ``--keep-codec-tables`` keeps
  them). ``pydoc_data/topics.py`` (~750 KB of reference-manual prose) is included;
* optionally the plain-text docs of Debian's ``python3.11-doc`` package when they are actually
  present (``/usr/share/doc/python3.11-doc/html`` is often a dangling symlink; then it is skipped).

Documents are stored verbatim (newlines normalised to ``\n``, a final newline ensured) and
separated by a line holding only :data:`SEPARATOR`. Every :data:`HOLDOUT_EVERY`-th document
(index ``% 50 == 25`` in sorted order) goes to the validation split, the rest to training.

Output (in ``~/.cache/eagle_demo/corpus/`` by default, never in the repository)::

    train.txt  val.txt  manifest.json

Run ``python -m eagle_demo.training.corpus [--out DIR]``. The output is byte-for-byte
deterministic for a given Python installation; ``manifest.json`` records the file list and the
SHA-256 of both splits.

Second generation (``--generation 2``, written to ``~/.cache/eagle_demo/corpus2``): the same
standard library (no file held out), the reST sources of the Python 3.11 documentation (Debian's
``python3.11-doc``, fetched with ``apt-get download`` and unpacked with ``dpkg-deb`` into the cache
when it is not installed), and the source of the PyPI packages of
:mod:`eagle_demo.training.packages`. Whole packages marked ``holdout`` form the validation split;
no file is ever split. Exact duplicates (SHA-256 of the normalised text) are dropped, the validation
copy winning, so no validation file also appears in training. ``assets/corpus_manifest.json``
records every package (version, licence from its metadata, bytes, split) and the splits' hashes.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

SEPARATOR = "<|endoftext|>"
HOLDOUT_EVERY = 50
HOLDOUT_OFFSET = 25
EXCLUDED_DIRS = frozenset({"test", "tests", "idle_test", "site-packages", "__pycache__"})
DEBIAN_DOC_DIR = Path("/usr/share/doc/python3.11-doc")


def default_cache_dir() -> Path:
    """Root of the eagle_demo cache (``$EAGLE_DEMO_CACHE`` or ``~/.cache/eagle_demo``)."""
    env = os.environ.get("EAGLE_DEMO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo"


def default_corpus_dir() -> Path:
    return default_cache_dir() / "corpus"


def _is_codec_table(rel: str, text: str) -> bool:
    return rel.startswith("encodings/") and "decoding_table = (" in text


def stdlib_documents(keep_codec_tables: bool = False) -> list[tuple[str, str]]:
    """Return ``(relative_path, text)`` for the selected standard-library sources, sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    rels = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in EXCLUDED_DIRS]
        for name in filenames:
            if name.endswith(".py"):
                rels.append((Path(dirpath) / name).relative_to(root).as_posix())
    docs = []
    for rel in sorted(rels):
        if "lib2to3/tests" in rel:  # belt and braces; already pruned above
            continue
        try:
            text = (root / rel).read_bytes().decode("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not keep_codec_tables and _is_codec_table(rel, text):
            continue
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if SEPARATOR in text or not text.strip():
            continue
        docs.append((f"stdlib/{rel}", text))
    return docs


_TAG_RE = re.compile(r"<[^>]+>")
_DROP_RE = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)


def _html_to_text(raw: str) -> str:
    raw = _DROP_RE.sub("", raw)
    raw = re.sub(r"<br\s*/?>|</p>|</div>|</h\d>|</li>|</pre>|</tr>", "\n", raw, flags=re.I)
    text = html.unescape(_TAG_RE.sub("", raw))
    lines = [ln.rstrip() for ln in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
    return text.strip() + "\n"


def debian_doc_documents(doc_dir: Path = DEBIAN_DOC_DIR) -> list[tuple[str, str]]:
    """Plain-text Python docs from Debian's ``python3.11-doc`` if installed (else ``[]``)."""
    if not doc_dir.exists():
        return []
    txt = sorted(p for p in doc_dir.rglob("*.txt") if p.is_file())
    if txt:
        files, convert = txt, False
    else:
        files = sorted(p for p in doc_dir.rglob("*.html") if p.is_file() and "_static" not in p.parts)
        convert = True
    docs = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if convert:
            text = _html_to_text(text)
        if SEPARATOR in text or len(text.strip()) < 200:
            continue
        docs.append((f"pydoc/{path.relative_to(doc_dir).as_posix()}", text))
    return docs


def format_document(name: str, text: str) -> str:
    """Documents are stored verbatim (the file list lives in ``manifest.json``)."""
    return text if text.endswith("\n") else text + "\n"


def split_documents(docs: list[tuple[str, str]]) -> tuple[list, list]:
    train, val = [], []
    for i, doc in enumerate(docs):
        (val if i % HOLDOUT_EVERY == HOLDOUT_OFFSET else train).append(doc)
    return train, val


def join_documents(docs: list[tuple[str, str]]) -> str:
    return f"{SEPARATOR}\n".join(format_document(n, t) for n, t in docs)


def read_split(path: Path) -> list[str]:
    """Read a split file back into a list of documents (inverse of :func:`join_documents`)."""
    text = Path(path).read_text(encoding="utf-8")
    return [d for d in text.split(f"{SEPARATOR}\n") if d]


def build_corpus(out_dir: Path | None = None, include_docs: bool = True,
                 keep_codec_tables: bool = False) -> dict:
    out_dir = Path(out_dir) if out_dir else default_corpus_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    docs = stdlib_documents(keep_codec_tables)
    if include_docs:
        docs += debian_doc_documents()
    train, val = split_documents(docs)
    manifest = {"python": sys.version.split()[0], "stdlib": sysconfig.get_paths()["stdlib"],
                "separator": SEPARATOR, "holdout": f"index % {HOLDOUT_EVERY} == {HOLDOUT_OFFSET}",
                "splits": {}}
    for split, items in (("train", train), ("val", val)):
        data = join_documents(items).encode("utf-8")
        (out_dir / f"{split}.txt").write_bytes(data)
        manifest["splits"][split] = {"documents": len(items), "bytes": len(data),
                                     "sha256": hashlib.sha256(data).hexdigest(),
                                     "files": [n for n, _ in items]}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def default_corpus2_dir() -> Path:
    return default_cache_dir() / "corpus2"


def fetch_debian_docs(cache: Path) -> Path | None:
    """The html folder of python3.11-doc: installed, or downloaded with apt and unpacked into ``cache``."""
    if (DEBIAN_DOC_DIR / "html").exists() and any((DEBIAN_DOC_DIR / "html").rglob("*.txt")):
        return DEBIAN_DOC_DIR / "html"
    root = cache / "python3.11-doc"
    html_dir = root / "usr/share/doc/python3.11/html"
    if html_dir.exists():
        return html_dir
    cache.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["apt-get", "download", "python3.11-doc"], cwd=cache, check=True, capture_output=True)
        deb = sorted(cache.glob("python3.11-doc_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError, IndexError) as exc:
        print(f"python3.11-doc unavailable ({exc}); building without the docs", flush=True)
        return None
    return html_dir if html_dir.exists() else None


def _dedup(docs: list[tuple[str, str]], seen: set[str]) -> tuple[list[tuple[str, str]], int]:
    kept, dropped = [], 0
    for name, text in docs:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in seen:
            dropped += 1
            continue
        seen.add(digest)
        kept.append((name, text))
    return kept, dropped


def build_corpus2(out_dir: Path | None = None, manifest_path: Path | None = None) -> dict:
    """Second-generation corpus: stdlib + docs + PyPI packages, whole packages held out."""
    from eagle_demo.training.packages import MAX_PACKAGE_BYTES, PACKAGES, download_wheel, package_documents

    out_dir = Path(out_dir) if out_dir else default_corpus2_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    val, train, rows, dropped = [], [], [], 0
    packages = sorted(PACKAGES, key=lambda p: (not p.holdout, p.name))  # validation first: its copy wins
    for pkg in packages:
        docs, licence = package_documents(pkg, download_wheel(pkg, out_dir / "wheels"))
        docs, n = _dedup(docs, seen)
        dropped += n
        (val if pkg.holdout else train).extend(docs)
        rows.append({"package": pkg.name, "version": pkg.version, "licence": pkg.licence,
                     "licence_metadata": licence, "split": "val" if pkg.holdout else "train",
                     "files": len(docs), "bytes": sum(len(t.encode("utf-8")) for _, t in docs)})
    doc_dir = fetch_debian_docs(out_dir / "debian")
    base = stdlib_documents() + (debian_doc_documents(doc_dir) if doc_dir else [])
    base, n = _dedup(base, seen)
    dropped += n
    train = base + train
    rows.sort(key=lambda r: r["package"])
    manifest = {"generation": 2, "python": sys.version.split()[0], "separator": SEPARATOR,
                "max_package_bytes": MAX_PACKAGE_BYTES, "exact_duplicates_dropped": dropped,
                "stdlib": {"files": sum(n.startswith("stdlib/") for n, _ in base),
                           "bytes": sum(len(t.encode()) for n, t in base if n.startswith("stdlib/"))},
                "docs": {"source": "Debian python3.11-doc, html/_sources/*.rst.txt",
                         "files": sum(n.startswith("pydoc/") for n, _ in base),
                         "bytes": sum(len(t.encode()) for n, t in base if n.startswith("pydoc/"))},
                "packages": rows, "splits": {}}
    for split, items in (("train", train), ("val", val)):
        data = join_documents(items).encode("utf-8")
        (out_dir / f"{split}.txt").write_bytes(data)
        manifest["splits"][split] = {"documents": len(items), "bytes": len(data),
                                     "sha256": hashlib.sha256(data).hexdigest()}
    files = {split: [n for n, _ in items] for split, items in (("train", train), ("val", val))}
    (out_dir / "manifest.json").write_text(json.dumps({**manifest, "files": files}, indent=1) + "\n")
    if manifest_path is not None:
        Path(manifest_path).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help=f"output dir (default {default_corpus_dir()})")
    ap.add_argument("--no-docs", action="store_true", help="skip Debian python3.11-doc text")
    ap.add_argument("--keep-codec-tables", action="store_true",
                    help="keep the generated encodings/ charmap tables")
    ap.add_argument("--generation", type=int, choices=(1, 2), default=1,
                    help="1: stdlib + docs (the shipped target's corpus); 2: + PyPI packages (corpus2)")
    ap.add_argument("--manifest", type=Path, default=None,
                    help="generation 2: also write the package manifest here (assets/corpus_manifest.json)")
    args = ap.parse_args(argv)
    if args.generation == 2:
        m = build_corpus2(args.out, args.manifest)
        for split, info in m["splits"].items():
            print(f"{split}: {info['documents']} documents, {info['bytes'] / 1e6:.2f} MB, "
                  f"sha256 {info['sha256'][:16]}")
        print(f"{len(m['packages'])} packages, {m['exact_duplicates_dropped']} exact duplicates dropped; "
              f"corpus written to {args.out or default_corpus2_dir()}")
        return
    m = build_corpus(args.out, include_docs=not args.no_docs, keep_codec_tables=args.keep_codec_tables)
    out = args.out or default_corpus_dir()
    for split, info in m["splits"].items():
        print(f"{split}: {info['documents']} documents, {info['bytes'] / 1e6:.2f} MB, "
              f"sha256 {info['sha256'][:16]}")
    print(f"corpus written to {out}")


if __name__ == "__main__":
    main()
