"""The static-cache target path (fixed-size pool, full-width masks, CUDA graphs on a GPU) is as lossless as the
growing one: greedy equality with transformers' own generate, seeded sampling equal to the seeded baseline, and
the enumerated chi-square test. CPU runs the static path eagerly; the graph tests need a GPU and skip without."""

import pytest
import torch

from eagle_demo.common.config import RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.target.static import POOL_STEP, pool_size
from fixtures import random_eagle1, random_eagle3, tiny_target
from test_engine import PROMPT, hf_greedy, model_of
from test_sampling import chi2_pvalue, enumerate_probs, sample_counts

TREES = [TreeConfig.chain(1), TreeConfig.chain(5), TreeConfig(depth=3, top_k=2, total_tokens=8),
         TreeConfig(depth=4, top_k=4, total_tokens=16)]


def tokens(engine, run, prompt=PROMPT):
    return list(list(engine.generate(prompt, run))[-1].token_ids)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.label())
def test_static_greedy_equals_target_generate(family, tree):
    model = model_of(family)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=tree)
    engine = SpeculativeEngine(model, random_eagle1(model), static=True)
    want = hf_greedy(model, PROMPT, 32)
    assert tokens(engine, run) == want
    assert tokens(engine, run, PROMPT[:5]) == hf_greedy(model, PROMPT[:5], 32)  # buffers reused across runs
    assert tokens(BaselineEngine(model, static=True), run) == want
    need = len(PROMPT) + 32 + tree.total_tokens  # sized to the run, rounded up to the pool step
    assert engine.runner.static is not None and engine.runner.static.capacity == pool_size(need) < need + POOL_STEP


def test_static_eagle3_features():
    model = model_of("llama", layers=8)
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=TreeConfig(3, 3, 10))
    engine = SpeculativeEngine(model, random_eagle3(model, draft_vocab=48), static=True)
    assert tokens(engine, run) == hf_greedy(model, PROMPT, 32)


@pytest.mark.parametrize("seed", [0, 1])
def test_static_seeded_sampling_equals_seeded_baseline(seed):
    model = tiny_target("qwen2", seed=seed)
    cfg = SamplingConfig(temperature=0.8, top_p=0.95, top_k=40, seed=seed)
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig(depth=3, top_k=3, total_tokens=10),
                    sampling=cfg)
    prompt = [1, 4, 8, 15, 16, 23, 42]
    eagle = tokens(SpeculativeEngine(model, random_eagle1(model), static=True), run, prompt)
    assert (eagle == tokens(BaselineEngine(model, static=True), run, prompt)
            == tokens(BaselineEngine(model), run, prompt))


def test_static_sampling_is_the_target_distribution():
    small = tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)
    cfg = SamplingConfig(temperature=1.3)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5), static=True)
    counts = sample_counts(engine, cfg, TreeConfig(depth=3, top_k=3, total_tokens=10), n=800)
    assert chi2_pvalue(counts, enumerate_probs(small, cfg), n=800) > 1e-3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("tree", [TreeConfig(depth=4, top_k=3, total_tokens=12), TreeConfig.chain(6),
                                  TreeConfig.chain(8, 0.05)], ids=lambda t: t.label())
def test_cuda_graphs_replay_losslessly(tree):
    model = tiny_target("llama").cuda()
    run = RunConfig(max_new_tokens=48, ignore_eos=True, tree=tree)
    engine = SpeculativeEngine(model, random_eagle1(model).cuda(), static=True)
    want = tokens(BaselineEngine(model), run)
    assert tokens(engine, run) == want
    static, draft = engine.runner.static, engine.drafter.static
    assert static.graphs, getattr(static, "capture_error", "no graph was captured")
    kind = "tree" if tree.top_k > 1 else "chain"
    assert any(key[0] == kind for key in draft.graphs), draft.capture_error or "no draft graph was captured"
    assert tokens(BaselineEngine(model, static=True), run) == want


