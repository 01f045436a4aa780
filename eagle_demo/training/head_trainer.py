"""Train an EAGLE-3 or EAGLE-1 head for any Llama-family target on its self-distilled conversations.

The frozen target runs on every training window (no gradient, bfloat16 by default) to give what the
engines read at run time: the fused features of layers (2, L//2, L-3) for EAGLE-3 (index L before the
final norm, `target.features.Features`), the post-norm last hidden state for EAGLE-1, and the target's
next-token distribution, the soft label. Computing them on the fly costs one target forward a window and
no disk (2,048 tokens x 3 x 576 features would be 7 MB a window in bf16).

Windows are `window` tokens of whole conversations packed end to end (one longer than a window is cut),
so a head sees positions up to the window and long histories: heads trained on 256-token windows lost two
thirds of their acceptance at 1,536 tokens of context. Only tokens of assistant turns are predicted.

EAGLE-3: cross-entropy over the reduced draft vocabulary (`d2t`), with the training-time-test unroll
(step j at position i reads step j-1's output at i-1 and attends to the step-0 keys up to i-j plus its
own chain, as inside a drafted tree); step j weighted 0.8**j. Step 0 covers the whole window; steps 1..
cover one span of `span` positions at a random place in it (keys: the whole window's step-0 keys plus the
span's chain), which keeps the unroll's attention at a quarter of a full-window unroll's while the deeper
steps still see long histories. EAGLE-1: Smooth-L1 regression of the next
feature plus 0.1 x cross-entropy against the target's distribution, the same unroll.

Checkpoints (head, optimizer, step, data position) are written whole every `save_minutes` and on exit,
so a run stopped from outside resumes where it was.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ..drafts import Eagle1Head, Eagle3Head
from ..target.features import Features
from ..target.runner import tree_attention_mask
from .head_export import export_eagle1, export_eagle3
from .heads import causal_mask, draft_config, feature_layers

__all__ = ["TrainSettings", "pack_windows", "draft_vocab", "span_unroll_mask", "HeadTrainer"]


def span_unroll_mask(n: int, start: int, step: int, dtype) -> torch.Tensor:
    """Additive mask [1, 1, m, n + step*m] for unroll step `step` over query positions start..n-1 (m of them):
    the step-0 keys at positions <= i-step, and the step-s key (s = 1..step) at position i-step+s, the chain
    this query grew from. Keys are ordered as the cache holds them: n step-0 keys, then m keys per step."""
    m = n - start
    rows = torch.arange(start, n)  # [m] query positions
    blocks = [torch.arange(n)[None, :] <= (rows - step)[:, None]]  # [m, n]
    r = torch.arange(m)
    for s in range(1, step + 1):
        col = r - step + s  # [m] index of position i-step+s inside the span
        blocks.append((torch.arange(m)[None, :] == col[:, None]) & (col >= 0)[:, None])
    visible = torch.cat(blocks, 1)  # [m, n + step*m]
    visible[torch.arange(m), n + (step - 1) * m + r] = True  # its own key: every row stays finite
    return tree_attention_mask(0, visible, dtype)


@dataclass(frozen=True)
class TrainSettings:
    head: str  # "eagle3" or "eagle1"
    window: int = 2048
    lr: float = 6e-4
    warmup: int = 50
    total_steps: int = 6000  # the cosine schedule's length; a run may stop earlier (minutes) and resume
    unroll: int = 4
    span: int = 512  # query positions of the unroll's steps 1..unroll-1
    draft_vocab: int = 16384
    ce_weight: float = 0.1  # EAGLE-1's token loss weight (the EAGLE paper's w)
    noise: float = 0.2  # EAGLE-1: uniform noise on the input features, as the paper
    minutes: float = 0.0  # wall-clock budget of this run (0: until total_steps)
    save_minutes: float = 10.0
    seed: int = 4321


def pack_windows(rows: list[dict], window: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ids [T], predict-mask [T]) windows of whole conversations in a seeded order, each at most `window`."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    out, ids, mask = [], [], []
    for i in order:
        r_ids, r_mask = rows[i]["ids"][:window], rows[i]["mask"][:window]
        if ids and sum(len(x) for x in ids) + len(r_ids) > window:
            out.append((torch.cat(ids), torch.cat(mask)))
            ids, mask = [], []
        ids.append(r_ids)
        mask.append(r_mask)
    if ids:
        out.append((torch.cat(ids), torch.cat(mask)))
    return out


def draft_vocab(rows: list[dict], vocab: int, size: int, prior: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """d2t [Vd], t2d [V] over the `size` target tokens most frequent in assistant turns; also their coverage.

    prior: more token ids (the users' turns) counted after the answers, so a token the sampled answers lack
    but the requests use still ranks; remaining ties go to the lower id, which a BPE tokenizer gives its
    earlier, more frequent merges."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for r in rows:
        counts += torch.bincount(r["ids"][r["mask"]], minlength=vocab)
    answers = counts.clone()
    if prior is not None and prior.numel():
        counts = counts * (1 + prior.numel()) + torch.bincount(prior, minlength=vocab)[:vocab]
    rank = sorted(range(vocab), key=lambda t: (-int(counts[t]), t))
    used = torch.tensor(sorted(rank[:size]))  # [Vd] ascending target ids
    coverage = float(answers[used].sum() / answers.sum().clamp_min(1))
    d2t = used - torch.arange(size)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[used] = True
    return d2t, t2d, coverage


class HeadTrainer:
    """One head, its optimizer and its place in the data; `run()` trains until the budget, `save()` checkpoints."""

    def __init__(self, target, rows: list[dict], settings: TrainSettings, out: Path, prior: torch.Tensor | None = None):
        self.target, self.s, self.out = target, settings, Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        tcfg = target.config
        self.layers = feature_layers(tcfg.num_hidden_layers)
        torch.manual_seed(settings.seed)
        if settings.head == "eagle3":
            self.d2t, self.t2d, self.coverage = draft_vocab(rows, tcfg.vocab_size, settings.draft_vocab, prior)
            cfg = draft_config(tcfg, draft_vocab_size=settings.draft_vocab)
            self.head = Eagle3Head(cfg, tcfg.hidden_size, settings.draft_vocab, target.get_input_embeddings(),
                                   self.layers)
            self.head.d2t.copy_(self.d2t)
            self.used = self.d2t + torch.arange(settings.draft_vocab)
        else:
            cfg = draft_config(tcfg, bias=True)
            self.head = Eagle1Head(cfg, target.get_output_embeddings(), target.get_input_embeddings(), fc_bias=True)
            self.t2d, self.coverage = None, 1.0
        self.head.train()
        self.opt = torch.optim.AdamW([p for p in self.head.parameters() if p.requires_grad], lr=settings.lr,
                                     betas=(0.9, 0.95), weight_decay=0.0)
        self.windows = pack_windows(rows, settings.window, settings.seed)
        self.step, self.epoch, self.cursor, self.log = 0, 0, 0, []
        self._resume()

    # -- state -----------------------------------------------------------------------------------
    @property
    def ckpt(self) -> Path:
        return self.out / f"checkpoint-{self.s.head}.pt"

    def _resume(self) -> None:
        if not self.ckpt.is_file():
            return
        state = torch.load(self.ckpt, weights_only=True)
        self.head.load_state_dict(state["head"], strict=False)
        self.opt.load_state_dict(state["opt"])
        self.step, self.epoch, self.cursor = state["step"], state["epoch"], state["cursor"]
        if self.s.head == "eagle3":
            self.d2t, self.t2d = state["d2t"], state["t2d"]
            self.head.d2t.copy_(self.d2t)
            self.used = self.d2t + torch.arange(self.d2t.numel())
        log = self.out / f"log-{self.s.head}.jsonl"
        self.log = [json.loads(x) for x in log.read_text().splitlines()] if log.is_file() else []
        print(f"[train-head] resumed {self.s.head} at step {self.step} (epoch {self.epoch})", flush=True)

    def save(self) -> None:
        state = {"head": {k: v for k, v in self.head.state_dict().items()}, "opt": self.opt.state_dict(),
                 "step": self.step, "epoch": self.epoch, "cursor": self.cursor, "settings": asdict(self.s)}
        if self.s.head == "eagle3":
            state.update(d2t=self.d2t, t2d=self.t2d)
        tmp = self.ckpt.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(self.ckpt)

    def export(self, folder: Path) -> Path:
        self.head.eval()
        if self.s.head == "eagle3":
            export_eagle3(self.head, self.t2d, folder)
        else:
            export_eagle1(self.head, folder, embedding=False)
        self.head.train()
        return folder

    # -- training --------------------------------------------------------------------------------
    def _lr(self) -> float:
        frac = min(1.0, self.step / max(1, self.s.total_steps))
        cosine = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))
        return self.s.lr * min(1.0, (self.step + 1) / self.s.warmup) * cosine

    def _plan(self, n: int) -> tuple[int, list[torch.Tensor]]:
        """The unroll span's first position and the masks of steps 0..unroll-1 for a window of n pairs."""
        m = min(self.s.span, n - self.s.unroll)
        start = random.Random(self.s.seed * 7919 + self.step).randint(self.s.unroll, n - m)
        masks = [causal_mask(n, torch.bfloat16)]
        masks += [span_unroll_mask(n, start, s, torch.bfloat16) for s in range(1, self.s.unroll)]
        return start, masks

    def _unrolled(self, hidden, tokens, n: int, per_step) -> tuple[torch.Tensor, list[float]]:
        """Runs step 0 over the window and steps 1.. over the span; per_step(j, g, rows) -> (loss, valid, hits)."""
        start, masks = self._plan(n)
        cache, loss, acc, from_target = _cache(), 0.0, [], True
        rows = torch.arange(n)
        positions = rows
        for j, mask in enumerate(masks):
            g = self.head(hidden, tokens[:, positions], positions, cache, mask, from_target=from_target)  # [1, m, H]
            part, valid, hits = per_step(j, g, positions)
            loss = loss + (0.8 ** j) * part
            acc.append(hits / max(1, valid))
            if j == 0:  # step 1 at position i reads step 0's output at i-1
                positions = torch.arange(start, n)
                hidden = g[:, start - 1:n - 1]
            else:  # the span's first j rows read a row outside the chain: they are left out (valid below)
                hidden = torch.cat([g[:, :1], g[:, :-1]], 1)
            from_target = from_target and self.s.head == "eagle1"
        return loss, acc

    @torch.no_grad()
    def target_view(self, ids: torch.Tensor) -> dict:
        """What the engines read from the target for one window: features and the next-token logits."""
        with Features(self.target.model, self.layers) as taken:
            out = self.target.model(ids[None], output_hidden_states=True)
        fused = taken.of_batch(out.hidden_states) if self.s.head == "eagle3" else None  # [1, T, 3H]
        last = out.last_hidden_state  # [1, T, H] post-norm
        return {"fused": fused, "last": last, "logits": self.target.lm_head(last)}  # logits [1, T, V]

    def window_loss(self, ids: torch.Tensor, predict: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
        view = self.target_view(ids)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.target.dtype == torch.bfloat16):
            if self.s.head == "eagle3":
                return self._eagle3(ids, predict, view)
            return self._eagle1(ids, predict, view)

    def _eagle3(self, ids, predict, view):
        n = ids.numel() - 2  # pair i = (F_i, x_{i+1}) predicts x_{i+2}: the target's distribution at i+1
        with torch.no_grad():
            logits = view["logits"][0, 1:n + 1].float()  # [n, V]
            inside = self.t2d[logits.argmax(-1)]  # [n] the target's choice is in the draft vocabulary
            p = torch.softmax(logits[..., self.used], -1)  # [n, Vd] renormalised over the draft vocabulary
            label = p.argmax(-1)  # [n]
            usable = inside & predict[2:n + 2]  # [n] assistant tokens only

        def per_step(j, g, positions):
            logq = torch.log_softmax(self.head.draft_logits(g[0]).float(), -1)  # [m, Vd]
            valid = usable[positions] & (positions >= positions[0] + max(0, j - 1))
            ce = -(p[positions] * logq).sum(-1)  # [m]
            hits = ((logq.argmax(-1) == label[positions]) & valid).sum().item()
            return (ce * valid).sum() / valid.sum().clamp_min(1), valid.sum().item(), hits

        return self._unrolled(view["fused"][:, :n], ids[None, 1:], n, per_step)

    def _eagle1(self, ids, predict, view):
        n = ids.numel() - 1  # pair i = (f_i, x_{i+1}); g_i regresses f_{i+1}, whose token is x_{i+2}
        f = view["last"][0].float()  # [T, H]
        with torch.no_grad():
            p = torch.softmax(view["logits"][0, 1:n + 1].float(), -1)  # [n, V] (row n-1: past the window)
            label = p.argmax(-1)
            usable = torch.zeros(n, dtype=torch.bool)
            usable[:n - 1] = predict[2:n + 1]
        hidden = f[None, :n] + (torch.rand_like(f[None, :n]) - 0.5) * self.s.noise

        def per_step(j, g, positions):
            pred = g[0].float()  # [m, H]
            goal = f[(positions + 1).clamp_max(n)]  # [m, H]
            logq = torch.log_softmax(self.head.lm_head(pred.to(self.target.dtype)).float(), -1)  # [m, V]
            token_loss = -(p[positions] * logq).sum(-1)
            per = F.smooth_l1_loss(pred, goal, reduction="none").mean(-1) + self.s.ce_weight * token_loss
            valid = usable[positions] & (positions >= positions[0] + max(0, j - 1))
            hits = ((logq.argmax(-1) == label[positions]) & valid).sum().item()
            return (per * valid).sum() / valid.sum().clamp_min(1), valid.sum().item(), hits

        return self._unrolled(hidden, ids[None, 1:], n, per_step)

    def run(self, progress: bool = True) -> dict:
        t0, last_save = time.time(), time.time()
        bar = tqdm(total=self.s.total_steps, initial=self.step, desc=f"train-head {self.s.head}", disable=not progress)
        try:
            while self.step < self.s.total_steps:
                if self.s.minutes and time.time() - t0 > self.s.minutes * 60:
                    break
                if self.cursor >= len(self.windows):
                    self.cursor, self.epoch = 0, self.epoch + 1
                    random.Random(self.s.seed + self.epoch).shuffle(self.windows)
                ids, predict = self.windows[self.cursor]
                for group in self.opt.param_groups:
                    group["lr"] = self._lr()
                loss, acc = self.window_loss(ids, predict)
                self.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.head.parameters(), 0.5)
                self.opt.step()
                self.step, self.cursor = self.step + 1, self.cursor + 1
                entry = {"step": self.step, "epoch": self.epoch, "loss": round(loss.item(), 5),
                         "top1_by_step": [round(a, 4) for a in acc], "tokens": ids.numel(),
                         "seconds": round(time.time() - t0, 1)}
                self.log.append(entry)
                with open(self.out / f"log-{self.s.head}.jsonl", "a") as fh:
                    fh.write(json.dumps(entry) + "\n")
                bar.update(1)
                bar.set_postfix(loss=f"{loss.item():.3f}", top1="/".join(f"{a:.2f}" for a in acc))
                if time.time() - last_save > self.s.save_minutes * 60:
                    self.save()
                    last_save = time.time()
        finally:
            self.save()
            bar.close()
        recent = self.log[-50:]
        return {"steps": self.step, "epoch": self.epoch, "windows": len(self.windows),
                "recent_top1_by_step": [round(sum(e["top1_by_step"][j] for e in recent) / max(1, len(recent)), 4)
                                        for j in range(self.s.unroll)] if recent else []}


def _cache():
    from transformers import DynamicCache
    return DynamicCache()
