"""Pools: free lists over torch tensors, as the oracle's fake pools behave (first free slots out, freed slots
appended), with double frees accepted and recorded, and leaks found by accounting."""
from __future__ import annotations

import torch
from helpers import double_frees, free_lists, leaks, make_cache, snapshot

from simcache.driver import Driver
from simcache.pools import DoubleFree, PoolAccounting, Pools, SlotPool, copy_slots
from simcache.state import accounting, tree_slot_lines


def test_alloc_takes_the_first_free_slots_and_free_appends():
    pool = SlotPool("device_kv", 6)
    assert pool.alloc(2) == [0, 1]
    assert pool.alloc(3) == [2, 3, 4]
    assert list(pool.free_slots) == [5] and pool.available_size() == 1

    assert pool.free([3, 1]) == 2
    assert list(pool.free_slots) == [5, 3, 1]
    assert pool.alloc(2) == [5, 3]
    assert pool.used_slots() == {0, 2, 3, 4, 5}
    assert (pool.is_free(1), pool.is_free(3)) == (True, False)


def test_alloc_beyond_the_free_list_fails_and_takes_nothing():
    pool = SlotPool("host_kv", 4)
    pool.alloc(3)
    assert pool.alloc(2) is None
    assert list(pool.free_slots) == [3]
    assert pool.alloc(0) == [] and pool.alloc(1) == [3]


def test_a_double_free_is_accepted_recorded_and_later_hands_the_slot_out_twice():
    pool = SlotPool("device_kv", 3)
    got = pool.alloc(3)
    pool.free([1])
    pool.free([1, 2])

    assert pool.double_frees == [DoubleFree("device_kv", (1,), ())]
    assert list(pool.free_slots) == [1, 1, 2]
    assert pool.accounting([0]) == PoolAccounting(leaked=(), free_but_referenced=(), duplicated_in_free_list=(1,),
                                                  shared=())
    assert got == [0, 1, 2] and pool.alloc(2) == [1, 1]  # two owners of slot 1: the real pools do the same


def test_accounting_reports_leaks_stale_references_and_sharing():
    pool = SlotPool("host_kv", 6)
    pool.alloc(4)  # 0..3 in use
    pool.free([3])
    assert pool.accounting([0, 0, 3]) == PoolAccounting(
        leaked=(1, 2),  # in use, nobody refers to them
        free_but_referenced=(3,),  # somebody still refers to a freed slot
        duplicated_in_free_list=(),
        shared=(0,))  # two references to one slot


def test_slot_data_is_an_int64_tensor_that_copies_between_pools():
    dev, host = SlotPool("device_kv", 4, "cpu"), SlotPool("host_kv", 4, "cpu", host=True)
    assert (dev.data.dtype, dev.data.device.type, tuple(dev.data.shape)) == (torch.int64, "cpu", (4,))
    assert not host.data.is_pinned()  # pinned only when the device pools are on a GPU, whatever the machine has
    dev.write([2, 0], [111, 222])
    assert dev.read([0, 1, 2]) == [222, 0, 111]
    assert copy_slots(dev, [0, 2], host, [3, 1]) is None  # no stream: copied synchronously
    assert host.read([0, 1, 2, 3]) == [0, 111, 0, 222]
    assert dev.read([]) == []


def test_a_full_eviction_returns_every_slot_of_every_pool():
    cache = make_cache("write_through", host_kv=16)
    drv = Driver(cache)
    for tokens in ([1, 2, 3, 4], [1, 2, 5, 6], [7, 8]):
        drv.finish(drv.start(tokens))
    cache.check_hicache_events()  # write-through acks: the nodes unlock
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=0,1 m=- mh=-", "2 3,4 v=2,3 h=2,3 m=0 mh=0",
                                      "2 5,6 v=6,7 h=4,5 m=1 mh=1", "1 7,8 v=8,9 h=6,7 m=2 mh=2"]
    assert leaks(cache) == {}

    assert cache.evict(100) == (8, 3)  # every device node demoted to host
    assert tree_slot_lines(cache) == ["1 1,2 v=- h=0,1 m=- mh=-", "2 3,4 v=- h=2,3 m=- mh=0",
                                      "2 5,6 v=- h=4,5 m=- mh=1", "1 7,8 v=- h=6,7 m=- mh=2"]
    cache.evict_host(100)

    assert snapshot(cache) == dict(
        tree=[], sizes=dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0),
        full_lru=[], mamba_lru=[], host_mamba_lru=[], device_leaves=[], host_leaves=[])
    free = free_lists(cache)
    assert free == {
        # 4,5 were the second request's duplicates of 1,2; then the leaves in eviction order, 1,2 once bare
        "device_kv": list(range(10, 32)) + [4, 5, 2, 3, 6, 7, 0, 1, 8, 9],
        "device_mamba": [3, 4, 5, 6, 7, 0, 1, 2],
        "host_kv": list(range(8, 16)) + [2, 3, 4, 5, 0, 1, 6, 7],
        "host_mamba": [3, 4, 5, 6, 7, 0, 1, 2],
    }
    assert {name: sorted(slots) for name, slots in free.items()} == {
        "device_kv": list(range(32)), "device_mamba": list(range(8)), "host_kv": list(range(16)),
        "host_mamba": list(range(8))}
    assert double_frees(cache) == []
    assert accounting(cache) == {name: dict(leaked=[], free_but_referenced=[], duplicated_in_free_list=[], shared=[])
                                 for name in Pools.NAMES}


def test_accounting_counts_a_live_requests_slots_as_owned():
    cache = make_cache("write_back")
    drv = Driver(cache)
    rid = drv.start([1, 2, 3])
    req = drv.live[rid]
    assert leaks(cache) == {"device_kv": [0, 1, 2], "device_mamba": [0]}  # no request given: looks leaked
    assert leaks(cache, [req]) == {}
    drv.finish(rid)
    assert leaks(cache) == {}


def test_cpu_pools_when_asked_for_cpu():
    pools = Pools.create(4, 2, 4, 2, device="cpu")
    assert {n: p.data.device.type for n, p in pools.all().items()} == dict(device_kv="cpu", device_mamba="cpu",
                                                                          host_kv="cpu", host_mamba="cpu")
    assert {n: p.size for n, p in pools.all().items()} == dict(device_kv=4, device_mamba=2, host_kv=4, host_mamba=2)


def test_free_counts_follow_a_slot_listed_twice_through_frees_and_allocations():
    """The counts move at C speed (``_shift``); a slot listed twice in one call must move twice, as in a loop, and
    each count must stay the slot's occurrences in the free list."""
    pool = SlotPool("device_kv", 4)
    pool.alloc(4)
    pool.free([2, 2, 3])  # slot 2 twice in one call: recorded as no double free (both were taken), counted twice
    assert pool._free_count == [0, 0, 2, 1] and pool.double_frees == []
    pool.free([3, 0])  # 3 again: a double free; 0 is new
    assert pool.double_frees == [DoubleFree("device_kv", (3,), ())]
    assert pool._free_count == [1, 0, 2, 2] and list(pool.free_slots) == [2, 2, 3, 3, 0]
    assert pool.alloc(3) == [2, 2, 3] and pool._free_count == [1, 0, 0, 1]
    assert pool.alloc(1) == [3] and pool.alloc(1) == [0] and pool._free_count == [0, 0, 0, 0]
    for s in range(4):
        assert pool._free_count[s] == list(pool.free_slots).count(s)
