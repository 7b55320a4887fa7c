"""Named invariants of the cache, each a function ``cache, live requests -> problem text or None``.

- ``attachment`` (I0): every node in a leaf set, an LRU list or an in-flight map is attached to the tree.
- ``tier_monotonicity`` (I1, I3): an attached evicted node is backed up and its attached descendants are evicted.
- ``backup_continuity`` (I2, write-through policies): an attached backed-up node's parent is backed up or root.
- ``leaf_sets``: the device set holds only unlocked device nodes with no child on device; the host set only
  host-only, unreferenced nodes with no attached children.
- ``lru_membership``: the full LRU holds exactly the attached device nodes, the Mamba LRU exactly the attached
  nodes with a device Mamba state, the host-Mamba LRU only attached nodes with a host Mamba state.
- ``size_counters``: evictable + protected counters equal a recount over the attached tree.
- ``no_double_free``: no pool has freed a slot that was already free.
- ``no_leak``: every allocated slot is referenced by an attached node, a live request or an in-flight copy.
- ``kv_content``: every attached node's device and host KV hold the fingerprints of its prefix.

``check_all`` runs them; ``BOUNDARY_ONLY`` ones are meaningful only between operations (inside one, slots are in
transit), the others are checked after every micro-step.
"""
from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import itemgetter, not_

from .pools import kv_fingerprints, mamba_fingerprint
from .state import attached_ids, dfs, held_by, holder_map, referenced_slots


def _name(n) -> str:
    return f"node {n.id} [{','.join(map(str, n.key))}]"


def attachment(cache, live) -> str | None:
    att = attached_ids(cache)
    for _, node in held_by(cache):
        if id(node) not in att:
            return f"{_name(node)} is detached but still held by {', '.join(holder_map(cache)[node.id])}"
    return None


def tier_monotonicity(cache, live) -> str | None:
    for _, n in dfs(cache):
        if n.value is None:
            if n.host_value is None:
                return f"{_name(n)} is in the tree but on neither tier"
            for c in n.children.values():
                if c.parent is n and c.value is not None:
                    return f"{_name(n)} is evicted but its child {_name(c)} is on device"
    return None


def backup_continuity(cache, live) -> str | None:
    if cache.config.policy == "write_back":
        return None
    for _, n in dfs(cache):
        p = n.parent
        if n.host_value is not None and p is not cache.root_node and p.host_value is None:
            return f"{_name(n)} is backed up but its parent {_name(p)} is not"
    return None


def leaf_sets(cache, live) -> str | None:
    att = attached_ids(cache)
    for n in cache.evictable_full_device_leaves:
        if n.value is None or n.full_lock_ref > 0 or any(c.value is not None for c in n.children.values()):
            return f"{_name(n)} is in evictable_full_device_leaves but is not an unlocked device leaf"
    for n in cache.evictable_full_host_leaves:
        kids = [c for c in n.children.values() if id(c) in att]
        if n.value is not None or n.host_value is None or n.host_ref_counter or n.host_mamba_ref_counter or kids:
            return f"{_name(n)} is in evictable_full_host_leaves but is not an unreferenced host leaf"
    return None


def lru_membership(cache, live) -> str | None:
    nodes = [n for _, n in dfs(cache)]
    want_full = {n.id for n in nodes if n.value is not None}
    have_full = set(cache.full_lru_list.cache)
    if want_full != have_full:
        return _diff("full_lru_list", want_full, have_full)
    want_m = {n.id for n in nodes if n.mamba_value is not None}
    have_m = set(cache.mamba_lru_list.cache)
    if want_m != have_m:
        return _diff("mamba_lru_list", want_m, have_m)
    host_m = {n.id for n in nodes if n.mamba_host_value is not None}
    extra = set(cache.mamba_host_lru_list.cache) - host_m
    if extra:
        return f"mamba_host_lru_list holds node(s) {sorted(extra)} that have no attached host Mamba state"
    return None


def _diff(name, want, have) -> str:
    missing, extra = sorted(want - have), sorted(have - want)
    parts = ([f"misses node(s) {missing}"] if missing else []) + ([f"holds extra node(s) {extra}"] if extra else [])
    return f"{name} {' and '.join(parts)}"


