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
_LRU_KINDS = {"insert": "lru_insert", "remove": "lru_remove"}
_SET_KINDS = {"add": "set_add", "discard": "set_discard"}

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
        self._log: list[tuple] = []  # one compact entry per micro-step (see ``_words``); ``steps`` words them
        self.steps: Steps = Steps(self._log)
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
        self._stack: tuple[str, ...] = ()  # interned (``_STACKS``): a stack's JSON text is made once per run
        self._stacks: list[tuple[str, ...]] = []  # the stacks to return to, one per open frame
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
                or (self.want_snapshots and len(self._log) - self.checkpoints[-1].step >= self.checkpoint_steps)):
            self.checkpoints.append(self._checkpoint())
        self._op, self._actor = index, actor
        self.ops.append(OpRecord(index, actor, op, len(self._log)))
        self._log.append((index, actor, "op", self._stack, None, op))  # worded on demand: describe_op(op, actor)
        if not self.replayable and self.cache is not None:
            self._per_step("op")

    def end_op(self, index: int, status: str) -> None:
        rec = self.ops[-1]
        rec.status, rec.last_step = status, len(self._log) - 1
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

    # --- hooks called by the cache: each appends one compact entry to ``_log`` (worded on demand, ``_words``) ---
    def enter(self, name: str, args: tuple) -> None:
        if not args:
            nodes = ()
        elif len(args) == 1:  # most simulated calls take one argument
            nodes = args if isinstance(args[0], TreeNode) else ()
        else:
            nodes = tuple([a for a in args if isinstance(a, TreeNode)])
        cur = self._stack
        self._frames.append((name, nodes))
        self._stacks.append(cur)
        nxt = _NEXT_STACK.get((id(cur), name))  # the stack a call from ``cur`` makes, by identity: no tuple is
        if nxt is not None and nxt[0] is cur:  # built or hashed (the entry holds ``cur``, so its id stays its own)
            st = nxt[1]
        else:
            st = cur + (name,)
            st = _STACKS.get(st) or _intern(st)
            if len(_NEXT_STACK) > 1 << 16:
                _NEXT_STACK.clear()
            _NEXT_STACK[id(cur), name] = (cur, st)
        self._stack = st
        if nodes:
            n = nodes[0]
            k = n.key
            self._log.append((self._op, self._actor, "call", st, n.id, k if k.__class__ is tuple else format_key(k)))
            if n.id not in self._known:  # ``_note``, inline: a third of all micro-steps are calls
                self._know(n)
            if n.__class__ is TreeNode and self._bc is not None:
                self._bc.see(n)
        else:
            self._log.append((self._op, self._actor, "call", st, None, None))
        if not self.replayable and self.cache is not None:
            self._per_step("call")

    def exit(self, name: str) -> None:
        if self._frames:
            self._frames.pop()
            self._stack = self._stacks.pop()

    def event(self, kind: str, **data) -> None:
        if kind == "current":
            self._current = data["node"]
            return
        node = data.get("node")
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
        capture = _CAPTURE.get(kind)
        if capture is None:  # not worded on demand: word it now
            self._add(kind, node, *_describe(kind, data))
        else:
            self._log.append((self._op, self._actor, kind, self._stack, _nid(node), capture(node, data)))
            if isinstance(node, TreeNode):
                self._note(node)
            if not self.replayable and self.cache is not None:
                self._per_step(kind)
        if kind == "cleaned_up":
            self.cleaned_up.append(CleanupEvent(len(self._log) - 1, node.id, format_key(node.key), data["reason"],
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
        self._log.append((self._op, self._actor, what, self._stack, None, (pool, tuple(slots))))
        if not self.replayable and self.cache is not None:
            self._per_step(what)

    def _lru_event(self, kind: str, what: str, node) -> None:
        name = _LRU_NAMES[kind]
        k = node.key
        self._log.append((self._op, self._actor, _LRU_KINDS.get(what) or f"lru_{what}", self._stack,
                          node.id, (k if k.__class__ is tuple else format_key(k), name)))
        self._note(node)
        if not self.replayable and self.cache is not None:
            self._per_step("lru")
        if what == "insert":
            self._check_readmission(node, name)

    def _set_event(self, name: str, what: str, node) -> None:
        bc = self._bc
        if bc is not None:
            bc.see(node)
            bc.seen.add(node)  # its membership changed: its leaf-set record with it
        k = node.key
        self._log.append((self._op, self._actor, _SET_KINDS.get(what) or f"set_{what}", self._stack,
                          node.id, (k if k.__class__ is tuple else format_key(k), name)))
        self._note(node)
        if not self.replayable and self.cache is not None:
            self._per_step("set")
        if what == "add":
            self._check_readmission(node, name)

    # --- the core of the ledger: one small event per micro-step, whatever the size of the tree ---
    def _add(self, kind: str, node, text: str, detail: dict) -> None:
        """A micro-step worded now (an assertion, a stale guard's cleanup, an event kind ``_CAPTURE`` lacks)."""
        node_id = node.id if isinstance(node, TreeNode) else None
        self._log.append((self._op, self._actor, kind, self._stack, node_id, _Worded((text, detail))))
        if node_id is not None:
            self._note(node)
        if not self.replayable and self.cache is not None:
            self._per_step(kind)

    def _note(self, node: TreeNode) -> None:
        """The bookkeeping of a node a micro-step names: known from now on, its writes tracked by the boundary check."""
        if node.id not in self._known:
            self._know(node)
        if self._bc is not None and node.__class__ is TreeNode:
            self._bc.see(node)

    def _per_step(self, kind: str) -> None:
        """Driven by hand (no replay): the snapshot and the invariants of the micro-step just logged, now."""
        if self.want_snapshots:
            self._eager.append(self._snap())
        if self.want_invariants and kind != "op":
            self._check_step(len(self._log) - 1)

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
                self.went_stale.append(StaleEvent(len(self._log), n.id, format_key(n.key), tuple(holders),
                                                  f"detached by {cause}"))

    def _check_readmission(self, node, holder: str) -> None:
        if node is None or node is self.cache.root_node or node.id not in self._detached:
            return
        if not is_attached(self.cache, node):
            self.readmitted.append(StaleEvent(len(self._log) - 1, node.id, format_key(node.key), (holder,),
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
        last = len(self._log) - 1
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
        """The hash of ``json.dumps([step.as_dict() ...], sort_keys=True, default=str)``, streamed a chunk of steps
        at a time (the same bytes, written by ``_json_lines`` from the compact log without building any step)."""
        h = hashlib.sha256(b"[")
        log, memo = self._log, _JsonMemo()
        for lo in range(0, len(log), 4096):  # json.dumps of a list joins its items with ", "
            if lo:
                h.update(b", ")
            h.update(", ".join(_json_lines(log, lo, min(len(log), lo + 4096), memo)).encode())
        h.update(b"]")
        return h.hexdigest()


# --- the words of a micro-step, made on demand from its compact entry --------------------------------------------
# An entry of ``Recorder._log`` is ``(op, actor, kind, stack, node id, payload)``. The payload holds what the words
# need, as it was: node keys are immutable tuples, so an entry keeps the key itself (or its text, for a key of
# another type), never the node. ``call``: the first node argument's key (the function is the stack's last name);
# ``op``: the operation; pool kinds: (pool, slots); ``lru_*`` / ``set_*``: (key, list or set name); other event
# kinds: what ``_CAPTURE`` takes; ``_Worded``: (text, detail) worded when it happened.

_STACKS: dict[tuple, tuple] = {(): ()}  # one object per call stack: its JSON text is made once per run
_NEXT_STACK: dict[tuple[int, str], tuple[tuple, tuple]] = {}  # (id(stack), call) -> (stack, the stack it makes)


def _intern(stack: tuple) -> tuple:
    if len(_STACKS) > 1 << 16:  # a pathological number of distinct stacks: start again
        _STACKS.clear()
    return _STACKS.setdefault(stack, stack)


class _Worded(tuple):
    """A payload worded when it happened: ``(text, detail)``."""

    __slots__ = ()


def _kt(k) -> str:
    return k if k.__class__ is str else _key_text(k)


def _kref(n) -> tuple | None:
    """A node as a later wording names it: ``(id, key)`` (the key's text if the key is not a tuple)."""
    if isinstance(n, TreeNode):
        k = n.key
        return (n.id, k if k.__class__ is tuple else format_key(k))
    return None


def _kw(r) -> str:
    """A node as micro-steps name it, ``[key]#id``, from its ``_kref`` (or "none")."""
    return "none" if r is None else f"[{_kt(r[1])}]#{r[0]}"


_CAPTURE = {
    "split": lambda n, d: (_kref(n), _kref(d["prefix"])),
    "attach": lambda n, d: (_kref(n), _kref(d["parent"]), d["slot"], _nid(d["replaced"])),
    "detach": lambda n, d: (_kref(n), _kref(d["parent"]), d["slot"], d["popped"] is n, _kref(d["popped"])),
    "lock": lambda n, d: (_kref(n), d["change"], d["full_lock_ref"]),
    "host_ref": lambda n, d: (_kref(n), d["host_ref"], d["host_mamba_ref"]),
    "backup": lambda n, d: (_kref(n), tuple(d["host"])),
    "write_ack": lambda n, d: (_kref(n),),
    "load_ack": lambda n, d: (_kref(n),),
    "storage_ack": lambda n, d: (_kref(n),),
}


def _w_split(kind, nid, p):
    return f"split {_kw(p[0])}: prefix {_kw(p[1])} takes its slot", dict(prefix=p[1][0])


def _w_attach(kind, nid, p):
    return (f"attach {_kw(p[0])} under {_kw(p[1])} at slot {p[2]}",
            dict(parent=p[1][0], slot=str(p[2]), replaced=p[3]))


def _w_detach(kind, nid, p):
    what = "" if p[3] else f" (the slot held {_kw(p[4])})"
    return (f"detach {_kw(p[0])} from {_kw(p[1])} slot {p[2]}{what}",
            dict(parent=p[1][0], slot=str(p[2]), popped=None if p[4] is None else p[4][0]))


def _w_lock(kind, nid, p):
    return (f"{'lock' if p[1] > 0 else 'unlock'} {_kw(p[0])} (full_lock_ref={p[2]})",
            dict(change=p[1], full_lock_ref=p[2]))


def _w_host_ref(kind, nid, p):
    return f"host refs of {_kw(p[0])}: host_ref={p[1]} host_mamba_ref={p[2]}", dict(host_ref=p[1], host_mamba_ref=p[2])


def _w_backup(kind, nid, p):
    return f"{_kw(p[0])} backed up to host {list(p[1])}", dict(host=list(p[1]))


def _w_ack(kind, nid, p):
    return f"{kind.replace('_', ' ')} for {_kw(p[0])}", {}


def _w_pool(kind, nid, p):
    pool, slots = p
    return f"{kind.replace('_', ' ')} {pool} {list(slots)}", dict(pool=pool, slots=list(slots))


def _w_lru(kind, nid, p):
    what = kind[4:]
    return f"{what} [{_kt(p[0])}]#{nid} {'into' if what == 'insert' else 'from'} {p[1]}", dict(list=p[1])


def _w_set(kind, nid, p):
    what = kind[4:]
    return f"{what} [{_kt(p[0])}]#{nid} {'to' if what == 'add' else 'from'} {p[1]}", dict(set=p[1])


_WORDS = dict(split=_w_split, attach=_w_attach, detach=_w_detach, lock=_w_lock, host_ref=_w_host_ref,
              backup=_w_backup, write_ack=_w_ack, load_ack=_w_ack, storage_ack=_w_ack, alloc=_w_pool, free=_w_pool,
              double_free=_w_pool, alloc_fail=_w_pool, lru_insert=_w_lru, lru_remove=_w_lru, set_add=_w_set,
              set_discard=_w_set)


def _call_detail(name: str) -> dict:
    detail = _CALL_DETAIL.get(name)
    if detail is None:
        detail = _CALL_DETAIL[name] = dict(function=name)  # shared by every call of ``name``: read-only
        _SHARED_DETAIL_IDS.add(id(detail))
    return detail


def _words(e: tuple) -> tuple[str, dict]:
    """(text, detail) of log entry ``e``."""
    _, actor, kind, stack, nid, p = e
    if p.__class__ is _Worded:
        return p
    if kind == "call":
        name = stack[-1]
        return (f"{name}([{_kt(p)}]#{nid})" if nid is not None else f"{name}()"), _call_detail(name)
    if kind == "op":
        return describe_op(p, actor), dict(op=p)
    return _WORDS[kind](kind, nid, p)


def _step(i: int, e: tuple) -> MicroStep:
    text, detail = _words(e)
    return MicroStep(i, e[0], e[1], e[2], e[3], e[4], text, detail)


class Steps(Sequence):
    """The run's micro-steps (``MicroStep``), worded on demand from the recorder's compact log: indexing, slicing
    and iterating build them; ``len`` and the log itself cost nothing more as the run grows."""

    __slots__ = ("_log",)

    def __init__(self, log: list) -> None:
        self._log = log

    def __len__(self) -> int:
        return len(self._log)

    def __getitem__(self, i):
        log = self._log
        if isinstance(i, slice):
            return [_step(j, log[j]) for j in range(*i.indices(len(log)))]
        i = i.__index__()
        if i < 0:
            i += len(log)
        if not 0 <= i < len(log):
            raise IndexError(f"micro-step {i} is outside this run's 0..{len(log) - 1}")
        return _step(i, log[i])

    def __iter__(self):
        log = self._log
        for i in range(len(log)):
            yield _step(i, log[i])

    def __reversed__(self):
        log = self._log
        for i in range(len(log) - 1, -1, -1):
            yield _step(i, log[i])

    def __eq__(self, other) -> bool:
        if not isinstance(other, (Steps, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Steps: {len(self)} micro-steps, worded on demand>"


# --- the trace hash's JSON text, written from the log -----------------------------------------------------------
try:
    from _json import make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - CPython has it
    _c_make_encoder = None


def _encoder():
    """``json.dumps(o, sort_keys=True, default=str)`` for a dict or list, with one C encoder made once."""
    if _c_make_encoder is None:  # pragma: no cover
        return json.JSONEncoder(sort_keys=True, default=str).encode
    c = _c_make_encoder({}, str, _ebs, None, ": ", ", ", True, False, True)
    py = json.JSONEncoder(sort_keys=True, default=str).encode

    def enc(o) -> str:
        if o.__class__ is dict or o.__class__ is list:
            return "".join(c(o, 0))
        return py(o)

    return enc


class _JsonMemo:
    """Texts that repeat across steps: stacks (by identity; interned), kinds, actors, shared details, and keys as
    they sit inside a JSON string (escaped, without quotes; by identity, a bounded number)."""

    def __init__(self) -> None:
        self.enc = _encoder()
        self.stacks: dict[int, tuple[tuple, str]] = {}  # id(stack) -> (stack, its JSON)
        self.values: dict = {}
        self.details: dict[int, str] = {}  # shared details by id
        self.calls: dict[str, tuple[str, str]] = {}  # function name -> (its detail's JSON, its escaped name)
        self.names: dict[str, str] = {}  # pool, list and set names, escaped
        self.keys: dict[int, tuple] = {}  # id(key) -> (key, escaped text): the entry holds the key, so the id stays

    def value(self, v) -> str:  # an actor or a kind
        try:
            got = self.values.get(v)
        except TypeError:
            return self.enc(v)
        if got is None:
            got = self.values[v] = self.enc(v)
        return got

    def detail(self, d) -> str:
        if d.__class__ is dict and not d:
            return "{}"
        if id(d) in _SHARED_DETAIL_IDS:
            got = self.details.get(id(d))
            if got is None:
                got = self.details[id(d)] = self.enc(d)
            return got
        return self.enc(d)

    def key(self, k) -> str:
        """A key's text (``_key_text``; a text payload as it is), escaped for the inside of a JSON string."""
        hit = self.keys.get(id(k))
        if hit is not None and hit[0] is k:
            return hit[1]
        if len(self.keys) > 4096:
            self.keys.clear()
        text = _ebs(k if k.__class__ is str else _key_text(k))[1:-1]
        self.keys[id(k)] = (k, text)
        return text

    def name(self, s: str) -> str:
        got = self.names.get(s)
        if got is None:
            got = self.names[s] = _ebs(s)[1:-1]
        return got


_INT = {int}


def _plain_ints(xs) -> bool:
    return set(map(type, xs)) <= _INT


def _int_list(xs: tuple) -> str:
    """``", ".join(map(str, xs))`` for a tuple of plain ints, made by the tuple's own repr (one C call)."""
    return str(xs)[1:-1] if len(xs) != 1 else str(xs[0])


_POOL_WORDS = {k: k.replace("_", " ") for k in ("alloc", "free", "double_free", "alloc_fail")}


def _json_lines(log: list, lo: int, hi: int, memo: _JsonMemo) -> list[str]:
    """``json.dumps(step.as_dict(), sort_keys=True, default=str)`` of steps ``lo..hi-1``. The frequent kinds write
    their text and detail straight from the entry (the bytes ``_words`` + the encoder would give); the rest go
    through ``_words``. A step's text is escaped piece by piece (JSON's ASCII escaping maps each character on its
    own, so the pieces' escapes joined are the whole text's), each piece escaped once per run: a node's key, often
    hundreds of tokens long, is escaped once, not once per step that names it."""
    out = []
    add = out.append
    enc, stacks, values, calls = memo.enc, memo.stacks, memo.values, memo.calls
    kj, nm, names, ebs, pool_words, lru_set = memo.key, memo.name, memo.names, _ebs, _POOL_WORDS, _LRU_SET_FIELD
    ints = _INT
    for i in range(lo, hi):
        e = log[i]
        op, actor, kind, stack, nid, p = e
        tj = None
        if p.__class__ is _Worded:
            pass
        elif kind == "call":
            name = stack[-1]
            got = calls.get(name)
            if got is None:
                got = calls[name] = (memo.detail(_call_detail(name)), _ebs(name)[1:-1])
            dj, nj = got
            if nid is None:
                tj = f'"{nj}()"'
            elif nid.__class__ is int:
                tj = f'"{nj}([{kj(p)}]#{nid})"'
            else:
                tj = ebs(f"{name}([{_kt(p)}]#{nid})")
        elif kind in pool_words:
            pool, slots = p
            if pool.__class__ is str and slots.__class__ is tuple and set(map(type, slots)) <= ints:
                sl = str(slots)[1:-1] if len(slots) != 1 else str(slots[0])  # ``_int_list``, inline
                pj = names.get(pool) or nm(pool)
                tj = f'"{pool_words[kind]} {pj} [{sl}]"'
                dj = f'{{"pool": "{pj}", "slots": [{sl}]}}'
        elif kind == "lock":
            r, change, ref = p
            if change.__class__ is int and ref.__class__ is int and r is not None and r[0].__class__ is int:
                tj = f'"{"lock" if change > 0 else "unlock"} [{kj(r[1])}]#{r[0]} (full_lock_ref={ref})"'
                dj = f'{{"change": {change}, "full_lock_ref": {ref}}}'
        elif kind in lru_set:
            k, name = p
            if name.__class__ is str and nid.__class__ is int:
                what = kind[4:]
                sj_ = names.get(name) or nm(name)
                tj = f'"{what} [{kj(k)}]#{nid} {_LRU_SET_WORD[what]} {sj_}"'
                dj = f'{{"{lru_set[kind]}": "{sj_}"}}'
        elif kind in _NODE_KINDS:
            tj, dj = _node_json(kind, p, kj)
        if tj is None:
            text, detail = _words(e)
            tj = ebs(text) if text.__class__ is str else enc(text)
            dj = memo.detail(detail)
        sj = stacks.get(id(stack))  # by identity: a tuple's hash is computed again on every lookup
        if sj is None or sj[0] is not stack:
            sj = stacks[id(stack)] = (stack, enc(list(stack)))  # the entry holds the stack: its id stays its own
        sj = sj[1]
        try:
            aj, kj_ = values[actor], values[kind]
        except (KeyError, TypeError):
            aj, kj_ = memo.value(actor), memo.value(kind)
        add(f'{{"actor": {aj}, "detail": {dj}, "index": {i}, "kind": {kj_}, '
            f'"node": {nid if nid.__class__ is int else "null" if nid is None else enc(nid)}, '
            f'"op": {op if op.__class__ is int else enc(op)}, "stack": {sj}, "text": {tj}}}')
    return out


def _ref_json(r, kj) -> str | None:
    """``_kw(r)`` escaped for the inside of a JSON string, or None where the fast spelling does not apply."""
    if r is None:
        return "none"
    return f"[{kj(r[1])}]#{r[0]}" if r[0].__class__ is int else None


def _node_json(kind: str, p: tuple, kj) -> tuple[str | None, str | None]:
    """The JSON text and detail of an attach, detach, backup or ack step (the bytes ``_words`` and the encoder
    give), or ``(None, None)`` where a part is not plain (then ``_words`` spells it)."""
    a = _ref_json(p[0], kj)
    if a is None:
        return None, None
    if kind == "attach":
        b, slot, rep = _ref_json(p[1], kj), p[2], p[3]
        if b is None or p[1] is None or (rep is not None and rep.__class__ is not int):
            return None, None
        sj = _ebs(str(slot))
        return (f'"attach {a} under {b} at slot {sj[1:-1]}"',
                f'{{"parent": {p[1][0]}, "replaced": {"null" if rep is None else rep}, "slot": {sj}}}')
    if kind == "detach":
        b, slot, popped = _ref_json(p[1], kj), p[2], p[4]
        c = _ref_json(popped, kj)
        if b is None or p[1] is None or c is None:
            return None, None
        sj = _ebs(str(slot))
        what = "" if p[3] else f" (the slot held {c})"
        return (f'"detach {a} from {b} slot {sj[1:-1]}{what}"',
                f'{{"parent": {p[1][0]}, "popped": {"null" if popped is None else popped[0]}, "slot": {sj}}}')
    if kind == "backup":
        host = p[1]
        if host.__class__ is not tuple or not _plain_ints(host):
            return None, None
        hl = f"[{_int_list(host)}]"
        return f'"{a} backed up to host {hl}"', f'{{"host": {hl}}}'
    return f'"{_ACK_WORDS[kind]} for {a}"', "{}"  # an ack


_ACK_WORDS = dict(write_ack="write ack", load_ack="load ack", storage_ack="storage ack")
_NODE_KINDS = frozenset({"attach", "detach", "backup", *_ACK_WORDS})
_LRU_SET_FIELD = dict(lru_insert="list", lru_remove="list", set_add="set", set_discard="set")
_LRU_SET_WORD = dict(insert="into", remove="from", add="to", discard="from")


def _apply(drv, rec) -> tuple[str, object]:
    """Re-run recorded operation ``rec`` on a replay's driver: its status and, if it raised, its ``Crash``."""
    code = drv.step(rec.op, rec.index)
    return code, (drv.cache.crashed if code == RAISED else None)


def _describe(kind: str, d: dict) -> tuple[str, dict]:
    """A micro-step worded when it happens: a stale guard's cleanup (every other event kind is in ``_CAPTURE``,
    worded on demand by ``_WORDS``), or an event kind neither knows, by its name."""
    if kind == "cleaned_up":
        n = d["node"]
        removed = ", ".join(d["removed"]) or "nothing"
        return (f"stale guard: cleaned up [{_key_text(n.key)}]#{n.id} ({d['reason']}); removed from {removed}",
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
