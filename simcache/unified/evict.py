"""Eviction in the unified cache: the leaf sets, device and host eviction, the cascade, the locks.

Vocabulary
- A *D-leaf* (``evictable_device_leaves``) has device KV, no lock, and no child with device KV: a child that holds
  only host KV does not stop it. That is the gap of issue #39: a node whose children are all host-only counts as a
  device leaf.
- An *H-leaf* (``evictable_host_leaves``) is evicted, backed up, unlocked on the host and childless.
- Evicting a D-leaf: backed up, it is *demoted* (device data freed, it stays as a host node); under write-through
  and not backed up, it is *deleted* with all its data; under write-back and not backed up, it is backed up first.
- The *cascade* (``_iteratively_delete_tombstone_leaf``) walks up from a deleted node and deletes ancestors left
  childless with no Full data on either tier; it stops at any lock, and at a node with Full device or host KV.

Invariants the real code intends: a leaf set holds only attached nodes (the race breaks it), the evictable and
protected counters equal the sizes of the unlocked and locked device data.
"""
from __future__ import annotations

import types

from ..errors import CacheAssertion
from ..trace_hooks import register, simulated
from .components import ALL, DEVICE, FULL, HOST, MAMBA
from .node import UNode


def _inc_lock_ref(cache, node: UNode) -> dict:
    skips: dict = {}
    delta = 0
    for comp in cache.components:
        delta += comp.acquire_component_lock(node, skips)
    cache._update_evictable_leaf_sets(node)
    cache.last_lock_delta = delta
    return skips


def _dec_lock_ref(cache, node: UNode, skips: dict | None) -> None:
    for comp in cache.components:
        comp.release_component_lock(node, skips)
    cache._update_evictable_leaf_sets(node)


def _inc_host_lock_ref(cache, node: UNode) -> dict:
    skips: dict = {}
    for comp in cache.components:
        comp.acquire_component_lock(node, skips, lock_host=True)
    cache._update_evictable_leaf_sets(node)
    return skips


def _dec_host_lock_ref(cache, node: UNode, skips: dict | None) -> None:
    for comp in cache.components:
        comp.release_component_lock(node, skips, lock_host=True)
    cache._update_evictable_leaf_sets(node)


def _tree_core_call(cache, fn, node, *args):
    """0.5.17's tree core method: look the node up by id, then do the work."""
    cache.node_by_id(node)
    return fn(cache, node, *args)


# one copy of ``_tree_core_call`` per lock method, named as it: a call chain shows the controller's method and the
# tree core's, as SGLang's does
_CORE = {}
for _fn, _name in ((_inc_lock_ref, "inc_lock_ref"), (_dec_lock_ref, "dec_lock_ref"),
                   (_inc_host_lock_ref, "inc_host_lock_ref"), (_dec_host_lock_ref, "dec_host_lock_ref")):
    _copy = types.FunctionType(_tree_core_call.__code__.replace(co_name=_name), globals(), _name)
    _CORE[_fn] = register(_copy, _name)


