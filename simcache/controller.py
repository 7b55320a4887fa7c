"""The cache controller: copies between tiers, completed later through ack queues; L3 storage operations.

Vocabulary
- A *write* copies a node's device KV (and Mamba state) to freshly allocated host slots; a *load* copies host slots
  back to freshly allocated device slots. Both return at once with the destination slots; the copy *completes*
  later, and the cache learns it from an *ack* (``writing_check`` / ``loading_check``).
- An *L3 backup* (``write_storage``) copies host slots to the storage backend; it stays pending until its storage
  ack is delivered. A *prefetch* reserves host slots and is filled from storage later.

As in SGLang's controller: ``write`` allocates host KV first and fails (``None``) when short; then the host Mamba
slot, calling ``evict_mamba_host`` once on shortage and rolling back on failure. ``load`` mirrors it on device
(``evict_mamba`` on Mamba shortage).

``auto_complete`` (the default, as the oracle's controller behaves) marks each copy complete at once, so the next
check consumes its ack; with ``auto_complete=False`` copies complete only through ``complete_writes`` /
``complete_loads``, which is how a schedule delays an ack. With streams (CUDA, or their emulation), copies run
on a side stream created on the pools' device; each gives a ``PendingCopy`` that the ack holds, and processing the
ack completes them (waits for their event; a backup's data reaches the host pool only then), so the data is really
there when the cache acts on the ack, while *when* an ack counts as delivered stays a decision of the schedule
(deterministic). ``pool_copy.py`` lists the orderings that make a copy on a stream equal to the plain one.
"""
from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .fingerprints import kv_fingerprints, mamba_fingerprint
from .keys import Key
from .pool_copy import PendingCopy, copy_slots
from .pools import Pools

Slots = list[int]


@dataclass
class MambaTransfer:
    """One Mamba state to move between tiers (SGLang's ``PoolTransfer`` for the Mamba pool)."""
    host_indices: Slots | None
    device_indices: Slots | None


@dataclass
class Ack:
    node_ids: list[int]
    done: bool
    copies: list[PendingCopy] = field(default_factory=list)  # copies issued on a side stream, not yet complete

    def query(self) -> bool:
        """Whether the copy completed (its ack may be consumed).

        SGLang: the ack's ``finish_event.query()`` (``HiCacheAck``, cache_controller.py:141)."""
        return self.done

    def synchronize(self) -> None:
        """Wait for the copies this ack covers (a backup's data reaches the host pool only now).

        SGLang: the ack's ``finish_event.synchronize()`` (``HiCacheAck``, cache_controller.py:141)."""
        for copy in self.copies or ():  # the explorer's data-free machines issue no copies (None)
            copy.complete()


@dataclass
class StorageOp:
    """An L3 backup in flight."""
    id: int
    host_indices: Slots
    key: Key
    hash_value: list[str] | None
    mamba: list[MambaTransfer] | None


@dataclass
class PrefetchOp:
    """A prefetch from L3 storage into reserved host slots (``host_indices`` None until reserved: release 0.5.17
    reserves them when the L3 hit count arrives)."""
    request_id: str
    host_indices: Slots | None
    token_ids: list[int]
    prefix_tokens: list[int]  # the anchor's path, so fetched KV can be fingerprinted by its whole prefix
    mamba: list[MambaTransfer] | None
    completed_tokens: int = 0
    hash_value: list[str] = field(default_factory=list)
    mamba_hit: bool = False
    terminated: bool = False
    storage_hit_count: int = 0  # tokens the storage hit query found (release 0.5.17 reserves this much host KV)


