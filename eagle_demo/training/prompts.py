"""Chat prompts for self-distillation, gathered from sources on this machine, never from benchmark sets.

A head learns what its target says, so the prompts only have to cover what people ask a chat assistant:
writing, role-play, reasoning, math, code, extraction, science, humanities, everyday questions, and
follow-up turns. Each conversation is a list of user turns (the first request, then follow-ups); the
target writes every assistant turn itself (`training.distill`).

Sources (each named with its licence in the manifest this module writes):
- WordNet 3.0 (Debian's `wordnet-base`, Princeton's WordNet licence): familiar nouns by lexicographer
  file (animals, plants, substances, artifacts, foods, people, events, ...) and their glosses, as topics.
- The Python 3.11 documentation (Debian's `python3.11-doc`, PSF licence): the FAQ's questions, and
  paragraphs of the library reference as passages to extract from or summarise.
- Templates and generators written for this project: the request forms, the role-play situations, the
  follow-ups, arithmetic and logic problems with numbers drawn here.

No public benchmark prompt set (MT-bench, Spec-Bench, AlpacaEval, GSM8K, ...) is read: others measure
heads on them. The held-out split is chosen by a hash of the conversation, so it is stable whatever the
order of generation.

    python -m eagle_demo.training.prompts --out assets/chat_prompts     # fetches the two .debs once
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import subprocess
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from .corpus import default_cache_dir

__all__ = ["Conversation", "SOURCES", "build", "read_jsonl", "write_jsonl", "main"]

SEED = 2026
HELDOUT_FRACTION = 0.04
DEBS = {"wordnet": "wordnet-base", "pydoc": "python3.11-doc"}
SOURCES = [
    {"name": "WordNet 3.0", "debian_package": "wordnet-base", "licence": "WordNet 3.0 licence (Princeton University; "
     "permissive, BSD-like)", "used_for": "topics (familiar nouns by lexicographer file) and their glosses"},
    {"name": "Python 3.11 documentation", "debian_package": "python3.11-doc", "licence": "PSF License Agreement "
     "(documentation); Zero-Clause BSD for its code examples", "used_for": "FAQ questions; library-reference "
     "paragraphs as passages to extract from and summarise"},
    {"name": "EAGLE Playground templates", "debian_package": None, "licence": "this project's own text",
     "used_for": "request forms, role-play situations, follow-up turns, generated math and logic problems"},
]


@dataclass(frozen=True)
class Conversation:
    """The user's side of one conversation: its first request and the follow-ups, in order."""

    category: str
    turns: tuple[str, ...]
    source: str

    @property
    def key(self) -> str:
        return hashlib.sha256("\x1f".join(self.turns).encode()).hexdigest()[:16]

    def heldout(self) -> bool:
        return int(self.key, 16) % 10_000 < HELDOUT_FRACTION * 10_000


# ---------------------------------------------------------------------------------------------
# sources

def fetch_debs(cache: Path) -> dict[str, Path]:
    """Unpacked Debian packages (downloaded with apt-get once), by DEBS key."""
    out = {}
    for key, package in DEBS.items():
        root = cache / package
        if not (root / ".done").is_file():
            root.mkdir(parents=True, exist_ok=True)
            subprocess.run(["apt-get", "download", package], cwd=root, check=True, capture_output=True)
            deb = next(root.glob(f"{package}_*.deb"))
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root / "x")], check=True)
            (root / ".done").write_text(deb.name)
        out[key] = root / "x"
    return out


LEXFILES = {5: "animal", 6: "artifact", 8: "body", 9: "cognition", 10: "communication", 11: "event", 12: "feeling",
            13: "food", 14: "group", 15: "location", 17: "object", 18: "person", 19: "phenomenon", 20: "plant",
            22: "process", 26: "state", 27: "substance", 28: "time", 4: "act"}


def wordnet_topics(root: Path, min_tagged: int = 1) -> dict[str, list[tuple[str, str]]]:
    """Familiar nouns (their most frequent sense tagged at least `min_tagged` times) by lexicographer file,
    each with the gloss of that sense."""
    base = root / "usr/share/wordnet"
    first_sense: dict[str, tuple[int, str]] = {}
    for line in (base / "index.noun").read_text(errors="replace").splitlines():
        if line.startswith(" "):
            continue
        parts = line.split()
        lemma, _synsets, n_ptr = parts[0], int(parts[2]), int(parts[3])
        tagged = int(parts[5 + n_ptr])
        if tagged >= min_tagged and lemma.isascii() and lemma.islower() and len(lemma) > 2:
            first_sense[lemma] = (tagged, parts[6 + n_ptr])
    glosses: dict[str, tuple[int, str]] = {}
    for line in (base / "data.noun").read_text(errors="replace").splitlines():
        if line.startswith(" "):
            continue
        head, _, gloss = line.partition(" | ")
        parts = head.split()
        gloss = gloss.split(";")[0].strip()
        glosses[parts[0]] = (int(parts[1]), gloss)
    topics: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for lemma, (_, offset) in sorted(first_sense.items()):
        lexfile, gloss = glosses.get(offset, (-1, ""))
        if lexfile in LEXFILES:
            topics[LEXFILES[lexfile]].append((lemma.replace("_", " "), gloss))
    return dict(topics)


