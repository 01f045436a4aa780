"""Chat-shaped data for the second-generation pair: instruction-style examples built from the Python
documentation in ``corpus2``, and a chat template for the ``code`` tokenizer.

Examples: every section of a reST document of the training split whose name starts with ``pydoc/``
(the Python 3.11 documentation, its changelogs left out; nothing of the held-out packages, nothing of the
validation split) gives at most one example: the question is made from the section heading
(``"Using Lists as Stacks"`` -> ``"Explain using lists as stacks."``), the answer is the first prose paragraph
under it, with reST roles turned into plain text (``:meth:`append``` -> ```append```); a paragraph ending in
``::`` keeps the literal block that follows (dedented, at most :data:`MAX_BLOCK_LINES` lines). Sections whose
heading or paragraph is too short, too long or still full of markup are skipped. The selection is deterministic:
a SHA-256 of (document name, heading) orders the candidates, and the first ``n`` distinct questions are kept.

Template (:data:`CHAT_TEMPLATE`): no new tokens (the vocabulary is the trained one), plain text markers::

    <|endoftext|>Question: Explain using lists as stacks.
    Answer: The list methods make it very easy ...<|endoftext|>

``add_generation_prompt`` ends the prompt on ``"Answer:"``; the answer's first word carries its own
leading space in the code split, so the prompt ends on a token boundary seen in training.

    python -m eagle_demo.training.chat --corpus ~/.cache/eagle_demo/corpus2 --out out/train2/chat.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import textwrap
from dataclasses import asdict, dataclass
from pathlib import Path

from eagle_demo.training.corpus import SEPARATOR, read_split

DOCS_PREFIX = "pydoc/"
SKIPPED_DOCS = ("pydoc/_sources/whatsnew/",)  # changelogs: a heading there is a release, not a topic
KEEP_CASE = frozenset({"Python", "CPython", "Unicode", "Windows", "Unix", "Linux", "Mac", "macOS", "IDLE", "I/O",
                       "Tk", "Tkinter", "Internet", "Boolean", "Unix-style", "Python's"})
N_EXAMPLES = 1000
MAX_BLOCK_LINES = 12
UNDERLINE_CHARS = "=-~^\"'*+#`:."
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] }}\n\n"
    "{% elif message['role'] == 'user' %}Question: {{ message['content'] }}\n"
    "{% else %}Answer: {{ message['content'] }}" + SEPARATOR + "{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}Answer:{% endif %}"
)
QUESTION_FORMS = ("Explain {}.", "What {} {}?", "Tell me about {}.")
_ROLE = re.compile(r":[\w:.+-]+:`([^`]+)`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_{1,2}")
_TITLE_TARGET = re.compile(r"^(.*?)\s*<[^>]+>$")


@dataclass(frozen=True)
class ChatExample:
    question: str
    answer: str
    source: str  # document name in the corpus manifest
    heading: str


def _role_text(match: re.Match) -> str:
    inner = match.group(1)
    title = _TITLE_TARGET.match(inner)
    if title:
        return f"`{title.group(1)}`" if title.group(1) else "``"
    inner = inner.lstrip("~!")
    return f"`{inner}`"


def plain(text: str) -> str:
    """reST inline markup to plain text: roles and links lose their target, ``x`` becomes `x`."""
    text = _LINK.sub(lambda m: m.group(1), text)
    text = _ROLE.sub(_role_text, text)
    text = text.replace("``", "`")
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\1", text)


def _is_underline(line: str, title: str) -> bool:
    s = line.rstrip()
    return len(s) >= max(3, len(title.rstrip())) and len(set(s)) == 1 and s[0] in UNDERLINE_CHARS


def sections(text: str) -> list[tuple[str, list[str]]]:
    """``(heading, lines after it up to the next heading)`` of a reST document (overlined titles too)."""
    lines = text.split("\n")
    heads = []
    for i in range(len(lines) - 1):
        title = lines[i]
        if title.strip() and not title.startswith((" ", "\t", "..")) and _is_underline(lines[i + 1], title):
            if not _is_underline(title, title):
                heads.append(i)
    out = []
    for k, i in enumerate(heads):
        end = heads[k + 1] - 1 if k + 1 < len(heads) else len(lines)
        out.append((lines[i].strip(), lines[i + 2:max(i + 2, end)]))
    return out


def first_paragraph(body: list[str]) -> str:
    """The first unindented prose paragraph (directives, labels and their indented bodies skipped), with
    the literal block after a paragraph ending in ``::``."""
    i, n = 0, len(body)
    while i < n:
        line = body[i]
        if not line.strip() or line.startswith((" ", "\t")):
            i += 1
            continue
        if line.startswith(".."):
            i += 1
            while i < n and (not body[i].strip() or body[i].startswith((" ", "\t"))):
                i += 1
            continue
        para = []
        while i < n and body[i].strip() and not body[i].startswith((" ", "\t", "..")):
            para.append(body[i].strip())
            i += 1
        text = plain(" ".join(para))
        if not text.endswith("::"):
            return text
        block = []
        while i < n and (not body[i].strip() or body[i].startswith((" ", "\t"))):
            block.append(body[i])
            i += 1
        code = textwrap.dedent("\n".join(block)).strip("\n").split("\n")[:MAX_BLOCK_LINES]
        head = text[:-2].rstrip().rstrip(",;:") + ":"  # "For example::" and "case, ::" -> "...:"
        return head + ("\n\n" + "\n".join("    " + c if c else "" for c in code) if any(code) else "")
    return ""


def _lower_word(word: str) -> str:
    if word in KEEP_CASE or not word[:1].isupper() or not word[1:].islower():
        return word  # "API", "CPython", "McCabe": as written
    return word.lower()


def question_for(heading: str, key: str) -> str:
    title = plain(heading).strip().rstrip(":.")
    if title.endswith("?"):
        return title[0].upper() + title[1:]  # "What is Python?" is a question already
    words = title.split(" ")
    title = " ".join(_lower_word(w) for w in words)  # "Using Lists as Stacks" -> "using lists as stacks"
    forms = QUESTION_FORMS if not words[0].endswith("ing") else QUESTION_FORMS[::2]  # no "What is using ..."
    form = forms[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(forms)]
    if "{} {}" in form:
        last = words[-1]
        plural = last.endswith("s") and not last.endswith(("ss", "us", "is", "'s"))
        return form.format("are" if plural else "is", title)
    return form.format(title)


def usable(heading: str, answer: str) -> bool:
    letters = sum(c.isalpha() for c in heading)
    prose = answer.split("\n\n")[0]
    return (3 <= letters and len(heading) <= 60 and 60 <= len(prose) <= 700 and SEPARATOR not in answer
            and "|" not in heading and "`" not in plain(heading) and not prose.startswith(("+", "=", "*", "-"))
            and prose.count("`") <= 16)


def build_examples(docs: list[tuple[str, str]], n: int = N_EXAMPLES) -> list[ChatExample]:
    """At most ``n`` examples from the ``pydoc/`` documents among ``docs`` (``(name, text)`` pairs)."""
    candidates = []
    for name, text in docs:
        if not name.startswith(DOCS_PREFIX) or name.startswith(SKIPPED_DOCS):
            continue
        for heading, body in sections(text):
            answer = first_paragraph(body)
            if usable(heading, answer):
                key = f"{name}\n{heading}"
                candidates.append((hashlib.sha256(key.encode()).hexdigest(), name, heading, answer))
    out, seen = [], set()
    for _, name, heading, answer in sorted(candidates):
        question = question_for(heading, f"{name}\n{heading}")
        if question.lower() in seen:
            continue
        seen.add(question.lower())
        out.append(ChatExample(question, answer, name, heading))
        if len(out) == n:
            break
    return out


def corpus_docs(corpus: Path, split: str = "train") -> list[tuple[str, str]]:
    """``(name, text)`` of a corpus2 split, names from its manifest."""
    texts = read_split(corpus / f"{split}.txt")
    names = json.loads((corpus / "manifest.json").read_text())["files"][split]
    if len(names) != len(texts):
        raise SystemExit(f"{corpus}: the manifest lists {len(names)} {split} files, {split}.txt has {len(texts)}")
    return list(zip(names, texts))


def render(example: ChatExample, bos: str = SEPARATOR) -> str:
    """The example through :data:`CHAT_TEMPLATE` (same text as ``apply_chat_template``)."""
    return f"{bos}Question: {example.question}\nAnswer: {example.answer}{SEPARATOR}"


def prompt_text(question: str, bos: str = SEPARATOR) -> str:
    return f"{bos}Question: {question}\nAnswer:"


def write_jsonl(examples: list[ChatExample], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(asdict(e)) + "\n" for e in examples), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[ChatExample]:
    return [ChatExample(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line]


def add_template(tokenizer_dir: Path) -> None:
    """Write :data:`CHAT_TEMPLATE` into ``tokenizer_config.json`` of an exported folder."""
    cfg_path = tokenizer_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")


def main(argv: list[str] | None = None) -> None:
    from eagle_demo.training.target2 import default_corpus

    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.chat", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    ap.add_argument("-n", type=int, default=N_EXAMPLES)
    args = ap.parse_args(argv)
    examples = build_examples(corpus_docs(args.corpus), args.n)
    write_jsonl(examples, args.out)
    print(f"{len(examples)} examples from {len({e.source for e in examples})} documents -> {args.out}")


if __name__ == "__main__":
    main()
