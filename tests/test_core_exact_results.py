"""``explore/results.py`` exactly: a tally over runs handed to it by hand (clean, damaged, failing, in an order that
puts the simplest failure late), the whole ``ExploreResult`` it reports and that result as JSON data, the schedule
count, and ``finish``'s end key and damage memo."""
from __future__ import annotations

import json
import time
from types import SimpleNamespace

from simcache.crash import Crash
from simcache.explore import plan_for
from simcache.explore.machine import Machine
from simcache.explore.results import ExploreResult, Failure, Tally, count_schedules, finish, switches
from simcache.scenario import load
from simcache.versions import preset

STALE = Crash("AssertionError", "parent does not have child key, 1", "_delete_tombstone_leaf", ("a", "b"))
OTHER = Crash("AssertionError", "not backuped", "_evict_to_host", ("c",))
SIG_STALE = "AssertionError: parent does not have child key, 1 @ _delete_tombstone_leaf"
SIG_OTHER = "AssertionError: not backuped @ _evict_to_host"

# actors a (3 operations) and b (2): runs as (turn indices, crash, end key, damage)
PLAN = SimpleNamespace(name="hand", actors=("a", "b"), lengths=(3, 2))
RUNS = [
    ((0, 0, 0, 1, 1), None, b"e1", ()),                                        # clean
    ((1, 1, 0, 0, 0), None, b"e2", (("leaked:host_kv", (3,)),)),              # clean, leaking
    ((0, 1, 0, 1), STALE, b"e3", ()),                                          # 3 preemptions, 3 switches
    ((1, 0, 0, 0, 1), None, b"e2", (("leaked:host_kv", (3,)), ("double_free:device_kv", (1,)))),
    ((0, 1, 0), OTHER, b"e4", ()),                                             # 2 preemptions
    ((0, 1, 1, 0), STALE, b"e5", ()),                                          # 1 preemption, 2 switches
    ((0, 0, 1), OTHER, b"e6", ()),                                             # 1 preemption, 1 switch, 3 steps
    ((0, 0, 1, 1), STALE, b"e7", ()),                                          # 1 preemption, 4 steps
    ((1, 0, 1, 0), STALE, b"e3", ()),                                          # the sixth failure
]


def _tally(until=None, budget=None) -> Tally:
    t = Tally(PLAN, budget, until)
    for out in RUNS:
        t.add(out)
    return t


def test_a_tally_reports_every_run_outcome_end_damage_and_the_simplest_failure_exactly():
    started = time.perf_counter() - 5.0
    r = _tally(budget=100).result("exhaustive", "pre_fix", 2, None, 7, True, False, started)
    fail = {text: Failure(text, steps, pre, sw, crash.outcome, crash.function, sig) for text, steps, pre, sw, crash, sig
            in [("a b a b", 4, 3, 3, STALE, SIG_STALE), ("a b a", 3, 2, 2, OTHER, SIG_OTHER),
                ("a b*2 a", 4, 1, 2, STALE, SIG_STALE), ("a*2 b", 3, 1, 1, OTHER, SIG_OTHER),
                ("a*2 b*2", 4, 1, 1, STALE, SIG_STALE)]}
    assert r == ExploreResult(
        "hand", "pre_fix", "exhaustive", 2, None, 100, 9, 7, 6,
        ("a b a b", "a b a", "a b*2 a", "a*2 b", "a*2 b*2"),  # the first five failing schedules, in run order
        ((SIG_OTHER, 2), (SIG_STALE, 4), ("clean", 3)),  # sorted
        fail["a*2 b"],  # fewest preemptions, then fewest steps
        ((SIG_OTHER, fail["a b a"]), (SIG_STALE, fail["a b a b"])),  # each signature's first failure
        (("double_free:device_kv", "b a*3 b"), ("leaked:host_kv", "b*2 a*3")),  # each kind's first schedule
        7, True, False, 10)  # 5 operations: 5! / (3! 2!) interleavings
    assert 5.0 <= r.time_s < 60.0
    assert r.signatures == {SIG_STALE, SIG_OTHER, "clean"} and r.failing_fraction == 6 / 9
    assert r.failure_with("not backuped") == fail["a b a"] and r.failure_with("child key") == fail["a b a b"]
    assert r.failure_with("nothing like it") is None


