"""The shape explorer (issue 45): every candidate shape replayed on a finished run's own text. For greedy runs the
replay is exact: the shape that ran replays to the engine's measured tau on the same text."""

from __future__ import annotations

import pytest
import torch

from eagle_demo.autotree.explore import KNOWN_ERROR, explore, walk
from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.events import Finish
from eagle_demo.decoding.metrics import summarize
from eagle_demo.serving.flags import shape_flags, static_tree
from eagle_demo.session import load_session

torch.set_num_threads(1)
PROMPT = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"


@pytest.fixture(scope="module", params=["tiny-eagle3", "tiny-eagle1"])
def session(request):
    from eagle_demo.common.paths import ASSETS

    return load_session(str(ASSETS / "tiny-target"), str(ASSETS / request.param), threads=1, device="cpu",
                        dtype="float32")


def _run(session, ids, tree, ignore_eos=True, new=48):
    events = list(session.stream(ids, RunConfig(max_new_tokens=new, ignore_eos=ignore_eos, tree=tree), "eagle"))
    return summarize(events), list(next(e for e in events if isinstance(e, Finish)).token_ids)


@pytest.mark.slow
def test_the_shape_that_ran_replays_to_its_measured_tau(session):
    ids = session.encode(PROMPT)
    shapes = [TreeConfig.chain(5), TreeConfig(3, 4, 12), TreeConfig.chain(7, 0.01), TreeConfig(6, 10, 60)]
    if session.family == "eagle1":
        shapes.append(TreeConfig.chain(8, 0.005, 2048))  # a hot vocabulary (a head over the target's lm_head)
    for tree in shapes:
        stats, out = _run(session, ids, tree)
        x = explore(session, ids, out, ran=tree, measured_tau=stats.tau)
        assert x.row(tree).tau == pytest.approx(stats.tau, abs=1e-12), tree.label()
        assert len(x.rows) > 90 and x.best.tau >= max(r.tau for r in x.rows) - 1e-12  # without costs: the best tau
    stats, out = _run(session, ids, TreeConfig.chain(4), ignore_eos=False, new=200)  # a run that may end at EOS
    assert explore(session, ids, out, ran=TreeConfig.chain(4)).row(TreeConfig.chain(4)).tau == pytest.approx(stats.tau)


def test_speedups_come_from_the_cost_model_with_the_known_error(session, tmp_path):
    from eagle_demo.autotree.choose import auto_tree

    choice = auto_tree(session, cache_dir=tmp_path)
    ids = session.encode(PROMPT)
    stats, out = _run(session, ids, choice.tree)
    x = explore(session, ids, out, ran=choice.tree, costs=choice.table.costs, scale=choice.table.scale,
                measured_tau=stats.tau)
    assert all(r.speedup == pytest.approx(r.tau / r.round_cost) and r.round_cost > 0 for r in x.rows)
    assert x.best.speedup == max(r.speedup for r in x.rows)
    low, high = KNOWN_ERROR
    line = x.summary()
    assert f"({x.best.speedup / high:.2f}-{x.best.speedup / low:.2f}x)" in line and "replayed tau" in line
    assert x.to_dict()["ran"] == choice.tree.label() and x.to_dict()["known_error"] == [low, high]


def test_walk_cuts_the_last_round_at_the_texts_end():
    # prompt of 3 tokens, text of 10: states 3..8; from 3 accept 4 (5 tokens) -> 8: accept 3 but 1 token is left
    assert walk({3: 4, 8: 3}, 3, 10) == (6 / 2, 0.0)


def test_a_shape_becomes_each_engines_flags():
    chain = shape_flags(TreeConfig.chain(6))
    assert chain["sglang"] == "--speculative-num-steps 6 --speculative-eagle-topk 1 --speculative-num-draft-tokens 7"
    assert chain["vllm"] == {"num_speculative_tokens": 6}
    tree = TreeConfig(depth=4, top_k=3, total_tokens=12)
    flags = shape_flags(tree)
    assert flags["sglang"] == "--speculative-num-steps 4 --speculative-eagle-topk 3 --speculative-num-draft-tokens 12"
    paths = static_tree(tree)
    assert flags["vllm"]["num_speculative_tokens"] == len(paths) == 11
    assert str(paths) == flags["vllm"]["speculative_token_tree"]
    assert paths == sorted(paths, key=lambda p: (len(p), p)) and len(set(paths)) == len(paths)
    assert all(len(p) <= 4 and max(p) < 3 and (len(p) == 1 or p[:-1] in paths) for p in paths)  # a real tree
    assert (0,) in paths and (0, 0, 0, 0) in paths  # the top-1 chain runs to the depth under the generic fall-off
    assert "TREE_ATTN" in flags["notes"][0]
