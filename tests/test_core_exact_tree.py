"""Exact outcomes of ``tree.py``: what a match returns and touches (host hits, access times, the kept-heap switch),
inserts over cached, evicted and tombstone paths, splits of device and of evicted nodes (host copies, locks, L3
hashes), and un-evicting. Written for the mutation run (``benchmarks/mutation.py``): each test compares the whole
result and state, so a changed constant, comparison or argument shows.
"""
from __future__ import annotations

import dataclasses

import pytest
from helpers import acked, finished, free_lists, make_cache, node_at, snapshot

from simcache.errors import CacheAssertion
from simcache.keys import page_hashes
from simcache.node import TreeNode
from simcache.state import dfs
from simcache.trace import Recorder
from simcache.versions import preset


def nodes(cache):
    """Every attached node, depth first: depth, id, key, the four slot lists, access time, lock, L3 hashes."""
    return [(d, n.id, n.key, n.value, n.host_value, n.mamba_value, n.mamba_host_value, n.last_access_time,
             n.full_lock_ref, n.hash_value) for d, n in dfs(cache)]


def result(r):
    return (r.device_indices, r.last_device_node.id, r.last_host_node.id, r.host_hit_length, r.best_last_node.id,
            r.mamba_host_hit_length)


def path_times(top, n):
    """The times a match gives a path of ``n`` nodes (the deepest first) and then the root: each ancestor 1e-5
    earlier, by the same float steps as the cache takes."""
    out, t = [], top
    for _ in range(n + 1):
        out.append(t)
        t -= 0.00001
    return out


# --- match_prefix ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kv_only", [False, True])
def test_a_match_through_host_only_nodes_counts_their_host_tokens_and_refreshes_the_device_part(kv_only):
    """[1,2] on the device, [3] and [4] under it evicted to the host (host Mamba states kept): a match of
    1,2,3,4,5 reuses [1,2]'s device slots, counts 2 host tokens, ends at [4] as best and last host node."""
    cache = make_cache("write_through", flags=dataclasses.replace(preset("pre_fix"), host_hit_counts_kv_only=kv_only))
    finished(cache, [1, 2], [1, 2, 3], [1, 2, 3, 4])
    acked(cache)
    assert cache.evict(2) == (2, 2)
    assert cache.clock == 22.0
    r = cache.match_prefix([1, 2, 3, 4, 5])
    assert result(r) == ([0, 1], 7, 9, 2, 9, 1 if kv_only else 0)
    times = path_times(22.0, 3)
    assert nodes(cache) == [(1, 7, (1, 2), [0, 1], [0, 1], [0], [0], times[2], 0, None),
                            (2, 8, (3,), None, [2], None, [1], times[1], 0, None),
                            (3, 9, (4,), None, [3], None, [2], times[0], 0, None)]
    assert cache.root_node.last_access_time == times[3] and cache.clock == 23.0
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "3 4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=0, mamba_evictable=1, mamba_protected=0), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=["1,2/3/4", "1,2/3", "1,2"], device_leaves=["1,2"],
        host_leaves=["1,2/3/4"])
    assert cache.evictable_full_device_leaves.heap is not None and cache.evictable_full_host_leaves.heap is not None


@pytest.mark.parametrize("kv_only", [False, True])
def test_a_device_node_whose_mamba_state_is_only_on_the_host_is_a_one_token_host_hit_or_a_mamba_host_hit(kv_only):
    """[1,2] lost its device Mamba state (it keeps the host one): matching [1,2] reuses its KV; without #27391 the
    host Mamba state counts as one host token, with it as ``mamba_host_hit_length``."""
    cache = make_cache("write_through", flags=dataclasses.replace(preset("pre_fix"), host_hit_counts_kv_only=kv_only))
    finished(cache, [1, 2], [1, 2, 3])
    acked(cache)
    assert cache.evict_mamba(1) == 1
    r = cache.match_prefix([1, 2])
    assert result(r) == ([0, 1], 7, 7, 0 if kv_only else 1, 7, 1 if kv_only else 0)
    assert snapshot(cache)["full_lru"] == ["1,2", "1,2/3"] and snapshot(cache)["mamba_lru"] == ["1,2/3"]


