"""The views (`eagle_demo.view`) on hand-made events: token provenance spans, escaping, partial UTF-8, the tree
figure, charts."""

from __future__ import annotations

import html
import json
import re

import pytest

from eagle_demo.decoding.events import DraftNode, Finish, Prefill, Round, RunStart, Step
from eagle_demo.decoding.metrics import RunView
from eagle_demo.view.bench_view import (
    BENCH_COLUMNS,
    MISSES_COLUMNS,
    bench_compare_figure,
    bench_compare_rows,
    bench_figure,
    bench_misses_rows,
    bench_rows,
    bench_sweep_figure,
)
from eagle_demo.view.charts import (
    acceptance_depth_figure,
    accepted_length_figure,
    empty_figure,
    time_split_figure,
    tokens_time_figure,
)
from eagle_demo.view.stats import stats_html, summary
from eagle_demo.view.tokens import group_ids, token_html
from eagle_demo.view.tree_chart import tree_figure

# A byte-level toy vocabulary: ids 30 and 31 are the two bytes of "é"; 32 is a lone invalid byte.
BYTES = {10: b"<", 11: b"&", 12: b"x", 13: b"y", 14: b"z", 15: b"w", 16: b" if", 20: b"\n", 21: b"$", 22: b"{",
         30: b"\xc3", 31: b"\xa9", 32: b"\xff"}


def decode(ids) -> str:
    return b"".join(BYTES[i] for i in ids).decode("utf-8", errors="replace")


def node(token: int, parent: int, depth: int, p: float) -> DraftNode:
    return DraftNode(token_id=token, parent=parent, depth=depth, draft_prob=p, score=p)


# root 0 -> a(1, "&", .6), b(2, "x", .3); a -> c(3, "y", .7), d(4, "z", .2); b -> e(5, "w", .5)
NODES = (node(10, -1, 0, 1.0), node(11, 0, 1, 0.6), node(12, 0, 1, 0.3), node(13, 1, 2, 0.7), node(14, 1, 2, 0.2),
         node(15, 2, 2, 0.5))


def make_round(index=0, path=(1,), committed=(11, 20), bonus=20, elapsed=0.1, total=3, nodes=NODES) -> Round:
    return Round(index=index, nodes=nodes, accepted_path=path, accepted_ids=tuple(nodes[i].token_id for i in path),
                 bonus_id=bonus, committed_ids=committed,
                 target_probs=tuple(0.9 - 0.1 * i for i in range(len(committed))),
                 draft_seconds=0.01, verify_seconds=0.02, host_seconds=0.001, elapsed=elapsed, total_new_tokens=total)


def eagle_events(rounds=None, ids=(10, 11, 20)) -> list:
    rounds = rounds if rounds is not None else [make_round()]
    return [RunStart("eagle", 4, 16, "tree", 0.0, "eagle1", "cpu", "float32"),
            Prefill(token_id=10, seconds=0.05, target_prob=0.8), *rounds,
            Finish(reason="length", token_ids=tuple(ids), new_tokens=len(ids), rounds=len(rounds),
                   prefill_seconds=0.05, decode_seconds=0.1)]


def baseline_events(ids=(10, 11, 20)) -> list:
    steps = [Step(index=i, token_id=t, target_prob=0.9, seconds=0.04, elapsed=0.04 * (i + 1), total_new_tokens=i + 2)
             for i, t in enumerate(ids[1:])]
    return [RunStart("baseline", 4, 16, "", 0.0, "", "cpu", "float32"), Prefill(10, 0.05, 0.8), *steps,
            Finish("length", tuple(ids), len(ids), len(steps), 0.05, 0.04 * len(steps))]


def spans(html_text: str) -> list[tuple[str, str, str]]:
    """(class, title, text) of every token span."""
    found = re.findall(r'<span class="(tok[^"]*)" title="([^"]*)"[^>]*>(.*?)</span>', html_text, flags=re.S)
    return [(c, html.unescape(t), text) for c, t, text in found]


# ---- token spans -----------------------------------------------------------------------------------------

def test_spans_carry_provenance_in_order():
    view = RunView.of(eagle_events())
    got = spans(token_html(view, decode))
    assert [c for c, _, _ in got] == ["tok tok-prefill", "tok tok-accepted d1", "tok tok-rejected",
                                     "tok tok-bonus tok-correction"]
    # prefill "<", accepted "&", the best rejected child of the divergence point ("y", p .7), then the target's "\n"
    assert [t for _, _, t in got] == ["&lt;", "&amp;", "y", "\n"]


