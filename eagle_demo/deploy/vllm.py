"""The vLLM side of `deploy`: what vLLM 0.32 reads from an EAGLE draft as published, against what this playground
reads, and the config changes that make the two the same. Every rule was run in vLLM (`scripts/vllm_layouts.py`,
docs/vllm.md); `plan` is a `deploy.Plan` (its `change(sentence, required)`, `config_changes`, `notes`).

vLLM 0.32 reads an EAGLE-3 draft's features as `hidden_states[id]` for top-level ids, else for `eagle_config`'s, else
(2, L//2, L-3) (`gpu_model_runner.py` `_get_eagle3_aux_layers_from_config`, `llama.py`'s capture), an id of L being
the last layer's output before the final norm, as here (`target/features.py`); `norm_before_fc` from `eagle_config`,
else the top level (it drops `input_norm.*` otherwise); `use_aux_hidden_state` from `eagle_config` only
(`llama_eagle3.py`).
"""

from __future__ import annotations

from pathlib import Path

from ..checkpoints.files import read_config, scan_weights
from .aux_layers import engine_guess, names_aux_ids

__all__ = ["draft_config", "vllm_eagle3", "vllm_eagle1", "vllm_feature_layers"]


def draft_config(report) -> tuple[dict, bool]:
    """The draft's config, unwrapped from vLLM V0's `{"model_type": "eagle", "model": {...}}`, and whether it was."""
    raw = read_config(Path(report.draft_path)) or {}
    wrapped = raw.get("model_type") == "eagle" and isinstance(raw.get("model"), dict)
    return (raw["model"] if wrapped else raw), wrapped


def vllm_feature_layers(cfg: dict, layers: int) -> tuple[int, ...]:
    """The target `hidden_states` indices vLLM 0.32 feeds an EAGLE-3 draft with this config (aux features on)."""
    nested = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or nested.get("eagle_aux_hidden_state_layer_ids")
    return tuple(int(i) for i in ids) if ids else engine_guess(layers)


def vllm_eagle3(plan, report) -> None:
    cfg = draft_config(report)[0]
    tensors = scan_weights(Path(report.draft_path)).tensors
    if not cfg.get("fc_norm") and any(n.split(".")[-3:-2] == ["fc_norm"] for n in tensors):
        plan.config_changes["fc_norm"] = True
        plan.change('config "fc_norm": true: vLLM 0.32 builds the EAGLE-3.1 per-feature norms only when the config '
                    "says so and otherwise fails on the fc_norm.* weights", required=True)
    nested = dict(cfg["eagle_config"]) if isinstance(cfg.get("eagle_config"), dict) else {}
    block = dict(nested)
    if block.get("use_aux_hidden_state") is False:  # unfused in both (vLLM #40656; checkpoints/variants.py)
        pass
    elif not any(n == "fc.weight" or n.endswith(".fc.weight") for n in tensors):  # unfused here
        if not report.source_layout.startswith("speculators"):  # its config cannot say so to vLLM (algos.py)
            block["use_aux_hidden_state"] = False
            plan.change('eagle_config "use_aux_hidden_state": false: the file has no fc.weight, so the target\'s '
                        "last hidden state goes in unfused here; vLLM 0.32 fuses unless eagle_config says otherwise, "
                        "building an fc the file lacks and leaving it uninitialized", required=True)
    else:
        if report.feature_layers is not None:  # None: the pair does not load here (report.problem)
            _features(plan, report, cfg)
        _norm_before_fc(plan, cfg, block, "input_norm.weight" in tensors)
    if block != nested:
        plan.config_changes["eagle_config"] = block


def _features(plan, report, cfg: dict) -> None:
    ours, theirs = tuple(report.feature_layers), vllm_feature_layers(cfg, report.target_layers)
    if ours != theirs:
        guessed = not names_aux_ids(cfg)  # the layers read here then came from the probe (deploy/aux_layers.py)
        nested = not cfg.get("eagle_aux_hidden_state_layer_ids")
        why = (f"the published config names none, so vLLM 0.32 would guess hidden_states {list(theirs)}" if guessed
               else "vLLM 0.32 reads eagle_config's output-of-layer ids as hidden_states[id], one layer early (the "
               "nested list stays: vLLM sizes fc from it)" if nested else f"vLLM 0.32 would read hidden_states "
               f"{list(theirs)}")
        plan.config_changes["eagle_aux_hidden_state_layer_ids"] = list(ours)
        plan.change(f"top-level eagle_aux_hidden_state_layer_ids {list(ours)} (the hidden_states read here, which "
                    f"vLLM reads first and as given): {why}", required=not guessed)


def _norm_before_fc(plan, cfg: dict, block: dict, has_norm: bool) -> None:
    if bool(block.get("norm_before_fc", cfg.get("norm_before_fc", False))) == has_norm:
        return
    if "norm_before_fc" in block:
        block["norm_before_fc"] = has_norm
    else:
        plan.config_changes["norm_before_fc"] = has_norm
    if has_norm:
        plan.change('config "norm_before_fc": true: the file has input_norm.weight, applied before fc here; vLLM '
                    "0.32 builds that norm only when the config says so and otherwise drops the weight silently",
                    required=True)
    else:
        plan.change('config "norm_before_fc": false: the config asks for a norm before fc but the file has no '
                    "input_norm.weight, so none is applied here; vLLM 0.32 would apply one with weight 1",
                    required=True)


def vllm_eagle1(plan, report) -> None:
    """vLLM 0.32 `llama.py` builds q/k/v/o biases when `attention_bias` or `bias` is set (InternLM's key; the
    official EAGLE-1 config's `"bias": true` means the fc's), q/k/v ones by `qkv_bias`; `llama_eagle.py` never reports
    missing weights, so they stay `torch.empty` and nothing is accepted. Its fc has no bias: `fc.bias` is dropped."""
    cfg, wrapped = draft_config(report)
    if wrapped:  # vLLM V0's converted layout: V1 prefixes `model.` itself and fails on "model.model.layers..."
        plan.unwrap_config = plan.strip_model_prefix = True
        plan.change("config unwrapped and `model.` dropped from the weight names: vLLM 0.32 adds its own prefix and "
                    "fails to load its V0-converted layout (\"no module or parameter named 'model'\")", required=True)
    wrong = {key: False for key in ("bias", "attention_bias") if cfg.get(key)}  # no draft has an o_proj bias
    if bool(cfg.get("qkv_bias", False)) != bool(report.qkv_bias):  # with bias off, q/k/v follow qkv_bias
        wrong["qkv_bias"] = bool(report.qkv_bias)
    if wrong:
        plan.config_changes.update(wrong)
        plan.change("config " + ", ".join(f'"{k}" -> {str(v).lower()}' for k, v in wrong.items()) + ": vLLM's Llama "
                    "layer reads these keys as attention biases; without this it builds biases the file does not "
                    "have and leaves them uninitialized, so nothing is accepted", required=True)
    if report.source_layout.startswith("speculators"):  # vLLM 0.32 speculators/algos.py: eagle3 and peagle only
        plan.notes.append("vLLM 0.32 reads the speculators format for EAGLE-3 only (eagle3, peagle): this EAGLE-1 "
                          "draft needs converting to the official layout first")
    elif report.fc_bias:
        plan.fold_fc_bias = True
        plan.change("fc.bias folded into the draft's embedding (exact, float32): vLLM's EAGLE-1 fc has no bias and "
                    "drops it silently, which lowers acceptance", required=False)
    if report.qkv_bias:
        plan.notes.append("upstream vLLM has no EAGLE-1 class with q/k/v biases (Qwen2 drafts); use SGLang")
