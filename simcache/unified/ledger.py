"""What the shared views and checks read from a unified cache, in their vocabulary: the holder ledger, the leaf sets
and LRU lists, the in-flight maps as node ids, the size counters and the slots each pool's owners refer to.

``simcache.state``, ``simcache.snapshot``, the invariants and the recorder ask ``is_unified(cache)`` and read a
unified cache through these functions; a HiMamba cache is read as before. Nothing here changes the cache.

Holder names are SGLang's for the unified class (``evictable_device_leaves``, ``evictable_host_leaves``,
``mamba_lru_list``, ``mamba_host_lru_list``, ``ongoing_write_through`` ...); a prefetch's anchor is
``prefetch anchor``, as for HiMamba.
"""
from __future__ import annotations

from collections.abc import Iterator

POOLS = ("device_kv", "device_mamba", "host_kv", "host_mamba")
HOLDER_FIELDS = ("evictable_device_leaves", "evictable_host_leaves", "mamba_lru_list", "mamba_host_lru_list",
                 "ongoing_write_through", "ongoing_load_back", "ongoing_backup", "ongoing_prefetch")


def is_unified(cache) -> bool:
    return getattr(cache, "family", None) == "unified"


def leaf_sets(cache) -> tuple:
    return cache.evictable_device_leaves, cache.evictable_host_leaves


def lru_lists(cache) -> tuple:
    return cache.mamba_lru_list, cache.mamba_host_lru_list


def held_by(cache, lrus: bool = True) -> Iterator[tuple[str, object]]:
    """Every (holder, node) pair, in ``state.held_by``'s canonical order: leaf sets, LRU lists (MRU first), the
    in-flight maps, prefetch anchors."""
    for s in leaf_sets(cache):
        for n in s:
            yield s.name, n
    for lru in lru_lists(cache) if lrus else ():
        for n in lru.nodes():
            yield lru.name, n
    for v in cache.ongoing_write_through.values():
        yield "ongoing_write_through", v[0]
    for v in cache.ongoing_load_back.values():
        yield "ongoing_load_back", v[0]
    for v in cache.ongoing_backup.values():
        yield "ongoing_backup", v[0]
    for v in cache.ongoing_prefetch.values():
        yield "prefetch anchor", v.last_host_node


def holders_of(cache, node) -> list[str]:
    names = [s.name for s in leaf_sets(cache) if node in s]
    names += [lru.name for lru in lru_lists(cache) if lru.cache.get(node.id) is node]
    for label, m in (("ongoing_write_through", cache.ongoing_write_through),
                     ("ongoing_load_back", cache.ongoing_load_back), ("ongoing_backup", cache.ongoing_backup)):
        names += [label for v in m.values() if v[0] is node]
    return names + ["prefetch anchor" for v in cache.ongoing_prefetch.values() if v.last_host_node is node]


def holders(cache) -> dict[str, list]:
    """Every structure that refers to nodes, by SGLang's name."""
    out: dict[str, list] = {name: [] for name in HOLDER_FIELDS}
    for name, n in held_by(cache):
        out["ongoing_prefetch" if name == "prefetch anchor" else name].append(n)
    return out


def ongoing_ids(cache) -> dict[str, tuple[int, ...]]:
    """The in-flight maps as the node ids they hold (a snapshot's ``ongoing``)."""
    return dict(write_through=tuple(v[0].id for v in cache.ongoing_write_through.values()),
                load_back=tuple(v[0].id for v in cache.ongoing_load_back.values()),
                backup=tuple(v[0].id for v in cache.ongoing_backup.values()),
                prefetch=tuple(v.last_host_node.id for v in cache.ongoing_prefetch.values()))


def sizes(cache) -> dict[str, int]:
    """The four size counters, in ``HiMambaRadixCache.sizes``' names (SGLang's ``component_evictable_size_`` and
    ``component_protected_size_`` of Full and Mamba)."""
    ev, pr = cache.evictable, cache.protected
    return dict(full_evictable=ev["full"], full_protected=pr["full"], mamba_evictable=ev["mamba"],
                mamba_protected=pr["mamba"])


def referenced_slots(cache, live_requests=(), attached_nodes=None) -> dict[str, list[int]]:
    """Slots each pool's owners refer to: attached nodes, live requests, prefetches (their reserved host KV and Mamba
    buffers), the host KV and host Mamba release queues (``simcache.unified.run.state``'s accounting)."""
    refs: dict[str, list[int]] = {p: [] for p in POOLS}
    nodes = attached_nodes if attached_nodes is not None else attached_nodes_of(cache)
    for n in nodes:
        for p, v in zip(POOLS, (n.value, n.mamba_value, n.host_value, n.mamba_host_value), strict=True):
            if v is not None:
                refs[p] += v
    for r in live_requests:
        refs["device_kv"] += r.kv[r.cache_protected_len: len(r.tokens)]
        refs["device_mamba"] += [s for s in (r.mamba_pool_idx,) if s is not None]
    for v in cache.ongoing_prefetch.values():
        refs["host_kv"] += v.host_indices or v.operation.host_indices or []
        for t in v.mamba:
            refs["host_mamba"] += t.host_indices or []
    cc = cache.controller
    for page in cc.host_mem_release_queue:
        refs["host_kv"] += page
    for page in getattr(cc, "mamba_release_queue", ()):
        refs["host_mamba"] += page
    return refs


def attached_nodes_of(cache) -> list:
    """The nodes reachable from the root through links whose parent pointer and child key agree, root excluded."""
    root, ck, out, stack = cache.root_node, cache.child_key, [], [cache.root_node]
    while stack:
        n = stack.pop()
        for k, c in n.children.items():
            if c.parent is n and len(c.key) > 0 and ck(c.key) == k:
                out.append(c)
                stack.append(c)
    return [n for n in out if n is not root]


def inflight(cache) -> dict[str, int]:
    cc = cache.controller
    return dict(write_through=len(cache.ongoing_write_through), load_back=len(cache.ongoing_load_back),
                backup=len(cache.ongoing_backup), prefetch=len(cache.ongoing_prefetch),
                pending_l3=len(cc.pending_backups), write_acks=len(cc.ack_write_queue))
