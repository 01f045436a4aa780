"""The named API's arguments read by their declared types: a boolean from "false" is False (not a truth-tested
non-empty string), a number from "12" is 12, and a value of the wrong type gets one line naming the parameter and
what it takes, before anything runs. Used by every form-based event (`forms.handler`), `/generate`'s
`api.GenerateRequest` among them. No Gradio."""

from __future__ import annotations

import math
import types
import typing
from typing import Any

from ..common.config import ConfigError

__all__ = ["coerce", "parse_bool"]

_TRUE, _FALSE = ("true", "1", "yes", "on", "t", "y"), ("false", "0", "no", "off", "f", "n", "")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def parse_bool(name: str, value: Any) -> bool:
    """True/False, 1/0, or the strings true/false, yes/no, on/off, 1/0 (any case); anything else is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{name} must be true or false, got {_shown(value)}")


def _number(name: str, value: Any, whole: bool) -> int | float:
    kind = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(f"{name} must be {kind}, got {_shown(value)}")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"{name} must be {kind}, got {_shown(value)}") from None
    if not whole:
        return number
    if not math.isfinite(number) or not number.is_integer():
        raise ConfigError(f"{name} must be {kind}, got {_shown(value)}")
    return int(number)


def coerce(name: str, value: Any, hint: Any) -> Any:
    """`value` as the type `hint` names (bool, int, float, str, or one of them or None); None passes as is, and
    other hints (lists, components' own values) are left alone."""
    if value is None or hint is None:
        return value
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        plain = [a for a in args if a is not type(None)]
        if len(plain) != 1:
            return value
        hint = plain[0]
    if hint is bool:
        return parse_bool(name, value)
    if hint is int:
        return _number(name, value, whole=True)
    if hint is float:
        return _number(name, value, whole=False)
    if hint is str and not isinstance(value, str):
        raise ConfigError(f"{name} must be text, got {_shown(value)}")
    return value

