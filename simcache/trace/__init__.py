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

Memory: the recorder checks what the run adds to the process's memory as it goes (inside a large operation too) and
stops a run that adds more than ``memory_limit_mb`` (``$SIMCACHE_MEMORY_LIMIT_MB``, default 4096) with a
``TraceLimitError`` that says how to narrow it.

The package, one module per job (the data flows down the list):
- ``records``: the event records (``MicroStep``, ``StaleEvent``, ``CleanupEvent``, ``Violation``, ``OpRecord``,
  ``Checkpoint``) and ``op_position``;
- ``wording``: the words of a micro-step, made on demand from its compact log entry, and ``Steps``;
- ``hash_writer``: the JSON text behind the trace hash, written straight from the log;
- ``stale``: holders and stale detection (went-stale, re-admitted); ``memory``: the memory limit;
- ``ledger``: the hooks the cache calls and the invariants' scheduling (``Ledger``);
- ``replay``: the ``_Replayer``; ``recorder``: the ``Recorder`` (ledger + checkpoints + replay);
- ``timeline``: ``Timeline``, the lazy snapshots.
Everything the single module ``trace.py`` offered is still importable from ``simcache.trace``.
"""
# ruff: noqa: F401 -- besides ``__all__``, every name the single module ``trace.py`` held, importable as before
from __future__ import annotations

from ..driver import InternalError
from ..errors import ConfigError, SimcacheError
from ..invariants import BOUNDARY_ONLY, INVARIANTS, BoundaryCheck, TrackedNode, check_all, failing
from ..keys import format_key
from ..node import TreeNode
from ..operations import RAISED, describe_op
from ..snapshot import NodeView, Snapshot, node_view, pool_views, take
from ..state import holders_of, is_attached
from .hash_writer import (
    _ACK_WORDS,
    _INT,
    _LRU_SET_FIELD,
    _LRU_SET_WORD,
    _NODE_KINDS,
    _POOL_WORDS,
    _c_make_encoder,
    _ebs,
    _encoder,
    _int_list,
    _json_lines,
    _JsonMemo,
    _node_json,
    _plain_ints,
    _ref_json,
    log_sha256,
)
from .ledger import (
    _LRU_KINDS,
    _LRU_NAMES,
    _NEXT_STACK,
    _SET_KINDS,
    _STACKS,
    CHECKPOINT_EVERY,
    CHECKPOINT_STEPS,
    DATING_SPREAD,
    STEP_INVARIANTS,
    Ledger,
    _intern,
)
from .memory import DEFAULT_MEMORY_LIMIT_MB, memory_limit, rss_mb
from .recorder import Recorder
from .records import (
    Checkpoint,
    CleanupEvent,
    MicroStep,
    OpRecord,
    StaleEvent,
    TraceLimitError,
    Violation,
    _op_end,
    op_position,
)
from .replay import _apply, _Replayer
from .stale import DELETERS, EVICTION_ENTRIES
from .timeline import FRAME_CACHE, Timeline
from .wording import (
    _CALL_DETAIL,
    _CAPTURE,
    _KEY_TEXT,
    _SHARED_DETAIL_IDS,
    _WORDS,
    Steps,
    _call_detail,
    _describe,
    _key_text,
    _kref,
    _kt,
    _kw,
    _nid,
    _step,
    _w_ack,
    _w_attach,
    _w_backup,
    _w_detach,
    _w_host_ref,
    _w_lock,
    _w_lru,
    _w_pool,
    _w_set,
    _w_split,
    _Worded,
    _words,
)

__all__ = [
    "CHECKPOINT_EVERY", "CHECKPOINT_STEPS", "DATING_SPREAD", "DEFAULT_MEMORY_LIMIT_MB", "DELETERS", "EVICTION_ENTRIES",
    "FRAME_CACHE", "STEP_INVARIANTS", "Checkpoint", "CleanupEvent", "Ledger", "MicroStep", "OpRecord", "Recorder",
    "StaleEvent", "Steps", "Timeline", "TraceLimitError", "Violation", "log_sha256", "memory_limit", "op_position",
    "rss_mb",
]
