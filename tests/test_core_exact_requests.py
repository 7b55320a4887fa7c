"""Exact outcomes of ``requests.py``: what ``cache_finished_req`` and ``cache_unfinished_req`` hand to the tree, free
and leave in the request, with and without the Mamba extra buffer (pages larger than 1). Written for the mutation
run (``benchmarks/mutation.py``): each test compares the request, the pools' free lists and the whole state.
"""
from __future__ import annotations

import pytest
from helpers import free_lists, make_cache, snapshot

from simcache.driver import Driver
from simcache.errors import CacheAssertion
from simcache.state import dfs


def fields(req):
    return dict(kv=req.kv, mamba_pool_idx=req.mamba_pool_idx, track_buffer=req.track_buffer,
                cache_protected_len=req.cache_protected_len, last_node=req.last_node.id,
                mamba_last_track_seqlen=req.mamba_last_track_seqlen, prefix_indices=req.prefix_indices)


def nodes(cache):
    return [(d, n.id, n.key, n.value, n.mamba_value, n.full_lock_ref, n.mamba_lock_ref) for d, n in dfs(cache)]


def started(cache, *tokens_before, tokens):
    drv = Driver(cache)
    for t in tokens_before:
        drv.finish(drv.start(list(t)))
    return drv, drv.live[drv.start(list(tokens))]


def test_finishing_with_the_extra_buffer_caches_the_tracked_pages_and_keeps_the_tracking_slot():
    """Page size 2: 1,2,3,4,5 is tracked up to 4 tokens; token 5's slot and the working Mamba slot are freed, the
    tracking slot becomes the new node's Mamba state."""
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, tokens=[1, 2, 3, 4, 5])
    assert fields(req) == dict(kv=[0, 1, 2, 3, 4], mamba_pool_idx=0, track_buffer=1, cache_protected_len=0,
                               last_node=2, mamba_last_track_seqlen=4, prefix_indices=[])
    drv.finish(req.rid)
    assert nodes(cache) == [(1, 7, (1, 2, 3, 4), [0, 1, 2, 3], [1], 0, 0)]
    assert free_lists(cache)["device_kv"] == list(range(5, 32)) + [4]
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7, 0]
    assert (req.mamba_pool_idx, req.track_buffer) == (None, None)


def test_finishing_without_insert_frees_the_requests_own_slots_and_unlocks_its_prefix():
    cache = make_cache("write_back")
    drv, req = started(cache, [1, 2], tokens=[1, 2, 3])
    assert fields(req) == dict(kv=[0, 1, 2], mamba_pool_idx=1, track_buffer=None, cache_protected_len=2,
                               last_node=7, mamba_last_track_seqlen=None, prefix_indices=[])
    cache.cache_finished_req(req, is_insert=False)
    assert req.mamba_pool_idx is None
    assert free_lists(cache)["device_kv"] == list(range(3, 32)) + [2]
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7, 1]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=0, mamba_evictable=1, mamba_protected=0), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=[], device_leaves=["1,2"], host_leaves=[])


def test_caching_an_unfinished_request_inserts_a_forked_state_and_moves_its_lock_to_the_new_node():
    cache = make_cache("write_back")
    drv, req = started(cache, [1, 2], tokens=[1, 2, 3, 4])
    cache.cache_unfinished_req(req)
    assert fields(req) == dict(kv=[0, 1, 2, 3], mamba_pool_idx=1, track_buffer=None, cache_protected_len=4,
                               last_node=8, mamba_last_track_seqlen=None, prefix_indices=[0, 1, 2, 3])
    assert nodes(cache) == [(1, 7, (1, 2), [0, 1], [0], 1, 0), (2, 8, (3, 4), [2, 3], [2], 1, 1)]
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7]
    assert cache.sizes() == dict(full_evictable=0, full_protected=4, mamba_evictable=1, mamba_protected=1)


