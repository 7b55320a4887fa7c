"""Exact outcomes of the host tier's protocol (``hicache.py``) where the mutation run found no test looking:
loading back (thresholds, the memory quota, a load that must evict first or cannot happen at all, the Mamba state
restored with it and the request's own Mamba slot), ``init_load_back``'s walk up when a load is declined, the order
acks are consumed in, and the write-through hit count.

Each test builds a small settled cache with the public ``Driver``, calls one SGLang method, and compares what it
returned, the whole state (``helpers.snapshot``) and the pools' free lists.
"""
from __future__ import annotations

import pytest
from helpers import acked, finished, free_lists, make_cache, node_at, snapshot

from simcache.driver import Driver
from simcache.requests import Request


def settled(*requests, policy="write_through", **config):
    """A cache after ``requests`` finished, every write acknowledged."""
    cache = make_cache(policy, **config)
    finished(cache, *requests)
    acked(cache)
    return cache


MID_TREE = ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
            "3 4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0", "3 5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def mid(*extra, **config):
    """[1,2] on the device; under it [3] (no Mamba state on either tier, as a split leaves it) with children [4] and
    [5]: those three host-only, each leaf with its host Mamba state."""
    cache = settled([1, 2], [1, 2, 3, 4], [1, 2, 3, 5], *extra, **config)
    assert cache.evict(3) == (3, 2)
    assert snapshot(cache)["tree"][:4] == MID_TREE
    return cache


def state(cache):
    return snapshot(cache), free_lists(cache)


# --- load_back -------------------------------------------------------------------------------------------------

LOADED_3 = dict(
    tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=0 hr=0 hmr=0", "2 3 v=1 h=1 m=0 mh=0 fl=1 ml=0 hr=0 hmr=0",
          "3 4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0", "3 5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
    sizes=dict(full_evictable=0, full_protected=3, mamba_evictable=1, mamba_protected=0),
    full_lru=["1,2/3", "1,2"], mamba_lru=["1,2"], host_mamba_lru=["1,2/3/5", "1,2/3/4", "1,2"], device_leaves=[],
    host_leaves=["1,2/3/4", "1,2/3/5"])


@pytest.mark.parametrize("threshold, loads", [(1, True), (2, False)])
def test_load_back_of_a_path_without_a_mamba_state_to_restore_respects_the_threshold(threshold, loads):
    """[3] holds 1 host token and nothing to restore: it loads only when the threshold allows 1 token. A declined
    load changes nothing (the ancestor it locked while deciding is unlocked again)."""
    cache = mid(load_back_threshold=threshold)
    before = state(cache)
    node = node_at(cache, [1, 2], [3])
    got = cache.load_back(node)
    if not loads:
        assert got is None and state(cache) == before and cache.ongoing_load_back == {}
        return
    assert got == [6] and node.value == [6]
    assert snapshot(cache) == LOADED_3
    assert free_lists(cache)["device_kv"] == before[1]["device_kv"][1:]
    assert cache.ongoing_load_back == {node.id: node}
    assert [(a.node_ids, a.done) for a in cache.controller.ack_load_queue] == [([node.id], True)]


@pytest.mark.parametrize("quota, loads", [(None, True), (3, True), (2, False), (0, False)])
def test_load_back_counts_the_quota_with_what_locking_the_ancestor_takes_off_the_evictable_size(quota, loads):
    """[3]'s 1 token against ``mem_quota``: locking [1,2] moves its 2 tokens off the evictable side (delta -2), so
    a quota of 3 is just enough (1 <= 3 - 2) and 2 is not."""
    cache = mid(load_back_threshold=1)
    before = state(cache)
    got = cache.load_back(node_at(cache, [1, 2], [3]), quota)
    if loads:
        assert got == [6] and snapshot(cache) == LOADED_3
    else:
        assert got is None and state(cache) == before


