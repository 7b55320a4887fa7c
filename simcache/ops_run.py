"""Run a list of scheduler-level operations (the oracle's ``OPS.json``) and report what happened.

``run_ops(doc, preset)`` returns one JSON-able dict whose oracle-named fields (``outcome``, ``sig``, ``raised_in``,
``chain``, ``step``, ``status``, ``first_stale``, ``stale_final``, ``tree``, ``tree_slots``, ``counters``,
``inflight``, ``double_frees``, ``accounting``, ``free``) have the oracle's meaning and format, so the two can be
diffed. ``chain`` holds function names only (simcache has no SGLang line numbers).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .cache import HiMambaRadixCache
from .config import check_settings, from_settings
from .crash import Crash, short_sig
from .driver import Driver
from .errors import ScenarioError
from .gcpace import fewer_collections
from .operations import OPS, RAISED, check_op
from .presets import is_unified, preset_flags
from .state import accounting, counters, inflight, stale_refs, tree_and_slot_lines, tree_lines
from .versions import Flags

# the oracle's operations and their fields (``operations.OPS`` has the simulator's own too)
OP_FIELDS = {k.name: set(k.fields) for k in OPS.values() if k.oracle}
check_config = check_settings  # the names this module has always offered
build_config = from_settings


def check_doc(doc: Any) -> tuple[dict, list]:
    if not isinstance(doc, dict) or not isinstance(doc.get("ops"), list):
        raise ScenarioError('an operation file must be a JSON object with an "ops" list (and optionally "config")')
    cfg = check_settings(doc.get("config"))
    for i, op in enumerate(doc["ops"]):
        check_op(op, i, cfg["page_size"])
    return cfg, doc["ops"]


def _attached(cache, node) -> bool:
    """``node`` is reachable from the root through links whose parent pointer and child slot agree (the oracle's
    and ``state.attached_ids``'s definition), checked by walking up from ``node``."""
    root, child_key = cache.root_node, cache.child_key
    for _ in range(1 << 16):
        if node is root:
            return True
        p = node.parent
        if p is None or not node.key or p.children.get(child_key(node.key)) is not node:
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
            or any(v.last_host_node is node for v in cache.ongoing_prefetch.values()))


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
    from . import args

    args.flag(trace, "trace")
    args.function(on_step, "on_step")
    args.text(device, "device", "device='cpu'")
    if recorder is not None and not callable(getattr(recorder, "attach", None)):
        raise args.fail("recorder", "a Recorder or None", recorder, "recorder=Recorder()")
    return execute(cfg, [(None, op) for op in ops], flags or preset_flags(preset), trace, recorder, on_step,
                   device=device)


def apply_op(drv: Driver, i: int, op: dict) -> tuple[str, Crash | None]:
    """``drv.step(op, i)`` and, if the simulated cache raised, the crash (``trace``'s replayer calls this)."""
    code = drv.step(op, i)
    return code, (drv.cache.crashed if code == RAISED else None)


PROGRESS_MIN_OPS = 2000  # shorter runs finish before a bar is worth drawing


def _progress(total: int, asked: bool | None):
    """A ``tqdm.auto`` bar (a widget in Jupyter) for a long run: ``asked`` True / False forces it; None: when the
    run is long and stderr is a terminal."""
    if asked is False or (asked is None and total < PROGRESS_MIN_OPS):
        return None
    from tqdm.auto import tqdm

    from .progress import QuietStream

    return tqdm(total=total, unit="op", desc="simulating", disable=None if asked is None else False,
                leave=False, mininterval=0.5, file=QuietStream())  # a closed or full stderr never costs the run


