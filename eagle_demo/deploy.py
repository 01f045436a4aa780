"""Serve the loaded pair at scale: exact vLLM and SGLang command lines, and, where an engine cannot load
the draft as published, an adapted copy of it with a README of what changed.

Engine facts used here (the upstream issue and PR numbers are the sources):
- vLLM wants `--speculative-config` JSON with an explicit `method` (eagle | eagle3) since PR #21737;
  its V1 EAGLE-1 module has no fc bias and silently drops `fc.bias` (PRs #22323/#22558 closed), and has
  no EAGLE-1 Qwen2 class upstream; a draft `max_position_embeddings` of 2048 crashes prompts longer than
  that (issue #48894, fixed by raising it, PR #49343).
- SGLang needs the draft's `architectures` to name its Eagle class (LlamaForCausalLMEagle,
  LlamaForCausalLMEagle3, Qwen2ForCausalLMEagle); its EAGLE-1 fc always has a bias, left at random
  init when the file has none (sglang issue #5773); `tie_word_embeddings: true` in an EAGLE-3 draft
  makes it alias the draft lm_head to the V-row embedding (AngelSlim Qwen3 configs).
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file

from .config import TreeConfig
from .checkpoints.files import read_config, scan_weights

__all__ = ["Plan", "plan_for", "deployment_commands", "write_adapted_copy"]

SGLANG_ARCH = {("eagle1", "llama"): "LlamaForCausalLMEagle", ("eagle1", "qwen2"): "Qwen2ForCausalLMEagle",
               ("eagle3", "llama"): "LlamaForCausalLMEagle3"}


@dataclass
class Plan:
    engine: str
    command: str
    config_changes: dict = field(default_factory=dict)  # key -> new value (None = delete)
    add_zero_fc_bias: bool = False
    changes: list[str] = field(default_factory=list)  # human sentences for the README of the copy
    notes: list[str] = field(default_factory=list)  # warnings that no copy can fix
    unwrap_config: bool = False

    @property
    def needs_copy(self) -> bool:
        return bool(self.config_changes or self.add_zero_fc_bias or self.unwrap_config)


def _draft_config(report) -> tuple[dict, bool]:
    raw = read_config(Path(report.draft_path)) or {}
    wrapped = raw.get("model_type") == "eagle" and isinstance(raw.get("model"), dict)
    return (raw["model"] if wrapped else raw), wrapped


def _target_context(report) -> int:
    cfg = read_config(Path(report.target_path)) or {}
    cfg = cfg.get("text_config", cfg)
    return int(cfg.get("max_position_embeddings") or 0)


def plan_for(engine: str, target: str, draft: str, report, tree: TreeConfig) -> Plan:
    if report.family not in ("eagle1", "eagle3"):
        raise ValueError(f"the draft is a {report.family} checkpoint; only EAGLE-1/2 and EAGLE-3 drafts can be exported")
    cfg, wrapped = _draft_config(report)
    eagle3 = report.family == "eagle3"
    ctx = _target_context(report)
    draft_ctx = int(cfg.get("max_position_embeddings") or 0)
    draft_arg = "<ADAPTED_DRAFT_DIR>"
    plan = Plan(engine=engine, command="")
    if ctx and draft_ctx and draft_ctx < ctx:
        plan.config_changes["max_position_embeddings"] = ctx
        plan.changes.append(f"max_position_embeddings {draft_ctx} -> {ctx} (the target's context), so prompts "
                            f"longer than {draft_ctx} tokens do not overrun the draft's RoPE table")
    if report.source_layout.startswith("speculators") and engine == "sglang":
        plan.notes.append("speculators-format drafts are read natively by vLLM; SGLang has no loader for them")
    if engine == "vllm":
        if report.fc_bias and not eagle3:
            plan.notes.append("vLLM's EAGLE-1 module has no fc bias and drops `fc.bias` from this draft; expect "
                              "lower acceptance than here (no file change can fix it; SGLang keeps the bias)")
        if report.qkv_bias and not eagle3:
            plan.notes.append("upstream vLLM has no EAGLE-1 class with q/k/v biases (Qwen2 drafts); use SGLang")
        spec = {"method": "eagle3" if eagle3 else "eagle", "model": draft_arg if plan.needs_copy else draft,
                "num_speculative_tokens": tree.depth}
        plan.command = (f"vllm serve {shlex.quote(target)} --speculative-config "
                        f"{shlex.quote(json.dumps(spec))}")
    else:
        arch = SGLANG_ARCH[(report.family, "qwen2" if (report.qkv_bias and not eagle3) else "llama")]
        if wrapped:
            plan.unwrap_config = True
            plan.changes.append('config unwrapped from vLLM\'s {"model_type": "eagle", "model": {...}} to the inner config')
        if (cfg.get("architectures") or [None])[0] != arch:
            plan.config_changes["architectures"] = [arch]
            plan.changes.append(f"architectures {cfg.get('architectures')} -> ['{arch}'] (SGLang picks its draft class by name)")
        if not eagle3 and not report.fc_bias:
            plan.add_zero_fc_bias = True
            plan.changes.append("added fc.bias = zeros: SGLang's EAGLE-1 fc always has a bias and would leave it "
                                "at random init for a draft that has none")
        if eagle3 and cfg.get("tie_word_embeddings"):
            plan.config_changes["tie_word_embeddings"] = False
            plan.changes.append("tie_word_embeddings true -> false: the draft's own lm_head must not be aliased to "
                                "the embedding")
        dtype = " --dtype bfloat16" if report.target_model_type == "qwen2" else ""  # fp16 overflows on Qwen2
        topk = 1 if tree.is_chain else tree.top_k
        tokens = tree.depth + 1 if tree.is_chain else tree.total_tokens
        plan.command = (f"python -m sglang.launch_server --model-path {shlex.quote(target)} "
                        f"--speculative-algorithm {'EAGLE3' if eagle3 else 'EAGLE'} "
                        f"--speculative-draft-model-path {shlex.quote(draft_arg if plan.needs_copy else draft)} "
                        f"--speculative-num-steps {tree.depth} --speculative-eagle-topk {topk} "
                        f"--speculative-num-draft-tokens {tokens}{dtype}")
    return plan


def deployment_commands(target: str, draft: str, report, tree: TreeConfig) -> dict:
    """{"vllm": command, "sglang": command, "notes": markdown} for the UI's Deploy tab."""
    out, notes = {}, []
    for engine in ("vllm", "sglang"):
        plan = plan_for(engine, target, draft, report, tree)
        out[engine] = plan.command
        if plan.needs_copy:
            notes.append(f"**{engine}** needs an adapted copy of the draft (`python -m eagle_demo export --engine "
                         f"{engine} --out DIR`): " + "; ".join(plan.changes))
        notes += [f"**{engine}**: {n}" for n in plan.notes]
    out["notes"] = "\n\n".join(notes) if notes else "Both engines load this draft as published."
    return out


