"""The replayer: re-runs recorded operations from a checkpoint with the recorder's bookkeeping but no stored events
(it counts micro-steps, snapshots the wanted ones and, dating a violation, checks invariants after each)."""
from __future__ import annotations

from ..driver import InternalError
from ..node import TreeNode
from ..operations import RAISED
from ..snapshot import pool_views
from ..state import is_attached
from .ledger import Ledger
from .records import Checkpoint, op_position


def _apply(drv, rec) -> tuple[str, object]:
    """Re-run recorded operation ``rec`` on a replay's driver: its status and, if it raised, its ``Crash``."""
    code = drv.step(rec.op, rec.index)
    return code, (drv.cache.crashed if code == RAISED else None)

class _Replayer(Ledger):
    """Re-runs operations from a checkpoint with the recorder's bookkeeping (what is known, detached, current) but
    no stored events: it counts micro-steps, snapshots the wanted ones, and (dating) checks invariants per step."""

    def __init__(self, main: Ledger, cp: Checkpoint, want: set[int], date_op: int | None) -> None:
        super().__init__(snapshots=False, invariants=False, memory_limit_mb=0)
        from ..explore.fastcopy import fast_copy

        memo: dict = {id(main): self}
        stream = getattr(cp.cache.controller, "stream", None)
        if stream is not None:
            memo[id(stream)] = stream
        cache, driver, self._current = fast_copy((cp.cache, cp.driver, cp.current), memo)
        for pool in cache.pools.all().values():
            pool.own_data()  # a copy of its own, with the numpy view following it (not writing into the original)
        if want:  # what snapshots draw: the nodes known at the checkpoint, as they were there
            live, frozen = cp.live, main._frozen
            self._known = {nid: frozen[nid] if (c := live.get(nid)) is None else memo[id(c)]
                           for nid in main._known_log[: cp.known]}
        self._detached = set(main._detached_log[: cp.detached])
        self._leaked = dict(cp.leaked)
        self.main, self.n, self.want, self.got = main, cp.step, want, {}
        self._pos = cp.op - 1
        self._date_pos = date_op
        # operations whose end recomputes the leaks (a wanted step lies in them or just after them)
        self._leak_at = set()
        for w in want:
            p = op_position(main, w)
            self._leak_at.update((p - 1, p))
        super().attach(cache, driver)

    def attach(self, cache, driver=None):  # pragma: no cover - wired in __init__
        raise InternalError("a replayer is attached when it is made")

    def begin_op(self, index: int, op: dict, actor: str | None = None) -> None:
        self._pos += 1
        self._op, self._actor = index, actor
        self._add("op", None, "", {})

    def end_op(self, index: int, status: str) -> None:
        if self._pos in self._leak_at:
            self._leaked = {n: v.leaked for n, v in pool_views(self.cache, self._live()).items()}
            self._pools = None
            if self.n - 1 in self.want:  # the operation's last frame shows the leaks as of the boundary
                self.got[self.n - 1] = self._snap()

    def _add(self, kind: str, node, text: str, detail: dict) -> None:
        i = self.n
        self.n += 1
        if node.__class__ is TreeNode and node.id not in self._known:
            self._know(node)
        if i in self.want:
            self.got[i] = self._snap()
        if self._pos == self._date_pos and kind != "op":
            self._check_step(i)

    def _after_detach(self, data: dict) -> None:
        node, popped = data["node"], data["popped"]
        if popped is not node:
            return
        stack = [node]
        while stack:
            n = stack.pop()
            if not is_attached(self.cache, n):
                self._detached.add(n.id)
                if n.id not in self._known:
                    self._know(n)
                stack.extend(c for c in n.children.values() if c.parent is n)

    def _check_readmission(self, node, holder: str) -> None:
        return None

    # the hooks without the wording (a replay only counts micro-steps and keeps the bookkeeping snapshots need)
    def enter(self, name: str, args: tuple) -> None:
        nodes = tuple([a for a in args if a.__class__ is TreeNode]) if args else ()
        self._frames.append((name, nodes))
        self._stacks.append(self._stack)
        self._stack = self._stack + (name,)
        self._add("call", nodes[0] if nodes else None, "", None)

    def event(self, kind: str, **data) -> None:
        if kind == "current":
            self._current = data["node"]
            return
        if kind == "detach":
            self._after_detach(data)
        self._add(kind, data.get("node"), "", None)

    def _pool_event(self, pool: str, what: str, slots: tuple) -> None:
        self._pools = None
        self._add(what, None, "", None)

    def _lru_event(self, kind: str, what: str, node) -> None:
        self._add("", node, "", None)

    def _set_event(self, name: str, what: str, node) -> None:
        self._add("", node, "", None)
