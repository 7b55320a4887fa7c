"""Exact outcomes of ``cache.py`` itself: construction, ids and the clock, attaching and detaching, the leaf-set
predicates, the lock walk and what the recorder is told. Written for the mutation run (``benchmarks/mutation.py``):
each test pins a whole state or an exact event list, so a changed constant, comparison or argument shows.
"""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from helpers import finished, free_lists, make_cache, node_at, snapshot

import simcache.cache as cache_module
from simcache.cache import HiMambaRadixCache, _UntracedCache
from simcache.errors import CacheAssertion
from simcache.node import TreeNode
from simcache.trace import Recorder
from simcache.versions import preset

EMPTY_SIZES = dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0)



def recorded(cache, drv=None):
    return Recorder(snapshots=False, invariants=False).attach(cache, drv)


def events(rec, since=0, kinds=("attach", "detach", "lock", "split")):
    return [(s.kind, s.node, s.text, s.detail) for s in rec.steps[since:] if s.kind in kinds]


# --- construction ---------------------------------------------------------------------------------------------------

def test_a_new_cache_is_wired_to_its_config_and_starts_ids_and_clock_where_sglang_does():
    cache = make_cache("write_back", page_size=2, storage=True, prefetch_threshold=3, write_through_threshold=4,
                       load_back_threshold=6, auto_complete=False, host_kv=6)
    cc = cache.controller
    assert (cc.page_size, cc.write_policy, cc.auto_complete, cc.pools is cache.pools) == (2, "write_back", False, True)
    # the controller's eviction hooks are this cache's own methods (it calls them when a host Mamba or device Mamba
    # allocation fails)
    assert (cc.evict_mamba_host, cc.evict_mamba) == (cache.evict_mamba_host, cache.evict_mamba)
    assert cc.evict_mamba_host.__self__ is cache and cc.evict_mamba.__self__ is cache
    assert (cache.page_size, cache.write_through_threshold, cache.load_back_threshold, cache.enable_storage,
            cache.prefetch_threshold, cache.flags) == (2, 4, 6, True, 3, preset("pre_fix"))
    assert (cache.ongoing_write_through, cache.ongoing_load_back, cache.ongoing_prefetch, cache.ongoing_backup,
            cache.prefetch_loaded_tokens_by_reqid) == ({}, {}, {}, {}, {})
    assert (cache.warnings, cache.detach_count, cache.cuts, cache.crashed, cache.recorder) == ([], 0, None, None,
                                                                                               None)
    assert (cache.evictable_full_device_leaves.name, cache.evictable_full_host_leaves.name) == (
        "evictable_full_device_leaves", "evictable_full_host_leaves")
    assert (cache.evictable_full_device_leaves.heap, cache.evictable_full_host_leaves.heap) == ([], [])
    assert (cache.full_lru_list.kind, cache.mamba_lru_list.kind, cache.mamba_host_lru_list.kind) == (
        "full", "mamba", "host_mamba")
    root = cache.root_node
    # SGLang builds the host-Mamba LRU list (two sentinel nodes), the root, then the two device lists (four):
    # ids 0-1, 2, 3-6, and the class-level access clock has handed out one time per node
    assert (root.id, root.key, root.value, root.last_access_time, root.full_lock_ref, root.mamba_lock_ref,
            root.parent, root.children) == (2, (), [], 5.0, 1, 1, None, {})
    assert (cache._next_id, cache.clock) == (7, 10.0)
    assert snapshot(cache) == dict(tree=[], sizes=EMPTY_SIZES, full_lru=[], mamba_lru=[], host_mamba_lru=[],
                                   device_leaves=[], host_leaves=[])
    assert type(cache) is _UntracedCache and type(cache).__name__ == "HiMambaRadixCache"


