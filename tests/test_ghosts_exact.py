"""Ghosts, holders and violation marks, exactly, on small hand-built traces (plain data: ``render/ghosts.py`` reads
nothing else). Written for issue 19, so that every mutant of ``render/ghosts.py`` changes a whole outcome.

Story of trace G (three operations: micro-steps 0-2, 3-7, 8-10; it raised at step 10):
- #5 [3] goes stale at step 1, is cleaned up at step 2 (drawn green to the end of that operation, then dropped),
  goes stale again at step 4 while the insert loop holds it, and stays a ghost: held through its detached child's
  parent pointer while a leaf set holds that child (steps 4-7), by nothing from step 8 on;
- #10 goes stale but is attached again, #11 goes stale but is in no snapshot: neither is drawn;
- #7 [5] goes stale at step 3 inside ``insert()`` and is cleaned up by ``_cleanup_stale_node`` at step 5; it is
  drawn until its operation ends (step 7), and holds a parent pointer at step 6 from its child #8, a held ghost;
- #8 [6] is deleted at step 6 (a detach that popped it) and is a ghost until its operation ends;
- #9 is stale in step 8's snapshot only;
- the cache raised at step 10 on #12 [9], the last node touched (a failed pop at step 9): the ghost lists who held
  it as it raised.
Each step's ghosts are compared whole, as are the per-step call frames they are read from (rebuilt when the trace
grows), the violations' marks and the highlight a view draws. The traces are built inside each test: a trace
kept across tests would keep its cached index from before a mutant was switched on.
"""
from __future__ import annotations

from types import SimpleNamespace as NS

import simcache.render.ghosts as gh
from simcache.render.ghosts import Ghost, call_holders, ghosts_at, highlight_at, holders_of, violation_nodes


class Trace:
    def __init__(self, steps, snapshots, ops, went_stale=(), cleaned_up=(), violations=(), crashed=None):
        self.steps, self.snapshots, self.ops, self.crashed = steps, snapshots, ops, crashed
        self.went_stale = [NS(step=s, node=n) for s, n in went_stale]
        self.cleaned_up = [NS(step=s, node=n) for s, n in cleaned_up]
        self.violations = list(violations)


class Slotted:  # a trace type that cannot be weakly referenced
    __slots__ = ("steps", "snapshots", "ops", "crashed", "went_stale", "cleaned_up", "violations")


def st(i, kind, stack=(), node=None, popped=None):
    return NS(index=i, kind=kind, stack=tuple(stack), node=node, detail={} if popped is None else {"popped": popped})


def nv(nid, key, parent, attached=False):
    return NS(id=nid, key=key, parent=parent, attached=attached)


NODES = {n.id: n for n in [nv(1, (), None, True), nv(2, (1, 2), 1, True), nv(5, (3,), 2), nv(15, (12,), 5),
                           nv(6, (4,), 5), nv(7, (5,), 2), nv(8, (6,), 7), nv(9, (7,), 2), nv(10, (8,), 2, True),
                           nv(12, (9,), 2), nv(13, (10,), 2, True)]}
LEAF = ("evictable_full_host_leaves",)
HOLDERS = {3: {6: LEAF}, 4: {5: ("insert loop's node",), 6: LEAF, 15: LEAF}, 5: {6: LEAF}, 6: {6: LEAF},
           7: {6: LEAF}, 10: {12: LEAF}}
IH, ID = ("insert",), ("insert", "_cleanup_stale_node")


