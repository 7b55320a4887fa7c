"""Exact outcomes of the scheduler side (``driver.py``) that the mutation run found no test looking at: how much a
request's start evicts, what a refused start gives back, the scheduler driver's Mamba retry, page-size tracking,
the request ids, and each operation's skip.

Each test drives a small cache through ``Driver`` and compares the request it made, the whole state
(``helpers.snapshot``) and the pools' free lists.
"""
from __future__ import annotations

import pytest
from helpers import free_lists, make_cache, node_at, snapshot

from simcache.driver import Driver, Skip
from simcache.operations import NO_ROOM, NO_SLOTS


def two_leaves(**config):
    """[1,2] and [3,4] finished and written through ([1,2] the least recent)."""
    cache = make_cache("write_through", **config)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([3, 4]))
    cache.check_hicache_events()
    return cache, drv


def request(drv, rid):
    r = drv.live[rid]
    return dict(rid=r.rid, tokens=r.tokens, kv=r.kv, mamba=r.mamba_pool_idx, track=r.track_buffer,
                protected=r.cache_protected_len, last=r.last_node.id, tracked=r.mamba_last_track_seqlen)


def test_a_start_short_of_device_kv_evicts_exactly_the_shortfall():
    """2 slots free, 4 needed: 2 tokens are evicted ([1,2], the least recent), not more."""
    cache, drv = two_leaves(device_kv=6, device_mamba=3)
    assert free_lists(cache)["device_kv"] == [4, 5]
    rid = drv.start([5, 6, 7, 8])
    assert request(drv, rid) == dict(rid="r2", tokens=[5, 6, 7, 8], kv=[4, 5, 0, 1], mamba=2, track=None,
                                     protected=0, last=cache.root_node.id, tracked=None)
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert free_lists(cache)["device_kv"] == [] and free_lists(cache)["device_mamba"] == [0]


def test_a_start_with_enough_device_kv_evicts_nothing():
    cache, drv = two_leaves(device_kv=8, device_mamba=3)
    before = snapshot(cache)
    rid = drv.start([5, 6, 7, 8])
    assert request(drv, rid)["kv"] == [4, 5, 6, 7]
    assert snapshot(cache) == before


def test_a_start_short_of_a_mamba_slot_evicts_one_mamba_state_only_when_none_is_free():
    cache, drv = two_leaves(device_mamba=3)
    before = snapshot(cache)
    rid = drv.start([5, 6])  # one slot free: nothing evicted
    assert request(drv, rid)["mamba"] == 2 and snapshot(cache) == before
    rid = drv.start([7, 8])  # none free: the least recent leaf's state goes (the leaf whole: it is backed up)
    assert request(drv, rid)["mamba"] == 0
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_a_start_that_finds_no_room_changes_nothing():
    """Every Mamba slot held by a live request: the eviction finds nothing and the start is refused."""
    cache = make_cache("write_through", device_mamba=1)
    drv = Driver(cache)
    drv.start([1, 2])
    before = snapshot(cache), free_lists(cache), drv.nreq
    with pytest.raises(Skip) as skip:
        drv.start([3, 4])
    assert skip.value.code == NO_ROOM
    assert (snapshot(cache), free_lists(cache), drv.nreq) == before and list(drv.live) == ["r0"]


def test_a_start_refused_for_want_of_its_mamba_slot_gives_back_its_kv_and_unlocks_its_match():
    """[1,2,9]: making room for the Mamba slot demotes [1,2]; the match then loads it back, which takes that
    slot, so the request's own finds none (the fuzz driver does not retry). The 1 new KV slot goes back to the
    pool and the lock the start took on [1,2] is released; the load-back's own lock stays until its ack."""
    cache, drv = two_leaves(device_mamba=2)
    with pytest.raises(Skip) as skip:
        drv.start([1, 2, 9])
    assert skip.value.code == NO_SLOTS
    assert (drv.nreq, list(drv.live)) == (2, [])
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0", "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=2, mamba_evictable=1, mamba_protected=1),
        full_lru=["1,2", "3,4"], mamba_lru=["1,2", "3,4"], host_mamba_lru=["3,4", "1,2"], device_leaves=["3,4"],
        host_leaves=[])
    assert free_lists(cache)["device_kv"] == [*range(7, 32), 0, 1, 6]
    cache.check_hicache_events()
    assert snapshot(cache)["tree"][0] == "1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"


def test_the_scheduler_driver_evicts_a_mamba_state_and_retries_the_requests_slot():
    """The same start with ``retry_mamba_alloc``: the load-back allocates the request's Mamba slot itself (the
    scheduler's way), evicting [3,4]'s state for it."""
    cache, drv = two_leaves(device_mamba=2)
    drv.retry_mamba_alloc = True
    rid = drv.start([1, 2, 9])
    assert request(drv, rid) == dict(rid="r2", tokens=[1, 2, 9], kv=[4, 5, 6], mamba=0, track=None, protected=2,
                                     last=node_at(cache, [1, 2]).id, tracked=None)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=0 hmr=0", "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=2, mamba_evictable=0, mamba_protected=1), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=["3,4", "1,2"], device_leaves=[], host_leaves=["3,4"])
    assert free_lists(cache)["device_mamba"] == []


def test_a_page_size_of_two_tracks_the_whole_pages_and_takes_a_second_mamba_slot():
    cache = make_cache("write_through", page_size=2)
    drv = Driver(cache)
    rid = drv.start([1, 2, 3])
    assert request(drv, rid) == dict(rid="r0", tokens=[1, 2, 3], kv=[0, 1, 2], mamba=0, track=1, protected=0,
                                     last=cache.root_node.id, tracked=2)
    drv.finish(rid)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"]
    assert free_lists(cache)["device_kv"] == [*range(3, 32), 2]
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7, 0]


def test_request_ids_count_only_started_requests_and_a_given_id_is_kept():
    cache = make_cache("write_through", device_mamba=1)
    drv = Driver(cache)
    assert drv.start([1], "chat") == "chat" and drv.nreq == 1
    with pytest.raises(Skip):
        drv.start([2])
    drv.finish("chat")
    cache.check_hicache_events()  # [1]'s write ack: it can be evicted for the next start's Mamba slot
    assert drv.start([3]) == "r1" and list(drv.live) == ["r1"]
