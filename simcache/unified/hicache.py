"""The host tier and L3 storage of the unified cache: backups, acks, load-back, storage backups and prefetches.

Vocabulary
- *Write-through*: a node reaching the hit threshold is backed up at once (its parent first, so backups form a
  chain from the root); the backup path-locks the node until its write ack. *Write-back*: nothing is backed up at
  insert; device eviction backs a node up, waits for the ack, then demotes it.
- A backup that finds the host pool short evicts host leaves first (re-entrant host eviction) and gives up (0)
  if that is not enough.
- *Load-back*: a request whose match ends on host data locks the path, asks the controller to copy the host KV (and
  the Mamba state) to fresh device slots, and holds the locks until the load ack.
- *Storage (L3)*: a write-through ack starts an L3 backup of each node it published (host-locked until its storage
  ack). A *prefetch* from L3 host-locks its anchor; from 0.5.16 its host KV is reserved when its hit count arrives
  (the storage-hit drain, which may evict host leaves, truncate or revoke it); when it completes, what arrived is
  hung under the anchor by the host insert.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..controller import CacheController, MambaTransfer, PrefetchOp
from ..errors import CacheAssertion
from ..trace_hooks import simulated
from .components import FULL
from .node import UNode


@dataclass
class InFlightPrefetch:
    """SGLang's ``_OngoingPrefetch``: (anchor, key, host KV or None until the hit drain, operation, lock skips,
    the Mamba transfers)."""
    last_host_node: UNode
    key: tuple
    host_indices: list[int] | None
    operation: PrefetchOp
    anchor_skips: dict
    mamba: list[MambaTransfer] = field(default_factory=list)


class UnifiedController(CacheController):
    """The shared controller plus what the hybrid controller adds: a release queue for the host Mamba pool, and a
    prefetch whose host KV comes at the storage-hit drain (``prefetch_hit_queue``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mamba_release_queue: deque[list[int]] = deque()
        self.prefetch_hit_queue: deque[PrefetchOp] = deque()

    def release_mamba(self, transfers) -> None:
        for t in transfers or ():
            if t.host_indices:
                self.mamba_release_queue.append(list(t.host_indices))


class HostTier:
    # --- backups ---
    @simulated
    def write_backup(self, node: UNode, write_back: bool = False) -> int:
        if not write_back and node.parent is not self.root_node and not node.parent.backuped:
            if self.write_backup(node.parent) <= 0:
                return 0
        device_value = node.value
        mamba = [MambaTransfer(None, list(node.mamba_value))] if node.mamba_value is not None else []
        avail = self.host_available()
        if avail < len(device_value):
            needed = len(device_value) - avail
            if self.evict_host(needed) < needed:
                return 0
        host = self.controller.write(device_value, node.id, mamba or None)
        if host is None:
            return 0
        node.host_value = list(host)
        self._event("backup", node=node, host=tuple(host))
        if mamba and mamba[0].host_indices is not None and node.mamba_host_value is None:
            node.mamba_host_value = list(mamba[0].host_indices)
        skips = None if write_back else self.inc_lock_ref(node)
        node.wt_pending = node.id
        self.ongoing_write_through[node.id] = (node, skips, [node])
        return len(host)

    def _replace_pending_write_through_node(self, old: UNode, new_nodes: list[UNode]) -> None:
        ack_id = old.wt_pending
        if ack_id is None or ack_id not in self.ongoing_write_through:
            return
        lock_node, skips, publish = self.ongoing_write_through[ack_id]
        if not any(n is old for n in publish):
            return
        updated = [m for n in publish for m in (new_nodes if n is old else [n])]
        for n in new_nodes:
            n.wt_pending = ack_id
        self.ongoing_write_through[ack_id] = (lock_node, skips, updated)

    @simulated
    def _inc_hit_count(self, node: UNode) -> None:
        if node.evicted or self.write_policy == "write_back":
            return
        node.hit_count += 1
        if not node.backuped and node.hit_count >= self.write_through_threshold:
            self.write_backup(node)

    @simulated
    def writing_check(self, write_back: bool = False) -> None:
        cc = self.controller
        if write_back:
            while self.ongoing_write_through:
                for ack in cc.ack_write_queue:
                    ack.synchronize()
                    for ack_id in ack.node_ids:
                        if ack_id in self.ongoing_write_through:
                            self._finish_write_through_ack(ack_id)
                cc.ack_write_queue.clear()
                if self.ongoing_write_through:
                    raise CacheAssertion("")
            return
        ready = 0
        for ack in cc.ack_write_queue:
            if not ack.query():
                break
            ready += 1
        for _ in range(ready):
            ack = cc.ack_write_queue.pop(0)
            ack.synchronize()
            for ack_id in ack.node_ids:
                self._finish_write_through_ack(ack_id)

    @simulated
    def _finish_write_through_ack(self, ack_id: int) -> None:
        lock_node, skips, publish = self.ongoing_write_through.pop(ack_id)
        for n in publish:
            if n.wt_pending == ack_id:
                n.wt_pending = None
        if skips is not None:
            self.dec_lock_ref(lock_node, skips)
        if self.enable_storage:
            for n in publish:
                self.write_backup_storage(n)

    @simulated
    def write_backup_storage(self, node: UNode) -> None:
        if not self.enable_storage or not node.backuped:
            return
        mamba = [MambaTransfer(list(node.mamba_host_value), None)] \
            if node.mamba_host_value is not None and node.hash_value else None
        op_id = self.controller.write_storage(node.host_value, node.key, node.hash_value, mamba)
        self.ongoing_backup[op_id] = (node, self.inc_host_lock_ref(node))

    # --- load-back ---
    @simulated
    def init_load_back(self, best: UNode, mem_quota=None, req=None) -> tuple[list[int], UNode]:
        if req is None:
            raise CacheAssertion("")
        last_device = req.last_node
        if best.evicted or req.host_hit_length > 0 or req.mamba_host_hit_length > 0:
            if self.load_back(best, mem_quota, req):
                chunks, n = [], best
                while n is not last_device:
                    if n.value is None:
                        raise CacheAssertion("")
                    chunks.append(n.value)
                    n = n.parent
                new = [s for chunk in reversed(chunks) for s in chunk]
                return (new, best) if new else ([], last_device)
        return [], last_device

    @simulated
    def load_back(self, best: UNode, mem_quota=None, req=None) -> bool:
        host_skips = self.inc_host_lock_ref(best)
        host_kv, nodes, cur = [], [], best
        while cur.evicted:
            if cur.host_value is None:
                raise CacheAssertion("")
            host_kv.append(cur.host_value)
            nodes.append(cur)
            cur = cur.parent
        nodes.reverse()
        host_indices = [s for chunk in reversed(host_kv) for s in chunk]
        skips = self.inc_lock_ref(best)
        delta = self.last_lock_delta
        mamba, node_transfer = self._mamba_load_transfers(best, req)
        if (len(host_indices) < self.load_back_threshold and not mamba) or (
                mem_quota is not None and len(host_indices) > mem_quota + delta):
            self.dec_lock_ref(best, skips)
            self.dec_host_lock_ref(best, host_skips)
            return False
        avail = self.pools.device_kv.available_size()
        if avail < len(host_indices):
            needed = len(host_indices) - avail
            if self.evict(needed) < needed:
                self.dec_lock_ref(best, skips)
                self.dec_host_lock_ref(best, host_skips)
                return False
        device = self.controller.load(host_indices, best.id, mamba or None)
        self.dec_lock_ref(best, skips)
        if device is None:
            self.dec_host_lock_ref(best, host_skips)
            return False
        at = 0
        for n in nodes:  # the Full component's commit: the fresh device KV, node by node from the top
            k = len(n.host_value)
            n.value = list(device[at:at + k])
            at += k
            self.evictable[FULL] += k
            self._update_evictable_leaf_sets(n)
        self._update_evictable_leaf_sets(best)
        if node_transfer is not None and node_transfer.device_indices is not None:
            best.mamba_value = list(mamba[0].device_indices)
            if self.mamba_host_lru_list.in_list(best):
                self.mamba_host_lru_list.remove_node(best)
            self.mamba_lru_list.insert_mru(best)
            self.evictable["mamba"] += len(best.mamba_value)
        self._update_evictable_leaf_sets(best)
        self.ongoing_load_back[best.id] = (best, self.inc_lock_ref(best), host_skips)
        return True

    def _mamba_load_transfers(self, node: UNode, req) -> tuple[list[MambaTransfer], MambaTransfer | None]:
        """The Mamba component's load-back transfers: the node's state back to a fresh device slot (returned too),
        and a copy into the request's own slot (allocated here, evicting one state if the pool is short)."""
        if node.mamba_value is not None:
            return [], None
        out, to_node = [], None
        if node.mamba_host_value is not None:
            to_node = MambaTransfer(list(node.mamba_host_value), None)
            out.append(to_node)
        if req is not None and node.mamba_host_value is not None:
            if req.mamba_pool_idx is None:
                got = self.pools.device_mamba.alloc(1)
                if got is None:
                    self.evict(0, mamba_num=1)
                    got = self.pools.device_mamba.alloc(1)
                    if got is None:
                        raise CacheAssertion("Cannot alloc mamba for load_back")
                req.mamba_pool_idx = got[0]
            out.append(MambaTransfer(list(node.mamba_host_value), [req.mamba_pool_idx]))
        return out, to_node

    @simulated
    def loading_check(self) -> None:
        cc = self.controller
        ready = 0
        for ack in cc.ack_load_queue:
            if not ack.query():
                break
            ready += 1
        for _ in range(ready):
            ack = cc.ack_load_queue.pop(0)
            ack.synchronize()
            for ack_id in ack.node_ids:
                node, skips, host_skips = self.ongoing_load_back.pop(ack_id)
                self.dec_lock_ref(node, skips)
                self.dec_host_lock_ref(node, host_skips)

    @simulated
    def check_hicache_events(self) -> None:
        if self.arena is not None:  # 0.5.17: the storage counts are taken before the write and load checks
            limits = self.storage_queue_sizes()
            self.writing_check()
            self.loading_check()
            if self.enable_storage:
                self._drain_storage_control_queues_impl(limits)
            return
        self.writing_check()
        self.loading_check()
        if self.enable_storage:
            self.drain_storage_control_queues()
