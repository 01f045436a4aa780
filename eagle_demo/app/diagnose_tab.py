"""The Diagnose tab: where acceptance fell in the last Generate (by position, by kind of text) and the shape
explorer (every candidate shape replayed on that run's text, `autotree.explore`), with "use this shape", which
sets the Playground's draft settings and the Deploy tab's commands."""

from __future__ import annotations

import dataclasses
from typing import Any

import gradio as gr

from ..autotree.explore import KNOWN_ERROR_SOURCE, explore
from ..autotree.retune import rank_model
from ..common.config import TreeConfig
from ..common.errors import one_line
from ..serving.flags import shape_flags
from ..diagnose.falloff import by_kind, by_position, round_starts, token_lines
from ..metrics import summarize
from ..view.charts import empty_figure
from ..view.diagnose import kinds_html, position_figure, shape_choices, shapes_figure
from .autotune import tuning
from .forms import tree_settings
from .playground import Playground
from .registry import REGISTRY
from .state import MODEL_GATE

__all__ = ["DiagnoseTab", "build_diagnose_tab", "wire_diagnose_tab", "analyse", "use_shape", "pair_rank"]

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
    events, prompt_ids, tree = result["eagle"], list(result["prompt_ids"]), result["tree"]
    stats = summarize(events)
    output = [t for ev in events if hasattr(ev, "decode_seconds") for t in ev.token_ids]
    rounds = round_starts(events)
    lines, kinds = token_lines(session.decode(prompt_ids), [session.decode([t]) for t in output])
    t = tuning(result["key"])
    table = t.choice.table if t is not None and t.choice is not None else None
    measured = stats.tau if not stats.plain_rounds else None
    with MODEL_GATE:  # never beside a run or a calibration
        x = explore(session, prompt_ids, output, ran=tree, costs=table.costs if table else None,
                    scale=table.scale if table else 1.0, measured_tau=measured, greedy=bool(result.get("greedy")))
    notes = [x.summary()]
    if table is None:
        notes.append("predicted speedups appear once the automatic tree has calibrated this pair (Load does it)")
    if stats.plain_rounds:
        notes.append(f"the gate paused the draft for {stats.plain_rounds} rounds: the measured tau counts them as 1")
    notes.append(f"known error of the predicted speedup: {KNOWN_ERROR_SOURCE}; "
                 "tau on this text is exact for greedy runs")
    choices = shape_choices(x)
    best = next((v for label, v in choices if "(best)" in label), choices[0][1] if choices else None)
    message = f"**{len(output)} tokens, {len(rounds)} rounds.** " + "; ".join(notes) + "."
    return (message, position_figure(rounds, by_position(rounds)), kinds_html(by_kind(rounds, lines, kinds)),
            shapes_figure(x), gr.update(choices=choices, value=best),
            _flags(_decode(best) if best else None, result["key"]))


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
