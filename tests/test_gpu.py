"""The GPU path: device pools on CUDA, pinned host pools, copies on a side stream completed by the acks.

These tests skip cleanly on a machine without CUDA; the CPU suite proves the same orderings under the stream
emulation (tests/test_streams.py). ``scripts/gpu_check.sh`` runs this file with the rest of the GPU checks.
"""
from __future__ import annotations

import pytest
import torch

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.driver import Driver
from simcache.errors import ConfigError
from simcache.gpu_check import PROBES, DelayedCudaStreams, compare_gallery, compare_programs, run_probes, using_streams
from simcache.invariants import check_all
from simcache.pools import PendingCopy, Pools, copy_slots, kv_fingerprints, mamba_fingerprint
from simcache.streams import CudaStreams, resolve_device
from simcache.versions import preset

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (no GPU on this machine)")]


def make(auto_complete=True, policy="write_through", device="cuda"):
    cfg = CacheConfig(device_kv=64, device_mamba=8, host_kv=64, host_mamba=8, policy=policy, device=device,
                      load_back_threshold=1, flags=preset("followup_fix"), auto_complete=auto_complete)
    cache = HiMambaRadixCache(cfg)
    return cache, Driver(cache)


def test_pools_live_on_the_gpu_host_pools_are_pinned_and_the_side_stream_is_on_the_pools_gpu():
    cache, _ = make()
    p = cache.pools
    assert p.device_kv.data.is_cuda and p.device_mamba.data.is_cuda
    assert p.host_kv.data.is_pinned() and p.host_mamba.data.is_pinned()
    assert isinstance(p.streams, CudaStreams) and cache.controller.stream.device == p.device_kv.data.device


def test_a_cpu_cache_on_a_gpu_machine_neither_pins_nor_makes_streams():
    cache, drv = make(device="cpu")
    assert cache.pools.streams is None and cache.controller.stream is None
    assert not cache.pools.host_kv.data.is_pinned()
    drv.finish(drv.start([1, 2, 3]))
    assert cache.controller.ack_write_queue[0].copies == []


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_the_side_stream_is_made_on_the_pools_gpu_not_the_current_one():
    with torch.cuda.device(0):
        cache, drv = make(device="cuda:1")
        assert cache.controller.stream.device == torch.device("cuda", 1)
        drv.finish(drv.start([1, 2, 3, 4]))
        cache.check_hicache_events()
        node = cache.root_node.children[1]
        assert cache.pools.host_kv.read(node.host_value) == kv_fingerprints([1, 2, 3, 4])


def test_cuda_names_the_current_gpu_by_its_index_and_one_past_the_last_gpu_is_refused_with_the_range():
    n, current = torch.cuda.device_count(), torch.cuda.current_device()
    assert resolve_device("cuda") == torch.device("cuda", current) and resolve_device("cuda").index == current
    assert resolve_device(f"CUDA:{n - 1}") == torch.device("cuda", n - 1)
    with pytest.raises(ConfigError) as e:
        resolve_device(f"cuda:{n}")
    assert str(e.value) == (f"device 'cuda:{n}' does not exist: this machine has {n} GPU(s), "
                            f"cuda:0 to cuda:{n - 1}")


def test_slots_given_as_tensors_copy_both_ways_and_uploads_are_int64_on_the_gpu():
    pools = Pools.create(8, 1, 8, 1, "cuda")
    st, dev, host = pools.streams, pools.device_kv, pools.host_kv
    side = st.new_stream()
    for values in ([5, 6, 7], torch.tensor([5, 6, 7]), torch.tensor([5, 6, 7]).pin_memory()):
        up = st.upload(values, st.default)
        assert up.device == dev.data.device and up.dtype == torch.int64 and up.tolist() == [5, 6, 7]
    dev.write(list(range(8)), [10 + i for i in range(8)])
    scattered, into = torch.tensor([6, 1, 4]), torch.tensor([2, 7, 0]).pin_memory()  # one pinned, one not
    copy_slots(dev, scattered, host, into, side).complete()
    assert host.read(range(8)) == [14, 0, 16, 0, 0, 0, 0, 11]
    dev.write([1, 4, 6], [0, 0, 0])
    copy_slots(host, into.clone(), dev, scattered.pin_memory(), side).complete()  # back where they came from
    assert dev.read(range(8)) == [10 + i for i in range(8)]


def test_without_streams_gpu_pools_write_read_and_copy_at_once():
    with using_streams(lambda device: None):  # the plain path: every copy done on return
        pools = Pools.create(8, 1, 8, 1, "cuda")
    dev, host = pools.device_kv, pools.host_kv
    assert pools.streams is None and dev.data.is_cuda and host.data.is_pinned()
    dev.write([3, 5, 3], [7, 8, 9])  # slot 3 named twice: the last write wins
    assert dev.read([3, 5, 0]) == [9, 8, 0]
    assert copy_slots(dev, [5, 3], host, [1, 6]) is None and host.read(range(8)) == [0, 8, 0, 0, 0, 0, 9, 0]
    assert copy_slots(host, [6, 1], dev, [0, 7]) is None and dev.read(range(8)) == [9, 0, 0, 9, 0, 8, 0, 8]


def test_with_streams_but_no_stream_given_a_gpu_copy_is_done_at_once():
    pools = Pools.create(8, 1, 8, 1, "cuda")
    dev, host = pools.device_kv, pools.host_kv
    host.write([1, 2], [4, 6])
    assert copy_slots(host, [2, 1], dev, [3, 0]) is None and dev.read(range(4)) == [4, 0, 0, 6]
    assert copy_slots(dev, [3], host, [7]) is None and host.read([7]) == [6] and host.inflight == []


def test_backup_copies_on_a_side_stream_and_the_ack_completes_it():
    cache, drv = make(auto_complete=False)
    drv.finish(drv.start([1, 2, 3, 4]))
    node = cache.root_node.children[1]
    ack = cache.controller.ack_write_queue[0]
    assert len(ack.copies) == 2 and all(isinstance(c, PendingCopy) for c in ack.copies)
    assert not ack.query()  # delivered only when the schedule says so
    cache.check_hicache_events()
    assert node.full_lock_ref == 1  # still locked: the write is not acknowledged yet
    cache.controller.complete_writes(1)
    cache.check_hicache_events()
    assert node.full_lock_ref == 0 and all(c.done for c in ack.copies)
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
    assert cache.pools.host_kv.read(node.host_value) == kv_fingerprints([1, 2, 3, 4])
    drv.finish(rid)
    assert all(v is None for v in check_all(cache, list(drv.live.values())).values())


def test_every_ordering_probe_passes_on_cuda_streams():
    assert run_probes("cuda") == {name: [] for name in PROBES}


def test_every_ordering_probe_passes_with_the_side_stream_delayed():
    with using_streams(lambda d: DelayedCudaStreams(d) if d.type == "cuda" else None):
        assert run_probes("cuda") == {name: [] for name in PROBES}


def test_the_gallery_on_cuda_equals_the_cpu_trace_for_trace():
    assert compare_gallery("cuda") == []


def test_random_programs_on_cuda_equal_the_cpu():
    assert compare_programs("cuda", 50, seed=2000) == []
