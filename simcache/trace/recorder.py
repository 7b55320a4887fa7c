"""The recorder: the ledger (``ledger``) plus a *checkpoint* (a deep copy of the cache and driver) every
``CHECKPOINT_EVERY`` operations, the way time-travel debuggers do, and the replay from the nearest checkpoint that
rebuilds any micro-step's snapshot on demand (``Timeline``) and dates a violation to its micro-step."""
from __future__ import annotations

import torch

from ..driver import InternalError
from ..explore.fastcopy import _COPIERS, _copy_node
from ..invariants import TrackedNode
from ..snapshot import node_view, pool_views
from .ledger import CHECKPOINT_EVERY, CHECKPOINT_STEPS, Ledger
from .records import Checkpoint, _op_end, op_position
from .replay import _apply, _Replayer
from .timeline import Timeline

_COPIERS.setdefault(TrackedNode, _copy_node)  # a checkpoint's copy of a tracked node is a plain TreeNode


class Recorder(Ledger):
    """Records a run as small events (micro-steps, went-stale / cleaned-up / re-admitted, violations) plus periodic
    checkpoints; ``snapshots`` is a lazy sequence that rebuilds any micro-step's snapshot on demand by replaying
    from the nearest checkpoint (see ``Timeline``)."""

    def __init__(self, snapshots: bool = True, invariants: bool = True, checkpoint_every: int = CHECKPOINT_EVERY,
                 memory_limit_mb: float | None = None, checkpoint_steps: int = CHECKPOINT_STEPS,
                 states: bool = False) -> None:
        super().__init__(snapshots, invariants, checkpoint_every, memory_limit_mb, checkpoint_steps, states)
        if snapshots:
            self.snapshots = Timeline(self)

    # --- checkpoints and replay ---
    def _checkpoint(self) -> Checkpoint:
        """The state before operation ``len(self.ops)``, deep-copied (fast_copy); nodes nothing can reach any more
        are frozen as ``NodeView``s once and shared by every later checkpoint."""
        from ..explore.fastcopy import _SHARED, fast_copy

        _SHARED.add(torch.cuda.Event)  # a pending copy's completion event (CUDA): shared, waiting on it is idempotent
        memo: dict = {id(self): self}
        stream = getattr(self.cache.controller, "stream", None)
        if stream is not None:
            memo[id(stream)] = stream
        cache, driver, current = fast_copy((self.cache, self.driver, self._current), memo)
        for pool in cache.pools.all().values():  # the data tensors are shared by fast_copy; a replay writes them
            pool.own_data()
        live = {}
        if self.want_snapshots:  # known nodes: copies of the reachable ones, the rest frozen once and shared
            for nid, n in list(self._unfrozen.items()):
                c = memo.get(id(n))
                if c is not None:
                    live[nid] = c
                else:
                    self._frozen[nid] = node_view(n, attached=False)
                    del self._unfrozen[nid]
        leaked = {} if self._ended == 0 or not self.want_snapshots else \
            {n: v.leaked for n, v in pool_views(self.cache, self._live()).items()}
        return Checkpoint(len(self.ops), len(self._log), cache, driver, current, len(self._known_log), live,
                          len(self._detached_log), leaked)

    def _replay(self, upto: int, want: set[int], date: bool = False) -> _Replayer:
        """Replay operations (positions in ``ops``) from the nearest checkpoint through ``upto`` on a copy of the
        checkpoint's state, snapshotting the micro-steps in ``want``; with ``date``, check the invariants after
        every micro-step of operation ``upto`` (and stop before its end, leaving ``_pending`` as it was)."""
        first = min(want) if want else self.ops[upto].first_step
        pos = op_position(self, first)
        cp = next(c for c in reversed(self.checkpoints) if c.op <= pos)
        r = _Replayer(self, cp, want, upto if date else None)
        for p in range(cp.op, upto + 1):
            rec = self.ops[p]
            r.begin_op(rec.index, rec.op, rec.actor)
            code, crash = _apply(r.driver, rec)
            if crash is not None:
                r.crash(crash)
            if date and p == upto:
                break
            r.end_op(rec.index, code)
            if r.n != rec.last_step + 1 or code != rec.status:
                raise InternalError(f"replaying operation {rec.index} gave {r.n - rec.first_step} micro-steps "
                                    f"and status {code!r}, the run had {rec.last_step + 1 - rec.first_step} and "
                                    f"{rec.status!r}: the run is not deterministic")
            if crash is not None:
                break
        return r

    def _firsts(self) -> list[int]:
        if len(getattr(self, "_firsts_cache", ())) != len(self.ops):
            self._firsts_cache = [o.first_step for o in self.ops]
        return self._firsts_cache

    def iter_snapshots(self, start: int = 0, stop: int | None = None):
        """Snapshots of micro-steps ``start..stop-1`` in order, one replay pass, one operation held at a time."""
        stop = len(self._log) if stop is None else stop
        if start >= stop:
            return
        p, last = op_position(self, start), op_position(self, stop - 1)
        while p <= last:
            nxt = next((c.op for c in self.checkpoints if c.op > p), None)  # replay one checkpoint's stretch
            hi = last if nxt is None else min(last, nxt - 1)
            lo_step, hi_step = max(start, self.ops[p].first_step), min(stop, _op_end(self, hi) + 1)
            got = self._replay(hi, set(range(lo_step, hi_step))).got
            for i in range(lo_step, hi_step):
                yield got[i]
            p = hi + 1

    def iter_op_ends(self, start: int, stop: int, fn):
        """``(p, fn(cache))`` after each operation ``p`` in ``start..stop-1`` (positions in ``ops``), replaying each
        checkpoint's stretch once; ``cache`` is a replay's copy, valid only inside ``fn``."""
        from bisect import bisect_right

        cps = [c.op for c in self.checkpoints]
        p, stop = start, min(stop, len(self.ops))  # past the last operation there is nothing to replay
        while p < stop:
            k = bisect_right(cps, p) - 1
            cp = self.checkpoints[k]
            end = min(stop, cps[k + 1] if k + 1 < len(cps) else len(self.ops))
            r = _Replayer(self, cp, set(), None)
            for q in range(cp.op, end):
                rec = self.ops[q]
                r.begin_op(rec.index, rec.op, rec.actor)
                code, crash = _apply(r.driver, rec)
                if crash is not None:
                    r.crash(crash)
                r.end_op(rec.index, code)
                if q >= p:
                    yield q, fn(r.cache)
            p = end
