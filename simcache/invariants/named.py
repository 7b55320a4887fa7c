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

from ..fingerprints import kv_fingerprints, mamba_fingerprint
from ..state import attached_ids, held_by, holder_map, referenced_slots
from ..unified.ledger import is_unified
from . import unified as unified_checks


def _name(n) -> str:
    return f"node {n.id} [{','.join(map(str, n.key))}]"


def _tree(cache) -> list:
    """The attached nodes, each once, in ``state.dfs``'s order (preorder, siblings sorted by key), following only
    the links whose parent pointer and child key agree (``attached_ids``' rule). ``dfs`` follows every dict entry
    that names an attached node, so a node also listed by a node that is not its parent would be counted twice
    there (and an attached ancestor listed below itself would never end)."""
    root, ck = cache.root_node, cache.child_key
    out, stack = [], [root]
    while stack:
        n = stack.pop()
        if n is not root:
            out.append(n)
        kids = sorted((c for k, c in n.children.items() if c.parent is n and len(c.key) > 0 and ck(c.key) == k),
                      key=lambda c: c.key)
        stack.extend(reversed(kids))
    return out


def attachment(cache, live) -> str | None:
    att = attached_ids(cache)
    for _, node in held_by(cache):
        if id(node) not in att:
            return f"{_name(node)} is detached but still held by {', '.join(holder_map(cache)[node.id])}"
    return None


def tier_monotonicity(cache, live) -> str | None:
    for n in _tree(cache):
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
    for n in _tree(cache):
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
    nodes = _tree(cache)
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
    nodes = _tree(cache)
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
    refs = referenced_slots(cache, live, _tree(cache))
    for name, p in cache.pools.all().items():
        leaked = p.accounting(refs[name]).leaked
        if leaked:
            return f"{name} slot(s) {list(leaked)} are allocated but nobody refers to them"
    return None


def kv_content(cache, live) -> str | None:
    pools = cache.pools
    for n in _tree(cache):
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
# a unified cache's (``unified``): its own leaf sets, LRU lists and counters, the rest shared
UNIFIED_INVARIANTS: dict[str, Callable] = {name: unified_checks.OWN.get(name, fn) for name, fn in INVARIANTS.items()}


def check_all(cache, live=(), names=None) -> dict[str, str | None]:
    """Run the named invariants (default: all) -> name -> problem or None."""
    table = UNIFIED_INVARIANTS if is_unified(cache) else INVARIANTS
    return {name: table[name](cache, live) for name in (names or INVARIANTS)}


def check_invariants(cache, live=(), names=None) -> dict[str, str | None]:
    """``check_all`` for the public API (``simcache.check_invariants``): its arguments checked first, so a wrong
    one is one ``ArgumentError`` sentence."""
    from .. import args
    from ..requests import Request

    args.cache(cache, "check_invariants")
    if isinstance(live, (str, bytes, dict)) or not isinstance(live, (list, tuple)) or \
            not all(isinstance(r, Request) for r in live):
        raise args.fail("live", "a list of the live Requests (driver.live.values())", live,
                        "check_invariants(cache, list(driver.live.values()))")
    if names is not None:
        args.names(names, "names", "names=['no_leak']", known=INVARIANTS)
    return check_all(cache, live, names)
