"""The unified cache's components: what is per-kind in ``UnifiedRadixCache`` (Full KV, Mamba state), re-expressed.

Vocabulary
- A *component* owns one kind of data on every node: how it is locked, evicted, split, backed up and loaded back,
  and how it drives eviction. The cache walks the tree; the components decide (SGLang's ``TreeComponent`` hooks).
- *Full*: device KV and host KV, a path lock, evicted from the leaf sets by a heap of access times. Its device
  ``value`` is tombstoned (set to None) only by the cascade, after every other component has been freed.
- *Mamba*: one state per node, a single-node lock, evicted from its own LRU lists; on an internal node it can be
  evicted alone (a tombstone), on a leaf the whole node goes.
- *Eviction priority*: on a leaf every component is 0 (evicting one evicts all); on an internal node Full is 2,
  Mamba 0, so evicting Mamba there leaves Full alone and evicting Full there takes Mamba with it.
- *Tier* (SGLang's ``EvictLayer``): ``DEVICE``, ``HOST`` or ``ALL``.
"""
from __future__ import annotations

import heapq

from ..errors import CacheAssertion
from ..trace_hooks import simulated
from .node import UNode

DEVICE, HOST, ALL = 1, 2, 3
FULL, MAMBA = "full", "mamba"
LOOP_LIMIT = 1_000_000  # iterations of one eviction walk: a backstop (``cache.watchdog`` stops a loop first)


class Livelock(Exception):
    """An operation that would loop forever (0.5.16's Mamba walk on a leaf whose backup keeps failing)."""


class Component:
    kind = ""

    def __init__(self, cache) -> None:
        self.cache = cache

    @property
    def recorder(self):
        return self.cache.recorder

    def eviction_priority(self, is_leaf: bool) -> int:
        return 0


class FullComponent(Component):
    kind = FULL

    def has_data(self, node: UNode, tier: int = DEVICE) -> bool:
        return (node.value if tier == DEVICE else node.host_value) is not None

    def eviction_priority(self, is_leaf: bool) -> int:
        return 0 if is_leaf else 2

    @simulated
    def evict_component(self, node: UNode, tier: int = DEVICE) -> tuple[int, int]:
        """Free the device KV (the slots stay on the node until the cascade tombstones it) and/or the host KV."""
        c, freed, host_freed = self.cache, 0, 0
        if tier & DEVICE and node.value is not None:
            c.pools.device_kv.free(node.value)
            freed = len(node.value)
            c.evictable[FULL] -= freed
        if tier & HOST and node.host_value is not None:
            host_freed = len(node.host_value)
            c.pools.host_kv.free(node.host_value)
            node.host_value = None
        return freed, host_freed

    @simulated
    def drive_eviction(self, num_tokens: int, tracker: dict) -> None:
        c = self.cache
        heap = [(n.last_access_time, n) for n in c.evictable_device_leaves]
        heapq.heapify(heap)
        while tracker[FULL] < num_tokens and heap:
            _, x = heapq.heappop(heap)
            if x not in c.evictable_device_leaves:
                continue
            c._evict_device_leaf(x, tracker)
            if x.parent is not None and x.parent in c.evictable_device_leaves:
                heapq.heappush(heap, (x.parent.last_access_time, x.parent))

    @simulated
    def drive_host_eviction(self, num_tokens: int, tracker: dict) -> None:
        c = self.cache
        heap = [(n.last_access_time, n) for n in c.evictable_host_leaves]
        heapq.heapify(heap)
        while tracker[FULL] < num_tokens and heap:
            _, x = heapq.heappop(heap)
            if x not in c.evictable_host_leaves:
                continue
            c._evict_host_leaf(x, tracker)
            if x.parent is not None and x.parent in c.evictable_host_leaves:
                heapq.heappush(heap, (x.parent.last_access_time, x.parent))

    def acquire_component_lock(self, node: UNode, skips: dict, lock_host: bool = False) -> int:
        c = self.cache
        if lock_host:
            if node.host_value is not None or self._pins_device_only():
                node.host_ref_counter += 1
                c._update_evictable_leaf_sets(node)
            return 0
        cur, delta = node, 0
        while cur is not c.root_node and cur.value is None:
            skips.setdefault(FULL, set()).add(cur.id)
            cur = cur.parent
        while cur is not c.root_node:
            if cur.value is None:
                raise CacheAssertion(f"FULL invariant broken: evicted ancestor {cur.id} above device-on segment")
            if cur.full_lock_ref == 0:
                c.evictable[FULL] -= len(cur.value)
                c.protected[FULL] += len(cur.value)
                delta += len(cur.value)
            cur.full_lock_ref += 1
            c.evictable_device_leaves.discard(cur)
            cur = cur.parent
        return delta

    def release_component_lock(self, node: UNode, skips: dict | None, lock_host: bool = False) -> None:
        c = self.cache
        if lock_host:
            if node.host_ref_counter == 0 or node.host_value is None and not self._pins_device_only():
                return
            node.host_ref_counter -= 1
            c._update_evictable_leaf_sets(node)
            return
        skip = (skips or {}).get(FULL, ())
        cur = node
        while cur is not c.root_node:
            if cur.id in skip:
                cur = cur.parent
                continue
            if cur.value is None or cur.full_lock_ref <= 0:
                raise CacheAssertion("")
            if cur.full_lock_ref == 1:
                c.evictable[FULL] += len(cur.value)
                c.protected[FULL] -= len(cur.value)
            cur.full_lock_ref -= 1
            if cur.full_lock_ref == 0:
                c._update_evictable_leaf_sets(cur)
            cur = cur.parent

    def _pins_device_only(self) -> bool:
        return self.cache.flags.write_back_pins_device_only and self.cache.write_policy == "write_back"

    def split(self, new: UNode, child: UNode) -> None:
        n = len(new.key)
        new.full_lock_ref = child.full_lock_ref
        if child.value is not None:
            new.value, child.value = list(child.value[:n]), list(child.value[n:])
        if child.host_value is not None:
            new.host_value, child.host_value = list(child.host_value[:n]), list(child.host_value[n:])


