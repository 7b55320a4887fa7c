"""LRUList: the eviction order of device KV, device Mamba states and host Mamba states.

Nodes here are bare ``TreeNode`` objects (ids 7, 8, 9, ... as a fresh cache would number them) linked by hand:
``root -> a -> b -> c`` plus a sibling ``x`` under the root. Refusals raise SGLang's assertion text and leave the
list unchanged.
"""
from __future__ import annotations

import pytest

from simcache.errors import CacheAssertion
from simcache.lru import LRUList
from simcache.node import TreeNode


def _tree():
    root = TreeNode(2, 0.0)
    a, b, c, x = (TreeNode(i, float(i), key) for i, key in ((7, (1,)), (8, (2,)), (9, (3,)), (10, (5,))))
    a.parent, b.parent, c.parent, x.parent = root, a, b, root
    for n in (a, b, c, x):
        n.value = [n.id]
        n.mamba_value = [n.id]
        n.mamba_host_value = [n.id]
    return root, a, b, c, x


def ids(lru: LRUList) -> list[int]:
    return lru.ids_mru_to_lru()


def test_insert_puts_at_the_mru_end_reset_moves_there_remove_unlinks():
    _, a, b, c, _ = _tree()
    lru = LRUList("full")
    for n in (a, b, c):
        lru.insert_mru(n)
    assert ids(lru) == [9, 8, 7] and len(lru) == 3

    lru.reset_node_mru(a)
    assert ids(lru) == [7, 9, 8]

    lru.remove_node(c)
    assert ids(lru) == [7, 8]
    assert (lru.in_list(a), lru.in_list(b), lru.in_list(c), lru.in_list(None)) == (True, True, False, False)


def test_reset_node_and_parents_puts_the_child_ahead_of_its_ancestors():
    root, a, b, c, x = _tree()
    lru = LRUList("full")
    for n in (c, b, a, x):
        lru.insert_mru(n)
    assert ids(lru) == [10, 7, 8, 9]

    lru.reset_node_and_parents_mru(c, root)

    assert ids(lru) == [9, 8, 7, 10]  # c, then its parent b, then a; the unrelated x is now least recent


def test_the_mamba_list_resets_only_ancestors_that_hold_a_device_mamba_state():
    root, a, b, c, x = _tree()
    lru = LRUList("mamba")
    for n in (c, a, x):
        lru.insert_mru(n)
    b.mamba_value = None  # b is a tombstone, never in the Mamba list

    lru.reset_node_and_parents_mru(c, root)

    assert ids(lru) == [9, 7, 10]


def test_reset_node_and_parents_requires_each_qualifying_node_to_be_listed():
    root, _, _, c, x = _tree()
    lru = LRUList("full")
    lru.insert_mru(c)
    lru.insert_mru(x)
    with pytest.raises(CacheAssertion) as e:
        lru.reset_node_and_parents_mru(c, root)
    assert str(e.value) == "Resetting node node.id=8 not in lru list when resetting node and parents mru"


def test_lru_walk_skips_locked_nodes_toward_the_mru_end():
    _, a, b, c, x = _tree()
    lru = LRUList("full")
    for n in (a, b, c, x):
        lru.insert_mru(n)
    assert ids(lru) == [10, 9, 8, 7]
    assert lru.get_lru_no_lock() is a

    a.full_lock_ref = 1
    b.full_lock_ref = 2
    assert lru.get_lru_no_lock() is c
    assert lru.get_prev_no_lock(a) is c  # a itself may be locked; the walk starts at its neighbour
    assert lru.get_prev_no_lock(c) is x
    assert lru.get_prev_no_lock(x) is None  # x is the MRU end

    x.full_lock_ref = c.full_lock_ref = 1
    assert lru.get_lru_no_lock() is None
    assert ids(lru) == [10, 9, 8, 7]  # walking never reorders


def test_the_full_list_ignores_mamba_locks_and_the_mamba_lists_ignore_full_locks():
    _, a, b, _, _ = _tree()
    full, mamba, host = LRUList("full"), LRUList("mamba"), LRUList("host_mamba")
    for lru in (full, mamba, host):
        lru.insert_mru(a)
        lru.insert_mru(b)
    a.mamba_lock_ref = 1
    assert (full.get_lru_no_lock(), mamba.get_lru_no_lock(), host.get_lru_no_lock()) == (a, b, b)
    a.mamba_lock_ref, a.full_lock_ref = 0, 1
    assert (full.get_lru_no_lock(), mamba.get_lru_no_lock(), host.get_lru_no_lock()) == (b, a, a)
    # as in SGLang, the host Mamba list walks by mamba_lock_ref: a host-mamba ref does not hide a node
    a.full_lock_ref, a.host_mamba_ref_counter = 0, 1
    assert host.get_lru_no_lock() is a


