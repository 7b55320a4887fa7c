"""Words every view shares: keys abbreviated one way, operations by their real number, a micro-step as a sentence.

Vocabulary
- A *key* is a token list; past ``KEY_LIMIT`` tokens it is written ``1,2,3,…,64 (64)`` (``short_key``) in every view:
  node boxes, chips, holder rows, captions, the code pane's node links, the explanation. ``short`` applies the same
  rule to a text the trace wrote (``detach [1,2,…]#8 from …``, ``request [1 2 3 …]``), so a 648-token key never
  widens a drawing or a caption.
- An operation's *number* is its index in the whole schedule (``trace.ops[k].index``): a run narrowed with
  ``--ops 6:9`` shows operations 6, 7 and 8, never 0, 1 and 2.
- A micro-step's *sentence* (``sentence``) is what the caption says: plain English, not the trace token
  (``alloc host_kv [1, 2]`` becomes "host KV slots 1, 2 are allocated.").
"""
from __future__ import annotations

import re

KEY_LIMIT = 6  # tokens a key shows in full


def short_key(key, limit: int = KEY_LIMIT) -> str:
    """``1,2,3`` or, past ``limit`` tokens, ``1,2,3,…,64 (64)``."""
    key = tuple(key)
    if len(key) <= limit:
        return ",".join(map(str, key))
    return ",".join(map(str, key[:3])) + f",…,{key[-1]} ({len(key)})"


_LIST = re.compile(r"\[(\s*-?\d+(?:\s*[, ]\s*-?\d+){" + str(KEY_LIMIT) + r",}\s*)\]")


def short(text: str) -> str:
    """``text`` with every bracketed list of more than ``KEY_LIMIT`` numbers abbreviated as ``short_key`` does
    (``[1,2,3,4,5,6,7]`` and ``[1 2 3 4 5 6 7]`` become ``[1,2,3,…,7 (7)]``)."""
    if "[" not in text:
        return text
    return _LIST.sub(lambda m: "[" + short_key(int(x) for x in re.split(r"[\s,]+", m.group(1).strip())) + "]", text)


def op_number(trace, k: int) -> int:
    """The real number of ``trace.ops[k]`` (its index in the schedule; a narrowed run starts past 0)."""
    ops = getattr(trace, "ops", None)
    if not ops or not 0 <= k < len(ops):
        return k
    return getattr(ops[k], "index", k)


_POOLS = {"device_kv": "device KV", "host_kv": "host KV", "device_mamba": "device Mamba", "host_mamba": "host Mamba"}
_REF = re.compile(r"\[([^\]]*)\]#(\d+)")


def _refs(text: str) -> list[str]:
    """The nodes a trace text names (``[1,2]#8``), as a sentence names them: ``#8 [1,2]``, ``the root``."""
    return ["the root" if not key else f"#{nid} [{short(f'[{key}]')[1:-1]}]" for key, nid in _REF.findall(text)]


def numbers(items) -> str:
    """``0, 1, 2`` or, past ``KEY_LIMIT`` items, ``0, 1, 2, …, 647 (648 slots)``."""
    items = list(items)
    if len(items) <= KEY_LIMIT:
        return ", ".join(map(str, items))
    return ", ".join(map(str, items[:3])) + f", …, {items[-1]} ({len(items)} slots)"


def _slots(d: dict) -> str:
    pool = _POOLS.get(d.get("pool", ""), d.get("pool", "a pool"))
    slots = d.get("slots", [])
    many = len(slots) != 1
    return f"{pool} slot{'s' if many else ''} {numbers(slots)}", "are" if many else "is"


def sentence(step) -> str:
    """One plain English sentence for micro-step ``step`` (a ``MicroStep``): what the code did, not its token."""
    out = _sentence(step)
    return out[:1].upper() + out[1:]


def _sentence(step) -> str:
    k, d, text = step.kind, step.detail or {}, step.text
    r = _refs(text) + ["a node", "a node"]
    if k == "op":
        return "The operation begins."
    if k == "call":
        return f"The cache calls {d.get('function', text.rstrip('()'))}()" + (
            f" on #{step.node}." if step.node is not None else ".")
    if k == "alloc_fail":
        pool = _POOLS.get(d.get("pool", ""), d.get("pool", "a pool"))
        n = (d.get("slots") or ["?"])[0]
        return f"Allocating {n} {pool} slot{'' if n == 1 else 's'} fails: the pool has no room, so the cache evicts."
    if k in ("alloc", "free", "double_free"):
        what, verb = _slots(d)
        return {"alloc": f"The cache allocates {what}.", "free": f"The cache frees {what}.",
                "double_free": f"The cache frees {what} again: {'they' if verb == 'are' else 'it'} {verb} already free "
                               "(a double free)."}[k]
    if k == "attach":
        return f"{r[0]} is attached under {r[1]} (slot {d.get('slot', '?')})."
    if k == "detach":
        if d.get("popped") != step.node:
            return (f"The code detaches {r[0]} from {r[1]}, but that slot no longer holds it: "
                    f"{r[0]} was already detached.")
        return f"{r[0]} is detached from {r[1]} (slot {d.get('slot', '?')}): the tree no longer reaches it."
    if k == "split":
        return f"{r[0]} is split: the new prefix node {r[1]} takes its place in the tree."
    if k == "lock":
        verb = "locked" if d.get("change", 1) > 0 else "unlocked"
        return f"{r[0]} is {verb} (a request {'uses' if verb == 'locked' else 'no longer uses'} it; " \
               f"lock count {d.get('full_lock_ref', '?')})."
    if k == "host_ref":
        return f"{r[0]}'s host references change: KV {d.get('host_ref', '?')}, Mamba {d.get('host_mamba_ref', '?')}."
    if k == "backup":
        return f"{r[0]} is backed up to host KV slots {numbers(d.get('host', []))}."
    if k == "write_ack":
        return f"The controller acknowledges the write of {r[0]} to the host."
    if k == "load_ack":
        return f"The controller acknowledges the load of {r[0]} back to the device."
    if k == "storage_ack":
        return f"Storage acknowledges the backup of {r[0]}."
    if k in ("lru_insert", "lru_remove"):
        lst = d.get("list", "an LRU list")
        return f"{r[0]} {'enters' if k == 'lru_insert' else 'leaves'} {lst}."
    if k in ("set_add", "set_discard"):
        s = d.get("set", "a leaf set")
        return f"{r[0]} {'joins' if k == 'set_add' else 'leaves'} {s}."
    if k == "assertion":
        return (f"The simulated cache raises {d.get('type', 'an error')} in {d.get('function', '?')}: "
                f"{short(d.get('message', text))}.")
    if k == "cleaned_up":
        removed = d.get("removed") or []
        where = (f"removing it from {', '.join(removed)}" if removed
                 else "it is in no LRU list or leaf set, so the guard only skips it")
        return f"A stale guard cleans up {r[0]} ({d.get('reason', 'stale')}): {where}."
    return short(text) + ("" if text.endswith(".") else ".")
