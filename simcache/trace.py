"""Traces: every micro-step of a run, nested under its operation and the simulated call that made it.

Vocabulary
- An *operation* is one scheduler-level step of one actor (``request``, ``evict``, ``l3_ack`` ...).
- A *micro-step* is one thing the cache did inside it: ``call`` (entering a simulated function), ``split``,
  ``attach``, ``detach``, ``alloc`` / ``free`` / ``double_free`` / ``alloc_fail`` (pools), ``set_add`` /
  ``set_discard`` (leaf sets), ``lru_insert`` / ``lru_remove``, ``lock``, ``host_ref``, ``backup``,
  ``write_ack`` / ``load_ack`` / ``storage_ack``, ``cleaned_up``, ``assertion``.
- A node *goes stale* at the micro-step that leaves it detached while something still holds it: a leaf set, an
  LRU list, an in-flight map, a prefetch anchor, the insert loop's ``node``, or a simulated call that will resume
  after the eviction that detached it (``write_backup(node)`` under ``evict_host``). A guard's cleanup emits
  *cleaned-up*; a detached node entering a set, a list or an in-flight map again is *re-admitted*.

The ``Recorder`` is attached to a cache (``cache.recorder``) and to the pools, lists and sets through their
observers. It keeps a snapshot after every micro-step (``snapshots=True``) so a player can step back, and checks
the invariants: a violation counts only if it is still there when its operation ends (inside an operation
structures are legitimately out of step for a moment); its step is the micro-step where it began.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from .invariants import BOUNDARY_ONLY, INVARIANTS, check_all
from .keys import format_key
from .node import TreeNode
from .snapshot import Snapshot, pool_views, take
from .state import attached_ids

# entry points of eviction: a call frame outside the innermost of these that holds a node will resume using it
EVICTION_ENTRIES = frozenset({"evict", "evict_host", "evict_mamba", "evict_mamba_host"})
# calls that delete the node they are given (holding it is not using it)
DELETERS = frozenset({"_evict_regular", "_evict_host_leaf", "_delete_tombstone_leaf",
                      "_iteratively_delete_tombstone_leaf", "_cleanup_stale_node"})


@dataclass(frozen=True)
class MicroStep:
    index: int
    op: int
    actor: str | None
    kind: str
    stack: tuple[str, ...]
    node: int | None
    text: str
    detail: dict = field(default_factory=dict, compare=False, hash=False)

    def as_dict(self) -> dict:
        return dict(index=self.index, op=self.op, actor=self.actor, kind=self.kind, stack=list(self.stack),
                    node=self.node, text=self.text, detail=self.detail)


@dataclass(frozen=True)
class StaleEvent:
    step: int
    node: int
    key: str
    holders: tuple[str, ...]
    cause: str

    def as_dict(self) -> dict:
        return dict(step=self.step, node=self.node, key=self.key, holders=list(self.holders), cause=self.cause)


@dataclass(frozen=True)
class CleanupEvent:
    step: int
    node: int
    key: str
    reason: str
    removed: tuple[str, ...]

    def as_dict(self) -> dict:
        return dict(step=self.step, node=self.node, key=self.key, reason=self.reason, removed=list(self.removed))


@dataclass(frozen=True)
class Violation:
    step: int
    op: int
    invariant: str
    message: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class OpRecord:
    index: int
    actor: str | None
    op: dict
    first_step: int
    last_step: int = -1
    status: str = ""


def _nid(n) -> int | None:
    return n.id if isinstance(n, TreeNode) else None


def _keyed(n) -> str:
    return f"[{format_key(n.key)}]#{n.id}" if isinstance(n, TreeNode) else "none"


class Recorder:
    def __init__(self, snapshots: bool = True, invariants: bool = True) -> None:
        self.want_snapshots, self.want_invariants = snapshots, invariants
        self.steps: list[MicroStep] = []
        self.snapshots: list[Snapshot] = []
        self.ops: list[OpRecord] = []
        self.went_stale: list[StaleEvent] = []
        self.cleaned_up: list[CleanupEvent] = []
        self.readmitted: list[StaleEvent] = []
        self.violations: list[Violation] = []
        self.crashed = None
        self.initial: Snapshot | None = None
        self._frames: list[tuple[str, tuple]] = []
        self._current: TreeNode | None = None
        self._op = -1
        self._actor: str | None = None
        self._pending: dict[str, tuple[int, str]] = {}
        self._active: set[str] = set()
        self._known: dict[int, TreeNode] = {}
        self._detached: set[int] = set()
        self._pools = None  # pool views, recomputed after a pool event (slot scans are the costly part)
        self._leaked: dict = {}  # leaked slots as of the last operation boundary (inside one: in transit)
        self.cache = self.driver = None

    # --- wiring ---
    def attach(self, cache, driver=None) -> Recorder:
        self.cache, self.driver = cache, driver
        cache.recorder = self
        for pool in cache.pools.all().values():
            pool.observer = self._pool_event
        for lru in (cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list):
            lru.observer = self._lru_event
        for s in (cache.evictable_full_device_leaves, cache.evictable_full_host_leaves):
            s.observer = self._set_event
        if self.want_snapshots:
            self.initial = self._snap()
        return self

    def _live(self):
        return list(self.driver.live.values()) if self.driver is not None else []

    # --- operations ---
    def begin_op(self, index: int, op: dict, actor: str | None = None) -> None:
        self._op, self._actor = index, actor
        self.ops.append(OpRecord(index, actor, op, len(self.steps)))
        self._add("op", None, f"{actor + ': ' if actor else ''}{describe_op(op)}", dict(op=op))

    def end_op(self, index: int, status: str) -> None:
        rec = self.ops[-1]
        rec.status, rec.last_step = status, len(self.steps) - 1
        if self.want_snapshots and self.cache is not None:
            self._leaked = {n: v.leaked for n, v in pool_views(self.cache, self._live()).items()}
            self._pools = None
            if self.snapshots:  # the op's last frame shows the leaks as of the boundary
                self.snapshots[-1] = self._snap()
        if self.want_invariants:
            self._close_invariants()

    def crash(self, crash) -> None:
        self.crashed = crash
        self._add("assertion", None, f"{crash.outcome} in {crash.function}", crash.as_dict())

    # --- hooks called by the cache ---
    def enter(self, name: str, args: tuple) -> None:
        nodes = tuple(a for a in args if isinstance(a, TreeNode))
        self._frames.append((name, nodes))
        arg = nodes[0] if nodes else None
        text = f"{name}({_keyed(arg)})" if arg is not None else f"{name}()"
        self._add("call", arg, text, dict(function=name))

    def exit(self, name: str) -> None:
        if self._frames:
            self._frames.pop()

    def event(self, kind: str, **data) -> None:
        if kind == "current":
            self._current = data["node"]
            return
        node = data.get("node")
        text, detail = _describe(kind, data)
        if kind == "detach":  # mark what went stale first, so this step's snapshot already shows it
            self._after_detach(data)
        self._add(kind, node, text, detail)
        if kind == "cleaned_up":
            self.cleaned_up.append(CleanupEvent(len(self.steps) - 1, node.id, format_key(node.key), data["reason"],
                                                tuple(data["removed"])))
        elif kind == "backup":
            self._check_readmission(node, "ongoing_write_through")
        elif kind == "host_ref" and any(f in ("write_backup_storage", "prefetch_from_storage")
                                        for f, _ in self._frames[-2:]):
            in_backup = any(f == "write_backup_storage" for f, _ in self._frames)
            self._check_readmission(node, "ongoing_backup" if in_backup else "prefetch anchor")

    def _pool_event(self, pool: str, what: str, slots: tuple) -> None:
        self._pools = None
        self._add(what, None, f"{what.replace('_', ' ')} {pool} {list(slots)}", dict(pool=pool, slots=list(slots)))

    def _lru_event(self, kind: str, what: str, node) -> None:
        name = {"full": "full_lru_list", "mamba": "mamba_lru_list", "host_mamba": "mamba_host_lru_list"}[kind]
        self._add(f"lru_{what}", node, f"{what} {_keyed(node)} {'into' if what == 'insert' else 'from'} {name}",
                  dict(list=name))
        if what == "insert":
            self._check_readmission(node, name)

    def _set_event(self, name: str, what: str, node) -> None:
        self._add(f"set_{what}", node, f"{what} {_keyed(node)} {'to' if what == 'add' else 'from'} {name}",
                  dict(set=name))
        if what == "add":
            self._check_readmission(node, name)

    # --- the core of the ledger ---
    def _add(self, kind: str, node, text: str, detail: dict) -> None:
        step = MicroStep(len(self.steps), self._op, self._actor, kind, tuple(f for f, _ in self._frames),
                         _nid(node), text, detail)
        self.steps.append(step)
        if isinstance(node, TreeNode):
            self._known.setdefault(node.id, node)
        if self.want_snapshots and self.cache is not None:
            self.snapshots.append(self._snap())
        if self.want_invariants and self.cache is not None and kind != "op":
            self._check_step()

    def frame_holders(self) -> dict[int, tuple[str, ...]]:
        """node id -> the calls on the stack that hold it to use it (not the code deleting it)."""
        out: dict[int, tuple[str, ...]] = {}
        for _, nodes in self._frames:
            for n in nodes:
                if n.id not in out:
                    out[n.id] = tuple(x for x in self._user_frames(n) if not x.startswith("_insert_helper's"))
        return {k: v for k, v in out.items() if v}

    def _user_frames(self, node: TreeNode) -> list[str]:
        """Simulated calls on the stack that hold ``node`` to *use* it, as opposed to the code deleting it: every
        frame taking it as an argument, except a deleter's, and except a caller whose very next call deletes it."""
        frames, out = self._frames, []
        for i, (f, ns) in enumerate(frames):
            if not any(n is node for n in ns) or f in DELETERS:
                continue
            nxt = frames[i + 1] if i + 1 < len(frames) else None
            if nxt is not None and nxt[0] in DELETERS and any(n is node for n in nxt[1]):
                continue
            entry = next((g for g, _ in frames[i + 1 :] if g in EVICTION_ENTRIES), None)
            out.append(f"{f}()" + (f" (resumes after {entry})" if entry else ""))
        if self._current is node and any(f == "_insert_helper" for f, _ in frames):
            out.append("_insert_helper's loop node")
        return out

    def outer_frame_ids(self) -> frozenset[int]:
        """Detached nodes that a call on the stack still means to use (see ``_user_frames``)."""
        held = {n.id: n for _, ns in self._frames for n in ns if n.id in self._detached}
        if self._current is not None and self._current.id in self._detached:
            held[self._current.id] = self._current
        return frozenset(nid for nid, n in held.items() if self._user_frames(n))

    def _snap(self) -> Snapshot:
        if self._pools is None:
            self._pools = pool_views(self.cache, leaked=self._leaked)
        return take(self.cache, self._live(), self.frame_holders(), self._current,
                    tuple(f for f, _ in self._frames), self._known, self._pools, self.outer_frame_ids(),
                    self._detached)

    def _outer_holders(self, node: TreeNode) -> list[str]:
        """Holders of ``node`` that will use it after the current eviction returns."""
        c = self.cache
        names = [s.name for s in (c.evictable_full_device_leaves, c.evictable_full_host_leaves) if node in s]
        names += [lru.name for lru in (c.full_lru_list, c.mamba_lru_list, c.mamba_host_lru_list) if lru.in_list(node)]
        names += [m for m, d in (("ongoing_write_through", c.ongoing_write_through),
                                 ("ongoing_load_back", c.ongoing_load_back)) if d.get(node.id) is node]
        names += ["ongoing_backup" for n, _ in c.ongoing_backup.values() if n is node]
        names += ["prefetch anchor" for v in c.ongoing_prefetch.values() if v[0] is node]
        return names + self._user_frames(node)

    def _after_detach(self, data: dict) -> None:
        node, popped = data["node"], data["popped"]
        if popped is not node:
            return  # the slot no longer held it: SGLang's assertion fires next
        att = attached_ids(self.cache)
        gone, stack = [], [node]
        while stack:  # the detached node and its subtree
            n = stack.pop()
            if id(n) not in att:
                gone.append(n)
                stack.extend(c for c in n.children.values() if c.parent is n)
        cause = " <- ".join(reversed([f for f, _ in self._frames])) or "driver"
        for n in gone:
            self._detached.add(n.id)
            self._known.setdefault(n.id, n)
            holders = self._outer_holders(n)
            if holders:
                self.went_stale.append(StaleEvent(len(self.steps), n.id, format_key(n.key), tuple(holders),
                                                  f"detached by {cause}"))

    def _check_readmission(self, node, holder: str) -> None:
        if node is None or node is self.cache.root_node or node.id not in self._detached:
            return
        if id(node) not in attached_ids(self.cache):
            self.readmitted.append(StaleEvent(len(self.steps) - 1, node.id, format_key(node.key), (holder,),
                                              f"detached node re-admitted to {holder}"))

    # --- invariants ---
    def _check_step(self) -> None:
        names = [n for n in INVARIANTS if n not in BOUNDARY_ONLY]
        res = check_all(self.cache, self._live(), names)
        for name, problem in res.items():
            if problem is None:
                self._pending.pop(name, None)
            elif name not in self._pending:
                self._pending[name] = (len(self.steps) - 1, problem)

    def _close_invariants(self) -> None:
        res = check_all(self.cache, self._live())
        last = len(self.steps) - 1
        for name, problem in res.items():
            if problem is None:
                self._active.discard(name)
                continue
            if name not in self._active:
                step, msg = self._pending.get(name, (last, problem))
                self.violations.append(Violation(step, self._op, name, msg))
                self._active.add(name)
        self._pending.clear()

    # --- results ---
    def violation_counts(self) -> dict[str, int]:
        out = {name: 0 for name in INVARIANTS}
        for v in self.violations:
            out[v.invariant] += 1
        return out

    def sha256(self) -> str:
        blob = json.dumps([s.as_dict() for s in self.steps], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()


def describe_op(op: dict) -> str:
    kind = op.get("op")
    if "tokens" in op:
        return f"{kind} [{format_key(op['tokens'])}]"
    if kind == "inject":
        return f"inject {len(op['nodes'])} node(s)"
    rest = {k: v for k, v in op.items() if k not in ("op", "note")}
    return kind + ("" if not rest else " " + " ".join(f"{k}={v}" for k, v in rest.items()))


def _describe(kind: str, d: dict) -> tuple[str, dict]:
    n = d.get("node")
    if kind == "split":
        return (f"split {_keyed(n)}: prefix {_keyed(d['prefix'])} takes its slot",
                dict(prefix=d["prefix"].id))
    if kind == "attach":
        return (f"attach {_keyed(n)} under {_keyed(d['parent'])} at slot {d['slot']}",
                dict(parent=d["parent"].id, slot=str(d["slot"]), replaced=_nid(d["replaced"])))
    if kind == "detach":
        popped = d["popped"]
        what = "" if popped is n else f" (the slot held {_keyed(popped)})"
        return (f"detach {_keyed(n)} from {_keyed(d['parent'])} slot {d['slot']}{what}",
                dict(parent=d["parent"].id, slot=str(d["slot"]), popped=_nid(popped)))
    if kind == "lock":
        return (f"{'lock' if d['change'] > 0 else 'unlock'} {_keyed(n)} (full_lock_ref={d['full_lock_ref']})",
                dict(change=d["change"], full_lock_ref=d["full_lock_ref"]))
    if kind == "host_ref":
        return (f"host refs of {_keyed(n)}: host_ref={d['host_ref']} host_mamba_ref={d['host_mamba_ref']}",
                dict(host_ref=d["host_ref"], host_mamba_ref=d["host_mamba_ref"]))
    if kind == "backup":
        return f"{_keyed(n)} backed up to host {list(d['host'])}", dict(host=list(d["host"]))
    if kind in ("write_ack", "load_ack", "storage_ack"):
        return f"{kind.replace('_', ' ')} for {_keyed(n)}", {}
    if kind == "cleaned_up":
        removed = ", ".join(d["removed"]) or "nothing"
        return (f"stale guard: cleaned up {_keyed(n)} ({d['reason']}); removed from {removed}",
                dict(reason=d["reason"], removed=list(d["removed"]), warning=d["warning"]))
    return kind, {}
