"""The fast path: which invariants fail, in one pass over the tree (``failing``; the named checks word them)."""
from __future__ import annotations

from itertools import compress
from operator import itemgetter, not_

from ..fingerprints import KV_START, kv_extend
from ..state import held_by, referenced_slots
from ..unified.ledger import is_unified

_H0 = KV_START  # the fingerprint state before the first token
_M = (1 << 62) - 1


def _attached_nodes(cache, memo: dict) -> list:
    """(node, its key's KV fingerprints, its prefix's Mamba fingerprint) for every attached node, any order.

    Fingerprints follow ``pools.kv_fingerprints`` (a rolling hash over the whole prefix), carried down the tree
    (``kv_extend`` continues a parent's last fingerprint over the child's key) instead of recomputed from the root
    for every node, and kept in ``memo`` while a node's key and parent prefix stay the same."""
    root, child_key = cache.root_node, cache.child_key
    out, stack = [], [(root, _H0, 0)]
    while stack:
        n, h, start = stack.pop()
        for k, c in n.children.items():
            key = c.key
            if c.parent is n and len(key) > 0 and child_key(key) == k:
                m = memo.get(id(c))
                if m is None or m[0] is not c or m[1] is not key or m[2] != h or m[3] != start:
                    want, hc = kv_extend(h, key)
                    i = start + len(key)
                    m = memo[id(c)] = (c, key, h, start, want, hc, i, ((hc if i else 0) * 31 + i + 7) & _M)
                out.append((c, m[4], m[7]))
                stack.append((c, m[5], m[6]))
    return out


def _data_differs(pool, slots: list[int], want: list[int]) -> bool:
    if not slots:
        return False
    if pool.streams is not None or pool.inflight:  # copies in flight: read as the named check does (they land)
        return pool.read(slots) != want
    data = pool.data.tolist()
    got = itemgetter(*slots)(data)
    return (list(got) if len(slots) > 1 else [got]) != want


def failing(cache, live=(), memo: dict | None = None) -> set[str]:
    """The names of the invariants that fail now: ``{n for n, p in check_all(cache, live).items() if p}``, computed
    in one pass (the recorder's check at every operation boundary; ``check_all`` then words only the new ones).
    ``memo``: a dict kept between calls on the same cache (fingerprints of unchanged nodes)."""
    if is_unified(cache):  # no one-pass version: the named checks, all of them
        from .named import check_all

        return {name for name, problem in check_all(cache, live).items() if problem}
    bad: set[str] = set()
    nodes = _attached_nodes(cache, {} if memo is None else memo)
    att = {id(cache.root_node)}
    att.update(id(n) for n, _, _ in nodes)
    root = cache.root_node
    att_ids = {n.id for n, _, _ in nodes}
    att_ids.add(root.id)
    # LRU lists are keyed by node id (ids are unique), so a key test is a membership test; the rest are small
    if any(not lru.cache.keys() <= att_ids for lru in (cache.full_lru_list, cache.mamba_lru_list,
                                                        cache.mamba_host_lru_list)) \
            or any(id(n) not in att for name, n in held_by(cache, lrus=False)):
        bad.add("attachment")
    write_back = cache.config.policy == "write_back"
    dev = prot = mall = mprot = 0
    want_full, want_m, host_m = set(), set(), set()
    slots = {name: [] for name in ("device_kv", "host_kv", "device_mamba", "host_mamba")}
    wants = {name: [] for name in slots}
    for n, want, m in nodes:
        v, hv, mv, mhv = n.value, n.host_value, n.mamba_value, n.mamba_host_value
        if v is None:
            if hv is None or any(c.parent is n and c.value is not None for c in n.children.values()):
                bad.add("tier_monotonicity")
        else:
            want_full.add(n.id)
            dev += len(v)
            if n.full_lock_ref > 0:
                prot += len(v)
            if len(v) == len(want):
                slots["device_kv"] += v
                wants["device_kv"] += want
        if hv is not None:
            if not write_back and n.parent is not root and n.parent.host_value is None:
                bad.add("backup_continuity")
            if len(hv) == len(want):
                slots["host_kv"] += hv
                wants["host_kv"] += want
        if mv is not None:
            want_m.add(n.id)
            mall += len(mv)
            if n.mamba_lock_ref > 0:
                mprot += len(mv)
            if len(mv) != 1:
                bad.add("kv_content")
            slots["device_mamba"] += mv
            wants["device_mamba"].append(m)
        if mhv is not None:
            host_m.add(n.id)
            if len(mhv) != 1:
                bad.add("kv_content")
            slots["host_mamba"] += mhv
            wants["host_mamba"].append(m)
    pools = cache.pools
    if "kv_content" not in bad and any(_data_differs(getattr(pools, name), slots[name], wants[name])
                                       for name in slots):
        bad.add("kv_content")
    for n in cache.evictable_full_device_leaves:
        if n.value is None or n.full_lock_ref > 0 or any(c.value is not None for c in n.children.values()):
            bad.add("leaf_sets")
    for n in cache.evictable_full_host_leaves:
        if n.value is not None or n.host_value is None or n.host_ref_counter or n.host_mamba_ref_counter or \
                any(id(c) in att for c in n.children.values()):
            bad.add("leaf_sets")
    if want_full != cache.full_lru_list.cache.keys() or want_m != cache.mamba_lru_list.cache.keys() or \
            not cache.mamba_host_lru_list.cache.keys() <= host_m:
        bad.add("lru_membership")
    if (cache.full_evictable_size_, cache.full_protected_size_) != (dev - prot, prot) or \
            (cache.mamba_evictable_size_, cache.mamba_protected_size_) != (mall - mprot, mprot):
        bad.add("size_counters")
    if any(p.double_frees for p in pools.all().values()):
        bad.add("no_double_free")
    refs = referenced_slots(cache, live, [n for n, _, _ in nodes])
    for name, p in pools.all().items():
        used = set(compress(range(p.size), map(not_, p._free_count)))
        if used and not used <= set(refs[name]):
            bad.add("no_leak")
            break
    return bad
