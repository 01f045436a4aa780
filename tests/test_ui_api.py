"""The app's named API endpoints through gradio_client against a launched server on localhost.

Uses the shipped tiny pair when assets/tiny-target exists, otherwise a random pair written to a temp
folder (`demo_pair`, also used by test_browser.py): a tiny Llama target with a byte-level BPE tokenizer and
an EAGLE-1 draft in the raw yuhuili layout (config.json + pytorch_model.bin, no input_layernorm) that is
built to agree with the target often, so accepted, rejected and bonus tokens all occur.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import torch

from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET

SUITE = Path(__file__).resolve().parent.parent / "assets" / "prompts" / "suite.jsonl"
CODE_PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'


def shipped_pair() -> tuple[str, str] | None:
    ok = all((Path(p) / "config.json").is_file() for p in (SHIPPED_TARGET, SHIPPED_EAGLE1))
    return (SHIPPED_TARGET, SHIPPED_EAGLE1) if ok else None


def write_random_pair(root: Path, hidden: int = 64) -> tuple[str, str]:
    """A random target whose next token depends mostly on the current one (attention and MLP outputs scaled
    down), and an EAGLE-1 draft whose fc passes the token embedding through: it predicts what the target
    would say after that token, so it is right most of the time and wrong sometimes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from fixtures import tiny_target

    texts = [json.loads(line)["prompt"] for line in SUITE.read_text(encoding="utf-8").splitlines() if line.strip()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts * 3, trainer=trainer)
    vocab = tok.get_vocab_size()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")

    target = tiny_target("llama", layers=2, hidden=hidden, vocab=vocab, eos=0)
    with torch.no_grad():
        for layer in target.model.layers:
            layer.self_attn.o_proj.weight.mul_(0.15)
            layer.mlp.down_proj.weight.mul_(0.15)
        target.lm_head.weight.mul_(8.0)  # peaked distributions, like a trained model
    target.config.max_position_embeddings = 16384  # room for long runs (the browser test stops one)
    target_dir = root / "target"
    target.save_pretrained(target_dir)
    fast.save_pretrained(target_dir)

    torch.manual_seed(5)
    h, inter = hidden, 2 * hidden
    sd = {"fc.weight": 16 * torch.cat([torch.eye(h), torch.zeros(h, h)], 1), "fc.bias": torch.zeros(h),
          "embed_tokens.weight": target.model.embed_tokens.weight.detach().clone()}
    p = "layers.0."
    for name, shape in (("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (h, h)), ("self_attn.v_proj", (h, h)),
                        ("mlp.gate_proj", (inter, h)), ("mlp.up_proj", (inter, h))):
        sd[p + name + ".weight"] = torch.randn(*shape) * 0.1
    sd[p + "self_attn.o_proj.weight"] = torch.zeros(h, h)
    sd[p + "mlp.down_proj.weight"] = torch.zeros(h, inter)
    sd[p + "post_attention_layernorm.weight"] = torch.ones(h)
    draft_dir = root / "draft"
    draft_dir.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": h,
              "intermediate_size": inter, "num_attention_heads": 4, "num_key_value_heads": 4,
              "num_hidden_layers": 1, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "vocab_size": vocab,
              "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": False,
              "torch_dtype": "float32"}
    (draft_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    torch.save(sd, draft_dir / "pytorch_model.bin")
    return str(target_dir), str(draft_dir)


def demo_pair(root: Path) -> tuple[str, str]:
    return shipped_pair() or write_random_pair(root)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(target: str, draft: str):
    """build_app on a free localhost port; returns (demo, url)."""
    from eagle_demo.app import build_app, launch_options

    demo = build_app(target, draft)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_options())
    return demo, f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from gradio_client import Client

    from eagle_demo.app import REGISTRY

    target, draft = demo_pair(tmp_path_factory.mktemp("pair"))
    demo, url = launch(target, draft)
    try:
        yield Client(url, verbose=False), target, draft
    finally:
        demo.close()
        REGISTRY.clear()


