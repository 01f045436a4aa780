"""Pre-flight probe: measure a loaded pair's acceptance with the conventions its draft declares, and with the
alternatives a checkpoint leaves open; switch to an alternative only when it clearly wins.

Silent misconfigurations give valid but slow runs (every output stays the target's): aux layer ids read
with the wrong convention (vLLM #50170, SGLang #25454), d2t read as offsets vs absolute ids, a draft
rope_theta other than the one it was trained with (vllm-ascend #6612), norm_before_residual, and an
EAGLE-3 draft run by an EAGLE-1 loop (the last hidden state fed unfused; SGLang #21272, tau exactly 1).

    pair = probe_pair(load_pair(target, draft))   # report.probe: {"tau", "used", "declared", "loaded", "alternatives"}

Each measurement is greedy decoding with a 5-token chain; every reading runs on the same prompts, so (lossless)
on the same text, and the comparison is paired: the text is cut into blocks of BLOCK new tokens, and each
block's rounds under the declared reading minus its rounds under the alternative is one sample. The rule:
an alternative is adopted when it commits at least MARGIN more tokens per round than the declared reading
(gain = declared rounds / its rounds - 1, the text being the same) and that gain stands Z standard errors of the
paired difference clear of zero over at least MIN_BLOCKS blocks (a gain of GROSS, 50%, at once). The first
stage (3 prompts x 32 tokens) measures every alternative; an alternative past the margin there but not yet
clear of the noise is measured again with the declared reading on more text (STAGES), and one that stays
unclear is reported as better but not adopted. Only drafting changes, so the output is the target's either way.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Callable

import torch

from ..checkpoints import LoadedPair, load_pair
from ..checkpoints.detect import DraftSpec, detect_draft
from ..checkpoints.report import AdaptationReport
from ..checkpoints.variants import declared_family
from ..common.config import RunConfig, TreeConfig
from ..common.paths import SUITE
from ..decoding.engine import SpeculativeEngine
from ..decoding.events import Round
from ..drafts.eagle3x import Unfused
from . import evidence as _rule
from .evidence import BLOCK, MARGIN, MIN_BLOCKS, STAGES, Z, adoptable, compare, tau_of
from .evidence import report_with as _report

__all__ = ["probe_pair", "probe_report", "adopt_probe", "declared_family", "MARGIN", "Z", "BLOCK", "MIN_BLOCKS",
           "STAGES", "NEAR", "LONG_POSITIONS", "compare", "adoptable"]


LONG_POSITIONS = 512  # where a rope_theta reading is measured: its prompts start this many tokens into the context
NEAR = 0.05  # alternatives within this fraction of the best tau count as tied (the probe measures a few
# prompts, so a few percent is noise): the first listed, i.e. the likeliest reading, wins
MAX_PROMPTS, MAX_TOKENS = 3, 32


def probe_report(target: str, draft: str, revision: str | None = None, draft_revision: str | None = None,
                 dtype: str = "auto", device: str = "auto") -> AdaptationReport:
    """Load the pair, probe it, return its report (the CLI's `inspect --probe`). Raises CheckpointError."""
    return probe_pair(load_pair(target, draft, revision=revision, draft_revision=draft_revision, dtype=dtype,
                                device=device)).report


def probe_pair(pair: LoadedPair, prompts: list[list[int]] | None = None, max_new_tokens: int = MAX_TOKENS,
               progress: Callable[[str, float], None] | None = None) -> LoadedPair:
    """The same pair with `report.probe` filled (and the winning alternative applied to its head, in place).

    prompts: the first stage's (default: the suite's first prompt of each category, 3 of them); later stages take
    up to their count of them. progress: called with (stage, fraction done) before each measurement."""
    head = pair.head
    if head is None:
        return pair
    spec = detect_draft(Path(pair.draft_path))
    pool = prompts or _default_prompts(pair, max(n for n, _ in STAGES))
    stored_d2t = _stored_d2t(spec, head)
    declared = _declared(pair, spec, head, stored_d2t)
    loaded = _conventions(head, stored_d2t)
    alternatives = _alternatives(pair, spec, head, declared, stored_d2t)
    original = _snapshot(head)
    say = progress or (lambda stage, fraction: None)
    stages = ((MAX_PROMPTS, max_new_tokens),) + tuple(s for s in STAGES[1:] if s[1] > max_new_tokens)

    # a rope_theta reading barely shows a few dozen positions in (the slow pairs have not turned yet): those
    # readings are measured on the prompts as they are and again placed after LONG_POSITIONS tokens of other text,
    # and judged on both together (one test, so the rule's chance of a false adoption stays what it was)
    far = {i for i, c in enumerate(alternatives) if c.get("rope_theta") != declared.get("rope_theta")}
    pools = {False: pool, True: _far_prompts(pair, pool, max(n for n, _ in stages), stages[-1][1]) if far else pool}
    context = len(pools[True][0]) - len(pool[0]) if far else 0

    def measure(conv: dict, what: str, stage: int, done: float, long: bool = False) -> list[list[int]]:
        n, tokens = stages[stage]
        where = f" after {context} tokens of other text" if long else ""
        say(f"probe: measuring tau with {what} ({min(n, len(pool))} prompts x {tokens} tokens{where})", done)
        return _rounds(pair, head, original, conv, stored_d2t, pools[long][:n], tokens)

    def judged(i: int, declared_rounds: tuple, rounds: tuple, stage: int) -> dict:
        """compare() on the prompts as they are, and for a rope_theta reading on the far ones too."""
        if i not in far:
            return compare(declared_rounds[0], rounds[0], stages[stage])
        return compare(declared_rounds[0] + declared_rounds[1], rounds[0] + rounds[1], stages[stage]) | {
            "context": context}

    def both(conv: dict, what: str, stage: int, done: float, long: bool) -> tuple:
        return (measure(conv, what, stage, done), measure(conv, what, stage, done, True) if long else [])

    base = both(declared, "the declared conventions", 0, 0.0, bool(far))
    first = [both(c, f"alternative {i} of {len(alternatives)}", 0, i / (len(alternatives) + 2), i - 1 in far)
             for i, c in enumerate(alternatives, 1)]
    tau_declared = tau_of(base[0], stages[0][1])
    evidence = [judged(i, base, r, 0) for i, r in enumerate(first)]
    for stage in range(1, len(stages)):  # contenders past the margin but not clear of the noise: more text
        open_ = [i for i, e in enumerate(evidence) if e["gain"] >= _rule.MARGIN and not adoptable(e)]
        if not open_ or any(adoptable(e) for e in evidence):
            break
        more = both(declared, "the declared conventions again", stage, 0.8, any(i in far for i in open_))
        for i in open_:
            evidence[i] = judged(i, more, both(alternatives[i], f"alternative {i + 1} again", stage, 0.9, i in far),
                                 stage)
    results = [{"conventions": conv, "tau": round(tau_of(r[0], stages[0][1]), 4), "evidence": e}
               for conv, r, e in zip(alternatives, first, evidence)]
    winners = [r for r in results if adoptable(r["evidence"])]
    top = max((r["evidence"]["tau"] for r in winners), default=None)
    # a near tie goes to the likelier reading (listed first: the default feature rule before its -1 variant),
    # not to the noise between two readings of adjacent, nearly equal hidden states
    best = next((r for r in winners if r["evidence"]["tau"] >= (1 - NEAR) * top), None) if winners else None
    switch = best is not None
    # without a switch, a reading that weight-first loading chose over the config stays when it measured no worse
    as_loaded = [r for r in results if r["conventions"] == loaded != declared and r["tau"] >= tau_declared]
    kept = best if switch else (as_loaded[0] if as_loaded else None)
    used = kept["conventions"] if kept else declared
    _restore(head, original)
    _apply(head, original, used, stored_d2t)
    tau_used = kept["tau"] if kept else tau_declared
    probe = {"tau": round(tau_used, 4), "used": used, "declared": declared, "declared_tau": round(tau_declared, 4),
             "alternatives": results, "prompts": min(MAX_PROMPTS, len(pool)), "max_new_tokens": max_new_tokens,
             "loaded": loaded, "rule": {"margin": _rule.MARGIN, "z": _rule.Z, "min_blocks": MIN_BLOCKS,
             "block": BLOCK}, "far_context": context,
             "not_adopted": [r for r in results if r["evidence"]["gain"] >= _rule.MARGIN
                             and not adoptable(r["evidence"])]}
    say("probe: done", 1.0)
    return dataclasses.replace(pair, report=_report(pair.report, probe, switch, tau_declared))


def adopt_probe(pair: LoadedPair, report: AdaptationReport) -> LoadedPair:
    """The pair with `report` (whose `probe` was measured on another copy of this pair) and the conventions that
    probe kept applied to its head, in place, without measuring. The head must be as loaded."""
    head = pair.head
    if head is None or report.probe is None:
        return dataclasses.replace(pair, report=report)
    stored_d2t = _stored_d2t(detect_draft(Path(pair.draft_path)), head)
    _apply(head, _snapshot(head), report.probe["used"], stored_d2t)
    return dataclasses.replace(pair, report=report)


# ---- conventions -------------------------------------------------------------------------------------

def _declared(pair: LoadedPair, spec: DraftSpec, head, stored_d2t: torch.Tensor | None) -> dict:
    """What the config states. An EAGLE-3 draft whose config says EAGLE-1 is loaded fused (weights first), but
    its config declares an EAGLE-1 loop: the unfused last state (SGLang #21272)."""
    return _conventions(head, stored_d2t, eagle1_loop=declared_family(spec.config) == "eagle1")


def _conventions(head, stored_d2t: torch.Tensor | None, eagle1_loop: bool = False) -> dict:
    """The conventions the head runs with as loaded (with `eagle1_loop`: fed as an EAGLE-1 loop would)."""
    conv: dict = {}
    if head.family == "eagle3":
        unfused = isinstance(head.fc, Unfused) or eagle1_loop
        conv["feature_layers"] = None if unfused else list(head.feature_layers)
        if stored_d2t is not None:
            conv["d2t"] = "offsets" if torch.equal(head.d2t.cpu(), stored_d2t) else "absolute"
        conv["norm_before_residual"] = bool(head.midlayer.norm_before_residual)
    if head.family in ("eagle1", "eagle3"):
        conv["rope_theta"] = float(head.rotary_emb.config.rope_parameters["rope_theta"])
    return conv


def _alternatives(pair: LoadedPair, spec: DraftSpec, head, declared: dict, stored_d2t) -> list[dict]:
    out: list[dict] = []

    def add(**change) -> None:
        conv = dict(declared, **change)
        if conv != declared and conv not in out:
            out.append(conv)

    fused = _fused_fc(head)
    if fused is not None:
        layers = pair.report.target_layers
        rules = [(2, layers // 2, layers - 3), (1, layers // 2 - 1, layers - 4)]  # vLLM default; its ids taken -1
        if spec.feature_ids:
            rules += [tuple(spec.feature_ids), tuple(i + 1 for i in spec.feature_ids)]
        for ids in rules:
            if len(ids) * pair.report.target_hidden == fused.in_features and all(0 <= i <= layers for i in ids):
                add(feature_layers=list(ids))
    if head.family == "eagle3":
        if stored_d2t is not None:
            other = "absolute" if declared["d2t"] == "offsets" else "offsets"
            if _valid_reading(stored_d2t, pair.report.target_vocab, other):
                add(d2t=other)
        add(norm_before_residual=not declared["norm_before_residual"])
    target_theta = _target_theta(pair)
    if "rope_theta" in declared and target_theta is not None and target_theta != declared["rope_theta"]:
        add(rope_theta=target_theta)
    return out


def _fused_fc(head):
    """The head's fusion layer: its fc, or the fc weights an unfused draft kept aside; None otherwise."""
    if head.family != "eagle3":
        return None
    return getattr(head, "spare_fc", None) if isinstance(head.fc, Unfused) else head.fc


def _valid_reading(stored: torch.Tensor, vocab: int, reading: str) -> bool:
    """Whether `stored` d2t values give in-vocabulary, distinct target ids when read this way."""
    ids = stored if reading == "absolute" else stored + torch.arange(stored.shape[0])
    return bool((ids >= 0).all() and (ids < vocab).all() and (ids[1:] > ids[:-1]).all())


def _target_theta(pair: LoadedPair) -> float | None:
    text = pair.target.config.get_text_config()
    params = getattr(text, "rope_parameters", None) or {}
    theta = params.get("rope_theta", getattr(text, "rope_theta", None)) if isinstance(params, dict) else None
    return float(theta) if theta is not None else None


def _stored_d2t(spec: DraftSpec, head) -> torch.Tensor | None:
    if head.family != "eagle3" or "d2t" not in spec.names or spec.weights is None:
        return None
    stored = spec.weights.load([spec.names["d2t"]])[spec.names["d2t"]].long().flatten()
    return stored if stored.shape == head.d2t.shape else None


# ---- applying conventions to a head --------------------------------------------------------------------

def _snapshot(head) -> dict:
    snap = {"feature_layers": head.feature_layers, "fc": head.fc, "rotary_emb": head.rotary_emb}
    for name in ("fc_norm", "input_norm"):
        snap[name] = getattr(head, name, None)
    if head.family == "eagle3":
        snap["d2t"] = head.d2t.clone()
        snap["nbr"] = head.midlayer.norm_before_residual
    return snap


def _restore(head, snap: dict) -> None:
    head.feature_layers, head.fc, head.rotary_emb = snap["feature_layers"], snap["fc"], snap["rotary_emb"]
    for name in ("fc_norm", "input_norm"):
        if hasattr(head, name):
            setattr(head, name, snap[name])
    if "d2t" in snap:
        head.d2t.copy_(snap["d2t"])
        head.midlayer.norm_before_residual = snap["nbr"]


def _apply(head, snap: dict, conv: dict, stored_d2t: torch.Tensor | None) -> None:
    """Set `conv` on a head that is in its loaded state `snap`."""
    device, dtype = snap["fc"].weight.device, snap["fc"].weight.dtype
    if "feature_layers" in conv:
        if conv["feature_layers"] is None and not isinstance(head.fc, Unfused):  # an EAGLE-1 loop: no fusion
            head.fc = Unfused().to(device=device, dtype=dtype)
            for name in ("fc_norm", "input_norm"):
                if hasattr(head, name):
                    setattr(head, name, None)
            head.feature_layers = None
        elif conv["feature_layers"] is not None:
            if isinstance(head.fc, Unfused) and getattr(head, "spare_fc", None) is not None:
                head.fc = head.spare_fc  # the fused reading of a draft declared unfused
            head.feature_layers = tuple(conv["feature_layers"])
    if stored_d2t is not None and "d2t" in conv:
        vd = stored_d2t.shape[0]
        offsets = stored_d2t if conv["d2t"] == "offsets" else stored_d2t - torch.arange(vd)
        head.d2t.copy_(offsets.to(head.d2t.device))
    if "norm_before_residual" in conv:
        head.midlayer.norm_before_residual = conv["norm_before_residual"]
    if "rope_theta" in conv and conv["rope_theta"] != snap["rotary_emb"].config.rope_parameters["rope_theta"]:
        config = copy.deepcopy(snap["rotary_emb"].config)
        config.rope_parameters = dict(config.rope_parameters, rope_theta=conv["rope_theta"])
        head.rotary_emb = type(snap["rotary_emb"])(config=config).to(device)


@torch.inference_mode()
def _rounds(pair: LoadedPair, head, snap: dict, conv: dict, stored_d2t, prompts: list[list[int]],
            tokens: int) -> list[list[int]]:
    """Per prompt, the position among the new tokens of each round's first committed token (the prefill's is 0)."""
    _restore(head, snap)
    _apply(head, snap, conv, stored_d2t)
    engine = SpeculativeEngine(pair.target, head)
    run = RunConfig(max_new_tokens=tokens, ignore_eos=True, tree=TreeConfig.chain(5))
    out = []
    for ids in prompts:
        out.append([ev.total_new_tokens - len(ev.committed_ids) for ev in engine.generate(ids, run)
                    if isinstance(ev, Round)])
    _restore(head, snap)
    return out


# ---- prompts and report ---------------------------------------------------------------------------------

def _far_prompts(pair: LoadedPair, pool: list[list[int]], count: int, tokens: int) -> list[list[int]]:
    """The first `count` prompts of `pool`, each after the same LONG_POSITIONS tokens of other text (the shipped
    suite's other prompts, or fixed ids), so that the new tokens sit where a positional misreading shows; cut to
    leave room for `tokens` new tokens and a draft chain within the target's and the draft's contexts."""
    limits = [pair.report.max_position_embeddings or 0, _context(pair)]
    room = min([n for n in limits if n] or [LONG_POSITIONS * 4]) - tokens - 16 - max(map(len, pool[:count]))
    length = max(0, min(LONG_POSITIONS, room))
    filler: list[int] = []
    if pair.tokenizer is not None and SUITE.is_file():
        texts = [json.loads(line)["prompt"] for line in SUITE.read_text(encoding="utf-8").splitlines() if line.strip()]
        filler = list(pair.tokenizer("\n\n".join(reversed(texts)))["input_ids"])
    if len(filler) < length:
        vocab = pair.report.target_vocab
        filler += [(11 * i + 5) % vocab for i in range(length - len(filler))]
    return [filler[:length] + p for p in pool[:count]]


def _context(pair: LoadedPair) -> int:
    return int(getattr(pair.target.config.get_text_config(), "max_position_embeddings", 0) or 0)


def _default_prompts(pair: LoadedPair, count: int = MAX_PROMPTS) -> list[list[int]]:
    """The first prompt of each of the shipped suite's first `count` categories, or fixed token ids."""
    if pair.tokenizer is not None and SUITE.is_file():
        seen: dict[str, str] = {}
        for line in SUITE.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                seen.setdefault(row["category"], row["prompt"])
        texts = list(seen.values())[:count]
        ids = [pair.tokenizer(t)["input_ids"] for t in texts]
        if all(ids):
            return ids
    vocab = pair.report.target_vocab
    return [[(7 * i + 3 * p + 1) % vocab for i in range(12)] for p in range(count)]