def test_a_match_ending_on_a_backed_up_node_with_a_device_mamba_state_is_no_host_hit():
    cache = make_cache("write_through", flags=dataclasses.replace(preset("pre_fix"), host_hit_counts_kv_only=True))
    finished(cache, [1, 2])
    acked(cache)
    assert result(cache.match_prefix([1, 2, 3])) == ([0, 1], 7, 7, 0, 7, 0)


def test_the_match_stops_at_a_child_with_neither_device_nor_host_kv():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3])
    leaf = node_at(cache, [1, 2], [3])
    leaf.value = None  # as a node looks between losing its device KV and leaving the tree
    assert result(cache.match_prefix([1, 2, 3])) == ([0, 1], 7, 2, 0, 7, 0)
    assert leaf.last_access_time == 16.0  # untouched: the match never entered it


def test_a_match_refreshes_the_matched_path_in_both_lru_lists_deepest_first():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3], [4, 5])
    assert snapshot(cache)["full_lru"] == ["4,5", "1,2/3", "1,2"]
    r = cache.match_prefix([1, 2, 3])
    assert result(r) == ([0, 1, 2], 8, 2, 0, 8, 0)
    assert (snapshot(cache)["full_lru"], snapshot(cache)["mamba_lru"]) == (["1,2/3", "1,2", "4,5"],
                                                                           ["1,2/3", "1,2", "4,5"])
    times = path_times(20.0, 2)
    assert [n.last_access_time for n in (node_at(cache, [1, 2], [3]), node_at(cache, [1, 2]), cache.root_node)] == \
        times
    assert node_at(cache, [4, 5]).last_access_time == 19.0


def test_a_match_ending_on_a_tombstone_under_the_root_refreshes_neither_list():
    """The best node is the deepest with a Mamba state, here the root: neither list moves (the split before it
    put the suffix, then the tombstone prefix, at the MRU end)."""
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3], [4, 5])
    cache.match_prefix([1, 9])  # splits [1,2]: the prefix [1] is a tombstone
    assert snapshot(cache)["full_lru"] == ["1/2", "1", "4,5", "1/2/3"]
    r = cache.match_prefix([1])
    assert result(r) == ([], 2, 2, 0, 2, 0)
    assert snapshot(cache)["full_lru"] == ["1/2", "1", "4,5", "1/2/3"]
    assert snapshot(cache)["mamba_lru"] == ["1/2", "4,5", "1/2/3"]


@pytest.mark.parametrize("clock, kept", [(1e9 - 1, True), (1e9, True), (1e9 + 1, False)])
def test_a_match_past_a_billion_ticks_turns_the_kept_eviction_order_off(clock, kept):
    cache = make_cache("write_back")
    finished(cache, [1, 2])
    cache.clock = clock
    cache.match_prefix([1, 2])
    assert (cache.evictable_full_device_leaves.heap is not None,
            cache.evictable_full_host_leaves.heap is not None) == (kept, kept)


def test_a_match_of_whole_pages_only_drops_the_partial_last_page():
    cache = make_cache("write_back", page_size=2)
    finished(cache, [1, 2, 3, 4])
    r = cache.match_prefix([1, 2, 3])  # the last page 3 is partial: matched as [1,2], which splits the node
    assert result(r) == ([], 2, 2, 0, 2, 0)
    assert [n[2] for n in nodes(cache)] == [(1, 2), (3, 4)]
    assert result(cache.match_prefix([])) == ([], 2, 2, 0, 2, 0)


# --- insert ---------------------------------------------------------------------------------------------------------

def test_insert_without_a_mamba_state_asserts_with_sglangs_message():
    cache = make_cache("write_back")
    with pytest.raises(CacheAssertion) as raised:
        cache.insert([1, 2], [0, 1], None)
    assert str(raised.value) == "Mamba value should not be None here."


