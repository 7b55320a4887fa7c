"""``Timeline``: the snapshot after every micro-step of a recorded run, rebuilt on demand by replay."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from ..snapshot import Snapshot
from .ledger import Ledger
from .records import _op_end, op_position

FRAME_CACHE = 512  # rebuilt snapshots kept (most recently used first out)


class Timeline(Sequence):
    """The snapshot after every micro-step of a recorded run, rebuilt on demand: ``timeline[i]`` replays from the
    checkpoint before ``i``'s operation (at most ``CHECKPOINT_EVERY`` operations) and keeps the last
    ``FRAME_CACHE`` rebuilt snapshots; iterating (or slicing) replays once, front to back."""

    def __init__(self, rec: Ledger) -> None:
        self._rec = rec
        self._lru: OrderedDict[int, Snapshot] = OrderedDict()
        self._last_miss: int | None = None

    def __len__(self) -> int:
        return len(self._rec.steps)

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            start, stop, stride = i.indices(n)
            if stride != 1 or not self._rec.replayable:
                return [self[j] for j in range(start, stop, stride)]
            return list(self._rec.iter_snapshots(start, stop))
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"step {i} is outside this run's 0..{n - 1}")
        if not self._rec.replayable:
            return self._rec._eager[i]
        snap = self._lru.get(i)
        if snap is not None:
            self._lru.move_to_end(i)
            return snap
        rec = self._rec
        p = op_position(rec, i)
        lo = rec.ops[p].first_step
        want = {lo, i}  # the step and its operation's start (a frame compares with it); snapshots are the cost
        if self._last_miss is not None and 0 < p - self._last_miss <= 2 * rec.checkpoint_every:
            # walking forward (op by op, like a divergence search): the starts and ends of the stretch's ops too
            nxt = next((c.op for c in rec.checkpoints if c.op > p), len(rec.ops))
            for q in range(p + 1, nxt):
                want.update((rec.ops[q].first_step, _op_end(rec, q)))
        self._last_miss = p
        self._keep(rec._replay(max(op_position(rec, w) for w in want), want).got)
        return self._lru[i] if i in self._lru else rec._replay(p, {i}).got[i]

    def _keep(self, got: dict, room: int = FRAME_CACHE) -> None:
        for k, v in sorted(got.items()):
            self._lru[k] = v
            self._lru.move_to_end(k)
        while len(self._lru) > max(room, FRAME_CACHE):
            self._lru.popitem(last=False)

    def prefetch(self, steps) -> None:
        """Rebuild the snapshots of ``steps`` and of their operations' first steps (a frame compares with it),
        one replay per checkpoint stretch, and keep them all (the cache grows to hold them)."""
        rec = self._rec
        if not rec.replayable:
            return
        wanted = set()
        for s in steps:
            wanted.update((s, rec.ops[op_position(rec, s)].first_step))
        for k in sorted(wanted & self._lru.keys()):  # kept already: now the most recently used, so they stay
            self._lru.move_to_end(k)
        want = wanted - self._lru.keys()
        if not want:
            return
        by_cp: dict[int, set[int]] = {}
        cps = [c.op for c in rec.checkpoints]
        from bisect import bisect_right

        for w in want:
            by_cp.setdefault(bisect_right(cps, op_position(rec, w)) - 1, set()).add(w)
        got: dict = {}
        for _, ws in sorted(by_cp.items()):
            got.update(rec._replay(max(op_position(rec, w) for w in ws), ws).got)
        self._keep(got, room=len(wanted))

    def __iter__(self):
        if not self._rec.replayable:
            return iter(list(self._rec._eager))
        return self._rec.iter_snapshots(0, len(self))

    def __eq__(self, other) -> bool:
        if not isinstance(other, (Timeline, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Timeline of {len(self)} snapshots, rebuilt on demand>"
