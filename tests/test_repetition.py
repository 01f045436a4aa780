"""The repetition penalty stays lossless: each tree node is penalized over the committed text plus the drafts on
its own path, so greedy output equals transformers' `generate(repetition_penalty=...)` and sampling draws from
the penalized distribution (chi-square against enumerated probabilities under transformers' own processor)."""

import pytest
import torch
from transformers import RepetitionPenaltyLogitsProcessor

from eagle_demo.common.config import ConfigError, RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.sampling import penalize
from fixtures import OracleHead, random_eagle1, tiny_target
from test_engine import PROMPT, model_of
from test_sampling import PROMPT as SAMPLING_PROMPT
from test_sampling import L, chi2_pvalue, enumerate_probs

PENALTY = 1.3
TREES = [TreeConfig.chain(1), TreeConfig.chain(5), TreeConfig(depth=3, top_k=2, total_tokens=8),
         TreeConfig(depth=4, top_k=4, total_tokens=16)]


def hf_penalized(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, do_sample=False, max_new_tokens=n, repetition_penalty=PENALTY, pad_token_id=0,
                         attention_mask=torch.ones_like(ids))
    return out[0, len(prompt):].tolist()


def tokens(engine, run, prompt=PROMPT):
    return list(list(engine.generate(prompt, run))[-1].token_ids)


def test_penalize_is_transformers_rule_and_nodes_see_their_own_paths():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    seen = torch.tensor([True, True, False, False])
    want = RepetitionPenaltyLogitsProcessor(PENALTY)(torch.tensor([[0, 1]]), logits.clone())
    assert torch.equal(penalize(logits, seen, SamplingConfig(repetition_penalty=PENALTY)), want)
    assert torch.equal(penalize(logits, seen, SamplingConfig()), logits)
    tokens_ = torch.tensor([0, 2, 3, 2])  # root 0; children 2 and 3 of the root; 2 again under node 1
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool)
    rows = logits.repeat(4, 1)  # [N, V]
    got = penalize(rows, torch.tensor([False, True, False, False]), SamplingConfig(repetition_penalty=PENALTY),
                   (tokens_, mask))
    paths = [[0], [0, 2], [0, 3], [0, 2, 2]]  # each node's path; token 2 twice on node 3's, penalized once
    want = torch.cat([RepetitionPenaltyLogitsProcessor(PENALTY)(torch.tensor([[1] + p]), logits.clone())
                      for p in paths])
    assert torch.equal(got, want) and torch.equal(rows, logits.repeat(4, 1))  # the input is left as it was
    with pytest.raises(ConfigError, match="repetition penalty"):
        SamplingConfig(repetition_penalty=0.0)


@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.label())
@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_greedy_equals_generate_with_the_penalty(tree, static):
    model = model_of("llama")
    want = hf_penalized(model, PROMPT, 32)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree,
                    sampling=SamplingConfig(repetition_penalty=PENALTY))
    for head in (random_eagle1(model), OracleHead(model, PROMPT[0])):
        assert tokens(SpeculativeEngine(model, head, static=static), run) == want
    events = list(BaselineEngine(model, static=static).generate(PROMPT, run))
    assert list(events[-1].token_ids) == want and events[0].repetition_penalty == PENALTY  # the run says it


def test_the_penalty_changes_the_text():
    """The cases above are not vacuous: this target's greedy text repeats without the penalty."""
    model = model_of("llama")
    out = model.generate(torch.tensor([PROMPT]), do_sample=False, max_new_tokens=32, pad_token_id=0,
                         attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long))
    assert out[0, len(PROMPT):].tolist() != hf_penalized(model, PROMPT, 32)


@pytest.mark.parametrize("static", [False, True], ids=["growing", "static"])
def test_seeded_sampling_with_the_penalty_equals_the_seeded_baseline(static):
    model = tiny_target("qwen2", seed=1)
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=3, total_tokens=10),
                    sampling=SamplingConfig(temperature=0.8, top_p=0.95, seed=3, repetition_penalty=PENALTY))
    prompt = [1, 4, 8, 15, 16, 23, 42]
    assert tokens(SpeculativeEngine(model, random_eagle1(model), static=static), run, prompt) == \
        tokens(BaselineEngine(model), run, prompt)


def test_sampling_with_the_penalty_is_the_penalized_distribution():
    """A penalty of 5 at temperature 0.7 moves this target's continuations by 0.28 in total variation: a run that
    ignored the penalty fails here."""
    small = tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)
    n = 800
    probs = enumerate_probs(small, SamplingConfig(temperature=0.7), RepetitionPenaltyLogitsProcessor(5.0))
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5))
    counts = {}
    for seed in range(n):
        run = RunConfig(max_new_tokens=L, ignore_eos=True, tree=TreeConfig(depth=3, top_k=3, total_tokens=10),
                        sampling=SamplingConfig(temperature=0.7, repetition_penalty=5.0, seed=seed))
        key = tuple(tokens(engine, run, SAMPLING_PROMPT))
        counts[key] = counts.get(key, 0) + 1
    assert chi2_pvalue(counts, probs, n=n) > 1e-3


def test_a_node_is_penalized_for_the_drafts_on_its_own_path_only():
    """Root 0 with children 2 (node 1) and 3 (node 2); node 1 has a child 2 (node 3), node 2 a child 2 (node 4).
    At node 1 the target prefers 2 over 1 only before the penalty: 2 sits on node 1's path (it is node 1's own
    token), so the penalized choice is 1 and node 3 is rejected. At node 2 token 2 is not on the path, so node 4
    (token 2) is accepted."""
    from eagle_demo.decoding.acceptance import verify_tree
    from eagle_demo.decoding.tree import make_tree

    tree = make_tree([0, 2, 3, 2, 2], [-1, 0, 0, 1, 2], [0, 1, 1, 2, 2], [1.0] * 5, [1.0] * 5)
    logits = torch.full((5, 4), -5.0)  # [N, V]
    logits[0, 3] = 2.0  # the root's choice: 3 (node 2)
    logits[1] = torch.tensor([-5.0, 1.0, 1.5, -5.0])  # node 1: 2 before the penalty, 1 after it (1.5 / 2 < 1)
    logits[2] = torch.tensor([-5.0, 1.0, 1.5, -5.0])  # node 2: 2, which is not on its path
    logits[4, 1] = 3.0  # node 4's bonus: 1
    cfg = SamplingConfig(repetition_penalty=2.0)
    seen = torch.tensor([True, False, False, False])  # the committed text: the root's token
    verdict = verify_tree(tree, logits, cfg, None, 0, seen)
    assert verdict.path == (2, 4) and verdict.bonus_id == 1
    root_choice_one = logits.clone()
    root_choice_one[0] = torch.tensor([-5.0, -5.0, 2.0, -5.0])  # the root's choice: 2 (node 1)
    verdict = verify_tree(tree, root_choice_one, cfg, None, 0, seen)
    assert verdict.path == (1,) and verdict.bonus_id == 1  # node 3 (token 2) is rejected: 2 is on node 1's path
    assert verify_tree(tree, root_choice_one, SamplingConfig(), None, 0, seen).path == (1, 3)  # no penalty
