"""A draft over a hot vocabulary (`TreeConfig.hot_vocab`): the top-k over the first ids and the run's context ids
(`HotVocab`; a fixed-address table on the static path, for its CUDA graphs), rows copied in the loader's layout;
engines drafting that way stay lossless (greedy, eager and static, and seeded sampling); the static drafter drafts
what the growing one does; calibration prices and keeps its shapes."""

import pytest
import torch

from eagle_demo.autotree.costs import Costs, Line
from eagle_demo.autotree.replay_batch import hot_table
from eagle_demo.autotree.retune import ShapeTable
from eagle_demo.common.config import ConfigError, RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.events import Round
from eagle_demo.decoding.hot_vocab import HotVocab
from eagle_demo.drafts.base import shares_target_vocab, top_logp
from eagle_demo.drafts.hass import HassHead
from eagle_demo.target.cpu_layout import column_major_linears
from fixtures import draft_config, random_eagle1, random_eagle3, tiny_target
from test_engine import PROMPT, hf_greedy

HOT_TREES = [TreeConfig.chain(6, hot_vocab=48), TreeConfig.chain(16, 0.05, 48), TreeConfig.chain(4, hot_vocab=90)]


def test_the_hot_top_k_is_the_top_k_over_the_first_ids():
    model = tiny_target("llama")
    table = HotVocab(random_eagle1(model), 40)
    g = torch.randn(5, 64) * 3  # [m, H]
    for k in (1, 3):
        logp, ids = table.topk(g, k)
        want_logp, want_ids = top_logp(model.lm_head(g)[:, :40], k)  # renormalised over the 40 ids
        assert torch.equal(ids, want_ids) and bool((ids < 40).all())
        torch.testing.assert_close(logp, want_logp, rtol=1e-6, atol=1e-6)


def test_a_hass_head_reads_the_lm_head_through_its_norm():
    model = tiny_target("llama")
    head = HassHead(draft_config(model), model.lm_head, model.get_input_embeddings(), norms=("lm_head_norm",),
                    layer0_input_norm=False).eval()
    with torch.no_grad():
        head.lm_head_norm.weight.uniform_(0.5, 2.0)
    g = torch.randn(4, 64) * 3  # [m, H]
    logp, ids = HotVocab(head, 40).topk(g, 2)
    want_logp, want_ids = top_logp(model.lm_head(head.lm_head_norm(g))[:, :40], 2)
    assert torch.equal(ids, want_ids) and torch.allclose(logp, want_logp)


def test_the_table_takes_context_ids_in_order_and_maps_rows_back():
    model = tiny_target("llama")
    column_major_linears(model)
    table = HotVocab(random_eagle1(model), 40, room=2)
    assert table.add([3, 70, 41, 70, 12, 90, 55]) == 4 and table.add([41, 90]) == 0  # grew past its room of 2
    assert table.n == 44 and table.ids[40:44].tolist() == [70, 41, 90, 55] and table.rows.stride()[0] == 1
    assert torch.equal(table.rows, model.lm_head.weight[[*range(40), 70, 41, 90, 55]])
    g = torch.randn(3, 64) * 3  # [m, H]
    logp, ids = table.topk(g, 2)
    full = model.lm_head(g)[:, [*range(40), 70, 41, 90, 55]]  # [m, 44]
    want_logp, want_rows = top_logp(full, 2)
    assert torch.equal(ids, table.ids[want_rows]) and torch.allclose(logp, want_logp)
    hidden = torch.zeros(3, 44)
    hidden[:, 40:] = float("-inf")  # the mask leaves the first ids only
    assert bool((table.topk(g, 2, hidden)[1] < 40).all())


def test_a_fixed_table_masks_its_room_keeps_its_addresses_and_clears():
    model = tiny_target("llama")
    head = random_eagle1(model)
    fixed, growing = HotVocab(head, 40, room=3, fixed=True), HotVocab(head, 40, room=1)
    store = fixed._store.data_ptr()
    g = torch.randn(4, 64) * 3  # [m, H]
    for ids, took in (([3, 70, 41], 2), ([70, 90], 1)):
        assert fixed.add(ids) == took and growing.add(ids) == took
        for k in (1, 2):  # the same top-k as the growing table holding the same rows
            (a_logp, a_ids), (b_logp, b_ids) = fixed.topk(g, k), growing.topk(g, k)
            assert torch.equal(a_ids, b_ids) and torch.allclose(a_logp, b_logp, atol=1e-6)
    assert fixed.add([55, 60]) == 0 and growing.add([55, 60]) == 2  # the room of 3 is full; the other grows
    assert fixed.ids[40:43].tolist() == [70, 41, 90] and fixed._store.data_ptr() == store
    want_logp, want_rows = top_logp(model.lm_head(g)[:, [*range(40), 70, 41, 90]], 2)
    logp, ids = fixed.topk(g, 2)
    assert torch.equal(ids, fixed.ids[want_rows]) and torch.allclose(logp, want_logp, atol=1e-6)
    fixed.clear()
    assert fixed.n == 40 and bool((fixed.topk(g, 3)[1] < 40).all()) and fixed._store.data_ptr() == store


@pytest.mark.parametrize("tree", [TreeConfig.chain(6, hot_vocab=8), TreeConfig.chain(16, 0.05, 8)],
                         ids=lambda t: t.label())
