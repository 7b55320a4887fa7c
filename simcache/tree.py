"""Matching and inserting: the radix-tree half of the cache (reference c.1-c.3).

Vocabulary: matching walks from the root while the next page is a child slot; a match that ends inside a node's
key *splits* it: a new prefix node (a tombstone, no Mamba state) takes the slot and the original node object
survives as the suffix. Matching therefore mutates the tree. Insert attaches the Mamba state only to the last node
of the inserted path. ``_inc_hit_count`` inside the insert loop may call ``write_backup`` -> ``evict_host``: a
re-entrancy point where the loop's own ``node`` can be detached under its feet.
"""
from __future__ import annotations

from itertools import chain
from typing import NamedTuple

from .errors import CacheAssertion
from .keys import Key, match_len, page_hashes
from .node import TreeNode
from .trace_hooks import simulated


class MatchResult(NamedTuple):
    """SGLang's ``MatchResult`` (a value: a NamedTuple, built on every match without a frozen dataclass's
    per-field ``object.__setattr__``)."""
    device_indices: list[int]
    last_device_node: TreeNode
    last_host_node: TreeNode
    host_hit_length: int = 0
    best_last_node: TreeNode | None = None
    mamba_host_hit_length: int = 0  # 0 or 1; only with host_hit_counts_kv_only (#27391), else folded in above