def test_insert_of_nothing_only_touches_the_root():
    cache = make_cache("write_back")
    assert cache.insert([], [], [0]) == (0, True)
    assert (cache.root_node.last_access_time, cache.clock) == (10.0, 11.0)
    assert snapshot(cache)["tree"] == []


def test_insert_helper_below_the_root_refreshes_its_start_node_in_both_lists():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [4, 5])
    start = node_at(cache, [1, 2])
    assert snapshot(cache)["full_lru"] == ["4,5", "1,2"]
    assert cache._insert_helper(start, (), [], [0], False, 0) == (0, True)
    assert (snapshot(cache)["full_lru"], snapshot(cache)["mamba_lru"]) == (["1,2", "4,5"], ["1,2", "4,5"])
    assert start.last_access_time == cache.clock - 1
    cache.mamba_lru_list.remove_node(start)
    start.mamba_value = None
    cache._insert_helper(node_at(cache, [4, 5]), (), [], [0], False, 0)
    cache._insert_helper(start, (), [], [0], False, 0)  # no Mamba state: only the full list moves
    assert (snapshot(cache)["full_lru"], snapshot(cache)["mamba_lru"]) == (["1,2", "4,5"], ["4,5"])


@pytest.mark.parametrize("prev_prefix_len, freed", [(0, [10, 11]), (1, [11]), (2, []), (3, [])])
def test_insert_over_a_cached_segment_frees_the_requests_own_slots_for_it(prev_prefix_len, freed):
    """[1,2] is cached in slots 0,1; the request's slots 10,11 for the same tokens go back, except the first
    ``prev_prefix_len`` (the prefix it matched: those were the tree's already)."""
    cache = make_cache("write_back")
    finished(cache, [1, 2])
    kv = cache.pools.device_kv.alloc(4)
    assert kv == [2, 3, 4, 5]
    before = free_lists(cache)["device_kv"]
    assert cache.insert([1, 2, 3, 4], [10, 11, 4, 5], [1], prev_prefix_len=prev_prefix_len) == (2, False)
    assert free_lists(cache)["device_kv"] == before + freed
    assert nodes(cache)[1][:6] == (2, 8, (3, 4), [4, 5], None, [1])


def test_insert_over_two_cached_nodes_counts_both_and_frees_from_where_the_request_prefix_ends():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3, 4])
    before = free_lists(cache)["device_kv"]
    assert cache.insert([1, 2, 3, 4, 5], [20, 21, 22, 23, 6], [2], prev_prefix_len=3) == (4, False)
    assert free_lists(cache)["device_kv"] == before + [23]
    assert [n[2:4] for n in nodes(cache)] == [((1, 2), [0, 1]), ((3, 4), [2, 3]), ((5,), [6])]


def test_insert_of_a_cached_path_ending_on_a_tombstone_gives_it_the_mamba_state():
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3])
    cache.match_prefix([1, 2, 9])  # [1,2] is now a tombstone prefix
    tomb = node_at(cache, [1, 2])
    assert (cache.insert([1, 2], [5, 6], [3]), tomb.mamba_value) == ((2, False), [3])
    assert snapshot(cache)["mamba_lru"] == ["1,2", "1,2/3"] and snapshot(cache)["full_lru"][0] == "1,2"
    assert cache.sizes()["mamba_evictable"] == 2
    assert tomb.last_access_time == cache.clock - 1
    assert cache.insert([1, 2], [5, 6], [4]) == (2, True)
    assert (tomb.mamba_value, snapshot(cache)["mamba_lru"][0]) == ([3], "1,2")


