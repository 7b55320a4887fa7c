"""codepane.py's bookkeeping compared whole: which locals count as nodes, the frames of a run's very last step and
of an assertion's raising line, which steps one request replays and keeps (the rest of the operation when one
step is asked for, only the steps asked for otherwise, an operation the run stopped inside), the memo's limit, and
a trace that cannot be replayed."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from simcache import simulate
from simcache.codepane import _CAPTURED, MAX_LIST, _nodes, code_at, code_frames
from simcache.node import TreeNode
from simcache.render.moments import moments


def test_which_locals_are_nodes():
    nodes = [TreeNode(i, 0.0) for i in range(1, MAX_LIST + 2)]
    assert _nodes(nodes[0]) == (1,)
    assert _nodes(nodes[:1]) == (1,) and _nodes(tuple(nodes[:2])) == (1, 2)
    assert _nodes(nodes[:MAX_LIST]) == tuple(range(1, MAX_LIST + 1))  # eight: listed
    assert _nodes(nodes) is None  # nine: too many to list
    assert _nodes([]) is None and _nodes(()) is None
    assert _nodes([nodes[0], 3]) is None and _nodes({nodes[0]}) is None and _nodes(None) is None
    assert MAX_LIST == 8


@pytest.fixture
def crash_run():
    return simulate("crash_pr", "pre_fix")


@pytest.fixture
def clean_run():
    return simulate("scenario_a", "followup_fix")


def test_the_last_step_of_a_clean_run_and_a_step_past_the_end(clean_run):
    t = clean_run.trace
    last = len(t.steps) - 1
    assert [f.function for f in code_at(t, last)] == ["evict_host", "_evict_host_leaf",
                                                       "_iteratively_delete_tombstone_leaf"]
    assert code_frames(t, [10**6]) == {10**6: ()}


def test_the_assertion_step_shows_the_raising_line(crash_run):
    t = crash_run.trace
    top = code_at(t, moments(t)["assertion"][0])[-1]
    assert (top.function, top.lines[top.line - top.first_line].strip()) == (
        "_delete_tombstone_leaf", "parent = self._pop_from_parent(node)")


def test_one_step_asked_replays_and_keeps_its_whole_operation(crash_run):
    t = crash_run.trace
    op = t.ops[2]
    code_at(t, op.first_step + 3)
    assert set(_CAPTURED[t]) == set(range(op.first_step, op.last_step + 1))


def test_several_steps_asked_keep_only_those_even_past_an_assertion(crash_run):
    t = crash_run.trace
    crash_op = t.ops[-1]
    asked = [crash_op.first_step + 1, crash_op.first_step + 2]
    got = code_frames(t, asked)
    assert set(got) == set(asked) == set(_CAPTURED[t])
    assert all(got[s] for s in asked)


def test_an_operation_the_run_stopped_inside_reaches_the_last_step(clean_run):
    t = clean_run.trace
    op = t.ops[2]
    op.last_step = -1  # as a run stopped inside it leaves it: never closed
    code_at(t, op.first_step)
    assert set(_CAPTURED[t]) == set(range(op.first_step, len(t.steps)))


def test_an_operation_of_one_step_keeps_that_step(clean_run):
    t = clean_run.trace
    first = t.ops[0]
    first.last_step = first.first_step  # an operation whose only step is the first of the run
    assert first.first_step == 0
    code_at(t, 0)
    assert set(_CAPTURED[t]) == {0}


def test_the_memo_is_cleared_only_past_its_limit(clean_run):
    t = clean_run.trace
    _CAPTURED[t] = {-i: () for i in range(1, 4097)}  # 4,096 kept steps: at the limit, kept
    code_at(t, 5)
    assert len([s for s in _CAPTURED[t] if s < 0]) == 4096
    _CAPTURED[t] = {-i: () for i in range(1, 4098)}  # 4,097: past it, cleared before the next replay
    code_at(t, 5)
    assert set(_CAPTURED[t]) == set(range(t.ops[0].first_step, t.ops[0].last_step + 1))


def test_a_trace_that_cannot_be_replayed_has_no_frames():
    assert code_frames(NS(checkpoints=[]), [1, 2]) == {1: (), 2: ()}  # no "replayable" at all
    assert code_frames(NS(checkpoints=[object()]), [3]) == {3: ()}
    assert code_frames(NS(replayable=False, checkpoints=[object()]), [4]) == {4: ()}
    assert code_frames(NS(replayable=True, checkpoints=[]), ["5"]) == {5: ()}
