"""The host tier's protocol (reference c.6-c.7): backups, acks, host refs and load-back (L3 storage: ``storage.py``).

Vocabulary
- *write-through*: a device node is copied to host once its ``hit_count`` reaches the threshold (1 for
  ``write_through``, 2 for ``write_through_selective``); under ``write_back`` a node is copied only when evicted.
- ``write_backup`` asks the controller for host slots; when the host is full it calls ``evict_host`` and retries
  **once, without re-checking anything**: the eviction may have detached the very node being backed up.
- A node being written is locked (write-through) and listed in ``ongoing_write_through`` until its ack.
- *Host refs* (``host_ref_counter``) protect a node's host copy while an L3 backup or a prefetch is in flight.
"""
from __future__ import annotations

from .controller import MambaTransfer
from .errors import CacheAssertion
from .node import TreeNode
from .trace_hooks import simulated


class HiCache:
    # --- write-through / write-back ---
    @simulated
    def _inc_hit_count(self, node: TreeNode, chunked: bool = False) -> None:
        if self.controller.write_policy == "write_back" or chunked:
            return
        node.hit_count += 1
        if node.host_value is None and node.hit_count >= self.write_through_threshold:
            self.write_backup(node)

    def _parent_blocks_backup(self, node: TreeNode, write_back: bool) -> bool:
        check = self.flags.write_backup_parent_check
        if check == "none" or (check == "write_through_only" and write_back):
            return False
        return node.parent is not self.root_node and node.parent.host_value is None

    @simulated
    def write_backup(self, node: TreeNode, write_back: bool = False) -> int:
        """Copy ``node``'s device KV (and Mamba state) to host; returns the tokens written (0: skipped or no room).

        Mutates: the host pools (through the controller), ``node.host_value``, ``ongoing_write_through``; when the
        host is full it calls ``evict_host`` and retries once without re-checking ``node`` (the re-entrancy behind
        the stale-node race). Locks: write-through locks ``node`` until its ack (``writing_check``); write-back takes
        no lock.
        SGLang: ``HiMambaRadixCache.write_backup``, hi_mamba_radix_cache.py:203."""
        if self._parent_blocks_backup(node, write_back):
            return 0
        if node.mamba_value is not None and node.mamba_host_value is not None:
            if self.mamba_host_lru_list.in_list(node):
                self.mamba_host_lru_list.reset_node_mru(node)
        extra = self.mamba_backup_transfers(node)
        host = self.controller.write(node.value, node.id, extra)
        if host is None:
            self.evict_host(len(node.value))
            host = self.controller.write(node.value, node.id, extra)  # no re-validation, as in SGLang
        if host is None:
            return 0
        node.host_value = list(host)
        if extra is not None:
            self.mamba_backup_commit(node, extra)
        if not len(node.host_value) > 0:
            raise CacheAssertion("")
        self.ongoing_write_through[node.id] = node
        if self.recorder is not None:
            self.recorder.event("backup", node=node, host=tuple(host))
        if not write_back:
            self.inc_lock_ref(node)
        return len(host)

    @simulated
    def mamba_backup_transfers(self, node: TreeNode):
        """The Mamba half of a write: one transfer from ``node``'s device Mamba slot to its host slot (allocated by the
        controller when None).

        Mutates: nothing; locks: none.
        SGLang: ``HiMambaRadixCache.mamba_backup_transfers``, hi_mamba_radix_cache.py:1961."""
        if node.mamba_value is None:
            return None
        return [MambaTransfer(node.mamba_host_value, node.mamba_value)]

    @simulated
    def mamba_backup_commit(self, node: TreeNode, transfers) -> None:
        """Record the host Mamba slot a write allocated on ``node`` and list it in the host Mamba LRU.

        Mutates: ``node.mamba_host_value``, the host Mamba LRU list; locks: none.
        SGLang: ``HiMambaRadixCache.mamba_backup_commit``, hi_mamba_radix_cache.py:1973."""
        if not transfers:
            return
        host = transfers[0].host_indices
        if node.mamba_host_value is None and host is not None:
            node.mamba_host_value = list(host)
            self.mamba_host_lru_list.insert_mru(node)

    @simulated
    def writing_check(self, write_back: bool = False) -> None:
        """Consume the write acks that completed, in order (all of them, blocking, for write-back).

        Mutates: the ack queue, ``ongoing_write_through``; starts the node's L3 backup when storage is on. Locks:
        releases the lock ``write_backup`` took (write-through).
        SGLang: ``HiMambaRadixCache.writing_check``, hi_mamba_radix_cache.py:374."""
        queue = self.controller.ack_write_queue
        if write_back:  # blocking: wait for every write
            while len(self.ongoing_write_through) > 0:
                for ack in queue:
                    ack.done = True
                    ack.synchronize()
                    for node_id in ack.node_ids:
                        node = self.ongoing_write_through.pop(node_id)
                        self._ack_event("write_ack", node)
                        if self.enable_storage:
                            self.write_backup_storage(node)
                queue.clear()
                if len(self.ongoing_write_through) != 0:
                    raise CacheAssertion("")
            return
        if len(self.ongoing_write_through) == 0:
            return
        finished = 0
        for ack in queue:
            if not ack.query():
                break
            finished += 1
        while finished > 0:
            ack = queue.pop(0)
            ack.synchronize()
            for node_id in ack.node_ids:
                node = self.ongoing_write_through.pop(node_id)
                self._ack_event("write_ack", node)
                self.dec_lock_ref(node)
                if self.enable_storage:
                    self.write_backup_storage(node)
            finished -= 1

    @simulated
    def loading_check(self) -> None:
        """Consume the load acks that completed, in order.

        Mutates: the ack queue, ``ongoing_load_back``. Locks: releases the lock ``load_back`` took on the loaded
        node.
        SGLang: ``HiMambaRadixCache.loading_check``, hi_mamba_radix_cache.py:416."""
        queue = self.controller.ack_load_queue
        finished = 0
        for ack in queue:
            if not ack.query():
                break
            finished += 1
            ack.synchronize()
            for node_id in ack.node_ids:
                node = self.ongoing_load_back.pop(node_id)
                self._ack_event("load_ack", node)
                self.dec_lock_ref(node)
        del queue[:finished]

    def _ack_event(self, kind: str, node: TreeNode) -> None:
        if self.recorder is not None:
            self.recorder.event(kind, node=node)

    @simulated
    def check_hicache_events(self) -> None:
        """The scheduler's per-step poll: write acks, load acks, then the storage queues.

        Mutates: what ``writing_check``, ``loading_check`` and ``drain_storage_control_queues`` mutate; locks:
        releases theirs.
        SGLang: ``HiMambaRadixCache.check_hicache_events``, hi_mamba_radix_cache.py:435."""
        self.writing_check()
        self.loading_check()
        if self.enable_storage:
            self.drain_storage_control_queues()

    # --- host refs ---
    @simulated
    def _protect_host_node(self, node: TreeNode, protect_mamba: bool = True) -> None:
        node.protect_host()
        self.evictable_full_host_leaves.discard(node)
        if protect_mamba:
            node.protect_host_mamba()
            if self.mamba_host_lru_list.in_list(node):
                self.mamba_host_lru_list.remove_node(node)
        self._ref_event(node)

    @simulated
    def _release_host_node(self, node: TreeNode, release_mamba: bool = True) -> None:
        node.release_host()
        if release_mamba:
            node.release_host_mamba()
            if node.host_mamba_ref_counter == 0 and node.mamba_host_value is not None:
                if not self.mamba_host_lru_list.in_list(node):
                    self.mamba_host_lru_list.insert_mru(node)
        self._ref_event(node)
        if node.host_ref_counter == 0 and node.host_mamba_ref_counter == 0:
            self._update_full_host_leaf_status(node)

    def _ref_event(self, node: TreeNode) -> None:
        if self.recorder is not None:
            self.recorder.event("host_ref", node=node, host_ref=node.host_ref_counter,
                                host_mamba_ref=node.host_mamba_ref_counter)

    # --- load back (host -> device) ---
    @simulated
    def load_back(self, node: TreeNode, mem_quota: int | None = None, req=None):
        """Copy the host-only nodes from ``node`` up to its first device ancestor back to device; returns the device
        slots, or None (below the threshold, over ``mem_quota``, or no room even after ``evict``).

        Mutates: the device pools, each loaded node's ``value``, the LRU lists and counters, ``ongoing_load_back``;
        may ``evict``. Locks: locks the device ancestor while it evicts, then locks ``node`` until its load ack
        (``loading_check``).
        SGLang: ``HiMambaRadixCache.load_back``, hi_mamba_radix_cache.py:244."""
        last_hit = node
        to_load: list[TreeNode] = []
        while node.value is None:
            if node.host_value is None:
                raise CacheAssertion(f"No backup on evicted node {node.id}")
            to_load.insert(0, node)
            node = node.parent
        ancestor = node
        restore = [last_hit] if (last_hit.mamba_host_value is not None and last_hit.mamba_value is None) else []
        delta = self.inc_lock_ref(ancestor)
        host = [i for n in to_load for i in n.host_value]
        too_small = len(host) < self.load_back_threshold
        too_big = mem_quota is not None and len(host) > mem_quota + delta
        if host and (too_small or too_big) and not restore:
            self.dec_lock_ref(ancestor)
            return None
        extra = self.mamba_restore_transfers(last_hit, restore, req)
        dev = self.controller.load(host, last_hit.id, extra)
        if dev is None:
            if host:
                self.evict(num_tokens=len(host))
            extra = self.mamba_restore_transfers(last_hit, restore, req)
            dev = self.controller.load(host, last_hit.id, extra)
        self.dec_lock_ref(ancestor)
        if dev is None:
            return None
        self.mamba_restore_commit(restore, extra)
        offset = 0
        for n in to_load:
            k = len(n.host_value)
            n.value = list(dev[offset : offset + k])
            offset += k
            self.full_lru_list.insert_mru(n)
            self.full_evictable_size_ += k
            self._update_leaf_status(n)
        for n in restore:
            if self.mamba_lru_list.in_list(n):
                self.mamba_lru_list.reset_node_mru(n)
            else:
                self.mamba_lru_list.insert_mru(n)
                self.mamba_evictable_size_ += len(n.mamba_value)
        self._update_leaf_status(ancestor)
        self.inc_lock_ref(last_hit)
        self.ongoing_load_back[last_hit.id] = last_hit
        return dev

    @simulated
    def mamba_restore_commit(self, restored: list[TreeNode], transfers) -> None:
        """Record the device Mamba slots a load allocated on the restored nodes.

        Mutates: their ``mamba_value``; locks: none.
        SGLang: ``HiMambaRadixCache.mamba_restore_commit``, hi_mamba_radix_cache.py:2066."""
        if not restored or not transfers or transfers[0].device_indices is None:
            return
        offset = 0
        for n in restored:
            k = len(n.mamba_host_value)
            n.mamba_value = list(transfers[0].device_indices[offset : offset + k])
            offset += k

    @simulated
    def mamba_restore_transfers(self, last_hit: TreeNode, restore: list[TreeNode], req):
        """The Mamba half of a load: host->device transfers for the restored nodes, and for the request's own Mamba slot
        (allocated here, evicting once if needed).

        Mutates: ``req.mamba_pool_idx``, the device Mamba pool. Locks: locks ``last_hit`` around the eviction.
        SGLang: ``HiMambaRadixCache.mamba_restore_transfers``, hi_mamba_radix_cache.py:2020."""
        host = [i for n in restore if n.mamba_host_value is not None for i in n.mamba_host_value]
        transfers = [MambaTransfer(host, None)] if host else []
        if req is not None and last_hit in restore and last_hit.mamba_host_value is not None:
            if req.mamba_pool_idx is None:
                got = self._alloc_with_evict(self.pools.device_mamba, len(last_hit.mamba_host_value),
                                             self.evict_mamba, lock_node=last_hit,
                                             error_message="Cannot alloc request mamba cache for host load back")
                req.mamba_pool_idx = got[0]
            transfers.append(MambaTransfer(list(last_hit.mamba_host_value), [req.mamba_pool_idx]))
        return transfers or None

    @simulated
    def init_load_back(self, last_host_node: TreeNode, mem_quota: int | None = None, req=None):
        """Load the host part of a match back before a request runs; returns (device slots, the node to lock).

        Mutates: what ``load_back`` mutates. Locks: as ``load_back``; the caller then locks the returned node.
        SGLang: ``HiMambaRadixCache.init_load_back``, hi_mamba_radix_cache.py:340."""
        last = last_host_node
        if last.value is None or (last.mamba_value is None and last.mamba_host_value is not None):
            loaded = self.load_back(last, mem_quota, req=req)
            if loaded is not None:
                return loaded, last
            while last is not self.root_node and (last.value is None or last.mamba_value is None):
                last = last.parent
        return [], last

    @simulated
    def _alloc_with_evict(self, pool, size: int, evict_fn, lock_node: TreeNode | None = None,
                          error_message: str | None = None):
        got = pool.alloc(size)
        if got is None:
            if lock_node is not None:
                self.inc_lock_ref(lock_node)
            evict_fn(size)
            got = pool.alloc(size)
            if lock_node is not None:
                self.dec_lock_ref(lock_node)
        if got is None and error_message is not None:
            raise RuntimeError(error_message)
        return got