def test_endpoints_are_named(app):
    client, _, _ = app
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/load", "/generate"} <= names


def test_load_returns_the_report(app):
    client, target, draft = app
    markdown, report = client.predict(target, draft, "", "auto", "cpu", api_name="/load")
    assert report["family"] == "eagle1" and report["loadable"] and report["device"] == "cpu"
    assert "EAGLE-1/2 head" in markdown and "**Adaptations**" in markdown


def test_generate_greedy_race_is_lossless(app):
    client, _, _ = app
    text, stats = client.predict(CODE_PROMPT, 40, api_name="/generate")
    assert text.strip() and stats["text"] == text
    assert stats["identical_to_baseline"] is True
    assert stats["new_tokens"] == len(stats["token_ids"]) > 1
    assert stats["tau"] >= 1.0 and stats["rounds"] >= 1
    assert stats["tokens_per_second"] > 0 and stats["speedup"] > 0 and stats["baseline_tokens_per_second"] > 0
    assert stats["draft_family"] == "eagle1" and len(stats["acceptance_by_depth"]) >= 1


def test_generate_chain_sampled_without_race(app):
    client, _, _ = app
    text, stats = client.predict("class Stack:", 24, 0.8, 0.9, 20, 7, "chain", 5, 4, 16, 3, False,
                                 api_name="/generate")
    assert stats["tree"] == "chain k=3" and stats["speedup"] is None and stats["identical_to_baseline"] is None
    assert stats["new_tokens"] >= 1


def test_sampled_race_in_float32_equals_the_seeded_baseline(app):
    client, _, _ = app
    text, stats = client.predict(CODE_PROMPT, 40, 0.8, 0.95, 0, 11, "tree", 5, 4, 16, 3, True,
                                 api_name="/generate")
    assert stats["dtype"] == "float32" and stats["identical_to_baseline"] is True and stats["speedup"] > 0


def test_a_repetition_penalty_keeps_the_race_lossless_and_changes_the_text(app):
    client, _, _ = app
    plain, _ = client.predict(CODE_PROMPT, 40, api_name="/generate")
    text, stats = client.predict(CODE_PROMPT, 40, repetition_penalty=1.5, api_name="/generate")
    assert stats["identical_to_baseline"] is True and text != plain
    with pytest.raises(Exception, match="repetition penalty 0.0 is out of range"):
        client.predict(CODE_PROMPT, 16, repetition_penalty=0.0, api_name="/generate")


def test_errors_are_one_line_and_the_app_keeps_serving(app, tmp_path):
    from gradio_client.exceptions import AppError

    client, target, draft = app
    with pytest.raises(AppError, match="the prompt is empty") as empty:
        client.predict("   ", 16, api_name="/generate")
    missing = tmp_path / "no-such-draft"
    with pytest.raises(AppError, match="no-such-draft") as bad_draft:
        client.predict(target, str(missing), "", "auto", "cpu", api_name="/load")
    with pytest.raises(AppError, match="depth"):
        client.predict(CODE_PROMPT, 16, depth=0, api_name="/generate")
    for err in (empty, bad_draft):
        message = str(err.value)
        assert "\n" not in message.strip() and "Traceback" not in message
    # the failed load kept the working pair; generation still works right after the errors
    text, stats = client.predict(CODE_PROMPT, 16, api_name="/generate")
    assert text and stats["identical_to_baseline"] is True
    client.predict(target, "", "", "auto", "cpu", api_name="/load")  # the target alone: nothing to draft with
    with pytest.raises(AppError, match="no draft is loaded; name an EAGLE draft") as no_draft:
        client.predict(CODE_PROMPT, 16, api_name="/generate")
    assert "\n" not in str(no_draft.value).strip()
    client.predict(target, draft, "", "auto", "cpu", api_name="/load")


