"""The host tier's protocol (reference c.6-c.7, c.12-c.13): backups, acks, load-back and L3 storage.

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
from .keys import Key, page_floor
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
        if node.mamba_value is None:
            return None
        return [MambaTransfer(node.mamba_host_value, node.mamba_value)]

    @simulated
    def mamba_backup_commit(self, node: TreeNode, transfers) -> None:
        if not transfers:
            return
        host = transfers[0].host_indices
        if node.mamba_host_value is None and host is not None:
            node.mamba_host_value = list(host)
            self.mamba_host_lru_list.insert_mru(node)

    @simulated
    def writing_check(self, write_back: bool = False) -> None:
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
        if not restored or not transfers or transfers[0].device_indices is None:
            return
        offset = 0
        for n in restored:
            k = len(n.mamba_host_value)
            n.mamba_value = list(transfers[0].device_indices[offset : offset + k])
            offset += k

    @simulated
    def mamba_restore_transfers(self, last_hit: TreeNode, restore: list[TreeNode], req):
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

    # --- L3 storage ---
    @simulated
    def write_backup_storage(self, node: TreeNode) -> None:
        extra = self.mamba_archive_transfers(node)
        op_id = self.controller.write_storage(node.host_value, node.key, node.hash_value, extra)
        mamba_protected = extra is not None
        self.ongoing_backup[op_id] = (node, mamba_protected)
        self._protect_host_node(node, protect_mamba=mamba_protected)

    @simulated
    def mamba_archive_transfers(self, node: TreeNode):
        if node.mamba_host_value is None or not node.hash_value:
            return None
        return [MambaTransfer(node.mamba_host_value, None)]

    @simulated
    def mamba_prefetch_alloc(self, tokens: list[int]):
        if not tokens:
            return None
        slot = self._alloc_with_evict(self.pools.host_mamba, 1, self.evict_mamba_host)
        return None if slot is None else [MambaTransfer(slot, None)]

    @simulated
    def drain_storage_control_queues(self) -> None:
        cc = self.controller
        n_revoke, n_backup, n_release = (len(cc.prefetch_revoke_queue), len(cc.ack_backup_queue),
                                         len(cc.host_mem_release_queue))
        for _ in range(n_revoke):
            info = self.ongoing_prefetch.pop(cc.prefetch_revoke_queue.popleft(), None)
            if info is not None:
                anchor, tokens, _, op = info
                self.prefetch_abort(op)
                self._release_host_node(anchor)
                cc.prefetch_tokens_occupied = max(0, cc.prefetch_tokens_occupied - len(tokens))
        for _ in range(n_backup):
            op = cc.ack_backup_queue.popleft()
            entry = self.ongoing_backup.pop(op.id, None)
            if entry is not None:
                node, mamba_protected = entry
                self._ack_event("storage_ack", node)
                self._release_host_node(node, release_mamba=mamba_protected)
        pages = [cc.host_mem_release_queue.popleft() for _ in range(n_release)]
        if pages:
            self.pools.host_kv.free([i for p in pages for i in p])

    @simulated
    def prefetch_abort(self, op) -> None:
        for t in op.mamba or ():
            if t.host_indices is not None:
                self.pools.host_mamba.free(t.host_indices)
            break

    def _node_prefix_tokens(self, node: TreeNode) -> list[int]:
        parts = []
        while node is not None and node is not self.root_node:
            parts.append(node.key)
            node = node.parent
        return [t for k in reversed(parts) for t in k]

    @simulated
    def prefetch_from_storage(self, req_id: str, last_host_node: TreeNode, tokens: list[int]) -> None:
        n = page_floor(len(tokens), self.page_size)
        tokens = list(tokens[:n])
        cc = self.controller
        if not self.enable_storage or n < self.prefetch_threshold or cc.prefetch_rate_limited():
            return
        self._protect_host_node(last_host_node, protect_mamba=False)
        host = self._alloc_with_evict(self.pools.host_kv, n, self.evict_host)
        if host is None and self.flags.prefetch_truncates_to_free_host:
            free = self.pools.host_kv.available_size()
            n = page_floor(free, self.page_size)
            if n < self.prefetch_threshold:
                self._release_host_node(last_host_node, release_mamba=False)
                return
            tokens = tokens[:n]
            host = self.pools.host_kv.alloc(n)
        if host is None:
            self._release_host_node(last_host_node, release_mamba=False)
            return
        extra = self.mamba_prefetch_alloc(tokens)
        if extra is None:
            self.pools.host_kv.free(host)
            self._release_host_node(last_host_node, release_mamba=False)
            return
        last_host_node.protect_host_mamba()
        if self.mamba_host_lru_list.in_list(last_host_node):
            self.mamba_host_lru_list.remove_node(last_host_node)
        self._ref_event(last_host_node)
        op = cc.prefetch(req_id, host, tokens, self._node_prefix_tokens(last_host_node), extra)
        self.ongoing_prefetch[req_id] = (last_host_node, tokens, host, op)
        cc.prefetch_tokens_occupied += len(tokens)

    @simulated
    def check_prefetch_progress(self, req_id: str) -> bool:
        if req_id not in self.ongoing_prefetch:
            return True
        anchor, token_ids, host, op = self.ongoing_prefetch[req_id]
        if op.host_indices is None:
            return True
        if not self.can_terminate_prefetch(op):
            return False
        completed, hashes = self.controller.terminate_prefetch(op)
        mamba_host, mamba_loaded = None, False
        for t in op.mamba or ():
            mamba_host, mamba_loaded = t.host_indices, op.mamba_hit
            break
        fetched = token_ids[:completed]
        written = host[:completed]
        matched = self._insert_helper_host(anchor, tuple(fetched), written, hashes[: completed // self.page_size],
                                           mamba_host, mamba_loaded)
        self.pools.host_kv.free(host[:matched])
        self.controller.append_host_mem_release(host[completed:completed])
        if mamba_host is not None and (not matched < completed or not mamba_loaded):
            self.pools.host_mamba.free(mamba_host)
        self._release_host_node(anchor)
        del self.ongoing_prefetch[req_id]
        self.controller.prefetch_tokens_occupied -= len(token_ids)
        self.prefetch_loaded_tokens_by_reqid[req_id] = completed - matched
        return True

    @simulated
    def can_terminate_prefetch(self, op) -> bool:
        """best_effort: always; wait_complete: once every page arrived; timeout: the same here, because the
        simulator's clock is logical (SGLang's wall-clock timeout never fires within a scripted run)."""
        policy = self.config.prefetch_stop_policy
        if policy == "best_effort":
            return True
        completed = bool(op.hash_value) and op.completed_tokens == len(op.hash_value) * self.page_size
        return completed or op.terminated

    @simulated
    def _insert_helper_host(self, node: TreeNode, key: Key, host_value: list[int], hash_value,
                            mamba_host_value=None, mamba_loaded: bool = False) -> int:
        from .keys import match_len

        node.last_access_time = self.tick()
        if len(key) == 0:
            return 0
        matched = 0
        while len(key) > 0 and self.ck(key) in node.children:
            node = node.children[self.ck(key)]
            node.last_access_time = self.tick()
            if node is not self.root_node and node.mamba_value is not None:
                self.mamba_lru_list.reset_node_mru(node)
            p = match_len(node.key, key, self.page_size)
            key, host_value = key[p:], host_value[p:]
            hash_value = hash_value[p // self.page_size :]
            matched += p
            if p < len(node.key):
                node = self._split_node(node.key, node, p)
        leaf = None
        if len(key):
            new = self._new_node(key)
            new.parent = node
            new.host_value = list(host_value)
            new.hash_value = list(hash_value)
            self._attach(node, new)
            leaf = new
            self._update_full_host_leaf_status(new)
            self._update_full_host_leaf_status(node)
        if leaf is not None and mamba_host_value is not None and mamba_loaded:
            leaf.mamba_host_value = list(mamba_host_value)
            if not self.mamba_host_lru_list.in_list(leaf):
                self.mamba_host_lru_list.insert_mru(leaf)
        return matched
