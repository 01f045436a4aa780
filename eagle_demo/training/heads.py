"""Train the shipped EAGLE-1 and EAGLE-3 heads on the frozen tiny target, and export them in the
original public layouts (yuhuili EAGLE-1 / EAGLE-3 repos), so the default demo goes through the adapter.

Data: sequences of the corpus plus the target's own greedy continuations of corpus prefixes
(self-distillation: the demo decodes greedily, so the draft should know what the target says, not only
what the corpus says). The frozen target gives, per token, the post-norm last hidden state (EAGLE-1
feature and label) and the inputs of layers 2, L//2, L-3 (EAGLE-3 features).

EAGLE-1 loss (EAGLE paper): Smooth-L1 regression of the next feature + w x cross-entropy against the
target's next-token distribution (the paper's w = 0.1), with uniform noise on the input features. With
--unroll U the head also learns from its own outputs, as at depths 2..U of a round (the training-time-test
unroll described for EAGLE-3 below, applied to the feature-regressing head); sequences are batched.
EAGLE-3 loss: token cross-entropy only, over the draft vocabulary (the most frequent target tokens,
d2t/t2d), with a training-time-test unroll: step j at position i reads the step j-1 output at position
i-1, and attends to step-0 keys up to position i-j plus its own chain (one key per earlier step) —
exactly what the draft sees inside a tree at inference. Step j is weighted 0.8**j.

Both heads are the package's own modules (eagle_demo.drafts), trained through their real forward with a
DynamicCache and 4-D masks, so training and inference cannot drift apart.

Commands (run once by a developer, not by CI):
    python -m eagle_demo.training.heads data      # features from the frozen target (cached)
    python -m eagle_demo.training.heads eagle1    # -> assets/tiny-eagle1 (--init DIR warm-starts)
    python -m eagle_demo.training.heads eagle3    # -> assets/tiny-eagle3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import AutoModelForCausalLM, DynamicCache, LlamaConfig

from eagle_demo.drafts import Eagle1Head, Eagle3Head
from eagle_demo.target.features import Features
from eagle_demo.target.runner import tree_attention_mask
from eagle_demo.training.corpus import default_cache_dir, default_corpus_dir
from eagle_demo.training.head_export import export_eagle1, export_eagle3
from eagle_demo.training.shared import load_token_stream, lr_at

REPO_ROOT = Path(__file__).resolve().parents[2]
ASSETS = REPO_ROOT / "assets"
TARGET_DIR = ASSETS / "tiny-target"
CORPUS_DIR = default_corpus_dir()  # --corpus: the second-generation target reads ~/.cache/eagle_demo/corpus2
SEED = 4321
SEQ_LEN = 256
EAGLE3_DRAFT_VOCAB = 2048


def data_path() -> Path:
    """Cached features, keyed by the target's weights (a retrained target never reuses stale data)."""
    digest = hashlib.sha256((TARGET_DIR / "model.safetensors").read_bytes()).hexdigest()[:12]
    return default_cache_dir() / f"head_data-{TARGET_DIR.name}-{digest}.pt"


def load_target(device: str = "cpu") -> torch.nn.Module:
    model = AutoModelForCausalLM.from_pretrained(TARGET_DIR, dtype=torch.float32, attn_implementation="sdpa")
    return model.to(device).eval().requires_grad_(False)


