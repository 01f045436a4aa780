"""Static-shape drafting: the draft head over fixed K/V pools, so every draft forward of n tokens has the same
shapes and addresses and a round's whole draft (every depth's head forward and top-k) can be captured once as a
CUDA graph and replayed, as `static.StaticTarget` does for the target.

- `StaticDraftKV` holds one zeroed pool per layer [1, kv, capacity, d], sized to the run (prompt + max new
  tokens + tree + the entries a round's drafting writes, rounded up to `static.POOL_STEP`). A head call writes
  its n entries at `slots` (a device tensor the drafter sets) and attends over the whole pool under a full-width
  additive mask [1, 1, n, capacity]: the committed prefix and the round's own tree relation are visible,
  everything else (stale or unused) is not.
  Nothing is cropped: the drafter's `length` and the masks decide what counts.
- Three kinds of graph: a whole chain draft, a whole tree draft with its selection, and the extend after a
  round (n accepted pairs). Their inputs live in static buffers: the draft output to start from, the start
  slot (and the root token, or the pairs); every depth's position, slot and mask is computed from the start
  slot on the device. A round's draft is then one replay and no host read.
- Outputs of a replay are the graph's own buffers, rewritten by its next replay, so the drafter copies what it
  keeps. On CUDA (`graphs=True`) a key is captured on its second use; a capture failure sends that kind of graph
  back to eager for good. On a CPU the same static path runs eagerly, which is how the tests check it.
"""

from __future__ import annotations

import torch

from ..target.static import GRAPH_MAX_TOKENS, capture_graph
from .hot_vocab import HotVocab

__all__ = ["StaticDraft", "StaticDraftKV"]


class StaticDraftKV:
    """The draft's K/V in fixed per-layer pools (the `update` call the heads make, plus `slots`)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.slots: torch.Tensor | None = None  # [n] long, set by the drafter before each head call

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, *args, **kwargs):
        """key/value [1, kv, n, d] written at `slots` -> the layer's whole pools [1, kv, capacity, d]."""
        while len(self.keys) <= layer_idx:
            self.keys.append(key.new_zeros(*key.shape[:2], self.capacity, key.shape[-1]))
            self.values.append(value.new_zeros(*value.shape[:2], self.capacity, value.shape[-1]))
        k, v = self.keys[layer_idx], self.values[layer_idx]
        assert self.slots is not None, "the drafter sets the slots before each head call"
        k.index_copy_(2, self.slots, key)  # [1, kv, n, d] into [1, kv, cap, d]
        v.index_copy_(2, self.slots, value)
        return k, v

    def crop(self, tokens_to_remove: int) -> None:
        """Nothing to drop: entries past the drafter's length are masked out and later overwritten."""