def test_insert_over_an_evicted_path_puts_the_requests_slots_back_on_the_device():
    """[1,2]/[3] backed up and evicted to the host: inserting 1,2,3,4 un-evicts both with the request's slots
    (nothing freed, nothing counted as a device prefix) and adds [4]."""
    cache = make_cache("write_through")
    finished(cache, [1, 2], [1, 2, 3])
    acked(cache)
    cache.evict(32)
    assert cache.insert([1, 2, 3, 4], [10, 11, 12, 13], [5]) == (0, False)
    # [4] is written through at once, and the path stays locked until that write is acknowledged
    assert nodes(cache) == [(1, 7, (1, 2), [10, 11], [0, 1], None, [0], 18.0, 1, None),
                            (2, 8, (3,), [12], [2], None, [1], 19.0, 1, None),
                            (3, 9, (4,), [13], [3], [5], [2], 20.0, 1, None)]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=0 mh=1 fl=1 ml=0 hr=0 hmr=0", "2 3 v=1 h=1 m=0 mh=1 fl=1 ml=0 hr=0 hmr=0",
              "3 4 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=4, mamba_evictable=0, mamba_protected=1),
        full_lru=["1,2/3/4", "1,2/3", "1,2"], mamba_lru=["1,2/3/4"], host_mamba_lru=["1,2/3/4", "1,2/3", "1,2"],
        device_leaves=[], host_leaves=[])
    assert free_lists(cache)["device_kv"][-3:] == [2, 0, 1]  # the evicted slots only: none of the request's


def test_inserting_a_longer_key_splits_the_node_it_diverges_in():
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3])
    assert cache.insert([1, 2, 7], [0, 1, 9], [3]) == (2, False)
    assert [n[2:6] for n in nodes(cache)] == [((1, 2), [0, 1], None, None), ((3,), [2], None, [0]),
                                              ((7,), [9], None, [3])]


# --- new nodes and L3 hashes ----------------------------------------------------------------------------------------

def test_new_nodes_chain_their_l3_page_hashes_from_the_parents_last_page():
    cache = make_cache("write_back", page_size=2, storage=True)
    finished(cache, [1, 2, 3, 4], [1, 2, 3, 4, 5, 6])
    whole = page_hashes((1, 2, 3, 4, 5, 6), 2, None)
    assert [(n[2], n[9]) for n in nodes(cache)] == [((1, 2, 3, 4), whole[:2]), ((5, 6), whole[2:])]
    assert whole[2:] == page_hashes((5, 6), 2, whole[1]) != page_hashes((5, 6), 2, None)


def test_without_l3_storage_nodes_carry_no_hashes():
    cache = make_cache("write_back", page_size=2)
    finished(cache, [1, 2, 3, 4])
    assert nodes(cache)[0][9] is None


def test_node_hashes_start_a_new_chain_under_the_root_or_a_parent_without_hashes():
    cache = make_cache("write_back", page_size=2, storage=True)
    orphan = cache._new_node((5, 6))
    assert cache._node_hashes(orphan) == page_hashes((5, 6), 2, None)  # no parent
    orphan.parent = cache.root_node
    cache.root_node.hash_value = ["x"]  # the root's key is empty: never a prior
    assert cache._node_hashes(orphan) == page_hashes((5, 6), 2, None)
    parent = cache._new_node((1, 2))
    orphan.parent = parent
    for hashes in (None, []):
        parent.hash_value = hashes
        assert cache._node_hashes(orphan) == page_hashes((5, 6), 2, None)
    parent.hash_value = ["a", "b"]
    assert cache._node_hashes(orphan) == page_hashes((5, 6), 2, "b")


@pytest.mark.parametrize("page_size, split_len, expected", [(1, 2, (["a", "b"], ["c", "d"])),
                                                           (2, 2, (["a"], ["b", "c", "d"])),
                                                           (2, 4, (["a", "b"], ["c", "d"]))])
def test_split_hashes_cut_at_the_split_page(page_size, split_len, expected):
    cache = make_cache(page_size=page_size)
    assert cache._split_hashes(["a", "b", "c", "d"], split_len) == expected
    assert cache._split_hashes(None, split_len) == (None, None)


# --- splits ---------------------------------------------------------------------------------------------------------

