"""The indentation check (eagle_demo.training.indent): a prompt ending in ``:\\n`` must continue with an
indented line. The shipped (second-generation) target passes it; the first generation, whose tokenizer glued a
line break to the indentation after it, failed it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from eagle_demo.session import SHIPPED_TARGET
from eagle_demo.training.indent import PROMPTS, check_folder, first_line_indented
from eagle_demo.training.tokenizer import glued_line_breaks

# the background training job writes under the real cache (conftest points EAGLE_DEMO_CACHE elsewhere)
REAL_CACHE = Path.home() / ".cache" / "eagle_demo"
CKPT, TOKENIZER = REAL_CACHE / "train2" / "ckpt", REAL_CACHE / "tokenizer-code"


def test_first_line_rule():
    assert first_line_indented("def f(x):\n", "    return x\n") == ("    return x", True)
    assert first_line_indented("def f(x):\n", "\n\n    return x") == ("    return x", True)
    assert first_line_indented("def f(x):\n", "def g(y):\n    pass") == ("def g(y):", False)
    assert first_line_indented("class A:\n    def f(self):\n", "    pass\n") == ("    pass", False)
    assert first_line_indented("class A:\n    def f(self):\n", "\tpass\n")[1] is False  # one tab < four spaces
    assert first_line_indented("if x:\n", "") == ("", False)
    with pytest.raises(ValueError):
        first_line_indented("def f(x):", "    pass")


def test_shipped_target_indents_after_a_block_opener():
    assert not glued_line_breaks(Tokenizer.from_file(str(Path(SHIPPED_TARGET) / "tokenizer.json")))
    rows = check_folder(Path(SHIPPED_TARGET))
    assert rows[0].prompt == "def f(x):\n"
    assert all(r.indented for r in rows), [(r.prompt, r.first_line) for r in rows]


@pytest.mark.skipif(not (CKPT / "last.pt").is_file() or not TOKENIZER.is_dir(),
                    reason="no second-generation checkpoint on this machine "
                    "(~/.cache/eagle_demo/train2/ckpt, written by python -m eagle_demo.training.target2 train)")
def test_second_generation_checkpoint_indents(tmp_path):
    from eagle_demo.training.shared import export_model
    from eagle_demo.training.target2 import load_trained

    for _attempt in range(3):  # the training job renames last.pt aside for a moment while it writes a new one
        try:
            model, _, _ = load_trained(CKPT)
            break
        except FileNotFoundError:
            time.sleep(5)
    else:
        pytest.fail(f"{CKPT / 'last.pt'} stayed missing")
    folder = export_model(model, tmp_path / "target2", TOKENIZER)
    rows = check_folder(folder)
    assert rows[0].prompt == "def f(x):\n" and rows[0].indented, rows[0]
    assert sum(r.indented for r in rows) >= len(PROMPTS) - 1, [(r.prompt, r.first_line) for r in rows]
