"""EAGLE Playground: lossless EAGLE speculative decoding over stock transformers models, made visible."""

__version__ = "0.1.0"
