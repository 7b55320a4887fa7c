"""The explorer's machine after the speed work: ``damage`` says what ``state.accounting`` and the pools' double frees
say; machines built for the same plan (its config built once) share no state."""
from __future__ import annotations

import random

from simcache.explore import plan_for
from simcache.explore.machine import Machine
from simcache.explore.sampling import draw_random
from simcache.scenario import load
from simcache.state import accounting, tree_slot_lines
from simcache.versions import preset


def slow_damage(m: Machine):
    out = [(f"leaked:{name}", tuple(a["leaked"]))
           for name, a in accounting(m.cache, list(m.driver.live.values())).items() if a["leaked"]]
    for name, pool in m.cache.pools.all().items():
        slots = sorted({s for d in pool.double_frees for s in d.slots})
        if slots:
            out.append((f"double_free:{name}", tuple(slots)))
    return tuple(sorted(out))


def test_damage_is_the_accounting_s_leaks_and_the_double_frees():
    damaged = 0
    for name in ("crash_pr", "scenario_c", "scenario_b", "hidden_needle"):
        plan = plan_for(load(name), preset("pre_fix"))
        rng = random.Random(3)
        for _ in range(40):
            m = Machine.replay(plan, draw_random(rng, plan.lengths))
            assert m.damage() == slow_damage(m)
            damaged += bool(m.damage())
    assert damaged > 0


def test_machines_of_one_plan_share_no_state():
    plan = plan_for(load("crash_pr"), preset("pre_fix"))
    rng = random.Random(5)
    a = Machine.replay(plan, draw_random(rng, plan.lengths))
    b = Machine(plan)
    assert tree_slot_lines(a.cache) != [] and tree_slot_lines(b.cache) == [] and b.statuses == []
    assert b.cache.pools.device_kv.available_size() == b.cache.config.device_kv
    assert b.cache.config is a.cache.config and b.cache.root_node is not a.cache.root_node
