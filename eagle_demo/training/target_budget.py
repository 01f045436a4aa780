"""Train the second-generation target within a wall-clock budget (the GPU path of ``scripts/gpu_pair.py``).

Same model, initialisation and optimizer as :mod:`eagle_demo.training.target2` (24 x 128 Llama,
zero-initialised output projections, AdamW with a 10x embedding learning rate), but sized by time, not
steps, so a run never outlasts the minutes it is given:

* batch size: a few steps at each candidate size are timed (they are real training steps, inside the
  warm-up); the largest batch that still leaves :data:`MIN_STEPS` steps in the budget is kept.
* schedule by elapsed time: linear warm-up over :data:`WARMUP_STEPS` steps, the peak rate until
  ``decay_frac`` of the budget, then a linear decay to a tenth at the budget, where training stops.
* batches: ``seq_len + 1``-token windows at uniformly random offsets of the stream (on the device); a
  ``chat_ratio`` share of the rows comes from the packed chat examples instead, each window starting at
  an example's ``<|endoftext|>``.
* at most ``max_epochs`` passes over the stream (the schedule's progress is the larger of time and tokens);
* an EMA of the weights, and a copy of the best weights seen at each periodic validation; the weights
  exported are whichever of final, EMA and best copy has the lowest fp32 loss on 64 validation windows
  spread over the held-out packages.
* CUDA: bf16 autocast over fp32 weights, TF32 matmuls; the loss is read back only every 50 steps.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass

import torch

from eagle_demo.training.shared import evaluate, init_weights, lm_loss, lr_at, make_optimizer, val_windows
from eagle_demo.training.target2 import build_model

WARMUP_STEPS = 200
MIN_STEPS = 2500
EMA_DECAY = 0.999
VAL_WINDOWS = 64


@dataclass(frozen=True)
class TargetRun:
    minutes: float = 5.0
    batch_sizes: tuple[int, ...] = (64, 128, 256)
    seq_len: int = 256
    lr: float = 2e-3
    decay_frac: float = 0.7
    eval_seconds: float = 60.0
    chat_ratio: float = 0.005
    seed: int = 1234
    calibration_steps: int = 6
    max_epochs: float = 12.0


class Batches:
    """Random windows of a device-resident stream, with a share of chat windows."""

    def __init__(self, stream: torch.Tensor, chat: torch.Tensor | None, run: TargetRun, device):
        self.stream = stream.to(device)  # [N]
        self.run, self.device = run, device
        self.gen = torch.Generator(device=device).manual_seed(run.seed)
        self.offsets = torch.arange(run.seq_len + 1, device=device)  # [T+1]
        self.chat = self.chat_starts = None
        if chat is not None and run.chat_ratio > 0:
            # chat = [0, example 1, 0, example 2, ..., 0]: the last 0 ends the last example and wraps to the first
            self.chat = torch.cat([chat, chat[1:run.seq_len + 2]]).to(device)  # [M + T + 1]
            self.chat_starts = (chat[:-1] == 0).nonzero().flatten().to(device)  # [E] example starts
        self.rows = 0

    def next(self, batch: int) -> torch.Tensor:
        n_chat = 0
        if self.chat is not None:
            n_chat = math.floor((self.rows + batch) * self.run.chat_ratio) - math.floor(self.rows * self.run.chat_ratio)
        self.rows += batch
        starts = torch.randint(0, self.stream.numel() - self.run.seq_len - 1, (batch - n_chat,), device=self.device,
                               generator=self.gen)
        out = self.stream[starts[:, None] + self.offsets]  # [b, T+1]
        if n_chat:
            pick = torch.randint(0, self.chat_starts.numel(), (n_chat,), device=self.device, generator=self.gen)
            out = torch.cat([out, self.chat[self.chat_starts[pick][:, None] + self.offsets]])  # [B, T+1]
        return out


def lr_factor(step: int, progress: float, decay_frac: float) -> float:
    """The share of the peak rate at `step` on the clock (`shared.lr_at`, linear): the decay starts after the
    warm-up, at `decay_frac` of the budget (progress: the share of the budget spent)."""
    decay = (progress - decay_frac) / (1.0 - decay_frac) if step >= WARMUP_STEPS else 0.0
    return lr_at(1.0, step, WARMUP_STEPS, decay)


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def train_target(stream: torch.Tensor, val: torch.Tensor, chat: torch.Tensor | None, vocab: int, run: TargetRun,
                 device: str, shape: dict | None = None, say=print) -> tuple[torch.nn.Module, dict]:
    """Train from scratch for ``run.minutes``; returns the chosen weights (fp32, eval mode) and a record."""
    torch.manual_seed(run.seed)
    cuda = torch.device(device).type == "cuda"
    model = build_model(vocab, **(shape or {}))
    init_weights(model)
    model.to(device).train()
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = make_optimizer(model, run.lr)
    windows = val_windows(val, run.seq_len)
    windows = windows[torch.linspace(0, len(windows) - 1, min(VAL_WINDOWS, len(windows))).long()].to(device)
    batches = Batches(stream, chat, run, device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext()
    params, ema_params = list(model.parameters()), list(ema.parameters())
    budget = run.minutes * 60
    state = {"step": 0, "tokens": 0, "loss_sum": torch.zeros((), device=device), "loss_n": 0}

    def step(batch_size: int, progress: float) -> None:
        for g in opt.param_groups:
            g["lr"] = g["base_lr"] * lr_factor(state["step"], progress, run.decay_frac)
        batch = batches.next(batch_size)  # [B, T+1]
        with autocast:
            loss = lm_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():  # outside autograd: the EMA must stay a leaf, with no graph behind it
            torch._foreach_lerp_(ema_params, params, 1.0 - (EMA_DECAY if state["step"] > WARMUP_STEPS else 0.0))
        state["loss_sum"] += loss.detach()
        state["loss_n"] += 1
        state["step"] += 1
        state["tokens"] += batch.shape[0] * run.seq_len

    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    max_tokens = run.max_epochs * stream.numel()
    try:
        t0 = time.perf_counter()
        batch_size, calib = _calibrate(step, run, budget, device, say)
        record = _loop(step, state, _Eval(model, ema, windows, autocast), run, batch_size,
                       _Limits(t0, budget, max_tokens), device, say)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    chosen, choice = _choose(model, ema, record.pop("best"), windows, say)
    record.update(calibration=calib, batch_size=batch_size, **choice)
    return chosen.eval(), record


def _calibrate(step, run: TargetRun, budget: float, device, say) -> tuple[int, list]:
    """Time a few steps at each batch size; keep the largest that leaves MIN_STEPS steps in the budget."""
    rows, chosen = [], run.batch_sizes[0]
    for b in run.batch_sizes:
        step(b, 0.0)  # kernels for this shape
        _sync(device)
        t = time.perf_counter()
        for _ in range(run.calibration_steps):
            step(b, 0.0)
        _sync(device)
        sec = (time.perf_counter() - t) / run.calibration_steps
        rows.append({"batch": b, "step_s": round(sec, 5), "tokens_per_s": round(b * run.seq_len / sec)})
        say(f"calibration: batch {b} x {run.seq_len}: {sec * 1e3:.1f} ms/step, {b * run.seq_len / sec:,.0f} tokens/s")
        if budget / sec >= MIN_STEPS:
            chosen = b
    return chosen, rows


@dataclass(frozen=True)
class _Eval:
    """What a periodic validation reads: the weights, their EMA, the windows and the autocast to run under."""
    model: torch.nn.Module
    ema: torch.nn.Module
    windows: torch.Tensor
    autocast: object


@dataclass(frozen=True)
class _Limits:
    """Training ends `budget` seconds after `t0`, or after `max_tokens` tokens, whichever comes first."""
    t0: float
    budget: float
    max_tokens: int


def _loop(step, state, ev: _Eval, run, batch_size: int, limits: _Limits, device, say) -> dict:
    model, ema, windows, autocast = ev.model, ev.ema, ev.windows, ev.autocast
    t0, budget, max_tokens = limits.t0, limits.budget, limits.max_tokens
    log, t_eval, best = [], time.perf_counter(), (math.inf, None, "")
    while True:
        progress = max((time.perf_counter() - t0) / budget, state["tokens"] / max_tokens)
        if progress >= 1.0:
            break
        step(batch_size, progress)
        if state["step"] % 50 == 0:
            loss = (state["loss_sum"] / max(1, state["loss_n"])).item()
            state["loss_sum"].zero_()
            state["loss_n"] = 0
            if time.perf_counter() - t_eval >= run.eval_seconds:
                with autocast:
                    v, ve = evaluate(model, windows), evaluate(ema, windows)
                row = dict(step=state["step"], tokens=state["tokens"], train_loss=round(loss, 4), val_loss=round(v, 4),
                           val_loss_ema=round(ve, 4), seconds=round(time.perf_counter() - t0, 1))
                log.append(row)
                say(f"target: {row}")
                if min(v, ve) < best[0]:  # kept in case the last stretch overfits
                    src = ema if ve <= v else model
                    best = (min(v, ve), {k: t.detach().clone() for k, t in src.state_dict().items()}, row["step"])
                t_eval = time.perf_counter()
    _sync(device)
    seconds = time.perf_counter() - t0
    say(f"target: {state['step']} steps, {state['tokens']:,} tokens in {seconds:.0f} s")
    return {"steps": state["step"], "tokens": state["tokens"], "seconds": round(seconds, 1),
            "epochs": round(state["tokens"] / max_tokens * run.max_epochs, 2),
            "tokens_per_s": round(state["tokens"] / seconds), "log": log, "best": best}


def _choose(model, ema, best, windows, say) -> tuple[torch.nn.Module, dict]:
    """The lowest fp32 validation loss of the final weights, their EMA and the best snapshot seen."""
    candidates = {"raw": model.float(), "ema": ema.float()}
    if best[1] is not None:
        snap = copy.deepcopy(ema)
        snap.load_state_dict(best[1])
        candidates[f"snapshot@{best[2]}"] = snap.float()
    losses = {name: round(evaluate(m, windows), 4) for name, m in candidates.items()}  # no autocast: export precision
    name = min(losses, key=losses.get)
    say(f"target: fp32 validation loss {losses}; exporting {name}")
    return candidates[name], {"val_loss_fp32": losses, "exported": name}