def test_streaming_endpoint_loads_lazily_and_renders_spans(app):
    from eagle_demo.app import REGISTRY, TREE_MODE

    client, target, draft = app
    REGISTRY.clear()  # the page's Generate loads the pair itself
    job = client.submit(target, draft, "", "auto", "cpu", "", CODE_PROMPT, False, 32, 0.0, 1.0, 0, 0,
                        TREE_MODE, 5, 4, 16, 4, 0.0, 0, True, True, False, 1.0, False, 1, 2, 10, 2, False,
                        api_name="/generate_stream")
    final = job.result(timeout=120)
    tokens_html, stats_html = final[0], final[1]
    assert "earlier tokens" not in tokens_html  # the final view is complete
    assert 'class="tok tok-prefill"' in tokens_html and "tok-bonus" in tokens_html
    assert 'data-state="done"' in stats_html and ">yes<" in stats_html
    assert "EAGLE-1/2 head" in final[10]  # the report of the lazily loaded pair (gr.State outputs are left out)


def test_two_clients_share_the_pair_and_queue(app):
    from gradio_client import Client

    client, _, _ = app
    other = Client(client.src, verbose=False)
    jobs = [c.submit(CODE_PROMPT, 24, api_name="/generate") for c in (client, other)]
    results = [job.result(timeout=120) for job in jobs]
    assert all(stats["identical_to_baseline"] is True for _, stats in results)
    assert results[0][1]["token_ids"] == results[1][1]["token_ids"]


def test_loading_another_pair_frees_the_first(app, tmp_path):
    import gc
    import weakref

    from eagle_demo.app import REGISTRY, make_key

    _, target, draft = app
    first = make_key(target, draft, "", "auto", "cpu")
    model = weakref.ref(REGISTRY.load(first).pair.target)
    with pytest.raises(ValueError):  # a failed load leaves the loaded pair alone
        REGISTRY.load(make_key(target, str(tmp_path / "missing"), "", "auto", "cpu"))
    assert REGISTRY.current() == first
    second = make_key(target, draft, "", "float32", "cpu")  # another key: a separate load
    REGISTRY.load(second)
    gc.collect()
    assert REGISTRY.get(first) is None and REGISTRY.current() == second
    assert model() is None


def test_first_generate_applies_the_chat_default_of_the_pair(app, tmp_path):
    """A Generate that loads a pair itself sets the chat toggle as Load would: on when the tokenizer has a
    chat template, and the prompt then goes through the template."""
    import shutil

    from eagle_demo.app import REGISTRY, TREE_MODE

    client, target, draft = app
    chat_target = tmp_path / "chat-target"
    shutil.copytree(target, chat_target)
    config_path = chat_target / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}# answer:\n"
    config_path.write_text(json.dumps(config))
    REGISTRY.clear()
    final = client.submit(str(chat_target), draft, "", "auto", "cpu", "", "def add(a, b):", False, 8, 0.0, 1.0, 0,
                          0, TREE_MODE, 5, 4, 16, 4, 0.0, 0, False, True, False, 1.0, False, 1, 2, 10, 2,
                          False, api_name="/generate_stream").result(timeout=120)
    assert final[-1]["value"] is True and final[-1]["interactive"] is True  # the chat toggle, now on
    stats = final[9]
    assert stats["prompt_tokens"] > len(REGISTRY.get(REGISTRY.current()).encode("def add(a, b):"))
    REGISTRY.clear()


def test_benchmark_endpoint_returns_table_and_downloads(app):
    from eagle_demo.app import CHAIN_MODE

    client, target, draft = app
    table, _plot, missed, csv_path, json_path = client.predict(
        target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0, 0, "", "", 1.0, 0,
        0, api_name="/benchmark")
    report = json.loads(Path(json_path).read_text(encoding="utf-8"))
    assert report["settings"]["tree"] == "chain k=3" and report["overall"]["all_equal"] is True
    codes = [r for r in report["results"] if r["category"] == "code"]
    assert codes and len(codes) == report["overall"]["runs"]
    assert Path(csv_path).read_text(encoding="utf-8").splitlines()[0].startswith("id,category,")
    rows = table["data"] if isinstance(table, dict) else table
    assert [r[0] for r in rows] == ["code", "overall"]
    top = report["extra"]["top_misses"]
    missed_rows = missed["data"] if isinstance(missed, dict) else missed
    assert len(missed_rows) == min(10, len(top)) and all(r[3] >= 1 for r in missed_rows)