def test_tooltips_give_round_depth_and_probabilities():
    titles = [t for _, t, _ in spans(token_html(RunView.of(eagle_events()), decode))]
    assert titles[0].startswith("prefill: target token") and "target p 0.80" in titles[0]
    assert "round 0: accepted draft, depth 1" in titles[1]
    assert "draft p 0.60" in titles[1] and "target p 0.90" in titles[1]
    assert "round 0: rejected draft, depth 2" in titles[2] and "draft p 0.70" in titles[2]
    assert "also rejected here: 'z' (0.20)" in titles[2]  # the other rejected child is named in the tooltip
    assert "round 0: target token (correction)" in titles[3] and "target p 0.80" in titles[3]


def test_html_is_escaped_and_whitespace_kept():
    rnd = make_round(path=(1,), committed=(11, 16))
    out = token_html(RunView.of(eagle_events([rnd], ids=(10, 11, 16))), decode)
    assert "<span class=\"tok tok-prefill\"" in out and "&lt;" in out and "&amp;" in out
    assert ">&lt;<" in out and "><<" not in out
    assert "> if</span>" in out  # the leading space of " if" survives
    assert 'white-space: pre-wrap' in out
    nl = token_html(RunView.of(eagle_events()), decode)
    assert ">\n</span>" in nl


def test_template_characters_are_escaped():
    rnd = make_round(path=(), committed=(21, 22), nodes=NODES[:1])
    out = token_html(RunView.of(eagle_events([rnd], ids=(10, 21, 22))), decode)
    assert "$" not in out and "{" not in out.split(">", 1)[1]
    assert "&#36;" in out and "&#123;" in out


def test_rejected_toggle():
    view = RunView.of(eagle_events())
    assert "tok-rejected" in token_html(view, decode, show_rejected=True)
    assert "tok-rejected" not in token_html(view, decode, show_rejected=False)
    two = spans(token_html(view, decode, max_rejected=2))
    assert [t for c, _, t in two if "rejected" in c] == ["y", "z"]


def test_tail_shows_the_last_tokens_only():
    rounds = [make_round(i, elapsed=0.1 * (i + 1), total=3 + 2 * i) for i in range(5)]
    view = RunView.of(eagle_events(rounds, ids=(10,) + (11, 20) * 5))
    out = token_html(view, decode, tail=3)
    assert "[8 earlier tokens" in out
    assert [t for c, _, t in spans(out) if "rejected" not in c] == ["\n", "&amp;", "\n"]
    assert "earlier tokens" not in token_html(view, decode, tail=50)


def test_full_path_gives_a_bonus_and_no_rejected():
    # accepted a -> c: c is a leaf, so the target's token is a free bonus and nothing was rejected there
    rnd = make_round(path=(1, 3), committed=(11, 13, 20))
    got = spans(token_html(RunView.of(eagle_events([rnd], ids=(10, 11, 13, 20))), decode))
    assert [c for c, _, _ in got] == ["tok tok-prefill", "tok tok-accepted d1", "tok tok-accepted d2", "tok tok-bonus"]
    assert "target token (bonus)" in got[-1][1]


def test_round_cut_by_max_tokens_has_no_target_token():
    rnd = make_round(path=(1, 3), committed=(11,))
    got = spans(token_html(RunView.of(eagle_events([rnd], ids=(10, 11))), decode))
    assert [c for c, _, _ in got] == ["tok tok-prefill", "tok tok-accepted d1"]


def test_depth_class_is_capped():
    chain = [node(10, -1, 0, 1.0)] + [node(12, i, i + 1, 0.9) for i in range(10)]
    rnd = make_round(path=tuple(range(1, 11)), committed=(12,) * 10 + (20,), nodes=tuple(chain))
    classes = [c for c, _, _ in spans(token_html(RunView.of(eagle_events([rnd])), decode))]
    assert classes[1] == "tok tok-accepted d1" and classes[8] == "tok tok-accepted d8" and classes[10].endswith("d8")


# ---- partial UTF-8 ----------------------------------------------------------------------------------------

def test_group_ids_joins_split_characters():
    assert group_ids([12, 30, 31, 12], decode) == [(0, 1, "x"), (1, 3, "é"), (3, 4, "x")]
    assert group_ids([32, 12], decode) == [(0, 1, "\ufffd"), (1, 2, "x")]  # an invalid byte stays alone
    assert group_ids([30], decode) == [(0, 1, "\ufffd")]  # incomplete at the end (still streaming)


