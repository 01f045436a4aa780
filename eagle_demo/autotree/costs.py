"""What a round's parts cost on this device, for `autotree`: timed interleaved, kept at their fastest, fitted.

Every part is timed once per sweep and the sweeps repeat until the budget is spent (a burst of load elsewhere
then hits every part alike); each part keeps its fastest try (a busy machine slows a try, never speeds one up).
The raw fastest times are still noisy from size to size, so the verify by size is a line fitted through all the
sizes at once (a tree mask adds a constant), the draft by depth a line per top-k through its shallowest and
deepest draft, and the draft's extend and the round's host work a line through their two sizes.

Parts, as an engine round runs them: the plain step (target forward of one token, commit, logits -> token),
the verify (target forward of n tokens, commit of an accepted path: a crop for a chain, a gather for a tree),
the draft (`Drafter.draft`), the draft's extend by the committed tokens, the host work (`verify_tree`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..common.config import SamplingConfig, TreeConfig

__all__ = ["Costs", "Line", "clock_for", "fit_line", "fit_verify", "measure_costs"]

GREEDY = SamplingConfig()


@dataclass(frozen=True)
class Line:
    at: float  # seconds at x0
    x0: float
    slope: float  # seconds per unit of x (never negative)

    def __call__(self, x: float) -> float:
        return self.at + self.slope * (x - self.x0)

    @classmethod
    def through(cls, x0: float, y0: float, x1: float, y1: float) -> "Line":
        return cls(at=y0, x0=x0, slope=max(0.0, (y1 - y0) / (x1 - x0)) if x1 != x0 else 0.0)


@dataclass(frozen=True)
class Costs:
    """Seconds; `round` gives a shape's predicted round time."""

    plain: float  # one plain decoding step
    verify: Line  # chain verify of n tokens (n >= 2)
    tree_extra: float  # what a tree mask adds to a verify
    draft: dict  # top_k -> Line over depth (top_k 1: the chain)
    extend: Line  # draft extend by m committed tokens
    host: Line  # acceptance and bookkeeping of a verified block of n tokens
    hot: dict = field(default_factory=dict)  # hot vocabulary -> Line over depth of its chain's draft

    def verify_at(self, n: float, tree: bool) -> float:
        return self.plain if n <= 1 else max(self.plain, self.verify(n) + (self.tree_extra if tree else 0.0))

    def round(self, tree: TreeConfig, tau: float, drafted: float | None = None) -> float:
        """Predicted seconds of one round of `tree` that commits tau tokens on average; drafted: a stopping
        chain's mean draft tokens per round (its parts are lines in them, so the mean round is their round)."""
        depth: float = min(tree.depth, tree.total_tokens - 1) if tree.is_chain else tree.depth
        size: float = min(tree.total_tokens, tree.max_draft_nodes + 1)
        if tree.is_chain and drafted is not None:
            depth, size = drafted, drafted + 1
        line = self.hot.get(tree.hot_vocab) or self.draft.get(tree.top_k) or self.draft[max(self.draft)]
        return line(depth) + self.verify_at(size, not tree.is_chain) + self.extend(tau) + self.host(size)


def fit_line(points: list[tuple[float, float]]) -> Line:
    """Least squares through (x, y); the point farthest off (more than 10% of its value) is dropped once."""
    line = _least_squares(points)
    worst = max(points, key=lambda p: abs(p[1] - line(p[0])))
    if len(points) > 3 and abs(worst[1] - line(worst[0])) > 0.1 * worst[1]:
        line = _least_squares([p for p in points if p is not worst])
    return line


def _least_squares(points: list[tuple[float, float]]) -> Line:
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx > 0 else 0.0
    return Line(at=my, x0=mx, slope=max(0.0, slope))


def fit_verify(chain: dict[int, float], tree: dict[int, float]) -> tuple[Line, float]:
    """One line over size through the chain and the tree verifies together, a tree's verify its chain's plus a
    constant (least squares; the point farthest off, more than 10% of its value, is dropped once)."""
    points = [(float(n), y, 0.0) for n, y in chain.items()] + [(float(n), y, 1.0) for n, y in tree.items()]
    a, b, extra = _least_squares3(points)
    worst = max(points, key=lambda p: abs(p[1] - (a + b * p[0] + extra * p[2])))
    if len(points) > 4 and abs(worst[1] - (a + b * worst[0] + extra * worst[2])) > 0.1 * worst[1]:
        a, b, extra = _least_squares3([p for p in points if p is not worst])
    return Line(at=a, x0=0.0, slope=b), extra