def test_benchmark_compares_drafts_on_the_loaded_target(app):
    from eagle_demo.app import CHAIN_MODE
    from eagle_demo.session import SHIPPED_EAGLE3

    client, target, draft = app
    if target != SHIPPED_TARGET:
        pytest.skip("the second draft is the shipped EAGLE-3 head, made for the shipped target")
    table, plot, _missed, csv_path, json_path = client.predict(
        target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0, 0, SHIPPED_EAGLE3,
        "", 1.0, 0, 0, api_name="/benchmark")
    reports = json.loads(Path(json_path).read_text(encoding="utf-8"))["drafts"]
    assert [r["settings"]["draft_family"] for r in reports] == ["eagle1", "eagle3"]
    assert all(r["overall"]["all_equal"] is True for r in reports)
    rows = table["data"] if isinstance(table, dict) else table
    assert [(r[0], r[1]) for r in rows] == [("tiny-eagle1", "code"), ("tiny-eagle1", "overall"),
                                            ("tiny-eagle3", "code"), ("tiny-eagle3", "overall")]
    assert Path(csv_path).read_text(encoding="utf-8").startswith("draft,id,category,")
    with pytest.raises(Exception) as err:  # a draft made for another target: one line, and the app keeps serving
        client.predict(target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0, 0,
                       "/nonexistent/draft-folder", "", 1.0, 0, 0, api_name="/benchmark")
    assert "\n" not in str(err.value) and "draft" in str(err.value)


def test_benchmark_sweeps_temperatures(app):
    from eagle_demo.app import CHAIN_MODE

    client, target, draft = app
    table, _plot, _missed, _csv, json_path = client.predict(
        target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0, 0, "", "0, 1.0",
        0.95, 0, 5, api_name="/benchmark")
    reports = json.loads(Path(json_path).read_text(encoding="utf-8"))["temperatures"]
    assert [r["settings"]["temperature"] for r in reports] == [0.0, 1.0] and reports[1]["settings"]["top_p"] == 0.95
    assert all(r["overall"]["all_equal"] is True for r in reports)  # float32: greedy, and the seeded baseline
    rows = table["data"] if isinstance(table, dict) else table
    assert [r[0] for r in rows] == ["0", "0", "1", "1"]
    for bad, fragment in (("0, warm", "temperatures must be numbers"), ("20", "out of range")):
        with pytest.raises(Exception) as err:
            client.predict(target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, CHAIN_MODE, 5, 4, 16, 3, 0.0,
                           0, "", bad, 1.0, 0, 0, api_name="/benchmark")
        assert fragment in str(err.value)


def test_queue_polls_calmly():
    """build_app slows Gradio's idle queue polling (each wake takes the GIL from the engine's thread)."""
    from eagle_demo import app as ui

    demo = ui.build_app()
    assert demo._queue.sleep_when_free == ui.QUEUE_POLL_SECONDS
    assert demo._queue.progress_update_sleep_when_free == ui.PROGRESS_POLL_SECONDS


def _generate_stream_fn(target, draft):
    from eagle_demo import app as ui

    return next(f for f in ui.build_app(target, draft).fns.values() if f.api_name == "generate_stream")


def _stream_every_poll(app, monkeypatch, max_new_tokens: int):
    """The Generate event's function and everything it yields for a raced greedy run, with the redraw and
    chart intervals at zero so every poll that finds new events redraws."""
    from eagle_demo import app as ui
    from eagle_demo.app import stream

    _, target, draft = app
    monkeypatch.setattr(stream, "UPDATE_SECONDS", 0.0)
    monkeypatch.setattr(stream, "CHART_SECONDS", 0.0)
    monkeypatch.setattr(stream, "DRAW_SETTLE", 0.0)
    ui.REGISTRY.load(ui.make_key(target, draft, "", "auto", "cpu"))
    fn = _generate_stream_fn(target, draft)
    return fn, list(fn.fn(target, draft, "", "auto", "cpu", "", CODE_PROMPT, False, max_new_tokens, 0.0, 1.0, 0, 0,
                          ui.TREE_MODE, 5, 4, 16, 4, 0.0, 0, True, True, True))


