"""Pausing the draft (`gate`): the gate's rule, and that rounds without a draft keep every lossless promise on the
eager and static paths (greedy equality with transformers' generate, seeded sampling equal to the seeded baseline,
the enumerated chi-square test), and that the draft catches up exactly on the pairs of the plain rounds."""

import pytest
import torch

import eagle_demo.decoding.gate as gate_mod
from eagle_demo.common.config import ConfigError, RunConfig, SamplingConfig, TreeConfig
from eagle_demo.decoding.engine import BaselineEngine, SpeculativeEngine
from eagle_demo.decoding.events import Round
from eagle_demo.decoding.gate import DraftGate
from eagle_demo.decoding.metrics import summarize
from eagle_demo.target.runner import TargetOutput
from fixtures import random_eagle1, random_eagle3, tiny_target
from test_engine import PROMPT, hf_greedy, model_of
from test_sampling import chi2_pvalue, enumerate_probs, sample_runs

TREES = [TreeConfig.chain(4), TreeConfig(depth=3, top_k=2, total_tokens=8)]


def test_gate_pauses_below_the_break_even_probes_and_resumes():
    gate = DraftGate(2.0, window=3, pause=2)
    for committed in (1, 1):
        gate.after_draft(committed)
        assert gate.drafting  # the window is not full yet
    gate.after_draft(1)
    assert not gate.drafting
    gate.after_plain()
    assert not gate.drafting
    gate.after_plain()
    assert gate.drafting  # the probe round
    gate.after_draft(5)  # window (1, 1, 5): mean 2.33 >= 2.0, drafting goes on
    assert gate.drafting
    gate.after_draft(1)  # (1, 5, 1): 2.33
    assert gate.drafting
    gate.after_draft(1)  # (5, 1, 1): 2.33
    gate.after_draft(1)  # (1, 1, 1): 1.0
    assert not gate.drafting


def test_a_window_within_the_margin_of_the_break_even_keeps_drafting():
    """The break-even is a prediction (a loaded machine's calibration prices rounds 5-10% high): a window pauses
    only under MARGIN x its break-even."""
    assert gate_mod.MARGIN == 0.9
    kept, paused = DraftGate(2.1, window=5, pause=2), DraftGate(2.1, window=5, pause=2)
    for committed in (2, 2, 2, 2, 2):  # mean 2.0: under the break-even 2.1, within the margin (1.89)
        kept.after_draft(committed)
    for committed in (2, 2, 2, 2, 1):  # mean 1.8: under 0.9 x 2.1
        paused.after_draft(committed)
    assert kept.drafting and not paused.drafting


def test_failed_probes_double_the_pause_up_to_its_cap(monkeypatch):
    monkeypatch.setattr(gate_mod, "MAX_PAUSE", 8)
    gate = DraftGate(2.0, window=2, pause=2)
    gate.after_draft(1)
    gate.after_draft(1)
    pauses = []
    for _ in range(5):  # each probe commits 1 token: the mean stays under the break-even
        n = 0
        while not gate.drafting:
            gate.after_plain()
            n += 1
        pauses.append(n)
        gate.after_draft(1)
    assert pauses == [2, 4, 8, 8, 8]
    for _ in range(gate.plain_left):
        gate.after_plain()
    gate.after_draft(5)  # the probe pays: (1, 5) mean 3.0, drafting resumes and the pause is back to 2
    assert gate.drafting and gate.next_pause == 2
    gate.after_draft(1)  # (5, 1): 3.0
    gate.after_draft(1)  # (1, 1): 1.0, a pause of 2
    assert gate.plain_left == 2


def test_a_probe_that_pays_starts_the_window_afresh():
    """Text that turns predictable after a pause (a loop, say) is drafted at once: the rounds before the pause no
    longer hold the mean down. A probe under the break-even still joins the old window."""
    gate = DraftGate(2.0, window=3, pause=2)
    for committed in (1, 1, 1):
        gate.after_draft(committed)
    gate.after_plain()
    gate.after_plain()
    assert gate.drafting
    gate.after_draft(3)  # the old window (1, 1, 3) has mean 1.67; the probe alone pays
    assert gate.drafting and [c for c, _ in gate.recent] == [3]
    gate.after_draft(1)
    gate.after_draft(1)  # (3, 1, 1): 1.67, full: a pause
    assert not gate.drafting
    gate.after_plain()
    gate.after_plain()
    gate.after_draft(1)  # a probe under the break-even joins the window: (1, 1, 1)
    assert [c for c, _ in gate.recent] == [1, 1, 1] and not gate.drafting


def test_gate_off_never_pauses():
    gate = DraftGate(0.0, window=2, pause=5)
    for _ in range(10):
        gate.after_draft(1)
        assert gate.drafting
    with pytest.raises(ConfigError, match="pause_below"):
        RunConfig(pause_below=-1.0)