def write_adapted_copy(plan: Plan, report, out_dir: str | Path) -> Path:
    """Write the draft with the plan's changes into out_dir (config.json, weights, README.md)."""
    src, out = Path(report.draft_path), Path(out_dir)
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
    weights = scan_weights(src)
    if plan.add_zero_fc_bias:
        tensors = weights.load()
        prefix = "model." if any(k.startswith("model.fc.") for k in tensors) else ""
        fc = tensors[prefix + "fc.weight"]
        tensors[prefix + "fc.bias"] = torch.zeros(fc.shape[0], dtype=fc.dtype)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"))
    else:
        names = list(weights.files)
        index = [p.name for p in src.glob("*.index.json")]
        for name in names + index:
            shutil.copy2(src / name, out / name)
    readme = ["# Adapted EAGLE draft", "", f"Source: `{report.draft}` ({report.source_layout}).",
              f"Adapted for **{plan.engine}** by `python -m eagle_demo export`. Weights are unchanged unless "
              "listed below.", "", "## Changes", ""] + [f"- {c}" for c in plan.changes]
    if plan.notes:
        readme += ["", "## Notes", ""] + [f"- {n}" for n in plan.notes]
    readme += ["", "## Command", "", "```", plan.command.replace("<ADAPTED_DRAFT_DIR>", str(out)), "```", ""]
    (out / "README.md").write_text("\n".join(readme))
    return out