def test_load_back_of_two_host_only_nodes_splits_the_slots_and_restores_the_leafs_mamba_state():
    """[4] under [3]: both loaded (2 tokens, each node its own slot, in path order), and [4]'s host Mamba state
    restored to a device slot even below the default threshold of 10 (a restore always loads). Both stay locked
    until the load's ack; consuming it unlocks them."""
    cache = mid()
    leaf = node_at(cache, [1, 2], [3], [4])
    before = free_lists(cache)
    assert cache.load_back(leaf) == [6, 7]
    assert (leaf.parent.value, leaf.value, leaf.mamba_value) == ([6], [7], [3])
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=0 hr=0 hmr=0", "2 3 v=1 h=1 m=0 mh=0 fl=1 ml=0 hr=0 hmr=0",
              "3 4 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0", "3 5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=4, mamba_evictable=1, mamba_protected=1),
        full_lru=["1,2/3/4", "1,2/3", "1,2"], mamba_lru=["1,2/3/4", "1,2"],
        host_mamba_lru=["1,2/3/5", "1,2/3/4", "1,2"], device_leaves=[], host_leaves=["1,2/3/5"])
    assert free_lists(cache)["device_kv"] == before["device_kv"][2:]
    assert free_lists(cache)["device_mamba"] == [s for s in before["device_mamba"] if s != 3]
    assert cache.ongoing_load_back == {leaf.id: leaf}
    cache.check_hicache_events()
    assert cache.ongoing_load_back == {} and cache.controller.ack_load_queue == []
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "3 4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "3 5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=4, full_protected=0, mamba_evictable=2, mamba_protected=0),
        full_lru=["1,2/3/4", "1,2/3", "1,2"], mamba_lru=["1,2/3/4", "1,2"],
        host_mamba_lru=["1,2/3/5", "1,2/3/4", "1,2"], device_leaves=["1,2/3/4"], host_leaves=["1,2/3/5"])


def test_load_back_without_room_evicts_what_it_needs_while_the_ancestor_is_locked_then_loads():
    """One device KV slot free, two needed: the load evicts [8,9] (not [1,2], locked as the ancestor meanwhile) and
    loads into the freed slots."""
    cache = mid([8, 9])
    held = cache.pools.device_kv.alloc(cache.pools.device_kv.available_size() - 1)
    assert free_lists(cache)["device_kv"] == [2] and len(held) == 27
    leaf = node_at(cache, [1, 2], [3], [4])
    assert cache.load_back(leaf) == [2, 6]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=0 hr=0 hmr=0", "2 3 v=1 h=1 m=0 mh=0 fl=1 ml=0 hr=0 hmr=0",
              "3 4 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0", "3 5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "1 8,9 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=4, mamba_evictable=1, mamba_protected=1),
        full_lru=["1,2/3/4", "1,2/3", "1,2"], mamba_lru=["1,2/3/4", "1,2"],
        host_mamba_lru=["8,9", "1,2/3/5", "1,2/3/4", "1,2"], device_leaves=[], host_leaves=["1,2/3/5", "8,9"])
    assert free_lists(cache)["device_kv"] == [7]
    assert free_lists(cache)["device_mamba"] == [5, 6, 7, 1, 2, 3]


def test_load_back_that_finds_no_room_even_after_evicting_changes_nothing():
    cache = mid()
    cache.pools.device_kv.alloc(cache.pools.device_kv.available_size() - 1)
    before = state(cache)
    assert cache.load_back(node_at(cache, [1, 2], [3], [4])) is None
    assert state(cache) == before
    assert cache.ongoing_load_back == {} and cache.controller.ack_load_queue == []


# --- init_load_back ------------------------------------------------------------------------------------------

def test_init_load_back_of_a_device_node_with_its_mamba_state_loads_nothing():
    cache = mid()
    before = state(cache)
    top = node_at(cache, [1, 2])
    assert cache.init_load_back(top) == ([], top)
    assert state(cache) == before


def test_init_load_back_returns_the_loaded_slots_and_the_node_itself():
    cache = mid()
    leaf = node_at(cache, [1, 2], [3], [4])
    assert cache.init_load_back(leaf) == ([6, 7], leaf)


