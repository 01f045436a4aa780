"""The Playground tab: the model panel, the prompt and draft settings, the token view, the live charts and the
draft tree; Load and the presets; the wiring of Generate and Stop (their functions are in `stream`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import gradio as gr

from ..common.config import TREE_PRESETS, default_preset
from ..decoding.metrics import DEFINITIONS, RunView
from ..view.charts import empty_figure
from ..view.stats import stats_html
from ..view.tokens import token_html
from .autotune import AUTO, IDLE_LINE
from .conversation import CHAT_EXAMPLES, NO_CONVERSATION
from .forms import CHAIN_MODE, TREE_MODE, tree_values
from .ngram_settings import NgramInputs, build_ngram_settings
from .page_limits import SLIDER_MAX
from .page_scripts import FOLLOW_OUTPUT_JS
from .presets import CUSTOM, PRESETS
from .registry import REGISTRY, local_or_repo
from .state import suite_prompts
from .stream import GenerateOutputs
from .zerogpu import offered

__all__ = ["Playground", "build_playground", "default_pair", "offered_presets", "PRESETS", "CUSTOM",
           "definitions_markdown"]



def offered_presets() -> dict[str, tuple[str, str]]:
    """The preset box's pairs: PRESETS, or on a ZeroGPU Space the pairs it serves (`zerogpu.offered`)."""
    listed = None if REGISTRY.served is None else [*REGISTRY.served, *REGISTRY.missing]  # Load says why one is missing
    return offered(PRESETS, listed, lambda t, d: (local_or_repo(t), local_or_repo(d)))
DTYPES = ["auto", "float32", "bfloat16", "float16"]
DEVICES = ["auto", "cpu", "cuda"]
NUMBERS_NOTE = """
- Every time is measured in this process, on this device, with a device sync around each phase; the baseline
  is plain decoding of the same target through the same logits pipeline, run right after EAGLE.
- Greedy EAGLE is lossless: the token ids equal the baseline's ("identical to baseline"). In bfloat16/float16
  the two computations can round differently at near-ties and drift apart; float32 does not.
- Sampling (temperature > 0) keeps the target's distribution exactly. Both engines draw the random number of
  each output position from the seed, so the same seed gives the same text; the page checks it ("same as
  seeded baseline") in float32. In bfloat16/float16 a draw near a boundary of the cumulative probabilities can
  flip, so there it is not checked; the distribution is the target's either way.
- On a CPU with a tiny model, per-call overhead dominates; speedups on a GPU with a 7-8B target differ.
"""


HOW_A_ROUND_WORKS = """
**How one round works** (and where the page shows it)

1. **Draft.** The EAGLE head reads the target's features at the last committed position (EAGLE-3 fuses three of
   the target's layers) together with the token that followed, and proposes next tokens. EAGLE-2 grows a tree:
   each step expands the `top-k` most probable nodes (`depth` steps), then keeps the `total tokens - 1` nodes with
   the highest path probability. A chain is the tree with top-k 1.
2. **Verify.** The target runs once over the whole tree. Each drafted token sees the prompt, its ancestors and
   itself, nothing else (the mask beside the draft tree), at position prompt + depth, so every path is checked
   in that one forward.
3. **Accept.** From the root down, the target's own choice at a node (its argmax, or its sample when sampling)
   is looked for among the node's children; a match is accepted (green tokens, darker = deeper) and the walk
   goes on from it.
4. **Bonus.** Where the walk stops, the target's own choice there is committed as well (amber): a correction
   when drafts were rejected (struck-through red), a free extra token when the whole path was accepted.
5. **Commit.** Accepted tokens and the bonus join the output; the target's KV cache keeps the accepted path and
   drops the rest; the draft reads the new features. tau counts the tokens a round commits.

Every committed token is the target's own choice at its position, which is why greedy output equals plain
decoding token for token and sampled output keeps the target's distribution.
"""

LEGEND = ('<div class="eagle-legend"><span class="legend-item"><span class="legend-swatch d1"></span>'
          '<span class="legend-swatch d2"></span><span class="legend-swatch d4"></span>'
          '<span class="legend-swatch d6"></span><span class="legend-swatch d8"></span> accepted draft token '
          '(darker = deeper in the tree)</span><span class="legend-item"><span class="legend-swatch target">'
          '</span> the target\'s own token (bonus or correction; also the first token after the prompt)</span>'
          '<span class="legend-item"><span class="legend-swatch rejected">x</span> rejected draft token</span>'
          '<span class="legend-item">hover a token for its round, depth and probabilities</span></div>')


