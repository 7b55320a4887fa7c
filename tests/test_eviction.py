"""Device eviction: least recently used leaves first, locked paths never, backed-up leaves demoted to host, others
deleted (and their childless tombstone ancestors with them). After every step the size counters must equal a
recount of the attached tree.

"Never backed up" stories use ``write_through_selective`` with a write-through threshold of 100, so no copy to
host happens behind the story's back.
"""
from __future__ import annotations

import pytest
from helpers import assert_counters_match_tree, free_lists, make_cache, node_at, snapshot

from simcache.driver import Driver
from simcache.errors import CacheAssertion
from simcache.state import tree_slot_lines

EMPTY = dict(full_lru=[], mamba_lru=[], host_mamba_lru=[], device_leaves=[], host_leaves=[])


def sizes(fe: int, fp: int, me: int, mp: int) -> dict[str, int]:
    return dict(full_evictable=fe, full_protected=fp, mamba_evictable=me, mamba_protected=mp)


def device_only_cache():
    return make_cache("write_through_selective", write_through_threshold=100)


def test_the_least_recently_used_leaf_goes_first():
    cache = device_only_cache()
    drv = Driver(cache)
    for tokens in ([1, 1], [2, 2], [3, 3]):
        drv.finish(drv.start(tokens))
    cache.match_prefix([1, 1])  # 1,1 becomes the most recently used
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1,1 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0", "1 2,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "1 3,3 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(6, 0, 3, 0), full_lru=["1,1", "3,3", "2,2"], mamba_lru=["1,1", "3,3", "2,2"],
        host_mamba_lru=[], device_leaves=["1,1", "2,2", "3,3"], host_leaves=[])

    assert cache.evict(2) == (2, 1)
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1,1 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0", "1 3,3 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(4, 0, 2, 0), full_lru=["1,1", "3,3"], mamba_lru=["1,1", "3,3"], host_mamba_lru=[],
        device_leaves=["1,1", "3,3"], host_leaves=[])
    assert free_lists(cache)["device_kv"] == list(range(6, 32)) + [2, 3]

    assert cache.evict(1) == (2, 1)  # a leaf goes whole: asking for one token frees two
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1,1 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(2, 0, 1, 0), full_lru=["1,1"],
        mamba_lru=["1,1"], host_mamba_lru=[], device_leaves=["1,1"], host_leaves=[])
    assert free_lists(cache)["device_kv"] == list(range(6, 32)) + [2, 3, 4, 5]
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 1, 2]


def test_a_running_requests_path_is_never_evicted():
    cache = device_only_cache()
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3]))
    drv.finish(drv.start([7, 7]))
    rid = drv.start([1, 2, 3, 4])  # locks root..1,2,3 (its device KV and its Mamba state)
    assert drv.live[rid].last_node is node_at(cache, [1, 2, 3])
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1,2,3 v=1 h=0 m=1 mh=0 fl=1 ml=1 hr=0 hmr=0", "1 7,7 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(2, 3, 1, 1), full_lru=["1,2,3", "7,7"], mamba_lru=["1,2,3", "7,7"], host_mamba_lru=[],
        device_leaves=["7,7"], host_leaves=[])

    assert cache.evict(100) == (2, 1)
    assert_counters_match_tree(cache)
    locked_only = dict(
        tree=["1 1,2,3 v=1 h=0 m=1 mh=0 fl=1 ml=1 hr=0 hmr=0"], sizes=sizes(0, 3, 0, 1), full_lru=["1,2,3"],
        mamba_lru=["1,2,3"], host_mamba_lru=[], device_leaves=[], host_leaves=[])
    assert snapshot(cache) == locked_only
    assert cache.evict(100, mamba_num=5) == (0, 0)  # neither KV nor Mamba eviction touches it
    assert snapshot(cache) == locked_only

    drv.finish(rid)  # inserts 4 under 1,2,3 and unlocks
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1,2,3 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(4, 0, 2, 0), full_lru=["1,2,3/4", "1,2,3"], mamba_lru=["1,2,3/4", "1,2,3"],
        host_mamba_lru=[], device_leaves=["1,2,3/4"], host_leaves=[])

    # the leaf 4 goes first; 1,2,3 then is a leaf holding a Mamba state (no cascade), and goes next
    assert cache.evict(100) == (4, 2)
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(tree=[], sizes=sizes(0, 0, 0, 0), **EMPTY)
    assert sorted(free_lists(cache)["device_kv"]) == list(range(32))


