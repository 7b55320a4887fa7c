"""The explorer's machine after the speed work: fresh machines are clones of one built per plan and share no state
with it or with each other; ``damage`` says what ``state.accounting`` and the pools' double frees say."""
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


def test_fresh_machines_share_no_state_with_the_prototype_or_each_other():
    plan = plan_for(load("crash_pr"), preset("pre_fix"))
    rng = random.Random(5)
    first = draw_random(rng, plan.lengths)
    a = Machine.replay(plan, first)
    built = Machine(plan)  # built from scratch, not cloned
    for i in first:
        if built.crash is not None:
            break
        built.step(plan, i)
    assert (tree_slot_lines(a.cache), a.statuses, a.key()) == (tree_slot_lines(built.cache), built.statuses,
                                                               built.key())
    b = Machine.fresh(plan)
    assert tree_slot_lines(b.cache) == [] and b.statuses == [] and b.cache.pools.device_kv.available_size() == \
        b.cache.config.device_kv
    assert b.cache is not a.cache and b.cache.root_node is not a.cache.root_node
    assert b.cache.controller.evict_mamba.__self__ is b.cache