def definitions_markdown() -> str:
    rows = "\n".join(f"- **{name}**: {text}" for name, text in DEFINITIONS.items())
    return f"{HOW_A_ROUND_WORKS}\n**What the numbers mean**\n\n{rows}\n{NUMBERS_NOTE}"


@dataclasses.dataclass
class Playground:
    """The tab's components; `out` holds the Generate event's outputs (a `GenerateOutputs` of components)."""

    preset: Any
    target: Any
    draft: Any
    revision: Any
    draft_revision: Any
    dtype: Any
    device: Any
    load_btn: Any
    probe_btn: Any
    probe_box: Any
    probe_loaded: Any  # gr.State: the key a Probe click loaded (None when the pair was loaded already)
    prompt: Any
    race: Any
    race_ngram: Any
    ngram: NgramInputs  # the n-gram draft's settings (`ngram_settings`)
    show_rejected: Any
    ignore_eos: Any
    max_new: Any
    generate_btn: Any
    stop_btn: Any
    conversation: Any  # the page's chat so far (`conversation.conversation_line`)
    new_conversation: Any
    clicks: Any  # hidden: the count of this page's Generate clicks, set by the page's own JavaScript
    tree_preset: Any
    auto_line: Any
    mode: Any
    depth: Any
    draft_top_k: Any
    total_tokens: Any
    chain_k: Any
    chain_stop: Any
    hot_vocab: Any
    temperature: Any
    top_p: Any
    top_k: Any
    seed: Any
    repetition: Any
    out: GenerateOutputs

    @property
    def panel(self) -> list:
        """The model panel, in `forms.PairForm`'s order."""
        return [self.target, self.draft, self.revision, self.dtype, self.device, self.draft_revision]

    @property
    def tree_inputs(self) -> list:
        """The draft settings, in `forms._Tree`'s order."""
        return [self.mode, self.depth, self.draft_top_k, self.total_tokens, self.chain_k, self.chain_stop,
                self.hot_vocab]

    def generate_inputs(self) -> list:
        """`GenerateForm`'s fields, in order."""
        return [*self.panel, self.prompt, self.out.chat, self.max_new, self.temperature, self.top_p, self.top_k,
                self.seed, *self.tree_inputs, self.race, self.show_rejected, self.ignore_eos, self.repetition,
                self.race_ngram, *self.ngram]


def default_pair(target: str | None, draft: str | None) -> tuple[str, str | None, str]:
    """(target, draft, preset name) the page starts with: a preset's own spelling when the pair is a preset."""
    if target is None:
        target, draft = next(iter(PRESETS.values()))
    same = (local_or_repo(target), local_or_repo(draft))
    name = next((name for name, (t, d) in PRESETS.items() if (local_or_repo(t), local_or_repo(d)) == same), CUSTOM)
    if name != CUSTOM:  # show a preset's own spelling (assets/tiny-target, not an absolute path)
        target, draft = PRESETS[name]
    return target, draft, name


def build_playground(default_target: str | None, default_draft: str | None, device_type: str) -> Playground:
    """The tab's layout (inside a gr.Blocks). Loads no model."""
    target, draft, preset = default_pair(default_target, default_draft)
    parts: dict[str, Any] = {"pair_state": gr.State(None), "result_state": gr.State(None),
                             "probe_loaded": gr.State(None)}
    with gr.Tab("Playground", id="playground"):
        parts.update(_model_panel(target, draft, preset))
        with gr.Row():
            with gr.Column(scale=3):
                parts.update(_prompt_column())
            with gr.Column(scale=2):
                parts.update(_settings_column(default_preset(device_type)))
        parts.update(_run_views())
    out = GenerateOutputs(**{name: parts.pop(name) for name in GenerateOutputs._fields})
    return Playground(**parts, out=out)