def test_ids_and_access_times_follow_the_clock_one_tick_per_node_and_per_touch():
    cache = make_cache("write_back")
    assert (cache.tick(), cache.tick(), cache.clock) == (10.0, 11.0, 12.0)
    cache._reserve(3)
    assert (cache._next_id, cache.clock) == (10, 15.0)
    node = cache._new_node((4, 5))
    assert (node.id, node.key, node.last_access_time, node.value, node.parent) == (10, (4, 5), 15.0, None, None)
    assert (cache._next_id, cache.clock) == (11, 16.0)
    finished(cache, [1, 2], [1, 2, 3])
    a, b = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    assert (a.id, b.id, cache._next_id) == (11, 12, 13)
    assert (a.last_access_time, b.last_access_time, cache.root_node.last_access_time) == (
        21.0, 22.0, 20.0)
    assert cache.clock == 23.0


# --- child slots, attach and detach ---------------------------------------------------------------------------------

@pytest.mark.parametrize("page_size, key, slot", [(1, (7, 8, 9, 10), 7), (2, (7, 8, 9, 10), (7, 8)),
                                                  (4, (7, 8, 9, 10), (7, 8, 9, 10))])
def test_child_key_is_the_first_token_or_the_first_page(page_size, key, slot):
    cache = make_cache(page_size=page_size)
    assert cache.child_key(key) == slot


def test_attach_puts_a_node_in_its_slot_and_reports_the_node_it_displaced():
    cache = make_cache()
    rec = recorded(cache)
    parent = cache.root_node
    first, second = cache._new_node((5, 6)), cache._new_node((5, 7))
    cache.cuts = []
    cache._attach(parent, first)
    cache._attach(parent, first)  # the same node again: nothing displaced
    assert (parent.children, cache.cuts) == ({5: first}, [])
    cache._attach(parent, second)
    assert (parent.children, cache.cuts) == ({5: second}, [(first, None, None)])
    third = cache._new_node((9,))
    cache._attach(parent, third, key=(6, 1))  # the slot comes from ``key`` when given, not the node's own key
    assert parent.children == {5: second, 6: third}
    assert events(rec) == [
        ("attach", 7, "attach [5,6]#7 under []#2 at slot 5", dict(parent=2, slot="5", replaced=None)),
        ("attach", 7, "attach [5,6]#7 under []#2 at slot 5", dict(parent=2, slot="5", replaced=7)),
        ("attach", 8, "attach [5,7]#8 under []#2 at slot 5", dict(parent=2, slot="5", replaced=7)),
        ("attach", 9, "attach [9]#9 under []#2 at slot 6", dict(parent=2, slot="6", replaced=None))]
    assert cache.detach_count == 0


def test_attach_without_a_cut_list_or_recorder_only_sets_the_slot():
    cache = make_cache(page_size=2)
    first, second = cache._new_node((5, 6)), cache._new_node((5, 6, 1, 1))
    cache._attach(cache.root_node, first)
    cache._attach(cache.root_node, second)
    assert (cache.root_node.children, cache.cuts) == ({(5, 6): second}, None)


def test_detach_pops_whatever_the_slot_holds_counts_it_and_reports_the_cut():
    cache = make_cache()
    finished(cache, [1, 2], [1, 2, 3], [4])
    rec = recorded(cache)
    cache.cuts = []
    a, b, c = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3]), node_at(cache, [4])
    assert cache._detach(cache.root_node, a) is a
    assert cache._detach(cache.root_node, a) is None  # the slot is empty now
    impostor = cache._new_node((3, 9))
    assert cache._detach(a, impostor) is b  # the slot of ``impostor``'s key held another node
    assert (cache.root_node.children, a.children, cache.detach_count) == ({4: c}, {}, 3)
    assert cache.cuts == [(a, a, True), (a, None, True), (impostor, b, False)]
    assert events(rec) == [
        ("detach", 7, "detach [1,2]#7 from []#2 slot 1", dict(parent=2, slot="1", popped=7)),
        ("detach", 7, "detach [1,2]#7 from []#2 slot 1 (the slot held none)", dict(parent=2, slot="1", popped=None)),
        ("detach", 10, "detach [3,9]#10 from [1,2]#7 slot 3 (the slot held [3]#8)",
         dict(parent=7, slot="3", popped=8))]


