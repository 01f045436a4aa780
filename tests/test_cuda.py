"""The CUDA path (runs only where a GPU is present; CI has none). scripts/gpu_check.py measures the rest.

On the first H200 run, seeded sampling crashed on CUDA (the sampler's uniform was made on the CPU);
these tests keep the GPU path of both promises: greedy equals plain greedy, seeded EAGLE equals the
seeded baseline."""

import pytest
import torch

from eagle_demo.common.config import TREE_PRESETS, RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.metrics import summarize
from eagle_demo.decoding.sampling import PositionSampler
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_EAGLE3, SHIPPED_TARGET, load_session

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

PROMPTS = ["def fibonacci(n):\n", "The quick brown fox", "import os\nimport sys\n"]


@pytest.fixture(scope="module", params=[SHIPPED_EAGLE1, SHIPPED_EAGLE3], ids=["eagle1", "eagle3"])
def session(request):
    return load_session(SHIPPED_TARGET, request.param, device="cuda", dtype="float32")


def test_sampler_on_cuda_probs():
    probs = torch.softmax(torch.randn(100, device="cuda"), -1)
    cpu = PositionSampler(3).sample(probs.cpu(), 7)
    assert PositionSampler(3).sample(probs, 7) == cpu


@pytest.mark.parametrize("tree", [TreeConfig.chain(7), TREE_PRESETS["gpu-eagle3"]], ids=["chain7", "tree60"])
def test_greedy_equals_baseline_on_cuda(session, tree):
    for prompt in PROMPTS:
        ids = session.encode(prompt)
        run = RunConfig(max_new_tokens=64, tree=tree)
        assert summarize(session.stream(ids, run, "eagle")).token_ids == \
            summarize(session.stream(ids, run, "baseline")).token_ids


def test_seeded_sampling_equals_seeded_baseline_on_cuda(session):
    for seed, prompt in enumerate(PROMPTS):
        ids = session.encode(prompt)
        run = RunConfig(max_new_tokens=48, tree=TREE_PRESETS["gpu-eagle2"],
                        sampling=SamplingConfig(temperature=0.8, top_p=0.95, seed=seed))
        assert summarize(session.stream(ids, run, "eagle")).token_ids == \
            summarize(session.stream(ids, run, "baseline")).token_ids


@pytest.mark.parametrize("family", ["mistral", "qwen2"])
def test_windowed_target_on_cuda_static_graphs_equals_its_generate(family):
    """A 6-token sliding window (every layer / a mask per layer type) on CUDA's default path, static caches and
    graphs: the window is applied inside the captured forwards too."""
    from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
    from fixtures import random_eagle1, tiny_target
    from test_engine import PROMPT

    model = tiny_target(family, layers=3, seed=3, window=6).to("cuda")
    ids = torch.tensor([PROMPT], device="cuda")
    out = model.generate(ids, do_sample=False, max_new_tokens=48, pad_token_id=0, attention_mask=torch.ones_like(ids))
    want = out[0, len(PROMPT):].tolist()  # transformers builds its own windowed masks
    for tree in (TreeConfig.chain(4), TreeConfig(depth=4, top_k=3, total_tokens=12)):
        run = RunConfig(max_new_tokens=48, ignore_eos=True, tree=tree)
        engine = SpeculativeEngine(model, random_eagle1(model).to("cuda"), static=True)
        for _ in range(2):  # the second run replays the graphs captured in the first
            assert list(list(engine.generate(PROMPT, run))[-1].token_ids) == want
    plain = BaselineEngine(model, static=True)
    assert [list(list(plain.generate(PROMPT, run))[-1].token_ids) for _ in range(2)] == [want, want]
