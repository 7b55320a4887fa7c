"""The explorer's machine after the speed work: ``damage`` says what ``state.accounting`` and the pools' double frees
say; machines built for the same plan (its config built once) share no state."""
from __future__ import annotations

import dataclasses
import random

import pytest
from helpers import busy_cache, node_at

from simcache.errors import ScenarioError
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


def test_a_clone_shares_no_mutable_container_of_the_original():
    """``fast_copy`` copies every list, dict, deque, leaf set and LRU list it meets (the pools' in-flight copy and
    reader lists too: they were shared between clones); only atoms, functions, tensors and frozen values are shared."""
    import collections
    import dataclasses

    from simcache.lru import LRUList
    from simcache.trace_hooks import LeafSet

    plan = plan_for(load("crash_pr"), preset("pre_fix"))
    m = Machine.replay(plan, draw_random(random.Random(2), plan.lengths)[:6])
    c = m.clone()
    mutable = (list, dict, set, collections.deque, collections.OrderedDict, LeafSet, LRUList)

    def containers(root):
        seen, stack, out = set(), [root], {}
        while stack:
            x = stack.pop()
            if id(x) in seen or isinstance(x, (int, float, str, bytes, type(None))) or callable(x) and not hasattr(
                    x, "__dict__") or dataclasses.is_dataclass(x) and type(x).__dataclass_params__.frozen:
                continue
            seen.add(id(x))
            if isinstance(x, mutable):
                out[id(x)] = type(x).__name__
            if isinstance(x, dict):
                stack += list(x.keys()) + list(x.values())
            elif isinstance(x, (list, tuple, set, collections.deque)):
                stack += list(x)
            if hasattr(x, "__dict__") and not isinstance(x, type):
                stack += list(vars(x).values())
            for name in getattr(type(x), "__slots__", ()):
                if hasattr(x, name):
                    stack.append(getattr(x, name))
        return out

    original = containers((m.cache, m.driver))
    shared = {original[k] for k in original.keys() & containers((c.cache, c.driver)).keys()}
    assert len(original) > 30 and shared == set()


def test_a_leaf_set_is_a_set_by_identity_that_reports_real_changes():
    """A leaf set is the dict of its members (C-speed membership); it must still behave as the insertion-ordered
    set SGLang's code sees: add/discard report only real changes, iteration is a snapshot, equality and hashing
    are by identity (two empty sets are not equal)."""
    from simcache.lru import OrderedLeafSet
    from simcache.node import TreeNode
    from simcache.trace_hooks import LeafSet

    seen = []
    s, t = LeafSet("a"), LeafSet("a")
    s.observer = lambda name, what, node: seen.append((name, what, node))
    s.add(3), s.add(1), s.add(3), s.discard(2)
    for x in s:  # a snapshot: discarding while iterating is allowed
        s.discard(x)
    s.add(5)
    assert seen == [("a", "add", 3), ("a", "add", 1), ("a", "discard", 3), ("a", "discard", 1), ("a", "add", 5)]
    assert list(s) == [5] and len(s) == 1 and 5 in s and 3 not in s
    assert s != t and LeafSet("b") != LeafSet("b") and len({s, t}) == 2 and s == s
    o, node = OrderedLeafSet("o"), TreeNode(1, 4.0, (1,))
    o.add(node)
    assert list(o) == [node] and o.heap == [(4.0, node)]
    o.clear()
    assert list(o) == [] and o.heap == [] and not o


def _plan(**ops) -> object:
    """crash_pr's config and flags with these actors' operations."""
    base = plan_for(load("crash_pr"), preset("pre_fix"))
    return dataclasses.replace(base, actors=tuple(ops), ops={a: tuple(o) for a, o in ops.items()})


def test_a_skipped_operation_s_status_is_its_letter_and_an_unknown_op_is_one_sentence():
    plan = _plan(A=[{"op": "request", "tokens": list(range(40)), "rid": "A"}], B=[{"op": "bogus"}])
    m = Machine(plan)
    assert m.step(plan, 0) == "e" and m.statuses == ["e"] and m.crash is None and m.index == 1  # 40 > 32 slots
    with pytest.raises(ScenarioError, match=r"^op 1: unknown op 'bogus' \(schedule: A B\)$"):
        m.step(plan, 1)


def test_a_machine_s_pools_keep_no_data_and_read_as_zeros():
    m = Machine(plan_for(load("crash_pr"), preset("pre_fix")))
    pools = m.cache.pools.all().values()
    assert all(not p.keeps_data and p.read([0, 1, 2]) == [0, 0, 0] for p in pools)


def machine_of(cache, drv) -> Machine:
    m = Machine.__new__(Machine)
    m.cache, m.driver = cache, drv
    return m


@pytest.mark.parametrize("change,kinds", [
    (lambda c, d: None, set()),
    (lambda c, d: d.live.clear(), {"leaked:device_kv", "leaked:device_mamba"}),  # the request's own slots
    (lambda c, d: c.ongoing_prefetch.clear(), {"leaked:host_kv", "leaked:host_mamba"}),  # the prefetch's
    # [5,6] still in the root's children but pointing at another parent: not attached, so its slots leak
    (lambda c, d: setattr(node_at(c, [5, 6]), "parent", node_at(c, [1, 2])),
     {"leaked:device_kv", "leaked:device_mamba", "leaked:host_kv", "leaked:host_mamba"}),
    (lambda c, d: c.pools.host_mamba.alloc(1), {"leaked:host_mamba"}),  # allocated, held by nothing
    # the prefetch dropped with its host kv pages queued for release: only its mamba transfer's slot leaks
    (lambda c, d: c.controller.host_mem_release_queue.append(c.ongoing_prefetch.pop("pf").host_indices),
     {"leaked:host_mamba"}),
    (lambda c, d: c.pools.device_kv.free([c.pools.device_kv.free_slots[0]]), {"double_free:device_kv"}),
], ids=["busy", "no request", "no prefetch", "misparented node", "host slot", "released pages", "double free"])
def test_damage_counts_every_holder_s_slots_as_the_accounting_does(change, kinds):
    cache, drv = busy_cache()
    change(cache, drv)
    m = machine_of(cache, drv)
    got = m.damage()
    assert got == slow_damage(m) and {k for k, _ in got} == kinds


@pytest.mark.parametrize("driver", ["fuzz", "scheduler"])
def test_a_machine_drives_like_the_plan_s_driver(driver):
    """The scheduler driver retries a Mamba allocation after evicting (``Driver.retry_mamba_alloc``), as
    ``ops_run.execute`` sets it; the fuzz driver does not."""
    base = plan_for(load("crash_pr"), preset("pre_fix"))
    plan = dataclasses.replace(base, config={**base.config, "driver": driver})
    m = Machine(plan)
    assert m.driver.retry_mamba_alloc is (driver == "scheduler")
    assert (m.index, m.pos, m.idx, m.statuses, m.crash) == (0, [0] * 7, [], [], None)


def test_a_conflict_only_some_interleavings_reach_names_the_operation_and_the_schedule():
    plan = _plan(A=[{"op": "start", "tokens": [1, 2], "rid": "X"}], B=[{"op": "start", "tokens": [3], "rid": "X"}])
    m = Machine(plan)
    assert m.step(plan, 1) == "." and m.index == 1
    with pytest.raises(ScenarioError, match=r"^op 1: request id 'X' is still live; give each started request its "
                                            r"own rid \(schedule: B A\)$"):
        m.step(plan, 0)