def test_detach_without_a_cut_list_still_counts():
    cache = make_cache()
    finished(cache, [1, 2])
    assert cache._detach(cache.root_node, node_at(cache, [1, 2])).key == (1, 2)
    assert (cache.detach_count, cache.cuts, cache.root_node.children) == (1, None, {})


def test_pop_from_parent_returns_the_parent_or_raises_sglangs_message_when_the_slot_held_another_node():
    cache = make_cache(page_size=2)
    finished(cache, [1, 2, 3, 4], [1, 2, 5, 6])
    parent, leaf = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3, 4])
    assert cache._pop_from_parent(leaf) is parent and list(parent.children) == [(5, 6)]
    with pytest.raises(CacheAssertion) as raised:
        cache._pop_from_parent(leaf)
    assert str(raised.value) == "parent does not have child key, (3, 4)"
    assert cache.detach_count == 2


# --- host Mamba frees -----------------------------------------------------------------------------------------------

def test_free_host_mamba_frees_the_slot_whether_or_not_the_node_is_in_the_host_list():
    cache = make_cache()
    finished(cache, [1, 2], [3, 4])
    cache.controller.complete_writes(64)
    cache.check_hicache_events()
    a, b = node_at(cache, [1, 2]), node_at(cache, [3, 4])
    assert (a.mamba_host_value, b.mamba_host_value) == ([0], [1])
    cache._free_host_mamba(a)
    cache.mamba_host_lru_list.remove_node(b)
    cache._free_host_mamba(b)
    cache._free_host_mamba(b)  # nothing left: no second free
    assert (a.mamba_host_value, b.mamba_host_value, snapshot(cache)["host_mamba_lru"]) == (None, None, [])
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7, 0, 1]
    assert cache.pools.host_mamba.double_frees == []


# --- leaf sets ------------------------------------------------------------------------------------------------------

def device_pair():
    """[1,2] with child [3], both on the device, no host copies (write-back)."""
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3])
    return cache, node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])


def test_device_leaf_status_admits_an_unlocked_device_node_without_device_children():
    cache, parent, leaf = device_pair()
    leaves = cache.evictable_full_device_leaves
    assert set(leaves) == {leaf}
    leaf.full_lock_ref = 1
    cache._update_full_device_leaf_status(leaf)
    assert set(leaves) == set()
    leaf.full_lock_ref = 0
    cache._update_full_device_leaf_status(leaf)
    cache._update_full_device_leaf_status(parent)  # a child on the device: not a leaf
    assert set(leaves) == {leaf}
    leaf.value = None  # its only child evicted: now it is
    cache._update_full_device_leaf_status(parent)
    cache._update_full_device_leaf_status(leaf)  # evicted itself: not a device leaf
    assert set(leaves) == {parent}
    cache.root_node.full_lock_ref = 0
    cache.root_node.children = {}
    cache._update_full_device_leaf_status(cache.root_node)  # the root never is, locked or not
    assert set(leaves) == {parent}


def host_pair(predicate):
    """[1,2] with child [3], evicted from the device, both backed up (write-through)."""
    flags = dataclasses.replace(preset("pre_fix"), host_leaf_predicate=predicate)
    cache = make_cache("write_through", flags=flags)
    finished(cache, [1, 2], [1, 2, 3])
    cache.controller.complete_writes(64)
    cache.check_hicache_events()
    cache.evict(32)
    parent, leaf = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    assert (parent.value, leaf.value, parent.host_value, leaf.host_value) == (None, None, [0, 1], [2])
    return cache, parent, leaf