class TreeOps:
    @simulated
    def match_prefix(self, key: Key) -> MatchResult:
        """The longest cached prefix of ``key`` (whole pages), as SGLang's ``MatchResult``.

        Mutates: **splits** the node where the match ends inside its key (a new prefix node takes the slot;
        ``_split_node``), refreshes the matched path in the full and Mamba LRU lists and its access times. Locks:
        takes none; the caller locks ``result.last_device_node`` (``inc_lock_ref``) before allocating, or an eviction
        may free what it matched.
        SGLang: ``HiMambaRadixCache.match_prefix``, hi_mamba_radix_cache.py:912 (``_match_prefix_helper`` :930,
        ``_match_post_processor`` :972)."""
        key = tuple(key)
        if len(key) == 0:
            return MatchResult([], self.root_node, self.root_node, 0, self.root_node)
        if self.page_size != 1:
            key = key[: len(key) // self.page_size * self.page_size]
        value, best, best_len = self._match_prefix_helper(key)
        return self._match_post_processor(value, best, best_len)

    @simulated
    def _match_prefix_helper(self, key: Key):
        node = self.root_node
        value: list[list[int]] = []
        best_len, best = 0, node
        while len(key) > 0 and self.child_key(key) in node.children:
            child = node.children[self.child_key(key)]
            if child.value is None and child.host_value is None:
                break
            if node.mamba_value is not None or node.mamba_host_value is not None:
                best_len, best = len(value), node
            p = match_len(child.key, key, self.page_size)
            if p < len(child.key):
                new = self._split_node(child.key, child, p)
                if new.value is not None:
                    value.append(new.value)
                node = new
                break
            if child.value is not None:
                value.append(child.value)
            node = child
            key = key[p:]
        if node.mamba_value is not None or node.mamba_host_value is not None:
            best_len, best = len(value), node
        return value, best, best_len

    @simulated
    def _match_post_processor(self, value, best: TreeNode, best_len: int) -> MatchResult:
        lru_node = best
        while lru_node is not self.root_node and lru_node.value is None:
            lru_node = lru_node.parent
        self.full_lru_list.reset_node_and_parents_mru(lru_node, self.root_node)
        self.mamba_lru_list.reset_node_and_parents_mru(best, self.root_node)
        t = top = self.tick()
        n = best
        while n is not None:  # the matched path gets strictly decreasing times going up
            n.last_access_time = t
            t -= 0.00001
            n = n.parent
        if t < top - 0.5 or top > 1e9:  # times could now shrink or tie: evict with a heap per call (lru.py)
            self.evictable_full_device_leaves.heap = self.evictable_full_host_leaves.heap = None
        host_hit, last_device = 0, best
        while last_device is not self.root_node and last_device.value is None:
            host_hit += len(last_device.host_value)
            last_device = last_device.parent
        last_host = best
        while last_host is not self.root_node and last_host.host_value is None:
            last_host = last_host.parent
        mamba_host_hit = 1 if (last_host.mamba_value is None and last_host.mamba_host_value is not None) else 0
        indices = list(chain.from_iterable(value[:best_len]))  # (at C speed: a long prompt is thousands)
        if self.flags.host_hit_counts_kv_only:
            return MatchResult(indices, last_device, last_host, host_hit, best, mamba_host_hit)
        return MatchResult(indices, last_device, last_host, max(host_hit, mamba_host_hit), best)

    @simulated
    def insert(self, key: Key, value: list[int], mamba_value: list[int], chunked: bool = False,
               prev_prefix_len: int = 0) -> tuple[int, bool]:
        """Insert ``key`` with device slots ``value`` and its Mamba state; returns (prefix length already on device,
        whether the Mamba state existed).

        Mutates: splits nodes like ``match_prefix``, un-evicts host-only nodes on the path, attaches a new leaf,
        moves the Mamba state to the last node, counts hits (``_inc_hit_count`` -> ``write_backup``, which can
        re-enter ``evict_host``). Locks: the caller holds a lock on the request's matched node (released after, in
        ``cache_finished_req``).
        SGLang: ``MambaRadixCache.insert``, mamba_radix_cache.py:490, into ``HiMambaRadixCache._insert_helper``,
        hi_mamba_radix_cache.py:816."""
        return self._insert_helper(self.root_node, tuple(key), list(value), mamba_value, chunked, prev_prefix_len)

    @simulated
    def _insert_helper(self, node: TreeNode, key: Key, value: list[int], mamba_value, chunked: bool,
                       prev_prefix_len: int) -> tuple[int, bool]:
        if mamba_value is None:
            raise CacheAssertion("Mamba value should not be None here.")
        node.last_access_time = self.tick()
        if node is not self.root_node:
            if node.value is not None:
                self.full_lru_list.reset_node_mru(node)
            if node.mamba_value is not None:
                self.mamba_lru_list.reset_node_mru(node)
        if len(key) == 0:
            return 0, True
        total = 0
        while len(key) > 0 and self.child_key(key) in node.children:
            node = node.children[self.child_key(key)]
            self._set_current(node)
            node.last_access_time = self.tick()
            if node.value is not None:
                self.full_lru_list.reset_node_mru(node)
            if node.mamba_value is not None:
                self.mamba_lru_list.reset_node_mru(node)
            p = match_len(node.key, key, self.page_size)
            if p < len(node.key):
                node = self._split_node(node.key, node, p)
                self._set_current(node)
            if node.value is None:
                self._unevict_node(node, value[:p])
            else:
                if prev_prefix_len < total + p:  # the request's own slots for an already-cached segment
                    start = max(0, prev_prefix_len - total)
                    self.pools.device_kv.free(value[start:p])
                total += p
                self._inc_hit_count(node, chunked)
            key, value = key[p:], value[p:]
        exists = False
        if len(key):
            new = self._add_new_node(node, key, value, mamba_value)
            self._set_current(new)
            self._inc_hit_count(new, chunked)
        elif node.mamba_value is None:
            node.mamba_value = list(mamba_value)
            if node.value is not None:
                self.full_lru_list.reset_node_mru(node)
            self.mamba_lru_list.insert_mru(node)
            self.mamba_evictable_size_ += len(mamba_value)
            node.last_access_time = self.tick()
        else:
            exists = True
            if node.value is not None:
                self.full_lru_list.reset_node_mru(node)
            self.mamba_lru_list.reset_node_mru(node)
            node.last_access_time = self.tick()
        self._set_current(None)
        return total, exists

    def _set_current(self, node: TreeNode | None) -> None:
        """The insert loop's ``node`` is a holder too (a Python local in SGLang); tell the recorder."""
        if self.recorder is not None:
            self.recorder.event("current", node=node)

    @simulated
    def _add_new_node(self, parent: TreeNode, key: Key, value: list[int], mamba_value) -> TreeNode:
        new = self._new_node(key)
        new.parent = parent
        new.value = list(value)
        new.mamba_value = list(mamba_value)
        self.full_lru_list.insert_mru(new)
        self.mamba_lru_list.insert_mru(new)
        self._attach(parent, new)
        self.full_evictable_size_ += len(value)
        self.mamba_evictable_size_ += len(mamba_value)
        if self.enable_storage:
            new.hash_value = self._node_hashes(new)
        self._update_full_device_leaf_status(new)
        self._update_full_device_leaf_status(parent)
        return new

    def _node_hashes(self, node: TreeNode) -> list[str]:
        prior = None
        p = node.parent
        if p is not None and p.hash_value is not None and len(p.key) > 0 and len(p.hash_value) > 0:
            prior = p.hash_value[-1]
        return page_hashes(node.key, self.page_size, prior)

    def _split_hashes(self, hashes, split_len: int):
        if hashes is None:
            return None, None
        pages = split_len if self.page_size == 1 else split_len // self.page_size
        return hashes[:pages], hashes[pages:]

    @simulated
    def _split_node(self, key: Key, child: TreeNode, split_len: int) -> TreeNode:
        if child.value is None:
            return self._split_evicted_node(key, child, split_len)
        self.evictable_full_device_leaves.discard(child)
        # base split (MambaRadixCache): the prefix is a new tombstone, the original object is the suffix
        new = self._new_node(child.key[:split_len])
        new.parent = child.parent
        new.full_lock_ref = child.full_lock_ref
        new.value = child.value[:split_len]
        new.children = {self.child_key(key[split_len:]): child}
        child.last_access_time = self.tick()
        self.full_lru_list.remove_node(child)
        # before 0.5.17 the split also moved the child to the Mamba LRU's most recent end; since then the Mamba LRU
        # is left alone (the set of live Mamba states did not change)
        refresh_mamba = child.mamba_value is not None and not self.flags.split_keeps_child_mamba_lru
        if refresh_mamba:
            self.mamba_lru_list.remove_node(child)
        child.parent = new
        child.key = child.key[split_len:]
        child.value = child.value[split_len:]
        self._attach(new.parent, new, key)
        self.full_lru_list.insert_mru(new)
        self.full_lru_list.insert_mru(child)
        if refresh_mamba:
            self.mamba_lru_list.insert_mru(child)
        if child.host_value is not None:
            new.host_value, child.host_value = child.host_value[:split_len], child.host_value[split_len:]
        new.hash_value, child.hash_value = self._split_hashes(child.hash_value, split_len)
        self._split_event(new, child)
        self._update_leaf_status(new)
        self._update_leaf_status(child)
        return new

    @simulated
    def _split_evicted_node(self, key: Key, child: TreeNode, split_len: int) -> TreeNode:
        self.evictable_full_host_leaves.discard(child)
        new = self._new_node(child.key[:split_len])
        new.children = {self.child_key(key[split_len:]): child}
        new.parent = child.parent
        new.full_lock_ref = child.full_lock_ref
        if child.host_value is not None:
            new.host_value, child.host_value = child.host_value[:split_len], child.host_value[split_len:]
        new.hash_value, child.hash_value = self._split_hashes(child.hash_value, split_len)
        child.last_access_time = self.tick()
        if child.mamba_value is not None:
            self.mamba_lru_list.remove_node(child)
        child.parent = new
        child.key = child.key[split_len:]
        self._attach(new.parent, new, key)
        if child.mamba_value is not None:
            self.mamba_lru_list.insert_mru(child)
        self._split_event(new, child)
        self._update_full_host_leaf_status(new)
        self._update_full_host_leaf_status(child)
        return new

    def _split_event(self, new: TreeNode, child: TreeNode) -> None:
        if self.recorder is not None:
            self.recorder.event("split", node=child, prefix=new)

    @simulated
    def _unevict_node(self, node: TreeNode, fresh_value: list[int]) -> None:
        if node.value is not None:
            raise CacheAssertion(f"not evicted, node.id={node.id}")
        if node.mamba_value is not None:
            raise CacheAssertion(f"evicted node has device mamba, node.id={node.id}")
        node.value = list(fresh_value)
        self.full_lru_list.insert_mru(node)
        self.full_evictable_size_ += len(fresh_value)
        self._update_leaf_status(node)
        if node.parent is not None:
            self._update_leaf_status(node.parent)