def test_splitting_a_locked_backed_up_device_node_splits_its_host_copy_and_copies_its_lock():
    cache = make_cache("write_through")
    finished(cache, [1, 2, 3, 4])
    acked(cache)
    cache.inc_lock_ref(node_at(cache, [1, 2, 3, 4]))
    assert result(cache.match_prefix([1, 2, 9])) == ([], 2, 2, 0, 2, 0)
    assert nodes(cache) == [(1, 8, (1, 2), [0, 1], [0, 1], None, None, 13.0, 1, None),
                            (2, 7, (3, 4), [2, 3], [2, 3], [0], [0], 14.0, 1, None)]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=0 mh=0 fl=1 ml=0 hr=0 hmr=0", "2 3,4 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=4, mamba_evictable=0, mamba_protected=1),
        full_lru=["1,2/3,4", "1,2"], mamba_lru=["1,2/3,4"], host_mamba_lru=["1,2/3,4"], device_leaves=[],
        host_leaves=[])


def test_splitting_a_device_node_with_l3_hashes_splits_them_at_the_page():
    cache = make_cache("write_back", page_size=2, storage=True)
    finished(cache, [1, 2, 3, 4, 5, 6])
    whole = page_hashes((1, 2, 3, 4, 5, 6), 2, None)
    cache.match_prefix([1, 2, 3, 4, 9, 9])
    assert [(n[2], n[9]) for n in nodes(cache)] == [((1, 2, 3, 4), whole[:2]), ((5, 6), whole[2:])]
    assert snapshot(cache)["device_leaves"] == ["1,2,3,4/5,6"]


def test_splitting_an_unlocked_device_leaf_keeps_the_suffix_the_only_device_leaf():
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3, 4], [5])
    cache.match_prefix([1, 2, 9])
    assert snapshot(cache)["device_leaves"] == ["1,2/3,4", "5"]
    assert snapshot(cache)["mamba_lru"] == ["1,2/3,4", "5"]


def evicted(storage=False):
    """[1,2,3,4,5,6] written back and evicted to the host (page size 2)."""
    cache = make_cache("write_back", page_size=2, storage=storage)
    finished(cache, [1, 2, 3, 4, 5, 6])
    cache.evict(32)
    acked(cache)
    return cache


def test_splitting_an_evicted_node_splits_its_host_copy_and_the_suffix_keeps_the_host_mamba_state():
    cache = evicted()
    node = node_at(cache, [1, 2, 3, 4, 5, 6])
    assert snapshot(cache)["host_leaves"] == ["1,2,3,4,5,6"]
    node.full_lock_ref = 2  # copied to the prefix, as SGLang does
    assert result(cache.match_prefix([1, 2, 3, 4, 9, 9])) == ([], 2, 2, 0, 2, 0)
    assert nodes(cache) == [(1, 8, (1, 2, 3, 4), None, [0, 1, 2, 3], None, None, 13.0, 2, None),
                            (2, 7, (5, 6), None, [4, 5], None, [0], 14.0, 2, None)]
    node.full_lock_ref = 0
    assert snapshot(cache)["host_leaves"] == ["1,2,3,4/5,6"]  # the old node stays in it: still a host leaf
    assert snapshot(cache)["host_mamba_lru"] == ["1,2,3,4/5,6"]


def test_splitting_an_evicted_node_makes_the_tombstone_prefix_no_host_leaf_and_keeps_the_suffix_one():
    cache = evicted()
    cache.match_prefix([1, 2, 9, 9])
    assert snapshot(cache)["host_leaves"] == ["1,2/3,4,5,6"]
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3,4,5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_splitting_an_evicted_node_with_l3_hashes_splits_them_at_the_page():
    cache = evicted(storage=True)
    whole = page_hashes((1, 2, 3, 4, 5, 6), 2, None)
    cache.match_prefix([1, 2, 9, 9])
    assert [(n[2], n[4], n[9]) for n in nodes(cache)] == [((1, 2), [0, 1], whole[:1]),
                                                         ((3, 4, 5, 6), [2, 3, 4, 5], whole[1:])]


