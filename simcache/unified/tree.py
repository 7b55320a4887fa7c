"""Matching, inserting and splitting in the unified cache (SGLang's ``UnifiedRadixCache`` tree walks).

Vocabulary
- A match walks from the root while a child's key starts with the next page; it stops at a *dead* node (evicted
  and not backed up), splits a node it ends inside, and reports the deepest node every component accepts (the
  *best match*: device or host data for each) and the deepest one with device data for each (*last device node*).
- An insert walks the same way, restoring evicted nodes from the request's fresh KV and counting hits (which may
  start a write-through backup), then hangs the rest of the key as a new leaf with the request's Mamba state.
- A *host insert* hangs a prefetch's host-only KV under the node the walk reaches (before #31902, whatever that
  node is; from 0.5.17 under write-through it is dropped when that node is not backed up).
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import CacheAssertion
from ..trace_hooks import simulated
from .components import FULL, MAMBA
from .node import UNode


class MatchResult(NamedTuple):
    device_indices: list[int]
    last_device_node: UNode
    last_host_node: UNode
    host_hit_length: int = 0
    best_match_node: UNode | None = None
    mamba_host_hit_length: int = 0


class InsertResult:
    __slots__ = ("prefix_len", "mamba_exist", "inserted_host_node", "host_insert_dropped")

    def __init__(self, prefix_len: int = 0, mamba_exist: bool = False) -> None:
        self.prefix_len, self.mamba_exist = prefix_len, mamba_exist
        self.inserted_host_node: UNode | None = None
        self.host_insert_dropped = False


def match_len(a, b, page_size: int) -> int:
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i // page_size * page_size


class TreeOps:
    def _event(self, kind: str, **data) -> None:
        """Tell an attached recorder (``simcache.trace``) what just happened to the tree: ``attach``, ``split``,
        ``detach``, ``backup``; nothing without one."""
        if self.recorder is not None:
            self.recorder.event(kind, **data)

    def child_key(self, key):
        return key[0] if self.page_size == 1 else tuple(key[: self.page_size])

    # --- match ---
    @simulated
    def match_prefix(self, key) -> MatchResult:
        key = tuple(key)
        key = key[: len(key) // self.page_size * self.page_size]
        if not key:
            r = self.root_node
            return MatchResult([], r, r, 0, r)
        value, best, best_dev, best_dev_len = self._match_prefix_helper(key)
        return self._match_post_processor(value, best, best_dev, best_dev_len)

    @simulated
    def _match_prefix_helper(self, key):
        node = self.root_node
        value: list[list[int]] = []
        best = best_dev = node
        best_dev_len = 0

        def update(n):
            nonlocal best, best_dev, best_dev_len
            if (n.value is not None or n.backuped) and (n.mamba_value is not None or n.mamba_host_value is not None):
                best = n
            if n.value is not None and n.mamba_value is not None:
                best_dev_len, best_dev = len(value), n

        while key and self.child_key(key) in node.children:
            child = node.children[self.child_key(key)]
            if child.evicted and not child.backuped:
                break
            p = match_len(child.key, key, self.page_size)
            if p < len(child.key):
                node = self._split_node(child.key, child, p)
                if not node.evicted:
                    value.append(node.value)
                update(node)
                break
            if not child.evicted:
                value.append(child.value)
            node = child
            update(node)
            key = key[p:]
        return value, best, best_dev, best_dev_len

    @simulated
    def _match_post_processor(self, value, best, best_dev, best_dev_len) -> MatchResult:
        if best.mamba_value is not None:  # the Mamba component's MATCH_END refresh
            self.mamba_lru_list.reset_node_mru(best)
        t = self.clock.tick()
        n = best
        while n is not None:
            n.last_access_time = t
            t -= 0.00001
            n = n.parent
        device = [s for chunk in value[:best_dev_len] for s in chunk]
        host_hit, n = 0, best
        while n is not best_dev and n is not self.root_node:
            if n.host_value is not None:
                host_hit += len(n.host_value)
            n = n.parent
        mamba_host_hit = 1 if best.mamba_value is None and best.mamba_host_value is not None else 0
        return MatchResult(device, best_dev, best, host_hit, best, mamba_host_hit)

    # --- nodes ---
    def _new_node(self, key=()) -> UNode:
        n = UNode(self.next_id, self.clock, key)
        self.next_id += 1
        if self.arena is not None:
            self.arena.add(n.id)
        return n

    @simulated
    def _split_node(self, key, child: UNode, split_len: int) -> UNode:
        new = self._new_node(child.key[:split_len])
        new.children = {self.child_key(key[split_len:]): child}
        new.parent = child.parent
        new.hit_count = child.hit_count
        new.creation_time = child.creation_time
        if child.mamba_value is not None:
            self.mamba_lru_list.remove_node(child)
        child.parent = new
        child.key = child.key[split_len:]
        if child.hash_value is not None:
            pages = split_len // self.page_size
            new.hash_value, child.hash_value = child.hash_value[:pages], child.hash_value[pages:]
        for comp in self.components:
            comp.split(new, child)
        new.parent.children[self.child_key(key)] = new
        self._event("split", node=child, prefix=new)
        if child.backuped:
            self._replace_pending_write_through_node(child, [new, child])
        for n in (new, child):
            if n.mamba_value is not None and not self.mamba_lru_list.in_list(n):
                self.mamba_lru_list.insert_mru(n)
        child.last_access_time = self.clock.tick()
        self._update_evictable_leaf_sets(new)
        self._update_evictable_leaf_sets(child)
        return new

    def _touch_node(self, node: UNode) -> None:
        node.last_access_time = self.clock.tick()

    @simulated
    def _add_new_node(self, parent: UNode, key, value: list[int]) -> UNode:
        new = self._new_node(key)
        new.parent = parent
        new.value = list(value)
        parent.children[self.child_key(key)] = new
        self._event("attach", node=new, parent=parent, slot=self.child_key(key), replaced=None)
        self.evictable[FULL] += len(value)
        if self.enable_storage:
            new.hash_value = self._hashes(key, parent)
        self._update_evictable_leaf_sets(new)
        self._update_evictable_leaf_sets(parent)
        return new

    def _hashes(self, key, parent: UNode) -> list[str]:
        prior = parent.hash_value[-1] if parent.hash_value else ""
        out = []
        for i in range(0, len(key), self.page_size):
            prior = f"{prior}/{','.join(map(str, key[i:i + self.page_size]))}"
            out.append(prior)
        return out

    def _unevict_node_on_insert(self, node: UNode, fresh: list[int]) -> None:
        if node.value is not None:
            raise CacheAssertion("")
        node.value = list(fresh)
        self.evictable[FULL] += len(fresh)
        self._update_evictable_leaf_sets(node)
        if node.parent is not None:
            self._update_evictable_leaf_sets(node.parent)

    # --- insert ---
    @simulated
    def insert(self, key, value: list[int], prev_prefix_len: int, mamba_value: list[int]) -> InsertResult:
        key = tuple(key)
        key = key[: len(key) // self.page_size * self.page_size]
        return self._insert_helper(self.root_node, key, list(value[: len(key)]), prev_prefix_len, mamba_value)

    @simulated
    def _insert_helper(self, node: UNode, key, value, prev_prefix_len: int, mamba_value) -> InsertResult:
        self._touch_node(node)
        if not key:
            return InsertResult(0, mamba_exist=True)
        total = 0
        while key and self.child_key(key) in node.children:
            node = node.children[self.child_key(key)]
            self._touch_node(node)
            p = match_len(node.key, key, self.page_size)
            if p < len(node.key):
                node = self._split_node(node.key, node, p)
            if node.evicted:
                self._unevict_node_on_insert(node, value[:p])
            else:
                dup_start = max(0, prev_prefix_len - total)
                if dup_start < p:
                    self.pools.device_kv.free(value[dup_start:p])
            self._inc_hit_count(node)
            total += p
            key, value = key[p:], value[p:]
        new_leaf = bool(key)
        target = self._add_new_node(node, key, value) if new_leaf else node
        result = InsertResult(total)
        self._commit_mamba(target, new_leaf, mamba_value, result)
        if new_leaf:
            self._inc_hit_count(target)
        return result

    def _commit_mamba(self, node: UNode, new_leaf: bool, mamba_value, result: InsertResult) -> None:
        """The Mamba component's ``commit_insert_component_data``: the request's state goes to the target node."""
        if new_leaf:
            node.mamba_value = list(mamba_value)
            self.mamba_lru_list.insert_mru(node)
            self.evictable[MAMBA] += len(mamba_value)
            return
        if node.mamba_value is None:
            node.mamba_value = list(mamba_value)
            if self.mamba_host_lru_list.in_list(node):
                self.mamba_host_lru_list.remove_node(node)
            self.mamba_lru_list.insert_mru(node)
            self.evictable[MAMBA] += len(mamba_value)
            node.last_access_time = self.clock.tick()
            return
        self.mamba_lru_list.reset_node_mru(node)
        node.last_access_time = self.clock.tick()
        result.mamba_exist = True

    @simulated
    def insert_host(self, node: UNode, key, host_value: list[int], hashes: list[str]) -> InsertResult:
        """0.5.17's name for the host insert, which first looks its anchor up by id."""
        self.node_by_id(node)
        return self._insert_helper_host(node, key, host_value, hashes)

    @simulated
    def _insert_helper_host(self, node: UNode, key, host_value: list[int], hashes: list[str]) -> InsertResult:
        total = len(key)
        self._touch_node(node)
        if total == 0:
            return InsertResult(0, mamba_exist=True)
        matched = 0
        while key and self.child_key(key) in node.children:
            node = node.children[self.child_key(key)]
            self._touch_node(node)
            p = match_len(node.key, key, self.page_size)
            key, host_value = key[p:], host_value[p:]
            hashes = hashes[p // self.page_size:]
            matched += p
            if p < len(node.key):
                node = self._split_node(node.key, node, p)
        result = InsertResult(matched)
        if not key:
            if node is not self.root_node and node.host_value is not None:
                result.inserted_host_node = node
            return result
        if self.flags.drop_refill_under_unbacked and node is not self.root_node and not node.backuped \
                and self.write_policy != "write_back":
            result.host_insert_dropped = True  # #31902
            self._event("refill_dropped", node=node, key=tuple(key))
            return result
        new = self._new_node(key)
        new.parent = node
        new.hash_value = list(hashes)
        new.host_value = list(host_value)
        node.children[self.child_key(key)] = new
        self._event("attach", node=new, parent=node, slot=self.child_key(key), replaced=None)
        self._update_evictable_leaf_sets(new)
        self._update_evictable_leaf_sets(node)
        result.inserted_host_node = new
        return result