def test_a_run_the_calibration_expects_to_lose_starts_paused_then_probes():
    gate = DraftGate(2.0, window=3, pause=2, start_paused=True)
    assert not gate.drafting
    gate.after_plain()
    assert not gate.drafting
    gate.after_plain()
    assert gate.drafting  # the probe
    gate.after_draft(3)  # it paid: the window starts afresh from it, and drafting goes on
    assert gate.drafting
    assert DraftGate(0.0, start_paused=True).drafting  # a gate that never pauses never starts paused


def test_auto_starts_paused_only_where_its_tau_is_under_the_margin_of_its_round_cost():
    from eagle_demo.autotree.choose import AutoChoice

    def choice(tau, cost):
        return AutoChoice(tree=TreeConfig.chain(1), predicted_tau=tau, predicted_round_cost=cost,
                          predicted_speedup=tau / cost, plain_step_ms=1.0, calibration_seconds=1.0)

    weak, strong, near = choice(1.05, 1.5), choice(5.0, 1.5), choice(1.4, 1.5)  # near: within the 10% margin
    assert [c.run_config(RunConfig()).pause_first for c in (weak, strong, near)] == [True, False, False]
    model = model_of("llama")
    run = weak.run_config(RunConfig(max_new_tokens=24, ignore_eos=True))
    events = list(SpeculativeEngine(model, random_eagle1(model)).generate(PROMPT, run))
    assert [len(r.nodes) == 1 for r in rounds_of(events)][:gate_mod.PAUSE] == [True] * gate_mod.PAUSE
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 24)


def rounds_of(events):
    return [e for e in events if isinstance(e, Round)]


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
@pytest.mark.parametrize("family", ["llama", "qwen2"])
@pytest.mark.parametrize("tree", TREES, ids=lambda t: t.label())
def test_paused_rounds_keep_greedy_equality(static, family, tree, monkeypatch):
    monkeypatch.setattr(gate_mod, "MAX_PAUSE", gate_mod.PAUSE)  # a probe every 13 rounds: many of both kinds
    model = model_of(family)
    engine = SpeculativeEngine(model, random_eagle1(model), static=static)
    events = list(engine.generate(PROMPT, RunConfig(max_new_tokens=40, ignore_eos=True, tree=tree, pause_below=3.0)))
    assert list(events[-1].token_ids) == hf_greedy(model, PROMPT, 40)
    rounds = rounds_of(events)
    plain = [r for r in rounds if len(r.nodes) == 1]
    assert len(plain) >= 20 and len(rounds) - len(plain) >= 8  # both kinds ran, probes included
    assert all(r.committed_ids == (r.bonus_id,) and not r.accepted_ids for r in plain)
    stats = summarize(events)  # plain rounds offer no draft: acceptance by depth counts drafting rounds only
    assert stats.rounds == len(rounds) and stats.new_tokens == 40


def test_paused_rounds_with_eagle3_features():
    model = model_of("llama", layers=8)
    engine = SpeculativeEngine(model, random_eagle3(model, draft_vocab=48))
    run = RunConfig(max_new_tokens=32, ignore_eos=True, tree=TreeConfig(3, 3, 10), pause_below=3.0)
    assert list(list(engine.generate(PROMPT, run))[-1].token_ids) == hf_greedy(model, PROMPT, 32)


def reference_tree(model, head, ids, root):
    """The tree a draft whose cache took every pair before position `root` in one extend drafts there."""
    engine = SpeculativeEngine(model, head)
    engine.runner.reset(len(ids) + 16)
    engine.drafter.reserve(len(ids) + 16)
    out = engine.runner.forward(torch.tensor(ids[:root + 1]))
    engine.drafter.extend(out.features[:root], torch.tensor(ids[1:root + 1]))
    return list(engine.drafter.draft(ids[root], TREES[1]).token_list)


def test_the_draft_catches_up_on_the_plain_rounds_pairs():
    """Each probe round after a pause drafts the tree a draft that saw every committed pair drafts: the plain
    rounds' (feature, token) pairs reach the draft's cache, in order."""
    model = model_of("llama")
    head = random_eagle1(model)
    check_probes(model, head, SpeculativeEngine(model, head))


def test_held_pairs_survive_reused_output_buffers():
    """A replayed CUDA graph returns the same output tensors for every forward of its size, rewritten in place:
    the plain rounds' features the draft holds must be copies. On the CPU, outputs are made to behave so."""
    model = model_of("llama")
    head = random_eagle1(model)
    engine = SpeculativeEngine(model, head)
    real, buffers = engine.runner.forward, {}

    def replayed(input_ids, depths=None, tree_mask=None):
        out = real(input_ids, depths, tree_mask)
        with torch.inference_mode():
            logits, features = buffers.setdefault(input_ids.shape[0], (out.logits.clone(), out.features.clone()))
            logits.copy_(out.logits)
            features.copy_(out.features)
        return TargetOutput(logits=logits, features=features)

    engine.runner.forward = replayed
    check_probes(model, head, engine)