def test_split_character_renders_as_one_span():
    nodes = (node(10, -1, 0, 1.0), node(30, 0, 1, 0.8), node(12, 0, 1, 0.1))
    rnd = make_round(path=(1,), committed=(30, 31), nodes=nodes)
    out = token_html(RunView.of(eagle_events([rnd], ids=(10, 30, 31))), decode, show_rejected=False)
    got = spans(out)
    assert [t for _, _, t in got] == ["&lt;", "é"]
    assert "tok-group" in got[1][0] and 'data-tokens="2"' in out
    assert "accepted draft" in got[1][1] and "target token" in got[1][1]  # both members in the tooltip


# ---- run view, stats -------------------------------------------------------------------------------------

def test_run_view_and_summary():
    eagle, base = RunView.of(eagle_events()), RunView.of(baseline_events())
    assert eagle.token_ids == (10, 11, 20) and eagle.curve() == ([0.0, 0.1], [1, 3])
    s = summary(eagle, base, greedy=True, text="abc")
    assert s["identical_to_baseline"] is True and s["tau"] == 2.0 and s["rounds"] == 1
    assert s["speedup"] == pytest.approx((2 / 0.1) / (2 / 0.08))
    assert s["speedup"] == pytest.approx(s["tau"] / s["round_cost"]["steps"])
    assert s["round_cost"]["line"].startswith(f"{s['speedup']:.2f}x = tau 2.00 / round cost")
    json.dumps(s)
    other = RunView.of(baseline_events(ids=(10, 11, 12)))
    assert summary(eagle, other, greedy=True)["identical_to_baseline"] is False
    assert summary(eagle, base, greedy=False)["identical_to_baseline"] is True  # seeded, float32
    half = RunView.of([RunStart("eagle", 4, 16, "tree", 0.7, "eagle1", "cuda", "bfloat16"), *eagle_events()[1:]])
    assert summary(half, base, greedy=False)["identical_to_baseline"] is None  # bf16 draws may flip
    assert summary(half, base, greedy=True)["identical_to_baseline"] is True
    assert summary(eagle, None, greedy=True)["speedup"] is None
    assert summary(eagle, None, greedy=True)["round_cost"] is None


def test_stats_strip():
    eagle, base = RunView.of(eagle_events()), RunView.of(baseline_events())
    done = stats_html(eagle, base, True, "done")
    assert 'data-state="done"' in done and "identical to baseline" in done and ">yes<" in done
    assert "2.00" in done  # tau
    assert "round cost" in done and 'class="stat-why"' in done and "why: " in done
    assert "stat-why" not in stats_html(eagle, None, True, "done")  # no race, nothing to explain
    bad = stats_html(eagle, RunView.of(baseline_events((10, 12, 12))), True, "done")
    assert ">NO<" in bad
    assert "same as seeded baseline" in stats_html(eagle, base, False, "done")
    assert 'data-state="idle"' in stats_html(None, None, True, "idle")


def test_snapshot_is_independent():
    view = RunView.of(eagle_events()[:2])
    snap = view.snapshot()
    view.add(make_round())
    assert len(snap.rounds) == 0 and len(view.rounds) == 1


# ---- figures ---------------------------------------------------------------------------------------------

def trace(fig, name):
    return next(t for t in fig.data if t["name"] == name)


def test_tree_figure_nodes_edges_and_path():
    fig = tree_figure(make_round(), decode)
    fig.to_plotly()  # valid plotly
    assert trace(fig, "root")["customdata"] == [0]
    assert trace(fig, "accepted")["customdata"] == [1]
    assert set(trace(fig, "rejected")["customdata"]) == {2, 3, 4}  # children of a (checked) + sibling b
    assert trace(fig, "unreached")["customdata"] == [5]  # under the rejected b
    assert trace(fig, "target token")["customdata"] == [6]
    path = trace(fig, "accepted path")
    assert path["x"] == [0.0, 1.0, None] and path["line"]["width"] > trace(fig, "edges")["line"]["width"]
    assert len(trace(fig, "edges")["x"]) == 3 * 4  # the four edges off the path
    labels = trace(fig, "accepted")["text"]
    assert labels == ["&amp; 0.60"]
    assert "correction" in trace(fig, "target token")["text"][0]
    assert fig.layout["title"]["text"].startswith("Round 0: 1 accepted of 5 drafted")


def test_tree_positions_follow_depth():
    fig = tree_figure(make_round(), decode)
    xs = {i: x for t in fig.data if t["name"] in ("root", "accepted", "rejected", "unreached")
          for i, x in zip(t["customdata"], t["x"])}
    assert xs == {0: 0.0, 1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0, 5: 2.0}
    assert trace(fig, "target token")["x"] == [2.0]  # one deeper than its parent a