def make_g():
    steps = [st(0, "begin"), st(1, "pop", node=5), st(2, "noop"),
             st(3, "call", IH, 7), st(4, "pop", IH, 5), st(5, "call", ID, 7), st(6, "detach", IH, 8, popped=8),
             st(7, "end"),
             st(8, "call", ("evict_host",), 13), st(9, "detach", ("evict_host",), 12, popped=0), st(10, "assertion")]
    snaps = [NS(root=1, nodes=NODES, holders=HOLDERS.get(i, {}), stale=(9,) if i == 8 else ()) for i in range(11)]
    ops = [NS(index=0, first_step=0, last_step=2), NS(index=1, first_step=3, last_step=7),
           NS(index=2, first_step=8, last_step=-1)]
    violations = [NS(step=4, op=1, invariant="backup_continuity", message="node 5 [3] lost it; node(s) [7, 8] too"),
                  NS(step=5, op=1, invariant="backup_continuity", message="node 5 [3] again"),
                  NS(step=6, op=7, invariant="x", message="node(s) [13, 5, ] (an operation not on record)"),
                  NS(step=9, op=2, invariant="tree_reachable", message="node 12 [9] unreachable")]
    return Trace(steps, snaps, ops, went_stale=[(1, 5), (2, 10), (2, 11), (3, 7), (4, 5)],
                 cleaned_up=[(2, 5), (5, 7)], violations=violations, crashed="AssertionError")


PTR6 = "parent pointer of [4]#6"
UNHELD5 = Ghost(5, "unheld", 4, (), "stale since step 4; held by nothing now")
EXPECTED = {
    0: {},
    1: {5: Ghost(5, "went-stale", 1, (), "WENT STALE")},
    2: {5: Ghost(5, "cleaned-up", 1, (), "CLEANED UP")},  # 10 is attached again, 11 in no snapshot
    3: {7: Ghost(7, "went-stale", 3, ("insert()",), "WENT STALE")},  # 5's cleanup was in an earlier operation
    4: {5: Ghost(5, "went-stale", 4, ("insert loop's node", "insert() (this step: pop)", PTR6,
                                      "parent pointer of [12]#15"), "WENT STALE"),
        7: Ghost(7, "stale", 3, ("insert()",), "STALE since step 3")},
    5: {5: Ghost(5, "stale", 4, (PTR6,), "STALE since step 4"),
        7: Ghost(7, "cleaned-up", 3, ("insert()", "_cleanup_stale_node() (cleaning it up)"), "CLEANED UP")},
    6: {5: Ghost(5, "stale", 4, (PTR6,), "STALE since step 4"),
        7: Ghost(7, "cleaned-up", 3, ("insert()", "parent pointer of [6]#8"), "CLEANED UP"),
        8: Ghost(8, "deleted", 6, ("insert() (this step: detach)",), "deleted at step 6")},
    7: {5: Ghost(5, "stale", 4, (PTR6,), "STALE since step 4"), 7: Ghost(7, "cleaned-up", 3, (), "CLEANED UP"),
        8: Ghost(8, "deleted", 6, (), "deleted at step 6")},
    8: {5: UNHELD5, 9: Ghost(9, "unheld", 8, (), "stale since step 8; held by nothing now")},
    9: {5: UNHELD5},
    10: {5: UNHELD5, 12: Ghost(12, "deleted", 10, ("evictable_full_host_leaves",
                                                   "evict_host() (raised here after: detach)"), "deleted at step 10")},
}


def test_every_steps_ghosts_whole():
    g = make_g()
    assert {s: ghosts_at(g, s) for s in range(11)} == EXPECTED
    assert [x.held for x in EXPECTED[8].values()] == [False, False] and EXPECTED[10][12].held


def test_a_trace_that_cannot_be_weakly_referenced_is_indexed_every_time_and_gives_the_same_ghosts():
    g, s = make_g(), Slotted()
    for name in Slotted.__slots__:
        setattr(s, name, getattr(g, name))
    assert {i: ghosts_at(s, i) for i in range(11)} == EXPECTED


