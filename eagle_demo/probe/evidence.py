"""The probe's evidence rule (`probe`), and its line in the pair's report: is an alternative reading of a
draft's conventions really better than the declared one, or is the difference noise?

Every reading runs greedy on the same prompts, so (lossless) on the same text, and the comparison is paired: the
text is cut into blocks of BLOCK new tokens, and each block's rounds under the declared reading minus its rounds
under the alternative is one sample. An alternative is adoptable when it commits at least MARGIN more tokens per
round (gain = declared rounds / its rounds - 1, the text being the same) and the mean saving stands Z standard
errors clear of zero over at least MIN_BLOCKS blocks, or when its gain is GROSS or more on any text (a misreading
that gross shows on the first stage's 6 blocks and needs no more evidence). One-sided, Z = 2.5 passes by chance
about 0.6% of the time
per alternative when nothing differs (tests/test_probe_moderate.py draws it: under 1%).
"""

from __future__ import annotations

import dataclasses

from ..checkpoints.report import AdaptationReport

__all__ = ["MARGIN", "Z", "MIN_BLOCKS", "GROSS", "BLOCK", "STAGES", "compare", "adoptable", "tau_of", "report_with"]

MARGIN = 0.05  # an alternative must commit at least 5% more tokens per round than the declared reading ...
Z = 2.5  # ... by this many standard errors of the paired block difference (one-sided: about 0.6% by chance) ...
MIN_BLOCKS = 20  # ... over at least this many blocks,
GROSS = 0.5  # ... or, on any text, a gain of at least 50%: a misreading that gross needs no more evidence
BLOCK = 16  # new tokens per block of the paired comparison
STAGES = ((3, 32), (7, 64), (7, 160))  # (prompts, new tokens): all readings at the first, contenders after


def compare(base: list[list[int]], alt: list[list[int]], stage: tuple[int, int]) -> dict:
    """The paired evidence that `alt` beats `base` on the same text: each lists, per prompt, its rounds' first new
    token positions. Per block of BLOCK tokens, the rounds saved (base's minus alt's); gain = base rounds / alt
    rounds - 1 (the same tokens, fewer rounds); z = the mean saving over its standard error."""
    saved = []
    for b, a in zip(base, alt):
        blocks = max(max(b, default=0), max(a, default=0)) // BLOCK + 1
        saved += [x - y for x, y in zip(_per_block(b, blocks), _per_block(a, blocks))]
    rounds_b, rounds_a = sum(map(len, base)), sum(map(len, alt))
    n = len(saved)
    mean = sum(saved) / n if n else 0.0
    sd = (sum((x - mean) ** 2 for x in saved) / (n - 1)) ** 0.5 if n > 1 else 0.0
    z = mean / (sd / n ** 0.5) if sd > 0 else (float("inf") if mean > 0 else 0.0)
    return {"tau": round(tau_of(alt, stage[1]), 4), "declared_tau": round(tau_of(base, stage[1]), 4),
            "gain": round(rounds_b / rounds_a - 1, 4) if rounds_a else 0.0, "z": round(min(z, 99.0), 2),
            "blocks": n, "prompts": len(base), "tokens": stage[1]}


def _per_block(starts: list[int], blocks: int) -> list[int]:
    """How many of `starts` fall in each of `blocks` blocks of BLOCK tokens."""
    return [sum(1 for s in starts if s // BLOCK == k) for k in range(blocks)]


def adoptable(evidence: dict) -> bool:
    """The rule: past the margin, clear of the noise, on enough text (a gross gain: on the first stage's text)."""
    enough = evidence["blocks"] >= MIN_BLOCKS or evidence["gain"] >= GROSS
    return evidence["gain"] >= MARGIN and evidence["z"] >= Z and enough


def tau_of(rounds: list[list[int]], tokens: int) -> float:
    """Tokens per round of runs of `tokens` new tokens each (EOS ignored): the rounds commit all but the prefill's."""
    count = sum(map(len, rounds))
    return len(rounds) * (tokens - 1) / count if count else 0.0


def report_with(report: AdaptationReport, probe: dict, switched: bool, tau_declared: float) -> AdaptationReport:
    """The report with the probe's block and its one line (what was declared, measured, used; every alternative's
    tau; an alternative better but not adopted, with its evidence)."""
    used, declared, loaded = probe["used"], probe["declared"], probe["loaded"]
    changed = {k: v for k, v in used.items() if declared.get(k) != v}
    shown = {k: v for k, v in loaded.items() if declared.get(k) != v}  # what weight-first loading read instead
    said = f" (as the config states; the weights showed {_fmt(shown)}, loaded so)" if shown else ""
    if switched:
        won = next(a["evidence"] for a in probe["alternatives"] if a["conventions"] == used)
        line = (f"probe: declared {_fmt(declared)}{said} measured tau {tau_declared:.2f}; "
                f"{_fmt(changed)} measured tau {probe['tau']:.2f} ({_evidence(won)}), using it"
                + (", as the weights showed" if shown and used == loaded else ""))
    elif shown and used == loaded:
        line = (f"probe: declared {_fmt(declared)} measured tau {tau_declared:.2f}; kept the reading the weights "
                f"showed, {_fmt(shown)}, measured tau {probe['tau']:.2f}")
    elif probe["alternatives"]:
        line = (f"probe: declared conventions{said} measured tau {tau_declared:.2f}; kept "
                f"({len(probe['alternatives'])} alternatives measured, none clearly better)")
    else:
        line = (f"probe: declared conventions{said} measured tau {tau_declared:.2f}; kept (the checkpoint leaves "
                "no alternative open)")
    if probe["alternatives"]:
        line += "; every alternative: " + "; ".join(
            f"{_fmt(_changes(a['conventions'], declared))} tau {a['tau']:.2f}" for a in probe["alternatives"])
    for a in probe["not_adopted"]:
        line += (f"; {_fmt(_changes(a['conventions'], declared))} is better but not adopted "
                 f"({_evidence(a['evidence'])}; the rule needs +{MARGIN:.0%} at z >= {Z:g} over >= {MIN_BLOCKS} "
                 f"blocks of {BLOCK} tokens)")
    updates: dict = {"probe": probe, "adaptations": report.adaptations + (line,)}
    if "feature_layers" in changed:
        fl = used["feature_layers"]
        updates["feature_layers"] = tuple(fl) if fl is not None else None
        updates["feature_convention"] = "probe: " + ("post-norm last hidden state (EAGLE-1 loop)" if fl is None
                                                     else f"measured best, hidden_states {fl}")
    if "rope_theta" in changed:
        updates["rope_theta"] = used["rope_theta"]
    if "norm_before_residual" in changed:
        updates["norm_before_residual"] = used["norm_before_residual"]
    return dataclasses.replace(report, **updates)


def _changes(conv: dict, declared: dict) -> dict:
    return {k: v for k, v in conv.items() if declared.get(k) != v}


def _evidence(e: dict) -> str:
    """"+12% tokens per round, z 4.1 over 28 blocks (7 prompts x 64 tokens)"."""
    where = f", half of them after {e['context']} tokens of other text" if e.get("context") else ""
    return (f"{e['gain']:+.0%} tokens per round, z {e['z']:.1f} over {e['blocks']} blocks "
            f"({e['prompts']} prompts x {e['tokens']} tokens{where})")


def _fmt(conv: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in conv.items()) or "(none)"
