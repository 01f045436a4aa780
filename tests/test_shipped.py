"""The shipped tiny pair: loads through the adapter in its public layouts, stays lossless, and its heads
really predict the target (tau floors well below the measured values in docs/training.md and docs/perf.md)."""

import json
from pathlib import Path

import pytest

from eagle_demo.common.config import RunConfig, TreeConfig
from eagle_demo.decoding.metrics import summarize
from eagle_demo.session import ASSETS, SHIPPED_EAGLE1, SHIPPED_EAGLE3, SHIPPED_TARGET, load_session

PROMPTS = ["def fibonacci(n):\n", "class Stack:\n    \"\"\"A simple stack.\"\"\"\n\n    def __init__(self):\n",
           "import os\nimport sys\n\n\ndef main(argv):\n"]
TREE = TreeConfig(depth=5, top_k=4, total_tokens=16)


@pytest.fixture(scope="module")
def eagle1():
    return load_session(SHIPPED_TARGET, SHIPPED_EAGLE1, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def eagle3():
    return load_session(SHIPPED_TARGET, SHIPPED_EAGLE3, device="cpu", dtype="float32")


def test_assets_are_small_and_in_public_layouts():
    def size(folder: Path) -> int:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())

    smollm2 = [ASSETS / "smollm2-eagle3", ASSETS / "smollm2-eagle1", ASSETS / "chat_prompts"]
    added = sum(size(f) for f in smollm2)  # the real default pair's heads and prompts: at most 40 MB added
    assert added < 40e6 and size(ASSETS) - added < 40 * 2**20
    assert all(p.stat().st_size < 20e6 for p in ASSETS.rglob("*") if p.is_file())  # no LFS-sized file
    target = Path(SHIPPED_TARGET)
    assert (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file()
    e1 = json.loads((Path(SHIPPED_EAGLE1) / "config.json").read_text())
    assert e1["architectures"] == ["LlamaForCausalLM"] and e1["num_hidden_layers"] == 1 and "bias" in e1
    assert (Path(SHIPPED_EAGLE1) / "pytorch_model.bin").is_file()
    e3 = json.loads((Path(SHIPPED_EAGLE3) / "config.json").read_text())
    assert e3["architectures"] == ["LlamaForCausalLM"] and "draft_vocab_size" in e3 and "rope_theta" not in e3


def test_eagle1_report(eagle1):
    r = eagle1.report
    assert (r.family, r.source_layout, r.fc_bias, r.lm_head, r.embedding) == \
        ("eagle1", "yuhuili-eagle1", True, "target", "shared")
    assert eagle1.pair.head.lm_head.module is eagle1.pair.target.get_output_embeddings()


def test_eagle3_report(eagle3):
    r = eagle3.report
    layers = r.target_layers
    assert (r.family, r.source_layout) == ("eagle3", "yuhuili-eagle3")
    assert r.feature_layers == (2, layers // 2, layers - 3) and r.draft_vocab < r.target_vocab
    assert "t2d" in r.ignored_keys


@pytest.mark.parametrize("which", ["eagle1", "eagle3"])
@pytest.mark.slow
def test_greedy_equals_baseline_and_tau_floor(which, request):
    session = request.getfixturevalue(which)
    floor = {"eagle1": 2.8, "eagle3": 2.6}[which]
    taus = []
    for prompt in PROMPTS:
        ids = session.encode(prompt)
        run = RunConfig(max_new_tokens=64, tree=TREE)
        eagle = summarize(session.stream(ids, run, "eagle"))
        base = summarize(session.stream(ids, run, "baseline"))
        assert eagle.token_ids == base.token_ids
        taus.append(eagle.tau)
    assert sum(taus) / len(taus) > floor, taus


def test_chain_mode_is_lossless_with_eagle3(eagle3):
    ids = eagle3.encode(PROMPTS[0])
    run = RunConfig(max_new_tokens=48, tree=TreeConfig.chain(4))
    assert (summarize(eagle3.stream(ids, run, "eagle")).token_ids
            == summarize(eagle3.stream(ids, run, "baseline")).token_ids)


def test_a_second_draft_shares_the_target_and_stays_lossless(eagle1, tmp_path):
    from eagle_demo.checkpoints import IncompatiblePairError
    from layouts import write_vicuna_eagle1

    other = eagle1.with_draft(SHIPPED_EAGLE3)
    assert other.pair.target is eagle1.pair.target and other.tokenizer is eagle1.tokenizer
    assert other.baseline is eagle1.baseline and other.eagle is not eagle1.eagle
    assert (other.report.family, other.report.draft) == ("eagle3", SHIPPED_EAGLE3)
    assert other.report.shared_bytes > 0  # the target's embedding, not a copy
    ids = eagle1.encode(PROMPTS[1])
    run = RunConfig(max_new_tokens=40, tree=TREE)
    base = summarize(eagle1.stream(ids, run, "baseline")).token_ids
    assert summarize(other.stream(ids, run)).token_ids == base == summarize(eagle1.stream(ids, run)).token_ids
    with pytest.raises(IncompatiblePairError) as err:  # a draft made for another target (hidden 64)
        eagle1.with_draft(str(write_vicuna_eagle1(tmp_path / "vicuna")))
    assert "\n" not in str(err.value)