@pytest.mark.parametrize("path, why", [(([1, 2], [3]), "below the threshold"), (([1, 2], [3], [4]), "no room")])
def test_a_declined_load_walks_up_to_the_first_node_with_device_kv_and_mamba_state(path, why):
    """[3] has no Mamba state and [4] no device KV, so both walks end at [1,2]."""
    cache = mid(load_back_threshold=5)
    if why == "no room":
        cache.pools.device_kv.alloc(cache.pools.device_kv.available_size() - 1)
    before = state(cache)
    assert cache.init_load_back(node_at(cache, *path)) == ([], node_at(cache, [1, 2]))
    assert state(cache) == before


def test_a_declined_load_with_nothing_on_the_device_walks_up_to_the_root():
    cache = mid(load_back_threshold=5)
    cache.evict(2)
    assert snapshot(cache)["tree"][0] == "1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"
    before = state(cache)
    assert cache.init_load_back(node_at(cache, [1, 2], [3])) == ([], cache.root_node)
    assert state(cache) == before


def internal_without_mamba():
    """[1,2] with child [3], both on the device; [1,2]'s Mamba state evicted (a tombstone), its host copy kept."""
    cache = settled([1, 2], [1, 2, 3])
    assert cache.evict_mamba(1) == 1
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7, 0]
    return cache, node_at(cache, [1, 2])


RESTORED_TOP = dict(
    tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0", "2 3 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"],
    sizes=dict(full_evictable=1, full_protected=2, mamba_evictable=1, mamba_protected=1),
    full_lru=["1,2/3", "1,2"], mamba_lru=["1,2", "1,2/3"], host_mamba_lru=["1,2/3", "1,2"],
    device_leaves=["1,2/3"], host_leaves=[])


@pytest.mark.parametrize("with_request", [False, True])
def test_init_load_back_restores_only_the_mamba_state_of_a_device_node_and_the_requests_slot(with_request):
    """[1,2] has its device KV but only a host Mamba state: the load moves no KV (an empty device list, which is
    still a load), restores the Mamba state, and with a request (the scheduler driver) first allocates the
    request's own Mamba slot and copies the host state into it too."""
    cache, top = internal_without_mamba()
    req = Request(rid="x", tokens=[1, 2, 9]) if with_request else None
    assert cache.init_load_back(top, None, req) == ([], top)
    assert snapshot(cache) == RESTORED_TOP
    if with_request:
        assert (req.mamba_pool_idx, top.mamba_value) == (2, [3])
        assert free_lists(cache)["device_mamba"] == [4, 5, 6, 7, 0]
    else:
        assert top.mamba_value == [2] and free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 0]
    assert free_lists(cache)["device_kv"] == list(range(3, 32))
    assert [(a.node_ids, a.done) for a in cache.controller.ack_load_queue] == [([top.id], True)]
    assert cache.ongoing_load_back == {top.id: top}


def test_a_request_that_already_has_its_mamba_slot_keeps_it():
    cache, top = internal_without_mamba()
    req = Request(rid="x", tokens=[1, 2, 9], mamba_pool_idx=6)
    assert cache.init_load_back(top, None, req) == ([], top)
    assert (req.mamba_pool_idx, top.mamba_value) == (6, [2])
    assert snapshot(cache) == RESTORED_TOP
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 0]


def test_the_requests_mamba_slot_comes_from_evicting_a_mamba_state_while_the_node_is_locked():
    """No device Mamba slot free: allocating the request's slot evicts the least recent unlocked Mamba state (the
    leaf [3], whole: it has a host copy), never [1,2], locked meanwhile."""
    cache, top = internal_without_mamba()
    cache.pools.device_mamba.alloc(7)
    req = Request(rid="x", tokens=[1, 2, 9])
    got = cache.init_load_back(top, None, req)
    assert req.mamba_pool_idx == 1
    # the restore itself then finds no slot: nothing was loaded, and the walk ends at the root ([1,2] lacks Mamba)
    assert got == ([], cache.root_node)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_the_requests_mamba_slot_that_cannot_be_found_raises_sglangs_error():
    cache, top = internal_without_mamba()
    cache.pools.device_mamba.alloc(7)
    top.children[cache.child_key((3,))].mamba_lock_ref = 1  # nothing evictable either
    with pytest.raises(RuntimeError, match="^Cannot alloc request mamba cache for host load back$"):
        cache.init_load_back(top, None, Request(rid="x", tokens=[1, 2, 9]))
    # the lock around the eviction was released; the one load_back took on the ancestor stays (the error leaves
    # load_back before it unlocks, as SGLang's does)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=1 fl=1 ml=0 hr=0 hmr=0",
                                       "2 3 v=1 h=1 m=1 mh=1 fl=0 ml=1 hr=0 hmr=0"]


