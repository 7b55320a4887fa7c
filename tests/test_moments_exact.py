"""Moments and lockstep, exactly, on small hand-built traces (plain data: the functions read nothing else).

Story: trace A has three operations (micro-steps 0-2, 3-6, 7-8) and raised at its last step; trace B ran the same
schedule but its operation 1 took two micro-steps more (3-8) and it ended after operation 2 (9-9) cleanly. Shown
side by side they pair operation by operation, the shorter operation clamped to its last step; B's tree differs
after operation 1. Written for issue 19: the mutants of ``render/moments.py`` that survived the older tests (the
issue's "compare frames no longer lock-stepped" among them).
"""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from simcache.render.moments import (
    MOMENT_KINDS,
    assertion_node,
    assertion_step,
    compare_positions,
    first_divergence,
    lockstep,
    moments,
    moments_at,
    next_moment,
    op_end,
    op_index_of,
)


def step(i, kind="call", node=None):
    return NS(index=i, kind=kind, node=node)


def trace(spans, kinds=None, nodes=None, crashed=None, statuses=None, trees=None, **events):
    n = spans[-1][1] + 1 if spans else 0
    kinds, nodes = kinds or {}, nodes or {}
    steps = [step(i, kinds.get(i, "call"), nodes.get(i)) for i in range(n)]
    ops = [NS(first_step=a, last_step=b, status=(statuses or {}).get(k, ".")) for k, (a, b) in enumerate(spans)]
    snaps = [NS(tree_text=(trees or {}).get(i, ("same",))) for i in range(n)]
    base = dict(went_stale=[], readmitted=[], cleaned_up=[], violations=[])
    base.update({k: [NS(step=s) for s in v] for k, v in events.items()})
    return NS(steps=steps, ops=ops, snapshots=snaps, crashed=crashed, **base)


A = trace([(0, 2), (3, 6), (7, 8)], kinds={8: "assertion"}, nodes={5: 11, 6: 12}, crashed="AssertionError",
          statuses={2: "x"}, went_stale=[5, 4], cleaned_up=[6], violations=[6, 5, 6], readmitted=[7])
B = trace([(0, 2), (3, 8), (9, 9)], trees={8: ("other",)})


def test_moments_are_sorted_unique_steps_per_kind():
    assert moments(A) == {"went-stale": (4, 5), "readmitted": (7,), "cleaned-up": (6,), "violation": (5, 6),
                          "assertion": (8,)}
    assert moments(B) == {k: () for k in MOMENT_KINDS}
    assert moments_at(A, 5) == ("went-stale", "violation") and moments_at(A, 6) == ("cleaned-up", "violation")
    assert moments_at(A, 0) == ()


def test_the_assertion_is_the_last_assertion_step_of_a_crashed_run():
    assert assertion_step(A) == 8 and assertion_step(B) is None
    twice = trace([(0, 3)], kinds={1: "assertion", 3: "assertion"}, crashed="x")
    assert assertion_step(twice) == 3
    assert assertion_step(trace([(0, 3)], kinds={1: "assertion"})) is None  # not crashed: no assertion moment
    assert assertion_step(trace([(0, 1)], crashed="x")) is None  # crashed without an assertion step
    assert assertion_node(A) == 12  # the last node touched before the assertion
    assert assertion_node(trace([(0, 3)], kinds={3: "assertion"}, nodes={1: 4}, crashed="x")) == 4
    assert assertion_node(trace([(0, 3)], kinds={3: "assertion"}, crashed="x")) is None
    assert assertion_node(B) is None


def test_next_and_previous_moment():
    assert next_moment(A, "went-stale", 0) == 4 and next_moment(A, "went-stale", 4) == 5
    assert next_moment(A, "went-stale", 5) is None
    assert next_moment(A, "went-stale", 5, -1) == 4 and next_moment(A, "went-stale", 9, -1) == 5
    assert next_moment(A, "went-stale", 4, -1) is None
    assert next_moment(A, "assertion", 7) == 8
    with pytest.raises(ValueError, match="^unknown moment 'stale'; choose one of went-stale, readmitted, cleaned-up, "
                                         "violation, assertion$"):
        next_moment(A, "stale", 0)


def test_operation_of_a_step_and_an_operations_end():
    assert [op_index_of(A, s) for s in range(9)] == [0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert op_index_of(trace([]), 3) == 0
    assert [op_end(A, k) for k in range(3)] == [2, 6, 8]
    open_end = trace([(0, 2), (3, 4)])
    open_end.ops[1].last_step = -1  # an operation the run stopped inside ends at the run's last step
    assert op_end(open_end, 1) == 4


def test_lockstep_keeps_operation_and_offset_and_clamps():
    assert [lockstep(A, B, s) for s in range(9)] == [0, 1, 2, 3, 4, 5, 6, 9, 9]
    assert [lockstep(B, A, s) for s in range(10)] == [0, 1, 2, 3, 4, 5, 6, 6, 6, 7]
    short = trace([(0, 1)])
    assert lockstep(A, short, 5) == 1  # no operation 1 in the other run: its last step
    assert lockstep(A, trace([]), 5) == 0


def test_side_by_side_positions_run_each_operation_as_long_as_the_longer_run():
    positions, ops = compare_positions([A, B])
    assert positions == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (6, 7), (6, 8), (7, 9), (8, 9)]
    assert ops == [0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2]
    stopped = trace([(0, 1), (2, 3)])  # stopped after operation 1: stays on its last step through operation 2
    positions, ops = compare_positions([A, stopped])
    assert positions[-3:] == [(6, 3), (7, 3), (8, 3)] and ops[-3:] == [1, 2, 2]
    assert compare_positions([A]) == ([(s,) for s in range(9)], [0, 0, 0, 1, 1, 1, 1, 2, 2])
    three = compare_positions([A, B, stopped])[0]
    assert three[6:9] == [(6, 6, 3), (6, 7, 3), (6, 8, 3)]


def test_the_first_divergence_is_a_status_a_tree_or_a_missing_operation():
    assert first_divergence(A, B) == 1  # B's tree after operation 1 differs
    same_tree = trace([(0, 2), (3, 8), (9, 9)])
    assert first_divergence(A, same_tree) == 2  # operation 2's status: raised vs applied
    assert first_divergence(A, A) is None
    assert first_divergence(trace([(0, 2)]), trace([(0, 2), (3, 4)])) == 1
    assert first_divergence(trace([(0, 2), (3, 4)]), trace([(0, 2)])) == 1
    no_snaps = trace([(0, 2), (3, 8), (9, 9)], trees={8: ("other",)})
    no_snaps.snapshots = []
    assert first_divergence(A, no_snaps) == 2  # without snapshots only the statuses are compared


def test_a_one_step_operation_ends_where_it_starts_and_is_one_position_wide():
    first = trace([(0, 0), (1, 3)])
    assert op_end(first, 0) == 0  # an operation ending at step 0 is not "open"
    stopped = trace([(0, 0)])  # stopped after operation 0; the other run's operation 1 is one micro-step
    positions, ops = compare_positions([trace([(0, 0), (1, 1)]), stopped])
    assert (positions, ops) == ([(0, 0), (1, 0)], [0, 1])