def test_finishing_a_request_whose_tracked_prefix_is_cached_frees_its_tail_and_both_mamba_slots():
    """Page size 2, [1,2,3,4] cached: 1,2,3,4,5 matched 4 tokens, tracked 4; token 5's slot goes back, and the
    Mamba state already exists, so the working and the tracking slot both go back too."""
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, [1, 2, 3, 4], tokens=[1, 2, 3, 4, 5])
    assert fields(req) == dict(kv=[0, 1, 2, 3, 4], mamba_pool_idx=2, track_buffer=3, cache_protected_len=4,
                               last_node=7, mamba_last_track_seqlen=4, prefix_indices=[])
    drv.finish(req.rid)
    assert (req.mamba_pool_idx, req.track_buffer) == (None, None)
    assert free_lists(cache)["device_kv"] == list(range(5, 32)) + [4]
    assert free_lists(cache)["device_mamba"] == [4, 5, 6, 7, 0, 2, 3]
    assert nodes(cache) == [(1, 7, (1, 2, 3, 4), [0, 1, 2, 3], [1], 0, 0)]


def test_finishing_with_nothing_tracked_caches_nothing_and_frees_what_the_request_owns():
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, [1, 2, 3, 4], tokens=[1, 2, 3, 4, 5])
    req.mamba_last_track_seqlen = None  # as a request looks before its first tracked page
    cache.cache_finished_req(req)
    assert (req.mamba_pool_idx, req.track_buffer) == (None, None)
    assert free_lists(cache)["device_kv"] == list(range(5, 32)) + [4]
    assert free_lists(cache)["device_mamba"] == [4, 5, 6, 7, 0, 2, 3]
    assert nodes(cache) == [(1, 7, (1, 2, 3, 4), [0, 1, 2, 3], [1], 0, 0)]
    assert cache.sizes() == dict(full_evictable=4, full_protected=0, mamba_evictable=1, mamba_protected=0)


def test_finishing_frees_from_the_matched_prefix_when_it_is_longer_than_the_tracked_part():
    """Tracked 2 tokens but 4 matched (protected): only the slots past the protected 4 are the request's to free.
    Inserting 1,2 splits [1,2,3,4]; the new tombstone prefix [1,2] takes the tracking slot as its Mamba state."""
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, [1, 2, 3, 4], tokens=[1, 2, 3, 4, 5, 6])
    assert fields(req)["kv"] == [0, 1, 2, 3, 4, 5]
    req.mamba_last_track_seqlen = 2
    cache.cache_finished_req(req)
    assert free_lists(cache)["device_kv"] == list(range(6, 32)) + [4, 5]
    assert free_lists(cache)["device_mamba"] == [4, 5, 6, 7, 0, 2]
    assert nodes(cache) == [(1, 8, (1, 2), [0, 1], [3], 0, 0), (2, 7, (3, 4), [2, 3], [1], 0, 0)]


def test_finishing_a_tracked_length_off_the_page_grid_asserts_with_sglangs_message():
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, tokens=[1, 2, 3, 4, 5])
    req.mamba_last_track_seqlen = 3
    with pytest.raises(CacheAssertion) as raised:
        cache.cache_finished_req(req)
    assert str(raised.value) == "It is required cache_len=3, page_aligned_len=2"


def test_freeing_a_requests_mamba_slot_twice_asserts_and_the_tracking_slot_stays_when_kept():
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, tokens=[1, 2, 3, 4])
    cache._free_mamba_cache(req, keep_track=True)
    assert (req.mamba_pool_idx, req.track_buffer) == (None, None)
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7, 0]  # slot 1 (tracking) is still taken
    with pytest.raises(CacheAssertion) as raised:
        cache._free_mamba_cache(req, keep_track=False)
    assert str(raised.value) == "double free? mamba_index is None"
    plain = make_cache("write_back")
    drv, req = started(plain, tokens=[1, 2])
    req.track_buffer = 5  # without the extra buffer the field is never looked at
    plain._free_mamba_cache(req, keep_track=False)
    assert (req.mamba_pool_idx, req.track_buffer, free_lists(plain)["device_mamba"]) == (None, 5, [1, 2, 3, 4, 5, 6,
                                                                                                 7, 0])


def test_caching_an_unfinished_request_with_nothing_tracked_only_records_its_slots():
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, tokens=[1, 2, 3])
    req.mamba_last_track_seqlen = None
    before = (snapshot(cache), free_lists(cache))
    cache.cache_unfinished_req(req)
    assert fields(req) == dict(kv=[0, 1, 2], mamba_pool_idx=0, track_buffer=1, cache_protected_len=0, last_node=2,
                               mamba_last_track_seqlen=None, prefix_indices=[0, 1, 2])
    assert (snapshot(cache), free_lists(cache)) == before