def test_charts_have_points():
    eagle = RunView.of(eagle_events([make_round(0, total=3), make_round(1, path=(1, 3), committed=(11, 13, 20),
                                                                                 elapsed=0.2, total=6)],
                                           ids=(10, 11, 20, 11, 13, 20)))
    base = RunView.of(baseline_events((10, 11, 20, 11, 13, 20)))
    figs = [tokens_time_figure(eagle, base), accepted_length_figure(eagle),
            acceptance_depth_figure(eagle), time_split_figure(eagle)]
    for fig in figs:
        fig.to_plotly()
        json.loads(fig.to_json())
        assert fig.data and all(len(t["x"]) > 0 for t in fig.data)
    time_fig, accepted, depth, split = figs
    assert trace(time_fig, "EAGLE")["y"] == [1, 3, 6] and trace(time_fig, "baseline (plain decoding)")["y"][-1] == 6
    assert trace(accepted, "accepted drafts")["y"] == [1, 2] and trace(accepted, "target token")["y"] == [1, 1]
    assert depth.data[0]["y"] == [1.0, 0.5]  # depth 1: 2/2 rounds; depth 2: 1/2
    assert [t["name"] for t in split.data] == ["draft", "verify", "host"]
    empty = empty_figure("x")
    assert empty.data == [] and empty.to_plotly() is not None


def test_report_markdown():
    from eagle_demo.checkpoints import AdaptationReport

    report = AdaptationReport(
        target="t", draft="d", target_path="/t", draft_path="/d", family="eagle3", source_layout="yuhuili-eagle3",
        target_model_type="llama", target_layers=32, target_hidden=4096, target_vocab=128256, draft_hidden=4096,
        draft_vocab=32000, draft_layers=1, num_heads=32, num_kv_heads=8, head_dim=128, feature_layers=(3, 17, 30),
        feature_convention="hidden_states before layers 2, L/2, L-3", adaptations=("lm_head kept", "d2t read"),
        warnings=("fp16 source",), draft_param_bytes=2_000_000, shared_bytes=1_000_000)
    md = report.to_markdown()
    assert "EAGLE-3 head" in md and "[3, 17, 30]" in md and "- lm_head kept" in md and "fp16 source" in md
    assert "2.00 MB own + 1.00 MB shared" in md


def test_bench_tables_and_charts_are_valid_plotly():
    import plotly.graph_objects as go

    from eagle_demo.bench.run import BenchReport, PromptResult, _summary

    def report(draft: str, family: str, eagle: float) -> BenchReport:
        rows = [PromptResult(id=f"{c}-1", category=c, repeat=0, prompt_tokens=5, new_tokens=10, rounds=4, tau=2.5,
                             eagle_tokens_per_second=eagle, baseline_tokens_per_second=100.0, speedup=eagle / 100,
                             acceptance_by_depth=(0.5,), draft_seconds=0.0, verify_seconds=0.0, host_seconds=0.0,
                             equal_to_baseline=True, round_cost=250 / eagle) for c in ("chat", "code")]
        cats = tuple(_summary(c, [r for r in rows if r.category == c]) for c in ("chat", "code"))
        return BenchReport(machine={}, settings={"draft": draft, "draft_family": family}, results=tuple(rows),
                           categories=cats, overall=_summary("overall", rows))

    one = report("/x/tiny-eagle1", "eagle1", 200.0)
    assert list(bench_rows(one)["category"]) == ["chat", "code", "overall"]
    go.Figure(bench_figure(one))
    both = [one, report("org/EAGLE3-head", "eagle3", 150.0)]
    table = bench_compare_rows(both)
    assert list(table.columns) == ["draft", *BENCH_COLUMNS]
    assert list(table["draft"]) == ["tiny-eagle1"] * 3 + ["EAGLE3-head"] * 3
    fig = go.Figure(bench_compare_figure(both))
    assert [t.name for t in fig.data] == ["tiny-eagle1 (eagle1)", "EAGLE3-head (eagle3)"]
    assert list(fig.data[1].y) == pytest.approx([1.5, 1.5, 1.5])
    hot = BenchReport(machine={}, settings={**one.settings, "temperature": 1.0}, results=one.results,
                      categories=one.categories, overall=one.overall)
    cold = BenchReport(machine={}, settings={**one.settings, "temperature": 0.0}, results=one.results,
                       categories=one.categories, overall=one.overall)
    sweep = go.Figure(bench_sweep_figure([cold, hot]))
    assert list(sweep.data[0].x) == [0.0, 1.0] and sweep.data[1].yaxis == "y2"
    assert list(bench_compare_rows([cold, hot], "temperature")["temperature"]) == ["0"] * 3 + ["1"] * 3
    assert list(bench_misses_rows([cold], "temperature").columns) == ["temperature", *MISSES_COLUMNS]


