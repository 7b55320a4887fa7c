"""Run a list of scheduler-level operations (the oracle's ``OPS.json``) and report what happened.

``run_ops(doc, preset)`` returns one JSON-able dict whose oracle-named fields (``outcome``, ``sig``, ``raised_in``,
``chain``, ``step``, ``status``, ``first_stale``, ``stale_final``, ``tree``, ``tree_slots``, ``counters``,
``inflight``, ``double_frees``, ``accounting``, ``free``) have the oracle's meaning and format, so the two can be
diffed. ``chain`` holds function names only (simcache has no SGLang line numbers).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from .cache import HiMambaRadixCache
from .config import POLICIES, CacheConfig
from .driver import Crash, Driver, Skip, crash_from, raise_if_internal
from .errors import ScenarioError, SimcacheError, shown
from .state import accounting, counters, inflight, stale_refs, tree_lines, tree_slot_lines
from .versions import Flags
from .versions import preset as preset_flags

DEFAULTS = dict(policy="write_through", storage=False, page_size=1, device_kv=32, device_mamba=8, host_kv=8,
                host_mamba=8, prefetch_threshold=1, load_back_threshold=10, prefetch_stop_policy="best_effort",
                driver="fuzz")
OTHER_CONFIG = {"write_through_threshold", "mamba_extra_buffer", "cfg_index", "auto_complete"}
OP_FIELDS = {"request": {"tokens"}, "start": {"tokens"}, "finish_oldest": set(), "evict": {"n"},
             "evict_mamba": {"n"}, "evict_host": {"n"}, "events": set(), "l3_ack": set(), "prefetch": {"tokens"},
             "prefetch_done": {"n", "mamba_hit"}, "inject": {"nodes"}}
# operations the simulator adds to the oracle's (optional fields in brackets in the docs)
EXTRA_OPS = {"finish": set(), "write_ack": set(), "load_ack": set()}
# ``finish`` without ``rid`` finishes the actor's oldest open request (scenario.linearize names it)
OPTIONAL_FIELDS = {"start": {"rid"}, "request": {"rid"}, "finish": {"rid"}, "write_ack": {"n"}, "load_ack": {"n"}}
NODE_FIELDS = {"key", "parent", "device", "mamba", "host", "mamba_host", "hash", "l3_backup"}
MAX_TOKENS = 1 << 20
MAX_SLOTS = 1 << 20  # pools and counts: a million slots is plenty for a simulation
MAX_NOTE = 1000  # an operation's ``note``: a short remark, ignored
_RID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


_INT = {int}


def _is_int(v) -> bool:
    return type(v) is int


def check_config(raw: Any, where: str = "config") -> dict:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where} must be an object of settings, like {{\"policy\": \"write_through\"}}")
    unknown = sorted(map(str, set(raw) - set(DEFAULTS) - OTHER_CONFIG))
    if unknown:
        raise ScenarioError(f"{where} has unknown key(s) {', '.join(unknown)}; known keys: "
                            f"{', '.join(sorted(set(DEFAULTS) | OTHER_CONFIG))}")
    cfg = {**DEFAULTS, **raw}
    for k in ("page_size", "device_kv", "device_mamba", "host_kv", "host_mamba", "prefetch_threshold",
              "load_back_threshold", "write_through_threshold"):
        if k in cfg and not (_is_int(cfg[k]) and 0 <= cfg[k] <= MAX_SLOTS):
            raise ScenarioError(f"{where}.{k} must be a whole number between 0 and {MAX_SLOTS}, not {cfg[k]!r}")
    if cfg["page_size"] < 1:
        raise ScenarioError(f"{where}.page_size must be at least 1")
    if type(cfg["storage"]) is not bool:
        raise ScenarioError(f"{where}.storage must be true or false, not {cfg['storage']!r}")
    if cfg["policy"] not in POLICIES:
        raise ScenarioError(f"{where}.policy must be one of {', '.join(POLICIES)}, not {cfg['policy']!r}")
    if cfg["driver"] not in ("fuzz", "scheduler"):
        raise ScenarioError(f"{where}.driver must be fuzz or scheduler, not {cfg['driver']!r}")
    if cfg["prefetch_stop_policy"] not in ("best_effort", "wait_complete", "timeout"):
        raise ScenarioError(f"{where}.prefetch_stop_policy must be best_effort, wait_complete or timeout, "
                            f"not {cfg['prefetch_stop_policy']!r}")
    for k in ("mamba_extra_buffer", "auto_complete"):
        if k in cfg and type(cfg[k]) is not bool:
            raise ScenarioError(f"{where}.{k} must be true or false, not {cfg[k]!r}")
    if cfg.get("mamba_extra_buffer", cfg["page_size"] > 1) != (cfg["page_size"] > 1):
        raise ScenarioError(f"{where}.mamba_extra_buffer must be true exactly when page_size > 1")
    cfg.setdefault("write_through_threshold", 1 if cfg["policy"] == "write_through" else 2)
    return cfg


def check_op(op: Any, i: int, page_size: int, allow_extra: bool = True) -> None:
    known = {**OP_FIELDS, **(EXTRA_OPS if allow_extra else {})}
    kind = op.get("op") if isinstance(op, dict) else None
    if isinstance(op, dict) and "op" not in op:  # YAML's "- evict: 2" gives {"evict": 2}
        raise ScenarioError(f"op {i}: an operation object needs an 'op' field, like {{op: evict, n: 2}} or the "
                            f"string 'evict 2'; it has {', '.join(sorted(map(str, op))) or 'no fields'}")
    if not isinstance(kind, str) or kind not in known:
        raise ScenarioError(f"op {i}: unknown op {kind!r}; known ops: {', '.join(known)}")
    fields = set(op) - {"op", "note"}
    need, opt = known[kind], OPTIONAL_FIELDS.get(kind, set())
    if not (need <= fields <= need | opt):
        want = ", ".join(sorted(need)) or "no fields"
        raise ScenarioError(f"op {i} ({kind}) needs exactly {want}"
                            + (f" (optionally {', '.join(sorted(opt))})" if opt else "")
                            + f"; it has {sorted(map(str, fields))}")
    if "tokens" in op:
        t = op["tokens"]
        if not (isinstance(t, list) and t and set(map(type, t)) == _INT and min(t) >= 0 and max(t) < 1 << 62):
            raise ScenarioError(f"op {i} ({kind}): tokens must be a non-empty list of whole numbers from 0 to "
                                f"2**62 - 1, like [1, 2, 3]")
        if len(t) > MAX_TOKENS:
            raise ScenarioError(f"op {i} ({kind}): {len(t)} tokens is too many; keep requests under {MAX_TOKENS}")
    for k in ("n",):
        if k in op and not (_is_int(op[k]) and 0 <= op[k] <= MAX_SLOTS):
            raise ScenarioError(f"op {i} ({kind}): n must be a whole number between 0 and {MAX_SLOTS}, not {op[k]!r}")
    if "mamba_hit" in op and type(op["mamba_hit"]) is not bool:
        raise ScenarioError(f"op {i} ({kind}): mamba_hit must be true or false")
    if "rid" in op and not (isinstance(op["rid"], str) and op["rid"]):
        raise ScenarioError(f"op {i} ({kind}): rid must be a non-empty string")
    if "rid" in op and not _RID.fullmatch(op["rid"]):  # '?' is kept for the placeholder of a finish with none open
        raise ScenarioError(f"op {i} ({kind}): rid {shown(op['rid'], 40)} must be 1 to 64 ASCII letters, digits, "
                            f"'_', '.', '-', like 'chat'")
    if "note" in op and not (isinstance(op["note"], str) and len(op["note"]) <= MAX_NOTE):
        raise ScenarioError(f"op {i} ({kind}): note must be a short text (at most {MAX_NOTE} characters), not "
                            f"{shown(op['note'], 40)}")
    if kind == "inject":
        nodes = op["nodes"]
        if not isinstance(nodes, list):
            raise ScenarioError(f"op {i} (inject): nodes must be a list of node objects like "
                                f"[{{key: [1, 2], host: true}}]")
        for j, s in enumerate(nodes):
            problem = _node_problem(s, j, page_size)
            if problem:
                raise ScenarioError(f"op {i} node {j}: {problem}")


def _node_problem(s: Any, j: int, page_size: int) -> str | None:
    """What is wrong with one inject node spec (None if nothing)."""
    if not isinstance(s, dict):
        return "a node must be an object like {key: [1, 2], host: true}"
    extra = sorted(map(str, set(s) - NODE_FIELDS))
    if extra:
        return f"unknown field(s) {', '.join(extra)}; node fields are {', '.join(sorted(NODE_FIELDS))}"
    key = s.get("key")
    if not (isinstance(key, list) and key and all(_is_int(x) and 0 <= x < 1 << 62 for x in key)):
        return "key must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2]"
    if len(key) > MAX_TOKENS:
        return f"key has {len(key)} tokens; keep keys under {MAX_TOKENS}"
    if len(key) % page_size:
        return f"key has {len(key)} tokens; make it a multiple of page_size {page_size}"
    parent = s.get("parent")
    if parent is not None and not (_is_int(parent) and 0 <= parent < j):
        return (f"parent must be null (the root) or the index of an earlier node"
                f"{f' (0 to {j - 1})' if j else ''}, not {parent!r}")
    for f in sorted(NODE_FIELDS - {"key", "parent"}):
        if type(s.get(f, False)) is not bool:
            return f"{f} must be true or false, not {s[f]!r}"
    return None


def check_doc(doc: Any) -> tuple[dict, list]:
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        raise ScenarioError('an operation file must be a JSON object with an "ops" list (and optionally "config")')
    cfg = check_config(doc.get("config"))
    for i, op in enumerate(doc["ops"]):
        check_op(op, i, cfg["page_size"])
    return cfg, doc["ops"]


def build_config(cfg: dict, flags: Flags, device: str = "cpu") -> CacheConfig:
    """The cache's config for a checked ops ``cfg``; ``device`` as ``CacheConfig.device`` (cpu unless asked)."""
    try:
        return CacheConfig(page_size=cfg["page_size"], device_kv=cfg["device_kv"], device_mamba=cfg["device_mamba"],
                           host_kv=cfg["host_kv"], host_mamba=cfg["host_mamba"], policy=cfg["policy"],
                           storage=cfg["storage"], prefetch_threshold=cfg["prefetch_threshold"],
                           write_through_threshold=cfg["write_through_threshold"],
                           load_back_threshold=cfg["load_back_threshold"],
                           prefetch_stop_policy=cfg["prefetch_stop_policy"], flags=flags,
                           auto_complete=cfg.get("auto_complete", True), device=device)
    except SimcacheError as e:
        raise ScenarioError(str(e)) from None