def test_caching_an_unfinished_request_forks_the_tracking_slot_with_the_extra_buffer():
    """Page size 2, [1,2] cached: 1,2,3,4,5 is tracked up to 4. The node [3,4] gets a fresh slot holding a copy of
    the tracking slot's state (not the working one's), and the request's lock moves to it."""
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, [1, 2], tokens=[1, 2, 3, 4, 5])
    assert (req.mamba_pool_idx, req.track_buffer, req.mamba_last_track_seqlen) == (2, 3, 4)
    cache.cache_unfinished_req(req)
    assert fields(req) == dict(kv=[0, 1, 2, 3, 4], mamba_pool_idx=2, track_buffer=3, cache_protected_len=4,
                               last_node=8, mamba_last_track_seqlen=None, prefix_indices=[0, 1, 2, 3, 4])
    assert nodes(cache) == [(1, 7, (1, 2), [0, 1], [1], 1, 0), (2, 8, (3, 4), [2, 3], [4], 1, 1)]
    pool = cache.pools.device_mamba
    assert pool.read([4]) == pool.read([3]) != pool.read([2])
    assert free_lists(cache)["device_mamba"] == [5, 6, 7, 0]


def test_caching_an_unfinished_request_already_cached_frees_the_fork_and_keeps_the_lock_in_place():
    cache = make_cache("write_back")
    drv, req = started(cache, [1, 2, 3], tokens=[1, 2, 3])
    cache.cache_unfinished_req(req)
    assert fields(req) == dict(kv=[0, 1, 2], mamba_pool_idx=1, track_buffer=None, cache_protected_len=3,
                               last_node=7, mamba_last_track_seqlen=None, prefix_indices=[0, 1, 2])
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 2]
    assert nodes(cache) == [(1, 7, (1, 2, 3), [0, 1, 2], [0], 1, 1)]


def test_caching_an_unfinished_request_with_no_free_mamba_slot_evicts_one_state_first():
    """Three device Mamba slots, all taken ([1,2], [3,4], the request's): one state is evicted ([3,4], the least
    recent, written back to the host) and its slot holds the fork."""
    cache = make_cache("write_back", device_mamba=3)
    drv, req = started(cache, [1, 2], [3, 4], tokens=[1, 2, 5])
    assert free_lists(cache)["device_mamba"] == []
    cache.cache_unfinished_req(req)
    assert fields(req) == dict(kv=[0, 1, 4], mamba_pool_idx=2, track_buffer=None, cache_protected_len=3,
                               last_node=9, mamba_last_track_seqlen=None, prefix_indices=[0, 1, 4])
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=1 mh=0 fl=1 ml=0 hr=0 hmr=0", "2 5 v=1 h=0 m=1 mh=0 fl=1 ml=1 hr=0 hmr=0",
              "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=3, mamba_evictable=1, mamba_protected=1),
        full_lru=["1,2/5", "1,2"], mamba_lru=["1,2/5", "1,2"], host_mamba_lru=["3,4"], device_leaves=[],
        host_leaves=["3,4"])
    assert free_lists(cache)["device_mamba"] == []


def test_caching_an_unfinished_request_with_no_mamba_slot_to_win_asserts_with_sglangs_message():
    cache = make_cache("write_back", device_mamba=1)
    drv, req = started(cache, tokens=[1, 2])
    with pytest.raises(CacheAssertion) as raised:
        cache.cache_unfinished_req(req)
    assert str(raised.value) == "Can not alloc mamba cache"


def test_caching_an_unfinished_request_off_the_page_grid_asserts_with_sglangs_message():
    cache = make_cache("write_back", page_size=2)
    drv, req = started(cache, tokens=[1, 2, 3, 4, 5])
    req.mamba_last_track_seqlen = 3
    with pytest.raises(CacheAssertion) as raised:
        cache.cache_unfinished_req(req)
    assert str(raised.value) == ("page_aligned_len != len(kv_indices), page_aligned_len=2, len(kv_indices)=3, "
                                 "cache_len=3, self.page_size=2")