def test_an_empty_list_has_no_candidate():
    lru = LRUList("mamba")
    assert lru.get_lru_no_lock() is None and ids(lru) == [] and len(lru) == 0


@pytest.mark.parametrize("kind, message", [
    ("mamba", "Inserting mamba tombstone node in mamba lru list: node.id=7"),
    ("host_mamba", "Inserting host mamba tombstone node in lru list: node.id=7"),
])
def test_mamba_lists_refuse_to_insert_a_tombstone(kind, message):
    _, a, b, _, _ = _tree()
    lru = LRUList(kind)
    lru.insert_mru(b)
    a.mamba_value = a.mamba_host_value = None
    with pytest.raises(CacheAssertion) as e:
        lru.insert_mru(a)
    assert str(e.value) == message
    assert ids(lru) == [8] and not lru.in_list(a)


@pytest.mark.parametrize("kind, reset_msg, remove_msg", [
    ("mamba", "Resetting mamba tombstone node in mamba lru list: node.id=7",
     "Removing mamba tombstone node from mamba lru list: node.id=7"),
    ("host_mamba", "Resetting host mamba tombstone node in lru list: node.id=7",
     "Removing host mamba tombstone node from lru list: node.id=7"),
])
def test_a_member_that_lost_its_state_can_be_neither_reset_nor_removed(kind, reset_msg, remove_msg):
    _, a, b, _, _ = _tree()
    lru = LRUList(kind)
    lru.insert_mru(a)
    lru.insert_mru(b)
    a.mamba_value = a.mamba_host_value = None  # a tombstone wrongly still listed

    with pytest.raises(CacheAssertion) as e:
        lru.reset_node_mru(a)
    assert str(e.value) == reset_msg
    with pytest.raises(CacheAssertion) as e:
        lru.remove_node(a)
    assert str(e.value) == remove_msg
    assert ids(lru) == [8, 7]

    assert lru.force_remove(a) is True  # the review's unconditional removal bypasses the check
    assert ids(lru) == [8] and lru.force_remove(a) is False


def test_the_full_list_accepts_nodes_without_mamba_state():
    _, a, _, _, _ = _tree()
    a.mamba_value = a.mamba_host_value = None
    lru = LRUList("full")
    lru.insert_mru(a)
    lru.reset_node_mru(a)
    lru.remove_node(a)
    assert ids(lru) == []


@pytest.mark.parametrize("kind, insert_msg, remove_msg, reset_msg", [
    ("full", "Inserting node node.id=7 already in lru list, existing node: self.cache[node.id].id=7",
     "Removing node node.id=8 not in lru list", "Resetting node node.id=8 not in lru list"),
    ("mamba", "Inserting node node.id=7 already in lru list, existing node: self.cache[node.id].id=7",
     "Removing node node.id=8 not in lru list", "Resetting node node.id=8 not in lru list"),
    ("host_mamba", "Inserting node node.id=7 already in host mamba lru list",
     "Removing node node.id=8 not in host mamba lru", "Resetting node node.id=8 not in host mamba lru"),
])
def test_membership_refusals(kind, insert_msg, remove_msg, reset_msg):
    _, a, b, _, _ = _tree()
    lru = LRUList(kind)
    lru.insert_mru(a)
    for action, node, message in ((lru.insert_mru, a, insert_msg), (lru.remove_node, b, remove_msg),
                                  (lru.reset_node_mru, b, reset_msg),
                                  (lru.get_prev_no_lock, b, "Getting prev of node node.id=8 not in lru list")):
        with pytest.raises(CacheAssertion) as e:
            action(node)
        assert str(e.value) == message
    assert ids(lru) == [7]


def test_membership_is_by_node_id():
    _, a, _, _, _ = _tree()
    lru = LRUList("full")
    lru.insert_mru(a)
    twin = TreeNode(7, 0.0, (9,))  # another object with a's id: SGLang's in-list test cannot tell them apart
    assert lru.in_list(twin)


def test_list_names_are_sglangs():
    assert [LRUList(k).name for k in LRUList.KINDS] == ["full_lru_list", "mamba_lru_list", "mamba_host_lru_list"]