# --- acks ------------------------------------------------------------------------------------------------------

def three_writes():
    """Three write-throughs in flight, none of them complete (``auto_complete=False``)."""
    cache = make_cache("write_through", auto_complete=False)
    drv = Driver(cache)
    for tokens in ([1, 2], [3, 4], [5, 6]):
        drv.finish(drv.start(tokens))
    assert list(cache.ongoing_write_through) == [7, 8, 9]
    assert [(a.node_ids, a.done) for a in cache.controller.ack_write_queue] == [([7], False), ([8], False),
                                                                                ([9], False)]
    return cache


def test_writing_check_consumes_acks_in_order_and_stops_at_the_first_incomplete_one():
    cache = three_writes()
    cache.controller.ack_write_queue[1].done = True  # the second completed before the first
    cache.writing_check()
    assert list(cache.ongoing_write_through) == [7, 8, 9]
    cache.controller.ack_write_queue[0].done = True
    cache.writing_check()
    assert list(cache.ongoing_write_through) == [9]
    assert [(a.node_ids, a.done) for a in cache.controller.ack_write_queue] == [([9], False)]
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5,6 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"]


def test_a_blocking_writing_check_consumes_every_ack_complete_or_not_without_unlocking():
    """``write_back=True`` (the blocking wait) marks every ack done and empties the queue; it releases no lock (a
    write-back takes none)."""
    cache = three_writes()
    acks = list(cache.controller.ack_write_queue)
    cache.writing_check(write_back=True)
    assert cache.ongoing_write_through == {} and cache.controller.ack_write_queue == []
    assert [a.done for a in acks] == [True, True, True]
    assert [line.split()[-4] for line in snapshot(cache)["tree"]] == ["fl=1", "fl=1", "fl=1"]


def test_a_blocking_writing_check_starts_each_nodes_l3_backup_when_storage_is_on():
    cache = make_cache("write_back", storage=True)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    node = node_at(cache, [1, 2])
    assert cache.write_backup(node, write_back=True) == 2
    cache.writing_check(write_back=True)
    assert list(cache.ongoing_backup) == [1] and cache.ongoing_backup[1][0] is node
    assert list(cache.controller.pending_backups) == [1]
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]


def three_loads():
    """Three host-only leaves loaded back, none of the loads complete."""
    cache = settled([1, 2], [3, 4], [5, 6], load_back_threshold=1, auto_complete=False)
    cache.evict(32)
    leaves = [node_at(cache, k) for k in ([1, 2], [3, 4], [5, 6])]
    for leaf in leaves:
        assert cache.load_back(leaf) is not None
    assert [(a.node_ids, a.done) for a in cache.controller.ack_load_queue] == [([7], False), ([8], False),
                                                                               ([9], False)]
    return cache, leaves


def test_loading_check_consumes_acks_in_order_and_stops_at_the_first_incomplete_one():
    cache, leaves = three_loads()
    cache.controller.ack_load_queue[1].done = True
    cache.loading_check()
    assert list(cache.ongoing_load_back) == [7, 8, 9]
    cache.controller.ack_load_queue[0].done = True
    cache.loading_check()
    assert list(cache.ongoing_load_back) == [9]
    assert [(a.node_ids, a.done) for a in cache.controller.ack_load_queue] == [([9], False)]
    assert [n.full_lock_ref for n in leaves] == [0, 0, 1]


# --- write-through ---------------------------------------------------------------------------------------------

