"""Exact outcomes of ``lru.py`` beyond ``test_lru.py``: the kept eviction heap of ``OrderedLeafSet`` (entries,
compaction, clearing) and ``EvictionRound``'s walk. Written for the mutation run (``benchmarks/mutation.py``).
"""
from __future__ import annotations

import pytest

from simcache.lru import _COMPACT_SLACK, EvictionRound, LRUList, OrderedLeafSet
from simcache.node import TreeNode


def node(i, t):
    return TreeNode(i, float(t), (i,))


def test_add_pushes_one_entry_per_new_member_and_none_for_a_member():
    s = OrderedLeafSet("leaves")
    a, b = node(1, 5), node(2, 3)
    s.add(a)
    s.add(b)
    s.add(a)
    assert list(s) == [a, b] and sorted(s.heap) == [(3.0, b), (5.0, a)] and s.log is None and s.ordered()


def test_the_heap_is_compacted_once_it_holds_more_than_twice_the_members_plus_the_slack():
    s = OrderedLeafSet("leaves")
    keep = node(0, 0)
    s.add(keep)
    for i in range(1, _COMPACT_SLACK + 2):  # former members leave entries behind
        n = node(i, i)
        s.add(n)
        s.discard(n)
    assert len(s.heap) == 2 + _COMPACT_SLACK  # 2 * 1 member + slack: not more, so not compacted yet
    extra, other, last = node(99, 99), node(100, 100), node(101, 101)
    s.add(extra)
    s.discard(extra)
    s.add(other)  # 4 + slack entries for 2 members: exactly the limit, kept
    assert len(s.heap) == 4 + _COMPACT_SLACK
    s.discard(other)
    s.add(last)  # 5 + slack entries > 2 * 2 members + slack: compacted to the members' entries
    assert sorted(s.heap) == [(0.0, keep), (101.0, last)]


def test_clear_empties_the_set_and_the_heap_and_a_set_without_a_heap_keeps_none():
    s = OrderedLeafSet("leaves")
    s.add(node(1, 1))
    s.clear()
    assert (list(s), s.heap) == ([], [])
    s.heap = None
    s.add(node(2, 2))
    s.clear()
    assert (list(s), s.heap, s.ordered()) == ([], None, False)


def test_a_round_walks_members_oldest_first_and_ends_when_the_heap_is_empty():
    s = OrderedLeafSet("leaves")
    a, b, c = node(1, 3), node(2, 1), node(3, 2)
    for n in (a, b, c):
        s.add(n)
    r = EvictionRound(s)
    assert not s.ordered()
    got = []
    while (x := r.next()) is not None:
        got.append(x)
        s.discard(x)
    r.close()
    assert got == [b, c, a] and list(s) == [] and s.ordered() and type(s) is OrderedLeafSet


def backward(lru):
    out, x = [], lru.tail.prev
    while x is not lru.head:
        out.append(x.node.id)
        assert x.next.prev is x and x.prev.next is x
        x = x.prev
    return out


def check_links(lru):
    assert backward(lru) == list(reversed(lru.ids_mru_to_lru()))
    assert len(lru) == len(lru.ids_mru_to_lru()) == len(lru.cache)
    assert lru.head.prev is None and lru.tail.next is None


def nodes_under_root():
    root = TreeNode(2, 0.0)
    out = []
    parent = root
    for i, key in ((7, (1,)), (8, (2,)), (9, (3,)), (10, (5,))):
        n = TreeNode(i, float(i), key)
        n.parent = parent if i != 10 else root
        n.value = n.mamba_value = n.mamba_host_value = [i]
        out.append(n)
        if i != 10:
            parent = n
    return root, out


def test_every_change_keeps_both_link_directions_and_tells_the_observer_what_joined_and_left():
    root, (a, b, c, x) = nodes_under_root()
    lru = LRUList("mamba")
    seen = []
    lru.observer = lambda kind, what, node: seen.append((kind, what, node.id))
    check_links(lru)
    for n in (a, b, c, x):
        lru.insert_mru(n)
        check_links(lru)
    assert lru.ids_mru_to_lru() == [10, 9, 8, 7]
    lru.reset_node_mru(b)
    check_links(lru)
    assert lru.ids_mru_to_lru() == [8, 10, 9, 7]
    lru.reset_node_mru(b)  # already the MRU member
    check_links(lru)
    assert lru.ids_mru_to_lru() == [8, 10, 9, 7]
    lru.reset_node_and_parents_mru(c, root)
    check_links(lru)
    assert lru.ids_mru_to_lru() == [9, 8, 7, 10]
    lru.remove_node(b)
    check_links(lru)
    assert lru.force_remove(x) is True and lru.force_remove(x) is False
    check_links(lru)
    assert lru.ids_mru_to_lru() == [9, 7]
    assert seen == [("mamba", "insert", 7), ("mamba", "insert", 8), ("mamba", "insert", 9), ("mamba", "insert", 10),
                    ("mamba", "remove", 8), ("mamba", "remove", 10)]


def test_the_walk_toward_the_mru_end_skips_locked_members_by_the_lists_own_lock():
    _, (a, b, c, x) = nodes_under_root()
    full, mamba = LRUList("full"), LRUList("host_mamba")
    for lru in (full, mamba):
        for n in (a, b, c, x):
            lru.insert_mru(n)
    b.full_lock_ref, c.mamba_lock_ref, a.mamba_lock_ref = 1, 1, 2
    assert (full.get_lru_no_lock(), mamba.get_lru_no_lock()) == (a, b)
    assert (full.get_prev_no_lock(a), mamba.get_prev_no_lock(b)) == (c, x)
    assert (full.get_prev_no_lock(x), mamba.get_prev_no_lock(x)) == (None, None)
    x.full_lock_ref = x.mamba_lock_ref = 1
    assert (full.get_prev_no_lock(c), mamba.get_prev_no_lock(b)) == (None, None)
    b.mamba_lock_ref = 1
    assert mamba.get_lru_no_lock() is None


