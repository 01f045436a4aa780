"""Automatic tree: pick the draft shape (a chain length, or a tree total / depth / top-k) that maximises the
predicted speedup, tau / round cost, for this pair on this device and dtype.

Calibration (2.4-3.0 s on the shipped pair on one CPU thread):
1. Costs (`autotree_costs`, in 0.22 x `budget_s`, 3 s by default): a plain step, the verify by size, the draft
   by depth and top-k, the draft's extend and the round's host work, timed interleaved, kept at their fastest
   and fitted as lines (the verify: one line over all sizes), so a busy machine moves no single size's price on
   its own.
2. Acceptance (`autotree_replay`): every candidate shape's tau, replayed at every position of the target's own
   greedy text of the calibration prompts: exact for greedy decoding, every shape on the same text, the same
   figures on every calibration of a pair (no state is left out for time). Candidates: chains 1..8 and trees of
   top-k 2, 4 and 8 (GPU: also 10) at every depth and total the device allows (top-8 to depth 2 on a CPU), so
   the short wide trees a weak head needs are in the set as well as the deep ones a strong head needs.

Prediction: speedup = tau / round cost, the round cost in plain steps = (draft(depth, top-k) + verify(total) +
extend(tau) + host(total)) / plain step. A shape outside the replayed set falls back to the rank model
(`predict_tau` over acceptance by depth and sibling rank, counted from the same replay).

The choice is cached on disk per (target, draft, their files, the draft's conventions after a probe, device,
dtype, torch threads, static caches or not, calibration method and text) under $EAGLE_DEMO_CACHE/autotree (default
~/.cache/eagle_demo/autotree); `refresh=True` re-tunes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

import torch

from .autotree_costs import Costs, clock_for
from .autotree_costs import measure_costs as _measure_costs
from .autotree_replay import (  # noqa: F401 (_count: the rank model's counts)
    Group, _count, replay, shapes_of, walk_drafted, walk_tau)
from .config import RunConfig, TreeConfig, default_tree
from .retune import ShapeTable, model_tau, rank_model

__all__ = ["AutoChoice", "Acceptance", "auto_tree", "predict_tau", "candidates", "choose", "groups", "round_cost"]

METHOD = "replay-7"  # in the cache key: a choice made by another calibration method (replay-2: over the stock
# CPU weight layout that `cpu_layout` replaced; replay-3: without the table a run retunes from; replay-4: 40-token
# continuations of a code, a history and an arithmetic prompt, the states past the budget left out; replay-5:
# without stopping chains; replay-6: verify priced over the stock SDPA call that `attention` replaced on a CPU) is
# made again
TOTALS_CPU = (3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
TOTALS_GPU = (4, 6, 8, 12, 16, 24, 32, 48, 64)
# Stopping chains (`TreeConfig.stop_below`), CPU only: their stop reads one score per draft step, a sync on a GPU.
STOPS_CPU = (0.002, 0.005, 0.01, 0.02, 0.05)
NEW_TOKENS = 72  # greedy continuation per calibration prompt; its positions with 16 known tokens after them
# (the deepest chain) are the replayed states
# The calibration text: a function, a question, a paragraph of documentation and a class, on the subject the
# product's suite and page examples share (Python). Text a pair was not trained on undersells its draft: on the
# shipped pair, 40 tokens after a history paragraph and an arithmetic question chose shapes at 0.68-0.72 of the
# best shape's predicted speedup on the suite, these at 0.93-0.97 (docs/perf.md "Automatic tree").
PROMPTS = ("def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n",
           "Question: How do I count the words in a text file in Python?\nAnswer:",
           "The json module converts Python objects to text and back. ",
           "class Timer:\n    \"\"\"Measure the time a block of code takes.\"\"\"\n")


@dataclass(frozen=True)
class AutoChoice:
    tree: TreeConfig  # the chosen shape
    predicted_tau: float  # tokens per round (accepted + bonus)
    predicted_round_cost: float  # a round's price in plain decoding steps
    predicted_speedup: float  # predicted_tau / predicted_round_cost
    plain_step_ms: float
    calibration_seconds: float
    from_cache: bool = False
    table: ShapeTable | None = None  # every candidate's figures: a run retunes its shape from them (`retune`)

    def line(self) -> str:
        return (f"auto: {self.tree.label()}, predicted tau {self.predicted_tau:.2f}, round cost "
                f"{self.predicted_round_cost:.2f} plain steps, predicted speedup {self.predicted_speedup:.2f}x")

    def versus(self, measured: float | None, tau: float | None = None, retuned=()) -> str:
        """The choice next to a measured speedup, e.g. "auto: chain k=6, predicted 2.60x, measured 2.41x". With
        the run's tau (of its drafting rounds) both taus are shown, so a gap reads as the text (acceptance
        differs from the calibration text's) or as the machine (the same tau, a dearer round). retuned: the
        run's (round, shape) switches (`retune`), each named."""
        head = f"auto: {self.tree.label()}, predicted {self.predicted_speedup:.2f}x"
        seen = f", measured {measured:.2f}x" if measured is not None else ""
        moved = "".join(f"; from round {at}: {label}" for at, label in retuned)
        if tau is None:
            return head + seen + moved
        this = f"{seen} at tau {tau:.2f} (this text)" if seen else f", tau {tau:.2f} on this text"
        return f"{head} at tau {self.predicted_tau:.2f} (calibration text){this}{moved}"

    def run_config(self, run: RunConfig, retune: bool = False) -> RunConfig:
        """`run` with the chosen tree, its draft paused while it does not pay: the break-even tau is the predicted
        round cost (`gate`). retune: the run may move its shape on its own acceptance (`retune`; off by default:
        over 128-token runs it has not paid, docs/perf.md "Retuning during a run")."""
        table = self.table if retune else None
        return replace(run, tree=self.tree, pause_below=round(self.predicted_round_cost, 3), retune=table,
                       pause_by_length=self.break_even_by_length())

    def break_even_by_length(self) -> tuple[float, ...]:
        """A stopping chain's break-even for a round that drafted 1..k tokens: that round's predicted cost in plain
        steps (the gate holds each round to its own; `gate.DraftGate`). () for other shapes."""
        return self.table.by_length(self.tree, self.predicted_tau) if self.table is not None else ()

    def to_dict(self) -> dict:
        """The JSON block of a run that used the choice (the /generate stats, the CLI summary, the bench report)."""
        return {"tree": self.tree.label(), "predicted_tau": self.predicted_tau,
                "predicted_round_cost": self.predicted_round_cost, "predicted_speedup": self.predicted_speedup}


