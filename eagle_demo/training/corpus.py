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
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help=f"output dir (default {default_corpus_dir()})")
    ap.add_argument("--no-docs", action="store_true", help="skip Debian python3.11-doc text")
    ap.add_argument("--keep-codec-tables", action="store_true",
                    help="keep the generated encodings/ charmap tables")
    args = ap.parse_args(argv)
    m = build_corpus(args.out, include_docs=not args.no_docs, keep_codec_tables=args.keep_codec_tables)
    out = args.out or default_corpus_dir()
    for split, info in m["splits"].items():
        print(f"{split}: {info['documents']} documents, {info['bytes'] / 1e6:.2f} MB, "
              f"sha256 {info['sha256'][:16]}")
    print(f"corpus written to {out}")


if __name__ == "__main__":
    main()
