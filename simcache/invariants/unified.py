"""The invariants of a unified cache (``simcache.unified``), in ``named``'s form: ``cache, live -> problem or None``.

Shared with HiMamba as they are (the holder ledger and the slot references dispatch on the family): ``attachment``
(every node a leaf set, an LRU list or an in-flight map holds is attached), ``tier_monotonicity``,
``backup_continuity`` (write-through: SGLang's own ``sanity_check`` says "backed up but parent not backed up"),
``no_double_free``, ``no_leak``. ``kv_content`` does not apply: the unified driver computes no KV fingerprints
(its pools hold slots, not data). The unified cache's own:

- ``leaf_sets``: ``evictable_device_leaves`` holds only attached D-leaves (device KV, no lock, no child with device
  KV: a host-only child does not stop one), ``evictable_host_leaves`` only attached H-leaves (evicted, backed up,
  no host lock, no children);
- ``lru_membership``: ``mamba_lru_list`` holds exactly the attached nodes with a device Mamba state,
  ``mamba_host_lru_list`` only attached nodes with a host Mamba state;
- ``size_counters``: the Full and Mamba evictable and protected counters equal a recount over the attached tree.

A check that does not apply answers None.
"""
from __future__ import annotations

from ..unified.ledger import attached_nodes_of


def _name(n) -> str:
    return f"node {n.id} [{','.join(map(str, n.key))}]"


def leaf_sets(cache, live) -> str | None:
    att = {id(n) for n in attached_nodes_of(cache)}
    for n in cache.evictable_device_leaves:
        if id(n) not in att:
            return f"{_name(n)} is in evictable_device_leaves but detached from the tree"
        if not cache._is_device_leaf(n):
            return f"{_name(n)} is in evictable_device_leaves but is not an unlocked device leaf"
    for n in cache.evictable_host_leaves:
        if id(n) not in att:
            return f"{_name(n)} is in evictable_host_leaves but detached from the tree"
        if not cache._is_host_leaf(n):
            return f"{_name(n)} is in evictable_host_leaves but is not an unlocked host-only leaf"
    return None


def lru_membership(cache, live) -> str | None:
    nodes = attached_nodes_of(cache)
    want = {n.id for n in nodes if n.mamba_value is not None}
    have = set(cache.mamba_lru_list.cache)
    if want != have:
        missing, extra = sorted(want - have), sorted(have - want)
        parts = ([f"misses node(s) {missing}"] if missing else []) + ([f"holds extra node(s) {extra}"] if extra else [])
        return f"mamba_lru_list {' and '.join(parts)}"
    host = {n.id for n in nodes if n.mamba_host_value is not None}
    extra = set(cache.mamba_host_lru_list.cache) - host
    if extra:
        return f"mamba_host_lru_list holds node(s) {sorted(extra)} that have no attached host Mamba state"
    return None


def size_counters(cache, live) -> str | None:
    nodes = attached_nodes_of(cache)
    dev = sum(len(n.value) for n in nodes if n.value is not None)
    prot = sum(len(n.value) for n in nodes if n.value is not None and n.full_lock_ref > 0)
    ev, pr = cache.evictable, cache.protected
    if (ev["full"], pr["full"]) != (dev - prot, prot):
        return f"full counters evictable={ev['full']} protected={pr['full']}, recount {dev - prot} and {prot}"
    mam = [n for n in nodes if n.mamba_value is not None]
    mall = sum(len(n.mamba_value) for n in mam)
    mprot = sum(len(n.mamba_value) for n in mam if n.mamba_lock_ref > 0)
    if (ev["mamba"], pr["mamba"]) != (mall - mprot, mprot):
        return f"mamba counters evictable={ev['mamba']} protected={pr['mamba']}, recount {mall - mprot} and {mprot}"
    return None


def not_applicable(cache, live) -> None:
    return None


OWN = dict(leaf_sets=leaf_sets, lru_membership=lru_membership, size_counters=size_counters,
           kv_content=not_applicable)
