"""Exact outcomes of ``lru.py`` beyond ``test_lru.py``: the kept eviction heap of ``OrderedLeafSet`` (entries,
compaction, clearing) and ``EvictionRound``'s walk. Written for the mutation run (``benchmarks/mutation.py``).
"""
from __future__ import annotations

from simcache.lru import _COMPACT_SLACK, EvictionRound, OrderedLeafSet
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
