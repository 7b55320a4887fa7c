"""Exact outcomes of cache paths that the mutation run (``benchmarks/mutation.py``) found no test looking at.

Each test builds a small settled cache with the public ``Driver``, calls one SGLang method, and compares the whole
state (``helpers.snapshot``: tree, sizes, every LRU list and leaf set) plus the pools' free lists and what the
method returned. A mutant that changes any of it fails here.
"""
from __future__ import annotations

import dataclasses

import pytest
from helpers import acked, finished, free_lists, make_cache, node_at, snapshot

from simcache.driver import Driver
from simcache.trace import Recorder
from simcache.versions import preset

EMPTY_SIZES = dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0)


def settled(*requests, policy="write_through", flags=None):
    """A cache after ``requests`` finished, every write acknowledged."""
    cache = make_cache(policy, flags=flags)
    drv = Driver(cache)
    for tokens in requests:
        drv.finish(drv.start(list(tokens)))
    cache.controller.complete_writes(64)
    cache.check_hicache_events()
    return cache, drv


def host_only():
    """[1,2] with child [3], and [4,5]: all evicted from the device, each with a host copy and a host Mamba state."""
    cache, drv = settled([1, 2], [1, 2, 3], [4, 5])
    cache.evict(32)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "1 4,5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=["4,5", "1,2/3", "1,2"], device_leaves=[],
        host_leaves=["1,2/3", "4,5"])
    assert free_lists(cache)["host_kv"] == [5, 6, 7] and free_lists(cache)["host_mamba"] == [3, 4, 5, 6, 7]
    return cache


def test_evict_mamba_host_of_an_internal_node_frees_only_its_host_mamba_state():
    cache = host_only()
    assert cache.evict_mamba_host(1) == 1
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "1 4,5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=["4,5", "1,2/3"], device_leaves=[],
        host_leaves=["1,2/3", "4,5"])
    assert free_lists(cache)["host_kv"] == [5, 6, 7] and free_lists(cache)["host_mamba"] == [3, 4, 5, 6, 7, 0]
    assert node_at(cache, [1, 2]).mamba_host_value is None


