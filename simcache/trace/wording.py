"""The words of a micro-step, made on demand from its compact log entry (``_words``), and ``Steps``, the run's
micro-steps worded lazily."""
from __future__ import annotations

from collections.abc import Sequence

from ..keys import format_key
from ..node import TreeNode
from ..operations import describe_op
from .records import MicroStep

_CALL_DETAIL: dict[str, dict] = {}
_SHARED_DETAIL_IDS: set[int] = set()  # ids of ``_CALL_DETAIL``'s dicts (never freed: ids stay theirs)


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

# --- the words of a micro-step, made on demand from its compact entry --------------------------------------------
# An entry of ``Recorder._log`` is ``(op, actor, kind, stack, node id, payload)``. The payload holds what the words
# need, as it was: node keys are immutable tuples, so an entry keeps the key itself (or its text, for a key of
# another type), never the node. ``call``: the first node argument's key (the function is the stack's last name);
# ``op``: the operation; pool kinds: (pool, slots); ``lru_*`` / ``set_*``: (key, list or set name); other event
# kinds: what ``_CAPTURE`` takes; ``_Worded``: (text, detail) worded when it happened.


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

def _describe(kind: str, d: dict) -> tuple[str, dict]:
    """A micro-step worded when it happens: a stale guard's cleanup (every other event kind is in ``_CAPTURE``,
    worded on demand by ``_WORDS``), or an event kind neither knows, by its name."""
    if kind == "cleaned_up":
        n = d["node"]
        removed = ", ".join(d["removed"]) or "nothing"
        return (f"stale guard: cleaned up [{_key_text(n.key)}]#{n.id} ({d['reason']}); removed from {removed}",
                dict(reason=d["reason"], removed=list(d["removed"]), warning=d["warning"]))
    if kind == "refill_dropped":  # the unified cache's #31902 (simcache.unified.tree._insert_helper_host)
        n = d["node"]
        return (f"#31902: the prefetched refill [{_key_text(d['key'])}] is dropped: [{_key_text(n.key)}]#{n.id}, "
                f"where it would hang, is not backed up", dict(parent=n.id, key=_key_text(d["key"])))
    return kind, {}
