"""How much does streaming through the page slow generation down?

Runs the same pair, prompt and settings (EAGLE only, greedy, EOS ignored so every run makes the same number
of tokens) two ways in one process, alternating, and prints medians and their ratio:

- headless: `session.stream(...)` consumed directly (what the CLI does);
- through the UI: the app's streaming endpoint (the Generate button's), launched on a localhost port and
  read by gradio_client, so every redraw (token HTML, stats, charts) is rendered and sent; with --browser a
  real headless Chromium renders the page instead, sharing the CPU as it would on a laptop.

Two ratios: engine tokens/s (decode only, as the stats strip reports it) and end-to-end tokens/s (new tokens
over the wall time from request to final output, prefill included, vs the headless prefill + decode time).

    python scripts/ui_overhead.py                      # the shipped tiny pair
    python scripts/ui_overhead.py --target DIR --draft DIR --max-new-tokens 256 --repeats 5 --browser

With --race (and --browser) both ways race plain decoding after EAGLE, as the page's default does, and the script
compares the baseline's tokens/s and the speedup the page shows with the headless ones: is the page's race fair?
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from eagle_demo.app import REGISTRY, TREE_MODE, build_app, in_worker, launch_options, make_key  # noqa: E402
from eagle_demo.app import stream as ui  # noqa: E402  (the Generate event's redraw intervals)  # noqa: E402  (the Generate event's redraw intervals)
from eagle_demo.common.config import TREE_PRESETS, RunConfig, SamplingConfig  # noqa: E402  # noqa: E402
from eagle_demo.decoding.metrics import RunView  # noqa: E402
from eagle_demo.session import SHIPPED_EAGLE1, SHIPPED_TARGET  # noqa: E402  # noqa: E402

PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def headless(session, ids: list[int], run: RunConfig) -> tuple[float, float]:
    """(engine decode tokens/s, end-to-end tokens/s). Runs in a fresh thread, as the app runs generation
    (on a busy machine, torch's OpenMP threads can behave very differently in the main thread)."""

    def work():
        t0 = time.perf_counter()
        view = RunView.of(session.stream(ids, run, "eagle"))
        wall = time.perf_counter() - t0
        stats = view.stats()
        return stats.tokens_per_second, stats.new_tokens / wall

    return in_worker(work)


def headless_race(session, ids: list[int], run: RunConfig) -> tuple[float, float]:
    """(EAGLE decode tokens/s, plain decoding's) of one race, EAGLE first, in a fresh thread as the app runs it."""

    def work():
        eagle = RunView.of(session.stream(ids, run, "eagle")).stats()
        base = RunView.of(session.stream(ids, run, "baseline")).stats()
        return eagle.tokens_per_second, base.tokens_per_second

    return in_worker(work)


def through_client(url: str, target: str, draft: str, prompt: str, run: RunConfig) -> tuple[float, float, int]:
    """(engine tokens/s, end-to-end tokens/s, streamed updates) via gradio_client."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    t = run.tree
    t0 = time.perf_counter()
    job = client.submit(target, draft, "", "auto", "auto", "", prompt, False, run.max_new_tokens, 0.0, 1.0, 0, 0,
                        TREE_MODE, t.depth, t.top_k, t.total_tokens, 4, 0.0, 0, False, True, True, 1.0, False, 1, 2, 10,
                        2, False, api_name="/generate_stream")
    updates = sum(1 for _ in job)
    final = job.outputs()[-1]
    wall = time.perf_counter() - t0
    stats = final[9]  # the raw stats JSON output
    return stats["tokens_per_second"], stats["new_tokens"] / wall, updates


def browser_cpu_seconds() -> float:
    """CPU seconds used so far by this process's children (the Playwright driver and Chromium)."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:  # a renderer that just exited
            continue
        total += times.user + times.system
    return total


class BrowserPage:
    """One headless Chromium page on the app, opened once and settled before any run is timed, so a run pays
    for streaming and drawing, not for starting the browser or loading the page."""

    def __init__(self, url: str, run: RunConfig, prompt: str, chromium: str, race: bool = False):
        from playwright.sync_api import sync_playwright

        self.busy: list[float] = []  # the browser's CPU seconds per second of each timed run
        self.baseline: list[float | None] = []  # the page's baseline tokens/s of each run (with race)
        self._p = sync_playwright().start()
        self.browser = self._p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        self.page = self.browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.set_default_timeout(600_000)
        self.page.goto(url, wait_until="domcontentloaded")
        self.page.wait_for_selector("#generate-btn")
        self.page.locator("#prompt-box textarea").fill(prompt)
        box = self.page.locator("#max-new input[type=number]")
        box.fill(str(run.max_new_tokens))
        box.press("Enter")
        race_box = self.page.locator("#race-box input")
        race_box.check() if race else race_box.uncheck()
        self.page.locator("#ignore-eos-box input").check()
        self.page.wait_for_timeout(2000)  # (a Gradio page never reaches "networkidle": it keeps a stream open)

    def generate(self) -> tuple[float, float]:
        """(engine tokens/s, end-to-end tokens/s); timing from the click to the final stats strip."""
        page = self.page
        page.evaluate("document.querySelector('#eagle-stats .eagle-stats').setAttribute('data-old', '')")
        cpu0 = browser_cpu_seconds()
        t0 = time.perf_counter()
        page.click("#generate-btn")
        page.wait_for_selector('#eagle-stats .eagle-stats[data-state="done"]:not([data-old])')
        wall = time.perf_counter() - t0
        self.busy.append((browser_cpu_seconds() - cpu0) / wall)
        text = page.locator("#eagle-stats").inner_text()
        page.wait_for_timeout(500)  # the page settles (last chart drawn) before the next timed run
        numbers = dict(re.findall(r"(EAGLE tok/s|baseline tok/s|new tokens)\s*\n?\s*([\d.]+)", text, flags=re.I))
        numbers = {k.lower(): float(v) for k, v in numbers.items()}
        self.baseline.append(numbers.get("baseline tok/s"))
        return numbers["eagle tok/s"], numbers["new tokens"] / wall

    def close(self) -> None:
        self.browser.close()
        self._p.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default=SHIPPED_TARGET)
    ap.add_argument("--draft", default=SHIPPED_EAGLE1)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--browser", action="store_true", help="render in headless Chromium instead of gradio_client")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--race", action="store_true", help="with --browser: race plain decoding after EAGLE both ways")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--update-seconds", type=float, default=None, help=f"redraw interval (app: {ui.UPDATE_SECONDS})")
    ap.add_argument("--chart-seconds", type=float, default=None,
                    help=f"chart redraw interval (app: {ui.CHART_SECONDS})")
    ap.add_argument("--switch-seconds", type=float, default=None,
                    help="sys.setswitchinterval for the whole process (default: Python's 5 ms)")
    args = ap.parse_args()
    for name, value in (("UPDATE_SECONDS", args.update_seconds), ("CHART_SECONDS", args.chart_seconds)):
        if value is not None:
            setattr(ui, name, value)
    if args.switch_seconds is not None:
        sys.setswitchinterval(args.switch_seconds)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if not Path(args.target).exists() and args.target == SHIPPED_TARGET:
        print(f"{args.target} does not exist yet; pass --target and --draft", file=sys.stderr)
        return 2

    key = make_key(args.target, args.draft, "", "auto", "auto", "")
    session = REGISTRY.load(key)  # the app finds this same loaded model
    run = RunConfig(max_new_tokens=args.max_new_tokens, ignore_eos=True, tree=TREE_PRESETS["cpu"],
                    sampling=SamplingConfig())
    ids = session.encode(args.prompt)
    session.check_length(ids, run)
    demo = build_app(key.target, key.draft)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **launch_options())
    url = f"http://127.0.0.1:{port}/"
    if args.race and not args.browser:
        print("--race needs --browser", file=sys.stderr)
        return 2
    if args.race:  # the page runs the pair's automatic tree (its "auto" preset, gate included): so does headless
        from eagle_demo.autotree.choose import auto_tree

        run = auto_tree(session).run_config(run)
    page = BrowserPage(url, run, args.prompt, args.chromium, args.race) if args.browser else None
    try:
        headless(session, ids, RunConfig(max_new_tokens=16, ignore_eos=True, tree=run.tree))  # warm up
        head, streamed, updates = [], [], []
        for i in range(args.repeats):
            order = ("headless", "ui") if i % 2 == 0 else ("ui", "headless")
            for way in order:
                if way == "headless" and args.race:
                    head.append(headless_race(session, ids, run))
                elif way == "headless":
                    head.append(headless(session, ids, run))
                elif args.browser:
                    streamed.append(page.generate())
                else:
                    engine, e2e, n = through_client(url, key.target, key.draft, args.prompt, run)
                    streamed.append((engine, e2e))
                    updates.append(n)
        busy = statistics.median(page.busy) if page is not None else None
    finally:
        if page is not None:
            page.close()
        demo.close()

    def med(rows, i):
        return statistics.median(r[i] for r in rows)

    how = "headless Chromium" if args.browser else "gradio_client"
    print(f"pair: {key.label()}  tree: {run.tree.label()}  new tokens: {args.max_new_tokens}  repeats: {args.repeats}")
    print(f"redraws every {ui.UPDATE_SECONDS} s, charts every {ui.CHART_SECONDS} s, "
          f"GIL switch interval {sys.getswitchinterval() * 1000:g} ms")
    print(f"UI read by {how}" + (f", {statistics.median(updates):.0f} streamed updates per run" if updates else ""))
    if busy is not None:
        print(f"the browser kept {busy:.2f} of a core busy while a run streamed (median; per repeat: "
              f"{', '.join(f'{b:.2f}' for b in page.busy)})")
    if args.race:  # head: (EAGLE, baseline) tokens/s; the page: EAGLE's, and its baseline's in page.baseline
        pairs = [(h[0] / h[1], u[0] / b, b / h[1]) for h, u, b in zip(head, streamed, page.baseline)]
        print("per repeat (headless speedup, page speedup, page baseline / headless baseline): "
              + "; ".join(f"{a:.2f}x, {b:.2f}x, {c:.2f}" for a, b, c in pairs))
        print(f"median speedup: headless {statistics.median(p[0] for p in pairs):.2f}x, "
              f"page {statistics.median(p[1] for p in pairs):.2f}x; median baseline ratio "
              f"{statistics.median(p[2] for p in pairs):.2f}")
        return 0
    ratios = [u[0] / h[0] for h, u in zip(head, streamed)]  # each repeat's pair ran back to back
    print(f"engine tokens/s ratio per repeat: {', '.join(f'{r:.2f}' for r in ratios)} "
          f"(median {statistics.median(ratios):.2f})")
    print(f"{'':<22}{'headless':>10}{'through UI':>12}{'ratio':>8}")
    for label, i in (("engine tokens/s", 0), ("end-to-end tokens/s", 1)):
        h, u = med(head, i), med(streamed, i)
        print(f"{label:<22}{h:>10.1f}{u:>12.1f}{u / h:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