def test_splitting_an_evicted_node_that_kept_a_device_mamba_state_keeps_it_in_the_mamba_list():
    """No operation leaves an evicted node with a device Mamba state (SGLang's split handles it): the suffix keeps
    its place in the Mamba list, re-inserted at the MRU end."""
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3], [4])
    node = node_at(cache, [1, 2, 3])
    cache.full_lru_list.remove_node(node)
    node.value = None
    assert cache.mamba_lru_list.ids_mru_to_lru() == [8, 7]
    cache._split_node((1, 2, 9), node, 2)
    assert cache.mamba_lru_list.ids_mru_to_lru() == [7, 8] and node.key == (3,)
    assert node_at(cache, [1, 2]).mamba_value is None and node.mamba_value == [0]


# --- un-evicting ----------------------------------------------------------------------------------------------------

def test_unevict_asserts_with_sglangs_messages_on_a_device_node_or_one_with_a_device_mamba_state():
    cache = make_cache("write_back")
    finished(cache, [1, 2])
    node = node_at(cache, [1, 2])
    with pytest.raises(CacheAssertion) as raised:
        cache._unevict_node(node, [5, 6])
    assert str(raised.value) == "not evicted, node.id=7"
    node.value = None
    with pytest.raises(CacheAssertion) as raised:
        cache._unevict_node(node, [5, 6])
    assert str(raised.value) == "evicted node has device mamba, node.id=7"


def test_unevict_gives_the_node_fresh_slots_and_updates_its_and_its_parents_leaf_status():
    cache = make_cache("write_through")
    finished(cache, [1, 2], [1, 2, 3])
    acked(cache)
    cache.evict(32)
    parent, leaf = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    cache._unevict_node(parent, [20, 21])
    assert snapshot(cache)["device_leaves"] == ["1,2"] and snapshot(cache)["host_leaves"] == ["1,2/3"]
    cache._unevict_node(leaf, [22])
    assert (snapshot(cache)["device_leaves"], snapshot(cache)["host_leaves"]) == (["1,2/3"], [])
    assert (parent.value, leaf.value, snapshot(cache)["full_lru"]) == ([20, 21], [22], ["1,2/3", "1,2"])
    assert cache.sizes() == dict(full_evictable=3, full_protected=0, mamba_evictable=0, mamba_protected=0)
    orphan = cache._new_node((9,))
    orphan.host_value = [7]
    cache._unevict_node(orphan, [23])  # no parent: only its own status
    assert snapshot(cache)["device_leaves"] == ["1,2/3", "9 (detached)"] and orphan.value == [23]


# --- what the recorder is told --------------------------------------------------------------------------------------

def steps(rec):
    return [(s.kind, s.node, s.text) for s in rec.steps]


def test_a_device_split_is_recorded_step_by_step():
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3, 4])
    rec = Recorder(snapshots=False, invariants=False).attach(cache, None)
    cache.match_prefix([1, 2, 9])
    assert steps(rec) == [
        ("call", None, "match_prefix()"), ("call", None, "_match_prefix_helper()"),
        ("call", 7, "_split_node([1,2,3,4]#7)"),
        ("set_discard", 7, "discard [1,2,3,4]#7 from evictable_full_device_leaves"),
        ("lru_remove", 7, "remove [1,2,3,4]#7 from full_lru_list"),
        ("lru_remove", 7, "remove [1,2,3,4]#7 from mamba_lru_list"),
        ("attach", 8, "attach [1,2]#8 under []#2 at slot 1"),
        ("lru_insert", 8, "insert [1,2]#8 into full_lru_list"),
        ("lru_insert", 7, "insert [3,4]#7 into full_lru_list"),
        ("lru_insert", 7, "insert [3,4]#7 into mamba_lru_list"),
        ("split", 7, "split [3,4]#7: prefix [1,2]#8 takes its slot"),
        ("set_add", 7, "add [3,4]#7 to evictable_full_device_leaves"),
        ("call", 2, "_match_post_processor([]#2)")]