def test_streaming_redraws_send_values_not_skips(app, monkeypatch):
    """Every streamed redraw but the last sends a value for each visible output, repeating it when it did not
    change (Gradio's stream diff then sends nothing); a gr.skip() there would make Gradio rebuild that
    component on the server at every redraw. Only gr.State outputs and the round slider (whose value would
    fire its change event) are skipped."""
    fn, yields = _stream_every_poll(app, monkeypatch, 96)
    streamed = yields[:-1]
    assert len(streamed) >= 2, "the run was too short to stream"
    for out in streamed:
        assert len(out) == len(fn.outputs)
        for block, value in zip(fn.outputs, out):
            skipped = isinstance(value, dict) and value.get("__type__") == "update"
            assert not skipped or block.stateful or block.elem_id == "round-slider", block
    assert 'data-state="done"' in yields[-1][1]


def test_streamed_charts_redraw_in_rotation(app, monkeypatch):
    """After the first streamed redraw (which replaces all four charts), each redraw rebuilds exactly one chart,
    in the order CHART_TURNS gives (the race every other turn); the others are sent as the same figure. When
    EAGLE ends, one redraw draws its final state whole before the baseline starts; while the baseline runs, only
    the race chart changes."""
    from eagle_demo import app as ui

    _, yields = _stream_every_poll(app, monkeypatch, 160)
    streamed = yields[:-1]
    figures = [out[2:6] for out in streamed]
    racing = ['data-state="baseline"' in out[1] for out in streamed]
    whole = [i for i in range(1, len(figures)) if all(figures[i][j] is not figures[i - 1][j] for j in range(4))]
    assert len(whole) == 1 and racing[whole[0] + 1] and not racing[whole[0]], "EAGLE's end: one whole redraw"
    assert whole[0] >= 4, "the run was too short to stream"
    for turn, (before, after) in enumerate(zip(figures[:whole[0]], figures[1:whole[0]])):
        changed = [i for i in range(4) if after[i] is not before[i]]
        assert changed == [ui.CHART_TURNS[turn % len(ui.CHART_TURNS)]], (turn, changed)
    for before, after in zip(figures[whole[0]:], figures[whole[0] + 1:]):  # the baseline: the race chart only
        assert [i for i in range(4) if after[i] is not before[i]] == [0]


def test_the_page_explains_a_round_and_defines_every_number():
    from eagle_demo.app import definitions_markdown as _definitions_markdown
    from eagle_demo.decoding.metrics import DEFINITIONS

    md = _definitions_markdown()
    assert all(f"**{name}**" in md for name in DEFINITIONS)
    assert [md.index(f"**{step}.**") for step in ("Draft", "Verify", "Accept", "Bonus", "Commit")] == \
        sorted(md.index(f"**{step}.**") for step in ("Draft", "Verify", "Accept", "Bonus", "Commit"))


def test_a_run_past_the_drafts_context_carries_a_note(app, tmp_path):
    from gradio_client import Client

    from eagle_demo.app import REGISTRY, make_key
    from layouts import eagle1_weights, llama_config, write_raw_eagle1, write_target

    client, target, draft = app
    short = Client(client.src, verbose=False)  # its own session: the pair it loads is its own
    tgt = write_target(tmp_path / "target", layers=2, tokenizer=96)  # 512 positions
    drf = write_raw_eagle1(tmp_path / "draft", eagle1_weights(), llama_config(max_position_embeddings=128))
    try:
        short.predict(str(tgt), str(drf), "", "auto", "cpu", api_name="/load")
        _, stats = short.predict("t5 " * 100, 40, api_name="/generate")
        assert len(stats["notes"]) == 1 and "past the 128 positions" in stats["notes"][0]
        _, stats = short.predict("t5 t6", 8, api_name="/generate")
        assert stats["notes"] == []
    finally:
        REGISTRY.load(make_key(target, draft, "", "auto", "cpu"))  # the module's pair again, for later tests