def test_a_full_mamba_pool_costs_exactly_one_mamba_state_the_least_recent_even_an_internal_ones():
    """Three slots: [1,2] (internal), [1,2,3] and the request 5,6. Caching 5,6 needs a fourth: [1,2]'s state is
    the least recent and goes alone (no KV is evicted, [3] keeps its state); the fork copies the request's."""
    cache = make_cache("write_back", device_mamba=3)
    drv, req = started(cache, [1, 2], [1, 2, 3], tokens=[5, 6])
    working = cache.pools.device_mamba.read([req.mamba_pool_idx])
    cache.cache_unfinished_req(req)
    assert fields(req) == dict(kv=[3, 4], mamba_pool_idx=2, track_buffer=None, cache_protected_len=2, last_node=9,
                               mamba_last_track_seqlen=None, prefix_indices=[3, 4])
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "1 5,6 v=1 h=0 m=1 mh=0 fl=1 ml=1 hr=0 hmr=0"],
        sizes=dict(full_evictable=3, full_protected=2, mamba_evictable=1, mamba_protected=1),
        full_lru=["5,6", "1,2/3", "1,2"], mamba_lru=["5,6", "1,2/3"], host_mamba_lru=[], device_leaves=["1,2/3"],
        host_leaves=[])
    assert nodes(cache)[2][4] == [0] and cache.pools.device_mamba.read([0]) == working
    assert free_lists(cache)["device_kv"] == list(range(5, 32))


def test_caching_an_unfinished_request_with_a_free_slot_evicts_nothing_and_forks_the_working_state():
    cache = make_cache("write_back")
    drv, req = started(cache, [7, 8], [1, 2], tokens=[1, 2, 3, 4])
    working = cache.pools.device_mamba.read([req.mamba_pool_idx])
    cache.cache_unfinished_req(req)
    assert [n[2:5] for n in nodes(cache)] == [((1, 2), [2, 3], [1]), ((3, 4), [4, 5], [3]),
                                              ((7, 8), [0, 1], [0])]
    assert cache.pools.device_mamba.read([3]) == working
    assert free_lists(cache)["device_kv"] == list(range(6, 32))  # none of the tree's slots freed


def test_caching_an_unfinished_request_passes_its_matched_prefix_so_the_trees_slots_stay_taken():
    cache = make_cache("write_back")
    drv, req = started(cache, [1, 2], tokens=[1, 2, 3, 4])
    cache.cache_unfinished_req(req)
    assert free_lists(cache)["device_kv"] == list(range(4, 32))
    assert cache.pools.device_kv.double_frees == []


@pytest.mark.parametrize("chunked, hits", [(None, 2), (True, 1)])
def test_an_unfinished_request_is_not_chunked_unless_told_so(chunked, hits):
    """Under the follow-up fix ``chunked`` reaches insert, where a chunked insert counts no hit."""
    from simcache.versions import preset
    cache = make_cache("write_through", flags=preset("followup_fix"), write_through_threshold=3)
    drv, req = started(cache, [1, 2], tokens=[1, 2, 3, 4])
    if chunked is None:
        cache.cache_unfinished_req(req)
    else:
        cache.cache_unfinished_req(req, chunked=chunked)
    assert cache.root_node.children[1].hit_count == hits


def test_a_protected_length_past_the_last_page_of_the_new_prefix_asserts():
    """Page size 1: 2 matched tokens allow a protected length of at most 2 + 1 - 1."""
    cache = make_cache("write_back")
    drv, req = started(cache, tokens=[1, 2])
    req.cache_protected_len = 3
    with pytest.raises(CacheAssertion) as raised:
        cache.cache_unfinished_req(req)
    assert str(raised.value) == ("req.cache_protected_len=3, len(new_indices)=2, len(page_aligned_token_ids)=2, "
                                 "mamba_exist=False")


def test_a_fork_without_a_source_hands_out_a_fresh_slot_and_copies_nothing():
    cache = make_cache("write_back")
    assert cache._fork_mamba(None) == [0]
    assert cache.pools.device_mamba.read([0]) == [0] and free_lists(cache)["device_mamba"] == list(range(1, 8))
    cache.pools.device_mamba.alloc(7)
    assert cache._fork_mamba(3) is None  # a full pool: no slot, nothing read or written
