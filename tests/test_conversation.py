"""The page's conversation: finished chat turns on one pair are continued by the next Generate on it; another pair
or New conversation starts afresh; the line under the Generate button says what the next prompt follows up on.
(The chat template's rendering of the turns: tests/test_smollm2.py; the page end to end: test_browser_default.py.)"""

from __future__ import annotations

from types import SimpleNamespace

from eagle_demo.app.conversation import NO_CONVERSATION, conversation_line, new_conversation
from eagle_demo.app.pages import PAGES
from eagle_demo.app.registry import make_key
from eagle_demo.common.config import RunConfig
from eagle_demo.prepare import RunRequest, prepare_run


def test_turns_continue_on_one_pair_and_restart_on_another():
    one, other = make_key("assets/tiny-target", "assets/tiny-eagle1"), make_key("assets/tiny-target", None)
    request = SimpleNamespace(session_hash="conversation-test")
    page = PAGES.of(request.session_hash)
    assert page.turns_for(one) == () and conversation_line(one, request) == NO_CONVERSATION
    page.add_turn(one, "What is a generator?", "A function that yields.")
    page.add_turn(one, "An example?", "def gen():\n    yield 1")
    assert page.turns_for(one) == (("What is a generator?", "A function that yields."),
                                   ("An example?", "def gen():\n    yield 1"))
    line = conversation_line(one, request)
    assert "follows up on 2 turns" in line and "What is a generator?" in line and "\n2. " in line
    assert page.turns_for(other) == () and conversation_line(other, request) == NO_CONVERSATION
    page.add_turn(other, "<b>hi</b>", "x" * 500)  # a turn on another pair starts that pair's conversation
    assert page.turns_for(one) == () and len(page.turns_for(other)) == 1
    line = conversation_line(other, request)
    assert "&lt;b&gt;hi&lt;/b&gt;" in line and "x" * 100 not in line  # escaped, cut to a line
    assert new_conversation(request) == NO_CONVERSATION and page.turns_for(other) == ()


class _Session:
    """What prepare_run asks of a session, recording the history it was given."""

    def __init__(self):
        self.seen = None

    def encode(self, prompt, chat=False, history=()):
        self.seen = (prompt, chat, history)
        return [1, 2, 3]

    def check_length(self, ids, run, mode="eagle"):
        pass

    def check_tree(self, run):
        pass

    def context_note(self, n, run):
        return ""


def test_the_run_request_carries_the_history_to_the_encoder():
    session = _Session()
    history = (("Hi", "Hello!"),)
    ready = prepare_run(session, RunRequest("And then?", RunConfig(max_new_tokens=4), chat=True, history=history))
    assert session.seen == ("And then?", True, history) and ready.prompt_ids == (1, 2, 3)
