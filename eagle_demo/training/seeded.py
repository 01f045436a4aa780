"""Seeded misconfigurations for the probe's tests (tests/test_probe_seeded.py) and figures
(scripts/probe_seeded.py): drafts that depend on a convention, shipped with a config that states another.

A small target forgives many misreadings: its residual stream is dominated by the token embedding, and a
one-layer head reads mostly its own position, where RoPE is the identity at any theta (the first-generation
head lost nothing to norm_before_residual true or rope_theta 10; figures for both generations in
docs/checkpoint-formats.md). Heads of real targets are not that forgiving (vLLM #50170: 1.2% acceptance on
layers the head was not trained on), so each case below starts from the shipped head and makes it depend on
its convention; the probe is never told which:

- aux ids (`aux`, trained): the shipped fc fine-tuned on the default rule's hidden_states (RULE) with the
  usual EAGLE-3 loss (soft cross-entropy against the target's next token distribution over the draft vocabulary, 3-step
  training-time-test unroll, as training/heads.py) plus an unlikelihood term, -log(1 - q(target token)),
  under the misreading (2, 4, 5): the default rule (2, L//2, L-3) evaluated for an 8-layer target. Saved as
  tests/seeded/aux.safetensors (fc.weight only, fp16). Data: BOS + windows of the CPython standard library's
  source (local), half replaced after 32 tokens by the target's own greedy continuation.
- rope_theta (`build:rope`, exact): rope_slow_pair below. The config states rope_theta 100, 100x smaller
  than the theta the head works with: the ratio of a draft trained at Qwen's 1e6 whose config falls back to
  EAGLE's 10000 default.
- rope_theta, a moderate loss (`build:rope-mild`, exact; issue 45): the same construction with a positional term
  of 0.1 logit and the shipped fc, under a config that states 200: the shipped head's other RoPE pairs turning at
  theta 200 cost it about 14% of its tau (7 prompts x 64 tokens: 2.96 against 3.45): a loss the evidence rule
  (`probe.evidence`) must see, and a rule that switches only under tau 1.3 does not.
- norm_before_residual (`build:nbr`, exact): RMSNorm is scale invariant, so with norm_before_residual true a
  head's fc may have any scale. The shipped fc times 100 is the same head under `true` (up to fp16 rounding
  and RMSNorm's eps); under `false` its residual is the raw 100x fc output.

    python -m eagle_demo.training.seeded aux     # -> tests/seeded/aux.safetensors (about 3 min on a busy CPU)
    python scripts/probe_seeded.py               # the probe on every seeded draft: the table in the docs

Cases tried and dropped: docs/perf-history.md, "Seeded drafts".
"""

from __future__ import annotations

import argparse
import json
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import DynamicCache

from eagle_demo.checkpoints import load_pair
from eagle_demo.common.paths import ASSETS
from eagle_demo.training.heads import causal_mask, set_lr, unroll_mask