def short_sig(crash: Crash) -> str:
    short = re.split(r",| with | x\.id=| node\.id=", crash.message)[0]
    return f"{crash.type}: {short} in {crash.function}"


def _attached(cache, node) -> bool:
    """``node`` is reachable from the root through links whose parent pointer and child slot agree (the oracle's
    and ``state.attached_ids``'s definition), checked by walking up from ``node``."""
    root, ck = cache.root_node, cache.ck
    for _ in range(1 << 16):
        if node is root:
            return True
        p = node.parent
        if p is None or not node.key or p.children.get(ck(node.key)) is not node:
            return False
        node = p
    return False


def _held(cache, node) -> bool:
    """Some leaf set, LRU list or in-flight map holds ``node`` (``state.holders``)."""
    if node in cache.evictable_full_device_leaves or node in cache.evictable_full_host_leaves:
        return True
    for lru in (cache.full_lru_list, cache.mamba_lru_list, cache.mamba_host_lru_list):
        link = lru.cache.get(node.id)
        if link is not None and link.node is node:
            return True
    return (any(v is node for v in cache.ongoing_write_through.values())
            or any(v is node for v in cache.ongoing_load_back.values())
            or any(v[0] is node for v in cache.ongoing_backup.values())
            or any(v[0] is node for v in cache.ongoing_prefetch.values()))