def feature_layers(num_layers: int) -> tuple[int, int, int]:
    return (2, num_layers // 2, num_layers - 3)


# ---------------------------------------------------------------------------------------------
# data

@torch.no_grad()
def build_data(n_corpus: int, n_generated: int, prefix_len: int, batch: int) -> dict:

    torch.manual_seed(SEED)
    model = load_target()
    stream = load_token_stream("train", CORPUS_DIR, TARGET_DIR).long()  # [N], the target's own tokenizer
    starts = torch.randint(0, stream.numel() - SEQ_LEN - 1, (n_corpus + n_generated,))
    seqs = [stream[s:s + SEQ_LEN] for s in starts[:n_corpus].tolist()]
    gen_starts = starts[n_corpus:].tolist()
    for i in tqdm(range(0, len(gen_starts), batch), desc="target continuations"):
        prefixes = torch.stack([stream[s:s + prefix_len] for s in gen_starts[i:i + batch]])  # [b, p]
        out = model.generate(prefixes, attention_mask=torch.ones_like(prefixes), do_sample=False,
                             max_new_tokens=SEQ_LEN - prefix_len, min_new_tokens=SEQ_LEN - prefix_len,
                             pad_token_id=0)
        seqs.extend(out[:, :SEQ_LEN])
    tokens = torch.stack(seqs)  # [S, T]
    layers = feature_layers(model.config.num_hidden_layers)
    last, fused = [], []
    for i in tqdm(range(0, tokens.shape[0], batch), desc="target features"):
        with Features(model.model, layers) as taken:
            out = model.model(tokens[i:i + batch], output_hidden_states=True)
        last.append(out.last_hidden_state.half())  # [b, T, H]
        fused.append(taken.of_batch(out.hidden_states).half())  # [b, T, 3H]
    data = {"tokens": tokens, "last": torch.cat(last), "fused": torch.cat(fused), "layers": layers,
            "n_corpus": n_corpus}
    torch.save(data, data_path())
    print(f"data: {tokens.shape[0]} sequences x {SEQ_LEN} tokens ({n_corpus} corpus, {n_generated} target "
          f"continuations) -> {data_path()}")
    return data


# ---------------------------------------------------------------------------------------------
# heads

def draft_config(target_cfg, **extra) -> LlamaConfig:
    cfg = LlamaConfig(
        vocab_size=target_cfg.vocab_size, hidden_size=target_cfg.hidden_size,
        intermediate_size=target_cfg.intermediate_size, num_hidden_layers=1,
        num_attention_heads=target_cfg.num_attention_heads, num_key_value_heads=target_cfg.num_key_value_heads,
        head_dim=target_cfg.hidden_size // target_cfg.num_attention_heads,
        max_position_embeddings=2048, rms_norm_eps=target_cfg.rms_norm_eps, rope_theta=10000.0,
        bos_token_id=target_cfg.bos_token_id, eos_token_id=target_cfg.eos_token_id, pad_token_id=0,
        tie_word_embeddings=False, **extra)
    cfg._attn_implementation = "sdpa"
    return cfg


def causal_mask(n: int, dtype) -> torch.Tensor:
    return tree_attention_mask(0, torch.ones(n, n, dtype=torch.bool).tril(), dtype)  # [1, 1, n, n]


def unroll_mask(n: int, step: int, dtype) -> torch.Tensor:
    """Keys of steps 0..step for the step-`step` queries: step-0 keys at positions <= i-step, and the
    step-s key at position i-step+s (s = 1..step), the chain this query grew from."""
    blocks = [torch.ones(n, n, dtype=torch.bool).tril(-step)]  # [n, n] step-0 keys
    for s in range(1, step + 1):
        blocks.append(torch.eye(n, dtype=torch.bool).roll(s - step, dims=1)
                      & torch.ones(n, n, dtype=torch.bool).tril(0))
    visible = torch.cat(blocks, 1)  # [n, (step+1) n]
    visible[:step] = False  # rows whose chain would start before position 0
    visible[torch.arange(min(step, n)), torch.arange(min(step, n))] = True  # keep rows finite (masked out of the loss)
    return tree_attention_mask(0, visible, dtype)


class Saver:
    """Exports a head under training every `minutes` (wall clock) into `folder`, with its log so far."""

    def __init__(self, folder: Path, family: str, minutes: float):
        self.folder, self.family, self.every, self.last = Path(folder), family, minutes * 60, time.time()

    def maybe(self, head, log: list, t2d: torch.Tensor | None = None) -> None:
        if self.every <= 0 or time.time() - self.last < self.every:
            return
        if self.family == "eagle1":
            export_eagle1(head, self.folder / "eagle1")
        else:
            export_eagle3(head, t2d.cpu(), self.folder / "eagle3")
        (self.folder / f"training_log_{self.family}.json").write_text(json.dumps(log))
        head.train()
        self.last = time.time()


@dataclass(frozen=True)
class HeadRun:
    """A head's training settings (the command line's flags): `steps` steps of `batch` whole sequences at peak
    rate `lr`, stopped after `minutes` (0: no limit), `unroll` training-time-test steps; `ce_weight` weighs the
    token loss (EAGLE-1); `draft_vocab` (EAGLE-3; ignored with `init`); `init`: an exported head to start from;
    `progress`: show a progress bar."""
    steps: int
    batch: int
    lr: float
    minutes: float
    unroll: int = 1
    ce_weight: float = 0.1
    draft_vocab: int = EAGLE3_DRAFT_VOCAB
    init: Path | None = None
    progress: bool = True


def train_eagle1(data: dict, run: HeadRun, target=None, save: Saver | None = None) -> tuple[Eagle1Head, list]:
    """Batched: `batch` whole sequences per step. Step j of the unroll at position i reads step j-1's
    output at i-1 (the draft's own feature, as at depth j+1 of a round) and regresses the same true next
    feature; the mask is the one the EAGLE-3 unroll uses. Step j is weighted 0.8**j. Runs on the device
    of `target` (frozen; loaded from TARGET_DIR on the CPU when None) and of `data`'s tensors. save: a
    `Saver` that exports the head now and then, so a run stopped from outside keeps its progress."""
    steps, batch, lr, minutes, unroll, init, ce_weight = (run.steps, run.batch, run.lr, run.minutes, run.unroll,
                                                          run.init, run.ce_weight)
    progress = run.progress
    torch.manual_seed(SEED)
    target = target if target is not None else load_target()
    device = target.device
    cfg = draft_config(target.config, bias=True)
    head = Eagle1Head(cfg, target.get_output_embeddings(), target.get_input_embeddings(), fc_bias=True).to(device)
    if init is not None:  # warm start from an exported head (yuhuili layout: embedding copy, no layer-0 norm)
        state = torch.load(init / "pytorch_model.bin", weights_only=True)
        state = {k: v.float() for k, v in state.items() if not k.startswith("embed_tokens")}
        head.load_state_dict(state, strict=True)
    head.train()
    opt = torch.optim.AdamW(head.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    tokens, last = data["tokens"], data["last"]
    n_seq, T = tokens.shape
    n = T - 1  # pair i = (f_i, x_{i+1}), i < n; g_i predicts f_{i+1}
    positions = torch.arange(n, device=device)
    masks = [causal_mask(n, torch.float32)] + [unroll_mask(n, s, torch.float32) for s in range(1, unroll)]
    masks = [m.to(device) for m in masks]
    log, t0 = [], time.time()
    bar = tqdm(range(steps), desc="eagle1", disable=not progress)
    for step in bar:
        set_lr(opt, step, steps, lr, time.time() - t0, minutes)
        idx = torch.randint(0, n_seq, (batch,)).to(tokens.device)
        f = last[idx].float()  # [b, T, H]
        x = tokens[idx]  # [b, T]
        goal = f[:, 1:n]  # [b, n-1, H]
        with torch.no_grad():
            p = torch.softmax(target.lm_head(goal), -1)  # [b, n-1, V]
            label = p.argmax(-1)  # [b, n-1]
        hidden = f[:, :n] + (torch.rand_like(f[:, :n]) - 0.5) * 0.2  # [b, n, H] noisy target features
        cache, loss, acc = DynamicCache(), 0.0, []
        for j in range(unroll):
            g = head(hidden, x[:, 1:n + 1], positions, cache, masks[j], from_target=True)  # [b, n, H]
            pred = g[:, :-1]  # [b, n-1, H]
            logq = torch.log_softmax(head.lm_head(pred), -1)  # [b, n-1, V]
            per = F.smooth_l1_loss(pred, goal, reduction="none").mean(-1) - ce_weight * (p * logq).sum(-1)  # [b, n-1]
            per = per[:, j:]  # rows whose chain starts at or after position 0
            loss = loss + (0.8 ** j) * per.mean()
            acc.append((logq.argmax(-1) == label)[:, j:].float().mean().item())
            hidden = torch.cat([g[:, :1], g[:, :-1]], 1)  # step j+1 at position i reads step j at i-1
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 0.5)
        opt.step()
        log.append({"step": step, "loss": loss.item(), "top1": acc[0], "top1_by_step": acc,
                    "seconds": time.time() - t0})
        if save is not None:
            save.maybe(head, log)
        bar.set_postfix(loss=f"{loss.item():.3f}", top1="/".join(f"{a:.2f}" for a in acc))
        if minutes and time.time() - t0 > minutes * 60:
            break
    print(f"eagle1: {len(log)} steps, loss {log[-1]['loss']:.4f}, top-1 by unroll step "
          + " ".join(f"{a:.3f}" for a in log[-1]["top1_by_step"]))
    return head.eval(), log


def set_lr(opt: torch.optim.Optimizer, step: int, steps: int, lr: float, elapsed: float = 0.0,
           minutes: float = 0.0) -> None:
    """The one schedule (`shared.lr_at`) over 50 warm-up steps and a cosine decay to a tenth over the steps or the
    time budget, whichever ends first, from the first step on."""
    frac = max(step / steps, elapsed / (60 * minutes) if minutes else 0.0)
    for group in opt.param_groups:
        group["lr"] = lr_at(lr, step, 50, frac, cosine=True)


def vocab_map(tokens: torch.Tensor, vocab: int, vd: int) -> tuple[torch.Tensor, torch.Tensor]:
    counts = Counter(tokens.reshape(-1).tolist())
    used = [t for t, _ in counts.most_common(vd)]
    used += [t for t in range(vocab) if t not in set(used)][: vd - len(used)]
    used = torch.tensor(sorted(used))  # [Vd] ascending target ids
    d2t = used - torch.arange(vd)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[used] = True
    return d2t, t2d


def train_eagle3(data: dict, run: HeadRun, target=None, save: Saver | None = None):
    """Batched: `batch` whole sequences per step, `unroll` training-time-test steps (see the module doc).
    Runs on the device of `target` (frozen; loaded from TARGET_DIR on the CPU when None). init: warm start
    from an exported head of this target (its draft vocabulary and d2t are kept; `draft_vocab` is ignored)."""
    steps, batch, lr, unroll, minutes = run.steps, run.batch, run.lr, run.unroll, run.minutes
    progress, draft_vocab, init = run.progress, run.draft_vocab, run.init
    torch.manual_seed(SEED)
    target = target if target is not None else load_target()
    device = target.device
    tcfg = target.config
    state = None
    if init is not None:
        state = {k: v for k, v in torch.load(init / "pytorch_model.bin", weights_only=True).items() if k != "t2d"}
        d2t = state.pop("d2t").long()  # [Vd]
        t2d = torch.zeros(tcfg.vocab_size, dtype=torch.bool)
        t2d[torch.arange(d2t.shape[0]) + d2t] = True
    else:
        d2t, t2d = vocab_map(data["tokens"].cpu(), tcfg.vocab_size, draft_vocab)
    vd = d2t.shape[0]
    cfg = draft_config(tcfg, draft_vocab_size=vd)
    head = Eagle3Head(cfg, tcfg.hidden_size, vd, target.get_input_embeddings(), tuple(data["layers"])).to(device)
    if state is not None:
        head.load_state_dict({**{k: v.float() for k, v in state.items()}, "d2t": d2t}, strict=True)
    head.d2t.copy_(d2t)
    d2t, t2d = d2t.to(device), t2d.to(device)
    head.train()
    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=lr, betas=(0.9, 0.95))
    tokens, last, fused = data["tokens"], data["last"], data["fused"]
    n_seq, T = tokens.shape
    n = T - 2  # positions with a label: pair i = (F_i, x_{i+1}) predicts x_{i+2} (target distribution at i+1)
    positions = torch.arange(n, device=device)
    masks = [causal_mask(n, torch.float32)] + [unroll_mask(n, s, torch.float32) for s in range(1, unroll)]
    masks = [m.to(device) for m in masks]
    used = d2t + torch.arange(vd, device=device)  # [Vd] target ids
    log, t0 = [], time.time()
    bar = tqdm(range(steps), desc="eagle3", disable=not progress)
    for step in bar:
        set_lr(opt, step, steps, lr, time.time() - t0, minutes)
        idx = torch.randint(0, n_seq, (batch,)).to(tokens.device)
        x = tokens[idx]  # [b, T]
        with torch.no_grad():
            p_full = torch.softmax(target.lm_head(last[idx, 1:n + 1].float()), -1)  # [b, n, V] target at i+1
            p = p_full[..., used]  # [b, n, Vd]
            inside = t2d[p_full.argmax(-1)]  # [b, n] label usable when the target's choice is in the draft vocab
            p = p / p.sum(-1, keepdim=True).clamp_min(1e-9)
            label = p.argmax(-1)  # [b, n]
        cache = DynamicCache()
        hidden, from_target = fused[idx, :n].float(), True  # [b, n, 3Ht]
        loss, acc = 0.0, []
        for j in range(unroll):
            g = head(hidden, x[:, 1:n + 1], positions, cache, masks[j], from_target=from_target)  # [b, n, H]
            logq = torch.log_softmax(head.draft_logits(g), -1)  # [b, n, Vd]
            valid = inside.clone()
            valid[:, :j] = False  # rows whose chain would start before position 0
            ce = -(p * logq).sum(-1)  # [b, n]
            loss = loss + (0.8 ** j) * (ce * valid).sum() / valid.sum().clamp_min(1)
            acc.append(((logq.argmax(-1) == label) & valid).sum().item() / max(1, valid.sum().item()))
            hidden = torch.cat([g[:, :1], g[:, :-1]], 1)  # step j+1 at position i reads step j at i-1
            from_target = False
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 0.5)
        opt.step()
        log.append({"step": step, "loss": loss.item(), "top1_by_step": acc, "seconds": time.time() - t0})
        if save is not None:
            save.maybe(head, log, t2d)
        bar.set_postfix(loss=f"{loss.item():.3f}", top1="/".join(f"{a:.2f}" for a in acc))
        if minutes and time.time() - t0 > minutes * 60:
            break
    print(f"eagle3: {len(log)} steps, loss {log[-1]['loss']:.4f}, top-1 by unroll step "
          + " ".join(f"{a:.3f}" for a in log[-1]["top1_by_step"]))
    return head.eval(), t2d.cpu(), log


