"""Profile an EAGLE round, split into draft, verify, accept and commit: op launches, host reads and time.

    OMP_NUM_THREADS=1 python scripts/profile_round.py [--target T --draft D] [--tree chain7 tree10/6/2 auto]
        [--device cpu|cuda] [--dtype float32|bfloat16] [--max-new-tokens 96] [--markdown]

For each part of a round, per round on average:
- ops: aten operators dispatched (each is one kernel launch on a GPU), counted with a TorchDispatchMode;
- host reads: reads of tensor values by the host (`.item()`, `.tolist()`, `int()`/`float()`/`bool()` of a
  tensor, `.cpu()`/`.numpy()`). Each one is a device->host synchronisation when the model runs on a GPU;
- ms: wall time of the part, from a separate run without the counters (the counters slow every op down).
The plain step of the baseline engine is measured the same way, so the round cost reads in plain steps.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _shapes import parse_tree  # noqa: E402  (scripts/ is on the path when a script runs)
from eagle_demo.common.config import RunConfig  # noqa: E402
from eagle_demo.decoding import engine as engine_mod  # noqa: E402
from eagle_demo.decoding.events import Finish, Round  # noqa: E402
from eagle_demo.session import load_session  # noqa: E402

PARTS = ("draft", "verify", "accept", "commit")
PROMPT = ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
          "    return fibonacci(n - 1) + fibonacci(n - 2)\n\n\ndef factorial(n):\n")


class Counter:
    """Per-part counts: `part` is set by the wrapped engine methods while they run."""

    def __init__(self) -> None:
        self.part = "other"
        self.ops: dict[str, int] = defaultdict(int)
        self.reads: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)


class OpCount(TorchDispatchMode):
    def __init__(self, counter: Counter):
        super().__init__()
        self.counter = counter
        self.in_graph = 0  # > 0 inside a call a GPU replays as one CUDA graph (`--static`)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        c = self.counter
        if not self.in_graph:
            c.ops[c.part] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def graphs_count_once(mode: OpCount):
    """`--static`: what a GPU replays as one CUDA graph (the target's static forward, a static draft's whole chain
    or tree and its extend) counts as one launch here, where the CPU runs it eagerly; the ops around the replays
    are the eager launches left on a GPU."""
    from eagle_demo.decoding.static_draft import StaticDraft
    from eagle_demo.target.static import StaticTarget

    def counted_once(fn):
        def wrapped(*a, **k):
            mode.counter.ops[mode.counter.part] += 0 if mode.in_graph else 1
            mode.in_graph += 1
            try:
                return fn(*a, **k)
            finally:
                mode.in_graph -= 1
        return wrapped

    run, replayed = StaticTarget._run, StaticDraft.replayed

    def replayed_once(self, key, fn):
        return replayed(self, key, counted_once(fn))

    StaticTarget._run, StaticDraft.replayed = counted_once(run), replayed_once
    try:
        yield
    finally:
        StaticTarget._run, StaticDraft.replayed = run, replayed


@contextlib.contextmanager
def count_host_reads(counter: Counter):
    """Count the host's reads of tensor values by wrapping the Tensor methods that make them: on a CPU most of
    them dispatch no op (a float() of a CPU tensor never reaches the dispatch mode), on a GPU each is a sync."""
    saved = {}
    for name in ("tolist", "cpu", "numpy", "item", "__float__", "__int__", "__bool__"):
        original = getattr(torch.Tensor, name)
        saved[name] = original

        def wrapped(self, *a, _original=original, **k):
            counter.reads[counter.part] += 1
            return _original(self, *a, **k)

        setattr(torch.Tensor, name, wrapped)
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wrap(obj, attr: str, part: str, counter: Counter, device: torch.device) -> None:
    original = getattr(obj, attr)

    def wrapped(*a, **k):
        outer = counter.part
        counter.part = part
        _sync(device)
        t = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            _sync(device)
            counter.seconds[part] += time.perf_counter() - t
            counter.part = outer

    setattr(obj, attr, wrapped)


def instrument(session, counter: Counter) -> None:
    """Label each part of a round. The engine calls these methods and functions once per round."""
    eng = session.eagle
    dev = eng.runner.device
    wrap(eng.drafter, "draft", "draft", counter, dev)
    wrap(eng.runner, "verify", "verify", counter, dev)
    wrap(engine_mod, "verify_tree", "accept", counter, dev)
    wrap(eng.runner, "commit", "commit", counter, dev)
    wrap(eng.drafter, "extend", "commit", counter, dev)


def run_once(session, ids, run, mode, counted: bool):
    counter = Counter()
    mode_cm = OpCount(counter) if counted else contextlib.nullcontext()
    reads_cm = count_host_reads(counter) if counted else contextlib.nullcontext()
    graphs_cm = graphs_count_once(mode_cm) if counted and session.static else contextlib.nullcontext()
    session_copy = _fresh(session) if mode == "eagle" else session
    if mode == "eagle":
        instrument(session_copy, counter)
    rounds = 0
    finish = None
    with mode_cm, reads_cm, graphs_cm:
        for ev in session_copy.stream(ids, run, mode=mode):
            if isinstance(ev, Round):
                rounds += 1
            if isinstance(ev, Finish):
                finish = ev
            counter.part = "other"
    return counter, finish


def _fresh(session):
    """Undo the instrumentation of an earlier call: wrap fresh bound methods every time."""
    eng = session.eagle
    for obj, names in ((eng.drafter, ("draft", "extend")), (eng.runner, ("verify", "commit"))):
        for name in names:
            obj.__dict__.pop(name, None)
    engine_mod.verify_tree = _ORIGINAL_VERIFY
    return session


_ORIGINAL_VERIFY = engine_mod.verify_tree


def profile(session, ids, run, repeats: int) -> dict:
    base_c, base_f = run_once(session, ids, run, "baseline", counted=True)
    eagle_c, eagle_f = run_once(session, ids, run, "eagle", counted=True)
    _fresh(session)
    steps = max(base_f.rounds, 1)
    rounds = max(eagle_f.rounds, 1)
    times = defaultdict(list)
    plain = []
    for _ in range(repeats):  # interleaved: a plain run, then an EAGLE run
        _, f = run_once(session, ids, run, "baseline", counted=False)
        plain.append(f.decode_seconds / max(f.rounds, 1))
        c, f = run_once(session, ids, run, "eagle", counted=False)
        _fresh(session)
        for p in PARTS:
            times[p].append(c.seconds[p] / max(f.rounds, 1))
        times["round"].append(f.decode_seconds / max(f.rounds, 1))
        times["tau"].append(f.new_tokens / max(f.rounds, 1))
    med = {k: statistics.median(v) for k, v in times.items()}
    step = statistics.median(plain)
    return {
        "plain_ops": base_c.ops["other"] / steps, "plain_reads": base_c.reads["other"] / steps, "plain_ms": step * 1e3,
        "ops": {p: eagle_c.ops[p] / rounds for p in PARTS},
        "reads": {p: eagle_c.reads[p] / rounds for p in PARTS},
        "other_ops": eagle_c.ops["other"] / rounds, "other_reads": eagle_c.reads["other"] / rounds,
        "ms": {p: med[p] * 1e3 for p in PARTS}, "round_ms": med["round"] * 1e3, "tau": med["tau"],
        "rounds": rounds,
    }




def table(label: str, r: dict) -> str:
    step = r["plain_ms"]
    lines = [f"**{label}**: tau {r['tau']:.2f}, round {r['round_ms']:.2f} ms = {r['round_ms'] / step:.2f} plain steps "
             f"(plain step {step:.2f} ms, {r['plain_ops']:.0f} ops, {r['plain_reads']:.0f} host reads); "
             f"predicted speedup tau / cost = {r['tau'] * step / r['round_ms']:.2f}x", "",
             "| part | ops / round | host reads / round | ms / round | plain steps |", "|---|---:|---:|---:|---:|"]
    for p in PARTS:
        lines.append(f"| {p} | {r['ops'][p]:.0f} | {r['reads'][p]:.1f} | {r['ms'][p]:.2f} | {r['ms'][p] / step:.2f} |")
    rest = r["round_ms"] - sum(r["ms"].values())
    lines.append(f"| rest of the loop | {r['other_ops']:.0f} | {r['other_reads']:.1f} | {rest:.2f} "
                 f"| {rest / step:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=None)
    ap.add_argument("--draft", default="default")
    ap.add_argument("--tree", nargs="*", default=["chain7", "tree10/6/2"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--static", action=argparse.BooleanOptionalAction, default=None,
                    help="static caches (default on CUDA): each call a GPU replays as one CUDA graph counts as one op")
    args = ap.parse_args(argv)
    session = load_session(args.target, args.draft, threads=args.threads, device=args.device, dtype=args.dtype,
                           static=args.static)
    ids = session.encode(PROMPT)
    static = ", static (a graph replay counts as one op)" if session.static else ""
    print(f"device {args.device}, dtype {args.dtype}{static}, torch threads {torch.get_num_threads()}, "
          f"prompt {len(ids)} tokens, {args.max_new_tokens} new tokens, greedy, median of {args.repeats}\n")
    for text in args.tree:
        label, tree = parse_tree(text, session)
        run = RunConfig(max_new_tokens=args.max_new_tokens, ignore_eos=True, tree=tree)
        print(table(label, profile(session, ids, run, args.repeats)) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