def test_selective_write_through_copies_a_node_on_its_second_hit_only():
    cache = make_cache("write_through_selective", auto_complete=False)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    top = node_at(cache, [1, 2])
    assert top.hit_count == 1 and cache.controller.ack_write_queue == []
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"]
    drv.finish(drv.start([1, 2, 3]))
    assert (top.hit_count, node_at(cache, [1, 2], [3]).hit_count) == (2, 1)
    assert list(cache.ongoing_write_through) == [top.id]
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0",
                                       "2 3 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"]
    drv.finish(drv.start([1, 2, 3]))  # a third hit on [1,2]: already on the host, not written again
    assert (top.hit_count, node_at(cache, [1, 2], [3]).hit_count) == (3, 2)
    assert list(cache.ongoing_write_through) == [top.id, top.id + 1]


@pytest.mark.parametrize("policy, chunked", [("write_back", False), ("write_through", True)])
def test_a_write_back_cache_or_a_chunked_insert_counts_no_hit(policy, chunked):
    cache = settled([1, 2], policy=policy, write_through_threshold=5)
    node = node_at(cache, [1, 2])
    hits = node.hit_count
    for _ in range(6):
        cache._inc_hit_count(node, chunked=chunked)
    assert node.hit_count == hits and node.host_value is None


# --- host refs -------------------------------------------------------------------------------------------------

def two_host_leaves():
    cache = settled([1, 2], [4, 5])
    cache.evict(32)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0", "1 4,5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0), full_lru=[],
        mamba_lru=[], host_mamba_lru=["4,5", "1,2"], device_leaves=[], host_leaves=["1,2", "4,5"])
    return cache, node_at(cache, [1, 2])


def host_view(cache):
    s = snapshot(cache)
    return s["tree"][0].split()[-2:], s["host_mamba_lru"], s["host_leaves"]


def test_host_refs_keep_a_node_out_of_host_eviction_until_the_last_is_released():
    """Two references (KV and Mamba): the node leaves the host leaf set and the host Mamba LRU at the first, and
    comes back (at the MRU end) only when both counters reach 0."""
    cache, node = two_host_leaves()
    cache._protect_host_node(node)
    assert host_view(cache) == (["hr=1", "hmr=1"], ["4,5"], ["4,5"])
    cache._protect_host_node(node)
    cache._release_host_node(node)
    assert host_view(cache) == (["hr=1", "hmr=1"], ["4,5"], ["4,5"])
    cache._release_host_node(node)
    assert host_view(cache) == (["hr=0", "hmr=0"], ["1,2", "4,5"], ["1,2", "4,5"])


def test_a_host_ref_without_the_mamba_state_leaves_the_host_mamba_lru_alone():
    cache, node = two_host_leaves()
    cache._protect_host_node(node, protect_mamba=False)
    assert host_view(cache) == (["hr=1", "hmr=0"], ["4,5", "1,2"], ["4,5"])
    cache._release_host_node(node, release_mamba=False)
    assert host_view(cache) == (["hr=0", "hmr=0"], ["4,5", "1,2"], ["1,2", "4,5"])


def test_a_node_whose_kv_refs_are_released_stays_protected_while_its_mamba_ref_is_held():
    cache, node = two_host_leaves()
    cache._protect_host_node(node)
    cache._protect_host_node(node, protect_mamba=False)
    cache._release_host_node(node, release_mamba=False)
    cache._release_host_node(node, release_mamba=False)
    assert host_view(cache) == (["hr=0", "hmr=1"], ["4,5"], ["4,5"])


def test_the_recorder_hears_each_backup_ack_and_host_ref_change_of_the_node_it_concerns():
    from simcache.trace import Recorder
    cache = make_cache("write_through", load_back_threshold=1)
    drv = Driver(cache)
    rec = Recorder(snapshots=False, invariants=False).attach(cache, drv)
    drv.finish(drv.start([1, 2]))
    cache.check_hicache_events()
    node = node_at(cache, [1, 2])
    cache.evict(2)
    cache._protect_host_node(node, protect_mamba=False)
    cache._release_host_node(node, release_mamba=False)
    cache._protect_host_node(node)
    cache._release_host_node(node)
    cache.load_back(node)
    cache.check_hicache_events()
    assert [(s.kind, s.node, s.text, s.detail) for s in rec.steps
            if s.kind in ("host_ref", "backup", "write_ack", "load_ack")] == [
        ("backup", 7, "[1,2]#7 backed up to host [0, 1]", dict(host=[0, 1])),
        ("write_ack", 7, "write ack for [1,2]#7", {}),
        ("host_ref", 7, "host refs of [1,2]#7: host_ref=1 host_mamba_ref=0", dict(host_ref=1, host_mamba_ref=0)),
        ("host_ref", 7, "host refs of [1,2]#7: host_ref=0 host_mamba_ref=0", dict(host_ref=0, host_mamba_ref=0)),
        ("host_ref", 7, "host refs of [1,2]#7: host_ref=1 host_mamba_ref=1", dict(host_ref=1, host_mamba_ref=1)),
        ("host_ref", 7, "host refs of [1,2]#7: host_ref=0 host_mamba_ref=0", dict(host_ref=0, host_mamba_ref=0)),
        ("load_ack", 7, "load ack for [1,2]#7", {})]