def _model_panel(default_target: str, default_draft: str | None, default_name: str) -> dict[str, Any]:
    """The model panel. "probe after load" starts off here, which is also `/load`'s default for `probe` (the API
    takes its defaults from the components' initial values); `probe_by_default` turns it on in GPU pages."""
    with gr.Accordion("Model", open=True, elem_id="model-panel"):
        with gr.Row():
            preset = gr.Dropdown([*offered_presets(), CUSTOM], value=default_name, label="preset", scale=2)
            target = gr.Textbox(default_target, label="target (repo id or folder)", scale=3, elem_id="target-box")
            draft = gr.Textbox(default_draft or "", label="EAGLE draft (repo id or folder)", scale=3,
                               elem_id="draft-box")
        with gr.Row():
            revision = gr.Textbox("", label="target revision", placeholder="main", scale=1)
            draft_revision = gr.Textbox("", label="draft revision", placeholder="main", scale=1)
            dtype = gr.Dropdown(DTYPES, value="auto", label="dtype", scale=1)
            device = gr.Dropdown(DEVICES, value="auto", label="device", scale=1)
            load_btn = gr.Button("Load", variant="secondary", scale=1, elem_id="load-btn")
            probe_btn = gr.Button("Probe", variant="secondary", scale=1, elem_id="probe-btn")
            probe_box = gr.Checkbox(False, label="probe after load", scale=1, elem_id="probe-box",
                                    info="measure tau with the draft's declared conventions and the alternatives "
                                         "its checkpoint leaves open (3 prompts x 32 tokens each); keep the best")
        report_md = gr.Markdown("No pair loaded yet: it loads on **Load** or on the first **Generate**.",
                                elem_id="report")
        with gr.Accordion("Adaptation report (JSON)", open=False):
            report_json = gr.JSON(label="report")
    return dict(preset=preset, target=target, draft=draft, revision=revision, draft_revision=draft_revision,
                dtype=dtype, device=device, load_btn=load_btn, probe_btn=probe_btn, probe_box=probe_box,
                report_md=report_md, report_json=report_json)


def _prompt_column() -> dict[str, Any]:
    code_prompts, _ = suite_prompts()
    prompt = gr.Textbox(label="prompt", lines=5, elem_id="prompt-box", value=CHAT_EXAMPLES[0])
    gr.Examples([[p] for p in CHAT_EXAMPLES], inputs=[prompt], label="chat prompts (the default SmolLM2 pair)")
    if code_prompts:
        gr.Examples([[p] for p in code_prompts], inputs=[prompt], label="code prompts (the tiny pair)")
    with gr.Row(elem_id="run-options"):  # wraps two a line on a phone (style.css)
        race = gr.Checkbox(True, label="race the baseline", elem_id="race-box")
        race_ngram = gr.Checkbox(False, label="race the n-gram draft too", elem_id="race-ngram-box",
                                 info="prompt lookup: no head, lossless (its settings below)")
        show_rejected = gr.Checkbox(True, label="show rejected drafts", elem_id="rejected-box")
        chat = gr.Checkbox(False, label="chat template", elem_id="chat-box")
        ignore_eos = gr.Checkbox(False, label="ignore EOS", elem_id="ignore-eos-box")
    ngram = build_ngram_settings()
    max_new = gr.Slider(1, SLIDER_MAX, value=128, step=1, label="max new tokens", elem_id="max-new")
    with gr.Row():
        generate_btn = gr.Button("Generate", variant="primary", elem_id="generate-btn")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-btn")
    with gr.Row(equal_height=True):
        conversation = gr.Markdown(NO_CONVERSATION, elem_id="conversation")
        new_conversation = gr.Button("New conversation", size="sm", scale=0, elem_id="new-conversation-btn")
    clicks = gr.Number(0, visible=False, elem_id="generate-clicks")  # carries the page's click count (stream.py)
    return dict(clicks=clicks, prompt=prompt, race=race, race_ngram=race_ngram, ngram=ngram, chat=chat,
                show_rejected=show_rejected, ignore_eos=ignore_eos, max_new=max_new, generate_btn=generate_btn,
                stop_btn=stop_btn, conversation=conversation, new_conversation=new_conversation)


