"""The page's pairs by name: the shipped tiny pairs first, then real pairs (the first is the page's default).

A module of its own, importing nothing, so that the registry (public mode admits the presets' repos) and the
playground both read it without importing each other."""

from __future__ import annotations

__all__ = ["PRESETS", "CUSTOM"]

PRESETS: dict[str, tuple[str, str]] = {
    "tiny (shipped) + EAGLE-1 head": ("assets/tiny-target", "assets/tiny-eagle1"),
    "tiny (shipped) + EAGLE-3 head": ("assets/tiny-target", "assets/tiny-eagle3"),
    "Llama-3.1-8B-Instruct + EAGLE-3": ("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    "Llama-3-8B-Instruct + EAGLE": ("meta-llama/Meta-Llama-3-8B-Instruct", "yuhuili/EAGLE-LLaMA3-Instruct-8B"),
    "Vicuna-7B-v1.3 + EAGLE": ("lmsys/vicuna-7b-v1.3", "yuhuili/EAGLE-Vicuna-7B-v1.3"),
    "Qwen2-7B-Instruct + EAGLE": ("Qwen/Qwen2-7B-Instruct", "yuhuili/EAGLE-Qwen2-7B-Instruct"),
    "Qwen3-8B + EAGLE-3 (AngelSlim)": ("Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3"),
    "Vicuna-13B-v1.3 + EAGLE-3": ("lmsys/vicuna-13b-v1.3", "yuhuili/EAGLE3-Vicuna1.3-13B"),
}
CUSTOM = "custom"
