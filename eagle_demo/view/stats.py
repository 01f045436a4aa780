"""A run's numbers: the JSON-ready summary (the `/generate` API's stats) and the page's stats strip."""

from __future__ import annotations

from ..decoding.gate import paused_line
from ..decoding.metrics import RunView
from ..race.racers import race_all, racers_dict
from ..race.speedup import race, verdict
from ..target.rope_limit import rope_line
from .tokens import escape

__all__ = ["summary", "run_race", "stats_html", "race_block"]


def run_race(eagle: RunView, baseline: RunView | None, greedy: bool):
    """`race.speedup.race` of the two views (the baseline counts once it has finished)."""
    base = baseline.stats() if baseline is not None and baseline.done else None
    return race(eagle.stats(), base, greedy, eagle.start.dtype if eagle.start else "")


def race_block(eagle: RunView, baseline: RunView | None, greedy: bool, ngram: RunView | None = None,
               decode=None) -> dict:
    """The racers' side of the stats: "divergence" (where EAGLE's output first differs from the baseline's, and
    why; None when it does not or was not checked) and, when the n-gram draft raced, "race" (each racer's figures,
    `race.racers.racers_dict`)."""
    runs = {"eagle": eagle.events, **({"ngram": ngram.events} if ngram is not None and ngram.done else {})}
    if baseline is not None and baseline.done and eagle.done:
        runs["baseline"] = baseline.events
    racers = race_all(runs, greedy) if eagle.done else []
    out = {"divergence": racers[0].divergence.to_dict(decode) if racers and racers[0].divergence else None}
    if ngram is not None:
        out["race"] = racers_dict(racers, decode)
    return out


def summary(eagle: RunView, baseline: RunView | None, greedy: bool, text: str = "", auto=None,
            ngram: RunView | None = None, decode=None) -> dict:
    """JSON-ready numbers of a run (the `generate` API's stats and the stats strip). auto: the
    `autotree.AutoChoice` the run's tree came from; it adds the "auto" block (tree and predicted figures). ngram:
    the n-gram racer's run, if it raced; decode: token ids -> text, for the divergence's tokens."""
    e, start = eagle.stats(), eagle.start
    return {
        "text": text, "token_ids": list(eagle.token_ids), "prompt_tokens": start.prompt_tokens if start else 0,
        "new_tokens": len(eagle.token_ids), "rounds": e.rounds, "plain_rounds": e.plain_rounds,
        "rope_rounds": e.rope_rounds, "tau": e.tau,
        "drafting_tau": e.drafting_tau, "tokens_per_second": e.tokens_per_second,
        **run_race(eagle, baseline, greedy).to_dict(),
        "acceptance_by_depth": list(e.acceptance_by_depth), "prefill_seconds": e.prefill_seconds,
        "decode_seconds": e.decode_seconds, "draft_seconds": e.draft_seconds, "verify_seconds": e.verify_seconds,
        "host_seconds": e.host_seconds, "finish_reason": e.finish_reason, "tree": start.tree if start else "",
        "draft_family": start.draft_family if start else "", "device": start.device if start else "",
        "dtype": start.dtype if start else "", **({"auto": auto.to_dict()} if auto is not None else {}),
        "retuned": [list(x) for x in eagle.finish.extra.get("retuned", ())] if eagle.finish is not None else [],
        **race_block(eagle, baseline, greedy, ngram, decode),
    }


