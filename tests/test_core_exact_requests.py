"""Exact outcomes of ``requests.py``: what ``cache_finished_req`` and ``cache_unfinished_req`` hand to the tree, free
and leave in the request, with and without the Mamba extra buffer (pages larger than 1). Written for the mutation
run (``benchmarks/mutation.py``): each test compares the request, the pools' free lists and the whole state.
"""
from __future__ import annotations

from helpers import free_lists, make_cache, snapshot

from simcache.driver import Driver
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
