"""The page's chat: with the chat template on, each finished Generate adds a turn to the page's conversation
(`pages.Page.add_turn`), and the next Generate on the same pair continues it, raced and charted like any run.
This module draws the line under the Generate button that says what the next Generate continues, and ends a
conversation."""

from __future__ import annotations

import html

import gradio as gr

from .pages import PAGES
from .registry import PairKey

__all__ = ["CHAT_EXAMPLES", "NO_CONVERSATION", "conversation_line", "new_conversation"]

# What a visitor might ask a small chat assistant; written for the page, not drawn from the heads' training prompts
CHAT_EXAMPLES = (
    "What is a Python generator, and when would I use one?",
    "Write a short poem about autumn leaves.",
    "Explain to a ten-year-old why the sky is blue.",
    "Give me three tips for a first job interview.",
    "A train travels 180 km at 60 km/h and leaves at 3 pm. When does it arrive?",
    "Summarize the story of Romeo and Juliet in three sentences.",
)

NO_CONVERSATION = ("*Conversation*: none yet. With the chat template on, each answer joins a conversation and the "
                   "next prompt follows up on it.")
SHOWN_CHARS = 80


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return html.escape(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "...")


def conversation_line(key: PairKey | None, request: gr.Request = None) -> str:
    """What the page's next chat Generate on `key` continues: its earlier turns, each cut to a line."""
    page = PAGES.of(request.session_hash if request is not None else None)
    turns = page.turns_for(key) if key is not None else ()
    if not turns:
        return NO_CONVERSATION
    lines = [f"*Conversation*: the next prompt follows up on {len(turns)} turn{'s' * (len(turns) > 1)} "
             "(**New conversation** starts afresh)"]
    lines += [f"{i}. **you**: {_cut(user)} · **model**: {_cut(answer)}" for i, (user, answer) in
              enumerate(turns, 1)]
    return "\n".join(lines)


def new_conversation(request: gr.Request = None) -> str:
    PAGES.of(request.session_hash if request is not None else None).forget_conversation()
    return NO_CONVERSATION