def _settings_column(tree_default: str) -> dict[str, Any]:
    mode0, depth0, topk0, total0, chain0, stop0, hot0 = tree_values(tree_default)
    with gr.Accordion("Draft", open=True):
        # "auto" from the start: a Generate without Load loads the pair and runs its auto choice (`page_tree`);
        # until then the panel shows the device's static default, as after Load while the calibration runs
        tree_preset = gr.Dropdown([AUTO, *TREE_PRESETS], value=AUTO, label="tree preset",
                                  elem_id="tree-preset")
        auto_md = gr.Markdown(IDLE_LINE, elem_id="auto-tree")
        mode = gr.Radio([TREE_MODE, CHAIN_MODE], value=mode0, label="draft mode")
        with gr.Row():
            depth = gr.Slider(1, 16, value=depth0, step=1, label="depth")
            draft_top_k = gr.Slider(1, 16, value=topk0, step=1, label="draft top-k")
        with gr.Row():
            total_tokens = gr.Slider(2, 128, value=total0, step=1, label="total tokens")
            chain_k = gr.Slider(1, 16, value=chain0, step=1, label="chain k", elem_id="chain-k")
        chain_stop = gr.Slider(0.0, 0.2, value=stop0, step=0.001, label="chain stop",
                               info="chain mode: a round's chain stops after the first draft token whose path "
                                    "probability is under this (0 = always chain k tokens)")
        hot_vocab = gr.Number(hot0, precision=0, minimum=0, label="hot vocabulary", elem_id="hot-vocab",
                              info="chain mode, EAGLE-1/2 heads: the draft proposes only among the first N token "
                                   "ids and the run's own context ids (0 = all ids)")
    with gr.Accordion("Sampling", open=False):
        temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="temperature (0 = greedy)")
        top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p")
        with gr.Row():
            top_k = gr.Number(0, precision=0, minimum=0, label="top-k (0 = off)")
            seed = gr.Number(0, precision=0, minimum=0, label="seed")
        repetition = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="repetition penalty (1 = off)",
                               elem_id="repetition-penalty",
                               info="transformers' rule over the prompt and the text so far, greedy runs too; each "
                                    "draft node is penalized over its own path, so the output stays lossless")
    return dict(tree_preset=tree_preset, auto_line=auto_md, mode=mode, depth=depth, draft_top_k=draft_top_k,
                total_tokens=total_tokens, chain_k=chain_k, chain_stop=chain_stop, hot_vocab=hot_vocab,
                temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, repetition=repetition)


def _run_views() -> dict[str, Any]:
    empty_tokens = token_html(RunView(), lambda ids: "", placeholder="The output appears here, one colored span "
                              "per token.")
    stats = gr.HTML(stats_html(None, None, True, "idle"), elem_id="eagle-stats", js_on_load=None)
    gr.HTML(LEGEND, js_on_load=None)
    tokens = gr.HTML(empty_tokens, elem_id="eagle-output", js_on_load=FOLLOW_OUTPUT_JS, padding=True)
    with gr.Row():
        fig_time = gr.Plot(empty_figure("Tokens vs decode time"), label="tokens vs time", elem_id="plot-time")
        fig_accept = gr.Plot(empty_figure("Accepted length per round"), label="accepted length", elem_id="plot-accept")
    with gr.Row():
        fig_depth = gr.Plot(empty_figure("Acceptance rate by depth"), label="acceptance by depth", elem_id="plot-depth")
        fig_split = gr.Plot(empty_figure("Time per round"), label="time split", elem_id="plot-split")
    with gr.Row():
        with gr.Column(scale=1, min_width=200):
            round_slider = gr.Slider(0, 1, value=0, step=1, label="round to inspect", elem_id="round-slider")
            gr.Markdown("Green: the accepted path. Amber star: the target's own token. Red x: drafts the target "
                        "checked and rejected. Grey: drafts under a rejected node (never reached). Labels: token and "
                        "draft probability.\n\nRight: the attention mask of the round's single target forward. Each "
                        "drafted token (row) sees the prompt, itself and its ancestors (columns), so every path of the "
                        "tree is checked at once; +d is its position after the prefix.")
        with gr.Column(scale=4):
            fig_tree = gr.Plot(empty_figure("Draft tree", "run a generation, then pick a round"), label="draft tree",
                               elem_id="plot-tree")
    with gr.Accordion("Plain text and raw stats", open=False):
        text_out = gr.Textbox(label="text", lines=6, buttons=["copy"], elem_id="text-out")
        stats_json = gr.JSON(label="stats")
    with gr.Accordion("How a round works, and what the numbers mean", open=False, elem_id="about-numbers"):
        gr.Markdown(definitions_markdown())
    return dict(stats=stats, tokens=tokens, fig_time=fig_time, fig_accept=fig_accept, fig_depth=fig_depth,
                fig_split=fig_split, round_slider=round_slider, fig_tree=fig_tree, text_out=text_out,
                stats_json=stats_json)
