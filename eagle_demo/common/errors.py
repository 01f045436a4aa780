"""One-line error messages for people: the page and the command line both show an error this way."""

from __future__ import annotations

__all__ = ["one_line", "brief"]


def one_line(exc: BaseException, plain: tuple[type[BaseException], ...] = (ValueError, OSError, RuntimeError)) -> str:
    """The first line of an error. Errors of the `plain` classes speak for themselves; any other error is
    prefixed with its class name (an unexpected error says what it is)."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if isinstance(exc, plain) else f"{type(exc).__name__}: {first}"


def brief(exc: BaseException, limit: int = 160) -> str:
    """An error's text on one line, cut at `limit` characters (its class name when it has no text): the cause
    quoted inside a longer message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:limit] + ("..." if len(text) > limit else "")
