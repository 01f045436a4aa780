"""Text streamed to a terminal as token ids arrive."""

from __future__ import annotations

__all__ = ["TokenStreamDecoder"]


class TokenStreamDecoder:
    """Incremental text from token ids: decode everything, emit the new suffix, hold back a trailing
    partial UTF-8 character (byte-level BPE can split one)."""

    def __init__(self, decode):
        self.decode = decode
        self.ids: list[int] = []
        self.emitted = ""

    def push(self, ids) -> str:
        self.ids.extend(ids)
        text = self.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""
        if not text.startswith(self.emitted):  # a merge changed earlier text; emit nothing new
            self.emitted = text
            return ""
        new, self.emitted = text[len(self.emitted):], text
        return new

    def flush(self) -> str:
        text = self.decode(self.ids)
        new = text[len(self.emitted):] if text.startswith(self.emitted) else ""
        self.emitted = text
        return new