def test_static_is_the_default_on_cuda_only_and_the_flag_overrides_it():
    import argparse
    from types import SimpleNamespace

    from eagle_demo.commands.args import add_engine_args
    from eagle_demo.session import SHIPPED_TARGET, default_static, load_session

    def target(device: str, device_map: dict | None = None, **config):  # what default_static reads
        head = SimpleNamespace(weight=SimpleNamespace(device=torch.device(device)))
        text = SimpleNamespace(**config)
        return SimpleNamespace(hf_device_map=device_map, get_output_embeddings=lambda: head,
                               config=SimpleNamespace(get_text_config=lambda: text), modules=lambda: [])

    assert default_static(target("cuda:0")) and default_static(target("cuda:0", {"": "cuda:0"}))
    assert not default_static(target("cpu")) and not default_static(target("cuda:0", {"a": 0, "b": 1}))
    assert default_static(target("cuda:0", sliding_window=4096))  # a window in use: the static masks apply it
    rotary = SimpleNamespace(rope_type="dynamic", inv_freq=None, original_max_seq_len=4096)
    dynamic = target("cuda:0")
    dynamic.modules = lambda: [rotary]
    assert not default_static(dynamic)  # its rotary update reads the host inside the forward: no graph
    rotary.rope_type = "llama3"
    assert default_static(dynamic)
    p = argparse.ArgumentParser()
    add_engine_args(p)
    assert [p.parse_args(a).static for a in ([], ["--static"], ["--no-static"])] == [None, True, False]
    assert not load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32").static
    assert load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32", static=True).static


def test_the_load_report_names_the_engines_path_on_a_gpu(monkeypatch):
    from eagle_demo.session import SHIPPED_TARGET, Session, load_session

    eager, static = (load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32", static=s)
                     for s in (False, True))
    assert eager.report_markdown() == eager.report.to_markdown()  # a CPU: the report alone
    monkeypatch.setattr(Session, "device", property(lambda self: torch.device("cuda", 0)))
    assert "static caches + CUDA graphs" in static.report_markdown()
    assert "growing caches, eager kernels" in eager.report_markdown()


def test_a_long_forward_is_never_captured_nor_are_its_inputs_kept(monkeypatch):
    """A prefill (longer than GRAPH_MAX_TOKENS) runs eagerly every time: a long-running app would otherwise keep
    a graph, and static inputs, per prompt length. A verify-sized forward is captured on its second use."""
    from eagle_demo.target.runner import TargetRunner
    from eagle_demo.target.static import GRAPH_MAX_TOKENS, StaticTarget

    captured = []
    monkeypatch.setattr(StaticTarget, "_capture", lambda self, n, x: captured.append(n))
    model = model_of("llama")
    runner = TargetRunner(model, None, static=True)
    runner.reset(256)
    runner.static.graphs_on = True  # as on a GPU; the capture itself is recorded, not made
    for n in (GRAPH_MAX_TOKENS + 36, 3):
        for _ in range(2):
            runner.forward(torch.arange(n) % 90)
            runner.commit([])
    assert captured == [3] and set(runner.static.inputs) == {3}


def test_a_failed_graph_capture_is_named_in_one_line():
    from eagle_demo.session import SHIPPED_TARGET, load_session

    session = load_session(SHIPPED_TARGET, threads=1, device="cpu", dtype="float32", static=True)
    ids = session.encode("def add(a, b):\n")
    list(session.stream(ids, RunConfig(max_new_tokens=4, tree=TreeConfig.chain(3))))  # makes the static pools
    assert session.graph_note() == ""
    error = "chain: RuntimeError: operation not permitted when stream is\ncapturing"  # as a failed capture leaves
    session.eagle.drafter.static.capture_error = error
    note = session.graph_note()
    assert note.startswith("a CUDA graph capture failed (draft chain: RuntimeError: operation not permitted when")
    assert "\n" not in note and note.endswith("those calls run eagerly: slower, the same output")