def test_the_result_as_json_data_is_every_field_with_mappings_for_the_pairs():
    r = _tally().result("random", "followup_fix", None, 3, 0, False, False, time.perf_counter())
    d = r.as_dict()
    stale = dict(schedule="a b a b", steps=4, preemptions=3, switches=3,
                 assertion="AssertionError: parent does not have child key, 1",
                 raised_in="_delete_tombstone_leaf", signature=SIG_STALE)
    other = dict(schedule="a*2 b", steps=3, preemptions=1, switches=1, assertion="AssertionError: not backuped",
                 raised_in="_evict_to_host", signature=SIG_OTHER)
    assert d == dict(
        scenario="hand", preset="followup_fix", strategy="random", bound=None, seed=3, budget=None, schedules_run=9,
        distinct_states=7, failing=6, failing_schedules=["a b a b", "a b a", "a b*2 a", "a*2 b", "a*2 b*2"],
        outcomes={SIG_STALE: 4, SIG_OTHER: 2, "clean": 3}, first_failure=other,
        first_by_signature={SIG_STALE: stale, SIG_OTHER: dict(other, schedule="a b a", steps=3, preemptions=2,
                                                               switches=2)},
        damage={"double_free:device_kv": "b a*3 b", "leaked:host_kv": "b*2 a*3"}, pruned=0, exhausted=False,
        space_covered=False, total_schedules=10, time_s=d["time_s"])
    assert json.loads(json.dumps(d)) == d  # plain JSON data
    clean = Tally(PLAN, None)
    clean.add(RUNS[0])
    assert clean.result("pct", "pre_fix", 1, 0, 0, True, True, time.perf_counter()).as_dict()["first_failure"] is None


def test_until_ranks_the_failure_asked_for_first_and_says_it_was_found():
    t = Tally(PLAN, None, "not backuped")
    for out in RUNS[:4]:
        t.add(out)
    assert (t.found, t.best.schedule) == (False, "a b a b")  # nothing asked for yet: the simplest so far
    t.add(RUNS[4])
    assert (t.found, t.best.schedule) == (True, "a b a")
    t.add(RUNS[5])  # simpler, but not what was asked for
    assert t.best.schedule == "a b a"
    t.add(RUNS[6])  # asked for, and simpler
    assert t.best.schedule == "a*2 b"
    assert (Tally(PLAN, 3).full, _tally(budget=9).full, _tally(budget=10).full, _tally().full) == \
        (False, True, False, False)


def test_schedule_counts_are_exact_whole_numbers_far_past_a_float():
    assert count_schedules([30, 30]) == 118264581564861424 and type(count_schedules([30, 30])) is int
    assert count_schedules([2, 2, 3]) == 210 and count_schedules([]) == 1 and count_schedules([4]) == 1
    assert [switches(t) for t in ((), ("a",), ("a", "a"), ("a", "b", "a"), ("a", "b", "b", "c"))] == [0, 0, 0, 2, 2]


def test_finish_keys_an_end_by_its_state_and_signature_and_computes_its_damage_once_per_end(monkeypatch):
    """Scenario A: ``mem l3 mem`` crashes at its third turn, ``l3 mem mem`` runs clean to the end."""
    plan = plan_for(load("scenario_a"), preset("pre_fix"))
    calls = []
    damage_of = Machine.damage
    monkeypatch.setattr(Machine, "damage", lambda self: calls.append(1) or damage_of(self))
    memo: dict = {}
    ends = []
    for turns in (("mem", "l3", "mem"), ("l3", "mem", "mem")):
        m = Machine(plan)
        for actor in turns:
            m.step(plan, plan.actors.index(actor))
        out = finish(m, memo)
        assert out == (tuple(m.idx), m.crash, out[2], damage_of(m)) and out[2][:16] == m.key()
        assert finish(m, memo) == out  # the second time from the memo
        ends.append(out[2][16:])
    assert ends == [b"AssertionError: parent does not have child key, 1 @ _evict_host_leaf", b"clean"]
    assert len(calls) == 2 and len(memo) == 2
