"""Host-tier eviction and the tombstone cascade (reference c.10-c.11), where nodes go stale.

``evict_host`` pops host leaves by access time and deletes them (``_evict_host_leaf``). Deleting a leaf can leave
its parent a childless tombstone; the *cascade* (``_iteratively_delete_tombstone_leaf``) then deletes the parent
too, frees its device KV **without clearing** ``value``, and goes on upward. Reached re-entrantly (from
``write_backup``, from ``write`` -> ``evict_mamba_host``, from a prefetch's allocation), the cascade can detach
a node that a caller, a leaf set, an LRU list or an in-flight map still holds: a **stale** node. The second
detach of a stale node pops an empty slot and asserts ``parent does not have child key``.

The described fix adds ``_has_fresh_parent_link`` / ``_cleanup_stale_node`` guards here and in
``_evict_regular`` (flag ``stale_guards``): a stale node is removed from the eviction structures and skipped,
nothing is freed for it, and a warning says why.
"""
from __future__ import annotations

import heapq

from .errors import CacheAssertion
from .lru import EvictionRound
from .node import TreeNode
from .trace_hooks import simulated


class HostEviction:
    @simulated
    def evict_host(self, num_tokens: int) -> None:
        """Free at least ``num_tokens`` host KV tokens: delete host-only leaves by access time, each followed by the
        tombstone cascade.

        Mutates: the tree (detaches leaves and, through the cascade, ancestors: where a held node goes stale), the
        host KV and host Mamba pools, the leaf sets and LRU lists. Locks: nodes with a host ref are not host leaves;
        the cascade checks device locks (and, with ``cascade_respects_host_refs``, host refs) before deleting a
        parent.
        SGLang: ``HiMambaRadixCache.evict_host``, hi_mamba_radix_cache.py:706 (``_evict_host_leaf`` :567)."""
        leaves = self.evictable_full_host_leaves
        if leaves.ordered():  # the same victims in the same order, without a heap per call (lru.py)
            if not leaves.heap:  # every member has an entry: no member, nothing to walk
                return
            walk, num_evicted = EvictionRound(leaves), 0
            try:
                while num_evicted < num_tokens:
                    x = walk.next()
                    if x is None:
                        break
                    num_evicted += self._evict_host_leaf(x)
                    if x.parent in leaves:
                        walk.push_parent(x.parent)
            finally:
                walk.close()
            return
        heap = [(n.last_access_time, n) for n in self.evictable_full_host_leaves]
        heapq.heapify(heap)
        num_evicted = 0
        while num_evicted < num_tokens and heap:
            _, x = heapq.heappop(heap)
            if x not in self.evictable_full_host_leaves:
                continue
            num_evicted += self._evict_host_leaf(x)
            if x.parent in self.evictable_full_host_leaves:
                heapq.heappush(heap, (x.parent.last_access_time, x.parent))

    @simulated
    def _evict_host_leaf(self, node: TreeNode) -> int:
        if self._stale_guard(node, "_evict_host_leaf", before_asserts=True):
            return 0
        if node.value is not None:
            raise CacheAssertion(f"not evicted, node.id={node.id}")
        if node.host_value is None:
            raise CacheAssertion(f"not backuped, node.id={node.id}")
        if node.mamba_value is not None:
            raise CacheAssertion(f"has device mamba, node.id={node.id}")
        if node.host_ref_counter != 0:
            raise CacheAssertion(f"host kv in use, node.id={node.id} node.host_ref_counter={node.host_ref_counter}")
        if node.host_mamba_ref_counter != 0:
            raise CacheAssertion(
                f"host mamba in use, node.id={node.id} node.host_mamba_ref_counter={node.host_mamba_ref_counter}")
        if self._stale_guard(node, "_evict_host_leaf", before_asserts=False):
            return 0
        full = self.controller.evict_host(node.host_value)
        node.host_value = None
        self._free_host_mamba(node)
        self._discard_from_leaf_sets(node)
        parent = self._pop_from_parent(node)
        self._update_leaf_status(parent)
        _, cascade_full, _ = self._iteratively_delete_tombstone_leaf(node)
        return full + cascade_full

    @simulated
    def _delete_tombstone_leaf(self, node: TreeNode) -> None:
        if self._stale_guard(node, "_delete_tombstone_leaf", before_asserts=True):
            return
        if node.mamba_value is not None:
            raise CacheAssertion(f"has mamba value, node.id={node.id}")
        if node.mamba_host_value is not None:
            raise CacheAssertion(f"has mamba host value, node.id={node.id}")
        if len(node.children) != 0:
            raise CacheAssertion(f"leaf node has children, node.id={node.id}")
        if self._stale_guard(node, "_delete_tombstone_leaf", before_asserts=False):
            return
        parent = self._pop_from_parent(node)
        self._discard_from_leaf_sets(node)
        if node.host_value is not None and node.host_ref_counter == 0 and node.host_mamba_ref_counter == 0:
            self.controller.evict_host(node.host_value)
            node.host_value = None
        self._update_leaf_status(parent)

    @simulated
    def _iteratively_delete_tombstone_leaf(self, node: TreeNode) -> tuple[TreeNode, int, int]:
        full = 0
        while len(node.parent.children) == 0:
            p = node.parent
            if p is self.root_node or p.mamba_value is not None or p.mamba_host_value is not None:
                break
            if p.full_lock_ref > 0 or p.mamba_lock_ref > 0:
                break
            if self.flags.cascade_respects_host_refs and (p.host_ref_counter > 0 or p.host_mamba_ref_counter > 0):
                break
            if p.value is not None:  # frees the parent's device KV but leaves ``p.value`` set, as SGLang does
                full += len(p.value)
                self.full_evictable_size_ -= len(p.value)
                self.controller.evict_device(p.value)
                if self.full_lru_list.in_list(p):
                    self.full_lru_list.remove_node(p)
            self._discard_from_leaf_sets(p)
            self._delete_tombstone_leaf(p)
            node = p
        return node, full, 0

    @simulated
    def evict_mamba_host(self, num: int) -> int:
        """Free ``num`` host Mamba states, least recently used first: a host leaf is evicted whole
        (``_evict_host_leaf``), any other node loses only its host Mamba state.

        Mutates: the host Mamba LRU list and pool, the tree for host leaves. Locks: nodes with ``mamba_lock_ref`` > 0
        are skipped; a host-referenced node here trips SGLang's assert.
        SGLang: ``HiMambaRadixCache.evict_mamba_host``, hi_mamba_radix_cache.py:722."""
        if num <= 0:
            return 0
        lru = self.mamba_host_lru_list
        x = lru.get_lru_no_lock()
        evicted = 0
        while evicted < num and lru.in_list(x):
            x_next = lru.get_prev_no_lock(x)
            if x in self.evictable_full_host_leaves:
                if x.host_ref_counter != 0:
                    raise CacheAssertion(f"evict host leaf: host_ref_counter != 0 with x.id={x.id} "
                                         f"x.host_ref_counter={x.host_ref_counter}")
                if x.host_mamba_ref_counter != 0:
                    raise CacheAssertion(f"evict host leaf: host_mamba_ref_counter != 0 with x.id={x.id} "
                                         f"x.host_mamba_ref_counter={x.host_mamba_ref_counter}")
                self._evict_host_leaf(x)
            else:
                if x.host_mamba_ref_counter != 0:
                    raise CacheAssertion(f"evict host mamba internal: host_mamba_ref_counter != 0 with x.id={x.id} "
                                         f"x.host_mamba_ref_counter={x.host_mamba_ref_counter}")
                lru.remove_node(x)
                self.pools.host_mamba.free(x.mamba_host_value)
                x.mamba_host_value = None
            evicted += 1
            x = x_next
        return evicted

    # --- the described fix (flag stale_guards); never merged ---
    def _has_fresh_parent_link(self, node: TreeNode) -> bool:
        """True iff ``node``'s parent still holds this very object in ``node``'s slot."""
        return node.parent is not None and node.parent.children.get(self.child_key(node.key)) is node

    def _stale_guard(self, node: TreeNode, where: str, before_asserts: bool) -> bool:
        """The described fix's guard in ``where``, at one of its two places: before SGLang's asserts (flag
        ``guard_before_asserts``, the review's order) or after them (the PR text's). True when the guard is on there
        and ``node`` was stale: it has been cleaned up and the caller skips it."""
        flags = self.flags
        return (flags.stale_guards and bool(flags.guard_before_asserts) == before_asserts
                and self._skip_if_stale(node, where))

    def _skip_if_stale(self, node: TreeNode, where: str) -> bool:
        if self._has_fresh_parent_link(node):
            return False
        self._cleanup_stale_node(node, f"stale node in {where}")
        return True

    @simulated
    def _cleanup_stale_node(self, node: TreeNode, reason: str) -> None:
        removed = [s.name for s in (self.evictable_full_device_leaves, self.evictable_full_host_leaves) if node in s]
        self._discard_from_leaf_sets(node)
        if self.full_lru_list.in_list(node):
            self.full_lru_list.remove_node(node)
            removed.append("full_lru_list")
        unconditional = self.flags.unconditional_lru_cleanup
        for lru, held in ((self.mamba_lru_list, node.mamba_value), (self.mamba_host_lru_list, node.mamba_host_value)):
            if not lru.in_list(node):
                continue
            if unconditional:
                lru.force_remove(node)
            elif held is not None:
                lru.remove_node(node)
            else:
                continue
            removed.append(lru.name)
        parent_id = node.parent.id if node.parent is not None else None
        warning = (f"Skip stale HiMamba eviction node_id={node.id} reason={reason} parent_id={parent_id} "
                   f"child_key={self.child_key(node.key)}")
        self.warnings.append(warning)
        if self.recorder is not None:
            self.recorder.event("cleaned_up", node=node, reason=reason, removed=tuple(removed), warning=warning)