def main(argv=None) -> None:
    global TARGET_DIR, ASSETS, CORPUS_DIR
    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.heads")
    ap.add_argument("stage", choices=["data", "eagle1", "eagle3"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--corpus-seqs", type=int, default=768)
    ap.add_argument("--generated-seqs", type=int, default=1280)
    ap.add_argument("--prefix", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--unroll", type=int, default=4)
    ap.add_argument("--ce-weight", type=float, default=0.1, help="eagle1: weight of the token loss")
    ap.add_argument("--init", default="", help="eagle1: warm start from this exported head folder")
    ap.add_argument("--minutes", type=float, default=0.0, help="wall-clock budget (0 = run all steps)")
    ap.add_argument("--target", default=str(TARGET_DIR), help="target folder (default: assets/tiny-target)")
    ap.add_argument("--out", default=str(ASSETS), help="folder receiving tiny-eagle1/, tiny-eagle3/ and the logs")
    ap.add_argument("--corpus", default=str(CORPUS_DIR), help="corpus folder whose train.txt gives the prompts")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    TARGET_DIR, ASSETS, CORPUS_DIR = Path(args.target), Path(args.out), Path(args.corpus)
    if args.stage == "data":
        build_data(args.corpus_seqs, args.generated_seqs, args.prefix, batch=32)
        return
    data = torch.load(data_path(), weights_only=True)
    if args.stage == "eagle1":
        head, log = train_eagle1(data, HeadRun(args.steps, args.batch, args.lr, args.minutes, args.unroll,
                                               args.ce_weight, init=Path(args.init) if args.init else None))
        export_eagle1(head, ASSETS / "tiny-eagle1")
        (ASSETS / "training_log_eagle1.json").write_text(json.dumps(log))
        print(f"exported {ASSETS / 'tiny-eagle1'}")
    else:
        head, t2d, log = train_eagle3(data, HeadRun(args.steps, args.batch, args.lr, args.minutes, args.unroll))
        export_eagle3(head, t2d, ASSETS / "tiny-eagle3")
        (ASSETS / "training_log_eagle3.json").write_text(json.dumps(log))
        print(f"exported {ASSETS / 'tiny-eagle3'}")


if __name__ == "__main__":
    main()
