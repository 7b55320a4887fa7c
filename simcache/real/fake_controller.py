"""A synchronous stand-in for SGLang's hybrid cache controller (own code): copies, acks, L3 backups, prefetches.

- ``write`` / ``load`` allocate at once (host KV first, then the extra Mamba pool with one evict-and-retry through
  the pool's evict function, rolled back on failure) and queue an ack whose events are complete, so the next
  ``writing_check`` / ``loading_check`` consumes it. ``auto_complete=False`` leaves them incomplete until the
  driver completes them (``complete_writes`` / ``complete_loads``: the simulator's manual acks).
- An ack (``HiCacheAck``) unpacks as a 3-tuple (the commits read it so) and has the attributes 0.5.17 reads.
- L3 backups stay pending until the driver delivers their ack (``complete_backup``).
- Prefetches: before 0.5.17 the cache reserves host KV itself and hands it over at issue. From 0.5.17 it hands
  over none; the hit query's answer (``deliver_hit``) puts the operation on ``prefetch_hit_queue`` (or, below the
  threshold, its id on ``prefetch_revoke_queue``) and the cache's drain reserves the memory. ``finish_prefetch``
  is the IO thread filling the reserved slots.
"""
from __future__ import annotations

import itertools
import queue
import time
from collections.abc import Callable
from typing import NamedTuple

import torch

from .fakes import FreeListPool


class FakeEvent:
    def __init__(self, done: bool = True) -> None:
        self.done = done

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        pass

    def record(self) -> None:
        pass

    def elapsed_time(self, other) -> float:
        return 0.0


class HiCacheAck(NamedTuple):
    start_event: FakeEvent
    finish_event: FakeEvent
    node_ids: list[int]

    num_tokens = 0  # read by 0.5.17's metrics, which are off
    timing_enabled = False


class FakePoolEntry:
    def __init__(self, host_pool, device_pool, host_evict_fn=None, device_evict_fn=None) -> None:
        self.host_pool, self.device_pool = host_pool, device_pool
        self.host_evict_fn, self.device_evict_fn = host_evict_fn, device_evict_fn
        self.is_primary_index_anchor = False


class FakeStorageOperation:
    def __init__(self, op_id: int, host_indices, token_ids, hash_value, pool_transfers) -> None:
        self.id, self.host_indices, self.token_ids = op_id, host_indices, token_ids
        self.hash_value, self.pool_transfers = hash_value, pool_transfers
        self.completed_tokens = len(host_indices)


class _PoolResult:
    def __init__(self, extra_pool_hit_pages: dict) -> None:
        self.extra_pool_hit_pages = extra_pool_hit_pages


class FakePrefetchOperation:
    def __init__(self, request_id, host_indices, token_ids, last_hash, prefix_keys=None, pool_transfers=None):
        self.request_id, self.host_indices, self.token_ids = request_id, host_indices, token_ids
        self.last_hash, self.prefix_keys, self.pool_transfers = last_hash, prefix_keys, pool_transfers
        self.completed_tokens, self.storage_hit_count = 0, 0
        self.hash_value: list[str] = []
        self.start_time = time.monotonic()
        self._terminated = False
        self.pool_storage_result = _PoolResult({})
        self.pool_transfers_done = not bool(pool_transfers)  # as the real operation: done at once without them

    def mark_terminate(self) -> None:
        self._terminated = True

    def is_terminated(self) -> bool:
        return self._terminated