# ---- the candidates -----------------------------------------------------------------------------------------

def groups(device: torch.device) -> list[Group]:
    """What the replay grows per state: the chain, and per top-k its deepest tree (the totals its shapes keep)."""
    if device.type == "cpu":
        chain = Group(1, 16, stops=tuple((d, p) for d in (8, 12, 16) for p in STOPS_CPU), fixed=8)
        return [chain, Group(2, 6, TOTALS_CPU), Group(4, 6, TOTALS_CPU), Group(8, 2, TOTALS_CPU)]
    return [Group(1, 8), Group(2, 8, TOTALS_GPU), Group(4, 8, TOTALS_GPU), Group(8, 7, TOTALS_GPU),
            Group(10, 6, TOTALS_GPU)]


def candidates(device: torch.device) -> list[TreeConfig]:
    """Every shape the calibration scores on this device: chains 1..8, and the trees of each top-k group."""
    return [shape for group in groups(device) for shape in shapes_of(group)]


# ---- the cache ----------------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """$EAGLE_DEMO_CACHE/autotree, default ~/.cache/eagle_demo/autotree."""
    env = os.environ.get("EAGLE_DEMO_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo") / "autotree"


def conventions(session) -> str:
    """The draft's conventions in use (after a probe that may have switched them; "" when never probed)."""
    probe = getattr(session.report, "probe", None)
    return json.dumps(probe.get("used"), sort_keys=True) if isinstance(probe, dict) else ""


