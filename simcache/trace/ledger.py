"""The ledger a run writes: the hooks the cache, its pools, lists and sets call, each appending one compact entry to
the log (worded on demand, ``wording``), the call stack and the nodes known and detached, and the invariants'
scheduling (checked at operation boundaries; a new violation is dated by replaying its operation). ``Ledger`` is
shared by the ``Recorder`` (which adds checkpoints and replay, ``recorder``) and the ``_Replayer`` (``replay``)."""
from __future__ import annotations

from collections.abc import Sequence

from ..driver import InternalError
from ..errors import ArgumentError, shown
from ..invariants import BOUNDARY_ONLY, INVARIANTS, BoundaryCheck, check_all, failing
from ..keys import format_key
from ..node import TreeNode
from ..snapshot import NodeView, Snapshot, pool_views, take
from ..unified import ledger as unified
from .hash_writer import log_sha256
from .memory import BIG, MemoryLimit, MemoryWatch, check_memory_limit, memory_limit
from .records import Checkpoint, CleanupEvent, OpRecord, StaleEvent, Violation
from .stale import StaleTracking
from .wording import _CAPTURE, Steps, _describe, _nid, _Worded

CHECKPOINT_EVERY = 32  # operations between two checkpoints: a rebuild replays at most this many
CHECKPOINT_STEPS = 160  # ... or about this many micro-steps, whichever comes first (bounds a seek's replay)
DATING_SPREAD = 4  # without snapshots, checkpoints serve only to date a violation: this many times further apart
STEP_INVARIANTS = tuple(n for n in INVARIANTS if n not in BOUNDARY_ONLY)
_LRU_NAMES = {"full": "full_lru_list", "mamba": "mamba_lru_list", "host_mamba": "mamba_host_lru_list"}
_LRU_KINDS = {"insert": "lru_insert", "remove": "lru_remove"}
_SET_KINDS = {"add": "set_add", "discard": "set_discard"}


class Ledger(StaleTracking, MemoryLimit):
    """Records a run as small events (micro-steps, went-stale / cleaned-up / re-admitted, violations); the
    ``Recorder`` adds the periodic checkpoints (``_checkpoint``) and the replay (``_replay``) this calls."""

    def __init__(self, snapshots: bool = True, invariants: bool = True, checkpoint_every: int = CHECKPOINT_EVERY,
                 memory_limit_mb: float | None = None, checkpoint_steps: int = CHECKPOINT_STEPS,
                 states: bool = False) -> None:
        for name, v, kind in (("snapshots", snapshots, bool), ("invariants", invariants, bool),
                              ("states", states, bool), ("checkpoint_every", checkpoint_every, int),
                              ("checkpoint_steps", checkpoint_steps, int)):
            if type(v) is not kind:
                raise ArgumentError(f"Recorder's {name} must be {'True or False' if kind is bool else 'a whole number'}"
                                    f", not {shown(v, 40)}")
        self.want_snapshots, self.want_invariants = snapshots, invariants
        self.want_states = states  # checkpoints to rebuild operation ends (``iter_op_ends``) without snapshots
        self.checkpoint_every = max(1, checkpoint_every)
        self.checkpoint_steps = max(1, checkpoint_steps)
        self.memory_limit_mb = memory_limit() if memory_limit_mb is None else check_memory_limit(memory_limit_mb)
        self._watch = MemoryWatch(self.memory_limit_mb)  # what the run adds over the memory held now
        self._mem_due = False  # inside an operation that moves many slots or tokens: checked at each call
        self._log: list[tuple] = []  # one compact entry per micro-step (see ``_words``); ``steps`` words them
        self.steps: Steps = Steps(self._log)
        self.snapshots: Sequence = []  # the recorder's lazy ``Timeline`` when it keeps snapshots
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
    def attach(self, cache, driver=None) -> Ledger:
        self.cache, self.driver = cache, driver
        cache.recorder = self
        for pool in cache.pools.all().values():
            pool.observer = self._pool_event
        if unified.is_unified(cache):  # its own sets and lists; its invariants are checked whole (no BoundaryCheck)
            lrus, sets = unified.lru_lists(cache), unified.leaf_sets(cache)
        else:
            lrus = (cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list)
            sets = (cache.evictable_full_device_leaves, cache.evictable_full_host_leaves)
        for lru in lrus:
            lru.observer = self._lru_event
        for s in sets:
            s.observer = self._set_event
        if self.want_invariants and self.replayable and not unified.is_unified(cache):
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
        if len(op.get("tokens") or ()) >= BIG:
            self._mem_due = True
            self._check_memory()
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
        if self._ended == 1 or self._ended % 64 == 0 or self._mem_due:
            self._check_memory()
            self._mem_due = False

    def crash(self, crash) -> None:
        self.crashed = crash
        self._add("assertion", None, f"{crash.outcome} in {crash.function}", crash.as_dict())

    # --- hooks called by the cache: each appends one compact entry to ``_log`` (worded on demand, ``_words``) ---
    def enter(self, name: str, args: tuple) -> None:
        if self._mem_due:
            self._check_memory()
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
        if len(slots) >= BIG:
            self._mem_due = True
            self._check_memory()
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

    def _snap(self) -> Snapshot:
        if self._pools is None:
            self._pools = pool_views(self.cache, leaked=self._leaked)
        return take(self.cache, self._live(), self.frame_holders(), self._current, self._stack, self._known,
                    self._pools, self.outer_frame_ids(), self._detached)
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

    # --- results ---
    def violation_counts(self) -> dict[str, int]:
        out = {name: 0 for name in INVARIANTS}
        for v in self.violations:
            out[v.invariant] += 1
        return out

    def sha256(self) -> str:
        """The hash of ``json.dumps([step.as_dict() ...], sort_keys=True, default=str)``, streamed a chunk of steps
        at a time (the same bytes, written by ``hash_writer._json_lines`` from the compact log without building any
        step)."""
        return log_sha256(self._log)


_STACKS: dict[tuple, tuple] = {(): ()}  # one object per call stack: its JSON text is made once per run
_NEXT_STACK: dict[tuple[int, str], tuple[tuple, tuple]] = {}  # (id(stack), call) -> (stack, the stack it makes)


def _intern(stack: tuple) -> tuple:
    if len(_STACKS) > 1 << 16:  # a pathological number of distinct stacks: start again
        _STACKS.clear()
    return _STACKS.setdefault(stack, stack)