def test_the_call_frames_per_step_are_cached_and_rebuilt_when_the_trace_grows():
    t = Trace([st(0, "begin"), st(1, "call", ["evict_host"], 5), st(2, "call", ["evict_host", "_evict_host_leaf"], 5),
               st(3, "call", ["evict_host", "_evict_host_leaf", "_iteratively_delete_tombstone_leaf"], 6),
               st(4, "detach", ["evict_host", "_evict_host_leaf", "_iteratively_delete_tombstone_leaf"], 6, 6),
               st(5, "detach", ["evict_host", "_evict_host_leaf", "_iteratively_delete_tombstone_leaf"], 5, 9),
               st(6, "call", ["evict_host", "_cleanup_stale_node"], 5),
               st(7, "write_ack", ["evict_host", "_cleanup_stale_node"], 5),
               st(8, "lru_remove", ["evict_host"], 7), st(9, "detach", ["evict_host"]), st(10, "call", [], 3)],
              [], [])
    e, d, i = ("evict_host", 5), ("_evict_host_leaf", 5), ("_iteratively_delete_tombstone_leaf", 6)
    idx = gh._index(t)
    assert (idx.length, idx.frames, idx.detaches) == (
        11, [(), (e,), (e, d), (e, d, i), (e, d, i), (e, d, i), (e, ("_cleanup_stale_node", 5)),
             (e, ("_cleanup_stale_node", 5)), (e,), (e,), ()], [(4, 6)])
    assert gh._INDEX[t] is idx and gh._index(t) is idx
    assert call_holders(t, 3, 5) == ["evict_host()", "_evict_host_leaf() (deleting it)"]
    assert call_holders(t, 3, 6) == call_holders(t, 4, 6) == ["_iteratively_delete_tombstone_leaf() (deleting it)"]
    assert call_holders(t, 5, 5) == ["evict_host()", "_evict_host_leaf() (deleting it)",
                                     "_iteratively_delete_tombstone_leaf() (this step: detach)"]
    assert call_holders(t, 6, 5) == call_holders(t, 7, 5) == ["evict_host()", "_cleanup_stale_node() (cleaning it up)"]
    assert call_holders(t, 8, 7) == ["evict_host() (this step: lru remove)"]
    assert call_holders(t, 8, 5) == ["evict_host()"]
    assert call_holders(t, 0, None) == [] and call_holders(t, 10, 3) == []
    t.steps.append(st(11, "call", ["insert"], 2))
    grown = gh._index(t)
    assert grown is not idx and grown.length == 12 and grown.frames[11] == (("insert", 2),) and grown.frames[:11] == \
        idx.frames


def test_holders_merge_by_function_name_the_snapshots_names_first():
    assert gh._merge(["a(x)", "b"], ["a() (deleting it)", "c() y", "c() z", "b() w"]) == ["a(x)", "b", "c() y"]
    g = make_g()
    assert holders_of(g, 4, 5) == ("insert loop's node", "insert() (this step: pop)")
    assert holders_of(g, 4, 6) == LEAF and holders_of(g, 0, 5) == ()


def test_at_most_eight_unheld_ghosts_the_most_recent_plus_the_touched_node_the_assertions_and_every_held_one():
    # one operation: steps 1-11 delete #101-#111 (a leaf set still holds #102), #120 went stale and was cleaned up
    # at step 0; step 12 touches #104, step 13 #101, and the cache raises at step 14 (so on #101)
    steps = [st(0, "begin")] + [st(i, "detach", node=100 + i, popped=100 + i) for i in range(1, 12)]
    steps += [st(12, "touch", node=104), st(13, "touch", node=101), st(14, "assertion")]
    nodes = {1: nv(1, (), None, True), 120: nv(120, (120,), 1), **{n: nv(n, (n,), 1) for n in range(101, 112)}}
    snaps = [NS(root=1, nodes=nodes, holders={102: LEAF}, stale=()) for _ in steps]
    t = Trace(steps, snaps, [NS(index=0, first_step=0, last_step=14)], went_stale=[(0, 120)], cleaned_up=[(0, 120)],
              crashed="AssertionError")

    def deleted(*ids):
        return {n: Ghost(n, "deleted", n - 100, LEAF if n == 102 else (), f"deleted at step {n - 100}") for n in ids}

    cleaned = {120: Ghost(120, "cleaned-up", 0, (), "CLEANED UP")}
    assert ghosts_at(t, 12) == {**deleted(*range(102, 112)), **cleaned}  # #101, the oldest unheld, goes
    assert ghosts_at(t, 14) == {**deleted(101, 102, *range(104, 112)), **cleaned}  # the assertion's #101 stays