def test_evict_mamba_turns_an_internal_node_into_a_tombstone_then_a_leaf_takes_it_down_with_it():
    cache = device_only_cache()
    drv = Driver(cache)
    for tokens in ([1, 2], [1, 2, 3, 4], [5, 6]):
        drv.finish(drv.start(tokens))
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=0 mh=-", "2 3,4 v=2,3 h=- m=1 mh=-",
                                      "1 5,6 v=4,5 h=- m=2 mh=-"]
    assert snapshot(cache)["mamba_lru"] == ["5,6", "1,2/3,4", "1,2"]

    # 1,2 is the least recently used Mamba state and has a child: only its state goes, its KV stays
    assert cache.evict(0, mamba_num=1) == (0, 1)
    assert_counters_match_tree(cache)
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=- m=- mh=-", "2 3,4 v=2,3 h=- m=1 mh=-",
                                      "1 5,6 v=4,5 h=- m=2 mh=-"]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3,4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "1 5,6 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(6, 0, 2, 0), full_lru=["5,6", "1,2/3,4", "1,2"], mamba_lru=["5,6", "1,2/3,4"],
        host_mamba_lru=[], device_leaves=["1,2/3,4", "5,6"], host_leaves=[])
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 0]

    # 3,4 is a leaf: it is evicted whole, and the cascade deletes the now childless tombstone 1,2 too
    assert cache.evict(0, mamba_num=1) == (0, 1)
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 5,6 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(2, 0, 1, 0), full_lru=["5,6"],
        mamba_lru=["5,6"], host_mamba_lru=[], device_leaves=["5,6"], host_leaves=[])
    assert free_lists(cache)["device_kv"] == list(range(6, 32)) + [2, 3, 0, 1]
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 0, 1]


def test_the_tombstone_cascade_climbs_through_childless_tombstones_and_stops_at_one_with_another_child():
    cache = device_only_cache()
    drv = Driver(cache)
    for tokens in ([1], [1, 2, 3], [1, 2, 3, 4, 5]):  # 1 (mamba) / 2,3 (mamba) / 4,5 (mamba)
        drv.finish(drv.start(tokens))
    cache.evict(0, mamba_num=2)  # 1 and 2,3 are older: both become tombstones
    assert snapshot(cache)["tree"] == ["1 1 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 2,3 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "3 4,5 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"]
    drv.finish(drv.start([1, 7]))  # 7 under the tombstone 1 (1 gets no state back: 7 is the path's end)
    assert snapshot(cache)["tree"] == ["1 1 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 2,3 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "3 4,5 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 7 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"]

    # evicting 4,5 deletes the tombstone 2,3 with it; the tombstone 1 still has the child 7 and stays
    assert cache.evict(2) == (4, 1)  # two tokens of 4,5 plus two of the cascaded 2,3
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 7 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(2, 0, 1, 0), full_lru=["1/7", "1"], mamba_lru=["1/7"], host_mamba_lru=[],
        device_leaves=["1/7"], host_leaves=[])


def test_write_through_locks_until_the_ack_then_eviction_demotes_the_node_to_host():
    cache = make_cache("write_through")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3]))
    node = node_at(cache, [1, 2, 3])
    written = dict(
        tree=["1 1,2,3 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"], sizes=sizes(0, 3, 0, 1), full_lru=["1,2,3"],
        mamba_lru=["1,2,3"], host_mamba_lru=["1,2,3"], device_leaves=[], host_leaves=[])
    assert snapshot(cache) == written
    assert tree_slot_lines(cache) == ["1 1,2,3 v=0,1,2 h=0,1,2 m=0 mh=0"]
    assert cache.ongoing_write_through == {node.id: node}

    assert cache.evict(3) == (0, 0)  # the copy is in flight: the node is locked
    assert snapshot(cache) == written

    cache.check_hicache_events()  # the write ack unlocks it
    assert_counters_match_tree(cache)
    assert cache.ongoing_write_through == {}
    assert snapshot(cache) == dict(
        tree=["1 1,2,3 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(3, 0, 1, 0), full_lru=["1,2,3"],
        mamba_lru=["1,2,3"], host_mamba_lru=["1,2,3"], device_leaves=["1,2,3"], host_leaves=[])

    assert cache.evict(3) == (3, 1)
    assert_counters_match_tree(cache)
    assert cache.root_node.children[1] is node  # demoted, not deleted: the same object, host only
    assert tree_slot_lines(cache) == ["1 1,2,3 v=- h=0,1,2 m=- mh=0"]
    assert snapshot(cache) == dict(
        tree=["1 1,2,3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(0, 0, 0, 0), full_lru=[],
        mamba_lru=[], host_mamba_lru=["1,2,3"], device_leaves=[], host_leaves=["1,2,3"])
    assert free_lists(cache)["device_kv"] == list(range(3, 32)) + [0, 1, 2]
    assert free_lists(cache)["device_mamba"] == [1, 2, 3, 4, 5, 6, 7, 0]


def test_write_through_selective_copies_a_node_on_its_second_hit():
    cache = make_cache("write_through_selective")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    node = node_at(cache, [1, 2])
    assert node.hit_count == 1
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(2, 0, 1, 0), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=[], device_leaves=["1,2"], host_leaves=[])

    drv.finish(drv.start([1, 2]))
    assert node.hit_count == 2
    assert_counters_match_tree(cache)
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=0,1 m=0 mh=0"]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"], sizes=sizes(0, 2, 0, 1), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=["1,2"], device_leaves=[], host_leaves=[])

    cache.check_hicache_events()
    assert_counters_match_tree(cache)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_write_back_copies_only_when_evicting_and_demotes_at_once():
    cache = make_cache("write_back")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([1, 2]))
    node = node_at(cache, [1, 2])
    assert node.hit_count == 0  # write-back never counts hits
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(2, 0, 1, 0), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=[], device_leaves=["1,2"], host_leaves=[])

    assert cache.evict(2) == (2, 1)

    assert_counters_match_tree(cache)
    assert cache.root_node.children[1] is node
    assert tree_slot_lines(cache) == ["1 1,2 v=- h=0,1 m=- mh=0"]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"], sizes=sizes(0, 0, 0, 0), full_lru=[],
        mamba_lru=[], host_mamba_lru=["1,2"], device_leaves=[], host_leaves=["1,2"])
    # the write was waited for and acknowledged inside evict, and took no lock
    assert cache.ongoing_write_through == {} and cache.controller.ack_write_queue == []
    assert free_lists(cache)["host_kv"] == [2, 3, 4, 5, 6, 7]