def test_evict_mamba_host_of_a_host_leaf_deletes_it_and_its_tombstone_parent():
    cache = host_only()
    assert cache.evict_mamba_host(2) == 2
    assert snapshot(cache) == dict(
        tree=["1 4,5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[],
        host_mamba_lru=["4,5"], device_leaves=[], host_leaves=["4,5"])
    assert free_lists(cache)["host_kv"] == [5, 6, 7, 2, 0, 1]
    assert free_lists(cache)["host_mamba"] == [3, 4, 5, 6, 7, 0, 1]


def test_evict_mamba_host_stops_when_the_list_is_empty_and_returns_what_it_evicted():
    cache = host_only()
    assert cache.evict_mamba_host(5) == 3
    assert snapshot(cache) == dict(tree=[], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=[],
                                   device_leaves=[], host_leaves=[])
    assert free_lists(cache)["host_kv"] == [5, 6, 7, 2, 0, 1, 3, 4]
    assert free_lists(cache)["host_mamba"] == [3, 4, 5, 6, 7, 0, 1, 2]


@pytest.mark.parametrize("num", [0, -1])
def test_evict_mamba_host_of_nothing_changes_nothing(num):
    cache = host_only()
    before = (snapshot(cache), free_lists(cache))
    assert cache.evict_mamba_host(num) == 0
    assert (snapshot(cache), free_lists(cache)) == before


def stale_leaf(unconditional: bool, mamba_value_gone: bool):
    """[1,2]/[3] detached from its parent by hand (as the race leaves it) while still in every list it was in."""
    flags = dataclasses.replace(preset("described_fix"), unconditional_lru_cleanup=unconditional)
    cache, drv = settled([1, 2], [1, 2, 3], flags=flags)
    rec = Recorder(snapshots=False, invariants=False).attach(cache, drv)
    node = node_at(cache, [1, 2], [3])
    assert cache.full_lru_list.in_list(node) and cache.mamba_lru_list.in_list(node)
    assert cache.mamba_host_lru_list.in_list(node) and node in cache.evictable_full_device_leaves
    if mamba_value_gone:
        node.mamba_value = None
    del node.parent.children[cache.child_key(node.key)]
    return cache, rec, node


@pytest.mark.parametrize("unconditional, mamba_value_gone, removed, left_in_mamba_lru", [
    (False, False, ("evictable_full_device_leaves", "full_lru_list", "mamba_lru_list", "mamba_host_lru_list"), False),
    (False, True, ("evictable_full_device_leaves", "full_lru_list", "mamba_host_lru_list"), True),
    (True, True, ("evictable_full_device_leaves", "full_lru_list", "mamba_lru_list", "mamba_host_lru_list"), False),
])
def test_cleanup_of_a_stale_node_removes_it_from_exactly_the_lists_it_may_leave(unconditional, mamba_value_gone,
                                                                               removed, left_in_mamba_lru):
    cache, rec, node = stale_leaf(unconditional, mamba_value_gone)
    cache._cleanup_stale_node(node, "stale node in a test")
    warning = "Skip stale HiMamba eviction node_id=8 reason=stale node in a test parent_id=7 child_key=3"
    assert cache.warnings == [warning]
    assert [(e.node, e.key, e.reason, e.removed) for e in rec.cleaned_up] == [(8, "3", "stale node in a test",
                                                                              removed)]
    assert rec.steps[-1].kind == "cleaned_up" and warning in rec.steps[-1].text + str(rec.steps[-1].detail)
    assert (cache.full_lru_list.in_list(node), cache.mamba_lru_list.in_list(node),
            cache.mamba_host_lru_list.in_list(node)) == (False, left_in_mamba_lru, False)
    assert node not in cache.evictable_full_device_leaves and node not in cache.evictable_full_host_leaves
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_cleanup_of_a_stale_node_not_in_the_mamba_list_still_leaves_the_host_mamba_list():
    cache, rec, node = stale_leaf(False, True)
    cache.mamba_lru_list.force_remove(node)
    cache._cleanup_stale_node(node, "r")
    assert [e.removed for e in rec.cleaned_up] == [("evictable_full_device_leaves", "full_lru_list",
                                                    "mamba_host_lru_list")]
    assert not cache.mamba_host_lru_list.in_list(node)


def test_cleanup_of_a_node_without_a_parent_names_none_as_its_parent():
    cache, rec, node = stale_leaf(False, False)
    node.parent = None
    cache._cleanup_stale_node(node, "r")
    assert cache.warnings == ["Skip stale HiMamba eviction node_id=8 reason=r parent_id=None child_key=3"]


STALE_SKIPS = {  # scenario -> (outcome, node id, key, where the guard skipped it, lists it was removed from)
    "scenario_a": ("clean", 7, "1,2", "_evict_host_leaf", ("evictable_full_host_leaves",)),
    "scenario_b": ("assertion", 8, "1,2", "_evict_host_leaf", ("evictable_full_host_leaves",)),
    "scenario_c": ("clean", 8, "1,2", "_delete_tombstone_leaf", ()),
}


@pytest.mark.parametrize("preset_name", ["described_fix", "reviewed_fix"])
@pytest.mark.parametrize("scenario", list(STALE_SKIPS))
def test_the_stale_guards_skip_the_stale_node_and_say_where(scenario, preset_name):
    """The gallery's stale nodes reach ``_evict_host_leaf`` or ``_delete_tombstone_leaf``: the guard (after the
    asserts in the described fix, before them in the reviewed one) skips each, names the function, and says so."""
    from simcache.simulate import simulate
    outcome, node, key, where, removed = STALE_SKIPS[scenario]
    run = simulate(scenario, preset_name)
    assert run.outcome == outcome
    assert [(e.node, e.key, e.reason, e.removed) for e in run.trace.cleaned_up] == [
        (node, key, f"stale node in {where}", removed)]
    assert run.cache.warnings == [f"Skip stale HiMamba eviction node_id={node} reason=stale node in {where} "
                                  "parent_id=2 child_key=1"]


def host_leaves(*requests):
    cache, _ = settled(*requests)
    cache.evict(32)
    return cache


@pytest.mark.parametrize("heap_fallback", [False, True])
def test_evict_host_takes_the_least_recent_host_leaves_until_enough_tokens(heap_fallback):
    """Three 2-token host leaves; 3 tokens asked: the two least recent go, the third stays. The same with the
    heap SGLang uses (``heap = None``: the switch ``_match_post_processor`` flips when access times could tie)."""
    cache = host_leaves([1, 2], [3, 4], [5, 6])
    if heap_fallback:
        cache.evictable_full_host_leaves.heap = None
    assert snapshot(cache)["host_leaves"] == ["1,2", "3,4", "5,6"]
    assert cache.evict_host(3) is None
    assert snapshot(cache) == dict(
        tree=["1 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[],
        host_mamba_lru=["5,6"], device_leaves=[], host_leaves=["5,6"])
    assert free_lists(cache)["host_kv"] == [6, 7, 0, 1, 2, 3]


@pytest.mark.parametrize("heap_fallback", [False, True])
def test_evict_host_goes_on_to_a_parent_that_became_a_host_leaf(heap_fallback):
    """[1,2] with child [3], then [4,5]: 3 tokens asked. The leaf [3] goes first (1 token); its parent [1,2] is
    now a host leaf older than [4,5] and goes next (2 more): [4,5] stays."""
    cache = host_leaves([1, 2], [1, 2, 3], [4, 5])
    if heap_fallback:
        cache.evictable_full_host_leaves.heap = None
    assert snapshot(cache)["host_leaves"] == ["1,2/3", "4,5"]
    cache.evict_host(3)
    assert snapshot(cache) == dict(
        tree=["1 4,5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[],
        host_mamba_lru=["4,5"], device_leaves=[], host_leaves=["4,5"])


def test_evict_hosts_heap_skips_a_node_popped_again_after_it_went_and_goes_on_to_the_next():
    """SGLang's heap (the fallback) with a parent counted as a host leaf while its child still hangs below it (set by
    hand, as the loop-old predicate can leave it): [3] goes first and pushes [1,2] a second time; [1,2] goes at its
    first entry, its second is no member any more and is skipped, not the end: [4,5] goes too (1 + 2 + 2 tokens)."""
    cache = host_only()
    leaves = cache.evictable_full_host_leaves
    leaves.heap = None
    parent = node_at(cache, (1, 2))
    parent.last_access_time = 17.0  # after its child [3] (16), before [4,5] (19)
    leaves.add(parent)
    assert snapshot(cache)["host_leaves"] == ["1,2", "1,2/3", "4,5"]
    cache.evict_host(5)
    assert snapshot(cache) == dict(tree=[], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=[],
                                   device_leaves=[], host_leaves=[])
    assert free_lists(cache)["host_kv"] == [5, 6, 7, 2, 0, 1, 3, 4]
    assert free_lists(cache)["host_mamba"] == [3, 4, 5, 6, 7, 1, 0, 2]


def test_evict_host_of_nothing_changes_nothing():
    cache = host_leaves([1, 2], [3, 4])
    before = (snapshot(cache), free_lists(cache))
    cache.evict_host(0)
    assert (snapshot(cache), free_lists(cache)) == before


def test_evict_host_leaf_returns_its_tokens_and_the_cascades_and_leaves_the_node_without_host_kv():
    """[3] host-only under [1,2], which is on the device with no Mamba state on either tier: evicting [3] from the
    host cascades into [1,2] and frees its 2 device slots, counted in the return (1 + 2)."""
    cache, _ = settled([1, 2], [1, 2, 3])
    assert (cache.evict_mamba(1), cache.evict(1), cache.evict_mamba_host(1)) == (1, (1, 1), 1)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    leaf = node_at(cache, [1, 2], [3])
    parent = leaf.parent
    assert cache._evict_host_leaf(leaf) == 3
    assert (leaf.host_value, leaf.mamba_host_value) == (None, None)
    assert (parent.host_value, parent.mamba_host_value) == (None, None)  # the cascade freed its host copy too
    assert free_lists(cache)["host_kv"] == [3, 4, 5, 6, 7, 2, 0, 1]
    assert snapshot(cache) == dict(tree=[], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=[],
                                   device_leaves=[], host_leaves=[])


@pytest.mark.parametrize("preset_name", ["described_fix", "reviewed_fix"])
def test_evict_host_leaf_of_a_stale_node_evicts_nothing_and_says_so(preset_name):
    cache, _ = settled([1, 2], [1, 2, 3], flags=preset(preset_name))
    cache.evict(32)
    leaf = node_at(cache, [1, 2], [3])
    del leaf.parent.children[cache.child_key(leaf.key)]
    assert cache._evict_host_leaf(leaf) == 0
    assert leaf.host_value == [2]
    assert cache.warnings == ["Skip stale HiMamba eviction node_id=8 reason=stale node in _evict_host_leaf "
                              "parent_id=7 child_key=3"]


def chain(preset_name):
    """[1,2] / [3] on the device with no Mamba state on either tier, [4] under them host-only."""
    cache, _ = settled([1, 2], [1, 2, 3], [1, 2, 3, 4], flags=preset(preset_name))
    assert (cache.evict_mamba(2), cache.evict(1), cache.evict_mamba_host(2)) == (2, (1, 1), 2)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "3 4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    return cache, node_at(cache, [1, 2], [3], [4])


@pytest.mark.parametrize("preset_name", ["pre_fix", "followup_fix"])
def test_the_cascade_deletes_every_tombstone_parent_and_counts_each_ones_device_tokens(preset_name):
    cache, leaf = chain(preset_name)
    assert cache._evict_host_leaf(leaf) == 4  # [4]'s host token, then [3]'s one and [1,2]'s two device tokens
    assert snapshot(cache) == dict(tree=[], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=[],
                                   device_leaves=[], host_leaves=[])


SHORT = dict(full_lock_ref="fl", mamba_lock_ref="ml", host_ref_counter="hr", host_mamba_ref_counter="hmr")


@pytest.mark.parametrize("preset_name, field, stops", [
    ("pre_fix", "full_lock_ref", True), ("pre_fix", "mamba_lock_ref", True),
    ("pre_fix", "host_ref_counter", False), ("pre_fix", "host_mamba_ref_counter", False),
    ("followup_fix", "host_ref_counter", True), ("followup_fix", "host_mamba_ref_counter", True),
])
def test_the_cascade_stops_at_a_locked_parent_and_under_the_followup_at_a_host_referenced_one(preset_name, field,
                                                                                               stops):
    """[3] holds one reference of ``field`` (as a running request or an in-flight transfer leaves it): a lock
    always stops the cascade there; a host reference stops it only where ``cascade_respects_host_refs`` is set."""
    cache, leaf = chain(preset_name)
    setattr(leaf.parent, field, 1)
    got = cache._evict_host_leaf(leaf)
    if stops:
        refs = " ".join(f"{k}={int(k == SHORT[field])}" for k in ("fl", "ml", "hr", "hmr"))
        assert (got, snapshot(cache)["tree"]) == (1, ["1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                                      f"2 3 v=1 h=1 m=0 mh=0 {refs}"])
    else:
        assert (got, snapshot(cache)["tree"]) == (4, [])


def device_settled(*requests, **config):
    cache = make_cache("write_through", **config)
    finished(cache, *requests)
    acked(cache)
    return cache


@pytest.mark.parametrize("heap_fallback", [False, True])
def test_evict_moves_the_least_recent_backed_up_leaves_to_the_host_and_counts_kv_and_mamba(heap_fallback):
    cache = device_settled([1, 2], [3, 4], [5, 6])
    if heap_fallback:
        cache.evictable_full_device_leaves.heap = None
    assert cache.evict(3) == (4, 2)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0", "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "1 5,6 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=0, mamba_evictable=1, mamba_protected=0), full_lru=["5,6"],
        mamba_lru=["5,6"], host_mamba_lru=["5,6", "3,4", "1,2"], device_leaves=["5,6"], host_leaves=["1,2", "3,4"])
    assert free_lists(cache)["device_kv"][-4:] == [0, 1, 2, 3] and free_lists(cache)["device_mamba"][-2:] == [0, 1]


@pytest.mark.parametrize("heap_fallback", [False, True])
def test_evict_goes_on_to_a_parent_that_became_a_device_leaf(heap_fallback):
    cache = device_settled([1, 2], [1, 2, 3], [4, 5])
    if heap_fallback:
        cache.evictable_full_device_leaves.heap = None
    assert cache.evict(3) == (3, 2)
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 4,5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_evicts_heap_skips_a_node_popped_again_after_it_went_and_goes_on_to_the_next():
    """The same on the device: [1,2] counted as a device leaf while its child [3] is still on the device (set by
    hand). [3] goes to the host first and pushes [1,2] again; [1,2] goes at its first entry, its second is skipped,
    and [4,5] goes too: 5 tokens and 3 Mamba states, in that order."""
    cache = device_settled([1, 2], [1, 2, 3], [4, 5])
    leaves = cache.evictable_full_device_leaves
    leaves.heap = None
    parent = node_at(cache, (1, 2))
    parent.last_access_time = 17.0  # after its child [3] (16), before [4,5] (19)
    leaves.add(parent)
    assert snapshot(cache)["device_leaves"] == ["1,2", "1,2/3", "4,5"]
    assert cache.evict(5) == (5, 3)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "1 4,5 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=["4,5", "1,2/3", "1,2"], device_leaves=[],
        host_leaves=["1,2/3", "4,5"])
    assert free_lists(cache)["device_kv"][-5:] == [2, 0, 1, 3, 4]
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7, 1, 0, 2]


def test_evict_of_leaves_never_backed_up_deletes_them():
    cache = device_settled([1, 2], [3, 4], write_through_threshold=5)  # no write-through yet: no host copies
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"]
    gone = node_at(cache, [1, 2])
    assert cache.evict(3) == (4, 2)
    assert (gone.value, gone.mamba_value) == (None, None)
    assert snapshot(cache) == dict(tree=[], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=[],
                                   device_leaves=[], host_leaves=[])
    assert free_lists(cache)["device_kv"][-4:] == [0, 1, 2, 3] and sorted(free_lists(cache)["device_mamba"]) == \
        list(range(8))


def test_evict_with_mamba_num_only_evicts_mamba_states():
    cache = device_settled([1, 2], [3, 4])
    assert cache.evict(0, mamba_num=1) == (0, 1)
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    before = (snapshot(cache), free_lists(cache))
    assert cache.evict(0, mamba_num=0) == (0, 0) and (snapshot(cache), free_lists(cache)) == before


def test_evict_mamba_of_leaves_evicts_each_leaf_whole_until_enough():
    cache = device_settled([1, 2], [3, 4], [5, 6])
    assert cache.evict_mamba(2) == 2
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5,6 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert snapshot(cache)["mamba_lru"] == ["5,6"]
    before = (snapshot(cache), free_lists(cache))
    assert cache.evict_mamba(0) == 0 and (snapshot(cache), free_lists(cache)) == before


@pytest.mark.parametrize("preset_name", ["described_fix", "reviewed_fix"])
def test_evict_regular_of_a_stale_node_evicts_nothing_and_says_so(preset_name):
    cache = make_cache("write_through", flags=preset(preset_name), write_through_threshold=5)
    drv = Driver(cache)
    for tokens in ([1, 2], [1, 2, 3]):
        drv.finish(drv.start(tokens))
    leaf = node_at(cache, [1, 2], [3])
    del leaf.parent.children[cache.child_key(leaf.key)]
    assert cache._evict_regular(leaf) == (0, 0)
    assert leaf.value == [2]
    assert cache.warnings == ["Skip stale HiMamba eviction node_id=8 reason=stale node in _evict_regular "
                              "parent_id=7 child_key=3"]


@pytest.mark.parametrize("heap_fallback", [False, True])
def test_evict_of_one_token_evicts_one_leaf_and_evict_of_none_evicts_nothing(heap_fallback):
    cache = device_settled([1, 2], [3, 4])
    if heap_fallback:
        cache.evictable_full_device_leaves.heap = None
    before = (snapshot(cache), free_lists(cache))
    assert cache.evict() == (0, 0) and (snapshot(cache), free_lists(cache)) == before
    assert cache.evict(1) == (2, 1)
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_evicting_a_node_whose_mamba_state_is_locked_moves_it_out_of_the_protected_size():
    """SGLang's ``_free_device_mamba`` also handles a Mamba-locked node (no operation sequence evicts one: a lock
    keeps a node out of the leaf sets): the protected size drops and the lock is reset."""
    cache = device_settled([1, 2])
    node = node_at(cache, [1, 2])
    node.mamba_lock_ref = 1
    cache.mamba_evictable_size_, cache.mamba_protected_size_ = 0, 1
    assert cache._evict_to_host(node) == (2, 1)
    assert (node.mamba_lock_ref, node.mamba_value) == (0, None)
    assert cache.sizes() == EMPTY_SIZES


def test_evict_of_tokens_and_mamba_states_in_one_call_counts_both_evictions():
    cache = device_settled([1, 2], [3, 4], [5, 6])
    assert cache.evict(2, mamba_num=1) == (2, 2)  # [1,2] for the tokens, then [3,4] for the Mamba state
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5,6 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_lock_refs_lock_the_whole_path_and_return_the_size_that_changed_sides():
    cache = device_settled([1, 2], [1, 2, 3])
    leaf = node_at(cache, [1, 2], [3])
    assert cache.inc_lock_ref(leaf) == -3  # [3] and [1,2] leave the evictable side
    assert cache.inc_lock_ref(leaf) == 0  # already locked: nothing changes sides
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=0 hr=0 hmr=0",
                                       "2 3 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=0 hmr=0"]
    assert cache.sizes() == dict(full_evictable=0, full_protected=3, mamba_evictable=1, mamba_protected=1)
    assert cache.dec_lock_ref(leaf) == 0
    assert cache.dec_lock_ref(leaf) == 3
    assert cache.sizes() == dict(full_evictable=3, full_protected=0, mamba_evictable=2, mamba_protected=0)
    assert snapshot(cache)["device_leaves"] == ["1,2/3"]