def _rst_plain(text: str) -> str:
    text = re.sub(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*<[^>]*>`_+", r"\1", text)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"\*\*?([^*]+)\*\*?", r"\1", text)
    return " ".join(text.replace("`", "").split())


def faq_questions(root: Path) -> list[str]:
    """The Python FAQ's question headings."""
    out = []
    for path in sorted((root / "usr/share/doc/python3.11/html/_sources/faq").glob("*.rst.txt")):
        lines = path.read_text(errors="replace").splitlines()
        for title, under in zip(lines, lines[1:]):
            if title.strip().endswith("?") and under.strip() and set(under.strip()) <= set("-=^~\"'"):
                out.append(_rst_plain(title.strip()))
    return out


def doc_passages(root: Path, low: int = 350, high: int = 900) -> list[tuple[str, str]]:
    """(section title, paragraph) from the library reference and tutorial: plain prose of a useful length."""
    out = []
    docs = root / "usr/share/doc/python3.11/html/_sources"
    for path in sorted(list((docs / "library").glob("*.rst.txt")) + list((docs / "tutorial").glob("*.rst.txt"))):
        title = path.name.split(".")[0]
        for block in path.read_text(errors="replace").split("\n\n"):
            lines = block.strip().splitlines()
            if not lines or any(ln.startswith((" ", "..", "*", "-", ">>>", "=", "+", "|")) for ln in lines):
                continue
            text = _rst_plain(" ".join(lines))
            if low <= len(text) <= high and text[-1] in ".)" and "::" not in text:
                out.append((title, text))
    return out


# ---------------------------------------------------------------------------------------------
# requests

WRITING = ["Write a short poem about {t}.", "Write a haiku about {t}.",
           "Write a short story in which {a} plays a part.",
           "Write a friendly email inviting a friend to learn about {t}.", "Write a product description for {a}.",
           "Write a limerick about {t}.", "Write a paragraph describing {a} to a child.",
           "Write a catchy slogan for a shop that sells {p}.", "Write a four-line rhyme about {t} for a birthday card.",
           "Write a short diary entry from someone who just saw {a} for the first time."]
ROLEPLAY = ["You are {a}. Introduce yourself and describe a typical day at work.",
            "Pretend you are {a} giving advice to a young person starting out. What do you say?",
            "Act as {a}. A customer asks you what you like most about your job. Answer in character.",
            "Imagine you are {a} writing a letter to your younger self. Write it.",
            "Role-play: you are {a} and I am a visitor who knows nothing about your work. Greet me and explain "
            "what you do."]
SCIENCE = ["What is {a}?", "Explain how {t} works.", "Why is {t} important?", "What are the main features of {a}?",
           "Describe {a} in simple terms.", "How would you explain {t} to a ten-year-old?",
           "What is the difference between {a} and {b}?", "Give three interesting facts about {t}."]
HUMANITIES = ["What does the word \"{t}\" mean, and how is it used?", "Explain the idea of {t}.",
              "What role has {t} played in history?", "How do different cultures think about {t}?",
              "Write a short essay on {t}.", "What are the arguments for and against {t}?"]
EVERYDAY = ["How do I take care of {a}?", "Give me some tips for choosing {a}.", "What can I cook with {t}?",
            "How do I clean {a}?", "What should I know before buying {a}?", "Suggest a weekend plan that involves {t}.",
            "How can I save money on {t}?", "What is a good way to store {t}?"]
CODE = ["Write a Python function that {d}", "Write a {lang} function that {d}", "How do I {v} in Python?",
        "Explain this Python idea: {t}.",
        "Write a Python program that counts how many times each word appears in a text.",
        "What is the difference between a list and a tuple in Python?"]
CODE_TASKS = ["reverses a string", "checks whether a number is prime", "returns the largest item of a list",
              "sums the digits of an integer", "removes duplicates from a list while keeping the order",
              "counts the vowels in a string", "converts Celsius to Fahrenheit", "merges two sorted lists",
              "computes the factorial of n", "checks whether a word is a palindrome", "flattens a nested list",
              "returns the n-th Fibonacci number", "finds the second smallest number in a list",
              "capitalizes the first letter of every word", "reads a file and returns its number of lines",
              "groups words by their first letter", "returns the common elements of two lists",
              "validates that a string looks like an email address", "rotates a list by k places",
              "computes the average of a list of numbers", "sorts a list of dictionaries by a key",
              "converts a Roman numeral to an integer", "finds the longest word in a sentence"]
LANGS = ["JavaScript", "C", "Rust", "Java", "Go"]
CODE_VERBS = ["read a CSV file", "sort a dictionary by value", "download a web page", "measure how long code takes",
              "write a unit test", "handle an exception", "copy a file", "format a date", "parse JSON",
              "make a class", "use a list comprehension", "generate random numbers", "join paths", "use a generator"]
EXTRACTION = ["Here is a passage:\n\n{p}\n\nList the key terms it mentions.",
              "Summarize this text in two sentences:\n\n{p}", "Read this and answer: what is it about?\n\n{p}",
              "Extract every function or module name from this text:\n\n{p}",
              "Turn this passage into three bullet points:\n\n{p}",
              "Definition: {t} is {g}.\n\nRewrite this definition in your own words and give an example."]
FOLLOW_UPS = {
    "any": ["Can you explain that more simply?", "Can you give me an example?", "Can you make it shorter?",
            "Why is that?", "Summarize your answer in one sentence.", "What else should I know about this?",
            "Thanks! Can you say more about the first point?", "Can you put that in a list?",
            "Is there anything people often get wrong about this?", "How would you explain it to a friend?"],
    "writing": ["Make it funnier.", "Now write it from a different point of view.", "Give it a title.",
                "Make it rhyme.", "Can you make it longer?"],
    "math": ["Can you check your answer?", "Explain each step.", "What if the numbers were doubled?"],
    "code": ["Can you add comments to the code?", "How would I test this?", "Can you make it faster?",
             "What happens if the input is empty?"],
    "roleplay": ["What is the hardest part of your job?", "Tell me a story from your work.",
                 "What advice would you give me?"],
}


def _article(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def math_problem(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 60), rng.randint(2, 30), rng.randint(2, 12)
    item = rng.choice(["apples", "books", "pencils", "marbles", "tickets", "cookies", "stamps", "coins"])
    name = rng.choice(["Ana", "Ben", "Chloe", "Dev", "Ema", "Finn", "Gita", "Hugo", "Iris", "Jon", "Kai", "Lea"])
    forms = [
        f"{name} has {a} {item} and buys {b} more, then gives away {c}. How many {item} does {name} have now?",
        f"A box holds {c} {item}. How many boxes are needed for {a * c + rng.randint(1, c - 1)} {item}?",
        f"What is {a} times {b}, plus {c}?", f"What is {rng.randint(5, 40)}% of {rng.randint(2, 50) * 10}?",
        f"Solve for x: {c}x + {b} = {c * a + b}.",
        f"A train travels {a * 10} km in {c} hours. What is its average speed?",
        f"If {c} workers build a wall in {a} days, how long do {c * 2} workers take at the same rate?",
        f"What is the area of a rectangle {a} cm long and {b} cm wide?",
        f"{name} saves {b} dollars a week. How many weeks until {name} has {b * a} dollars?",
        f"Is {a * b + 1} a prime number? Explain.", f"Convert {a} kilometres to metres and to miles.",
        f"The sum of two numbers is {a + b} and their difference is {abs(a - b)}. What are the numbers?"]
    return rng.choice(forms)


def logic_problem(rng: random.Random, people: list[str]) -> str:
    a, b, c = rng.sample(people, 3)
    forms = [f"{a} is taller than {b}, and {b} is taller than {c}. Who is the shortest?",
             f"If every {a} is a {b}, and no {b} is a {c}, can a {a} be a {c}? Explain your reasoning.",
             f"A {a}, a {b} and a {c} stand in a line. The {a} is not first, and the {c} is last. What is the order?",
             f"Which is the odd one out: {a}, {b}, {c}, or a triangle? Explain.",
             f"I am thinking of a job. It is not {_article(a)}, and it involves working with people. Ask me questions "
             "to guess it, one at a time.",
             f"If it takes a {a} 5 minutes to make one widget, how long do 5 of them take to make 5 widgets?"]
    return rng.choice(forms)


def build(topics: dict[str, list[tuple[str, str]]], faq: list[str], passages: list[tuple[str, str]],
          n: int = 6000, seed: int = SEED) -> list[Conversation]:
    """`n` conversations, categories in fixed shares, each with 0 to 4 follow-ups (more for short requests)."""
    rng = random.Random(seed)
    pick = lambda *files: rng.choice([w for f in files for w, _ in topics.get(f, [])])  # noqa: E731
    shares = {"writing": 12, "roleplay": 8, "reasoning": 8, "math": 12, "code": 14, "extraction": 10, "science": 12,
              "humanities": 10, "everyday": 14}
    people = [w for w, _ in topics.get("person", [])]
    out = []
    seen = set()
    while len(out) < n:
        cat = rng.choices(list(shares), weights=list(shares.values()))[0]
        source = "templates"
        if cat == "writing":
            t = pick("animal", "plant", "phenomenon", "feeling", "object", "time", "artifact")
            first = rng.choice(WRITING).format(t=t, a=_article(t), p=t + "s")
            source = "wordnet+templates"
        elif cat == "roleplay":
            first = rng.choice(ROLEPLAY).format(a=_article(rng.choice(people)))
            source = "wordnet+templates"
        elif cat == "reasoning":
            first = logic_problem(rng, people)
            source = "wordnet+templates"
        elif cat == "math":
            first = math_problem(rng)
        elif cat == "code":
            r = rng.random()
            if r < 0.3 and faq:
                first, source = rng.choice(faq), "pydoc-faq"
            else:
                first = rng.choice(CODE).format(d=rng.choice(CODE_TASKS) + ".", v=rng.choice(CODE_VERBS),
                                                t=rng.choice(CODE_VERBS), lang=rng.choice(LANGS))
        elif cat == "extraction":
            form = rng.choice(EXTRACTION)
            if "{g}" in form:
                kinds = ("substance", "artifact", "cognition", "process")
                t, g = rng.choice([x for f in kinds for x in topics.get(f, [])])
                first, source = form.format(t=t, g=g), "wordnet+templates"
            else:
                first, source = form.format(p=rng.choice(passages)[1]), "pydoc+templates"
        elif cat == "science":
            t = pick("animal", "plant", "substance", "phenomenon", "process", "body", "object")
            b = pick("animal", "plant", "substance", "phenomenon", "process", "body", "object")
            first, source = rng.choice(SCIENCE).format(t=t, a=_article(t), b=_article(b)), "wordnet+templates"
        elif cat == "humanities":
            t = pick("communication", "cognition", "event", "group", "act", "state")
            first, source = rng.choice(HUMANITIES).format(t=t), "wordnet+templates"
        else:
            t = pick("food", "artifact", "location", "time")
            first, source = rng.choice(EVERYDAY).format(t=t, a=_article(t)), "wordnet+templates"
        n_follow = rng.choices([0, 1, 2, 3, 4], weights=[2, 3, 3, 3, 2])[0]
        pool = FOLLOW_UPS["any"] + FOLLOW_UPS.get(cat, [])
        turns = (first, *rng.sample(pool, n_follow))
        if turns in seen:
            continue
        seen.add(turns)
        out.append(Conversation(cat, turns, source))
    return out


def write_jsonl(conversations: list[Conversation], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for conv in conversations:
            fh.write(json.dumps({**asdict(conv), "turns": list(conv.turns)}) + "\n")


def read_jsonl(path: Path) -> list[Conversation]:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [Conversation(r["category"], tuple(r["turns"]), r.get("source", "")) for r in rows]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.prompts", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="assets/chat_prompts", help="folder for train.jsonl, heldout.jsonl, manifest.json")
    ap.add_argument("-n", type=int, default=6000, help="conversations in all (about 4%% held out)")
    ap.add_argument("--cache", default=str(default_cache_dir() / "debs"))
    args = ap.parse_args(argv)
    roots = fetch_debs(Path(args.cache))
    topics = wordnet_topics(roots["wordnet"])
    faq, passages = faq_questions(roots["pydoc"]), doc_passages(roots["pydoc"])
    conversations = build(topics, faq, passages, args.n)
    train = [c for c in conversations if not c.heldout()]
    heldout = [c for c in conversations if c.heldout()]
    out = Path(args.out)
    write_jsonl(train, out / "train.jsonl")
    write_jsonl(heldout, out / "heldout.jsonl")
    counts = defaultdict(int)
    for c in conversations:
        counts[c.category] += 1
    manifest = {"sources": SOURCES, "seed": SEED, "conversations": len(conversations), "train": len(train),
                "heldout": len(heldout), "by_category": dict(sorted(counts.items())),
                "user_turns": sum(len(c.turns) for c in conversations),
                "topics_by_file": {k: len(v) for k, v in sorted(topics.items())}, "faq_questions": len(faq),
                "doc_passages": len(passages),
                "excluded": "no public benchmark prompt set (MT-bench, Spec-Bench, AlpacaEval, GSM8K, ...) is read"}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps({k: manifest[k] for k in ("conversations", "train", "heldout", "by_category")}))


if __name__ == "__main__":
    main()
