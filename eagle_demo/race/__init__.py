"""Decoders raced on one prompt: EAGLE against plain decoding, its speedup and why it is what it is, and whether
the output was identical (`speedup`); EAGLE, the n-gram draft and plain decoding side by side, each checked
against plain decoding and its divergence explained (`racers`)."""
