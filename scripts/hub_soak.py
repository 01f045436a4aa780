"""Soak (not in CI): alternate loads of two pairs from olah on loopback, with a generation between loads, and report
RSS, open file handles and the HF cache size at the start, middle and end.

    python scripts/hub_soak.py --loads 200          # prints one JSON line at the end (and progress every 20 loads)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import hub_mirror  # noqa: E402


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hub-soak-"))
    server = hub_mirror.Olah(hub_mirror.build_repos(root), root / "olah").start()
    os.environ.pop("HF_HUB_OFFLINE", None)
    os.environ.update(HF_ENDPOINT=server.url, HF_HUB_CACHE=str(root / "hf-cache"))
    import psutil
    import torch

    from eagle_demo.app.registry import REGISTRY, make_key
    from eagle_demo.common.config import RunConfig

    torch.set_num_threads(1)
    pairs = [make_key("local/tiny-target", "local/tiny-eagle1", dtype="float32", device="cpu"),
             make_key("local/tiny-target", "local/tiny-eagle3", dtype="float32", device="cpu")]
    proc, rows, outputs, started = psutil.Process(), [], {}, time.monotonic()
    try:
        for i in range(args.loads):
            key = pairs[i % 2]
            session = REGISTRY.load(key)
            ids = session.encode("def fibonacci(n):\n")
            tokens = list(session.stream(ids, RunConfig(max_new_tokens=args.tokens), "eagle"))[-1].token_ids
            assert outputs.setdefault(i % 2, tokens) == tokens, f"load {i}: other tokens than the first time"
            del session
            if i in (1, args.loads // 2, args.loads - 1) or i % 20 == 19:
                gc.collect()
                rows.append(dict(load=i + 1, rss_mb=round(proc.memory_info().rss / 1e6, 1), files=proc.num_fds(),
                                 cache_mb=round(du(root / "hf-cache") / 1e6, 2),
                                 seconds=round(time.monotonic() - started, 1)))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        server.stop()
    first, last = rows[0], rows[-1]
    print(json.dumps(dict(loads=args.loads, rss_growth=round(last["rss_mb"] / first["rss_mb"] - 1, 4),
                          files_growth=last["files"] - first["files"], cache_mb=last["cache_mb"],
                          identical_outputs=True, first=first, last=last)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