def test_a_node_deleted_twice_in_one_operation_counts_from_the_later_deletion_and_a_stale_one_stays_stale():
    nodes = {1: nv(1, (), None, True), 4: nv(4, (2,), 1), 6: nv(6, (3,), 1)}
    t = Trace([st(0, "detach", node=4, popped=4), st(1, "pop", node=6), st(2, "detach", node=6, popped=6),
               st(3, "detach", node=4, popped=4)], [NS(root=1, nodes=nodes, holders={}, stale=())] * 4, [],
              went_stale=[(1, 6)])  # no operations on record: all of it is one stretch from step 0
    unheld6 = Ghost(6, "unheld", 1, (), "stale since step 1; held by nothing now")
    assert [ghosts_at(t, s) for s in range(4)] == [
        {4: Ghost(4, "deleted", 0, (), "deleted at step 0")},
        {4: Ghost(4, "deleted", 0, (), "deleted at step 0"), 6: Ghost(6, "went-stale", 1, (), "WENT STALE")},
        {4: Ghost(4, "deleted", 0, (), "deleted at step 0"), 6: unheld6},
        {4: Ghost(4, "deleted", 3, (), "deleted at step 3"), 6: unheld6}]


def test_without_operations_on_record_and_an_assertion_right_after_the_first_step():
    nodes = {1: nv(1, (), None, True), 4: nv(4, (2, 3), 1)}
    t = Trace([st(0, "x", ["evict_host"], 4), st(1, "assertion")], [NS(root=1, nodes=nodes, holders={}, stale=())] * 2,
              [], crashed="AssertionError")
    assert ghosts_at(t, 0) == {}
    assert ghosts_at(t, 1) == {4: Ghost(4, "deleted", 1, ("evict_host() (raised here after: x)",),
                                        "deleted at step 1")}
    assert highlight_at(t, 1) == {"went_stale": [], "cleaned": [], "assertion": [4], "ghosts": ghosts_at(t, 1),
                                  "violations": {}}


def test_violation_marks_last_from_the_first_step_to_the_end_of_the_operation_that_reported_them():
    g = make_g()
    first = {5: ("backup_continuity",), 7: ("backup_continuity",), 8: ("backup_continuity",)}
    both = {5: ("backup_continuity", "x"), 7: ("backup_continuity",), 8: ("backup_continuity",), 13: ("x",)}
    late = {5: ("x",), 12: ("tree_reachable",), 13: ("x",)}
    assert [violation_nodes(g, s) for s in range(11)] == [
        {}, {}, {}, {}, first, first, both, both, {5: ("x",), 13: ("x",)}, late, late]
    assert list(violation_nodes(g, 6)) == [5, 7, 8, 13]
    assert [gh.ops_end(g, op) for op in (0, 1, 2, 7)] == [2, 7, 10, 10]


def test_highlight_whole_at_a_cleanup_a_new_operation_and_the_assertion():
    g = make_g()
    assert highlight_at(g, 2) == {"went_stale": [10, 11], "cleaned": [5], "assertion": [], "ghosts": EXPECTED[2],
                                  "violations": {}}
    assert highlight_at(g, 3) == {"went_stale": [7], "cleaned": [], "assertion": [], "ghosts": EXPECTED[3],
                                  "violations": {}}
    assert highlight_at(g, 5) == {"went_stale": [], "cleaned": [7], "assertion": [], "ghosts": EXPECTED[5],
                                  "violations": violation_nodes(g, 5)}
    assert highlight_at(g, 9)["assertion"] == []
    assert highlight_at(g, 10) == {"went_stale": [], "cleaned": [], "assertion": [12], "ghosts": EXPECTED[10],
                                   "violations": violation_nodes(g, 10)}
    bare = Trace([st(0, "assertion")], [], [], went_stale=[(0, 3), (0, 2)], cleaned_up=[(0, 3)],
                 crashed="AssertionError")  # no operations on record, no snapshots, no node before the assertion
    assert highlight_at(bare, 0) == {"went_stale": [2, 3], "cleaned": [3], "assertion": []}


def test_an_operations_end_is_its_last_step_even_at_step_0_else_the_traces_last():
    t = Trace([st(0, "x"), st(1, "x"), st(2, "x")], [],
              [NS(index=0, first_step=0, last_step=0), NS(index=1, first_step=1, last_step=-1)])
    assert [gh.ops_end(t, op) for op in (0, 1, 5)] == [0, 2, 2]
