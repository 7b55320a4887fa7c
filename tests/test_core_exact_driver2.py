"""Exact outcomes of ``Driver.raised``, the path an operation's exception takes when it is not a ``Skip`` or a user's
mistake (issue 19: the mutation run of ``driver.py`` found its messages unread).

- An operation without an ``op`` field fails inside ``apply`` with a ``KeyError``; ``raised`` names it as an unknown
  op, never as a simulated crash.
- An exception raised by simcache's own observer code while an operation runs is a simcache bug: an
  ``InternalError`` naming the operation's number and kind, never a simulated crash.
- ``apply`` names an unknown op itself (through ``step``, ``raised`` would word a failure of that message the same).
"""
from __future__ import annotations

import types

import pytest

import simcache.state
from simcache import CacheConfig, Driver, HiMambaRadixCache
from simcache.crash import InternalError
from simcache.errors import ScenarioError
from simcache.versions import preset


def _driver() -> Driver:
    return Driver(HiMambaRadixCache(CacheConfig(flags=preset("pre_fix"), device_kv=8)))


def test_an_operation_without_an_op_field_is_an_unknown_op_not_a_crash():
    d = _driver()
    with pytest.raises(ScenarioError, match=r"^op 4: unknown op None$"):
        d.step({"tokens": [1, 2]}, 4)
    assert d.cache.crashed is None


def test_an_observers_exception_during_an_operation_names_the_operation_and_is_not_a_crash():
    d = _driver()
    # a function whose code runs as part of simcache.state (an observer module), called by the operation
    boom = types.FunctionType((lambda *a, **k: 1 // 0).__code__, vars(simcache.state))
    d.cache.match_prefix = boom
    with pytest.raises(InternalError, match=r"^simcache bug while observing op 7 \(start\): ZeroDivisionError: "
                                            r"integer division or modulo by zero \(in state\.py:\d+\)$"):
        d.step({"op": "start", "tokens": [1, 2]}, 7)
    assert d.cache.crashed is None


def test_apply_names_an_unknown_op_itself_before_any_step_wraps_it():
    d = _driver()
    with pytest.raises(ScenarioError, match=r"^op 5: unknown op 'fly'$"):
        d.apply({"op": "fly"}, 5)
    with pytest.raises(ScenarioError, match=r"^op 6: unknown op 'fly'$"):
        d.step({"op": "fly"}, 6)
