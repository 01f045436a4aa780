"""The static draft path (fixed K/V pools, full-width masks, a round's whole draft replayed as a CUDA graph on a
GPU) drafts what the growing path drafts: the same candidates round after round, chain and tree, EAGLE-1 and
EAGLE-3; with replays emulated on the CPU (every replay of a size rewrites the same output buffers, as a
captured graph does); and losslessly through the engine (tests/test_static.py runs the engine with both the
target and the draft static)."""

import pytest
import torch

from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding import static_draft
from eagle_demo.decoding.drafter import Drafter
from eagle_demo.decoding.engine import SpeculativeEngine
from eagle_demo.target.runner import TargetRunner
from eagle_demo.target.static import pool_size
from fixtures import random_eagle1, random_eagle3, tiny_target
from test_engine import PROMPT, hf_greedy, model_of

SHAPES = [TreeConfig.chain(5), TreeConfig.chain(6, 0.05), TreeConfig(depth=4, top_k=3, total_tokens=12)]


class _Replay:
    """A CPU stand-in for a captured graph: replay() reruns the captured call and writes into the same outputs."""

    def __init__(self, run):
        self.run = run
        self.out = tuple(t.clone() for t in run())

    def replay(self):
        for buf, new in zip(self.out, self.run()):
            buf.copy_(new)


def _capture(captured: list):
    def capture(self, key, run):
        replay = _Replay(run)
        self.graphs[key] = (replay, replay.out)
        captured.append(key)
    return capture


def _emulate_graphs(drafter: Drafter) -> list:
    captured = []
    drafter.static.graphs_on = True
    drafter.static._capture = _capture(captured).__get__(drafter.static)
    return captured


def _setup(family):
    model = tiny_target("qwen2", layers=3, seed=3, window=6) if family.endswith("window") else model_of("llama", 8)
    head = random_eagle3(model, draft_vocab=48) if family == "eagle3" else random_eagle1(model)
    runner = TargetRunner(model, head.feature_layers)
    runner.reset(64)
    ids = torch.tensor(PROMPT + [3, 9, 27, 81 % 96, 50, 11, 70, 20, 33, 5])  # [n]
    features = runner.forward(ids).features  # [n, F]
    return head, ids, features


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "replayed"])
@pytest.mark.parametrize("cfg", SHAPES, ids=lambda t: t.label())
@pytest.mark.parametrize("family", ["eagle1", "eagle3"])
def test_static_drafter_proposes_what_the_growing_one_does(family, cfg, graphs):
    head, ids, features = _setup(family)
    growing, static = Drafter(head), Drafter(head, static=True)
    entries = (cfg.depth - 1) * cfg.top_k
    for d in (growing, static):
        d.reset()
        d.reserve(ids.shape[0] + 1, entries)
    assert static.static is not None and static.static.capacity == pool_size(ids.shape[0] + 1 + entries)
    captured = _emulate_graphs(static) if graphs else []
    start = 0
    for end in (len(PROMPT), len(PROMPT) + 1, len(PROMPT) + 4, ids.shape[0] - 1):  # rounds committing 1-4 tokens
        for d in (growing, static):
            d.extend(features[start:end], ids[start + 1:end + 1])
            want_len = end
            assert d.length == want_len
        start = end
        root = int(ids[end])
        if cfg.top_k == 1:
            a, b = growing.draft(root, cfg), static.draft(root, cfg)
            assert a.token_list == b.token_list and a.parents == b.parents
            torch.testing.assert_close(torch.tensor(a.scores), torch.tensor(b.scores))
        else:
            a, b = growing.candidates(cfg), static.candidates(cfg)
            assert torch.equal(a.tokens, b.tokens) and torch.equal(a.parents, b.parents)
            torch.testing.assert_close(a.scores, b.scores)
            torch.testing.assert_close(a.logp, b.logp)
            a, b = growing.draft(root, cfg), static.draft(root, cfg)  # the whole tree in one (replayed) call
            assert a.token_list == b.token_list and a.parents == b.parents and a.depth_list == b.depth_list
            assert torch.equal(a.mask, b.mask)
            torch.testing.assert_close(torch.tensor(a.scores), torch.tensor(b.scores))
    if graphs:
        assert captured, "a draft depth was never replayed"