def _cache_file(session, device: torch.device, dtype: torch.dtype, cache_dir: Path | None) -> Path:
    report = session.report
    parts = [METHOD, repr(PROMPTS), str(NEW_TOKENS), str(report.target_path), str(report.draft_path), str(device),
             str(dtype), torch.__version__, str(torch.get_num_threads()), _weights_stamp(report.target_path),
             _weights_stamp(report.draft_path), conventions(session)]
    if session.static:  # fixed-size caches (CUDA graphs on a GPU) price the parts otherwise
        parts.append("static")
    key = hashlib.sha256("|".join(parts).encode()).hexdigest()[:20]
    return (cache_dir or default_cache_dir()) / f"{key}.json"


def _weights_stamp(path) -> str:
    """Size and mtime of the folder's files: a retrained pair at the same path re-tunes."""
    p = Path(str(path)) if path else None
    if p is None or not p.is_dir():
        return ""
    return ",".join(f"{f.name}:{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in sorted(p.iterdir()) if f.is_file())


def auto_tree(session, *, budget_s: float = 3.0, refresh: bool = False, cache_dir: Path | None = None,
              progress: Callable[[str], None] | None = None) -> AutoChoice:
    """The shape maximising predicted tau / round cost for the session's pair (cached on disk). progress(stage)
    hears each calibration stage."""
    engine = session.eagle
    if engine is None:
        raise ValueError("auto tree needs a draft; load one or pick a chain/tree by hand")
    runner = engine.runner
    path = _cache_file(session, runner.device, runner.dtype, cache_dir)
    if not refresh and path.is_file():
        try:
            data = json.loads(path.read_text())
            data["tree"] = TreeConfig(**data["tree"])
            data["table"] = ShapeTable.from_dict(data["table"]) if data.get("table") else None
            return AutoChoice(**{**data, "from_cache": True})
        except (ValueError, TypeError, KeyError):
            pass  # unreadable cache: calibrate again
    say = progress or (lambda stage: None)
    t0 = time.perf_counter()
    ids = _calibration_ids(session)
    say("measuring a plain step, the verify by size and the draft by depth")
    with engine.lock:
        costs = measure_costs(engine, ids[0], budget_s * 0.22)
    say("replaying every candidate shape on the target's own text")
    stats = acceptance(session, ids)
    choice = choose(stats, costs, time.perf_counter() - t0, runner.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(choice)
    data.pop("from_cache")
    data["table"] = choice.table.to_dict() if choice.table is not None else None
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)
    return choice


def _calibration_ids(session) -> list[list[int]]:
    try:
        return [session.encode(p) for p in PROMPTS]
    except ValueError:  # no tokenizer: token ids spread over the vocabulary
        vocab = int(session.pair.target.get_input_embeddings().weight.shape[0])
        return [[(37 * i + 11 * j) % vocab for i in range(24)] for j in range(len(PROMPTS))]


# ---- measurements -------------------------------------------------------------------------------------------

def measure_costs(engine, prompt: list[int], budget_s: float) -> Costs:
    """The round's parts on this device (`autotree_costs.measure_costs`) at the sizes the candidates use."""
    dev = engine.runner.device
    shapes = candidates(dev)
    longest = max(t.total_tokens for t in shapes if t.is_chain)
    chain_sizes = tuple(n for n in (2, 4, 6) if n < longest) + (longest,)
    big = max(t.total_tokens for t in shapes)
    tree_sizes = tuple(n for n in (4, 8, 16, 32, 64) if n <= big)  # one line is fitted through all sizes
    depths = {g.top_k: (1 if g.top_k == 1 else min(2, g.depth), g.depth) for g in groups(dev)}
    return _measure_costs(engine, prompt, budget_s, chain_sizes, tree_sizes, depths)


@dataclass(frozen=True)
class Acceptance:
    rank: tuple[tuple[float, ...], ...]  # rank[d-1][r] = P(rank-r child accepted | parent accepted), depth d
    chain: tuple[float, ...]  # chain[d-1] = P(the first d top-1 drafts are all accepted)
    rounds: int  # states the figures come from
    measured: dict = field(default_factory=dict)  # TreeConfig -> tau replayed on the target's own text
    drafted: dict = field(default_factory=dict)  # stopping chain -> mean draft tokens per round, same walk
    engine: tuple = ()  # the engine's own calibration runs: (tree, seconds, rounds, new tokens, runs, prompt tokens)
    counts: tuple = ()  # (offered, accepted, lead): the rank model's raw counts, for retuning during a run


def acceptance(session, prompts: list[list[int]] | None = None) -> Acceptance:
    """Every candidate's tau from a replay of the calibration prompts, and the rank model's figures from the
    same states."""
    engine = session.eagle
    dev = engine.runner.device
    gen_tree = default_tree(dev.type, session.family)
    got = replay(engine, prompts or _calibration_ids(session), groups(dev), NEW_TOKENS, gen_tree, clock_for(dev))
    offered, accepted, lead = got.rank_offered, got.rank_accepted, got.lead
    rank, chain = rank_model(offered, accepted, lead)
    measured = {shape: walk_tau(by_prompt) for shape, by_prompt in got.accepted.items()}
    drafted = {shape: walk_drafted(got.accepted[shape], by_prompt) for shape, by_prompt in got.drafted.items()}
    engine_runs = (gen_tree, got.engine_seconds, got.engine_rounds, got.engine_tokens, got.runs, got.prompt_tokens)
    return Acceptance(rank=rank, chain=chain, rounds=got.states, measured=measured, drafted=drafted,
                      engine=engine_runs, counts=(offered, accepted, lead))


def predict_tau(stats: Acceptance, tree: TreeConfig) -> float:
    """Expected tokens per round: the replayed figure when the shape was replayed, else the rank model
    (`retune.model_tau`)."""
    if tree in stats.measured:
        return stats.measured[tree]
    return model_tau(stats.rank, stats.chain, tree)


# ---- the choice ---------------------------------------------------------------------------------------------

def round_cost(costs: Costs, tree: TreeConfig, tau: float, scale: float = 1.0, drafted: float | None = None) -> float:
    """Predicted round time in plain steps (drafted: a stopping chain's mean draft tokens per round)."""
    return scale * costs.round(tree, tau, drafted) / costs.plain


def overhead_scale(stats: Acceptance, costs: Costs) -> float:
    """What the engine's own calibration runs cost per round over what the parts predict for them (1 to 1.6):
    the bookkeeping between the parts. It scales every shape alike, so it moves the predicted speedup shown, not
    the choice."""
    if not stats.engine:
        return 1.0
    tree, seconds, rounds, tokens, runs, prompt_tokens = stats.engine
    if not rounds or not runs:
        return 1.0
    prefills = runs * costs.verify_at(round(prompt_tokens / runs), False)
    per_round = (seconds - prefills) / rounds
    return min(1.6, max(1.0, per_round / costs.round(tree, tokens / rounds)))


def choose(stats: Acceptance, costs: Costs, seconds: float, device: torch.device,
           shapes: list[TreeConfig] | None = None) -> AutoChoice:
    """The shape (of `shapes`, default the device's candidates) with the highest predicted tau / round cost;
    ties go to the cheaper round."""
    best = None
    scale = overhead_scale(stats, costs)
    shapes = shapes or candidates(device)
    taus = [predict_tau(stats, tree) for tree in shapes]
    for tree, tau in zip(shapes, taus):
        cost = round_cost(costs, tree, tau, scale, stats.drafted.get(tree))
        if best is None or (tau / cost, -cost) > (best[0] / best[1], -best[1]):
            best = (tau, cost, tree)
    tau, cost, tree = best
    table = None
    if stats.counts and stats.counts[0]:
        offered, accepted, lead = (tuple(tuple(float(x) for x in row) for row in m) for m in stats.counts)
        table = ShapeTable(shapes=tuple(shapes), taus=tuple(taus), offered=offered, accepted=accepted, lead=lead,
                           costs=costs, scale=scale, drafted=tuple(stats.drafted.get(t, 0.0) for t in shapes))
    return AutoChoice(tree=tree, predicted_tau=tau, predicted_round_cost=cost, predicted_speedup=tau / cost,
                      plain_step_ms=costs.plain * 1e3, calibration_seconds=seconds, table=table)
