"""EAGLE draft heads as plain nn.Modules (no I/O; the checkpoints package builds and fills them)."""

from .base import DraftHead, Shared
from .eagle1 import Eagle1Head
from .eagle3 import Eagle3Head

__all__ = ["DraftHead", "Shared", "Eagle1Head", "Eagle3Head"]
