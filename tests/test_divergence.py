"""The divergence explainer (`divergence`): a bf16 race that splits at a near tie is called one, a deliberately
broken verifier (the negative control) is called a defect, and the threshold follows the dtype and magnitude."""

import math

import pytest
import torch

import eagle_demo.decoding.engine as engine_mod
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.diagnose.divergence import explain, rounding_tolerance, top2_by_position
from fixtures import accept_every_draft, random_eagle1, tiny_target

PROMPT = [1, 5, 9, 13, 4, 7, 22, 30]
RUN = RunConfig(max_new_tokens=48, ignore_eos=True, tree=TreeConfig(depth=4, top_k=4, total_tokens=16))


def race(seed: int, dtype: torch.dtype):
    model = tiny_target("llama", layers=4, hidden=64, vocab=96, seed=seed).to(dtype)
    head = random_eagle1(model).to(dtype)
    return list(SpeculativeEngine(model, head).generate(PROMPT, RUN)), list(BaselineEngine(model).generate(PROMPT, RUN))


def test_the_tolerance_is_sqrt_h_ulps_at_the_magnitude():
    """The formula, and the measured drift it must cover: on the shipped target's logits, one-token steps against
    8-token blocks move the top-two gap by far less than the tolerance in bfloat16 and float32."""
    assert rounding_tolerance("bfloat16", 20.0, 4096) == pytest.approx(64 * 2 ** -7 * 16)  # 8.0
    assert rounding_tolerance("torch.float32", 20.0, 4096) == pytest.approx(64 * 2 ** -23 * 16)
    assert rounding_tolerance("float16", 0.7, 100) == pytest.approx(10 * 2 ** -10 * 0.5)
    assert rounding_tolerance("bfloat16", 9.0, 128) == pytest.approx(math.sqrt(128) * 2 ** -7 * 8)
    from transformers import AutoModelForCausalLM, DynamicCache

    from eagle_demo.session import SHIPPED_TARGET

    for dtype in (torch.bfloat16, torch.float32):
        model = AutoModelForCausalLM.from_pretrained(SHIPPED_TARGET, dtype=dtype).eval()
        ids = torch.tensor([[1, 380, 1705, 12, 88, 29, 30, 58, 286, 1121, 13, 44]])
        with torch.inference_mode():
            seq = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)[0]
            logits = []
            for width in (1, 8):  # one-token steps, then 8-token blocks, over the same tokens
                cache, rows = DynamicCache(), []
                rows.append(model(seq[None, :12], cache=cache).logits[0, -1:])
                for i in range(12, len(seq) - 1, width):
                    rows.append(model(seq[None, i:min(i + width, len(seq) - 1)], cache=cache).logits[0])
                logits.append(torch.cat(rows).float())  # [n, V]
        top = logits[0].topk(2, -1).indices  # [n, 2]
        gaps = [x.gather(1, top) for x in logits]  # [n, 2] each
        drift = ((gaps[0][:, 0] - gaps[0][:, 1]) - (gaps[1][:, 0] - gaps[1][:, 1])).abs()  # [n]
        for moved, m in zip(drift.tolist(), logits[0].max(-1).values.abs().tolist()):
            assert moved <= rounding_tolerance(str(dtype), m, 128), (dtype, moved, m)


def test_every_token_carries_the_targets_top_two():
    eagle, base = race(0, torch.float32)
    for events in (eagle, base):
        rows = top2_by_position(events)
        assert len(rows) == len(events[-1].token_ids) and all(len(r) == 4 for r in rows)
        assert all(r[0] == t and r[1] >= r[3] for r, t in zip(rows, events[-1].token_ids))  # greedy took the top


def test_a_bf16_split_at_a_near_tie_is_called_a_near_tie():
    """Seeded random bf16 pairs: the tree verify and the one-token steps round differently, and some races split.
    Each split the explainer finds is a near tie under the tolerance (and fp32 never splits)."""
    found = []
    for seed in range(8):
        eagle, base = race(seed, torch.bfloat16)
        d = explain(eagle, base, greedy=True)
        if d is not None:
            found.append(d)
            assert d.kind == "near tie", d.line()
            assert d.gap <= d.tolerance and "expected in bfloat16" in d.line()
            ids = list(base[-1].token_ids)
            assert d.dtype == "bfloat16" and d.hidden_size == 64 and ids[d.position] == d.baseline_id
            assert d.context_ids == tuple(ids[max(0, d.position - 12):d.position]) and d.racer_next[0] == d.racer_id
        if len(found) == 2:
            break
    assert found, "no seeded bf16 race split; the positive case needs one"
    assert explain(*race(2, torch.float32), greedy=True) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_negative_control_a_verifier_accepting_every_draft_is_a_defect(monkeypatch, dtype):
    monkeypatch.setattr(engine_mod, "verify_tree", accept_every_draft)
    eagle, base = race(0, dtype)
    d = explain(eagle, base, greedy=True)
    assert d is not None and d.kind == "defect", d
    assert "this is a defect, please report it with this line" in d.line()
    assert "did not choose" in d.reason and d.gap > 0