def test_replayed_depths_stay_lossless_through_the_engine(monkeypatch):
    model = model_of("llama")
    engine = SpeculativeEngine(model, random_eagle1(model), static=True)
    keys = []
    real_init = static_draft.StaticDraft.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.graphs_on = True

    monkeypatch.setattr(static_draft.StaticDraft, "__init__", init)
    monkeypatch.setattr(static_draft.StaticDraft, "_capture", _capture(keys))
    for tree in (TreeConfig.chain(5), TreeConfig(depth=3, top_k=3, total_tokens=10)):
        run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree)
        assert list(list(engine.generate(PROMPT, run))[-1].token_ids) == hf_greedy(model, PROMPT, 32)
    assert {("chain", 5, 0), ("tree", 3, 3, 10), ("extend", 1)} <= set(keys)


def test_static_draft_capacity_is_checked():
    head, ids, features = _setup("eagle1")
    d = Drafter(head, static=True)
    d.reserve(ids.shape[0], 0)  # no room reserved for a round's drafted entries
    d.extend(features[:-1], ids[1:])
    d.length = d.static.capacity - 2  # as after a run that filled the pools (rounded up to the pool step)
    with pytest.raises(ValueError, match="static draft cache holds"):
        d.draft(int(ids[-1]), TreeConfig.chain(4))
    with pytest.raises(ValueError, match="static draft cache holds"):
        d.draft(int(ids[-1]), TreeConfig(depth=3, top_k=2, total_tokens=5))


FORBIDDEN_IN_GRAPHS = {  # ops a CUDA graph cannot capture: a host read (a sync), a host tensor copied in, a
    "aten._local_scalar_dense.default", "aten.lift_fresh.default",  # data-dependent shape
    "aten.nonzero.default", "aten.masked_select.default", "aten.unique_dim.default", "aten._unique2.default"}


@pytest.mark.parametrize("family, tree", [
    ("eagle1", TreeConfig.chain(6)), ("eagle1", TreeConfig.chain(10, 0.05)),
    ("eagle1", TreeConfig.chain(5, hot_vocab=40)), ("eagle1", TreeConfig(depth=4, top_k=3, total_tokens=12)),
    ("eagle3", TreeConfig.chain(6)),
    ("eagle3", TreeConfig(depth=4, top_k=3, total_tokens=12)),
    ("eagle1-window", TreeConfig(depth=4, top_k=3, total_tokens=12))],
    ids=lambda x: x if isinstance(x, str) else x.label())
def test_what_a_gpu_captures_has_no_host_read_and_no_host_tensor(family, tree, monkeypatch):
    """The calls a GPU captures as CUDA graphs (the target's static forward, a static draft's whole chain or tree and
    its extend), run here with a dispatch mode that names every op: none reads a value back to the host, lifts a
    Python number or list into a tensor (a host-to-device copy on a GPU), or has a data-dependent shape."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from eagle_demo.target.static import StaticTarget

    seen: set[str] = set()

    class Names(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(str(func))
            return func(*args, **(kwargs or {}))

    def named(fn):
        def wrapped(*a, **k):
            with Names():
                return fn(*a, **k)
        return wrapped

    replayed, run = static_draft.StaticDraft.replayed, StaticTarget._run
    monkeypatch.setattr(static_draft.StaticDraft, "replayed", lambda self, key, fn: replayed(self, key, named(fn)))
    monkeypatch.setattr(StaticTarget, "_run", lambda self, x: named(run)(self, x))
    model = model_of("llama", layers=8)
    head = random_eagle1(model) if family == "eagle1" else random_eagle3(model, draft_vocab=48)
    engine = SpeculativeEngine(model, head, static=True)
    events = list(engine.generate(PROMPT, RunConfig(max_new_tokens=24, ignore_eos=True, tree=tree)))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 24)
    assert seen and not seen & FORBIDDEN_IN_GRAPHS, sorted(seen & FORBIDDEN_IN_GRAPHS)