class StaticDraft:
    """Graph keys: ("chain", longest, hot) a whole chain draft and ("tree", depth, top-k, total) a whole tree draft
    with its selection (`Drafter._static_tree`), every depth in one graph, masks and positions computed on the
    device from the start slot; ("extend", n) the head over n accepted pairs."""

    def __init__(self, head, capacity: int, graphs: bool):
        self.head, self.capacity = head, capacity
        weight = head.fc.weight
        self.device, self.dtype = weight.device, weight.dtype
        self.kv = StaticDraftKV(capacity)
        self.columns = torch.arange(capacity, device=self.device)  # [cap]
        self.hidden_min = torch.finfo(self.dtype).min
        self.graphs_on = graphs and self.device.type == "cuda"
        self.buffers: dict[tuple, tuple] = {}
        self.graphs: dict[tuple, tuple] = {}
        self.seen: dict[tuple, int] = {}
        self.hot_tables: dict[int, HotVocab] = {}
        self.capture_error: str | None = None
        self.failed: set[str] = set()  # graph kinds whose capture failed once: eager from then on

    def check(self, end: int) -> None:
        if end > self.capacity:
            raise ValueError(f"the static draft cache holds {self.capacity} positions; this round needs {end} "
                             "(raise the run's reserve or turn the static path off)")

    def _causal(self, rows: torch.Tensor) -> torch.Tensor:
        """rows [n] slots of new entries -> additive [1, 1, n, cap]: entry i sees slots 0..rows[i]."""
        visible = self.columns[None] <= rows[:, None]  # [n, cap]
        return torch.zeros(rows.shape[0], self.capacity, dtype=self.dtype, device=self.device).masked_fill_(
            ~visible, self.hidden_min)[None, None]

    def causal_mask(self, start: int, n: int) -> torch.Tensor:
        """[1, 1, n, cap]: new entry i (slot start + i) sees slots 0..start + i."""
        self.check(start + n)
        return self._causal(self.columns[:n] + start)

    def tree_depth(self, hidden: torch.Tensor, tokens: torch.Tensor, start: torch.Tensor, step: int, added: int,
                   block: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Tree depth `step` of a whole-tree call (`Drafter._static_tree`): the frontier hidden [n, H] and tokens
        [n] at position start + step - 2, in slots start + added .. + n - 1, each row seeing the prefix (slots
        before start) and its additive block [n, added + n] over this round's entries. g [n, H], logp, ids [n, k]."""
        n, m = tokens.shape[0], block.shape[1]
        self.kv.slots = start + added + self.columns[:n]  # [n]
        mask = self._causal((start - 1).expand(n))  # [1, 1, n, cap] the prefix visible
        mask[0, 0].index_copy_(1, start + self.columns[:m], block)  # this round's entries
        g = self.head(hidden, tokens, (start + (step - 2)).expand(n), self.kv, mask)  # [n, H] siblings share a position
        return (g, *self.head.topk(g, k))

    def extend(self, features: torch.Tensor, tokens: torch.Tensor, start: int) -> torch.Tensor:
        """The head over n accepted pairs at slots start..start+n-1 (causal): g [n, H]. Captured per n up to
        GRAPH_MAX_TOKENS; its positions and mask come from the start slot on the device."""
        n = tokens.shape[0]
        self.check(start + n)
        if n > GRAPH_MAX_TOKENS:
            return self._extend(features, tokens, torch.full((1,), start, device=self.device))
        key = ("extend", n)
        x = self.inputs(key, lambda: (features.new_zeros(features.shape), tokens.new_zeros(n),
                                       torch.zeros(1, dtype=torch.long, device=self.device)))
        x[0].copy_(features)
        x[1].copy_(tokens)
        x[2].fill_(start)
        return self.replayed(key, lambda: (self._extend(*x),))[0]

    def _extend(self, features: torch.Tensor, tokens: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
        positions = self.columns[:tokens.shape[0]] + start  # [n]
        self.kv.slots = positions
        return self.head(features, tokens, positions, self.kv, self._causal(positions), from_target=True)  # [n, H]

    def chain(self, g: torch.Tensor, start: torch.Tensor, longest: int, pick) -> tuple[torch.Tensor, ...]:
        """A chain draft of `longest` depths from the draft output g [1, H] (depth 1's logits), its depth-2 entry at
        slot start [1] (a device tensor: capturable): ids [longest], logp [longest] (`Drafter._static_chain`).
        pick: the draft's top-k (`Drafter._pick`: the head's, or a hot vocabulary's fixed table)."""
        logp, ids = pick(g, 1)  # [1, 1], [1, 1]
        all_ids, all_logp = [ids[0]], [logp[0]]
        for step in range(2, longest + 1):
            position = start + (step - 2)  # [1] its slot too
            self.kv.slots = position
            g = self.head(g, ids[0], position, self.kv, self._causal(position))  # [1, H]
            logp, ids = pick(g, 1)  # [1, 1], [1, 1]
            all_ids.append(ids[0])
            all_logp.append(logp[0])
        return torch.cat(all_ids), torch.cat(all_logp)  # [longest], [longest]

    def depth(self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
              mask: torch.Tensor, k: int, pick) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One chain depth, eagerly (a stopping chain without graphs, which stops depth by depth): the head on n
        tokens at `slots` and its top-k by `pick` (`Drafter._pick`): g [n, H], logp [n, k], ids [n, k]."""
        self.kv.slots = slots
        g = self.head(hidden, tokens, positions, self.kv, mask)  # [n, H]
        return (g, *pick(g, k))

    def replayed(self, key: tuple, run) -> tuple:
        """run()'s outputs: eagerly, or from the graph of `key`, captured on its second use (copied out: a replay
        rewrites its own buffers)."""
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.graphs_on and self.seen[key] >= 2 and key not in self.graphs and key[0] not in self.failed:
            self._capture(key, run)
        if key in self.graphs:
            graph, out = self.graphs[key]
            graph.replay()
            return tuple(t.clone() for t in out)
        return run()

    def inputs(self, key: tuple, make) -> tuple:
        if key not in self.buffers:
            self.buffers[key] = make()
        return self.buffers[key]

    def hot_table(self, hot: int) -> tuple[HotVocab, bool]:
        """(the fixed-address hot vocabulary of `hot` first ids, with room for a context id at every position of the
        pools; whether it was made just now). A replayed graph reads the context ids the drafter adds in place."""
        if hot not in self.hot_tables:
            self.hot_tables[hot] = HotVocab(self.head, hot, room=self.capacity, fixed=True)
            return self.hot_tables[hot], True
        return self.hot_tables[hot], False

    def clear_hot(self) -> None:
        for table in self.hot_tables.values():
            table.clear()

    def _capture(self, key: tuple, run) -> None:
        try:
            self.graphs[key] = capture_graph(run, self.device)
        except Exception as exc:  # noqa: BLE001 - any capture failure: this kind of graph runs eagerly from now on
            self.failed.add(key[0])
            self.capture_error = f"{key[0]}: {type(exc).__name__}: {exc}"
