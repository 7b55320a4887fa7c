"""What the real ``UnifiedRadixCache`` runs over beyond ``simcache.real``'s fakes (own code, nothing of SGLang's).

- ``DeviceKVAllocator``: the device KV free list, with the batched segment free 0.5.17 calls.
- ``HybridReqToTokenPool``: the request pool, under the class name the Mamba component checks for.
- ``UnifiedController``: ``simcache.real``'s controller, bound to the unified cache's evict callbacks
  (``evict_host(n, MAMBA)``, ``evict(EvictParams(mamba_num=n))``) through the host pool's entry map, with one
  release queue per extra pool, as the hybrid controller has.
- ``make_assembler``: the fake ``attach_hybrid_pool_to_unified_cache``; it sets what the real
  ``_apply_stack_result`` sets: the controller, and each component's host pool.
"""
from __future__ import annotations

import queue

from ..fake_controller import FakeCacheController, FakePoolEntry
from ..fakes import FakeDeviceKVAllocator, ReqToTokenPool


class DeviceKVAllocator(FakeDeviceKVAllocator):
    def free_segments(self, segments) -> None:  # 0.5.17 on
        for indices, start_pos in segments:
            self.free_segment(indices, start_pos)

    def full_available_size(self) -> int:
        return self.available_size()


class HybridReqToTokenPool(ReqToTokenPool):
    """The Mamba component asserts ``isinstance(req_to_token_pool, HybridReqToTokenPool)``."""


class UnifiedController(FakeCacheController):
    enable_storage = True

    def bind_unified(self, pool_name, evict_mamba_host, evict_mamba) -> None:
        self.entry_map = {pool_name: FakePoolEntry(self.mamba_host_pool, self.mamba_device_pool,
                                                   host_evict_fn=evict_mamba_host, device_evict_fn=evict_mamba)}
        self.mem_pool_host.entry_map = self.entry_map  # the real host pool group carries the entry map
        self.extra_host_mem_release_queues = {pool_name: queue.Queue()}

    def get_attn_cp_rank_and_size(self):
        return 0, 1

    def append_host_mem_release(self, host_indices=None, extra_pools=None) -> None:
        super().append_host_mem_release(host_indices)
        for x in extra_pools or []:
            if x.host_indices is None or x.host_indices.numel() == 0:
                continue
            if getattr(x, "indices_from_pool", None) is not None:
                continue
            q = getattr(self, "extra_host_mem_release_queues", {}).get(x.name)
            if q is not None:
                q.put(x.host_indices)


def make_assembler(controller: UnifiedController, component_type):
    def attach_hybrid_pool_to_unified_cache(cache, params, server_args, **kwargs) -> None:
        cache.host_pool_group = None
        cache.cache_controller = controller
        cache.full_kv_pool_host = controller.mem_pool_host
        cache.components[component_type.FULL]._full_kv_pool_host = controller.mem_pool_host
        cache.mamba_pool_host = controller.mamba_host_pool
        cache.components[component_type.MAMBA]._mamba_pool_host = controller.mamba_host_pool

    return attach_hybrid_pool_to_unified_cache