ROOT = Path(__file__).resolve().parents[2]
TARGET, SHIPPED = ASSETS / "tiny-target", ASSETS / "tiny-eagle3"
OUT = ROOT / "tests" / "seeded"
SEED = 2323
_LAYERS = json.loads((TARGET / "config.json").read_text())["num_hidden_layers"]
RULE = [2, _LAYERS // 2, _LAYERS - 3]  # the default EAGLE-3 feature rule, the layers the shipped head reads
# name -> (trained tensors, true convention, misread convention); conventions as the probe writes them
CASES = {
    "aux": (("fc.weight",), {"feature_layers": RULE}, {"feature_layers": [2, 4, 5]}),
    # the dropped attempt of the module doc (not a test fixture): attention trained against rope_theta 1e6
    "rope_1e6": (tuple(f"midlayer.self_attn.{p}_proj.weight" for p in "qkvo"), {"rope_theta": 10000.0},
                 {"rope_theta": 1e6}),
}

NBR_SCALE = 100.0
ROPE_MILD = 200.0  # `build:rope-mild`: the theta its config states (50x under the trained 10000) ...
ROPE_MILD_LOGIT = 0.1  # ... with a positional term too small to matter: the theta alone costs 10-20% (issue 45)
ROPE_SLOW_LOGIT = 1000.0  # the size of the positional term rope_slow_pair adds to every attention score
ROPE_FC_SCALE = 0.01


@dataclass(frozen=True)
class Seeded:
    """A seeded misconfiguration: the draft's true conventions and the config change that misstates them.
    fixture: tests/seeded/<name>.safetensors (trained tensors), or "build:<how>" for a head built exactly."""
    name: str
    source: str  # the engine issue where this silently happened
    fixture: str
    truth: dict
    config: dict  # changes to the shipped config.json
    truthful: dict = field(default_factory=dict)  # the config changes that state the truth instead


SEEDED = (
    Seeded("aux ids: heuristic for the wrong depth", "vLLM #50170", "aux", {"feature_layers": RULE},
           {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}),
    Seeded("draft rope_theta", "vllm-ascend #6612", "build:rope", {"rope_theta": 10000.0}, {"rope_theta": 100.0},
           {"rope_theta": 10000.0}),
    Seeded("norm_before_residual", "speculators vs EAGLE", "build:nbr", {"norm_before_residual": True},
           {"norm_before_residual": False}, {"norm_before_residual": True}),
    Seeded("EAGLE-3 described as EAGLE-1", "SGLang #21272", "", {"feature_layers": RULE},
           {"architectures": ["LlamaForCausalLMEagle"]}),
    Seeded("fused draft shipped as unfused", "vLLM #40656", "", {"feature_layers": RULE},
           {"eagle_config": {"use_aux_hidden_state": False}}),
    Seeded("d2t stored as absolute ids", "SpecForge #534", "", {"d2t": "absolute"}, {}),
    Seeded("draft rope_theta, a moderate loss", "issue 45", "build:rope-mild", {"rope_theta": 10000.0},
           {"rope_theta": ROPE_MILD}, {"rope_theta": 10000.0}),
)


def seeded_draft(case: Seeded, folder: Path, fixtures: Path = OUT) -> Path:
    """Write the shipped head, changed as the case says, with its misstated config into `folder`."""
    from safetensors.torch import load_file

    folder.mkdir(parents=True, exist_ok=True)
    state = torch.load(SHIPPED / "pytorch_model.bin", weights_only=True)
    config = json.loads((SHIPPED / "config.json").read_text()) | case.config
    if case.fixture == "build:nbr":
        state["fc.weight"] = (state["fc.weight"].float() * NBR_SCALE).half()  # the same head under `true`
    elif case.fixture == "build:rope":
        state |= rope_slow_pair(state, config["num_attention_heads"], config["num_key_value_heads"])
    elif case.fixture == "build:rope-mild":
        state |= rope_slow_pair(state, config["num_attention_heads"], config["num_key_value_heads"],
                                ROPE_MILD_LOGIT, 1.0)
    elif case.fixture:
        state |= load_file(fixtures / f"{case.fixture}.safetensors")
    if case.truth.get("d2t") == "absolute":
        state = _absolute_d2t(state)
        config["draft_vocab_size"] = int(state["lm_head.weight"].shape[0])
    torch.save(state, folder / "pytorch_model.bin")
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def rope_slow_pair(state: dict, heads: int, kv_heads: int, logit: float = ROPE_SLOW_LOGIT,
                   fc_scale: float = ROPE_FC_SCALE) -> dict:
    """q/k weights and biases that turn the slowest RoPE pair of every attention head into a content-free
    score term -A cos(w * distance), A = ROPE_SLOW_LOGIT. At the trained theta 10000 that pair turns 1.8e-4
    rad per position: over 100 positions the term varies by 0.16 of a logit, nearly a constant, which softmax
    ignores. At theta 100 it turns 0.013 rad per position: a key 20 positions back scores 35 logits above
    the query's own, and attention leaves the recent tokens the head needs for the farthest ones.
    The fc is scaled by ROPE_FC_SCALE: the layer's attention input is RMS-normalized, so the scale matters
    (eps aside) only to the raw residual copy of the fused features, which shrinks: the features reach the
    head mostly through attention."""
    q, k = state["midlayer.self_attn.q_proj.weight"].float(), state["midlayer.self_attn.k_proj.weight"].float()
    hd = q.shape[0] // heads
    slow = (hd // 2 - 1, hd - 1)  # rotate_half layout: pair i is dims (i, i + hd/2); the last is the slowest
    amplitude = (logit * hd ** 0.5) ** 0.5  # q.k is scaled by 1/sqrt(hd) in attention
    q_bias, k_bias = torch.zeros(q.shape[0]), torch.zeros(k.shape[0])
    for h in range(heads):
        q[[h * hd + d for d in slow]] = 0.0
        q_bias[h * hd + slow[0]] = amplitude
    for g in range(kv_heads):
        k[[g * hd + d for d in slow]] = 0.0
        k_bias[g * hd + slow[0]] = -amplitude
    v_bias = torch.zeros(state["midlayer.self_attn.v_proj.weight"].shape[0])
    named = {"q_proj.weight": q, "k_proj.weight": k, "q_proj.bias": q_bias, "k_proj.bias": k_bias,
             "v_proj.bias": v_bias}
    out = {f"midlayer.self_attn.{n}": t.half() for n, t in named.items()}
    return out | {"fc.weight": (state["fc.weight"].float() * fc_scale).half()}


def _absolute_d2t(state: dict) -> dict:
    """d2t stored as target ids. Only the draft tokens whose ids also read as valid offsets are kept (the
    first ones, ids ascending), so both readings stay in-vocabulary and only acceptance tells them apart."""
    ids = torch.arange(state["d2t"].shape[0]) + state["d2t"].long()  # [Vd] target ids
    as_offsets = ids + torch.arange(ids.shape[0])  # [Vd] what an offsets reading of the stored ids gives
    keep = int((as_offsets < state["t2d"].shape[0]).long().cumprod(0).sum())
    out = {k: v for k, v in state.items() if k != "t2d"}
    return out | {"lm_head.weight": state["lm_head.weight"][:keep], "d2t": ids[:keep].clone()}


@torch.no_grad()
def build_data(pair, n_seqs: int, seq_len: int, prefix: int) -> dict:
    """tokens [S, T], hidden [S, T, L+1, H] (fp16), target next-token probabilities come from hidden[..., -1, :]."""
    torch.manual_seed(SEED)
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    stream = []
    for f in files:
        stream.extend(pair.tokenizer(f.read_text(encoding="utf-8", errors="replace"))["input_ids"])
        if len(stream) > 400 * seq_len:
            break
    stream = torch.tensor(stream)
    starts = torch.randint(0, stream.numel() - seq_len, (n_seqs,))
    bos = torch.tensor([pair.tokenizer("")["input_ids"][0]]) if pair.tokenizer("")["input_ids"] else stream[:0]
    tokens = torch.stack([torch.cat([bos, stream[s:s + seq_len - len(bos)]]) for s in starts.tolist()])  # [S, T]
    half = n_seqs // 2
    for i in range(half, n_seqs, 32):
        prompt = tokens[i:min(i + 32, n_seqs), :prefix]  # [b, p]
        out = pair.target.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                   max_new_tokens=seq_len - prefix, min_new_tokens=seq_len - prefix, pad_token_id=0)
        tokens[i:i + prompt.shape[0]] = out[:, :seq_len]
    hidden = []
    for i in range(0, n_seqs, 32):
        out = pair.target.model(tokens[i:i + 32], output_hidden_states=True)
        hidden.append(torch.stack(out.hidden_states, 2).half())  # [b, T, L+1, H]
    return {"tokens": tokens, "hidden": torch.cat(hidden)}


def _rotary(head, theta: float):
    rot = head.rotary_emb
    config = type(rot.config).from_dict(rot.config.to_dict())
    config.rope_parameters = dict(config.rope_parameters, rope_theta=theta)
    return type(rot)(config=config)


def _setting(head, conv: dict, rotaries: dict) -> tuple[tuple[int, ...], object]:
    layers = tuple(conv.get("feature_layers", head.feature_layers))
    return layers, rotaries[conv.get("rope_theta", 10000.0)]


def _unrolled(head, hidden, x, positions, masks, goal: tuple, rotary, bad: bool) -> tuple[torch.Tensor, list]:
    """Unrolled loss of one convention: soft CE (true) or unlikelihood of the target's token (misread). goal: the
    target's side, (p [b, n, Vd] over the draft vocabulary, valid [b, n]: its token is in that vocabulary,
    label [b, n]: that token's draft id)."""
    p, valid, label = goal
    if head.rotary_emb is not rotary:
        head.rotary_emb, head.rope.table = rotary, None  # rebuilt at its size (a changed key would double it)
    cache, loss, acc, from_target = DynamicCache(), 0.0, [], True
    for j, mask in enumerate(masks):
        g = head(hidden, x, positions, cache, mask, from_target=from_target)  # [b, n, H]
        logq = torch.log_softmax(head.draft_logits(g), -1)  # [b, n, Vd]
        ok = valid.clone()
        ok[:, :j] = False
        if bad:
            q = logq.gather(-1, label[..., None])[..., 0].exp()  # [b, n]
            per = -torch.log1p(-q.clamp(max=1 - 1e-6))
        else:
            per = -(p * logq).sum(-1)  # [b, n]
        loss = loss + (0.8 ** j) * (per * ok).sum() / ok.sum().clamp_min(1)
        acc.append(((logq.argmax(-1) == label) & ok).sum().item() / max(1, ok.sum().item()))
        hidden, from_target = torch.cat([g[:, :1], g[:, :-1]], 1), False  # step j+1 at i reads step j at i-1
    return loss, acc


def train(case: str, steps: int, batch: int, lr: float, weight: float, minutes: float, data: dict, pair):
    names, truth, misread = CASES[case]
    head = pair.head.float().train()
    params = dict(head.named_parameters())
    for name, p in params.items():
        p.requires_grad_(name in names)
    opt = torch.optim.AdamW([params[n] for n in names], lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    rotaries = {t: _rotary(head, t) for t in {10000.0, truth.get("rope_theta", 1e4), misread.get("rope_theta", 1e4)}}
    tokens, hs = data["tokens"], data["hidden"]
    n = tokens.shape[1] - 2  # pair i = (F_i, x_{i+1}) predicts x_{i+2}
    positions = torch.arange(n)
    masks = [causal_mask(n, torch.float32)] + [unroll_mask(n, s, torch.float32) for s in (1, 2)]
    used = head.d2t.cpu() + torch.arange(head.d2t.shape[0])  # [Vd] target ids
    inside_vocab = torch.zeros(pair.target.config.vocab_size, dtype=torch.bool)
    inside_vocab[used] = True
    lm = pair.target.get_output_embeddings()
    log, t0 = [], time.time()
    gen = torch.Generator().manual_seed(SEED)
    for step in range(steps):
        set_lr(opt, step, steps, lr, time.time() - t0, minutes)
        idx = torch.randint(0, tokens.shape[0], (batch,), generator=gen)
        x = tokens[idx, 1:n + 1]  # [b, n]
        with torch.no_grad():
            p_full = torch.softmax(lm(hs[idx, 1:n + 1, -1].float()), -1)  # [b, n, V] target at i+1
            valid = inside_vocab[p_full.argmax(-1)]  # [b, n]
            p = p_full[..., used]
            p = p / p.sum(-1, keepdim=True).clamp_min(1e-9)  # [b, n, Vd]
            label = p.argmax(-1)  # [b, n]
        losses, accs = [], []
        for conv, bad in ((truth, False), (misread, True)):
            layers, rotary = _setting(head, conv, rotaries)
            feats = torch.cat([hs[idx, :n, j].float() for j in layers], -1)  # [b, n, 3H]
            loss, acc = _unrolled(head, feats, x, positions, masks, (p, valid, label), rotary, bad)
            losses.append(loss)
            accs.append(acc)
        total = losses[0] + weight * losses[1]
        opt.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_([params[n] for n in names], 0.5)
        opt.step()
        log.append({"step": step, "true_loss": losses[0].item(), "misread_loss": losses[1].item(),
                    "top1_true": accs[0], "top1_misread": accs[1], "seconds": round(time.time() - t0, 1)})
        if step % 20 == 0:
            print(json.dumps(log[-1]), flush=True)
        if minutes and time.time() - t0 > minutes * 60:
            break
    head.rotary_emb = rotaries[10000.0]
    return head.eval(), log


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eagle_demo.training.seeded")
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight", type=float, default=1.0, help="weight of the misread unlikelihood term")
    ap.add_argument("--minutes", type=float, default=0.0)
    ap.add_argument("--seqs", type=int, default=256)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    pair = load_pair(str(TARGET), str(SHIPPED), dtype="float32", device="cpu")
    data = build_data(pair, args.seqs, args.seq_len, prefix=32)
    head, log = train(args.case, args.steps, args.batch, args.lr, args.weight, args.minutes, data, pair)
    names, truth, misread = CASES[args.case]
    state = dict(head.named_parameters())
    tensors = {n: state[n].detach().half().contiguous() for n in names}
    command = (f"python -m eagle_demo.training.seeded {args.case} --steps {args.steps} --batch {args.batch} "
               f"--lr {args.lr} --weight {args.weight} --seqs {args.seqs} --seq-len {args.seq_len}")
    meta = {"case": args.case, "truth": json.dumps(truth), "misread": json.dumps(misread),
            "base": "assets/tiny-eagle3", "command": command, "steps_run": str(len(log)), "final": json.dumps(log[-1])}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, out / f"{args.case}.safetensors", metadata=meta)
    print(f"saved {out / (args.case + '.safetensors')}: {', '.join(names)}; {json.dumps(log[-1])}")


if __name__ == "__main__":
    main()
