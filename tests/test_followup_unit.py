"""SGLang's own unit test from PR #23696, ``test_hi_mamba_tombstone_cleanup_respects_host_ref``, re-expressed.

The state, built by hand as the original does: the root holds ``parent`` (key [1], one device slot, no Mamba state,
a host ref from ``protect_host()``, in the full LRU and the device-leaf set, counted evictable); ``deleted`` (key
[2]) names ``parent`` as its parent but is no longer among its children, as after a leaf deletion. The cascade
``_iteratively_delete_tombstone_leaf(deleted)`` then looks at a childless, unlocked tombstone ``parent``.
Under ``followup_fix`` the host ref stops it; before #23696 it deletes ``parent``.
"""
from __future__ import annotations

import pytest
from helpers import make_cache, snapshot

from simcache.state import tree_slot_lines


def build(version: str):
    cache = make_cache("write_through", version)
    root = cache.root_node
    parent, deleted = cache._new_node((1,)), cache._new_node((2,))
    parent.parent, deleted.parent = root, parent
    parent.value = cache.pools.device_kv.alloc(1)
    parent.protect_host()
    cache._attach(root, parent)
    cache.full_lru_list.insert_mru(parent)
    cache.full_evictable_size_ = len(parent.value)
    cache.evictable_full_device_leaves.add(parent)
    frees = []  # what SGLang's RecordingCacheController records: every device and host free
    for pool in (cache.pools.device_kv, cache.pools.host_kv):
        pool.observer = lambda name, what, slots: frees.append((name, what, slots))
    return cache, parent, deleted, frees


def test_followup_fix_stops_the_cascade_at_a_host_referenced_parent():
    cache, parent, deleted, frees = build("followup_fix")
    assert tree_slot_lines(cache) == ["1 1 v=0 h=- m=- mh=-"]
    before = snapshot(cache)

    result = cache._iteratively_delete_tombstone_leaf(deleted)

    assert result == (deleted, 0, 0)  # the starting node, nothing evicted
    assert cache.root_node.children == {1: parent}
    assert cache.full_lru_list.in_list(parent)
    assert frees == []
    assert snapshot(cache) == before == dict(
        tree=["1 1 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=1 hmr=0"],
        sizes=dict(full_evictable=1, full_protected=0, mamba_evictable=0, mamba_protected=0),
        full_lru=["1"], mamba_lru=[], host_mamba_lru=[], device_leaves=["1"], host_leaves=[])


def test_followup_fix_also_respects_a_host_mamba_ref():
    cache, parent, deleted, frees = build("followup_fix")
    parent.release_host()
    parent.protect_host_mamba()
    assert cache._iteratively_delete_tombstone_leaf(deleted) == (deleted, 0, 0)
    assert cache.root_node.children == {1: parent} and frees == []


@pytest.mark.parametrize("version", ["pre_fix", "merged_fix"])
def test_before_the_followup_the_cascade_deletes_the_host_referenced_parent(version):
    cache, parent, deleted, frees = build(version)

    result = cache._iteratively_delete_tombstone_leaf(deleted)

    assert result == (parent, 1, 0)  # climbed to parent, freed its one device slot
    assert cache.root_node.children == {}
    assert not cache.full_lru_list.in_list(parent)
    assert frees == [("device_kv", "free", (0,))]
    assert parent.value == [0]  # freed but not cleared, as in SGLang: a later free of it would be a double free
    assert parent.host_ref_counter == 1  # whoever holds the ref still holds a now detached node
    assert snapshot(cache) == dict(
        tree=[], sizes=dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0),
        full_lru=[], mamba_lru=[], host_mamba_lru=[], device_leaves=[], host_leaves=[])


@pytest.mark.parametrize("version, deleted_from_tree", [("merged_fix", True), ("followup_fix", False)])
def test_a_host_referenced_parent_keeps_its_host_copy_either_way(version, deleted_from_tree):
    # Scenario A's mechanism: with a host copy too, merged_fix detaches the parent but, its host ref being held,
    # does not free the host copy; the holder (an L3 backup) later releases a node that is no longer in the tree.
    cache, parent, deleted, frees = build(version)
    parent.host_value = cache.pools.host_kv.alloc(1)
    frees.clear()

    cache._iteratively_delete_tombstone_leaf(deleted)

    assert (1 not in cache.root_node.children) == deleted_from_tree
    assert parent.host_value == [0]
    assert [f for f in frees if f[0] == "host_kv"] == []
