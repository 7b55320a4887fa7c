"""Minimality, checked by brute force apart from the shrinker (``minimality.py``; no shrinker code is used).

For each gallery case that fails under pre_fix, ``simcache explore --shrink``'s result must pass both checks:
- no case with one operation fewer fails the same way (the other operations in any form the original scenario
  gave them, the pools one slot larger or back at their original size);
- no order of its operations with fewer preemptions fails the same way (every interleaving enumerated).

The checks have teeth: the 7-operation case the shrinker returned for scenario C before it compared two pass
orders (``shrink.STRATEGIES``) fails the first check; a 6-operation case fails the same way.
The first check also runs the smaller operation sets in every interleaving (at most 120 orders for five
operations), so a shrinker that kept an operation only because it never reordered the others is caught too
(``test_the_check_tries_every_order_of_the_smaller_sets``).
"""
from __future__ import annotations

from functools import cache

import pytest
from minimality import fewer_preemption_orders, preemptions, run_case, smaller_cases

from simcache.explore import shrink
from simcache.scenario import load
from simcache.simulate import simulate

X = "AssertionError: parent does not have child key, 1"
# scenario -> (steps, schedule, signature): the shrunk case, each verified minimal below
SHRUNK = {
    "scenario_a": (3, "mem l3 mem", f"{X} @ _evict_host_leaf"),
    "scenario_b": (5, "A B mem C mem2", f"{X} @ _evict_host_leaf"),
    "scenario_c": (6, "pf R2 pf R4 R6 mem", f"{X} @ _delete_tombstone_leaf"),
    "scenario_d": (2, "mem*2", f"{X} @ _delete_tombstone_leaf"),
    "nonleaf_prefetch": (4, "pf R6 pf mem", "AssertionError: non-leaf, node.id=# @ _evict_regular"),
    "hidden_needle": (7, "pf R2 pf R4 R6 ctl mem", f"{X} @ _delete_tombstone_leaf"),
    "crash_pr": (6, "pf R2 pf R4 R6 mem", f"{X} @ _delete_tombstone_leaf"),
}


@cache
def shrunk(name: str):
    sc = load(name)
    return shrink(sc, "pre_fix", schedule=sc.minimal_schedule)  # None: the scenario's own schedule


def as_case(sc) -> dict:
    return dict(config=sc.config, initial=sc.initial, actors=sc.actors, turns=sc.parse_schedule().turns)


@pytest.mark.parametrize("name", list(SHRUNK))
def test_the_shrunk_case_is_minimal_by_brute_force(name):
    small = shrunk(name)
    case = as_case(small.scenario)
    target = run_case(case["config"], case["initial"], case["actors"], case["turns"], "pre_fix")
    assert (small.steps, small.schedule, target) == SHRUNK[name]
    assert simulate(small.scenario, "pre_fix").outcome == "assertion"  # it replays from its own file
    assert small.preemptions == preemptions(case["turns"], {a: len(o) for a, o in case["actors"].items()})
    assert smaller_cases(case, load(name).as_doc(), "pre_fix", target) == []
    assert fewer_preemption_orders(case, "pre_fix", target) == []


def test_the_check_finds_the_smaller_case_the_old_shrinker_missed():
    """Scenario C as the shrinker returned it before: 7 operations. One fewer fails the same way."""
    old = shrunk("scenario_c").scenario.as_doc()
    old["config"]["device_kv"] = 6
    old["actors"] = dict(pf=[dict(op="prefetch", tokens=[1, 2, 9]), dict(op="prefetch_done", n=3, mamba_hit=True)],
                         R2=[dict(op="request", tokens=[1, 3])], R4=[dict(op="request", tokens=[5, 6])],
                         R6=[dict(op="request", tokens=[1, 2, 7])], mem=[dict(op="evict", n=3)],
                         ctl=[dict(op="events")])
    case = dict(config=old["config"], initial=[], actors=old["actors"], turns="pf R2 pf R4 R6 ctl mem".split())
    target = run_case(case["config"], [], case["actors"], case["turns"], "pre_fix")
    assert target == SHRUNK["scenario_c"][2]
    found = smaller_cases(case, load("scenario_c").as_doc(), "pre_fix", target)
    assert [(actor, k, sched) for actor, k, _, sched, _ in found] == [("ctl", 0, "pf R2 pf R4 R6 mem")]
    _, _, actors, _, config = found[0]
    assert actors["R2"] == [dict(op="request", tokens=[1, 2, 3, 4])] and config["device_kv"] == 7
    assert fewer_preemption_orders(case, "pre_fix", target) == []  # its one preemption was already the fewest


def test_the_check_tries_every_order_of_the_smaller_sets(monkeypatch):
    """A case whose smaller set fails only in another order: R2 before A, not after. Kept in the schedule's own
    order (what the check did before), no smaller case fails; in every order, one does."""
    import minimality

    case = dict(config={}, initial=[], actors={"A": [{"op": "events"}], "R2": [{"op": "events"}],
                                               "Z": [{"op": "events"}]}, turns=["A", "R2", "Z"])
    runs = []

    def oracle(config, initial, actors, turns, preset):
        runs.append(tuple(turns))
        return "boom" if tuple(turns) == ("R2", "A") else None

    monkeypatch.setattr(minimality, "run_case", oracle)
    found = smaller_cases(case, dict(actors=case["actors"], config={}), "pre_fix", "boom")
    assert [(actor, k, order) for actor, k, _, order, _ in found] == [("Z", 0, "R2 A")]
    assert ("A", "R2") in runs and ("R2", "A") in runs  # the schedule's own order first, then the others