def test_a_demoted_parent_waits_for_its_children_and_host_eviction_removes_leaves_first():
    cache = make_cache("write_through")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3]))
    drv.finish(drv.start([1, 2, 4]))
    cache.check_hicache_events()
    assert snapshot(cache)["device_leaves"] == ["1,2/3", "1,2/4"]

    assert cache.evict(1) == (1, 1)  # the older leaf 3 only; 1,2 still has a child on device
    assert_counters_match_tree(cache)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "2 4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(3, 0, 1, 0), full_lru=["1,2/4", "1,2"], mamba_lru=["1,2/4"], host_mamba_lru=["1,2/4", "1,2/3"],
        device_leaves=["1,2/4"], host_leaves=["1,2/3"])

    assert cache.evict(2) == (3, 1)  # 4, then its parent 1,2 became a device leaf and was pushed
    assert_counters_match_tree(cache)
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert snapshot(cache)["host_leaves"] == ["1,2/3", "1,2/4"]

    cache.evict_host(1)  # host leaf 3 goes; 1,2 keeps its child 4
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=sizes(0, 0, 0, 0), full_lru=[], mamba_lru=[], host_mamba_lru=["1,2/4"], device_leaves=[],
        host_leaves=["1,2/4"])
    cache.evict_host(1)  # 4 goes, and the cascade deletes the host-only tombstone 1,2 with its host copy
    assert snapshot(cache) == dict(tree=[], sizes=sizes(0, 0, 0, 0), **EMPTY)
    assert sorted(free_lists(cache)["host_kv"]) == list(range(8))


def test_illegal_calls_raise_sglangs_message_and_leave_the_state_unchanged():
    cache = device_only_cache()
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([1, 2, 3]))
    top, leaf = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    assert (top.id, leaf.id) == (7, 8)
    before = (snapshot(cache), tree_slot_lines(cache), free_lists(cache))
    for call, message in (
            (lambda: cache._evict_to_host(leaf), "not backuped, node.id=8"),  # demotion needs a host copy
            (lambda: cache._evict_regular(top), "non-leaf, node.id=7"),
            (lambda: cache._evict_host_leaf(leaf), "not evicted, node.id=8"),
            (lambda: cache.dec_lock_ref(leaf), "dec_lock_ref on node with node.full_lock_ref=0, node.id=8"),
            (lambda: cache._tombstone_internal_node(leaf), "Cannot tombstone a leaf node, node.id=8")):
        with pytest.raises(CacheAssertion) as e:
            call()
        assert str(e.value) == message
        assert (snapshot(cache), tree_slot_lines(cache), free_lists(cache)) == before
