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
observers. It records small events only (a micro-step's size does not depend on the size of the tree) plus a
*checkpoint* (a deep copy of the cache and driver) every ``CHECKPOINT_EVERY`` operations, the way time-travel
debuggers do: the snapshot of any micro-step is rebuilt on demand by deterministic replay from the nearest
checkpoint (``Recorder.snapshots`` is a lazy ``Timeline``), so nothing builds snapshots nobody looks at.

Invariants: a violation counts only if it is still there when its operation ends (inside an operation structures
are legitimately out of step for a moment); its step is the micro-step where it began. They are checked at
operation boundaries; when one starts failing, that operation is replayed micro-step by micro-step to date it.

Memory: the recorder checks the process's memory as it goes and stops a run that outgrows ``memory_limit_mb``
(``$SIMCACHE_MEMORY_LIMIT_MB``, default 4096) with a ``TraceLimitError`` that says how to narrow it.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from json.encoder import encode_basestring_ascii as _ebs

import torch

from .driver import InternalError
from .errors import ConfigError, SimcacheError
from .explore.fastcopy import _COPIERS, _copy_node
from .invariants import BOUNDARY_ONLY, INVARIANTS, BoundaryCheck, TrackedNode, check_all, failing
from .keys import format_key
from .node import TreeNode
from .operations import RAISED, describe_op
from .snapshot import NodeView, Snapshot, node_view, pool_views, take
from .state import holders_of, is_attached

_COPIERS.setdefault(TrackedNode, _copy_node)  # a checkpoint's copy of a tracked node is a plain TreeNode
CHECKPOINT_EVERY = 32  # operations between two checkpoints: a rebuild replays at most this many
CHECKPOINT_STEPS = 160  # ... or about this many micro-steps, whichever comes first (bounds a seek's replay)
DATING_SPREAD = 4  # without snapshots, checkpoints serve only to date a violation: this many times further apart
FRAME_CACHE = 512  # rebuilt snapshots kept (most recently used first out)
DEFAULT_MEMORY_LIMIT_MB = 4096
STEP_INVARIANTS = tuple(n for n in INVARIANTS if n not in BOUNDARY_ONLY)
_CALL_DETAIL: dict[str, dict] = {}
_SHARED_DETAIL_IDS: set[int] = set()  # ids of ``_CALL_DETAIL``'s dicts (never freed: ids stay theirs)
_LRU_NAMES = {"full": "full_lru_list", "mamba": "mamba_lru_list", "host_mamba": "mamba_host_lru_list"}

# entry points of eviction: a call frame outside the innermost of these that holds a node will resume using it
EVICTION_ENTRIES = frozenset({"evict", "evict_host", "evict_mamba", "evict_mamba_host"})
# calls that delete the node they are given (holding it is not using it)
DELETERS = frozenset({"_evict_regular", "_evict_host_leaf", "_delete_tombstone_leaf",
                      "_iteratively_delete_tombstone_leaf", "_cleanup_stale_node"})


@dataclass(frozen=True, slots=True)
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


class TraceLimitError(SimcacheError):
    """A run whose trace would outgrow the memory limit."""


def memory_limit() -> float:
    """The memory ceiling in MB: ``$SIMCACHE_MEMORY_LIMIT_MB`` or ``DEFAULT_MEMORY_LIMIT_MB``."""
    text = os.environ.get("SIMCACHE_MEMORY_LIMIT_MB")
    if text is None:
        return float(DEFAULT_MEMORY_LIMIT_MB)
    t = text.strip()
    value = float(t) if t.isascii() and t.replace(".", "", 1).isdigit() and len(t) <= 12 else 0.0
    if not 0 < value <= (1 << 20):
        raise ConfigError(f"the environment variable SIMCACHE_MEMORY_LIMIT_MB must be megabytes above 0 (plain "
                          f"digits, at most 1048576), not {text[:30]!r}; e.g. export SIMCACHE_MEMORY_LIMIT_MB=4096, "
                          f"or unset it")
    return value


def rss_mb() -> float | None:
    """This process's resident memory in MB (None where the platform does not say)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):
        try:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        except Exception:  # noqa: BLE001 -- no way to tell: no ceiling
            return None


@dataclass(frozen=True)
class Checkpoint:
    op: int  # position in ``Recorder.ops`` of the operation that starts from this state
    step: int  # index of that operation's first micro-step
    cache: object
    driver: object
    current: object
    known: int  # how many of the recorder's known nodes (``_known_log``) there were
    live: dict  # node id -> TreeNode copy, for known nodes still reachable (the rest: ``Recorder._frozen``)
    detached: int  # how many node ids had been detached (``_detached_log``)
    leaked: dict


def op_position(trace, step: int) -> int:
    """Position in ``trace.ops`` of the operation micro-step ``step`` belongs to."""
    from bisect import bisect_right

    firsts = trace._firsts() if hasattr(trace, "_firsts") else [o.first_step for o in trace.ops]
    return max(0, bisect_right(firsts, step) - 1)


def _op_end(trace, p: int) -> int:
    o = trace.ops[p]
    return o.last_step if o.last_step >= 0 else len(trace.steps) - 1


def _nid(n) -> int | None:
    return n.id if isinstance(n, TreeNode) else None


_KEY_TEXT: dict[int, tuple] = {}  # id(key) -> (key, its text): keys are immutable tuples, often long


def _key_text(key) -> str:
    hit = _KEY_TEXT.get(id(key))
    if hit is not None and hit[0] is key:
        return hit[1]
    if len(_KEY_TEXT) > 4096:
        _KEY_TEXT.clear()
    text = format_key(key)
    if type(key) is tuple:
        _KEY_TEXT[id(key)] = (key, text)
    return text


def _keyed(n) -> str:
    return f"[{_key_text(n.key)}]#{n.id}" if isinstance(n, TreeNode) else "none"


class Recorder:
    """Records a run as small events (micro-steps, went-stale / cleaned-up / re-admitted, violations) plus periodic
    checkpoints; ``snapshots`` is a lazy sequence that rebuilds any micro-step's snapshot on demand by replaying
    from the nearest checkpoint (see ``Timeline``)."""

    def __init__(self, snapshots: bool = True, invariants: bool = True, checkpoint_every: int = CHECKPOINT_EVERY,
                 memory_limit_mb: float | None = None, checkpoint_steps: int = CHECKPOINT_STEPS,
                 states: bool = False) -> None:
        self.want_snapshots, self.want_invariants = snapshots, invariants
        self.want_states = states  # checkpoints to rebuild operation ends (``iter_op_ends``) without snapshots
        self.checkpoint_every = max(1, int(checkpoint_every))
        self.checkpoint_steps = max(1, int(checkpoint_steps))
        self.memory_limit_mb = memory_limit() if memory_limit_mb is None else memory_limit_mb
        self.steps: list[MicroStep] = []
        self.snapshots: Timeline | list = Timeline(self) if snapshots else []
        self.ops: list[OpRecord] = []
        self.went_stale: list[StaleEvent] = []
        self.cleaned_up: list[CleanupEvent] = []
        self.readmitted: list[StaleEvent] = []
        self.violations: list[Violation] = []
        self.crashed = None
        self.initial: Snapshot | None = None
        self.checkpoints: list[Checkpoint] = []
        # replayable: driven by ``ops_run.execute`` (which says so), so any operation can be re-run from a
        # checkpoint. A recorder driven by hand is not: it snapshots and checks invariants eagerly, per micro-step.
        self.replayable = False
        self._eager: list[Snapshot] = []
        self._fp_memo: dict = {}  # fingerprints of unchanged nodes, between boundary checks
        self._frames: list[tuple[str, tuple]] = []
        self._stack: tuple[str, ...] = ()
        self._current: TreeNode | None = None
        self._op = -1
        self._actor: str | None = None
        self._pending: dict[str, tuple[int, str]] = {}
        self._active: set[str] = set()
        self._known: dict[int, TreeNode] = {}
        self._known_log: list[int] = []  # ``_known``'s ids in order: a checkpoint keeps their count, not a copy
        self._unfrozen: dict[int, TreeNode] = {}  # known nodes not yet found unreachable at a checkpoint
        self._detached: set[int] = set()
        self._detached_log: list[int] = []  # ``_detached`` in order of arrival (a checkpoint keeps their count)
        self._frozen: dict[int, NodeView] = {}  # nodes nothing can reach any more, as they were left
        self._pools = None  # pool views, recomputed after a pool event (slot scans are the costly part)
        self._leaked: dict = {}  # leaked slots as of the last operation boundary (inside one: in transit)
        self._ended = 0  # operations ended so far
        self._bc: BoundaryCheck | None = None  # the boundary check kept up to date from events (replayable runs)
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
        if self.want_invariants and self.replayable:
            self._bc = BoundaryCheck(cache)
        if self.want_snapshots:
            self.initial = self._snap()
        return self

    def _live(self):
        return list(self.driver.live.values()) if self.driver is not None else []

    # --- operations ---
    def begin_op(self, index: int, op: dict, actor: str | None = None) -> None:
        if self.replayable and (self.want_snapshots or self.want_invariants or self.want_states) and \
                self.cache is not None and (
                not self.checkpoints or len(self.ops) - self.checkpoints[-1].op >= self.checkpoint_every * (
                    1 if self.want_snapshots else DATING_SPREAD)
                or (self.want_snapshots and len(self.steps) - self.checkpoints[-1].step >= self.checkpoint_steps)):
            self.checkpoints.append(self._checkpoint())
        self._op, self._actor = index, actor
        self.ops.append(OpRecord(index, actor, op, len(self.steps)))
        self._add("op", None, describe_op(op, actor), dict(op=op))

    def end_op(self, index: int, status: str) -> None:
        rec = self.ops[-1]
        rec.status, rec.last_step = status, len(self.steps) - 1
        self._ended += 1
        if not self.replayable and self.want_snapshots and self.cache is not None:
            self._leaked = {n: v.leaked for n, v in pool_views(self.cache, self._live()).items()}
            self._pools = None
            if self._eager:  # the op's last frame shows the leaks as of the boundary
                self._eager[-1] = self._snap()
        if self.want_invariants and self.cache is not None:
            self._close_invariants()
        if self._ended == 1 or self._ended % 64 == 0:
            self._check_memory()

    def crash(self, crash) -> None:
        self.crashed = crash
        self._add("assertion", None, f"{crash.outcome} in {crash.function}", crash.as_dict())

    # --- hooks called by the cache ---
    def enter(self, name: str, args: tuple) -> None:
        nodes = tuple(a for a in args if isinstance(a, TreeNode))
        self._frames.append((name, nodes))
        self._stack = self._stack + (name,)
        arg = nodes[0] if nodes else None
        text = f"{name}({_keyed(arg)})" if arg is not None else f"{name}()"
        detail = _CALL_DETAIL.get(name)
        if detail is None:
            detail = _CALL_DETAIL[name] = dict(function=name)  # shared by every call of ``name``: read-only
            _SHARED_DETAIL_IDS.add(id(detail))
        self._add("call", arg, text, detail)

    def exit(self, name: str) -> None:
        if self._frames:
            self._frames.pop()
            self._stack = self._stack[:-1]

    def event(self, kind: str, **data) -> None:
        if kind == "current":
            self._current = data["node"]
            return
        node = data.get("node")
        text, detail = _describe(kind, data)
        if self._bc is not None and kind in ("attach", "detach", "split"):  # children or places changed
            if kind == "split":
                self._bc.moved(node)
                self._bc.moved(data["prefix"])
            else:
                for n in (node, data.get("replaced"), data.get("popped")):
                    if n is not None:
                        self._bc.relinked(data["parent"], n)
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
        if self._bc is not None:
            self._bc.pool_event(pool, what, slots)
        self._add(what, None, f"{what.replace('_', ' ')} {pool} {list(slots)}", dict(pool=pool, slots=list(slots)))

    def _lru_event(self, kind: str, what: str, node) -> None:
        name = _LRU_NAMES[kind]
        self._add(f"lru_{what}", node, f"{what} {_keyed(node)} {'into' if what == 'insert' else 'from'} {name}",
                  dict(list=name))
        if what == "insert":
            self._check_readmission(node, name)

    def _set_event(self, name: str, what: str, node) -> None:
        if self._bc is not None:
            self._bc.see(node)
            self._bc.seen.add(node)  # its membership changed: its leaf-set record with it
        self._add(f"set_{what}", node, f"{what} {_keyed(node)} {'to' if what == 'add' else 'from'} {name}",
                  dict(set=name))
        if what == "add":
            self._check_readmission(node, name)

    # --- the core of the ledger: one small event per micro-step, whatever the size of the tree ---
    def _add(self, kind: str, node, text: str, detail: dict) -> None:
        if isinstance(node, TreeNode):
            self.steps.append(MicroStep(len(self.steps), self._op, self._actor, kind, self._stack, node.id, text,
                                        detail))
            if node.id not in self._known:
                self._know(node)
            if self._bc is not None:
                self._bc.see(node)
        else:
            self.steps.append(MicroStep(len(self.steps), self._op, self._actor, kind, self._stack, None, text,
                                        detail))
        if not self.replayable and self.cache is not None:  # driven by hand: no replay, so do it now
            if self.want_snapshots:
                self._eager.append(self._snap())
            if self.want_invariants and kind != "op":
                self._check_step(len(self.steps) - 1)

    def _know(self, node: TreeNode) -> None:
        self._known[node.id] = node
        self._known_log.append(node.id)
        self._unfrozen[node.id] = node

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
        return take(self.cache, self._live(), self.frame_holders(), self._current, self._stack, self._known,
                    self._pools, self.outer_frame_ids(), self._detached)

    def holders_of(self, node: TreeNode) -> list[str]:
        """Who holds ``node`` now: the structures (the ledger, ``state.holders_of``) and the calls that will
        resume using it (``_user_frames``)."""
        return holders_of(self.cache, node) + self._user_frames(node)

    def _after_detach(self, data: dict) -> None:
        node, popped = data["node"], data["popped"]
        if popped is not node:
            return  # the slot no longer held it: SGLang's assertion fires next
        gone, stack = [], [node]
        while stack:  # the detached node and its subtree
            n = stack.pop()
            if not is_attached(self.cache, n):
                gone.append(n)
                stack.extend(c for c in n.children.values() if c.parent is n)
        cause = " <- ".join(reversed(self._stack)) or "driver"
        for n in gone:
            if n.id not in self._detached:
                self._detached.add(n.id)
                self._detached_log.append(n.id)
            if n.id not in self._known:
                self._know(n)
            holders = self.holders_of(n)
            if holders:
                self.went_stale.append(StaleEvent(len(self.steps), n.id, format_key(n.key), tuple(holders),
                                                  f"detached by {cause}"))

    def _check_readmission(self, node, holder: str) -> None:
        if node is None or node is self.cache.root_node or node.id not in self._detached:
            return
        if not is_attached(self.cache, node):
            self.readmitted.append(StaleEvent(len(self.steps) - 1, node.id, format_key(node.key), (holder,),
                                              f"detached node re-admitted to {holder}"))

    # --- invariants: checked at operation boundaries; a new violation is dated by replaying its operation ---
    def _check_step(self, step: int) -> None:
        res = check_all(self.cache, self._live(), STEP_INVARIANTS)
        for name, problem in res.items():
            if problem is None:
                self._pending.pop(name, None)
            elif name not in self._pending:
                self._pending[name] = (step, problem)

    def _close_invariants(self) -> None:
        live = self._live()
        bad = self._bc.failing(live) if self._bc is not None else failing(self.cache, live, self._fp_memo)
        new = [name for name in INVARIANTS if name in bad and name not in self._active]
        res = check_all(self.cache, live, new) if new else {}  # the wording, only for violations that begin
        last = len(self.steps) - 1
        if self.replayable and any(name not in BOUNDARY_ONLY for name in new):
            # a violation begins in this operation: replay it micro-step by micro-step to find where it began
            self._pending = self._replay(len(self.ops) - 1, set(), date=True)._pending
        self._active &= bad
        for name in new:
            problem = res[name]
            if problem is None:
                raise InternalError(f"invariant {name}: the one-pass check and the named check disagree")
            step, msg = self._pending.get(name, (last, problem))
            self.violations.append(Violation(step, self._op, name, msg))
            self._active.add(name)
        self._pending = {}

    # --- checkpoints and replay ---
    def _checkpoint(self) -> Checkpoint:
        """The state before operation ``len(self.ops)``, deep-copied (fast_copy); nodes nothing can reach any more
        are frozen as ``NodeView``s once and shared by every later checkpoint."""
        from .explore.fastcopy import _SHARED, fast_copy

        _SHARED.add(torch.cuda.Event)  # a pending copy's completion event (CUDA): shared, waiting on it is idempotent
        memo: dict = {id(self): self}
        stream = getattr(self.cache.controller, "stream", None)
        if stream is not None:
            memo[id(stream)] = stream
        cache, driver, current = fast_copy((self.cache, self.driver, self._current), memo)
        for pool in cache.pools.all().values():  # the data tensors are shared by fast_copy; a replay writes them
            pool.data = pool.data.clone()
            pool.rebind_view()  # the numpy view must follow the copy, not write into the original
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
        return Checkpoint(len(self.ops), len(self.steps), cache, driver, current, len(self._known_log), live,
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

    def snapshot_at(self, step: int) -> Snapshot:
        """The snapshot after micro-step ``step``, rebuilt by replay (see ``Timeline``, which caches them)."""
        return self.snapshots[step] if isinstance(self.snapshots, Timeline) else Timeline(self)[step]

    def iter_snapshots(self, start: int = 0, stop: int | None = None):
        """Snapshots of micro-steps ``start..stop-1`` in order, one replay pass, one operation held at a time."""
        stop = len(self.steps) if stop is None else stop
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
        p = start
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

    def _check_memory(self) -> None:
        used = rss_mb()
        if used is not None and self.memory_limit_mb and used > self.memory_limit_mb:
            k = self.ops[-1].index if self.ops else 0
            raise TraceLimitError(
                f"this run's trace outgrew the memory limit of {self.memory_limit_mb:.0f} MB at operation {k} "
                f"({used:.0f} MB in use); narrow it to fewer operations with --ops A:B "
                f"(e.g. --ops {k // 2}:{max(k, 1)}), "
                f"or raise the limit with --memory-limit MB")

    # --- results ---
    def violation_counts(self) -> dict[str, int]:
        out = {name: 0 for name in INVARIANTS}
        for v in self.violations:
            out[v.invariant] += 1
        return out

    def sha256(self) -> str:
        """The hash of ``json.dumps([step.as_dict() ...], sort_keys=True, default=str)``, streamed a step at a time
        (the same bytes, written by ``_step_json`` without building each step's dict)."""
        h = hashlib.sha256(b"[")
        enc = json.JSONEncoder(sort_keys=True, default=str).encode
        memo: dict = {"a": {}, "k": {}}
        steps = self.steps
        for lo in range(0, len(steps), 2048):  # json.dumps of a list joins its items with ", "
            if lo:
                h.update(b", ")
            h.update(", ".join([_step_json(s, enc, memo) for s in steps[lo : lo + 2048]]).encode())
        h.update(b"]")
        return h.hexdigest()


def _step_json(s: MicroStep, enc, memo: dict) -> str:
    """``json.dumps(s.as_dict(), sort_keys=True, default=str)``; ``memo`` keeps the text of shared parts (the call
    stack tuple, a call's shared detail, the actor and kind) by identity."""
    stack, detail = s.stack, s.detail
    st = memo.get(id(stack))
    if st is None or st[0] is not stack:
        st = memo[id(stack)] = (stack, enc(list(stack)))
    if detail.__class__ is dict and not detail:
        dt = "{}"
    elif id(detail) in _SHARED_DETAIL_IDS:
        dt = memo.get(("d", id(detail)))
        if dt is None:
            dt = memo[("d", id(detail))] = enc(detail)
    elif detail.__class__ is dict and detail.keys() == _POOL_DETAIL and detail["pool"].__class__ is str and \
            detail["slots"].__class__ is list and set(map(type, detail["slots"])) <= _INT:
        dt = f'{{"pool": {_ebs(detail["pool"])}, "slots": [{", ".join(map(str, detail["slots"]))}]}}'
    else:
        dt = enc(detail)
    actors, kinds = memo["a"], memo["k"]
    a = actors.get(s.actor)
    if a is None:
        a = actors[s.actor] = enc(s.actor)
    k = kinds.get(s.kind)
    if k is None:
        k = kinds[s.kind] = enc(s.kind)
    node, index, op, text = s.node, s.index, s.op, s.text
    node = str(node) if node.__class__ is int else enc(node)
    index = str(index) if index.__class__ is int else enc(index)
    op = str(op) if op.__class__ is int else enc(op)
    text = _ebs(text) if text.__class__ is str else enc(text)
    return (f'{{"actor": {a}, "detail": {dt}, "index": {index}, "kind": {k}, "node": {node}, '
            f'"op": {op}, "stack": {st[1]}, "text": {text}}}')


_POOL_DETAIL = {"pool", "slots"}
_INT = {int}


def _apply(drv, rec) -> tuple[str, object]:
    """Re-run recorded operation ``rec`` on a replay's driver: its status and, if it raised, its ``Crash``."""
    code = drv.step(rec.op, rec.index)
    return code, (drv.cache.crashed if code == RAISED else None)


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


class _Replayer(Recorder):
    """Re-runs operations from a checkpoint with the recorder's bookkeeping (what is known, detached, current) but
    no stored events: it counts micro-steps, snapshots the wanted ones, and (dating) checks invariants per step."""

    def __init__(self, main: Recorder, cp: Checkpoint, want: set[int], date_op: int | None) -> None:
        super().__init__(snapshots=False, invariants=False, memory_limit_mb=0)
        from .explore.fastcopy import fast_copy

        memo: dict = {id(main): self}
        stream = getattr(cp.cache.controller, "stream", None)
        if stream is not None:
            memo[id(stream)] = stream
        cache, driver, self._current = fast_copy((cp.cache, cp.driver, cp.current), memo)
        for pool in cache.pools.all().values():
            pool.data = pool.data.clone()
            pool.rebind_view()  # the numpy view must follow the copy, not write into the original
        if want:  # what snapshots draw: the nodes known at the checkpoint, as they were there
            live, frozen = cp.live, main._frozen
            self._known = {nid: frozen[nid] if (c := live.get(nid)) is None else memo[id(c)]
                           for nid in main._known_log[: cp.known]}
        self._detached = set(main._detached_log[: cp.detached])
        self._leaked = dict(cp.leaked)
        self._frozen = main._frozen
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
        nodes = tuple(a for a in args if a.__class__ is TreeNode)
        self._frames.append((name, nodes))
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
        if self._bc is not None:
            self._bc.pool_event(pool, what, slots)
        self._add(what, None, "", None)

    def _lru_event(self, kind: str, what: str, node) -> None:
        self._add("", node, "", None)

    def _set_event(self, name: str, what: str, node) -> None:
        self._add("", node, "", None)


class Timeline(Sequence):
    """The snapshot after every micro-step of a recorded run, rebuilt on demand: ``timeline[i]`` replays from the
    checkpoint before ``i``'s operation (at most ``CHECKPOINT_EVERY`` operations) and keeps the last
    ``FRAME_CACHE`` rebuilt snapshots; iterating (or slicing) replays once, front to back."""

    def __init__(self, rec: Recorder) -> None:
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
        want = set()
        for s in steps:
            want.update((s, rec.ops[op_position(rec, s)].first_step))
        want -= self._lru.keys()
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
        self._keep(got, room=len(got))

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
