"""Device-tier eviction (reference c.8-c.9): free GPU KV and Mamba states, least recently used first.

A device *leaf* (no child on device) that is backed up is demoted (``_evict_to_host``: it stays in the tree, host
only); one that is not is deleted (``_evict_regular``), and the tombstone cascade may delete its ancestors. Under
``write_back`` a leaf is first written back (``write_backup(write_back=True)``), which can re-enter ``evict_host``.
``evict_mamba`` frees device Mamba states: internal nodes become tombstones, leaves are evicted whole.
"""
from __future__ import annotations

import heapq

from .errors import CacheAssertion
from .lru import EvictionRound
from .node import TreeNode
from .trace_hooks import simulated


class DeviceEviction:
    @simulated
    def evict(self, num_tokens: int = 0, mamba_num: int = 0) -> tuple[int, int]:
        """Free at least ``num_tokens`` device KV tokens (least recently used leaves first) and ``mamba_num`` device
        Mamba states; returns what was freed.

        Mutates: each victim leaf is demoted to host (backed up) or deleted with the tombstone cascade; under
        write_back it is first written back, which can re-enter ``evict_host``. Locks: locked nodes are never victims
        (they are not in the leaf set); lock what must survive first.
        SGLang: ``HiMambaRadixCache.evict``, hi_mamba_radix_cache.py:672 (``_evict_device_leaf`` :656)."""
        full_evicted = mamba_evicted = 0
        leaves = self.evictable_full_device_leaves
        if num_tokens > 0 and leaves.ordered():  # the same victims in the same order, without a heap per call
            if leaves.heap:  # every member has an entry: without one there is no leaf to walk
                walk = EvictionRound(leaves)
                try:
                    while full_evicted < num_tokens:
                        x = walk.next()
                        if x is None:
                            break
                        f, m = self._evict_device_leaf(x)
                        full_evicted += f
                        mamba_evicted += m
                        parent = x.parent
                        if parent in leaves:
                            walk.push_parent(parent)
                finally:
                    walk.close()
        elif num_tokens > 0:  # SGLang's own way: a heap over every leaf, per call
            heap = [(n.last_access_time, n) for n in self.evictable_full_device_leaves]
            heapq.heapify(heap)
            while full_evicted < num_tokens and heap:
                _, x = heapq.heappop(heap)
                if x not in self.evictable_full_device_leaves:
                    continue
                f, m = self._evict_device_leaf(x)
                full_evicted += f
                mamba_evicted += m
                parent = x.parent
                if parent in self.evictable_full_device_leaves:
                    heapq.heappush(heap, (parent.last_access_time, parent))
        if mamba_num > 0:
            mamba_evicted += self.evict_mamba(mamba_num)
        return full_evicted, mamba_evicted

    @simulated
    def _evict_device_leaf(self, x: TreeNode) -> tuple[int, int]:
        if x.host_value is None:
            if self.controller.write_policy == "write_back":
                self.write_backup(x, write_back=True)
                self.writing_check(write_back=True)
                return self._evict_to_host(x)
            return self._evict_regular(x)
        return self._evict_to_host(x)

    @simulated
    def _free_device_mamba(self, node: TreeNode) -> int:
        if node.mamba_value is None:
            return 0
        n = len(node.mamba_value)
        self.pools.device_mamba.free(node.mamba_value)
        if node.mamba_lock_ref > 0:
            self.mamba_protected_size_ -= n
            node.mamba_lock_ref = 0
        else:
            self.mamba_evictable_size_ -= n
        if self.mamba_lru_list.in_list(node):
            self.mamba_lru_list.remove_node(node)
        node.mamba_value = None
        return n

    @simulated
    def _evict_to_host(self, node: TreeNode) -> tuple[int, int]:
        if node.value is None:
            raise CacheAssertion(f"already evicted, node.id={node.id}")
        if node.host_value is None:
            raise CacheAssertion(f"not backuped, node.id={node.id}")
        num_full = len(node.value)
        self.controller.evict_device(node.value)
        self.full_evictable_size_ -= num_full
        if self.full_lru_list.in_list(node):
            self.full_lru_list.remove_node(node)
        num_mamba = self._free_device_mamba(node)
        node.value = None
        self._update_leaf_status(node)
        self._update_full_device_leaf_status(node.parent)
        return num_full, num_mamba

    @simulated
    def _evict_regular(self, node: TreeNode) -> tuple[int, int]:
        if self._stale_guard(node, "_evict_regular", before_asserts=True):
            return 0, 0
        if node.value is None:
            raise CacheAssertion(f"already evicted, node.id={node.id}")
        if node.host_value is not None:
            raise CacheAssertion(f"backuped node, node.id={node.id}")
        if len(node.children) != 0:
            raise CacheAssertion(f"non-leaf, node.id={node.id}")
        if self._stale_guard(node, "_evict_regular", before_asserts=False):
            return 0, 0
        full = len(node.value)
        self.controller.evict_device(node.value)
        self.full_evictable_size_ -= full
        if self.full_lru_list.in_list(node):
            self.full_lru_list.remove_node(node)
        mamba = self._free_device_mamba(node)
        self._free_host_mamba(node)
        node.value = None
        self._discard_from_leaf_sets(node)
        parent = self._pop_from_parent(node)
        self._update_leaf_status(parent)
        _, cascade_full, cascade_mamba = self._iteratively_delete_tombstone_leaf(node)
        return full + cascade_full, mamba + cascade_mamba

    @simulated
    def evict_mamba(self, mamba_num: int) -> int:
        """Free ``mamba_num`` device Mamba states, least recently used first: an internal node becomes a tombstone, a
        leaf is evicted whole.

        Mutates: the Mamba LRU list, the device Mamba pool, the tree for evicted leaves. Locks: the walk skips nodes
        with ``mamba_lock_ref`` > 0.
        SGLang: ``HiMambaRadixCache.evict_mamba``, hi_mamba_radix_cache.py:759."""
        if mamba_num <= 0:
            return 0
        lru = self.mamba_lru_list
        x = lru.get_lru_no_lock()
        evicted = 0
        while evicted < mamba_num and lru.in_list(x):
            if x.mamba_value is None:
                raise CacheAssertion(f"node has no mamba value, x.id={x.id}")
            if x is self.root_node:
                raise CacheAssertion(f"root node is not evictable, x.id={x.id}")
            if x.mamba_lock_ref != 0:
                raise CacheAssertion(f"node is in use, x.id={x.id}")
            if x.value is None:
                raise CacheAssertion(f"evicted node should not be in mamba_lru_list, x.id={x.id}")
            if len(x.children) > 0:  # internal: free the Mamba state only, the node becomes a tombstone
                x_next = lru.get_prev_no_lock(x)
                evicted += len(x.mamba_value)
                self.pools.device_mamba.free(x.mamba_value)
                lru.remove_node(x)
                self._tombstone_internal_node(x)
            else:  # leaf: evict KV and Mamba together
                if x.full_lock_ref != 0:
                    raise CacheAssertion(f"evict device leaf: full_lock_ref mismatch with x.id={x.id} "
                                         f"x.full_lock_ref={x.full_lock_ref} x.mamba_lock_ref={x.mamba_lock_ref}")
                x_next = lru.get_prev_no_lock(x)
                _, m = self._evict_device_leaf(x)
                evicted += m
                if not lru.in_list(x_next):
                    x_next = lru.get_lru_no_lock()
            x = x_next
        return evicted

    @simulated
    def _tombstone_internal_node(self, node: TreeNode) -> None:
        if len(node.children) == 0:
            raise CacheAssertion(f"Cannot tombstone a leaf node, node.id={node.id}")
        self.mamba_evictable_size_ -= len(node.mamba_value)
        node.mamba_value = None