def test_an_evicted_split_is_recorded_step_by_step_and_the_suffix_rejoins_the_host_leaves_last():
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3, 4], [5])
    cache.evict(32)
    acked(cache)
    assert [n.id for n in cache.evictable_full_host_leaves] == [7, 8]
    rec = Recorder(snapshots=False, invariants=False).attach(cache, None)
    cache.match_prefix([1, 2, 9])
    assert steps(rec) == [
        ("call", None, "match_prefix()"), ("call", None, "_match_prefix_helper()"),
        ("call", 7, "_split_node([1,2,3,4]#7)"), ("call", 7, "_split_evicted_node([1,2,3,4]#7)"),
        ("set_discard", 7, "discard [1,2,3,4]#7 from evictable_full_host_leaves"),
        ("attach", 9, "attach [1,2]#9 under []#2 at slot 1"),
        ("split", 7, "split [3,4]#7: prefix [1,2]#9 takes its slot"),
        ("set_add", 7, "add [3,4]#7 to evictable_full_host_leaves"),
        ("call", 2, "_match_post_processor([]#2)")]
    assert [n.id for n in cache.evictable_full_host_leaves] == [8, 7]


class Holders:
    """An observer in the recorder's place that keeps only what the insert loop says it holds."""

    def __init__(self):
        self.current = []

    def enter(self, name, args):
        pass

    def exit(self, name):
        pass

    def event(self, kind, **data):
        if kind == "current":
            node = data["node"]
            self.current.append(None if node is None else node.id)


def test_the_insert_loop_tells_the_recorder_each_node_it_holds_including_a_split_prefix_then_none():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3, 4])
    cache.recorder = holders = Holders()
    cache.insert([1, 2, 3, 9], [0, 1, 2, 5], [3])  # [1,2], then [3,4] split at [3] (new prefix 9), then new [9]
    assert holders.current == [7, 8, 9, 10, None]
    assert [n[1:3] for n in nodes(cache)] == [(7, (1, 2)), (9, (3,)), (8, (4,)), (10, (9,))]


def test_inserting_a_cached_path_whose_last_node_is_one_token_finds_it_instead_of_adding_a_twin():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3], [4])
    leaf, single = node_at(cache, [1, 2], [3]), node_at(cache, [4])
    assert cache.insert([1, 2, 3], [0, 1, 2], [5]) == (3, True)
    assert cache.insert([4], [3], [6]) == (1, True)
    assert node_at(cache, [1, 2], [3]) is leaf and node_at(cache, [4]) is single
    assert [n[1:4] for n in nodes(cache)] == [(7, (1, 2), [0, 1]), (8, (3,), [2]), (9, (4,), [3])]


@pytest.mark.parametrize("page_size, parent_key, hashes, prior", [
    (1, (1,), ["a"], "a"), (1, (1, 2, 3), ["a", "b", "c"], "c"), (2, (1, 2), ["a"], "a")])
def test_node_hashes_chain_from_the_parents_last_hash_whatever_its_length(page_size, parent_key, hashes, prior):
    cache = make_cache("write_back", page_size=page_size, storage=True)
    parent, child = cache._new_node(parent_key), cache._new_node((7, 8))
    parent.parent, child.parent, parent.hash_value = cache.root_node, parent, hashes
    assert cache._node_hashes(child) == page_hashes((7, 8), page_size, prior)


def test_inserting_a_key_that_ends_inside_a_node_gives_the_split_prefix_the_mamba_state_and_the_mru_place():
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3], [4])
    assert cache.insert([1, 2], [5, 6], [3]) == (2, False)
    assert [n[1:6] for n in nodes(cache)] == [(9, (1, 2), [0, 1], None, [3]), (7, (3,), [2], None, [0]),
                                              (8, (4,), [3], None, [1])]
    assert snapshot(cache)["full_lru"] == ["1,2", "1,2/3", "4"]
    assert snapshot(cache)["mamba_lru"] == ["1,2", "1,2/3", "4"]


