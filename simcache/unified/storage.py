"""L3 prefetches of the unified cache: issue, the storage-hit drain, completion, and the storage queues.

Vocabulary: see ``hicache.py``. A prefetch is issued under request id ``pf`` (the operation vocabulary keeps one
in flight). Before 0.5.16 (``prefetch_reserves_host_at_hit`` off) its host KV is reserved at issue; from 0.5.16 the
controller reports the L3 hit count on ``prefetch_hit_queue`` and the drain reserves it then.
"""
from __future__ import annotations

from ..controller import MambaTransfer
from ..trace_hooks import register, simulated
from .components import MAMBA
from .hicache import InFlightPrefetch
from .node import UNode


# SGLang's drain steps are functions nested in ``_drain_storage_control_queues_impl``; a call chain names them
def _drain_revoke(cache, n: int) -> None:
    for _ in range(n):
        cache._revoke_pending_prefetch(cache.controller.prefetch_revoke_queue.popleft())


def _drain_and_alloc_storage_hit(cache, n: int) -> None:
    for _ in range(n):
        cache._alloc_storage_hit(cache.controller.prefetch_hit_queue.popleft())


def _drain_backup(cache, n: int) -> None:
    for _ in range(n):
        op = cache.controller.ack_backup_queue.popleft()
        entry = cache.ongoing_backup.pop(op.id, None)
        if entry is not None:
            cache.dec_host_lock_ref(*entry)


def _drain_release(cache, n: int) -> None:
    q = cache.controller.host_mem_release_queue
    released = [s for _ in range(n) for s in q.popleft()]
    if released:
        cache.pools.host_kv.free(released)


def _drain_extra_release(cache, n: int) -> None:
    q = cache.controller.mamba_release_queue
    released = [s for _ in range(n) for s in q.popleft()]
    if released:
        cache.pools.host_mamba.free(released)


for _fn in (_drain_revoke, _drain_and_alloc_storage_hit, _drain_backup, _drain_release, _drain_extra_release):
    register(_fn)


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
        insert = self.insert_host if self.arena is not None else self._insert_helper_host
        result = insert(info.last_host_node, info.key[:completed], host[:completed],
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

    def storage_queue_sizes(self) -> list[int]:
        cc = self.controller
        return [len(q) for q in (cc.prefetch_revoke_queue, cc.prefetch_hit_queue, cc.ack_backup_queue,
                                 cc.host_mem_release_queue, cc.mamba_release_queue)]

    @simulated
    def drain_storage_control_queues(self) -> None:
        self._drain_storage_control_queues_impl(self.storage_queue_sizes())

    @simulated
    def _drain_storage_control_queues_impl(self, limits: list[int]) -> None:
        """Each queue drained up to the length it had when the counts were taken (what arrives meanwhile, such as
        a release queued by a revoke in this drain, waits for the next drain)."""
        _drain_revoke(self, limits[0])
        _drain_and_alloc_storage_hit(self, limits[1])
        _drain_backup(self, limits[2])
        _drain_release(self, limits[3])
        _drain_extra_release(self, limits[4])

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
            avail = self.host_available()
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