def test_a_cancelled_stream_frees_the_engine_for_the_next_request(app):
    """A streamed /generate_stream job cancelled mid-run ends its engine run; /generate then runs in normal time."""
    import time

    from eagle_demo.app import TREE_MODE
    from eagle_demo.app.pages import RUNS as _RUNS

    client, target, draft = app
    client.predict(target, draft, "", "auto", "cpu", api_name="/load")  # the module pair: an earlier test left another
    start = time.monotonic()
    reference = client.predict(CODE_PROMPT, 24, api_name="/generate")
    normal = time.monotonic() - start
    job = client.submit(target, draft, "", "auto", "cpu", "", CODE_PROMPT, False, 1800, 0.0, 1.0, 0, 0,
                        TREE_MODE, 5, 4, 16, 4, 0.0, 0, True, True, True, 1.0, False, 1, 2, 10, 2, False,
                        api_name="/generate_stream")
    deadline = time.monotonic() + 60
    while not job.outputs() and time.monotonic() < deadline:  # mid-run: the first redraw has streamed
        time.sleep(0.05)
    running = [r for r in _RUNS if not r.done.is_set()]
    assert running, "the streamed run never started or already ended"
    job.cancel()
    assert running[-1].done.wait(30), "the cancelled run kept the engine"
    assert running[-1].state == "stopped"
    start = time.monotonic()
    text, stats = client.predict(CODE_PROMPT, 24, api_name="/generate")
    assert time.monotonic() - start < max(10.0, 5 * normal)
    assert stats["identical_to_baseline"] is True and stats["token_ids"] == reference[1]["token_ids"]


def test_a_stop_served_before_its_generates_note_still_ends_that_generate():
    """The page sends a Generate's note and a Stop as two unqueued requests, which the server may serve in
    either order (tests/test_browser.py's two-tab test once waited 120 s for a Stop served first): the
    Stop carries the page's Generate click count, so it ends the click it followed and no later one."""
    from eagle_demo.app.pages import PAGES
    from eagle_demo.app.stream import note_generate, stop_ui

    class Page:
        session_hash = "stop-order-test"

    page = Page()
    stop_ui(1, page)  # the Stop of click 1 served before click 1's note
    note_generate(1, page)
    assert PAGES.of(page.session_hash).stopped_before_start()
    note_generate(2, page)  # the page's next Generate is not ended by that old Stop
    assert not PAGES.of(page.session_hash).stopped_before_start()
    note_generate(3, page)  # the usual order
    stop_ui(3, page)
    assert PAGES.of(page.session_hash).stopped_before_start()
    stop_ui(0, page)  # a client that does not count its clicks: nothing recorded, nothing ended
    note_generate(0, page)
    assert not PAGES.of(page.session_hash).stopped_before_start()


