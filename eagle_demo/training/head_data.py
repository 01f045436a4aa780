"""Training data for the second-generation heads: the new target's own greedy continuations of corpus
prompts, and the features the heads learn from.

Prompts (token ids, each a window of the training stream inside one document, or a chat prompt):

* ``code``: ends at the start of a line of a ``.py`` file (after a line-break token);
* ``docstring``: ends right after a token holding ``\"\"\"`` in a ``.py`` file, so the target writes a docstring;
* ``prose``: ends at the start of a line of the Python documentation (``pydoc/``);
* ``chat``: ``<|endoftext|>Question: ...\\nAnswer:`` of an example of :mod:`eagle_demo.training.chat`.

Each prompt is at most :data:`PREFIX` tokens (shorter at a document's start, which then keeps its leading
``<|endoftext|>``). The target continues a batch of prompts greedily (left-padded, masked) until every row
holds :data:`SEQ_LEN` tokens; each row is then its own prompt and continuation, cut to ``SEQ_LEN``. A
``corpus_share`` of the sequences are plain corpus windows instead (what the target reads, not what it
writes). Features are those of :mod:`eagle_demo.training.heads`: the post-norm last hidden state
(EAGLE-1) and the inputs of layers 2, L//2, L-3 (EAGLE-3), from one plain forward over each sequence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from eagle_demo.target.features import Features
from eagle_demo.training.heads import feature_layers

SEQ_LEN = 256
PREFIX = 48
KINDS = {"code": 0.4, "docstring": 0.2, "prose": 0.25, "chat": 0.15}


@dataclass(frozen=True)
class DataRun:
    sequences: int = 4096
    corpus_share: float = 0.25
    batch: int = 256
    minutes: float = 1.0
    seed: int = 4321


def special_ids(tokenizer) -> tuple[set[int], set[int]]:
    """(line-break ids, ids whose text holds a triple quote) of a ``tokenizers.Tokenizer``."""
    breaks, quotes = set(), set()
    for i in range(tokenizer.get_vocab_size()):
        text = tokenizer.decode([i])
        if text in ("\n", "\r\n"):
            breaks.add(i)
        if '"""' in text:
            quotes.add(i)
    return breaks, quotes


def prompts(stream: torch.Tensor, spans: list[tuple[str, int, int]], tokenizer, chat_questions: list[str],
            counts: dict[str, int], seed: int) -> list[tuple[str, list[int]]]:
    """``(kind, ids)`` for each kind of :data:`KINDS`, ``counts[kind]`` of each (fewer when the corpus lacks them)."""
    from eagle_demo.training.chat import prompt_text

    g = torch.Generator().manual_seed(seed)
    breaks, quotes = special_ids(tokenizer)
    code = [(s, e) for n, s, e in spans if n.endswith(".py")]
    docs = [(s, e) for n, s, e in spans if n.startswith("pydoc/")]
    out = []
    for kind, pool, ends_after in (("code", code, breaks), ("docstring", code, quotes), ("prose", docs, breaks)):
        if not pool or not counts.get(kind) or not ends_after:
            continue
        marks = torch.tensor(sorted(ends_after))
        found, tries = 0, 0
        while found < counts[kind] and tries < 20 * counts[kind]:
            tries += 1
            s, e = pool[int(torch.randint(0, len(pool), (1,), generator=g))]
            where = torch.isin(stream[s + 1:e - 1], marks).nonzero().flatten() + s + 2  # [m] prompt ends
            if where.numel() == 0:
                continue
            p = int(where[int(torch.randint(0, where.numel(), (1,), generator=g))])  # the prompt is stream[.. p]
            out.append((kind, stream[max(s, p - PREFIX):p].tolist()))
            found += 1
    for q in chat_questions[:counts.get("chat", 0)]:
        ids = tokenizer.encode(prompt_text(q), add_special_tokens=False).ids
        out.append(("chat", ids[-PREFIX:]))
    return out


@torch.inference_mode()
def continue_greedy(target, batch: list[list[int]], seq_len: int = SEQ_LEN) -> torch.Tensor:
    """Each prompt and its greedy continuation, cut to ``seq_len`` tokens: ``[b, seq_len]`` on the CPU."""
    device = target.device
    width = max(len(p) for p in batch)
    new = seq_len - min(len(p) for p in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)  # [b, w] left-padded with 0
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    for i, p in enumerate(batch):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    out = target.generate(ids.to(device), attention_mask=mask.to(device), do_sample=False, max_new_tokens=new,
                          min_new_tokens=new, pad_token_id=0).cpu()  # [b, w + new]
    return torch.stack([out[i, width - len(p):width - len(p) + seq_len] for i, p in enumerate(batch)])


@torch.inference_mode()
def features(target, tokens: torch.Tensor, batch: int) -> dict:
    """The heads' data dict (see :func:`eagle_demo.training.heads.build_data`), tensors on the target's device."""
    layers = feature_layers(target.config.num_hidden_layers)
    last, fused = [], []
    for i in range(0, tokens.shape[0], batch):
        with Features(target.model, layers) as taken:
            out = target.model(tokens[i:i + batch].to(target.device), output_hidden_states=True)
        last.append(out.last_hidden_state.half())  # [b, T, H]
        fused.append(taken.of_batch(out.hidden_states).half())  # [b, T, 3H]
    return {"tokens": tokens.to(target.device), "last": torch.cat(last), "fused": torch.cat(fused), "layers": layers}


def build(target, stream: torch.Tensor, spans, tokenizer, chat_questions: list[str], run: DataRun,
          say=print) -> tuple[dict, dict]:
    """Generate until ``run.sequences`` or ``run.minutes``; returns the data dict and a record."""
    t0 = time.perf_counter()
    n_gen = round(run.sequences * (1 - run.corpus_share))
    counts = {k: round(n_gen * share) for k, share in KINDS.items()}
    todo = prompts(stream, spans, tokenizer, chat_questions, counts, run.seed)
    order = torch.randperm(len(todo), generator=torch.Generator().manual_seed(run.seed)).tolist()
    todo = sorted((todo[i] for i in order), key=lambda kp: len(kp[1]))  # similar lengths share a batch
    seqs, kinds = [], {}
    for i in range(0, len(todo), run.batch):
        if time.perf_counter() - t0 > run.minutes * 60:
            say(f"head data: time budget reached after {len(seqs)} of {len(todo)} continuations")
            break
        chunk = todo[i:i + run.batch]
        seqs.append(continue_greedy(target, [p for _, p in chunk]))
        for kind, _ in chunk:
            kinds[kind] = kinds.get(kind, 0) + 1
    generated = torch.cat(seqs) if seqs else torch.zeros(0, SEQ_LEN, dtype=torch.long)
    n_corpus = max(1, round(generated.shape[0] * run.corpus_share / (1 - run.corpus_share)))
    g = torch.Generator().manual_seed(run.seed + 1)
    starts = torch.randint(0, stream.numel() - SEQ_LEN - 1, (n_corpus,), generator=g)
    corpus = torch.stack([stream[s:s + SEQ_LEN] for s in starts.tolist()])  # [C, T]
    tokens = torch.cat([corpus, generated])  # [S, T]
    data = features(target, tokens, max(1, run.batch // 2))
    data["n_corpus"] = n_corpus
    record = {"sequences": int(tokens.shape[0]), "corpus": n_corpus, "generated": kinds,
              "seconds": round(time.perf_counter() - t0, 1)}
    say(f"head data: {record}")
    return data, record