@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "replayed"])
def test_the_static_drafter_drafts_the_growing_ones_hot_chain(tree, graphs):
    """Also with graph replays emulated: the table's context rows are written in place, where a replay reads."""
    from eagle_demo.decoding.drafter import Drafter
    from eagle_demo.target.runner import TargetRunner
    from test_static_draft import _emulate_graphs

    model = tiny_target("llama", layers=4)
    head = random_eagle1(model)
    runner = TargetRunner(model, None)
    runner.reset(64)
    ids = torch.tensor(PROMPT + [70, 91, 70, 5, 88, 60, 77, 70, 3])  # [n] late ids enter the context
    features = runner.forward(ids).features  # [n, F]
    growing, static = Drafter(head), Drafter(head, static=True)
    for d in (growing, static):
        d.reserve(ids.shape[0] + 1, tree.depth)
    captured = _emulate_graphs(static) if graphs else []
    start, outside = 0, 0
    for end in (len(PROMPT), len(PROMPT) + 3, ids.shape[0] - 1):
        for d in (growing, static):
            d.extend(features[start:end], ids[start + 1:end + 1])
        start = end
        a, b = growing.draft(int(ids[end]), tree), static.draft(int(ids[end]), tree)
        assert a.token_list == b.token_list
        torch.testing.assert_close(torch.tensor(a.scores), torch.tensor(b.scores))
        outside += sum(t >= tree.hot_vocab for t in a.token_list[1:])
    assert outside  # context ids were drafted, by both
    assert not graphs or ("chain", tree.depth, tree.hot_vocab) in captured
    static.reset()  # a new run: the fixed table forgets this run's context ids
    assert static.static.hot_table(tree.hot_vocab)[0].n == tree.hot_vocab


def test_the_replays_table_shows_each_state_the_ids_its_context_extended():
    model = tiny_target("llama")
    text = torch.tensor([80, 5, 70, 6, 91, 70, 7])  # text[0] is never extended: 80 only if it comes again
    table, first = hot_table(random_eagle1(model), 40, text)
    assert table.ids[40:table.n].tolist() == [70, 91] and first.tolist() == [0] * 40 + [2, 4]


def test_only_heads_over_the_targets_lm_head_take_a_hot_vocabulary():
    model = tiny_target("llama")
    assert shares_target_vocab(random_eagle1(model))
    eagle3 = random_eagle3(model, draft_vocab=48)
    assert not shares_target_vocab(eagle3)
    with pytest.raises(ConfigError, match="has its own vocabulary"):
        HotVocab(eagle3, 32)
    with pytest.raises(ConfigError, match="hot vocabulary 96 is out of range"):
        HotVocab(random_eagle1(model), 96)


def test_tree_config_takes_a_hot_vocabulary_for_chains_only():
    assert (TreeConfig.chain(16, 0.02, 2048).label()
            == "chain k=16 (stops under p=0.02; drafts over the first 2048 ids plus context ids)")
    assert TreeConfig.chain(8, hot_vocab=512).label() == "chain k=8 (drafts over the first 512 ids plus context ids)"
    with pytest.raises(ConfigError, match="chains only"):
        TreeConfig(depth=3, top_k=2, total_tokens=6, hot_vocab=64)
    with pytest.raises(ConfigError, match="hot vocabulary 1 is out of range"):
        TreeConfig.chain(4, hot_vocab=1)


@pytest.mark.parametrize("tree", HOT_TREES, ids=lambda t: t.label())
@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_greedy_over_a_hot_vocabulary_equals_the_stock_generate(tree, static):
    model = tiny_target("llama", layers=6)
    want = hf_greedy(model, PROMPT, 40)
    engine = SpeculativeEngine(model, random_eagle1(model), static=static)
    events = list(engine.generate(PROMPT, RunConfig(max_new_tokens=40, ignore_eos=True, tree=tree)))
    assert list(events[-1].token_ids) == want
    done, drafted, outside = 1, 0, 0  # output tokens committed before a round: the prefill commits the first
    for ev in (e for e in events if isinstance(e, Round)):
        context = set(PROMPT[1:]) | set(want[:done])  # what the drafter has extended
        for node in ev.nodes[1:]:
            drafted += 1
            assert node.token_id < tree.hot_vocab or node.token_id in context, ev.index
            outside += node.token_id >= tree.hot_vocab
        done += len(ev.committed_ids)
    assert drafted and (tree.stops or tree.hot_vocab > 60 or outside)  # context ids are drafted


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seeded_sampling_over_a_hot_vocabulary_equals_the_baseline(seed):
    model = tiny_target("qwen2")
    run = RunConfig(max_new_tokens=24, ignore_eos=True, tree=TreeConfig.chain(5, 0.05, 32),
                    sampling=SamplingConfig(temperature=0.9, top_p=0.95, seed=seed))
    want = list(BaselineEngine(model).generate(PROMPT, run))[-1].token_ids
    assert list(SpeculativeEngine(model, random_eagle1(model)).generate(PROMPT, run))[-1].token_ids == want


def test_a_hot_chain_is_priced_with_its_own_draft_line_and_kept_in_the_table():
    line = Line.through(1, 1e-3, 16, 16e-3)
    costs = Costs(plain=5e-3, verify=Line(6e-3, 0.0, 0.2e-3), tree_extra=0.0, draft={1: line}, extend=Line(0, 0, 0),
                  host=Line(0, 0, 0), hot={2048: Line.through(1, 0.5e-3, 16, 8e-3)})
    full, hot = TreeConfig.chain(8), TreeConfig.chain(8, hot_vocab=2048)
    assert costs.round(full, 4.0) - costs.round(hot, 4.0) == pytest.approx(4e-3)  # 8 depths at 1 ms against 0.5
    table = ShapeTable(shapes=(full, hot), taus=(4.0, 3.9), offered=((1.0,),), accepted=((1.0,),), lead=((1.0, 1.0),),
                       costs=costs, scale=1.1, drafted=(0.0, 0.0))
    back = ShapeTable.from_dict(table.to_dict())
    assert back.shapes == (full, hot) and back.costs.hot == costs.hot