def test_a_match_through_a_tombstone_that_ends_in_a_split_reuses_nothing():
    """[1,2] is a tombstone above [3,4] (the only Mamba state): 1,2,3,9 ends by splitting [3,4] at [3], so the
    deepest node with a Mamba state on the path is the root and no device slot is reusable."""
    cache = make_cache("write_back")
    finished(cache, [1, 2, 3, 4])
    cache.match_prefix([1, 2, 9])
    assert result(cache.match_prefix([1, 2, 3, 9])) == ([], 2, 2, 0, 2, 0)
    assert [n[2:6] for n in nodes(cache)] == [((1, 2), [0, 1], None, None), ((3,), [2], None, None),
                                              ((4,), [3], None, [0])]


def test_a_one_token_match_matches_and_an_empty_one_does_not_touch_the_clock():
    cache = make_cache("write_back")
    finished(cache, [4], [5, 6])
    clock = cache.clock
    assert result(cache.match_prefix([])) == ([], 2, 2, 0, 2, 0)
    assert cache.clock == clock
    assert result(cache.match_prefix([4])) == ([0], 7, 2, 0, 7, 0)
    assert cache.clock == clock + 1


def test_insert_frees_no_slot_when_the_request_already_owned_the_whole_cached_segment():
    """prev_prefix_len 2 over cached [1,2]: the request's slots 0,1 are the tree's own, so nothing is freed, not
    even an empty list (a free of nothing is still a recorded step)."""
    cache = make_cache("write_back")
    finished(cache, [1, 2])
    rec = Recorder(snapshots=False, invariants=False).attach(cache, None)
    assert cache.insert([1, 2, 3], [0, 1, 5], [1], prev_prefix_len=2) == (2, False)
    assert [s.text for s in rec.steps if s.kind == "free"] == []
    rec2 = Recorder(snapshots=False, invariants=False).attach(cache, None)
    cache.insert([1, 2, 3, 4], [0, 1, 9, 6], [2], prev_prefix_len=2)
    assert [s.text for s in rec2.steps if s.kind == "free"] == ["free device_kv [9]"]


@pytest.mark.parametrize("chunked, hits", [(False, 2), (True, 1)])
def test_a_chunked_insert_counts_no_hit_on_the_cached_path(chunked, hits):
    cache = make_cache("write_through", write_through_threshold=3)
    finished(cache, [1, 2])
    node = node_at(cache, [1, 2])
    assert (node.hit_count, node.host_value) == (1, None)
    cache.insert([1, 2, 3], [0, 1, 5], [1], chunked=chunked, prev_prefix_len=2)
    assert (node.hit_count, node_at(cache, [1, 2], [3]).hit_count) == (hits, 0 if chunked else 1)


def test_a_matched_path_so_deep_that_its_times_could_reach_the_previous_tick_turns_the_kept_order_off():
    """50,001 nodes under the root: the path's times step down by 1e-5 per node, past half a tick, so later times
    could tie or shrink and eviction falls back to a heap per call. (The post-processor is called directly: a
    50,001-token ``match_prefix`` spends its time slicing the key.)"""
    cache = make_cache("write_back")
    parent = cache.root_node
    for i in range(50_001):
        node = TreeNode(10 + i, float(i), (i,))
        node.parent, node.value = parent, [0]
        parent.children[i] = node
        cache.full_lru_list.insert_mru(node)
        parent = node
    node.mamba_value = [0]
    cache.mamba_lru_list.insert_mru(node)
    r = cache._match_post_processor([[0]] * 50_001, node, 50_001)
    assert (r.best_last_node, len(r.device_indices)) == (node, 50_001)
    assert cache.evictable_full_device_leaves.heap is None and cache.evictable_full_host_leaves.heap is None
