"""What every trainer here shares (`target`, `target_budget`, `vocab_probe`, `heads`, `seeded`): a target's
initialisation, its token stream and training windows, the loss and its evaluation, the optimizer, the one
learning-rate schedule (`lr_at`), checkpoints, the export to a Hugging Face folder, greedy samples and the timing of
a forward."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from eagle_demo.training.corpus import default_cache_dir, read_split
from eagle_demo.training.tokenizer import TOKENIZER_FILES

SPECIAL_ID = 0  # <|endoftext|>: BOS = EOS = pad, in every tokenizer trained here
WEIGHT_DECAY = 0.1  # on matrices only (`make_optimizer`)
EMBED_INIT_STD = 1.0  # `init_weights`: an N(0, 1) input embedding ...
EMBED_LR_MULT = 10.0  # ... trained at 10x the learning rate
BETAS = (0.9, 0.95)
TIMING_VOCAB = 4096  # `time_step`'s random ids lie below it: every tokenizer trained here has 4096 ids or more


@torch.no_grad()
def init_weights(model) -> None:
    """Re-initialise a fresh model for fast early training of a deep, narrow stack: zero ``o_proj`` and
    ``down_proj`` (every block starts as the identity) and an N(0, 1) token embedding (trained at 10x the rate,
    `make_optimizer`). Why: with the stock Llama init (every matrix and the embedding ~ N(0, 0.02)) the attention
    branches, uniform averages over the prefix at first, swamp the tiny embedding in the residual stream; on a
    16 x 192 Llama, validation loss after 100 steps was 6.45 with the stock init and 5.45 with this one."""
    model.model.embed_tokens.weight.normal_(0.0, EMBED_INIT_STD)
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()


# ---- data ------------------------------------------------------------------------------------


def file_digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


def ensure_corpus_and_tokenizer(corpus_dir: Path, tokenizer_dir: Path) -> None:
    if not (corpus_dir / "train.txt").exists():
        from eagle_demo.training import corpus

        print(f"corpus missing in {corpus_dir}; building it", flush=True)
        corpus.build_corpus(corpus_dir)
    if not (tokenizer_dir / "tokenizer.json").exists():
        from eagle_demo.training import tokenizer

        print(f"tokenizer missing in {tokenizer_dir}; training it", flush=True)
        tokenizer.save_tokenizer(tokenizer.train_tokenizer(corpus_dir), tokenizer_dir)


def load_token_stream(split: str, corpus_dir: Path, tokenizer_dir: Path) -> torch.Tensor:
    """Token ids of a split as one int16 stream: ``[0, doc_1..., 0, doc_2..., ...]``.

    Every document is preceded by ``<|endoftext|>`` (id 0), exactly what the tokenizer's BOS
    post-processor produces for a prompt, so generation from a fresh prompt starts from a
    familiar state. Cached in ``<cache>/tokens`` keyed by the corpus and tokenizer hashes.
    """
    from tokenizers import Tokenizer

    text_path = corpus_dir / f"{split}.txt"
    key = file_digest(text_path, tokenizer_dir / "tokenizer.json")
    cache = default_cache_dir() / "tokens" / f"{split}-{key}.pt"
    if cache.exists():
        return torch.load(cache)
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    docs = read_split(text_path)
    ids: list[int] = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.append(SPECIAL_ID)
        ids.extend(enc.ids)
    stream = torch.tensor(ids, dtype=torch.int16)
    cache.parent.mkdir(parents=True, exist_ok=True)
    torch.save(stream, cache)
    return stream


class WindowSampler:
    """Deterministic epoch-shuffled non-overlapping windows of ``seq_len + 1`` tokens.

    The batch for step ``k`` is a pure function of ``(seed, k)``, which makes resuming exact.
    Every epoch uses a fresh random phase (offset) and permutation of the windows.
    """

    def __init__(self, stream: torch.Tensor, seq_len: int, batch_size: int, seed: int):
        self.stream, self.seq_len, self.bs, self.seed = stream, seq_len, batch_size, seed
        self.per_epoch = (len(stream) - 1 - seq_len) // seq_len
        self._epoch_cache: dict[int, tuple[int, torch.Tensor]] = {}

    def _epoch(self, e: int):
        if e not in self._epoch_cache:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + e)
            offset = int(torch.randint(0, self.seq_len, (1,), generator=g))
            self._epoch_cache = {e: (offset, torch.randperm(self.per_epoch, generator=g))}
        return self._epoch_cache[e]

    def batch(self, step: int) -> torch.Tensor:
        rows = []
        for i in range(step * self.bs, (step + 1) * self.bs):
            offset, perm = self._epoch(i // self.per_epoch)
            start = offset + int(perm[i % self.per_epoch]) * self.seq_len
            rows.append(self.stream[start:start + self.seq_len + 1])
        return torch.stack(rows).long()

    def epochs(self, step: int) -> float:
        return step * self.bs / self.per_epoch


def val_windows(stream: torch.Tensor, seq_len: int) -> torch.Tensor:
    n = (len(stream) - 1) // seq_len
    return torch.stack([stream[i * seq_len:i * seq_len + seq_len + 1] for i in range(n)]).long()


def lm_loss(model, batch: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=batch[:, :-1], use_cache=False).logits
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), batch[:, 1:].reshape(-1))


@torch.inference_mode()
def evaluate(model, windows: torch.Tensor, batch_size: int = 16) -> float:
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        b = windows[i:i + batch_size]
        total += lm_loss(model, b).item() * b.size(0)
        count += b.size(0)
    model.train(was_training)
    return total / count


def lr_at(peak: float, step: int, warmup: int, decay: float, cosine: bool = False) -> float:
    """The one learning-rate schedule of every trainer here: `peak` times a linear warm-up over the first
    `warmup` steps, times a decay from 1 to a tenth, linear or, with `cosine`, a half cosine. decay: the
    share of the decay phase done, as the trainer counts it (steps, or the share of its time budget): 0 or less
    holds the peak, 1 or more stays at the floor."""
    done = min(1.0, max(0.0, decay))
    fall = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)) if cosine else 1.0 - 0.9 * done
    return peak * min(1.0, (step + 1) / warmup) * fall


def make_optimizer(model, lr: float):
    """AdamW with three groups: matrices (decayed), norm gains, and the input embedding (no decay,
    ``EMBED_LR_MULT`` x learning rate). Each group keeps its peak lr in ``base_lr``."""
    embed = [model.model.embed_tokens.weight]
    matrices = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed_tokens" not in n]
    gains = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": matrices, "weight_decay": WEIGHT_DECAY, "base_lr": lr},
         {"params": gains, "weight_decay": 0.0, "base_lr": lr},
         {"params": embed, "weight_decay": 0.0, "base_lr": lr * EMBED_LR_MULT}],
        lr=lr, betas=BETAS, eps=1e-8,
    )


# ---- checkpointing ---------------------------------------------------------------------------


def save_checkpoint(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


# ---- export ----------------------------------------------------------------------------------


def export_model(model, out_dir: Path, tokenizer_dir: Path, dtype: torch.dtype = torch.float16) -> Path:
    """Write a normal Hugging Face folder: half-precision safetensors, config, tokenizer."""
    import copy

    from transformers import GenerationConfig

    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    half = copy.deepcopy(model).to(dtype).eval()
    half.config.dtype = dtype
    half.generation_config = GenerationConfig(
        bos_token_id=SPECIAL_ID, eos_token_id=SPECIAL_ID, pad_token_id=SPECIAL_ID, do_sample=False,
    )
    half.save_pretrained(out_dir, safe_serialization=True)
    gen_path = out_dir / "generation_config.json"
    gen = json.loads(gen_path.read_text())
    gen.pop("max_length", None)  # avoids "both max_new_tokens and max_length" warnings
    gen_path.write_text(json.dumps(gen, indent=2) + "\n")
    for f in out_dir.iterdir():
        f.chmod(0o644)
    for name in TOKENIZER_FILES:
        shutil.copy2(tokenizer_dir / name, out_dir / name)
    return out_dir


def generate_samples(folder: Path, prompts: tuple[str, ...] | list[str], max_new_tokens: int = 60) -> list[str]:
    """Load ``folder`` like a user would (fp32) and greedily continue ``prompts`` (prompt + continuation)."""
    from .indent import greedy_continuations

    return [p + c for p, c in zip(prompts, greedy_continuations(folder, prompts, max_new_tokens))]


# ---- measurement -----------------------------------------------------------------------------


@torch.inference_mode()
def time_step(model, ctx: int, new: int, reps: int, rounds: int = 3) -> float:
    """Milliseconds of one cached forward of ``new`` tokens after a ``ctx``-token prefill: the smallest of
    ``rounds`` medians over ``reps`` calls (the smallest median: other work on the machine only adds time)."""
    ids = torch.randint(1, TIMING_VOCAB, (1, ctx), generator=torch.Generator().manual_seed(0))
    cache = model(input_ids=ids, use_cache=True).cache
    medians = []
    for _ in range(rounds):
        times = []
        for _rep in range(reps + 5):
            x = torch.randint(1, TIMING_VOCAB, (1, new))
            t = time.perf_counter()
            model(input_ids=x, cache=cache, use_cache=True)
            times.append(time.perf_counter() - t)
            cache.crop(-new)
        times = sorted(times[5:])
        medians.append(times[len(times) // 2])
    return 1e3 * min(medians)
