"""The GPU path: device pools on CUDA, pinned host pools, copies on a side stream observed by the acks.

These tests skip cleanly on a machine without CUDA; everything else in the suite runs on the CPU.
"""
from __future__ import annotations

import pytest
import torch

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.driver import Driver
from simcache.invariants import check_all
from simcache.pools import kv_fingerprints, mamba_fingerprint
from simcache.versions import preset

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (no GPU on this machine)")]


def make(auto_complete=True, policy="write_through"):
    cfg = CacheConfig(device_kv=64, device_mamba=8, host_kv=64, host_mamba=8, policy=policy,
                      load_back_threshold=1, flags=preset("followup_fix"), auto_complete=auto_complete)
    cache = HiMambaRadixCache(cfg)
    return cache, Driver(cache)


def test_pools_live_on_the_gpu_and_host_pools_are_pinned():
    cache, _ = make()
    assert cache.pools.device_kv.data.is_cuda and cache.pools.device_mamba.data.is_cuda
    assert cache.pools.host_kv.data.is_pinned() and cache.pools.host_mamba.data.is_pinned()
    assert cache.controller.stream is not None


def test_backup_copies_on_a_side_stream_and_the_ack_observes_it():
    cache, drv = make(auto_complete=False)
    drv.finish(drv.start([1, 2, 3, 4]))
    node = cache.root_node.children[1]
    ack = cache.controller.ack_write_queue[0]
    assert ack.event is not None and not ack.query()  # delivered only when the schedule says so
    cache.check_hicache_events()
    assert node.full_lock_ref == 1  # still locked: the write is not acknowledged yet
    cache.controller.complete_writes(1)
    cache.check_hicache_events()
    assert node.full_lock_ref == 0
    assert cache.pools.host_kv.read(node.host_value) == kv_fingerprints([1, 2, 3, 4])
    assert cache.pools.host_mamba.read(node.mamba_host_value) == [mamba_fingerprint([1, 2, 3, 4])]


def test_load_back_brings_the_same_bytes_back_to_the_gpu():
    cache, drv = make()
    drv.finish(drv.start([1, 2, 3, 4]))
    cache.check_hicache_events()
    cache.evict(4)
    node = cache.root_node.children[1]
    assert node.value is None and node.host_value is not None
    rid = drv.start([1, 2, 3, 4, 5])
    cache.check_hicache_events()
    assert cache.pools.device_kv.read(node.value) == kv_fingerprints([1, 2, 3, 4])
    drv.finish(rid)
    assert all(v is None for v in check_all(cache, list(drv.live.values())).values())
