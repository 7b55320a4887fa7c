"""game_levels.py compared whole on hand-built traces: the level lookup and its refusal, the cause chain cut at
its depth, the list joined in English, the reaction sentence (which operation's events it reads, up to where,
one holder or several, a violation when nothing went stale) and the points inside write_backup / evict_host."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from simcache.errors import ScenarioError
from simcache.game_levels import LEVELS, MAX_POINTS, _cause, _join, level, points, reaction


def test_a_level_by_number():
    assert [level(n).number for n in range(1, len(LEVELS) + 1)] == [1, 2, 3, 4, 5]
    for bad, said in ((0, "0"), (6, "6"), (True, "True"), ("1", "'1'"), ("x" * 30, f"'{'x' * 19}... (32 characters)")):
        with pytest.raises(ScenarioError) as e:
            level(bad)
        assert str(e.value) == f"there is no level {said}; the levels are 1 to 5"


def test_the_cause_chain_is_cut_at_its_depth():
    assert _cause("detached by evict") == "by evict"
    assert _cause("detached by a <- b") == "by a, called from b"
    six = " <- ".join("abcdef")  # the detacher and five callers: all shown
    assert _cause(f"detached by {six}") == "by a, called from b <- c <- d <- e <- f"
    seven = " <- ".join("abcdefg")
    assert _cause(f"detached by {seven}") == "by a, called from b <- c <- d <- e <- f <- ..."
    assert _cause("a <- b <- c", depth=1) == "by a, called from b <- ..."
    assert _cause("a <- b <- c", depth=2) == "by a, called from b <- c"


def test_a_list_joined_in_english():
    assert _join(["a"]) == "a"
    assert _join(["a", "b"]) == "a and b"
    assert _join(["a", "b", "c"]) == "a, b and c"
    assert _join(["fX,", "b"]) == "fX, and b"  # a clause keeps its comma before "and"
    assert _join(["a,", "bX,", "c"]) == "a, bX, and c"


def stale(step, node=8, holders=("write_backup()",)):
    return NS(step=step, node=node, key="1,2", cause="detached by evict_host <- write_backup", holders=list(holders))


def fake_run(ops, steps=10, went_stale=(), violations=()):
    return NS(trace=NS(ops=[NS(first_step=a, last_step=b) for a, b in ops], steps=[None] * steps,
                       went_stale=list(went_stale), violations=list(violations)))


SAID = "You just detached node #8 [1,2] (by evict_host, called from write_backup) while write_backup() still holds it."


def test_the_reaction_reads_its_own_operations_events():
    run = fake_run([(0, 0), (1, 4), (5, -1)], steps=9, went_stale=[stale(0), stale(1, 9, ("a", "b")), stale(8, 10),
                                                                    stale(9, 11)])
    assert reaction(run, 0) == SAID  # the first operation's single step
    assert reaction(run, 1) == ("You just detached node #9 [1,2] (by evict_host, called from write_backup) while a "
                                "and b still hold it.")
    assert reaction(run, 2) == SAID.replace("#8", "#10")  # an operation never closed reaches the last step only
    assert reaction(run, 3) == "" and reaction(run, -1) == ""
    assert reaction(run, 1, upto=0) == ""
    both = fake_run([(0, 5)], went_stale=[stale(2), stale(5, 9)])
    assert reaction(both, 0) == SAID + " " + SAID.replace("#8", "#9")
    assert reaction(both, 0, upto=4) == SAID


def test_when_nothing_went_stale_the_first_broken_invariant():
    v = [NS(op=1, step=7, invariant="backup_continuity", message="m1"), NS(op=1, step=9, invariant="x", message="m2"),
         NS(op=0, step=1, invariant="no_leak", message="m0")]
    run = fake_run([(0, 2), (3, 7)], violations=v)
    assert reaction(run, 1) == "That move broke the backup continuity invariant: m1."
    assert reaction(run, 1, upto=6) == ""
    assert reaction(run, 0) == "That move broke the no leak invariant: m0."
    assert reaction(fake_run([(0, 2)]), 0) == ""


def step(i, kind="call", stack=("write_backup",)):
    return NS(index=i, kind=kind, stack=stack)


def test_the_points_inside_write_backup_and_evict_host():
    steps = [step(0, "op", ()), step(1, "call", ("insert",)), step(2, "attach", ("insert",)),
             step(3, "call", ("insert", "write_backup")), step(4, "alloc", ("insert", "write_backup")),
             step(5, "alloc_fail", ("write_backup",)), step(6, "call", ("write_backup", "evict_host")),
             step(7, "call", ("write_backup", "evict_host", "_evict_host_leaf")),
             step(8, "detach", ("evict_host", "_evict_host_leaf")), step(9, "attach", ("insert",)),
             step(10, "assertion", ("evict_host",)), step(11, "backup", ("evict_host",)),
             step(12, "call", ("evict_host", "helper")), step(13, "detach", ("evict_host",))]
    run = NS(trace=NS(ops=[NS(first_step=0, last_step=11), NS(first_step=12, last_step=-1)], steps=steps))
    assert points(run, 0) == [3, 5, 6, 7, 8, 9, 10, 11]  # an attach counts once a point came before it
    assert points(run, 1) == [13]  # an operation never closed runs to the last step
    run.trace.ops[0].last_step = 10
    assert points(run, 0) == [3, 5, 6, 7, 8, 9, 10]
    many = [step(i, "detach") for i in range(MAX_POINTS + 3)]
    assert points(NS(trace=NS(ops=[NS(first_step=0, last_step=-1)], steps=many)), 0) == list(range(MAX_POINTS))
    one = NS(trace=NS(ops=[NS(first_step=0, last_step=0), NS(first_step=1, last_step=1)],
                      steps=[step(0, "detach"), step(1, "detach")]))
    assert points(one, 0) == [0] and points(one, 1) == [1]