class FakeCacheController:
    def __init__(self, device_allocator, host_kv_pool: FreeListPool, mamba_device_pool, mamba_host_pool,
                 write_policy: str, page_size: int = 1, prefetch_threshold: int = 1,
                 auto_complete: bool = True) -> None:
        self.mem_pool_device_allocator, self.mem_pool_host = device_allocator, host_kv_pool
        self.page_size, self.write_policy = page_size, write_policy
        self.prefetch_threshold = max(prefetch_threshold, page_size)  # as 0.5.17's controller keeps it
        self.mamba_device_pool, self.mamba_host_pool = mamba_device_pool, mamba_host_pool
        self.auto_complete = auto_complete
        self.entry_map: dict = {}
        self.ack_write_queue: list = []
        self.ack_load_queue: list = []
        self.load_queue: list = []
        for q in ("backup_queue", "ack_backup_queue", "prefetch_revoke_queue", "host_mem_release_queue",
                  "prefetch_hit_queue", "prefetch_buffer", "prefetch_queue"):
            setattr(self, q, queue.Queue())
        self.prefetch_tokens_occupied = 0
        self.prefetch_capacity_limit = 1 << 30
        self.pending_backups: dict[int, FakeStorageOperation] = {}
        self._ids = itertools.count(1)
        self.storage_backend = self.storage_backend_type = None
        self.tp_rank = self.dp_rank = self.pp_rank = 0
        self.pp_size = 1
        self.layer_done_counter = None

    def bind_tree(self, tree, pool_name) -> None:
        self.entry_map = {pool_name: FakePoolEntry(self.mamba_host_pool, self.mamba_device_pool,
                                                   host_evict_fn=tree.evict_mamba_host,
                                                   device_evict_fn=tree.evict_mamba)}

    def reset(self) -> None:
        pass

    def _resolve(self, extra_pools, alloc_host: bool):
        if not extra_pools:
            return None
        newly = []
        for pool in extra_pools:
            entry = self.entry_map.get(pool.name)
            if entry is None:
                continue
            have, src = (pool.host_indices, pool.device_indices) if alloc_host else \
                (pool.device_indices, pool.host_indices)
            if have is not None or src is None:
                continue
            p, fn = (entry.host_pool, entry.host_evict_fn) if alloc_host else (entry.device_pool, entry.device_evict_fn)
            idx = p.alloc(len(src))
            if idx is None and fn:
                fn(len(src))
                idx = p.alloc(len(src))
            if idx is None:
                for done, done_pool, done_idx in newly:
                    done_pool.free(done_idx)
                    if alloc_host:
                        done.host_indices = None
                    else:
                        done.device_indices = None
                return None
            if alloc_host:
                pool.host_indices = idx
            else:
                pool.device_indices = idx
            newly.append((pool, p, idx))
        return extra_pools

    def _ack(self, node_id) -> HiCacheAck:
        return HiCacheAck(FakeEvent(), FakeEvent(self.auto_complete), [node_id])

    def write(self, device_indices, priority=None, node_id=-1, extra_pools=None):
        host = self.mem_pool_host.alloc(len(device_indices))
        if host is None:
            return None
        if self._resolve(extra_pools, alloc_host=True) is None and extra_pools:
            self.mem_pool_host.free(host)
            return None
        self.ack_write_queue.append(self._ack(node_id))
        return host

    def load(self, host_indices, priority=None, node_id=-1, extra_pools=None):
        need = host_indices.numel() > 0
        dev = self.mem_pool_device_allocator.alloc(len(host_indices)) if need else torch.empty((0,), dtype=torch.int64)
        if dev is None:
            return None
        if self._resolve(extra_pools, alloc_host=False) is None and extra_pools:
            if need:
                self.mem_pool_device_allocator.free(dev)
            return None
        self.ack_load_queue.append(self._ack(node_id))
        return dev

    @staticmethod
    def _complete(acks: list, n: int) -> int:
        done = 0
        for ack in acks:
            if done == n:
                break
            if not ack.finish_event.done:
                ack.finish_event.done = True
                done += 1
        return done

    def complete_writes(self, n: int = 1) -> int:
        return self._complete(self.ack_write_queue, n)

    def complete_loads(self, n: int = 1) -> int:
        return self._complete(self.ack_load_queue, n)

    def start_loading(self) -> int:
        return -1

    def evict_device(self, device_indices) -> int:
        self.mem_pool_device_allocator.free(device_indices)
        return len(device_indices)

    def evict_host(self, host_indices, backup_only: bool = True) -> int:
        self.mem_pool_host.free(host_indices)
        return len(host_indices)

    # --- L3 storage ---
    def write_storage(self, host_indices, token_ids, hash_value=None, prefix_keys=None, extra_pools=None) -> int:
        op = FakeStorageOperation(next(self._ids), host_indices, token_ids, hash_value, extra_pools)
        self.pending_backups[op.id] = op
        return op.id

    def complete_backup(self, op_id: int) -> None:
        self.ack_backup_queue.put(self.pending_backups.pop(op_id))

    def prefetch_rate_limited(self) -> bool:
        return self.prefetch_tokens_occupied >= self.prefetch_capacity_limit

    def prefetch(self, request_id, *args, extra_pools=None, **kwargs) -> FakePrefetchOperation:
        """Both signatures: ``(rid, host_indices, tokens, last_hash, prefix_keys)`` (the commits) and
        ``(rid, tokens, last_hash, prefix_keys)`` (0.5.17: no host memory at issue)."""
        if args and isinstance(args[0], torch.Tensor):
            host, rest = args[0], list(args[1:])
        else:
            host, rest = None, list(args)
        rest += [None] * (3 - len(rest))
        op = FakePrefetchOperation(request_id, host, rest[0], rest[1], rest[2], extra_pools)
        if host is None:
            self.prefetch_queue.put(op)
        return op

    def deliver_hit(self, op: FakePrefetchOperation, hit_tokens: int, hash_fn: Callable[[int], str]) -> None:
        """The storage hit query's answer (0.5.17's prefetch thread): below the threshold the prefetch is revoked,
        else the operation waits on ``prefetch_hit_queue`` for the cache to reserve ``hit_tokens`` of host KV."""
        hit = 0 if op.is_terminated() else hit_tokens
        if hit < self.prefetch_threshold:
            self.prefetch_revoke_queue.put(op.request_id)
            return
        op.hash_value = [hash_fn(i) for i in range(hit // self.page_size)]
        op.storage_hit_count = hit
        self.prefetch_hit_queue.put(op)

    def finish_prefetch(self, op: FakePrefetchOperation, completed_tokens: int, mamba_hit: bool,
                        hash_fn: Callable[[int], str], pool_name) -> None:
        """The IO thread filled ``completed_tokens`` of the reserved slots (and the Mamba state if ``mamba_hit``)."""
        op.completed_tokens = completed_tokens
        if not op.storage_hit_count:  # the commits: the hashes arrive with the data
            op.hash_value = [hash_fn(i) for i in range(completed_tokens // self.page_size)]
        elif completed_tokens // self.page_size != len(op.hash_value):
            mamba_hit = False  # 0.5.17's IO thread reads the extra pools only after every KV page arrived
        op.pool_storage_result = _PoolResult({pool_name: 1 if mamba_hit else 0})
        op.pool_transfers_done = True

    def terminate_prefetch(self, operation):
        operation.mark_terminate()
        return operation.completed_tokens, operation.hash_value

    def append_host_mem_release(self, host_indices=None, extra_pools=None) -> None:
        if host_indices is None or host_indices.numel() == 0:
            return
        for page in host_indices.split(self.mem_pool_host.page_size):
            self.host_mem_release_queue.put(page)
