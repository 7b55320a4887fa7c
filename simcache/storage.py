"""L3 storage (reference c.13): host copies backed up to a storage backend, and the drain of the storage queues.

Vocabulary
- An *L3 backup* starts when a node's device->host write is acknowledged (``writing_check`` ->
  ``write_backup_storage``): the node's host KV (and host Mamba state, when the node has hashes) is *host
  referenced* (``host_ref_counter``) until the storage ack, so host eviction must skip it; ``ongoing_backup`` maps
  the storage operation to the node.
- ``drain_storage_control_queues`` (run by ``check_hicache_events``) processes what the controller queued: revoked
  prefetches, prefetch hit counts (release 0.5.17: host KV reserved then; ``prefetch.py``), storage acks (backups
  done, host refs released) and host pages to release.

Each method names the SGLang function it mirrors, with its line in ``python/sglang/srt/mem_cache/`` at
``4a50cd78`` (#23696, the ``followup_fix`` preset). Nothing here needs a device lock: storage holds host slots,
protected by host refs.
"""
from __future__ import annotations

from .controller import MambaTransfer
from .node import TreeNode
from .trace_hooks import register, simulated


class L3Storage:
    # --- backups to storage ---
    @simulated
    def write_backup_storage(self, node: TreeNode) -> None:
        """Start ``node``'s L3 backup (its host copy to storage).

        Mutates: the controller's pending backups, ``ongoing_backup``. Locks: host-references ``node`` (and its host
        Mamba state when archived) until the storage ack, so host eviction skips it.
        SGLang: ``HiMambaRadixCache.write_backup_storage``, hi_mamba_radix_cache.py:1669."""
        extra = self.mamba_archive_transfers(node)
        op_id = self.controller.write_storage(node.host_value, node.key, node.hash_value, extra)
        mamba_protected = extra is not None
        self.ongoing_backup[op_id] = (node, mamba_protected)
        self._protect_host_node(node, protect_mamba=mamba_protected)

    @simulated
    def mamba_archive_transfers(self, node: TreeNode):
        """The Mamba half of an L3 backup: ``node``'s host Mamba slot, if it has one and hashes.

        Mutates: nothing; locks: none.
        SGLang: ``HiMambaRadixCache.mamba_archive_transfers``, hi_mamba_radix_cache.py:1984."""
        if node.mamba_host_value is None or not node.hash_value:
            return None
        return [MambaTransfer(node.mamba_host_value, None)]

    # --- storage acks and revoked prefetches ---
    @simulated
    def drain_storage_control_queues(self) -> None:
        """Process the storage queues as they stood on entry: revoked prefetches (undone), hit counts that arrived
        (host KV reserved, release 0.5.17), storage acks (backups done), host pages to release.

        Mutates: ``ongoing_prefetch``, ``ongoing_backup``, the host pools (a hit may ``evict_host``), the prefetch
        token count. Locks: releases the host refs of revoked prefetches and finished backups.
        SGLang: ``HiMambaRadixCache.drain_storage_control_queues``, hi_mamba_radix_cache.py:1590
        (``_drain_storage_control_queues_impl`` :1447)."""
        cc = self.controller
        self._drain_storage_control_queues_impl(len(cc.prefetch_revoke_queue), len(cc.prefetch_hit_queue),
                                                len(cc.ack_backup_queue), len(cc.host_mem_release_queue))

    # The drain's steps are frames of their own, nested as in SGLang, so a crash or a double free inside one names
    # the same call chain as the real code (registered, not traced: they only group the loops below).
    def _drain_storage_control_queues_impl(self, n_revoke: int, n_hit: int, n_backup: int, n_release: int) -> None:
        self._drain_revoke(n_revoke)
        if self.flags.prefetch_reserves_host_at_hit:
            for _ in range(n_hit):
                self._drain_and_alloc_storage_hit(self.controller.prefetch_hit_queue.popleft())
        self._drain_backup(n_backup)
        self._drain_release(n_release)

    def _drain_revoke(self, n: int) -> None:
        for _ in range(n):
            self._revoke_pending_prefetch(self.controller.prefetch_revoke_queue.popleft())

    def _drain_backup(self, n: int) -> None:
        cc = self.controller
        for _ in range(n):
            op = cc.ack_backup_queue.popleft()
            entry = self.ongoing_backup.pop(op.id, None)
            if entry is not None:
                node, mamba_protected = entry
                self._ack_event("storage_ack", node)
                self._release_host_node(node, release_mamba=mamba_protected)

    def _drain_release(self, n: int) -> None:
        cc = self.controller
        pages = [cc.host_mem_release_queue.popleft() for _ in range(n)]
        if pages:
            self.pools.host_kv.free([i for p in pages for i in p])

for _step in (L3Storage._drain_storage_control_queues_impl, L3Storage._drain_revoke, L3Storage._drain_backup,
              L3Storage._drain_release):
    register(_step)