@pytest.mark.parametrize("predicate", ["loop_old", "no_children"])
def test_host_leaf_status_admits_an_evicted_backed_up_unreferenced_node_with_no_backed_up_evicted_child(predicate):
    cache, parent, leaf = host_pair(predicate)
    leaves = cache.evictable_full_host_leaves
    assert set(leaves) == {leaf}
    cache._update_full_host_leaf_status(parent)
    assert set(leaves) == {leaf}  # its child is evicted and backed up
    for field in ("host_ref_counter", "host_mamba_ref_counter"):
        setattr(leaf, field, 1)
        cache._update_full_host_leaf_status(leaf)
        assert set(leaves) == set(), field
        setattr(leaf, field, 0)
        cache._update_full_host_leaf_status(leaf)
        assert set(leaves) == {leaf}, field
    leaf.value = [5]  # back on the device: not a host leaf
    cache._update_full_host_leaf_status(leaf)
    assert set(leaves) == set()
    leaf.value, leaf.host_value = None, None  # evicted, no host copy: neither a host leaf nor in the parent's way
    cache._update_full_host_leaf_status(leaf)
    cache._update_full_host_leaf_status(parent)
    # the old loop only looks for an evicted, backed-up child; the new predicate refuses any child
    assert set(leaves) == ({parent} if predicate == "loop_old" else set())
    leaf.value = [5]  # a device child: the old loop still admits the parent
    cache._update_full_host_leaf_status(parent)
    assert set(leaves) == ({parent} if predicate == "loop_old" else set())
    cache.root_node.value, cache.root_node.host_value, cache.root_node.children = None, [], {}
    cache._update_full_host_leaf_status(cache.root_node)  # never the root
    assert cache.root_node not in leaves


def test_update_leaf_status_updates_both_sets_and_discard_leaves_both():
    cache, parent, leaf = device_pair()
    leaf.host_value = [0]
    leaf.value = None
    cache._update_leaf_status(leaf)
    assert (set(cache.evictable_full_device_leaves), set(cache.evictable_full_host_leaves)) == (set(), {leaf})
    leaf.value, leaf.host_value = [2], None
    cache._update_leaf_status(leaf)
    assert (set(cache.evictable_full_device_leaves), set(cache.evictable_full_host_leaves)) == ({leaf}, set())
    cache.evictable_full_host_leaves.add(leaf)
    cache._discard_from_leaf_sets(leaf)
    assert (set(cache.evictable_full_device_leaves), set(cache.evictable_full_host_leaves)) == (set(), set())


# --- locks ----------------------------------------------------------------------------------------------------------

def test_lock_walk_skips_evicted_nodes_and_moves_the_mamba_state_only_on_its_first_and_last_lock():
    """[1,2]/[3]/[4]: [4] evicted to the host (it keeps no device Mamba state), [3] locked: a lock on [4] walks past
    it, locks [3] (already locked: no size change) and [1,2] (2 tokens change sides)."""
    cache = make_cache("write_through")
    finished(cache, [1, 2], [1, 2, 3], [1, 2, 3, 4])
    cache.controller.complete_writes(64)
    cache.check_hicache_events()
    a, b, c = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3]), node_at(cache, [1, 2], [3], [4])
    assert cache.evict(1) == (1, 1) and c.value is None
    assert cache.inc_lock_ref(b) == -3
    rec = recorded(cache)
    assert cache.inc_lock_ref(c) == -0
    assert cache.sizes() == dict(full_evictable=0, full_protected=3, mamba_evictable=1, mamba_protected=1)
    assert (a.full_lock_ref, b.full_lock_ref, c.full_lock_ref, b.mamba_lock_ref, c.mamba_lock_ref) == (2, 2, 0, 1, 0)
    assert cache.dec_lock_ref(c) == 0
    assert cache.dec_lock_ref(b) == 3
    assert (a.full_lock_ref, b.full_lock_ref, b.mamba_lock_ref) == (0, 0, 0)
    assert cache.sizes() == dict(full_evictable=3, full_protected=0, mamba_evictable=2, mamba_protected=0)
    assert snapshot(cache)["device_leaves"] == ["1,2/3"]
    assert events(rec) == [
        ("lock", 8, "lock [3]#8 (full_lock_ref=2)", dict(change=1, full_lock_ref=2)),
        ("lock", 7, "lock [1,2]#7 (full_lock_ref=2)", dict(change=1, full_lock_ref=2)),
        ("lock", 8, "unlock [3]#8 (full_lock_ref=1)", dict(change=-1, full_lock_ref=1)),
        ("lock", 7, "unlock [1,2]#7 (full_lock_ref=1)", dict(change=-1, full_lock_ref=1)),
        ("lock", 8, "unlock [3]#8 (full_lock_ref=0)", dict(change=-1, full_lock_ref=0)),
        ("lock", 7, "unlock [1,2]#7 (full_lock_ref=0)", dict(change=-1, full_lock_ref=0))]