# --- write_backup ----------------------------------------------------------------------------------------------

def test_a_write_with_the_host_full_evicts_a_host_leaf_and_retries_with_the_mamba_state_too():
    """Host KV full ([1,2] host-only, [3,4] on both tiers): writing [5,6] through evicts [1,2] from the host and
    the retry copies [5,6]'s KV and its Mamba state."""
    cache = settled([1, 2], [3, 4], host_kv=4)
    drv = Driver(cache)
    assert cache.evict(2) == (2, 1)
    assert free_lists(cache)["host_kv"] == [] and free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7]
    drv.finish(drv.start([5, 6]))
    assert snapshot(cache) == dict(
        tree=["1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "1 5,6 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=2, mamba_evictable=1, mamba_protected=1),
        full_lru=["5,6", "3,4"], mamba_lru=["5,6", "3,4"], host_mamba_lru=["5,6", "3,4"], device_leaves=["3,4"],
        host_leaves=[])
    assert (node_at(cache, [5, 6]).host_value, node_at(cache, [5, 6]).mamba_host_value) == ([0, 1], [2])
    assert free_lists(cache)["host_kv"] == [] and free_lists(cache)["host_mamba"] == [3, 4, 5, 6, 7, 0]


def test_a_write_that_finds_no_host_room_even_after_evicting_copies_nothing_and_returns_0():
    cache = settled([1, 2], [3, 4], host_kv=4)
    drv = Driver(cache)
    drv.finish(drv.start([5, 6]))  # its write-through found no room: [5,6] stays device-only
    node = node_at(cache, [5, 6])
    before = state(cache)
    assert before[0]["tree"][-1] == "1 5,6 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"
    assert cache.write_backup(node) == 0
    assert state(cache) == before and list(cache.ongoing_write_through) == []


def kv_dropped_from_host(mamba_on_device: bool):
    """[1,2] and [3,4] written through; [1,2]'s host KV then dropped by hand (its host Mamba state kept, at the LRU
    end of the host Mamba list), and with ``mamba_on_device=False`` its device Mamba state too. No operation
    sequence leaves a node so; SGLang's ``write_backup`` still handles it (it moves the host Mamba state to the MRU
    end and reuses its slot), and so must ours."""
    cache = settled([1, 2], [3, 4])
    node = node_at(cache, [1, 2])
    cache.pools.host_kv.free(node.host_value)
    node.host_value = None
    if not mamba_on_device:
        cache.mamba_lru_list.remove_node(node)
        cache.mamba_evictable_size_ -= 1
        cache.pools.device_mamba.free(node.mamba_value)
        node.mamba_value = None
    assert snapshot(cache)["host_mamba_lru"] == ["3,4", "1,2"]
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7]
    return cache, node


def test_a_write_of_a_node_that_kept_its_host_mamba_state_reuses_it_and_makes_it_most_recent():
    cache, node = kv_dropped_from_host(mamba_on_device=True)
    assert cache.write_backup(node) == 2
    assert (node.host_value, node.mamba_host_value) == ([4, 5], [0])
    assert snapshot(cache)["host_mamba_lru"] == ["1,2", "3,4"]
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7] and free_lists(cache)["host_kv"] == [6, 7, 0, 1]
    assert snapshot(cache)["tree"][0] == "1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"