def stats_html(eagle: RunView | None, baseline: RunView | None, greedy: bool, state: str,
               note: str = "", auto=None, ngram: RunView | None = None, decode=None) -> str:
    """The stats strip. state: idle | starting | running | baseline | done | stopped | failed (kept in
    data-state). auto: the `autotree.AutoChoice` of the run's tree, shown with its predicted speedup next to the
    measured one."""
    cells: list[tuple[str, str, str]] = []  # (label, value, extra class)
    if eagle is not None and eagle.prefill is not None:
        s = summary(eagle, baseline, greedy, ngram=ngram, decode=decode)
        ran = s["rounds"] > 0  # one new token (the prefill's) decodes nothing: no tau, no speed
        cells += [("tau", f"{s['tau']:.2f}" if ran else "-", ""),
                  ("EAGLE tok/s", f"{s['tokens_per_second']:.1f}" if ran else "-", "")]
        base = s["baseline_tokens_per_second"]
        cells.append(("baseline tok/s", "-" if base is None else f"{base:.1f}", ""))
        cells.append(("speedup", "-" if s["speedup"] is None else f"{s['speedup']:.2f}x", ""))
        if s["round_cost"] is not None:
            cells.append(("round cost", f"{s['round_cost']['steps']:.2f} steps", ""))
        if s["plain_rounds"] or s["rope_rounds"]:
            cells += [("plain rounds", f"{s['plain_rounds'] + s['rope_rounds']} of {s['rounds']}", ""),
                      ("tau of drafting rounds", f"{s['drafting_tau']:.2f}", "")]
        cells += [("rounds", str(s["rounds"]), ""), ("new tokens", str(s["new_tokens"]), ""),
                  ("prefill", f"{1000 * s['prefill_seconds']:.0f} ms", "")]
        same = s["identical_to_baseline"]
        if same is not None:
            label = "identical to baseline" if greedy else "same as seeded baseline"
            cells.append((label, verdict(same), "ok" if same else "bad"))
        if s["finish_reason"]:
            cells.append(("finish", s["finish_reason"], ""))
        cells += _ngram_cells(s.get("race", {}).get("ngram"), greedy)
    status = {"idle": "ready", "starting": "starting...", "running": "generating...",
              "baseline": "racing the baseline...", "ngram": "racing the n-gram draft...", "done": "done",
              "stopped": "stopped",
              "failed": "failed (see the message)"}.get(state, state)
    body = "".join(f'<div class="stat {cls}"><span class="stat-label">{escape(label)}</span>'
                   f'<span class="stat-value">{escape(value)}</span></div>' for label, value, cls in cells)
    extra = f'<div class="stat-note">{escape(note)}</div>' if note else ""
    if eagle is not None and eagle.prefill is not None and s["round_cost"] is not None:
        extra += (f'<div class="stat-why" title="speedup = tau / round cost; a round\'s cost is counted in plain '
                  f'decoding steps of the same target">why: {escape(s["round_cost"]["line"])}</div>')
    if eagle is not None and eagle.prefill is not None:
        extra += _divergence_lines(s)
    if eagle is not None and eagle.prefill is not None and s["plain_rounds"] and auto is not None:
        by_length = getattr(auto, "break_even_by_length", tuple)()  # a stopping chain's, by drafted length
        gate = paused_line(s["plain_rounds"], s["rounds"], auto.predicted_round_cost, auto.pays_nothing, by_length)
        extra += f'<div class="stat-gate">{escape(gate)}</div>'
    if eagle is not None and eagle.prefill is not None and s["rope_rounds"]:
        extra += f'<div class="stat-gate">{escape(rope_line(s["rope_rounds"], s["rounds"]))}</div>'
    if auto is not None:
        ran = eagle is not None and eagle.prefill is not None and s["rounds"] > 0
        measured = s["speedup"] if ran else None
        tau = s["drafting_tau"] if ran else None  # the drafting rounds' tau (tau itself when none was plain)
        retuned = s["retuned"] if ran else ()  # the shapes the run moved to (`retune`)
        extra += (f'<div class="stat-auto" title="the automatic tree: predicted = tau / round cost from its '
                  f'calibration on this device">{escape(auto.versus(measured, tau, retuned))}</div>')
    return (f'<div class="eagle-stats" data-state="{escape(state)}"><div class="stat status">'
            f'<span class="stat-label">status</span><span class="stat-value">{escape(status)}</span></div>'
            f"{body}{extra}</div>")


def _ngram_cells(ngram: dict | None, greedy: bool) -> list[tuple[str, str, str]]:
    """The n-gram racer's cells of the strip: its tokens/s, tau and speedup, and its identity with the baseline."""
    if not ngram:
        return []
    cells = [("n-gram tok/s", f"{ngram['tokens_per_second']:.1f}", "ngram"),
             ("n-gram tau", f"{ngram['tau']:.2f}", "ngram"),
             ("n-gram speedup", "-" if ngram["speedup"] is None else f"{ngram['speedup']:.2f}x", "ngram")]
    same = ngram["identical_to_baseline"]
    if same is not None:
        label = "n-gram identical" if greedy else "n-gram same as seeded"
        cells.append((label, verdict(same), "ok" if same else "bad"))
    return cells


def _divergence_lines(s: dict) -> str:
    """One line per racer whose output differs from the baseline's: where and why (`divergence`)."""
    found = [("EAGLE", s.get("divergence"))] + [("n-gram", (s.get("race") or {}).get("ngram", {}).get("divergence"))]
    return "".join(f'<div class="stat-diverge" data-kind="{escape(d["kind"])}" title="the first position where this '
                   f'output differs from plain decoding, and the target\'s top-2 logit gap there in each run">'
                   f'{escape(name)}: {escape(d["line"])}</div>' for name, d in found if d)