class CacheController:
    def __init__(self, pools: Pools, write_policy: str, page_size: int, auto_complete: bool = True) -> None:
        self.pools = pools
        self.write_policy = write_policy
        self.page_size = page_size
        self.auto_complete = auto_complete
        self.ack_write_queue: list[Ack] = []
        self.ack_load_queue: list[Ack] = []
        self.pending_backups: dict[int, StorageOp] = {}
        self.ack_backup_queue: deque[StorageOp] = deque()
        self.prefetch_revoke_queue: deque[str] = deque()
        self.prefetch_hit_queue: deque[PrefetchOp] = deque()  # hit counts known, host KV not reserved yet (0.5.17)
        self.host_mem_release_queue: deque[Slots] = deque()
        self.prefetch_tokens_occupied = 0
        self.prefetch_capacity_limit = 1 << 30
        self._op_ids = itertools.count(1)
        self.evict_mamba_host: Callable[[int], object] = lambda n: 0
        self.evict_mamba: Callable[[int], object] = lambda n: 0
        self.stream = None if pools.streams is None else pools.streams.new_stream()  # on the pools' device

    # --- extra (Mamba) pools, one evict-and-retry, roll back on failure ---
    def _resolve_mamba(self, transfers: list[MambaTransfer] | None, to_host: bool) -> bool:
        if not transfers:
            return True
        pool = self.pools.host_mamba if to_host else self.pools.device_mamba
        evict = self.evict_mamba_host if to_host else self.evict_mamba
        newly: list[MambaTransfer] = []
        for tr in transfers:
            have, src = (tr.host_indices, tr.device_indices) if to_host else (tr.device_indices, tr.host_indices)
            if have is not None or src is None:
                continue
            idx = pool.alloc(len(src))
            if idx is None:
                evict(len(src))
                idx = pool.alloc(len(src))
            if idx is None:
                for done in newly:
                    pool.free(done.host_indices if to_host else done.device_indices)
                    if to_host:
                        done.host_indices = None
                    else:
                        done.device_indices = None
                return False
            if to_host:
                tr.host_indices = idx
            else:
                tr.device_indices = idx
            newly.append(tr)
        return True

    def _copy(self, pairs) -> list[PendingCopy]:
        copies = [copy_slots(src, s, dst, d, self.stream) for src, s, dst, d in pairs]
        return [c for c in copies if c is not None]

    def write(self, device_indices: Slots, node_id: int, extra: list[MambaTransfer] | None = None):
        """Allocate host KV for ``device_indices`` (None when short), then the host Mamba slots of ``extra`` (evicting
        once, rolling back on failure); queue the copy and its ack.

        Mutates: the host pools, ``ack_write_queue``.
        SGLang: ``HiCacheController.write``, cache_controller.py:689."""
        p = self.pools
        host = p.host_kv.alloc(len(device_indices))
        if host is None:
            return None
        if not self._resolve_mamba(extra, to_host=True):
            p.host_kv.free(host)
            return None
        pairs = [(p.device_kv, device_indices, p.host_kv, host)]
        pairs += [(p.device_mamba, t.device_indices, p.host_mamba, t.host_indices) for t in extra or ()]
        self.ack_write_queue.append(Ack([node_id], self.auto_complete, self._copy(pairs)))
        return host

    def load(self, host_indices: Slots, node_id: int, extra: list[MambaTransfer] | None = None):
        """Allocate device KV for ``host_indices`` (None when short), then the device Mamba slots of ``extra``; queue
        the copy and its ack.

        Mutates: the device pools, ``ack_load_queue``.
        SGLang: ``HiCacheController.load``, cache_controller.py:744."""
        p = self.pools
        dev: Slots = []
        if host_indices:
            got = p.device_kv.alloc(len(host_indices))
            if got is None:
                return None
            dev = got
        if not self._resolve_mamba(extra, to_host=False):
            if host_indices:
                p.device_kv.free(dev)
            return None
        pairs = [(p.host_kv, host_indices, p.device_kv, dev)]
        pairs += [(p.host_mamba, t.host_indices, p.device_mamba, t.device_indices) for t in extra or ()]
        self.ack_load_queue.append(Ack([node_id], self.auto_complete, self._copy(pairs)))
        return dev

    def complete_writes(self, n: int = 1) -> int:
        """Mark the oldest ``n`` pending writes complete (manual acks); returns how many were marked.

        SGLang: none (stands for the copy stream finishing the writes ``start_writing`` issued,
        cache_controller.py:707)."""
        return _complete(self.ack_write_queue, n)

    def complete_loads(self, n: int = 1) -> int:
        """Mark the oldest ``n`` pending loads complete (manual acks); returns how many were marked.

        SGLang: none (stands for the copy stream finishing ``start_loading``'s loads, cache_controller.py:783)."""
        return _complete(self.ack_load_queue, n)

    def evict_device(self, device_indices: Slots) -> int:
        """Free device KV slots; returns how many.

        SGLang: ``HiCacheController.evict_device``, cache_controller.py:832."""
        self.pools.device_kv.free(device_indices)
        return len(device_indices)

    def evict_host(self, host_indices: Slots) -> int:
        """Free host KV slots; returns how many.

        SGLang: ``HiCacheController.evict_host``, cache_controller.py:836."""
        self.pools.host_kv.free(host_indices)
        return len(host_indices)

    # --- L3 storage ---
    def write_storage(self, host_indices: Slots, key: Key, hash_value, extra=None) -> int:
        """Start an L3 backup of host slots; returns its operation id (pending until ``complete_backup``).

        Mutates: ``pending_backups``.
        SGLang: ``HiCacheController.write_storage``, cache_controller.py:1057."""
        op = StorageOp(next(self._op_ids), host_indices, key, hash_value, extra)
        self.pending_backups[op.id] = op
        return op.id

    def complete_backup(self, op_id: int) -> None:
        """Deliver backup ``op_id``'s storage ack (queued for ``drain_storage_control_queues``).

        SGLang: none (stands for ``backup_thread_func`` finishing, cache_controller.py:1152)."""
        self.ack_backup_queue.append(self.pending_backups.pop(op_id))

    def prefetch_rate_limited(self) -> bool:
        """Whether in-flight prefetches already hold the token budget.

        SGLang: ``HiCacheController.prefetch_rate_limited``, cache_controller.py:968."""
        return self.prefetch_tokens_occupied >= self.prefetch_capacity_limit

    def prefetch(self, request_id: str, host_indices: Slots | None, tokens: list[int], prefix_tokens: list[int],
                 extra=None) -> PrefetchOp:
        """A prefetch operation for ``tokens`` into the reserved host slots (None: reserved when its hit count
        arrives, release 0.5.17).

        SGLang: ``HiCacheController.prefetch``, cache_controller.py:854."""
        return PrefetchOp(request_id, host_indices, list(tokens), list(prefix_tokens), extra)

    def storage_hit(self, op: PrefetchOp, hit_tokens: int, hashes: list[str], threshold: int) -> None:
        """The storage hit query of a prefetch answered ``hit_tokens``: below ``threshold`` the prefetch is queued
        for revoking, else its hit count and page hashes are recorded and it waits in ``prefetch_hit_queue`` for the
        cache to reserve host KV (release 0.5.17).

        Mutates: ``op``, ``prefetch_revoke_queue`` / ``prefetch_hit_queue``.
        SGLang: the tail of ``HiCacheController.prefetch_thread_func`` (cache_controller.py:1073 in 0.5.17)."""
        if hit_tokens < max(threshold, self.page_size):
            self.prefetch_revoke_queue.append(op.request_id)
            return
        op.hash_value = list(hashes[: hit_tokens // self.page_size])
        op.storage_hit_count = hit_tokens
        self.prefetch_hit_queue.append(op)

    def finish_prefetch(self, op: PrefetchOp, completed_tokens: int, mamba_hit: bool, hashes: list[str]) -> None:
        """Storage delivered ``completed_tokens`` (and the Mamba state if ``mamba_hit``) into the reserved slots.

        SGLang: none (stands for ``prefetch_thread_func`` / ``_page_transfer`` filling the slots,
        cache_controller.py:1010 / :921)."""
        op.completed_tokens, op.hash_value, op.mamba_hit = completed_tokens, hashes, mamba_hit
        full = op.prefix_tokens + op.token_ids[:completed_tokens]
        self.pools.host_kv.write(op.host_indices[:completed_tokens],
                                 kv_fingerprints(full, start=len(op.prefix_tokens)))
        if mamba_hit:
            for t in op.mamba or ():
                self.pools.host_mamba.write(t.host_indices, [mamba_fingerprint(full)])

    def terminate_prefetch(self, op: PrefetchOp) -> tuple[int, list[str]]:
        """Stop a prefetch; returns (tokens completed, their page hashes).

        SGLang: ``HiCacheController.terminate_prefetch``, cache_controller.py:871."""
        op.terminated = True
        return op.completed_tokens, op.hash_value

    def append_host_mem_release(self, host_indices: Slots) -> None:
        """Queue host slots to free at the next drain.

        SGLang: ``HiCacheController.append_host_mem_release``, cache_controller.py:875."""
        for i in range(0, len(host_indices), self.page_size):  # page-granular, as the real controller queues it
            self.host_mem_release_queue.append(list(host_indices[i : i + self.page_size]))


def _complete(queue: list[Ack], n: int) -> int:
    marked = 0
    for ack in queue:
        if marked >= n:
            break
        if not ack.done:
            ack.done = True
            marked += 1
    return marked