def _no_stale(cache, cuts: list, live) -> bool:
    """True when an operation was *plain* and left no stale reference; False: run the full scan (``stale_refs``).

    Plain: every detach popped the very node asked for, and it had no children; every node an attach displaced is
    attached again (a split's suffix); every live request's last node is attached. If every operation so far was
    plain and ended with no stale reference, the nodes that are not attached are exactly the leaves popped so far:
    nothing reaches an earlier one (no slot, no holder, no request points at it, and only an attached node can be
    re-attached), so this operation's popped leaves are the only candidates, and a candidate is stale iff held."""
    popped = []
    for node, got, had_children in cuts:
        if had_children is None:  # displaced by an attach
            if not _attached(cache, node):
                return False
        elif got is not node or had_children:
            return False
        else:
            popped.append(node)
    if any(r.last_node is not None and not _attached(cache, r.last_node) for r in live):
        return False
    return not any(_held(cache, n) for n in popped)


def run_ops(doc: dict, preset: str = "pre_fix", flags: Flags | None = None, trace: bool = False,
            recorder=None, on_step: Callable | None = None, device: str = "cpu") -> dict:
    """Replay ``doc``'s ops on a fresh cache and report (the oracle's output fields, plus simcache's).

    ``trace=True`` adds ``"trace"``: one record per operation, ``dict(step, op, status, tree)`` with the canonical
    tree after it, as a lazy sequence (``OpTrace``): a record's tree is rebuilt on demand by replaying from the
    run's nearest checkpoint, so a long run stores no tree text (``list(result["trace"])`` for plain data)."""
    cfg, ops = check_doc(doc)
    if flags is not None and not isinstance(flags, Flags):
        raise ScenarioError(f"flags must be a Flags (e.g. simcache.preset('pre_fix')), not {type(flags).__name__}")
    return execute(cfg, [(None, op) for op in ops], flags or preset_flags(preset), trace, recorder, on_step,
                   device=device)


