"""The chat-shaped examples of the second-generation pair (eagle_demo.training.chat): deterministic, never
empty, built from the training split's Python documentation only, and rendered exactly as the chat
template renders them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from eagle_demo.training import chat
from eagle_demo.training.corpus import SEPARATOR

RST = """.. _tut-lists:

Data Structures
***************

This chapter describes some things you've learned about already in more detail,
and adds some new things as well.

More on Lists
=============

.. index:: pair: list; method

.. method:: list.append(x)
   :noindex:

   Add an item to the end of the list.

The list data type has some more methods.  Here are all of the methods of list
objects, see :meth:`~list.append` and :ref:`the tutorial <tut-intro>` for ``x``.


Using Lists as Stacks
---------------------

The list methods make it very easy to use a list as a stack, where the last
element added is the first element retrieved.  For example::

   >>> stack = [3, 4, 5]
   >>> stack.append(6)

Tiny
----

Too short.
"""

PACKAGE_README = """Arrow: Better dates & times for Python
======================================

Arrow is a Python library that offers a sensible and human-friendly approach to creating,
manipulating, formatting and converting dates, times and timestamps.
"""


def _docs():
    return [("pydoc/_sources/tutorial/datastructures.rst.txt", RST),
            ("pydoc/_sources/whatsnew/3.11.rst.txt", RST.replace("Lists", "Tuples")),
            ("pypi/arrow/README.rst", PACKAGE_README), ("stdlib/os.py", '"""OS routines."""\n')]


def test_sections_questions_and_answers():
    examples = chat.build_examples(_docs())
    by_heading = {e.heading: e for e in examples}
    assert set(by_heading) == {"Data Structures", "More on Lists", "Using Lists as Stacks"}  # "Tiny" is too short
    lists = by_heading["More on Lists"]
    assert lists.answer.startswith("The list data type has some more methods.")  # directive and its body skipped
    assert "`list.append` and `the tutorial` for `x`." in lists.answer  # roles and links as plain text
    stack = by_heading["Using Lists as Stacks"].answer
    assert stack.split("\n\n")[0].endswith("For example:")
    assert stack.split("\n\n")[1] == "    >>> stack = [3, 4, 5]\n    >>> stack.append(6)"  # the literal block, dedented
    assert by_heading["Using Lists as Stacks"].question in ("Explain using lists as stacks.",
                                                            "Tell me about using lists as stacks.")
    # no changelog, no package
    assert all(e.source == "pydoc/_sources/tutorial/datastructures.rst.txt" for e in examples)


def test_builder_is_deterministic_and_independent_of_document_order():
    docs = _docs()
    first = chat.build_examples(docs)
    shuffled = docs[:]
    random.Random(3).shuffle(shuffled)
    assert chat.build_examples(shuffled) == first == chat.build_examples(docs)
    assert chat.build_examples(docs, n=1) == first[:1]


def test_template_renders_the_training_text():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(Path(__file__).resolve().parents[1] / "assets" / "tiny-target"))
    tok.chat_template = chat.CHAT_TEMPLATE
    example = chat.build_examples(_docs())[0]
    user = [{"role": "user", "content": example.question}]
    prompt = tok.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
    assert prompt == chat.prompt_text(example.question) == f"{SEPARATOR}Question: {example.question}\nAnswer:"
    full = tok.apply_chat_template(user + [{"role": "assistant", "content": example.answer}], tokenize=False)
    assert full == chat.render(example)
    assert chat.render(example).startswith(prompt + " ")  # the answer's first word follows "Answer:" after a space


def test_add_template_writes_the_tokenizer_config(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": SEPARATOR}))
    chat.add_template(tmp_path)
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert cfg == {"bos_token": SEPARATOR, "chat_template": chat.CHAT_TEMPLATE}


CORPUS2 = Path.home() / ".cache" / "eagle_demo" / "corpus2"


@pytest.mark.skipif(not (CORPUS2 / "manifest.json").is_file(), reason="corpus2 not built on this machine "
                    "(python -m eagle_demo.training.corpus --generation 2)")
def test_real_corpus_examples_come_from_training_docs_only():
    docs = chat.corpus_docs(CORPUS2)
    examples = chat.build_examples(docs)
    assert 300 <= len(examples) <= chat.N_EXAMPLES
    assert all(e.answer.strip() and e.question.strip() and len(e.answer) >= 60 for e in examples)
    assert all(e.question[-1] in "?." for e in examples)
    assert len({e.question.lower() for e in examples}) == len(examples)
    val_names = set(json.loads((CORPUS2 / "manifest.json").read_text())["files"]["val"])
    train_docs = {n for n, _ in docs if n.startswith("pydoc/") and not n.startswith(chat.SKIPPED_DOCS)}
    assert {e.source for e in examples} <= train_docs
    assert not {e.source for e in examples} & val_names
    held_out = {n.split("/")[1] for n in val_names}
    assert not any(e.source.split("/")[1] in held_out for e in examples)
