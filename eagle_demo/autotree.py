"""Automatic tree: pick the draft shape (a chain length, or a tree depth / top-k / total) that maximises the
predicted speedup, tau / round cost, for this pair on this device and dtype.

Calibration (a few seconds at most, `budget_s`):
1. Acceptance: one short greedy EAGLE run with a wide tree. Each round's accepted path gives, per depth d and
   sibling rank r (children ordered by draft probability), how often the rank-r child was accepted when its
   parent was: a[d][r]. Chains use the direct figure: P(the first d top-1 drafts all accepted).
2. Costs, measured on this device: a plain decoding step, the draft of every candidate (depth, top-k), the
   target's verify forward by size (interpolated between measured sizes), and the extend of the draft's cache.
   Each is the fastest of a few tries, so a busy machine disturbs the choice less.

Prediction: a tree's expected accepted tokens follow EAGLE-2's own selection with expected acceptance in place
of the draft's scores (expand the top-k frontier per depth, keep the best total-1 nodes); tau = 1 + their sum.
The round cost is draft + verify(total) + extend(tau) + the round's host work, in plain steps.

The choice is cached on disk per (target, draft, device, dtype, torch threads) under
$EAGLE_DEMO_CACHE/autotree (default ~/.cache/eagle_demo/autotree); `refresh=True` re-tunes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import torch

from .config import RunConfig, TreeConfig
from .events import Round

__all__ = ["AutoChoice", "auto_tree", "predict_tau", "CALIBRATION_TREE"]

CALIBRATION_TREE = TreeConfig(depth=7, top_k=4, total_tokens=24)  # CPU: rounds stay fairly cheap
CALIBRATION_TREE_GPU = TreeConfig(depth=8, top_k=8, total_tokens=64)
CHAINS = tuple(range(1, 8))
TREE_DEPTHS = (1, 2, 3, 4, 5, 6, 7, 8)
TREE_TOP_KS = (2, 3, 4, 6, 8)
TREE_TOTALS = (3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)
CHAIN_SIZES = tuple(range(1, max(CHAINS) + 2))  # a chain of d drafts verifies d + 1 tokens
TREE_SIZES = (3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
PROMPTS = ("def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists into one sorted list.\"\"\"\n",
           "The history of the printing press begins in the fifteenth century, when",
           "Question: A train travels 60 km in 1.5 hours. What is its average speed?\nAnswer:")


@dataclass(frozen=True)
class AutoChoice:
    tree: TreeConfig  # the chosen shape
    predicted_tau: float  # tokens per round (accepted + bonus)
    predicted_round_cost: float  # a round's price in plain decoding steps
    predicted_speedup: float  # predicted_tau / predicted_round_cost
    plain_step_ms: float
    calibration_seconds: float
    from_cache: bool = False

    def line(self) -> str:
        return (f"auto: {self.tree.label()}, predicted tau {self.predicted_tau:.2f}, round cost "
                f"{self.predicted_round_cost:.2f} plain steps, predicted speedup {self.predicted_speedup:.2f}x")

    def versus(self, measured: float | None) -> str:
        """The choice next to a measured speedup, e.g. "auto: chain k=6, predicted 2.60x, measured 2.41x"."""
        seen = f", measured {measured:.2f}x" if measured is not None else ""
        return f"auto: {self.tree.label()}, predicted {self.predicted_speedup:.2f}x{seen}"

    def to_dict(self) -> dict:
        """The JSON block of a run that used the choice (the /generate stats, the CLI summary, the bench report)."""
        return {"tree": self.tree.label(), "predicted_tau": self.predicted_tau,
                "predicted_round_cost": self.predicted_round_cost, "predicted_speedup": self.predicted_speedup}


def default_cache_dir() -> Path:
    """$EAGLE_DEMO_CACHE/autotree, default ~/.cache/eagle_demo/autotree."""
    env = os.environ.get("EAGLE_DEMO_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "eagle_demo") / "autotree"


def _cache_file(session, device: torch.device, dtype: torch.dtype, cache_dir: Path | None) -> Path:
    report = session.report
    parts = [str(report.target_path), str(report.draft_path), str(device), str(dtype), torch.__version__,
             str(torch.get_num_threads()), _weights_stamp(report.target_path), _weights_stamp(report.draft_path)]
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
            return AutoChoice(**{**data, "from_cache": True})
        except (ValueError, TypeError, KeyError):
            pass  # unreadable cache: calibrate again
    say = progress or (lambda stage: None)
    t0 = time.perf_counter()
    say("measuring a plain step, the draft and the verify by size")
    with engine.lock:
        costs = measure_costs(engine, _calibration_ids(session), budget_s * 0.25)
    say("measuring acceptance by depth and rank")
    stats = acceptance(session, budget_s * 0.4)
    choice = choose(stats, costs, time.perf_counter() - t0, runner.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = asdict(choice)
    data.pop("from_cache")
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


# ---- acceptance ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Acceptance:
    rank: tuple[tuple[float, ...], ...]  # rank[d-1][r] = P(rank-r child accepted | parent accepted), depth d
    chain: tuple[float, ...]  # chain[d-1] = P(the first d top-1 drafts are all accepted)
    rounds: int


def calibration_tree(device: torch.device) -> TreeConfig:
    return CALIBRATION_TREE if device.type == "cpu" else CALIBRATION_TREE_GPU


def acceptance(session, budget_s: float) -> Acceptance:
    """Greedy EAGLE rounds with the calibration tree on the calibration prompts, until the budget is spent."""
    cal = calibration_tree(session.eagle.runner.device)
    depth, k = cal.depth, cal.top_k
    offered = [[0] * k for _ in range(depth)]
    accepted = [[0] * k for _ in range(depth)]
    lead = [[0, 0] for _ in range(depth)]  # per depth: top-1 child offered / accepted under an all-top-1 path
    rounds = 0
    deadline = time.perf_counter() + budget_s
    run = RunConfig(max_new_tokens=96, ignore_eos=True, tree=cal)
    for ids in _calibration_ids(session):
        stop = threading.Event()
        for ev in session.eagle.generate(ids, run, stop):
            if isinstance(ev, Round):
                rounds += 1
                _count(ev, offered, accepted, lead)
                if time.perf_counter() > deadline:
                    stop.set()
        if time.perf_counter() > deadline:
            break
    # shrunk towards zero: a rank seen rarely (deep, wide) is not trusted to accept
    rank = tuple(tuple(accepted[d][r] / (offered[d][r] + 1.0) for r in range(k)) for d in range(depth))
    # a chain's own conditional (top-1 child under an all-top-1 path), shrunk towards the any-parent rate
    top1 = [(lead[d][1] + rank[d][0]) / (lead[d][0] + 1.0) for d in range(depth)]
    chain = tuple(math.prod(top1[:d + 1]) for d in range(depth))  # all top-1 drafts accepted to depth d
    return Acceptance(rank=rank, chain=chain, rounds=rounds)


def _count(ev: Round, offered, accepted, lead=None) -> None:
    kids: dict[int, list[tuple[float, int]]] = {}
    for i, node in enumerate(ev.nodes):
        if node.parent >= 0:
            kids.setdefault(node.parent, []).append((-node.draft_prob, i))
    parent, top1_path = 0, True
    for d in range(len(offered)):
        ranked = [i for _, i in sorted(kids.get(parent, []))][:len(offered[d])]
        for r in range(len(ranked)):
            offered[d][r] += 1
        if lead is not None and top1_path and ranked:
            lead[d][0] += 1
        nxt = ev.accepted_path[d] if d < len(ev.accepted_path) else None
        if nxt is None or nxt not in ranked:
            return
        r = ranked.index(nxt)
        accepted[d][r] += 1
        if lead is not None and top1_path and r == 0:
            lead[d][1] += 1
        top1_path = top1_path and r == 0
        parent = nxt


def predict_tau(stats: Acceptance, tree: TreeConfig) -> float:
    """Expected tokens per round: EAGLE-2 selection over expected acceptance (see the module docstring)."""
    if tree.is_chain:
        depth = min(tree.depth, tree.total_tokens - 1, len(stats.chain))
        return 1.0 + sum(stats.chain[:depth])

    def a(d: int, r: int) -> float:
        row = stats.rank[min(d, len(stats.rank)) - 1]
        return row[r] if r < len(row) else 0.0

    values, frontier = [], [1.0]
    for d in range(1, tree.depth + 1):
        children = [v * a(d, r) for v in frontier for r in range(tree.top_k)]
        values.extend(children)
        frontier = sorted(children, reverse=True)[:tree.top_k]
    return 1.0 + sum(sorted(values, reverse=True)[:tree.total_tokens - 1])


# ---- costs --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Costs:
    plain: float  # seconds
    verify_chain: dict  # size -> seconds (no mask)
    verify_tree: dict  # size -> seconds (tree mask)
    draft: dict  # (depth, top_k) -> seconds
    extend: dict  # accepted + bonus -> seconds
    host: float  # acceptance and bookkeeping per round


def measure_costs(engine, prompts: list[list[int]], budget_s: float) -> Costs:
    runner, drafter = engine.runner, engine.drafter
    dev = runner.device
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    prompt = prompts[0]
    runner.reset(len(prompt) + 80)
    drafter.reset()
    drafter.reserve(len(prompt) + 80)
    out = runner.forward(torch.tensor(prompt))
    runner.commit(list(range(len(prompt))))
    drafter.extend(out.features, torch.tensor(prompt[1:] + [prompt[-1]]))
    ids = torch.tensor(prompt * 8)[:max(TREE_SIZES)]

    def verify(n: int, tree: bool):
        def go():
            mask = torch.ones(n, n, dtype=torch.bool).tril() if tree else None
            runner.forward(ids[:n], torch.arange(n) if tree else None, mask)
            runner.commit([])
            sync()
        return go

    def timed(fn, tries: int = 3) -> float:
        fn()  # warm-up
        times = []
        for _ in range(tries):
            t = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t)
        return min(times)

    # verify sizes measured round-robin (a burst of load elsewhere then hits every size alike), fastest try kept
    top = max_tree_size(dev)
    jobs = [(n, False) for n in CHAIN_SIZES] + [(n, True) for n in TREE_SIZES if n <= top]
    best = {job: float("inf") for job in jobs}
    deadline = time.perf_counter() + budget_s
    verify(1, False)()  # warm-up
    for _ in range(10):
        for job in jobs:
            t = time.perf_counter()
            verify(*job)()
            best[job] = min(best[job], time.perf_counter() - t)
        if time.perf_counter() > deadline:
            break
    plain = best[(1, False)]
    v_chain = _monotone({n: best[(n, False)] for n in CHAIN_SIZES}, plain)
    v_tree = _monotone({n: best[(n, True)] for n in TREE_SIZES if n <= top}, plain)
    root = prompt[-1]
    draft = {(d, 1): timed(lambda d=d: drafter.draft(root, TreeConfig.chain(d))) for d in CHAINS}
    for depth, k in {(t.depth, t.top_k) for t in candidates(dev) if not t.is_chain}:
        draft[(depth, k)] = timed(lambda d=depth, k=k: drafter.draft(root, TreeConfig(d, k, 4 * k)), 2)
    feats = out.features[-8:]

    def extend(m: int):
        def go():
            drafter.extend(feats[:m], ids[:m])
            drafter.cache.crop(-m)
            drafter.length -= m
        return go

    ext = {m: timed(extend(m)) for m in (1, 2, 4, 8)}
    runner.reset()
    drafter.reset()
    host = timed(lambda: _host_work(out.logits[:8]))
    return Costs(plain=plain, verify_chain=v_chain, verify_tree=v_tree, draft=draft, extend=ext, host=host)


def _host_work(logits: torch.Tensor) -> None:
    from .acceptance import verify_tree
    from .config import SamplingConfig
    from .tree import make_tree

    n = logits.shape[0]
    tree = make_tree(list(range(n)), list(range(-1, n - 1)), list(range(n)), [1.0] * n, [1.0] * n, logits.device)
    verify_tree(tree, logits, SamplingConfig(), None, 0)


def _monotone(table: dict, floor: float) -> dict:
    """A bigger verify never costs less than a smaller one (nor than a plain step): running maximum."""
    out, top = {}, floor
    for n in sorted(table):
        top = max(top, table[n])
        out[n] = top
    return out


def _interp(table: dict, x: float) -> float:
    keys = sorted(table)
    if x <= keys[0]:
        return table[keys[0]]
    for lo, hi in zip(keys, keys[1:]):
        if x <= hi:
            return table[lo] + (table[hi] - table[lo]) * (x - lo) / (hi - lo)
    lo, hi = keys[-2], keys[-1]  # past the last size: extend the last slope
    return table[hi] + max(0.0, table[hi] - table[lo]) * (x - hi) / (hi - lo)


def round_cost(costs: Costs, tree: TreeConfig, tau: float) -> float:
    """Predicted round time in plain steps."""
    size = min(tree.total_tokens, tree.max_draft_nodes + 1)
    table = costs.verify_chain if tree.is_chain else {**costs.verify_tree, 1: costs.plain}
    verify = _interp(table, size)
    draft = costs.draft[(min(tree.depth, tree.total_tokens - 1), 1) if tree.is_chain else (tree.depth, tree.top_k)]
    return (draft + verify + _interp(costs.extend, tau) + costs.host) / costs.plain


def max_tree_size(device: torch.device) -> int:
    return 32 if device.type == "cpu" else 64


def candidates(device: torch.device) -> list[TreeConfig]:
    """Chains, and trees no wider than the calibration tree measured (its ranks are all we know)."""
    cal = calibration_tree(device)
    out = [TreeConfig.chain(d) for d in CHAINS]
    for depth in TREE_DEPTHS:
        for k in TREE_TOP_KS:
            for total in TREE_TOTALS:
                tree = TreeConfig(depth=depth, top_k=k, total_tokens=total)
                if (k <= cal.top_k and depth <= cal.depth and depth < total - 1 <= tree.max_draft_nodes
                        and total <= max_tree_size(device)):
                    out.append(tree)
    return out


def choose(stats: Acceptance, costs: Costs, seconds: float, device: torch.device) -> AutoChoice:
    best = None
    for tree in candidates(device):
        tau = predict_tau(stats, tree)
        cost = round_cost(costs, tree, tau)
        if best is None or tau / cost > best[0] / best[1]:
            best = (tau, cost, tree)
    tau, cost, tree = best
    return AutoChoice(tree=tree, predicted_tau=tau, predicted_round_cost=cost, predicted_speedup=tau / cost,
                      plain_step_ms=costs.plain * 1e3, calibration_seconds=seconds)