def test_a_watched_runs_baseline_starts_after_the_page_drew_eagles_end(app, monkeypatch):
    """The page's race is fair: no heavy redraw runs beside the baseline. The worker holds the baseline until
    the Generate event has drawn EAGLE's final state whole and given the page DRAW_SETTLE to render it."""
    import time

    from eagle_demo import app as ui
    from eagle_demo.app import state, stream

    _, target, draft = app
    monkeypatch.setattr(stream, "UPDATE_SECONDS", 0.0)
    monkeypatch.setattr(stream, "CHART_SECONDS", 0.0)
    monkeypatch.setattr(stream, "DRAW_SETTLE", 0.3)
    starts = []
    real_add = state.LiveRun.add

    def add(self, phase, event):
        if phase == "baseline" and not starts:
            starts.append(time.monotonic())
        real_add(self, phase, event)

    monkeypatch.setattr(state.LiveRun, "add", add)
    ui.REGISTRY.load(ui.make_key(target, draft, "", "auto", "cpu"))
    fn = _generate_stream_fn(target, draft)
    seen, last = [], None  # (time, a whole redraw, racing the baseline) of each yield
    for out in fn.fn(target, draft, "", "auto", "cpu", "", CODE_PROMPT, False, 64, 0.0, 1.0, 0, 0, ui.TREE_MODE, 5, 4,
                     16, 4, 0.0, 0, True, True, True):
        whole = last is None or all(out[j] is not last[j] for j in range(2, 6))
        seen.append((time.monotonic(), whole, 'data-state="baseline"' in out[1]))
        last = out
    assert 'data-state="done"' in last[1] and starts
    first_racing = next(i for i, (_, _, racing) in enumerate(seen) if racing)
    eagle_end = max(t for t, whole, _ in seen[:first_racing] if whole)  # EAGLE's final state, drawn whole
    assert starts[0] >= eagle_end + 0.3  # the baseline began after the page had it and time to draw it


def test_benchmark_with_the_auto_preset_runs_each_drafts_own_automatic_tree(app):
    """The Playground's "auto" (the panel's static default before a calibration, as a fresh page sends it) runs
    the pair's automatic tree with its gate, and each compared draft its own."""
    from eagle_demo.app.forms import tree_values
    from eagle_demo.session import SHIPPED_EAGLE3

    client, target, draft = app
    if target != SHIPPED_TARGET:
        pytest.skip("the second draft is the shipped EAGLE-3 head, made for the shipped target")
    _, _, _, _, json_path = client.predict(
        target, draft, "", "auto", "cpu", "", ["code"], 1, 16, False, *tree_values("cpu"), SHIPPED_EAGLE3, "", 1.0, 0,
        0, api_name="/benchmark")
    reports = json.loads(Path(json_path).read_text(encoding="utf-8"))["drafts"]
    autos = [r["extra"]["auto"] for r in reports]
    assert [a["tree"] for a in autos] == [r["settings"]["tree"] for r in reports]
    assert all(r["settings"]["pause_below"] == round(a["predicted_round_cost"], 3) for r, a in zip(reports, autos))
    assert "first" not in reports[1]["settings"]["tree"] and all(r["overall"]["all_equal"] for r in reports)


def test_each_failed_generate_redraws_the_strip_and_a_missing_template_runs_plain_text(app):
    """Two failures in a row each send a new "failed" strip with the message (the page shows "starting..." on
    the click, so an unchanged strip would stay there). The chat box ticked for a pair without a template (a page
    opened before the pair was loaded) runs the prompt as plain text, says so and unticks the box."""
    from eagle_demo import app as ui

    _, target, draft = app
    fn = _generate_stream_fn(target, draft)
    strips = []
    for _ in range(2):
        outs = fn.fn(target, "/no/such/draft", "", "auto", "cpu", "", CODE_PROMPT, False, 8, 0.0, 1.0, 0, 0,
                     ui.TREE_MODE, 5, 4, 16, 4, 0.0, 0, False, True, False)
        with pytest.raises(Exception, match="no/such/draft"):
            for out in outs:
                strips.append(out[1])
    assert len(strips) == 2 and strips[0] != strips[1]
    assert all('data-state="failed"' in s and "no/such/draft" in s for s in strips)
    ui.REGISTRY.load(ui.make_key(target, draft, "", "auto", "cpu"))
    session = ui.REGISTRY.get(ui.make_key(target, draft, "", "auto", "cpu"))
    if session.has_chat_template:
        pytest.skip("this pair has a chat template")
    outs = list(fn.fn(target, draft, "", "auto", "cpu", "", CODE_PROMPT, True, 8, 0.0, 1.0, 0, 0, ui.TREE_MODE, 5, 4,
                      16, 4, 0.0, 0, False, True, False))
    assert "no chat template: the prompt ran as plain text" in outs[-1][1]
    assert outs[0][-1] == {"__type__": "update", "value": False, "interactive": False}