def test_mamba_lock_counts_change_sides_only_between_zero_and_one():
    cache = make_cache("write_back")
    finished(cache, [1, 2])
    node = node_at(cache, [1, 2])
    node.mamba_value = [0, 1]  # two slots, so a size of 1 and of 2 differ
    cache.mamba_evictable_size_ = 2
    for _ in range(3):
        cache.inc_lock_ref(node)
    assert (node.mamba_lock_ref, cache.sizes()) == (3, dict(full_evictable=0, full_protected=2, mamba_evictable=0,
                                                            mamba_protected=2))
    cache.dec_lock_ref(node)
    cache.dec_lock_ref(node)
    assert (node.mamba_lock_ref, cache.sizes()) == (1, dict(full_evictable=0, full_protected=2, mamba_evictable=0,
                                                            mamba_protected=2))
    assert cache.dec_lock_ref(node) == 2
    assert (node.mamba_lock_ref, cache.sizes()) == (0, dict(full_evictable=2, full_protected=0, mamba_evictable=2,
                                                            mamba_protected=0))
    node.full_lock_ref = 1  # a full lock without a Mamba lock: the Mamba count stays put
    assert cache.dec_lock_ref(node) == 2
    assert (node.mamba_lock_ref, cache.sizes()) == (0, dict(full_evictable=4, full_protected=-2, mamba_evictable=2,
                                                            mamba_protected=0))


def test_lock_walk_asserts_with_sglangs_messages_on_bad_counts():
    cache = make_cache("write_back")
    finished(cache, [1, 2], [1, 2, 3])
    leaf = node_at(cache, [1, 2], [3])
    with pytest.raises(CacheAssertion) as raised:
        cache.dec_lock_ref(leaf)
    assert str(raised.value) == "dec_lock_ref on node with node.full_lock_ref=0, node.id=8"
    leaf.full_lock_ref = -1
    with pytest.raises(CacheAssertion) as raised:
        cache.inc_lock_ref(leaf)
    assert str(raised.value) == "inc_lock_ref on node with node.full_lock_ref=-1, node.id=8"


def test_a_locked_leaf_leaves_the_device_leaf_set_and_rejoins_it_when_unlocked():
    cache, parent, leaf = device_pair()
    assert cache.inc_lock_ref(leaf) == -3
    assert set(cache.evictable_full_device_leaves) == set()
    assert cache.dec_lock_ref(leaf) == 3
    assert set(cache.evictable_full_device_leaves) == {leaf}


def test_sizes_names_each_counter():
    cache = make_cache()
    cache.full_evictable_size_, cache.full_protected_size_ = 1, 2
    cache.mamba_evictable_size_, cache.mamba_protected_size_ = 3, 4
    assert cache.sizes() == dict(full_evictable=1, full_protected=2, mamba_evictable=3, mamba_protected=4)


# --- the recorder switch and the untraced class ---------------------------------------------------------------------

def test_attaching_and_detaching_a_recorder_swaps_the_class_and_rebinds_the_controller_hooks():
    cache = make_cache()
    rec = recorded(cache)
    assert type(cache) is HiMambaRadixCache and cache.recorder is rec
    assert cache.controller.evict_mamba == cache.evict_mamba and cache.controller.evict_mamba.__func__ is \
        HiMambaRadixCache.evict_mamba
    cache.recorder = None
    assert type(cache) is _UntracedCache
    assert cache.controller.evict_mamba.__func__ is _UntracedCache.__dict__["evict_mamba"]