def apply_op(drv: Driver, i: int, op: dict) -> tuple[str, Crash | None]:
    """Apply one operation: its status letter and, if the simulated cache raised, the crash (set on the cache)."""
    try:
        drv.apply(op, i)
        return ".", None
    except Skip as s:
        return s.code, None
    except SimcacheError:
        raise
    except Exception as e:  # noqa: BLE001 -- the simulated cache's exceptions are results
        raise_if_internal(e, f"op {i} ({op.get('op')})")
        crash = crash_from(e)
        drv.cache.crashed = crash
        return "x", crash


PROGRESS_MIN_OPS = 2000  # shorter runs finish before a bar is worth drawing


def _progress(total: int, asked: bool | None):
    """A ``tqdm.auto`` bar (a widget in Jupyter) for a long run: ``asked`` True / False forces it; None: when the
    run is long and stderr is a terminal."""
    if asked is False or (asked is None and total < PROGRESS_MIN_OPS):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="op", desc="simulating", disable=None if asked is None else False,
                leave=False, mininterval=0.5)


def execute(cfg: dict, ops: list[tuple[str | None, dict]], flags: Flags, trace: bool = False, recorder=None,
            on_step: Callable | None = None, window: tuple[int, int] | None = None,
            progress: bool | None = False, device: str = "cpu") -> dict:
    """Run (actor, op) pairs in order on a fresh cache; stop at the first exception of the simulated cache.

    ``window=(A, B)``: run only operations ``A..B-1`` with the recorder attached (those before ``A`` run on the fast
    path, to reach the state the window starts from; those from ``B`` on are not run). ``progress``: see
    ``_progress``."""
    cache = HiMambaRadixCache(build_config(cfg, flags, device))
    drv = Driver(cache, scheduler=cfg["driver"] == "scheduler")
    status, crash, step, first_stale = [], None, None, None
    start, stop = window if window is not None else (0, len(ops))
    bar = _progress(stop, progress)
    if trace:
        from .trace import Recorder

        if recorder is None:
            recorder = Recorder(snapshots=False, invariants=False, states=True)
        elif not (recorder.want_snapshots or recorder.want_invariants or recorder.want_states):
            raise ScenarioError("trace=True rebuilds each operation's tree from the recorder's checkpoints, and a "
                                "Recorder(snapshots=False, invariants=False) keeps none; pass no recorder, or one "
                                "with snapshots or invariants on")
    if recorder is not None:
        recorder.replayable = True  # every operation it sees can be re-run from its checkpoints
    if recorder is not None and start == 0:
        recorder.attach(cache, drv)
    cuts = cache.cuts = []  # the cheap stale check's log, while every operation so far was plain (_no_stale)
    for i, (actor, op) in enumerate(ops[:stop]):
        detaches = cache.detach_count
        if cuts is not None:
            cuts.clear()
        rec = recorder if i >= start else None
        if i == start and start > 0 and recorder is not None:
            recorder.attach(cache, drv)
        if rec is not None:
            rec.begin_op(i, op, actor)
        code, crash = apply_op(drv, i, op)
        status.append(code)
        if crash is not None:
            step = i
            if rec is not None:
                rec.crash(crash)
        if rec is not None:
            rec.end_op(i, status[-1])
        if on_step is not None:
            on_step(i, cache, drv)
        if bar is not None:
            bar.update(1)
        if step is not None:
            break
        if first_stale is None and cache.detach_count != detaches:
            if cuts is not None and not _no_stale(cache, cuts, drv.live.values()):
                cuts = cache.cuts = None  # not plain: the full scan from now on
            if cuts is None and stale_refs(cache):
                first_stale = i
    cache.cuts = None
    if bar is not None:
        bar.close()
    live = list(drv.live.values())
    out = dict(
        outcome="clean" if crash is None else crash.outcome,
        sig=None if crash is None else short_sig(crash),
        raised_in=None if crash is None else crash.function,
        chain=[] if crash is None else list(crash.stack),
        step=step, status="".join(status), first_stale=first_stale, stale_final=stale_refs(cache),
        tree=tree_lines(cache), tree_slots=tree_slot_lines(cache), counters=counters(cache, live),
        inflight=inflight(cache),
        double_frees=[dict(pool=d.pool, slots=list(d.slots), chain=list(d.stack))
                      for p in cache.pools.all().values() for d in p.double_frees],
        accounting=accounting(cache, live),
        free={name: list(p.free_slots) for name, p in cache.pools.all().items()},
        warnings=list(cache.warnings),
    )
    if trace:
        out["trace"] = OpTrace(recorder)
    out["_cache"], out["_driver"], out["_crash"] = cache, drv, crash
    return out