class Eviction:
    # --- leaf sets ---
    def _is_device_leaf(self, node: UNode) -> bool:
        if node is self.root_node or node.evicted:
            return False
        if node.full_lock_ref > 0 or node.mamba_lock_ref > 0:
            return False
        return not any(c.value is not None for c in node.children.values())

    def _is_host_leaf(self, node: UNode) -> bool:
        if node is self.root_node or not node.evicted or not node.backuped:
            return False
        if node.host_ref_counter > 0 or node.host_mamba_ref_counter > 0:
            return False
        return not node.children

    def _update_evictable_leaf_sets(self, node: UNode) -> None:
        if self._is_device_leaf(node):
            self.evictable_device_leaves.add(node)
        else:
            self.evictable_device_leaves.discard(node)
        if self._is_host_leaf(node):
            self.evictable_host_leaves.add(node)
        else:
            self.evictable_host_leaves.discard(node)

    # --- locks ---
    @simulated
    def node_by_id(self, node: UNode) -> UNode:
        """0.5.17's arena lookup: a node unlinked from the tree is no longer registered."""
        if node.id not in self.arena:
            raise KeyError(node.id)
        return node

    def _core(self, fn, node: UNode, *args):
        """From 0.5.17 the controller's lock methods call the tree core's, which look the node up first."""
        return fn(self, node, *args) if self.arena is None else _CORE[fn](self, fn, node, *args)

    @simulated
    def inc_lock_ref(self, node: UNode) -> dict:
        """Lock ``node``'s path (Full) and its state (Mamba); the skipped node ids, for the matching unlock."""
        return self._core(_inc_lock_ref, node)

    @simulated
    def dec_lock_ref(self, node: UNode, skips: dict | None = None) -> None:
        self._core(_dec_lock_ref, node, skips)

    @simulated
    def inc_host_lock_ref(self, node: UNode) -> dict:
        return self._core(_inc_host_lock_ref, node)

    @simulated
    def dec_host_lock_ref(self, node: UNode, skips: dict | None = None) -> None:
        self._core(_dec_host_lock_ref, node, skips)

    # --- eviction ---
    @simulated
    def evict(self, num_tokens: int, mamba_num: int = 0) -> int:
        tracker = {FULL: 0, MAMBA: 0}
        self.full.drive_eviction(num_tokens, tracker)
        self.mamba.drive_eviction(mamba_num, tracker)
        if self.write_policy == "write_back":
            self.writing_check(write_back=True)
        return tracker[FULL]

    @simulated
    def evict_host(self, num_tokens: int, kind: str = FULL) -> int:
        tracker = {FULL: 0, MAMBA: 0}
        (self.full if kind == FULL else self.mamba).drive_host_eviction(num_tokens, tracker)
        return tracker[kind]

    def evict_mamba(self, n: int) -> int:
        """The controller's device Mamba evict callback (``evict(EvictParams(mamba_num=n))``)."""
        self.evict(0, mamba_num=n)
        return n

    def evict_mamba_host(self, n: int) -> int:
        """The controller's host Mamba evict callback (``evict_host(n, MAMBA)``)."""
        return self.evict_host(n, MAMBA)

    @simulated
    def _evict_component_and_detach_lru(self, node: UNode, comp, tier: int = DEVICE, tracker: dict | None = None):
        freed, host_freed = comp.evict_component(node, tier)
        if tracker is not None:
            if tier & DEVICE:
                tracker[comp.kind] += freed
            elif tier & HOST:
                tracker[comp.kind] += host_freed
        if comp.kind == MAMBA:
            if tier & DEVICE and self.mamba_lru_list.in_list(node):
                self.mamba_lru_list.remove_node(node)
            if tier & HOST and self.mamba_host_lru_list.in_list(node):
                self.mamba_host_lru_list.remove_node(node)
        return freed, host_freed

    @simulated
    def _cascade_evict(self, node: UNode, trigger, tracker: dict, tier: int = DEVICE) -> None:
        """Evict the components of equal or lower priority than ``trigger`` on ``node``."""
        is_leaf = node in (self.evictable_device_leaves if tier == DEVICE else self.evictable_host_leaves)
        top = trigger.eviction_priority(is_leaf)
        for comp in self.components:
            if comp.eviction_priority(is_leaf) > top or comp is trigger or not comp.has_data(node, tier):
                continue
            locked = (node.full_lock_ref, node.host_ref_counter) if comp.kind == FULL else \
                (node.mamba_lock_ref, node.host_mamba_ref_counter)
            if comp.eviction_priority(False) >= trigger.eviction_priority(False):
                if tier & DEVICE and locked[0] != 0 or tier & HOST and locked[1] != 0:
                    continue
            if tier & DEVICE and locked[0] != 0 or tier & HOST and locked[1] != 0:
                raise CacheAssertion("")
            self._evict_component_and_detach_lru(node, comp, tier, tracker)
        if tier == DEVICE and trigger.kind == FULL:
            node.value = None  # the tombstone, deferred until every component was freed
        self._update_evictable_leaf_sets(node)

    @simulated
    def _remove_leaf_from_parent(self, node: UNode) -> None:
        v = node.parent.children.pop(self.child_key(node.key), None)
        self._event("detach", node=node, parent=node.parent, slot=self.child_key(node.key), popped=v)
        if self.cuts is not None:
            self.cuts.append((node, v, bool(node.children)))
        self.detach_count += 1
        if v is not node:
            raise CacheAssertion("")
        if self.arena is not None:
            self.arena.discard(node.id)

    @simulated
    def _iteratively_delete_tombstone_leaf(self, deleted: UNode, tracker: dict) -> None:
        cur = deleted.parent
        while cur is not self.root_node and not cur.children:
            if cur.full_lock_ref > 0 or cur.mamba_lock_ref > 0 or cur.host_ref_counter > 0 \
                    or cur.host_mamba_ref_counter > 0:
                break
            if cur.value is not None:
                self._update_evictable_leaf_sets(cur)
                break
            for comp in self.components:
                if comp.has_data(cur, DEVICE):
                    self._evict_component_and_detach_lru(cur, comp, DEVICE, tracker)
            if cur.host_value is not None:
                self._update_evictable_leaf_sets(cur)
                break
            for comp in self.components:
                if comp.has_data(cur, HOST):
                    self._evict_component_and_detach_lru(cur, comp, HOST, tracker)
            self.evictable_host_leaves.discard(cur)
            self._remove_leaf_from_parent(cur)
            parent = cur.parent
            self._update_evictable_leaf_sets(parent)
            cur = parent

    @simulated
    def _evict_to_host(self, node: UNode, tracker: dict | None = None) -> None:
        if node.evicted or not node.backuped:
            raise CacheAssertion("")
        self._evict_component_and_detach_lru(node, self.full, DEVICE, tracker)
        self._cascade_evict(node, self.full, tracker)
        if node.mamba_host_value is not None and not self.mamba_host_lru_list.in_list(node):
            self.mamba_host_lru_list.insert_mru(node)
        self._update_evictable_leaf_sets(node.parent)

    @simulated
    def _evict_device_leaf(self, node: UNode, tracker: dict) -> None:
        if not self._is_device_leaf(node):
            raise CacheAssertion(f"node {node.id} is not a D-leaf")
        if not node.backuped:
            if self.write_policy == "write_back":
                if self.write_backup(node, write_back=True) == 0:
                    if self.flags.evict_walk_0_5_17:
                        self.drop_subtree_no_host(node, tracker)
                    return
                self.writing_check(write_back=True)
                self._evict_to_host(node, tracker)
                return
            for comp in self.components:  # write-through: not backed up, so the node goes entirely
                self._evict_component_and_detach_lru(node, comp, ALL, tracker)
            self.evictable_device_leaves.discard(node)
            parent = node.parent
            self._remove_leaf_from_parent(node)
            self._update_evictable_leaf_sets(parent)
            self._iteratively_delete_tombstone_leaf(node, tracker)
            return
        self._evict_to_host(node, tracker)

    @simulated
    def drop_subtree_no_host(self, node: UNode, tracker: dict) -> bool:
        """0.5.17's write-back fallback when a D-leaf's backup fails: drop the leaf with its host-only subtree,
        unless a lock holds any of it."""
        if not self._is_device_leaf(node):
            raise CacheAssertion(f"node {node.id} is not a D-leaf")
        if node.backuped or node.wt_pending is not None:
            raise CacheAssertion("")
        if node.host_ref_counter > 0 or node.host_mamba_ref_counter > 0:
            return False
        below, stack = [], list(node.children.values())
        while stack:
            cur = stack.pop()
            if cur.full_lock_ref or cur.mamba_lock_ref or cur.host_ref_counter or cur.host_mamba_ref_counter:
                return False
            below.append(cur)
            stack.extend(cur.children.values())
        for d in reversed(below):
            if not (d.evicted and d.backuped):
                raise CacheAssertion(f"node {d.id} not host-only")
            if d.wt_pending is not None:
                raise CacheAssertion("")
            self._release_all_component_layers(d, tracker)
            self._remove_leaf_from_parent(d)
        self._release_all_component_layers(node, tracker)
        parent = node.parent
        self._remove_leaf_from_parent(node)
        self._update_evictable_leaf_sets(parent)
        self._iteratively_delete_tombstone_leaf(node, tracker)
        return True

    def _release_all_component_layers(self, node: UNode, tracker: dict) -> None:
        for comp in self.components:
            self._evict_component_and_detach_lru(node, comp, ALL, tracker)
        self.evictable_device_leaves.discard(node)
        self.evictable_host_leaves.discard(node)

    @simulated
    def _evict_host_leaf(self, node: UNode, tracker: dict) -> None:
        if not self._is_host_leaf(node):
            raise CacheAssertion(f"node {node.id} is not an H-leaf")
        for comp in self.components:
            _, host_freed = self._evict_component_and_detach_lru(node, comp, ALL, None)
            tracker[comp.kind] += host_freed
        self.evictable_host_leaves.discard(node)
        self._remove_leaf_from_parent(node)
        self._iteratively_delete_tombstone_leaf(node, tracker)