def simulated_methods():
    """name -> the function ``@simulated`` wrapped, for every simulated method of the cache and its mixins (found by
    the wrapper's code, which every ``simulated`` call shares)."""
    wrapper = vars(HiMambaRadixCache)["inc_lock_ref"].__code__
    out = {}
    for klass in reversed(HiMambaRadixCache.__mro__):
        for name, attr in vars(klass).items():
            if getattr(attr, "__code__", None) is wrapper:
                out[name] = attr.__wrapped__
    return out


@pytest.fixture
def untraced_class_saved():
    saved = dict(vars(_UntracedCache))
    yield
    for name in list(vars(_UntracedCache)):
        if name not in saved:
            delattr(_UntracedCache, name)
    for name, value in saved.items():
        if name not in ("__dict__", "__weakref__", "__doc__"):
            setattr(_UntracedCache, name, value)


def test_unwrap_simulated_puts_every_simulated_methods_own_function_on_the_untraced_class(untraced_class_saved):
    expected = simulated_methods()
    assert {"inc_lock_ref", "dec_lock_ref", "match_prefix", "insert", "evict", "evict_host", "cache_finished_req",
            "write_backup"} <= set(expected)
    for name in expected:
        delattr(_UntracedCache, name)
    cache_module._unwrap_simulated()
    got = {name: attr for name, attr in vars(_UntracedCache).items() if name in expected}
    assert got == expected
    wrapper = vars(HiMambaRadixCache)["inc_lock_ref"].__code__
    assert not any(attr.__code__ is wrapper for attr in got.values())  # none is the recorder's wrapper
    extra = {name for name in vars(_UntracedCache) if name not in expected and not name.startswith("__")}
    assert extra == {"recorder"}  # the one thing the class adds besides the unwrapped methods: a C-speed getter
    prop = vars(_UntracedCache)["recorder"]
    assert prop.fset is HiMambaRadixCache.recorder.fset and prop.fget(SimpleNamespace(_recorder="r")) == "r"


def test_the_untraced_class_runs_the_same_cache_without_telling_anyone():
    traced, untraced = make_cache(), make_cache()
    rec = recorded(traced)
    for cache in (traced, untraced):
        finished(cache, [1, 2], [1, 2, 3])
        cache.controller.complete_writes(64)
        cache.check_hicache_events()
    assert snapshot(traced) == snapshot(untraced) and free_lists(traced) == free_lists(untraced)
    assert len(rec.steps) > 0 and type(untraced) is _UntracedCache
    assert isinstance(untraced.root_node, TreeNode)


def test_a_cache_built_with_a_recorder_starts_traced_and_reports_to_it():
    from simcache.config import CacheConfig
    rec = Recorder(snapshots=False, invariants=False)
    cache = HiMambaRadixCache(CacheConfig(), recorder=rec)
    assert cache.recorder is rec and type(cache) is HiMambaRadixCache
    assert cache.controller.evict_mamba.__func__ is HiMambaRadixCache.evict_mamba


def test_a_device_leaf_that_gains_a_device_child_leaves_the_device_leaf_set():
    cache = make_cache("write_back")
    finished(cache, [1, 2])
    assert snapshot(cache)["device_leaves"] == ["1,2"]
    cache.insert([1, 2, 3], [0, 1, 2], [1])  # no request lock on [1,2]: only the child's arrival takes it out
    assert snapshot(cache)["device_leaves"] == ["1,2/3"]


@pytest.mark.parametrize("predicate", ["loop_old", "no_children"])
def test_a_host_leaf_whose_child_is_evicted_and_backed_up_leaves_the_host_leaf_set(predicate):
    cache, parent, leaf = host_pair(predicate)
    cache.evictable_full_host_leaves.add(parent)  # listed before its child was evicted
    cache._update_full_host_leaf_status(parent)
    assert set(cache.evictable_full_host_leaves) == {leaf}
