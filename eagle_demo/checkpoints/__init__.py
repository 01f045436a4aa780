"""Checkpoint auto-adaptation: detect a draft's family and layout from its weights, check it against the
target, adapt config and weights in memory, and report every adaptation.

    pair = load_pair("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    print(pair.report.summary())
"""

from .api import LoadedPair, attach_draft, inspect_pair, load_pair
from .errors import (
                     CheckpointError,
                     CorruptCheckpointError,
                     IncompatiblePairError,
                     NotAnEagleDraftError,
                     UnsupportedLayoutError,
)
from .report import AdaptationReport

__all__ = ["load_pair", "inspect_pair", "attach_draft", "LoadedPair", "AdaptationReport", "CheckpointError",
           "CorruptCheckpointError", "IncompatiblePairError", "NotAnEagleDraftError", "UnsupportedLayoutError"]
