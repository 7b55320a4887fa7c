"""L3 prefetches of the unified cache: issue, the storage-hit drain, completion, and the storage queues.

Vocabulary: see ``hicache.py``. A prefetch is issued under request id ``pf`` (the operation vocabulary keeps one
in flight). Before 0.5.16 (``prefetch_reserves_host_at_hit`` off) its host KV is reserved at issue; from 0.5.16 the
controller reports the L3 hit count on ``prefetch_hit_queue`` and the drain reserves it then.
"""
from __future__ import annotations

from ..controller import MambaTransfer
from ..trace_hooks import simulated
from .components import MAMBA
from .hicache import InFlightPrefetch
from .node import UNode


class Storage:
    @simulated
    def prefetch_from_storage(self, req_id: str, anchor: UNode, tokens: list[int]) -> None:
        if not self.enable_storage:
            return
        key = tuple(tokens)[: len(tokens) // self.page_size * self.page_size]
        cc = self.controller
        if len(key) < self.prefetch_threshold or cc.prefetch_rate_limited():
            return
        anchor_skips = self.inc_host_lock_ref(anchor)
        got = self.pools.host_mamba.alloc(1)  # the Mamba component's prefetch buffer
        if got is None:
            self.evict_host(1, MAMBA)
            got = self.pools.host_mamba.alloc(1)
        if got is None:
            self.dec_host_lock_ref(anchor, anchor_skips)
            return
        mamba = [MambaTransfer(list(got), None)]
        prefix = self._node_prefix_tokens(anchor)
        op = cc.prefetch(req_id, None, list(key), prefix, mamba)
        op.storage_hit_count, op.hit_known = 0, False
        self.ongoing_prefetch[req_id] = InFlightPrefetch(anchor, key, None, op, anchor_skips, mamba)
        cc.prefetch_tokens_occupied += len(key)

    def _node_prefix_tokens(self, node: UNode) -> list[int]:
        out = []
        while node is not None and node is not self.root_node:
            out[:0] = list(node.key)
            node = node.parent
        return out

    @simulated
    def _revoke_pending_prefetch(self, req_id: str) -> None:
        info = self.ongoing_prefetch.pop(req_id, None)
        if info is None:
            return
        cc = self.controller
        cc.release_mamba(info.mamba)
        self.dec_host_lock_ref(info.last_host_node, info.anchor_skips)
        cc.prefetch_tokens_occupied = max(0, cc.prefetch_tokens_occupied - len(info.key))

    @simulated
    def check_prefetch_progress(self, req_id: str) -> bool:
        info = self.ongoing_prefetch.get(req_id)
        if info is None:
            return True
        cc, op = self.controller, info.operation
        if op.host_indices is None:
            cc.terminate_prefetch(op)
            self._revoke_pending_prefetch(req_id)
            return True
        completed, hashes = cc.terminate_prefetch(op)
        host = info.host_indices
        if self.flags.prefetch_all_or_nothing and info.mamba and \
                (completed != len(hashes) * self.page_size or not op.mamba_hit):
            for i in range(0, completed, self.page_size):  # SGLang: the whole prefetch is discarded
                cc.host_mem_release_queue.append(list(host[i:i + self.page_size]))
            cc.release_mamba(info.mamba)
            self.dec_host_lock_ref(info.last_host_node, info.anchor_skips)
            del self.ongoing_prefetch[req_id]
            cc.prefetch_tokens_occupied -= len(info.key)
            return True
        result = self._insert_helper_host(info.last_host_node, info.key[:completed], host[:completed],
                                          hashes[: completed // self.page_size])
        if result.host_insert_dropped:
            cc.append_host_mem_release(host[:completed])
            cc.release_mamba(info.mamba)
        else:
            self._commit_prefetched_mamba(info, result)
            self.pools.host_kv.free(host[: result.prefix_len])
            cc.append_host_mem_release(host[completed:completed])
        self.dec_host_lock_ref(info.last_host_node, info.anchor_skips)
        del self.ongoing_prefetch[req_id]
        cc.prefetch_tokens_occupied -= len(info.key)
        return True

    def _commit_prefetched_mamba(self, info: InFlightPrefetch, result) -> None:
        """The Mamba component's prefetch commit: the fetched state goes to the node the host insert hung (or
        reached), unless it arrived without one or that node already has a host state; else its slot is released."""
        if not info.mamba:
            return
        t, target = info.mamba[0], result.inserted_host_node
        if t.host_indices is None or target is None or not info.operation.mamba_hit \
                or target.mamba_host_value is not None:
            self.controller.release_mamba([t])
            result.mamba_exist = True
            return
        target.mamba_host_value = list(t.host_indices)
        if target.mamba_value is None and not self.mamba_host_lru_list.in_list(target):
            self.mamba_host_lru_list.insert_mru(target)
        result.mamba_exist = False

    @simulated
    def drain_storage_control_queues(self) -> None:
        """Each queue drained up to the length it had when the drain began (what arrives meanwhile, such as a
        release queued by a revoke in this drain, waits for the next one)."""
        cc = self.controller
        limits = [len(q) for q in (cc.prefetch_revoke_queue, cc.prefetch_hit_queue, cc.ack_backup_queue,
                                   cc.host_mem_release_queue, cc.mamba_release_queue)]
        for _ in range(limits[0]):
            self._revoke_pending_prefetch(cc.prefetch_revoke_queue.popleft())
        for _ in range(limits[1]):
            self._alloc_storage_hit(cc.prefetch_hit_queue.popleft())
        for _ in range(limits[2]):
            op = cc.ack_backup_queue.popleft()
            entry = self.ongoing_backup.pop(op.id, None)
            if entry is not None:
                self.dec_host_lock_ref(*entry)
        released = [s for _ in range(limits[3]) for s in cc.host_mem_release_queue.popleft()]
        if released:
            self.pools.host_kv.free(released)
        mamba = [s for _ in range(limits[4]) for s in cc.mamba_release_queue.popleft()]
        if mamba:
            self.pools.host_mamba.free(mamba)

    @simulated
    def _alloc_storage_hit(self, op) -> None:
        """0.5.16's storage-hit drain: reserve the hit's host KV, evicting host leaves once, else a shorter
        page-aligned prefix of at least the threshold, else revoke the prefetch."""
        info = self.ongoing_prefetch.get(op.request_id)
        if info is None:
            return
        if op.terminated:
            self._revoke_pending_prefetch(op.request_id)
            return
        need = op.storage_hit_count
        host_kv = self.pools.host_kv
        got = host_kv.alloc(need)
        if got is None:
            self.evict_host(need)
            got = host_kv.alloc(need)
        if got is None:
            avail = host_kv.available_size()
            need = min(op.storage_hit_count, avail - avail % self.page_size)
            if need >= self.prefetch_threshold:
                got = host_kv.alloc(need)
        if got is None:
            self._revoke_pending_prefetch(op.request_id)
            return
        op.storage_hit_count = need
        op.hash_value = op.hash_value[: need // self.page_size]
        op.host_indices = list(got)
        info.host_indices = list(got)
