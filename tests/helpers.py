"""Small helpers shared by the cache tests: build a cache, name nodes by their path, recount sizes, snapshot state.

Nodes are named by the keys on their path from the root, joined by ``/``: ``"1,2/3"`` is the node with key
``[3]`` under the node with key ``[1,2]``. A node that is no longer reachable from the root gets ``" (detached)"``
appended, so a stale reference shows up in a snapshot as text.
"""
from __future__ import annotations

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.keys import format_key
from simcache.node import TreeNode
from simcache.state import accounting, attached_ids, dfs, tree_lines
from simcache.versions import Flags, preset


def make_cache(policy: str = "write_through", version: str = "pre_fix", *, flags: Flags | None = None,
               device_kv: int = 32, device_mamba: int = 8, host_kv: int = 8, host_mamba: int = 8,
               **config) -> HiMambaRadixCache:
    """A CPU cache with the oracle's default pool sizes; ``flags`` overrides the preset ``version``."""
    return HiMambaRadixCache(CacheConfig(device_kv=device_kv, device_mamba=device_mamba, host_kv=host_kv,
                                         host_mamba=host_mamba, policy=policy, flags=flags or preset(version),
                                         device="cpu", **config))


def path_of(cache: HiMambaRadixCache, node: TreeNode) -> str:
    """``"1,2/3"`` for the node with key [3] under [1,2]; ``"root"`` for the root."""
    if node is cache.root_node:
        return "root"
    parts, n = [], node
    while n is not None and n is not cache.root_node:
        parts.append(format_key(n.key))
        n = n.parent
    name = "/".join(reversed(parts))
    return name if id(node) in attached_ids(cache) else f"{name} (detached)"


def node_at(cache: HiMambaRadixCache, *keys: tuple[int, ...] | list[int]) -> TreeNode:
    """The attached node reached from the root through children with exactly these keys."""
    node = cache.root_node
    for key in keys:
        key = tuple(key)
        node = node.children[cache.child_key(key)]
        assert node.key == key, f"expected key {key}, found {node.key}"
    return node


def lru_paths(cache: HiMambaRadixCache, lru) -> list[str]:
    """An LRU list's members, most recently used first."""
    return [path_of(cache, n) for n in lru.mru_to_lru()]


def leaf_paths(cache: HiMambaRadixCache, leaves) -> list[str]:
    return sorted(path_of(cache, n) for n in leaves)


def recount(cache: HiMambaRadixCache) -> dict[str, int]:
    """The four size counters recomputed from the attached tree (what ``cache.sizes()`` should say)."""
    out = dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0)
    for _, n in dfs(cache):
        if n.value is not None:
            out["full_protected" if n.full_lock_ref > 0 else "full_evictable"] += len(n.value)
        if n.mamba_value is not None:
            out["mamba_protected" if n.mamba_lock_ref > 0 else "mamba_evictable"] += len(n.mamba_value)
    return out


def assert_counters_match_tree(cache: HiMambaRadixCache) -> None:
    assert cache.sizes() == recount(cache)


def snapshot(cache: HiMambaRadixCache) -> dict:
    """The whole observable state of a cache, as text and plain values."""
    return dict(
        tree=tree_lines(cache),
        sizes=cache.sizes(),
        full_lru=lru_paths(cache, cache.full_lru_list),
        mamba_lru=lru_paths(cache, cache.mamba_lru_list),
        host_mamba_lru=lru_paths(cache, cache.mamba_host_lru_list),
        device_leaves=leaf_paths(cache, cache.evictable_full_device_leaves),
        host_leaves=leaf_paths(cache, cache.evictable_full_host_leaves),
    )


def free_lists(cache: HiMambaRadixCache) -> dict[str, list[int]]:
    return {name: list(pool.free_slots) for name, pool in cache.pools.all().items()}


def leaks(cache: HiMambaRadixCache, live_requests=()) -> dict[str, list[int]]:
    """Leaked slots per pool, only pools that leak (the oracle's ``leaked`` format)."""
    return {pool: a["leaked"] for pool, a in accounting(cache, live_requests).items() if a["leaked"]}


def double_frees(cache: HiMambaRadixCache) -> list[list]:
    """Every double free as ``[pool, slots]`` (the oracle's expect-block format)."""
    return [[d.pool, list(d.slots)] for pool in cache.pools.all().values() for d in pool.double_frees]


def finished(cache: HiMambaRadixCache, *requests):
    """A driver that has run each request in ``requests`` (token lists) to its end, one after another."""
    from simcache.driver import Driver

    drv = Driver(cache)
    for tokens in requests:
        drv.finish(drv.start(list(tokens)))
    return drv


def acked(cache: HiMambaRadixCache) -> None:
    """Every pending write acknowledged and the acks processed."""
    cache.controller.complete_writes(64)
    cache.check_hicache_events()


def busy_cache(shift: int = 0):
    """A cache with work in every in-flight map: [1,2] loaded back (load in flight), [3,4] anchoring a prefetch,
    [5,6] being written through; [1,2] and [3,4] with L3 backups in flight; one live request (the one loading [1,2]
    back). ``shift`` advances node ids and the clock first. Returns (cache, driver)."""
    from simcache.driver import Driver

    cache = make_cache("write_through", storage=True, auto_complete=False, load_back_threshold=1)
    cache._reserve(shift)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([3, 4]))
    cache.controller.complete_writes(2)
    cache.check_hicache_events()
    drv.finish(drv.start([5, 6]))
    cache.evict(2)
    drv.start([1, 2, 7])
    drv.step({"op": "prefetch", "tokens": [3, 4, 8, 9]}, 9)
    return cache, drv