def test_a_write_of_a_node_without_its_device_mamba_state_leaves_the_host_mamba_list_alone():
    cache, node = kv_dropped_from_host(mamba_on_device=False)
    assert cache.write_backup(node) == 2
    assert (node.host_value, node.mamba_host_value) == ([4, 5], [0])
    assert snapshot(cache)["host_mamba_lru"] == ["3,4", "1,2"]
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7]


def test_a_hit_counted_without_saying_chunked_counts_and_writes_through_at_the_threshold():
    """SGLang's default is ``chunked=False``: a plain call counts the hit."""
    cache = settled([1, 2], write_through_threshold=3)
    node = node_at(cache, [1, 2])
    assert (node.hit_count, node.host_value) == (1, None)
    cache._inc_hit_count(node)
    assert (node.hit_count, node.host_value) == (2, None)
    cache._inc_hit_count(node)
    assert (node.hit_count, node.host_value) == (3, [0, 1])


# --- load_back: what the rerun of the survivors asked for -----------------------------------------------------

def test_a_load_back_with_room_evicts_nothing_else():
    cache = mid([8, 9])
    assert cache.load_back(node_at(cache, [1, 2], [3], [4])) == [8, 9]
    assert snapshot(cache)["tree"][-1] == "1 8,9 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"


def test_a_load_back_of_three_host_only_nodes_gives_each_its_own_slots_in_path_order():
    cache = mid()
    assert cache.evict(2) == (2, 1)  # [1,2] too: the whole path is on the host
    leaf = node_at(cache, [1, 2], [3], [4])
    assert cache.load_back(leaf) == [6, 7, 8, 9]
    assert [n.value for n in (leaf.parent.parent, leaf.parent, leaf)] == [[6, 7], [8], [9]]
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=1 fl=1 ml=0 hr=0 hmr=0",
                                       "2 3 v=1 h=1 m=0 mh=0 fl=1 ml=0 hr=0 hmr=0",
                                       "3 4 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0",
                                       "3 5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_a_load_back_that_evicts_first_still_fills_the_requests_mamba_slot_and_acks_the_node():
    """The retry after the eviction rebuilds the Mamba transfers with the request: its slot gets the restored
    state's data as well, and the load's ack names [4] (consuming it unlocks the path)."""
    from simcache.pools import mamba_fingerprint
    cache = mid([8, 9])
    cache.pools.device_kv.alloc(cache.pools.device_kv.available_size() - 1)
    leaf = node_at(cache, [1, 2], [3], [4])
    req = Request(rid="x", tokens=[1, 2, 3, 4, 9])
    assert cache.load_back(leaf, req=req) == [2, 6]
    assert (req.mamba_pool_idx, leaf.mamba_value) == (4, [5])
    assert cache.pools.device_mamba.read([4, 5]) == [mamba_fingerprint([1, 2, 3, 4])] * 2
    assert [(a.node_ids, a.done) for a in cache.controller.ack_load_queue] == [([leaf.id], True)]
    cache.check_hicache_events()
    assert cache.ongoing_load_back == {}
    assert snapshot(cache)["tree"][:3] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                           "2 3 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                           "3 4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


@pytest.mark.parametrize("quota, loads", [(2, False), (3, True)])
def test_init_load_back_passes_the_quota_on(quota, loads):
    cache = mid(load_back_threshold=1)
    node = node_at(cache, [1, 2], [3])
    assert cache.init_load_back(node, quota) == (([6], node) if loads else ([], node_at(cache, [1, 2])))


def test_the_recorder_hears_the_write_acks_a_blocking_writing_check_consumes():
    from simcache.trace import Recorder
    cache = make_cache("write_back")
    drv = Driver(cache)
    rec = Recorder(snapshots=False, invariants=False).attach(cache, drv)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([3, 4]))
    for keys in ([1, 2], [3, 4]):
        cache.write_backup(node_at(cache, keys), write_back=True)
    cache.writing_check(write_back=True)
    assert [(s.kind, s.node, s.text) for s in rec.steps if s.kind == "write_ack"] == [
        ("write_ack", 7, "write ack for [1,2]#7"), ("write_ack", 8, "write ack for [3,4]#8")]