def test_tree_figure_draws_the_verify_forwards_attention_mask():
    fig = tree_figure(make_round(), decode)
    mask = trace(fig, "attention mask")
    z = mask["z"]  # row = query node, column = key node; 2 = both on the accepted path, 1 = visible, 0 = hidden
    assert [row[0] for row in z] == [2, 2, 1, 1, 1, 1]  # every node sees the root
    assert z[3] == [1, 1, 0, 1, 0, 0]  # a child of a sees the root, a and itself, not its sibling
    assert z[5] == [1, 0, 1, 0, 0, 1]  # the node under b sees the root, b and itself
    assert z[1] == [2, 2, 0, 0, 0, 0]  # the accepted a
    assert all(z[i][i] for i in range(len(z))) and mask["x"] == mask["y"] and mask["x"][1].endswith("+1")
    assert (mask["xaxis"], mask["yaxis"]) == ("x2", "y2")


def test_chart_labels_keep_quotes_and_show_whitespace():
    """plotly's text knows <, > and & as entities but not &quot;: a quote token reads as a quote, in the label, the
    hover and the mask's axis; whitespace tokens read as visible marks in the benchmark's misses table."""
    from eagle_demo.bench.run import BenchReport

    texts = {10: '"', 11: "'", 12: "<b>", 13: "    ", 14: "\n", 15: "w", 20: "\n"}
    fig = tree_figure(make_round(), lambda ids: "".join(texts[i] for i in ids))
    fig.to_plotly()  # valid plotly
    shown = json.dumps(dict(fig), ensure_ascii=False)
    assert "&quot;" not in shown and "&#x27;" not in shown and "&lt;b&gt;" in shown
    assert trace(fig, "accepted")["text"] == ["' 0.60"]
    assert trace(fig, "root")["text"] == ['"']
    report = BenchReport(machine={}, settings={"draft": "/x/tiny-eagle1"}, results=(), categories=(), overall=None,
                         extra={"top_misses": [{"draft": "\n", "target": "    ", "count": 2}]})
    rows = bench_misses_rows([report])
    assert list(rows.iloc[0])[1:] == ["↵", "␣␣␣␣", 2]


def test_a_run_of_one_new_token_shows_no_tau_speed_or_speedup():
    """max new tokens 1: the prefill's token only, no round and no decode step, so nothing to divide by."""
    only = [RunStart("eagle", 4, 1, "tree", 0.0, "eagle1", "cpu", "float32"), Prefill(10, 0.05, 0.8),
            Finish("length", (10,), 1, 0, 0.05, 0.0)]
    base = [RunStart("baseline", 4, 1, "", 0.0, "", "cpu", "float32"), Prefill(10, 0.05, 0.8),
            Finish("length", (10,), 1, 0, 0.05, 0.0)]
    eagle, baseline = RunView.of(only), RunView.of(base)
    s = summary(eagle, baseline, greedy=True)
    assert s["speedup"] is None and s["baseline_tokens_per_second"] is None and s["round_cost"] is None
    assert s["identical_to_baseline"] is True
    strip = stats_html(eagle, baseline, True, "done")
    cells = dict(re.findall(r'stat-label">([^<]*)</span><span class="stat-value">([^<]*)<', strip))
    assert cells["tau"] == cells["EAGLE tok/s"] == cells["baseline tok/s"] == cells["speedup"] == "-"


def test_tree_labels_stay_short_and_a_big_trees_mask_names_nodes_by_index():
    texts = {10: "x", 11: " " * 12, 12: "averyverylongtoken", 13: "y", 14: "z", 15: "w", 20: "\n"}
    fig = tree_figure(make_round(), lambda ids: "".join(texts[i] for i in ids))
    assert trace(fig, "accepted")["text"] == ["␣×12 0.60"]
    assert "averyve… 0.30" in trace(fig, "rejected")["text"]
    assert trace(fig, "attention mask")["y"][2] == "2 averyve… +1"
    from eagle_demo.view.tree_chart import MASK_LABELS

    big = tuple([node(10, -1, 0, 1.0)] + [node(13, i, i + 1, 0.9) for i in range(MASK_LABELS)])
    wide = tree_figure(make_round(nodes=big, path=(1,)), lambda ids: "".join(texts[i] for i in ids))
    assert trace(wide, "attention mask")["y"] == [str(i) for i in range(len(big))]