class MambaComponent(Component):
    kind = MAMBA

    def has_data(self, node: UNode, tier: int = DEVICE) -> bool:
        return (node.mamba_value if tier == DEVICE else node.mamba_host_value) is not None

    @simulated
    def evict_component(self, node: UNode, tier: int = DEVICE) -> tuple[int, int]:
        c, freed, host_freed = self.cache, 0, 0
        if tier & DEVICE and node.mamba_value is not None:
            c.pools.device_mamba.free(node.mamba_value)
            freed = len(node.mamba_value)
            c.evictable[MAMBA] -= freed
            node.mamba_value = None
        host_lru = c.mamba_host_lru_list
        if tier & HOST and node.mamba_host_value is not None:
            host_freed = len(node.mamba_host_value)
            c.pools.host_mamba.free(node.mamba_host_value)
            node.mamba_host_value = None
            if host_lru.in_list(node):
                host_lru.remove_node(node)
        if tier == DEVICE and node.mamba_value is None and node.mamba_host_value is not None:
            if not host_lru.in_list(node):
                host_lru.insert_mru(node)
        return freed, host_freed

    @simulated
    def drive_eviction(self, mamba_num: int, tracker: dict) -> None:
        c = self.cache
        lru = c.mamba_lru_list
        x = lru.get_lru_no_lock()
        rounds = 0
        while tracker[MAMBA] < mamba_num and x is not None and lru.in_list(x):
            rounds += 1
            if rounds > LOOP_LIMIT:
                raise Livelock("the Mamba eviction walk makes no progress")
            if x.mamba_value is None:
                raise CacheAssertion("")
            if x in c.evictable_device_leaves:
                x_next = lru.get_prev_no_lock(x)
                c._evict_device_leaf(x, tracker)
                if not lru.in_list(x_next) and (x_next is not None or not c.flags.evict_walk_0_5_17):
                    x_next = lru.get_lru_no_lock()
                x = x_next
            else:
                x_next = lru.get_prev_no_lock(x)
                c._evict_component_and_detach_lru(x, self, DEVICE, tracker)
                c._cascade_evict(x, self, tracker)
                x = x_next

    @simulated
    def drive_host_eviction(self, num_tokens: int, tracker: dict) -> None:
        c = self.cache
        lru = c.mamba_host_lru_list
        x = lru.get_lru_no_lock()
        while tracker[MAMBA] < num_tokens and x is not None and lru.in_list(x):
            x_next = lru.get_prev_no_lock(x)
            if x in c.evictable_host_leaves:
                c._evict_host_leaf(x, tracker)
            else:
                if x.mamba_host_value is None:
                    raise CacheAssertion("")
                c._evict_component_and_detach_lru(x, self, HOST, tracker)
                c._cascade_evict(x, self, tracker, HOST)
                c._update_evictable_leaf_sets(x)
            x = x_next

    def acquire_component_lock(self, node: UNode, skips: dict, lock_host: bool = False) -> int:
        c = self.cache
        if node is c.root_node:
            return 0
        value = node.mamba_host_value if lock_host else node.mamba_value
        if value is None:
            skips.setdefault(MAMBA, set()).add(node.id)
            return 0
        if lock_host:
            if node.host_mamba_ref_counter == 0 and c.mamba_host_lru_list.in_list(node):
                c.mamba_host_lru_list.remove_node(node)
            node.host_mamba_ref_counter += 1
        else:
            if node.mamba_lock_ref == 0:
                c.evictable[MAMBA] -= len(value)
                c.protected[MAMBA] += len(value)
            node.mamba_lock_ref += 1
        return 0

    def release_component_lock(self, node: UNode, skips: dict | None, lock_host: bool = False) -> None:
        c = self.cache
        if node is c.root_node or node.id in (skips or {}).get(MAMBA, ()):
            return
        if lock_host:
            node.host_mamba_ref_counter -= 1
            if node.host_mamba_ref_counter == 0 and node.mamba_value is None and node.mamba_host_value is not None:
                if not c.mamba_host_lru_list.in_list(node):
                    c.mamba_host_lru_list.insert_mru(node)
            return
        if node.mamba_lock_ref > 0:
            if node.mamba_lock_ref == 1:
                c.evictable[MAMBA] += len(node.mamba_value)
                c.protected[MAMBA] -= len(node.mamba_value)
            node.mamba_lock_ref -= 1

    def split(self, new: UNode, child: UNode) -> None:
        new.mamba_value, new.mamba_lock_ref = None, 0
        new.mamba_host_value, new.host_mamba_ref_counter = None, 0