def check_probes(model, head, engine):
    events = list(engine.generate(PROMPT, RunConfig(max_new_tokens=80, ignore_eos=True, tree=TREES[1],
                                                    pause_below=3.0)))
    ids = PROMPT + list(events[-1].token_ids)
    rounds = rounds_of(events)
    probes = [r for prev, r in zip(rounds, rounds[1:]) if len(prev.nodes) == 1 and len(r.nodes) > 1]
    assert len(probes) >= 2
    for r in probes:
        root = len(PROMPT) + r.total_new_tokens - len(r.committed_ids) - 1
        assert r.nodes[0].token_id == ids[root]
        assert [n.token_id for n in r.nodes] == reference_tree(model, head, ids, root)


@pytest.mark.parametrize("static", [False, True], ids=["eager", "static"])
def test_paused_rounds_keep_seeded_sampling(static):
    model = tiny_target("qwen2", seed=1)
    cfg = SamplingConfig(temperature=0.8, top_p=0.95, top_k=40, seed=1)
    run = RunConfig(max_new_tokens=30, ignore_eos=True, tree=TreeConfig(3, 3, 10), sampling=cfg, pause_below=3.0)
    prompt = [1, 4, 8, 15, 16, 23, 42]
    events = list(SpeculativeEngine(model, random_eagle1(model), static=static).generate(prompt, run))
    assert any(len(r.nodes) == 1 for r in rounds_of(events))
    assert list(events[-1].token_ids) == list(list(BaselineEngine(model).generate(prompt, run))[-1].token_ids)


@pytest.mark.slow
def test_paused_rounds_sample_the_target_distribution(monkeypatch):
    """Draft, plain, draft, plain... (a window of one round, pauses of one): still the target's distribution."""
    monkeypatch.setattr(gate_mod, "WINDOW", 1)
    monkeypatch.setattr(gate_mod, "PAUSE", 1)
    small = tiny_target("llama", layers=2, hidden=32, vocab=8, seed=3)
    engine = SpeculativeEngine(small, random_eagle1(small, seed=5))
    n, cfg = 800, SamplingConfig(temperature=1.3)
    counts, runs = sample_runs(engine, n, cfg, tree=TreeConfig.chain(1), pause_below=10.0)
    assert sum(len(r.nodes) == 1 for events in runs for r in rounds_of(events)) >= n // 2
    assert chi2_pvalue(counts, enumerate_probs(small, cfg), n=n) > 1e-3


def test_the_page_and_the_api_say_the_draft_paused():
    from types import SimpleNamespace

    from eagle_demo.decoding.metrics import RunView
    from eagle_demo.view.stats import stats_html, summary
    from eagle_demo.view.tokens import token_html
    from eagle_demo.view.tree_chart import tree_figure

    model = model_of("llama")
    engine = SpeculativeEngine(model, random_eagle1(model))
    view = RunView.of(engine.generate(PROMPT, RunConfig(max_new_tokens=40, ignore_eos=True, tree=TREES[0],
                                                        pause_below=3.0)))
    plain = [r for r in view.rounds if len(r.nodes) == 1]
    stats = summary(view, None, True)
    assert stats["plain_rounds"] == len(plain) >= 20 and stats["rounds"] == len(view.rounds)
    drafting = [r for r in view.rounds if len(r.nodes) > 1]
    assert stats["drafting_tau"] == pytest.approx(sum(len(r.committed_ids) for r in drafting) / len(drafting))
    auto = SimpleNamespace(predicted_round_cost=3.0, pays_nothing=False,
                           versus=lambda measured, tau=None, retuned=(): f"auto: chain k=4, measured at tau {tau:.2f}")
    html = stats_html(view, None, True, "done", auto=auto)
    assert f"{len(plain)} of {len(view.rounds)}" in html and "under its break-even 3.00" in html
    assert "recent tau fell" in html and "calibration predicted" not in html
    first = stats_html(view, None, True, "done", auto=SimpleNamespace(**{**vars(auto), "pays_nothing": True}))
    assert "the calibration predicted the draft&#x27;s tau under its break-even 3.00" in first
    assert f"{stats['drafting_tau']:.2f}" in html and "tau of drafting rounds" in html
    assert f"measured at tau {stats['drafting_tau']:.2f}" in html  # the auto line compares the drafting rounds' tau
    assert "no draft" in tree_figure(plain[0], lambda ids: "t")["layout"]["title"]["text"]
    assert token_html(view, lambda ids: "t").count("no draft: drafting paused") == len(plain)  # tooltips