class OpTrace(Sequence):
    """``run_ops(..., trace=True)``'s per-operation records, ``dict(step, op, status, tree)``, rebuilt on demand
    from the recorder's checkpoints (iterating replays each checkpoint's stretch once); the last few are kept."""

    def __init__(self, recorder) -> None:
        self._rec = recorder
        self._kept: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self._rec.ops)

    def _record(self, p: int, tree: list[str]) -> dict:
        o = self._rec.ops[p]
        return dict(step=o.index, op=o.op, status=o.status, tree=tree)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self._walk(*i.indices(len(self))))
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"operation {i} is outside this run's 0..{len(self) - 1}")
        tree = self._kept.get(i)
        if tree is None:
            tree = next(self._rec.iter_op_ends(i, i + 1, tree_lines))[1]
            if len(self._kept) >= 64:
                self._kept.clear()
            self._kept[i] = tree
        return self._record(i, list(tree))

    def _walk(self, start: int, stop: int, stride: int = 1):
        if stride != 1:
            yield from (self[j] for j in range(start, stop, stride))
            return
        for p, tree in self._rec.iter_op_ends(start, stop, tree_lines):
            yield self._record(p, tree)

    def __iter__(self):
        return self._walk(0, len(self))

    def __eq__(self, other) -> bool:
        if not isinstance(other, (OpTrace, list, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<OpTrace of {len(self)} operations, trees rebuilt on demand>"
