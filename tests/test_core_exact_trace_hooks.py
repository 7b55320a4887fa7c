"""trace_hooks.py compared whole: what ``register`` and ``simulated`` record, what a recorder sees of a simulated
call (arguments, order, the exit even when the call raises), the names a traceback's simulated frames give, and the
leaf set (insertion order, changes reported once, identity equality, iteration that survives removal).

Each test makes its functions from source (``fresh``): a new code object per call, removed from
``SIMULATED_CODE`` afterwards, so no earlier run of the tests leaves a registration behind."""
from __future__ import annotations

import pytest

from simcache.trace_hooks import SIMULATED_CODE, LeafSet, register, simulated, simulated_frames


@pytest.fixture
def fresh():
    scopes: list[dict] = []

    def make(source: str, name: str):
        scope: dict = {"simulated": simulated}
        exec(compile(source, f"<fresh {name}>", "exec"), scope)
        scopes.append(scope)
        return scope[name]

    yield make
    for scope in scopes:  # every function the source made, and what each wraps
        for fn in list(scope.values()):
            for f in (fn, getattr(fn, "__wrapped__", None)):
                if hasattr(f, "__code__"):
                    SIMULATED_CODE.pop(f.__code__, None)


def test_register_names_a_function_by_its_own_name_or_the_one_given(fresh):
    a = fresh("def evict(x):\n    return x\n", "evict")
    b = fresh("def helper(x):\n    return x\n", "helper")
    assert a.__code__ not in SIMULATED_CODE
    assert register(a) is a and SIMULATED_CODE[a.__code__] == "evict"
    assert register(b, "_evict_host_leaf") is b and SIMULATED_CODE[b.__code__] == "_evict_host_leaf"


class Rec:
    def __init__(self) -> None:
        self.seen: list = []

    def enter(self, name, args):
        self.seen.append(("enter", name, args))

    def exit(self, name):
        self.seen.append(("exit", name))


class Owner:
    def __init__(self, rec=None) -> None:
        self.recorder = rec


def test_a_simulated_call_without_a_recorder_is_the_call(fresh):
    f = fresh("def insert(self, key, value=0, *, page=1):\n    return (self, key, value, page)\n", "insert")
    g = simulated(f)
    o = Owner()
    assert g(o, (1, 2), 3, page=4) == (o, (1, 2), 3, 4)
    assert g(o, "k") == (o, "k", 0, 1)
    assert (g.__name__, g.__wrapped__, g.__doc__) == ("insert", f, None) and g is not f
    assert SIMULATED_CODE[f.__code__] == "insert" and g.__code__ not in SIMULATED_CODE


def test_a_recorder_sees_each_call_enter_and_exit_in_order(fresh):
    src = ("@simulated\ndef outer(self, n):\n    return inner(self, n + 1, flag=True)\n\n"
           "@simulated\ndef inner(self, n, flag=False):\n    if n > 5:\n        raise ValueError('big')\n"
           "    return n\n")
    outer = fresh(src, "outer")
    rec = Rec()
    o = Owner(rec)
    assert outer(o, 1) == 2
    assert rec.seen == [("enter", "outer", (1,)), ("enter", "inner", (2,)), ("exit", "inner"), ("exit", "outer")]
    rec.seen.clear()
    with pytest.raises(ValueError):
        outer(o, 5)
    assert rec.seen == [("enter", "outer", (5,)), ("enter", "inner", (6,)), ("exit", "inner"), ("exit", "outer")]


def test_the_simulated_frames_of_a_traceback_outermost_first(fresh):
    src = ("@simulated\ndef evict(self):\n    return plain(self)\n\n"
           "def plain(self):\n    return _delete_leaf(self)\n\n"
           "@simulated\ndef _delete_leaf(self):\n    assert False, 'parent does not have child key'\n")
    evict = fresh(src, "evict")
    with pytest.raises(AssertionError) as e:
        evict(Owner())
    # the wrappers and the plain helper are not simulated frames; the test's own frame is not either
    assert simulated_frames(e.value) == ["evict", "_delete_leaf"]
    register(evict.__wrapped__.__globals__["plain"], "helper_name")
    assert simulated_frames(e.value) == ["evict", "helper_name", "_delete_leaf"]
    assert simulated_frames(ValueError("never raised")) == []


def test_a_leaf_set_reports_each_real_change_once():
    a, b, c = object(), object(), object()
    s = LeafSet("evictable_full_device_leaves")
    s.add(a)  # no observer yet: nothing to tell
    seen = []
    s.observer = lambda name, what, node: seen.append((name, what, node))
    s.add(b)
    s.add(a)  # already in: no change, no report
    s.add(c)
    s.discard(a)
    s.discard(a)  # already out
    s.discard(object())
    assert seen == [("evictable_full_device_leaves", "add", b), ("evictable_full_device_leaves", "add", c),
                    ("evictable_full_device_leaves", "discard", a)]
    assert list(s) == [b, c] and len(s) == 2 and a not in s and b in s
    s.observer = None
    s.discard(b)
    s.add(a)
    assert list(s) == [c, a] and len(seen) == 3


def test_a_leaf_set_iterates_a_snapshot_and_is_equal_only_to_itself():
    nodes = [object() for _ in range(4)]
    s = LeafSet("evictable_full_host_leaves")
    for n in nodes:
        s.add(n)
    walked = []
    for n in s:  # removing while walking: the walk goes on over what was there
        walked.append(n)
        s.discard(n)
    assert walked == nodes and len(s) == 0
    t, u = LeafSet("x"), LeafSet("x")
    assert t != u and not (t == u) and t == t  # two empty sets with one name: still two holders
    assert hash(t) == object.__hash__(t) and hash(t) != hash(u)
    assert {t: 1, u: 2}[t] == 1
    t.add(nodes[0])
    assert t._d is t and t.name == "x" and t.observer is None
    assert repr(t) == f"LeafSet('x', [{nodes[0]!r}])"
    assert not hasattr(t, "__dict__") and LeafSet.__slots__ == ("name", "observer")