def leaf_set(*members):
    s = OrderedLeafSet("leaves")
    for n in members:
        s.add(n)
    return s


def walk(r, s, evict=True):
    got = []
    while (x := r.next()) is not None:
        got.append(x.id)
        if evict:
            s.discard(x)
    return got


def test_a_round_takes_a_pushed_parent_in_time_order_and_keeps_a_late_joiner_for_the_next_call():
    p, a, b, c = node(1, 0.5), node(2, 1), node(3, 2), node(4, 3)
    s = leaf_set(a, b, c)
    r = EvictionRound(s)
    assert (r.next(), type(s).__name__, s.ordered()) == (a, "_RoundLeafSet", False)
    s.discard(a)
    s.add(p)  # a's parent became a leaf: SGLang pushes it onto this call's heap
    r.push_parent(p)
    assert r.next() is p
    s.discard(p)
    assert r.next() is b
    s.discard(b)
    late = node(5, 2.5)
    s.add(late)  # joined during the call without a push: SGLang's heap never saw it
    assert r.next() is c
    s.discard(c)
    assert r.next() is None
    r.close()
    assert (type(s), s.log, s.ordered(), list(s), s.heap) == (OrderedLeafSet, None, True, [late], [(2.5, late)])
    r2 = EvictionRound(s)
    assert walk(r2, s) == [5]
    r2.close()


def test_an_entry_whose_node_was_touched_since_goes_back_in_at_its_current_time():
    b, c = node(3, 2), node(4, 3)
    s = leaf_set(b, c)
    b.last_access_time = 3.5
    r = EvictionRound(s)
    assert walk(r, s) == [4, 3]
    r.close()


def test_a_start_member_is_visited_once_per_call_even_if_it_left_and_rejoined_or_stayed():
    a, b = node(2, 1), node(3, 2)
    s = leaf_set(a, b)
    r = EvictionRound(s)
    s.discard(a)
    s.add(a)  # left and came back before its entry was reached: still visited, once
    assert walk(r, s, evict=False) == [2, 3]
    r.close()
    r = EvictionRound(s)  # both stayed members: the next call visits both again, once each
    assert walk(r, s, evict=False) == [2, 3]
    r.close()
    assert sorted(n.id for n in s) == [2, 3]


def test_a_start_member_that_left_before_its_entry_is_skipped_for_the_rest_of_the_call():
    a, b = node(2, 1), node(3, 2)
    s = leaf_set(a, b)
    r = EvictionRound(s)
    s.discard(a)
    assert r.next() is b
    s.add(a)  # rejoined after its entry was skipped: SGLang's heap popped it once, already
    assert r.next() is None
    r.close()
    assert list(s) == [b, a] and sorted(s.heap) == [(1.0, a), (2.0, b)]


@pytest.mark.parametrize("former, compacted", [(1 + _COMPACT_SLACK, False), (2 + _COMPACT_SLACK, True)])
def test_closing_a_round_compacts_a_heap_grown_past_twice_the_members_plus_the_slack(former, compacted):
    keep = node(0, 0)
    s = leaf_set(keep)
    r = EvictionRound(s)
    for i in range(1, former + 1):  # adds during a round never compact
        n = node(i, i)
        s.add(n)
        s.discard(n)
    assert len(s.heap) == 1 + former
    r.close()
    assert s.heap == [(0.0, keep)] if compacted else len(s.heap) == 1 + former


def test_the_full_list_resets_every_ancestor_even_one_without_a_mamba_state():
    root = TreeNode(2, 0.0)
    a, b, x = node(7, 7), node(8, 8), node(10, 10)
    a.parent, b.parent, x.parent = root, a, root
    a.mamba_value, b.mamba_value, x.mamba_value = None, [8], [10]  # a is a tombstone
    full, mamba = LRUList("full"), LRUList("mamba")
    for n in (b, a, x):
        full.insert_mru(n)
    for n in (b, x):
        mamba.insert_mru(n)
    full.reset_node_and_parents_mru(b, root)
    mamba.reset_node_and_parents_mru(b, root)
    assert (full.ids_mru_to_lru(), mamba.ids_mru_to_lru()) == ([8, 7, 10], [8, 10])


def test_re_adding_a_member_during_a_round_keeps_it_a_start_member():
    a, b = node(2, 1), node(3, 2)
    s = leaf_set(a, b)
    r = EvictionRound(s)
    s.add(a)  # its status re-checked while still a leaf: nothing changes
    assert walk(r, s) == [2, 3]
    r.close()


def test_a_pushed_parent_that_left_the_set_is_skipped_and_the_walk_goes_on():
    a, c, p = node(2, 1), node(4, 3), node(1, 0.5)
    s = leaf_set(a, c)
    r = EvictionRound(s)
    assert r.next() is a
    s.discard(a)
    s.add(p)
    r.push_parent(p)
    s.discard(p)  # locked again before its turn
    assert r.next() is c
    s.discard(c)
    assert r.next() is None
    r.close()


def test_a_pushed_parent_waits_for_older_start_members():
    a, b, p = node(2, 1), node(3, 2), node(1, 3)
    s = leaf_set(a, b)
    r = EvictionRound(s)
    assert r.next() is a
    s.discard(a)
    s.add(p)
    r.push_parent(p)
    assert walk(r, s) == [3, 1]
    r.close()