@fewer_collections()
def execute(cfg: dict, ops: list[tuple[str | None, dict]], flags: Flags, trace: bool = False, recorder=None,
            on_step: Callable | None = None, window: tuple[int, int] | None = None,
            progress: bool | None = False, device: str = "cpu") -> dict:
    """Run (actor, op) pairs in order on a fresh cache; stop at the first exception of the simulated cache.

    ``window=(A, B)``: run only operations ``A..B-1`` with the recorder attached (those before ``A`` run on the fast
    path, to reach the state the window starts from; those from ``B`` on are not run). ``progress``: see
    ``_progress``."""
    cache, drv = new_cache(cfg, flags, device)
    family_unified = is_unified(flags)
    status, crash, step, first_stale = [], None, None, None
    start, stop = window if window is not None else (0, len(ops))
    bar = _progress(min(stop, len(ops)), progress)  # one tick per operation run, the fast ones before A included
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
    # the cheap stale check's log, while every operation so far was plain (_no_stale; a unified cache: the full scan)
    cuts = cache.cuts = None if family_unified else []
    for i, (actor, op) in enumerate(ops[:stop]):
        detaches = cache.detach_count
        if cuts is not None:
            cuts.clear()
        rec = recorder if i >= start else None
        if i == start and start > 0 and recorder is not None:
            recorder.attach(cache, drv)
        if rec is not None:
            rec.begin_op(i, op, actor)
        code = drv.step(op, i)
        status.append(code)
        if code == RAISED:
            crash, step = cache.crashed, i
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
        if first_stale is None and family_unified:  # as ``unified.run.run_model``: after every operation
            if stale_refs(cache):
                first_stale = i
        elif first_stale is None and cache.detach_count != detaches:
            if cuts is not None and not _no_stale(cache, cuts, drv.live.values()):
                cuts = cache.cuts = None  # not plain: the full scan from now on
            if cuts is None and stale_refs(cache):
                first_stale = i
    cache.cuts = None
    if bar is not None:
        bar.close()
    live = list(drv.live.values())
    if family_unified:
        out = unified_fields(cache, live, crash, step, status, first_stale)
    else:
        out = himamba_fields(cache, live, crash, step, status, first_stale)
    if trace:
        out["trace"] = OpTrace(recorder)
    out["_cache"], out["_driver"], out["_crash"] = cache, drv, crash
    return out


def new_cache(cfg: dict, flags, device: str = "cpu"):
    """A fresh cache of the family ``flags`` belong to (``presets``), and its driver."""
    if not is_unified(flags):
        cache = HiMambaRadixCache(build_config(cfg, flags, device))
        return cache, Driver(cache, retry_mamba_alloc=cfg["driver"] == "scheduler")
    from .unified.cache import UnifiedRadixCache
    from .unified.run import UnifiedDriver

    if cfg["page_size"] != 1:
        raise ScenarioError(f"the unified cache's Mamba component needs page_size 1 (SGLang's, without the Mamba "
                            f"extra buffer), not {cfg['page_size']}; set page_size: 1 in the config")
    cache = UnifiedRadixCache(build_config(cfg, Flags(), device), flags)
    return cache, UnifiedDriver(cache, retry_mamba_alloc=cfg["driver"] == "scheduler")


def unified_fields(cache, live, crash, step, status, first_stale) -> dict:
    """The result of a run on a unified cache: ``simcache.unified.run.state``'s fields (the real harness's
    format: host locks spelled ``hl``/``hml``), so a model run and a real run diff field by field."""
    from .unified.run import state

    st = state(cache, live)
    return dict(
        outcome="clean" if crash is None else crash.outcome, sig=None if crash is None else short_sig(crash),
        raised_in=None if crash is None else crash.function, chain=[] if crash is None else list(crash.stack),
        step=step, status="".join(status), first_stale=first_stale, **st, warnings=[])


def himamba_fields(cache, live, crash, step, status, first_stale) -> dict:
    tree, tree_slots = tree_and_slot_lines(cache)
    return dict(
        outcome="clean" if crash is None else crash.outcome,
        sig=None if crash is None else short_sig(crash),
        raised_in=None if crash is None else crash.function,
        chain=[] if crash is None else list(crash.stack),
        step=step, status="".join(status), first_stale=first_stale, stale_final=stale_refs(cache),
        tree=tree, tree_slots=tree_slots, counters=counters(cache, live),
        inflight=inflight(cache),
        double_frees=[dict(pool=d.pool, slots=list(d.slots), chain=list(d.stack))
                      for p in cache.pools.all().values() for d in p.double_frees],
        accounting=accounting(cache, live),
        free={name: list(p.free_slots) for name, p in cache.pools.all().items()},
        warnings=list(cache.warnings),
    )


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
        asked = i = int(i)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"operation {asked} is outside this run's 0..{n - 1} (or -{n}..-1 from the end)" if n
                             else f"operation {asked}: this run traced no operations")
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
