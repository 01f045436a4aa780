"""The one exception family every user-facing loading failure raises.

Messages are one line: what is wrong, then what to do about it.
"""

from __future__ import annotations

__all__ = ["CheckpointError", "CorruptCheckpointError", "IncompatiblePairError", "NotAnEagleDraftError",
           "UnsupportedLayoutError", "DevicePlacementError"]


class CheckpointError(ValueError):
    """A target or draft cannot be resolved, read, adapted or loaded."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))  # always one line


class CorruptCheckpointError(CheckpointError):
    """A weight or config file is missing, truncated, unreadable or holds NaN/inf."""


class IncompatiblePairError(CheckpointError):
    """The draft was made for a different target (hidden size, vocabulary, tokenizer, features)."""


class NotAnEagleDraftError(CheckpointError):
    """The draft folder holds something else: a Medusa head, a full causal LM, an unknown layout."""


class UnsupportedLayoutError(CheckpointError):
    """An EAGLE variant this loader recognizes but cannot run faithfully (e.g. HASS extra norms)."""


class DevicePlacementError(CheckpointError):
    """The checkpoint is fine; the device could not take it (CUDA failed to start, ran out of memory)."""
