"""The Diagnose tab: where acceptance fell in the last Generate (by position, by kind of text) and the shape
explorer (every candidate shape replayed on that run's text, `autotree.explore`), with "use this shape", which
sets the Playground's draft settings and the Deploy tab's commands."""

from __future__ import annotations

import dataclasses
from typing import Any

import gradio as gr

from ..autotree.explore import Exploration, explore
from ..autotree.retune import rank_model
from ..common.config import TreeConfig
from ..common.errors import one_line
from ..diagnose.run import RunDiagnosis, diagnose_run
from ..serving.flags import shape_flags
from ..view.charts import empty_figure
from ..view.diagnose import kinds_html, position_figure, shape_choices, shapes_figure
from .autotune import tuning
from .forms import tree_settings
from .gpu_tasks import ExploreTask, run_to_end
from .playground import Playground
from .registry import REGISTRY, PairKey
from .state import MODEL_GATE

__all__ = ["DiagnoseTab", "build_diagnose_tab", "wire_diagnose_tab", "analyse", "diagnose", "use_shape", "pair_rank"]

START = "Run a generation in the Playground tab, then analyse it here."


@dataclasses.dataclass
class DiagnoseTab:
    button: Any
    message: Any
    position: Any
    kinds: Any
    shapes: Any
    pick: Any
    use: Any
    flags: Any

    @property
    def outputs(self) -> list:
        return [self.message, self.position, self.kinds, self.shapes, self.pick, self.flags]


def build_diagnose_tab() -> DiagnoseTab:
    with gr.Tab("Diagnose", id="diagnose"):
        gr.Markdown("Where acceptance fell in the last Generate, and which draft shape would have paid on its text.")
        button = gr.Button("Analyse the last run", elem_id="diagnose-btn", variant="primary")
        message = gr.Markdown(START, elem_id="diagnose-msg")
        position = gr.Plot(empty_figure("Acceptance by position"), elem_id="plot-position", show_label=False)
        kinds = gr.HTML(elem_id="kind-table")
        shapes = gr.Plot(empty_figure("Every shape replayed on this run's text"), elem_id="plot-shapes",
                         show_label=False)
        with gr.Row():
            pick = gr.Dropdown(choices=[], label="shape", elem_id="shape-pick", interactive=True, scale=4)
            use = gr.Button("Use this shape", elem_id="use-shape-btn", scale=1)
        flags = gr.Markdown(elem_id="shape-flags")
    return DiagnoseTab(button, message, position, kinds, shapes, pick, use, flags)


def analyse(result) -> tuple:
    """The tab's outputs for the last run (`stream` keeps its events, prompt ids and tree in result_state)."""
    skip = (gr.skip(),) * 5
    if not result or not result.get("prompt_ids") or result.get("tree") is None:
        return (START, *skip)
    session = REGISTRY.get(result["key"])
    if session is None or session.eagle is None:
        return ("The last run's pair is no longer loaded (or has no draft); Generate again.", *skip)
    try:
        return _analyse(result, session)
    except Exception as exc:
        return (f"Cannot analyse this run: {one_line(exc)}", *skip)


def _analyse(result: dict, session) -> tuple:
    d = diagnose(result["key"], session, result["eagle"], result["prompt_ids"], result["tree"], result.get("greedy"))
    notes, t = d.notes(), tuning(result["key"])
    if t is None or t.choice is None:
        notes.insert(1, "predicted speedups appear once the automatic tree has calibrated this pair (Load does it)")
    choices = shape_choices(d.exploration)
    best = next((v for label, v in choices if "(best)" in label), choices[0][1] if choices else None)
    message = f"**{d.exploration.tokens} tokens, {len(d.rounds)} rounds.** " + "; ".join(notes) + "."
    return (message, position_figure(list(d.rounds), d.smoothed()), kinds_html(d.kinds), shapes_figure(d.exploration),
            gr.update(choices=choices, value=best), _flags(_decode(best) if best else None, result["key"]))


def diagnose(key: PairKey, session, events, prompt_ids, tree: TreeConfig | None, greedy) -> RunDiagnosis:
    """`diagnosis.diagnose_run` of a finished EAGLE run of the pair `key` (the tab, `/generate` with explore),
    priced by the pair's automatic-tree calibration when there is one. The replay runs the target and the draft:
    never beside a run or a calibration (MODEL_GATE), and on a ZeroGPU Space in a GPU call (`ExploreTask`)."""
    t = tuning(key)
    table = t.choice.table if t is not None and t.choice is not None else None

    def explorer(session, prompt_ids: list[int], output_ids: list[int], **options) -> Exploration:
        with MODEL_GATE:
            if REGISTRY.served is not None:  # ZeroGPU: this process holds placeholders, the worker the weights
                return run_to_end(key, session, ExploreTask(tuple(prompt_ids), tuple(output_ids), **options))
            return explore(session, prompt_ids, output_ids, **options)
    return diagnose_run(session, list(prompt_ids), events, tree, table, bool(greedy), explorer)


def _decode(value: str) -> TreeConfig:
    depth, top_k, total, stop, hot = value.split(",")
    return TreeConfig(int(depth), int(top_k), int(total), float(stop), int(hot))


def pair_rank(key) -> tuple | None:
    """The pair's acceptance by depth and sibling rank, from its automatic tree's calibration (None without one)."""
    t = tuning(key) if key is not None else None
    table = t.choice.table if t is not None and t.choice is not None else None
    if table is None or not table.offered:
        return None
    return rank_model(table.offered, table.accepted, table.lead)[0]


def _flags(tree: TreeConfig | None, key=None) -> str:
    if tree is None:
        return ""
    f = shape_flags(tree, pair_rank(key))
    notes = "".join(f"\n\n{n}" for n in f["notes"])
    return (f"**{tree.label()}** in the engines: SGLang `{f['sglang']}`; vLLM `--speculative-config` fields "
            f"`{f['vllm_json']}`{notes}")


def use_shape(value: str | None, key=None) -> tuple:
    """The Playground's seven draft settings for the picked shape (and its engine flags)."""
    if not value:
        return (*(gr.skip(),) * 7, "Pick a shape first.")
    tree = _decode(value)
    return (*tree_settings(tree), _flags(tree, key))


def wire_diagnose_tab(tab: DiagnoseTab, pg: Playground, deploy_fn=None, deploy_outputs=None) -> None:
    tab.button.click(analyse, [pg.out.result_state], tab.outputs, api_visibility="private")
    tab.pick.change(lambda v, key: _flags(_decode(v), key) if v else "", [tab.pick, pg.out.pair_state], [tab.flags],
                    api_visibility="private", queue=False)
    used = tab.use.click(use_shape, [tab.pick, pg.out.pair_state], [*pg.tree_inputs, tab.flags],
                         api_visibility="private", queue=False)
    if deploy_fn is not None:
        used.then(deploy_fn, [pg.out.pair_state, *pg.tree_inputs], deploy_outputs, api_visibility="private")
