"""``crash``'s summaries and its one classification, each pinned by an exact outcome: a crash read from a real
exception (the simulated stack, the type, ``driver`` where no simulated frame is on it), every summary of one
crash, and which module an exception counts as raised in (the innermost frame's, cut to the file's name).
Written from the survivors of ``benchmarks/mutation.py`` over the module (issue 19)."""
from __future__ import annotations

import traceback

import pytest

from simcache.crash import STALE, Crash, InternalError, cell, crash_from, raise_if_internal, short_sig, signature
from simcache.simulate import simulate

THE_RACE = ("cache_finished_req", "insert", "_insert_helper", "_inc_hit_count", "write_backup", "evict_host",
            "_evict_host_leaf", "_iteratively_delete_tombstone_leaf", "_delete_tombstone_leaf")


def caught(fn, *args) -> BaseException:
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 -- the exception is what the test reads
        return e
    raise AssertionError("expected an exception")


def test_the_race_is_read_from_the_simulated_stack_of_the_assertion():
    run = simulate("crash_pr", "pre_fix", snapshots=False)
    assert run.crash == Crash("AssertionError", "parent does not have child key, 1", "_delete_tombstone_leaf",
                              THE_RACE)
    assert run.crash.as_dict() == {"message": "parent does not have child key, 1", "type": "AssertionError",
                                   "function": "_delete_tombstone_leaf", "stack": list(THE_RACE)}
    assert STALE == "parent does not have child key"


def test_an_exception_with_no_simulated_frame_is_the_drivers_and_keeps_its_own_type():
    def bad():
        raise ValueError("seven, eight")

    assert crash_from(caught(bad)) == Crash("ValueError", "seven, eight", "driver", ())
    assert crash_from(caught(lambda: {}["k"])) == Crash("KeyError", "'k'", "driver", ())
    assert crash_from(AssertionError("never raised")) == Crash("AssertionError", "never raised", "driver", ())


def test_each_summary_of_a_crash_that_is_not_the_race():
    c = Crash("RuntimeError", "evicted node 12 twice, node.id=3, then x.id=44 with more", "evict", ("a", "evict"))
    assert signature(c) == "RuntimeError: evicted node # twice, node.id=#, then x.id=# with more @ evict"
    assert cell(c) == "evicted node 12 twice in evict"
    assert short_sig(c) == "RuntimeError: evicted node 12 twice in evict"
    plain = Crash("AssertionError", "no comma here", "f", ())
    assert (cell(plain), signature(plain), short_sig(plain)) == (
        "no comma here in f", "AssertionError: no comma here @ f", "AssertionError: no comma here in f")
    race = Crash("AssertionError", "parent does not have child key, 1", "_delete_tombstone_leaf", ())
    assert cell(race) == "X in _delete_tombstone_leaf"
    assert cell(None) == signature(None) == "clean"


# --- which module raised it: the innermost frame's, by its module name --------------------------------------------
def _where(exc: BaseException) -> int:
    return traceback.extract_tb(exc.__traceback__)[-1].lineno


def test_an_exception_raised_in_an_observer_names_its_file_and_line():
    from simcache.state import tree_lines

    exc = caught(tree_lines, None)
    with pytest.raises(InternalError) as e:
        raise_if_internal(exc, "op 7")
    assert str(e.value) == (f"simcache bug while observing op 7: AttributeError: {exc} (in state.py:{_where(exc)})")
    assert e.value.__cause__ is exc


def test_an_exception_raised_in_a_view_names_the_views_file_not_its_package():
    from simcache.render.words import short_key  # every view's key wording (render.dot.abbreviate_key calls it)

    exc = caught(short_key, 5)
    with pytest.raises(InternalError) as e:
        raise_if_internal(exc, "frame 2")
    assert str(e.value) == f"simcache bug while observing frame 2: TypeError: {exc} (in words.py:{_where(exc)})"


def test_an_exception_raised_outside_the_observers_in_unnamed_code_or_never_raised_is_a_result():
    assert raise_if_internal(caught(simulate, "no_such_scenario", "pre_fix"), "op 0") is None
    assert raise_if_internal(caught(exec, "raise ValueError('x')", {}), "op 0") is None  # no __name__ there
    assert raise_if_internal(ValueError("never raised"), "op 0") is None