def size_counters(cache, live) -> str | None:
    nodes = [n for _, n in dfs(cache)]
    dev = sum(len(n.value) for n in nodes if n.value is not None)
    prot = sum(len(n.value) for n in nodes if n.value is not None and n.full_lock_ref > 0)
    if (cache.full_evictable_size_, cache.full_protected_size_) != (dev - prot, prot):
        return (f"full counters evictable={cache.full_evictable_size_} protected={cache.full_protected_size_}, "
                f"recount {dev - prot} and {prot}")
    mam = [n for n in nodes if n.mamba_value is not None]
    mprot = sum(len(n.mamba_value) for n in mam if n.mamba_lock_ref > 0)
    mall = sum(len(n.mamba_value) for n in mam)
    if (cache.mamba_evictable_size_, cache.mamba_protected_size_) != (mall - mprot, mprot):
        return (f"mamba counters evictable={cache.mamba_evictable_size_} protected={cache.mamba_protected_size_}, "
                f"recount {mall - mprot} and {mprot}")
    return None


def no_double_free(cache, live) -> str | None:
    for name, p in cache.pools.all().items():
        if p.double_frees:
            d = p.double_frees[0]
            return f"{name} slot(s) {list(d.slots)} freed twice (in {' <- '.join(d.stack) or 'the driver'})"
    return None


def no_leak(cache, live) -> str | None:
    refs = referenced_slots(cache, live)
    for name, p in cache.pools.all().items():
        leaked = p.accounting(refs[name]).leaked
        if leaked:
            return f"{name} slot(s) {list(leaked)} are allocated but nobody refers to them"
    return None


def kv_content(cache, live) -> str | None:
    pools = cache.pools
    for _, n in dfs(cache):
        prefix = cache._node_prefix_tokens(n)
        want = kv_fingerprints(prefix, start=len(prefix) - len(n.key))
        for label, slots, pool in (("device", n.value, pools.device_kv), ("host", n.host_value, pools.host_kv)):
            if slots is not None and len(slots) == len(want) and pool.read(slots) != want:
                return f"{_name(n)}: {label} KV does not hold what was written for its prefix"
        m = mamba_fingerprint(prefix)
        for label, slots, pool in (("device", n.mamba_value, pools.device_mamba),
                                   ("host", n.mamba_host_value, pools.host_mamba)):
            if slots is not None and pool.read(slots) != [m]:
                return f"{_name(n)}: {label} Mamba state does not match its prefix"
    return None


INVARIANTS: dict[str, Callable] = dict(
    attachment=attachment, tier_monotonicity=tier_monotonicity, backup_continuity=backup_continuity,
    leaf_sets=leaf_sets, lru_membership=lru_membership, size_counters=size_counters,
    no_double_free=no_double_free, no_leak=no_leak, kv_content=kv_content,
)
BOUNDARY_ONLY = frozenset({"no_leak", "kv_content"})


def check_all(cache, live=(), names=None) -> dict[str, str | None]:
    """Run the named invariants (default: all) -> name -> problem or None."""
    return {name: INVARIANTS[name](cache, live) for name in (names or INVARIANTS)}


# --- the fast path: which invariants fail, in one pass over the tree ------------------------------------------

_H0, _MUL = 0x9E3779B97F4A7C15, 0x100000001B3
_M = (1 << 62) - 1


def _attached_nodes(cache, memo: dict) -> list:
    """(node, its key's KV fingerprints, its prefix's Mamba fingerprint) for every attached node, any order.

    Fingerprints follow ``pools.kv_fingerprints`` (a rolling hash over the whole prefix), carried down the tree
    instead of recomputed from the root for every node, and kept in ``memo`` while a node's key and parent prefix
    stay the same."""
    root, child_key = cache.root_node, cache.child_key
    out, stack = [], [(root, _H0, 0)]
    while stack:
        n, h, start = stack.pop()
        for k, c in n.children.items():
            key = c.key
            if c.parent is n and len(key) > 0 and child_key(key) == k:
                m = memo.get(id(c))
                if m is None or m[0] is not c or m[1] is not key or m[2] != h or m[3] != start:
                    want, hc, i = [], h, start
                    for t in key:
                        hc = ((hc ^ (int(t) & 0xFFFFFFFF)) * _MUL + i) & _M
                        want.append(hc)
                        i += 1
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