def _least_squares3(points: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """y ~ a + b x + c t over (x, y, t), b and c kept >= 0 (a size never makes a verify cheaper)."""
    rows = torch.tensor([[1.0, x, t] for x, _, t in points], dtype=torch.float64)  # [P, 3]
    ys = torch.tensor([[y] for _, y, _ in points], dtype=torch.float64)  # [P, 1]
    if rows[:, 2].abs().sum() == 0 or rows[:, 2].sum() == len(points):
        rows = rows[:, :2]
    sol = torch.linalg.lstsq(rows, ys).solution[:, 0].tolist()
    a, b, c = (sol + [0.0])[:3]
    if b < 0:
        b = 0.0
        a = sum(y - c * t for _, y, t in points) / len(points)
    if c < 0:
        c = 0.0
        line = _least_squares([(x, y) for x, y, _ in points])
        a, b = line(0.0), line.slope
    return a, b, c


def clock_for(device: torch.device) -> Callable[[], float]:
    """The clock calibration times and budgets with: on a CPU running torch on one thread, this thread's CPU
    time (time taken by other processes on a shared machine is not counted, so a loaded machine measures as an
    idle one would, only later); otherwise the wall clock."""
    if device.type == "cpu" and torch.get_num_threads() == 1:
        return time.thread_time
    return time.perf_counter


def _plain_step(runner, token: torch.Tensor):
    """A plain decoding step as the baseline takes it: one token's forward, its pick, the cache put back."""
    from ..decoding.sampling import pick, process_logits

    def step():
        out = runner.forward(token)
        runner.commit([0])
        probs = process_logits(out.logits, GREEDY)[0]  # [V]
        float(probs[pick(out.logits[0], probs, GREEDY, None, 0)])
        runner.rollback(1)
    return step


def _jobs(engine, prompt: list[int], chain_sizes, tree_sizes, draft_depths: dict[int, tuple[int, int]],
          hot: tuple[int, ...] = ()) -> dict:
    from ..decoding.acceptance import verify_tree
    from ..decoding.tree import make_tree

    runner, drafter = engine.runner, engine.drafter
    ids = torch.tensor(prompt * (1 + max(tree_sizes + chain_sizes) // max(1, len(prompt))))
    root = prompt[-1]

    def verify(n: int, tree: bool):
        mask = torch.ones(n, n, dtype=torch.bool).tril() if tree else None  # [n, n]
        keep = [0, 1, n - 1] if tree else [0, 1, 2][:n]  # a tree's path is gathered, a chain's prefix cropped

        def go():
            runner.forward(ids[:n], torch.arange(n) if tree else None, mask)
            runner.commit(keep)
            runner.rollback(len(keep))
        return go

    def draft(depth: int, k: int, hot: int = 0):
        cfg = TreeConfig.chain(depth, hot_vocab=hot) if k == 1 else TreeConfig(depth=depth, top_k=k,
                                                                                total_tokens=depth + 2)
        return lambda: drafter.draft(root, cfg)

    def extend(m: int):
        def go():
            last = drafter.last_g
            drafter.extend(engine_feats[:m], ids[:m])
            drafter.cache.crop(-m)
            drafter.length -= m
            drafter.last_g = last
        return go

    def host(n: int):
        tree = make_tree(list(range(n)), list(range(-1, n - 1)), list(range(n)), [1.0] * n, [1.0] * n)
        return lambda: verify_tree(tree, engine_logits[:n], GREEDY, None, 0)

    out = runner.forward(torch.tensor(prompt))
    runner.commit(list(range(len(prompt))))
    drafter.extend(out.features, torch.tensor(prompt[1:] + [root]))
    engine_feats = out.features.repeat(1 + 8 // len(prompt), 1)[:8]  # [8, F]
    engine_logits = out.logits.repeat(1 + max(tree_sizes) // len(prompt), 1)  # [>= n, V]
    jobs: dict[tuple, Any] = {("plain", 1): _plain_step(runner, ids[:1])}  # (kind, size) or (kind, k, depth)
    jobs.update({("chain", n): verify(n, False) for n in chain_sizes})
    jobs.update({("tree", n): verify(n, True) for n in tree_sizes})
    for k, (lo, hi) in draft_depths.items():
        jobs[("draft", k, lo)], jobs[("draft", k, hi)] = draft(lo, k), draft(hi, k)
    lo, hi = draft_depths.get(1, (1, 1))
    for n in hot:
        jobs[("hot", n, lo)], jobs[("hot", n, hi)] = draft(lo, 1, n), draft(hi, 1, n)
    jobs.update({("extend", m): extend(m) for m in (1, 8)})
    jobs.update({("host", n): host(n) for n in (2, max(tree_sizes))})
    return jobs


def measure_costs(engine, prompt: list[int], budget_s: float, chain_sizes: tuple[int, ...],
                  tree_sizes: tuple[int, ...], draft_depths: dict[int, tuple[int, int]], sweeps: int = 40,
                  hot: tuple[int, ...] = ()) -> Costs:
    """Time every part once per sweep until the budget is spent (3 sweeps at least), keep each part's fastest
    (`clock_for` the device's clock). No separate warm-up: a part's first, cold try is one of its three or more,
    and the fastest try discards it. hot: the hot vocabularies whose chains' drafts are timed as well (at the
    chain's depths in draft_depths)."""
    runner, drafter = engine.runner, engine.drafter
    dev = runner.device
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    clock = clock_for(dev)
    need = len(prompt) + 2 * max(tree_sizes + chain_sizes) + 16
    runner.reset(need)
    drafter.reset()
    drafter.reserve(need + 8 * max(draft_depths))
    with torch.inference_mode():
        jobs = _jobs(engine, prompt, chain_sizes, tree_sizes, draft_depths, hot)
        best = {key: float("inf") for key in jobs}
        deadline = clock() + budget_s
        for sweep in range(sweeps):
            for key, fn in jobs.items():
                t = clock()
                fn()
                sync()
                best[key] = min(best[key], clock() - t)
            if sweep >= 2 and clock() > deadline:
                break
    runner.reset()
    drafter.reset()
    verify, tree_extra = fit_verify({n: best[("chain", n)] for n in chain_sizes},
                                    {n: best[("tree", n)] for n in tree_sizes})
    draft = {k: Line.through(lo, best[("draft", k, lo)], hi, best[("draft", k, hi)])
             for k, (lo, hi) in draft_depths.items()}
    lo, hi = draft_depths.get(1, (1, 1))
    hot_lines = {n: Line.through(lo, best[("hot", n, lo)], hi, best[("hot", n, hi)]) for n in hot}
    big = max(tree_sizes)
    return Costs(plain=best[("plain", 1)], verify=verify, tree_extra=tree_extra, draft=draft,
                 extend=Line.through(1, best[("extend", 1)], 8, best[("extend", 8)]),
                 host=Line.through(2, best[("host", 2)], big, best[("host", big)]), hot=hot_lines)
