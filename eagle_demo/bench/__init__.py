"""The prompt-suite benchmark: the runs (`run`: baseline and EAGLE interleaved per prompt, drafts compared,
temperatures swept), its results as plain values with no torch (`report`, which the page draws), and the sweep by
context length (`context_sweep`: each prompt after 128, 512, ... tokens of real text of its own kind)."""
