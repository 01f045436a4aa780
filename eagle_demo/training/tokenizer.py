"""Train the byte-level BPE tokenizer shared by the tiny target and its draft heads.

* ``tokenizers`` BPE model over bytes with the ``ByteLevel`` decoder, so
  ``decode(encode(x)) == x`` for any Unicode string. Pre-tokenisation (``--split``):

  - ``gpt2`` (default; the shipped ``assets/tiny-target`` uses it): the GPT-2 regex of the
    ``ByteLevel`` pre-tokenizer (no prefix space). A line break merges with the indentation that
    follows it (``"):" | "\\n   " | " return"``), so a prompt that ends in ``"\\n"`` ends on a
    token the model only ever saw before an unindented line: ``"def fibonacci(n):\\n"`` is
    continued with another unindented ``def``. Prompts that end on a code character are fine.
  - ``llama3``: Llama-3's split regex (:data:`SPLIT_PATTERN`) before ``ByteLevel``; line breaks
    never merge with the following indentation, so the same prompt gets an indented body.
    Written to ``~/.cache/eagle_demo/tokenizer-llama3`` by default.
  - ``code`` (second generation, :data:`CODE_SPLIT_PATTERN`): every line break is a token of its
    own (``"\\n"``, or ``"\\r\\n"``), the indentation at the start of a line is one pre-token of its own
    (``"):" | "\\n" | "    " | "return"``), and runs of spaces inside a line stay apart from the
    word after them, as in Llama-3. So no token ever holds a line break together with anything
    else, a prompt ending in ``":\\n"`` or ``":\\n    "`` ends on a boundary seen in training, and the
    model picks the indentation as one token. Written to ``~/.cache/eagle_demo/tokenizer-code``.
* vocabulary of :data:`VOCAB_SIZE` = 4096 entries (the 256 byte symbols are always present);
* one special token, ``<|endoftext|>`` with id 0, used as BOS, EOS and pad. Like the Llama
  tokenizers, a BOS is prepended by the post-processor (``add_bos_token: true``), so
  ``tokenizer("def f():")`` yields ``[0, ...]``; documents in the training stream are separated by
  the same token (``... last line\\n<|endoftext|>first line ...``).

Trained on the training split written by :mod:`eagle_demo.training.corpus` only. The output
folder holds ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json`` and loads
with ``transformers.AutoTokenizer.from_pretrained(folder)`` as a ``PreTrainedTokenizerFast``.

Run ``python -m eagle_demo.training.tokenizer [--split gpt2|llama3] [--corpus DIR] [--out DIR]``
(default output ``~/.cache/eagle_demo/tokenizer/``; the target export copies the files next to
the model). Training is deterministic: the default run reproduces
``assets/tiny-target/tokenizer.json`` byte for byte.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from eagle_demo.training.corpus import SEPARATOR, default_cache_dir, default_corpus_dir, read_split

VOCAB_SIZE = 4096
SPLITS = ("gpt2", "llama3", "code")
DEFAULT_SPLIT = "gpt2"
# Llama-3's pre-tokenisation pattern (``--split llama3``). Unlike GPT-2's, a line break never merges with the
# indentation that follows it ("):\n" | "   " | " return"), so a prompt that ends in "\n" (like
# "def fibonacci(n):\n") ends on the same token boundary the model saw in training and the model
# goes on to indent the body instead of believing the next line is unindented.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Second generation (``--split code``): a line break alone; the indentation that starts a line alone;
# otherwise Llama-3's rules without its "punctuation + line breaks" glue.
CODE_SPLIT_PATTERN = (
    r"\r?\n|(?:^|(?<=\n))[^\S\r\n]+|(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+|[^\S\r\n]+(?!\S)|[^\S\r\n]+"
)
SPECIAL_TOKEN = SEPARATOR  # "<|endoftext|>"
SPECIAL_ID = 0
MODEL_MAX_LENGTH = 2048

ROUND_TRIP_SAMPLES = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "import os\n\n\nclass Stack:\n\tdef push(self, x):\t# tab-indented\r\n\t\tself.items.append(x)  \n",
    "    \n\n  trailing spaces   \n\n\n",
    " leading space, 'quotes', \"double\", `back` and \\backslash\\ {braces} [1, 2.5e-3, 0x1F]",
    "unicode: héllo wörld — naïve café, 日本語のテキスト, emoji 🐍🚀, math ∑∫√∞, Ω≈ç",
    "\x00\x01 control \x7f bytes and a very long run " + "=" * 300,
    "",
]


def default_tokenizer_dir(split: str = DEFAULT_SPLIT) -> Path:
    return default_cache_dir() / ("tokenizer" if split == DEFAULT_SPLIT else f"tokenizer-{split}")


def build_tokenizer(split: str = DEFAULT_SPLIT) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if split == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif split in ("llama3", "code"):
        pattern = SPLIT_PATTERN if split == "llama3" else CODE_SPLIT_PATTERN
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(corpus_dir: Path | None = None, vocab_size: int = VOCAB_SIZE,
                    split: str = DEFAULT_SPLIT) -> Tokenizer:
    corpus_dir = Path(corpus_dir) if corpus_dir else default_corpus_dir()
    docs = read_split(corpus_dir / "train.txt")
    tok = build_tokenizer(split)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[SPECIAL_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    assert tok.token_to_id(SPECIAL_TOKEN) == SPECIAL_ID, "special token must have id 0"
    tok.post_processor = processors.TemplateProcessing(
        single=f"{SPECIAL_TOKEN}:0 $A:0",
        pair=f"{SPECIAL_TOKEN}:0 $A:0 {SPECIAL_TOKEN}:1 $B:1",
        special_tokens=[(SPECIAL_TOKEN, SPECIAL_ID)],
    )
    return tok


def tokenizer_config() -> dict:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIAL_TOKEN,
        "eos_token": SPECIAL_TOKEN,
        "pad_token": SPECIAL_TOKEN,
        "unk_token": None,
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": MODEL_MAX_LENGTH,
        "padding_side": "left",
        "added_tokens_decoder": {
            str(SPECIAL_ID): {"content": SPECIAL_TOKEN, "lstrip": False, "normalized": False,
                              "rstrip": False, "single_word": False, "special": True},
        },
    }


def save_tokenizer(tok: Tokenizer, out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    special = {"bos_token": SPECIAL_TOKEN, "eos_token": SPECIAL_TOKEN, "pad_token": SPECIAL_TOKEN}
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return out_dir


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def line_boundaries_stable(hf) -> bool:
    """Whether prompts ending in a line break tokenize as a prefix of their continuation."""
    for prompt, rest in (("def fibonacci(n):\n", "    if n < 2:\n"), ("import os\n\n", "import sys\n"),
                         ("class Stack:\n", '    """A stack."""\n'), ("x = 1\n", "    y = 2\n")):
        a, b = hf(prompt)["input_ids"], hf(prompt + rest)["input_ids"]
        if b[:len(a)] != a:
            return False
    return True


def glued_line_breaks(tok: Tokenizer) -> list[str]:
    """Vocabulary entries that hold a line break together with anything else (decoded text)."""
    out = []
    for idx in tok.get_vocab().values():
        text = tok.decode([idx])
        if idx != SPECIAL_ID and "\n" in text and text not in ("\n", "\r\n"):
            out.append(text)
    return out


def verify_tokenizer(folder: Path, extra_samples: list[str] = (), split: str = DEFAULT_SPLIT,
                     vocab_size: int = VOCAB_SIZE) -> dict:
    """Load ``folder`` through ``AutoTokenizer`` and check special tokens and round trips."""
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(folder))
    assert hf.is_fast, type(hf)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert getattr(hf, name) == SPECIAL_ID, (name, getattr(hf, name))
    assert len(hf) == vocab_size, len(hf)
    raw = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    for text in list(ROUND_TRIP_SAMPLES) + list(extra_samples):
        ids = hf(text)["input_ids"]
        assert ids[:1] == [SPECIAL_ID], ids[:3]
        assert hf.decode(ids, skip_special_tokens=True) == text, repr(text[:60])
        assert hf.decode(ids[1:]) == text, repr(text[:60])
        assert hf(text, add_special_tokens=False)["input_ids"] == ids[1:]
        assert raw.decode(raw.encode(text, add_special_tokens=False).ids) == text
    stable = line_boundaries_stable(hf)
    if split in ("llama3", "code"):
        assert stable, f"{split} split must keep line breaks apart from indentation"
    if split == "code":
        assert not glued_line_breaks(raw), glued_line_breaks(raw)[:5]
    # the separator inside text is recognised as the single special token
    ids = hf("a\n" + SPECIAL_TOKEN + "b", add_special_tokens=False)["input_ids"]
    assert SPECIAL_ID in ids, ids
    return {"class": type(hf).__name__, "vocab": len(hf), "line_boundaries_stable": stable}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=None, help=f"corpus dir (default {default_corpus_dir()})")
    ap.add_argument("--out", type=Path, default=None,
                    help="output dir (default ~/.cache/eagle_demo/tokenizer, or tokenizer-<split>)")
    ap.add_argument("--split", choices=SPLITS, default=DEFAULT_SPLIT, help="pre-tokenisation regex")
    ap.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    args = ap.parse_args(argv)
    corpus_dir = args.corpus or default_corpus_dir()
    out = args.out or default_tokenizer_dir(args.split)
    tok = train_tokenizer(corpus_dir, args.vocab_size, args.split)
    save_tokenizer(tok, out)
    val_docs = read_split(Path(corpus_dir) / "val.txt")
    info = verify_tokenizer(out, extra_samples=val_docs[:5], split=args.split, vocab_size=args.vocab_size)
    stats = {}
    for split in ("train", "val"):
        text = (Path(corpus_dir) / f"{split}.txt").read_text(encoding="utf-8")
        n_tok = len(tok.encode(text, add_special_tokens=False).ids)
        stats[split] = (len(text), n_tok)
        print(f"{split}: {len(text):,} chars -> {n_tok:,} tokens ({len(text) / n_tok:.2f} chars/token)")
    print(f"tokenizer ({info['class']}, vocab {info['vocab']}, split {args.split}) written to {out}; "
          f"round trips OK; prompts ending in a line break keep their token boundary: "
          f"{info['line_boundaries_stable']}")


if __name__ == "__main__":
    main()
