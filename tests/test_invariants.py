"""Every named invariant fails on a hand-broken state, with its exact message, and passes on a good one.

The good state is built by the driver, as a run would: requests [1,2,3] and [1,2,4] (a split leaves S = [1,2] with
children A = [3] and B = [4], all on device and written through to host), their write acks consumed, and a live
request [5,6] holding its own slots. Each case then breaks one thing by hand: detaches a node still in a set, puts
a device child under an evicted node, unbalances a counter, frees a slot twice, leaks a slot, overwrites KV data.

The recorder's rule comes last: inside an operation structures are out of step for a moment, so a violation counts
only if it is still there when its operation ends, and its step is the micro-step where it began.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import node_at

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.driver import Driver
from simcache.invariants import BOUNDARY_ONLY, INVARIANTS, check_all
from simcache.trace import Recorder

OPS = [{"op": "request", "tokens": [1, 2, 3]}, {"op": "request", "tokens": [1, 2, 4]}, {"op": "events"},
       {"op": "start", "tokens": [5, 6]}]


def good(policy: str = "write_through", recorder: Recorder | None = None):
    cache = HiMambaRadixCache(CacheConfig(policy=policy, device="cpu"))
    drv = Driver(cache)
    if recorder is not None:
        recorder.attach(cache, drv)
    for i, op in enumerate(OPS):
        if recorder is not None:
            recorder.begin_op(i, op)
        drv.apply(op, i)
        if recorder is not None:
            recorder.end_op(i, ".")
    return cache, drv


def nodes(cache):
    return node_at(cache, (1, 2)), node_at(cache, (1, 2), (3,)), node_at(cache, (1, 2), (4,))


def problems(cache, drv) -> dict:
    return {k: v for k, v in check_all(cache, list(drv.live.values())).items() if v is not None}


def test_the_good_state_is_what_we_think_and_passes_every_invariant():
    cache, drv = good()
    s, a, b = nodes(cache)
    assert (s.id, a.id, b.id) == (8, 7, 9)
    assert (s.value, s.host_value, a.value, a.host_value, a.mamba_value, a.mamba_host_value) == \
           ([0, 1], [0, 1], [2], [2], [0], [0])
    assert list(drv.live) == ["r2"]
    assert problems(cache, drv) == {}
    empty = HiMambaRadixCache(CacheConfig(device="cpu"))
    assert check_all(empty) == {name: None for name in INVARIANTS}


# --- one breakage per case; every invariant has at least one ---------------------------------------------------

def detach_a_node_still_in_the_sets(c, s, a, b):
    s.children.pop(c.child_key(a.key))


def detach_a_node_still_in_flight(c, s, a, b):
    c.ongoing_write_through[a.id] = a
    s.children.pop(c.child_key(a.key))
    c.evictable_full_device_leaves.discard(a)
    for lru in (c.full_lru_list, c.mamba_lru_list, c.mamba_host_lru_list):
        lru.remove_node(a)


def evict_a_parent_with_device_children(c, s, a, b):
    s.value = None


def evict_a_node_from_both_tiers(c, s, a, b):
    s.value = s.host_value = None


def drop_a_parents_backup(c, s, a, b):
    s.host_value = None


def put_an_inner_node_in_the_device_leaf_set(c, s, a, b):
    c.evictable_full_device_leaves.add(s)


def put_a_locked_node_in_the_device_leaf_set(c, s, a, b):
    a.full_lock_ref += 1


def put_a_device_node_in_the_host_leaf_set(c, s, a, b):
    c.evictable_full_host_leaves.add(a)


def drop_a_node_from_the_full_lru(c, s, a, b):
    c.full_lru_list.remove_node(a)


def drop_a_node_from_the_mamba_lru(c, s, a, b):
    c.mamba_lru_list.remove_node(b)


def leave_a_node_in_the_host_mamba_lru_after_its_state_went(c, s, a, b):
    c.pools.host_mamba.free(a.mamba_host_value)
    a.mamba_host_value = None


def unbalance_the_full_counter(c, s, a, b):
    c.full_evictable_size_ += 1


def unbalance_the_mamba_counter(c, s, a, b):
    c.mamba_protected_size_ += 1


def free_a_slot_twice(c, s, a, b):
    c.pools.host_kv.free([4])  # host slot 4 was never handed out


def leak_a_slot(c, s, a, b):
    c.pools.device_kv.alloc(1)


def overwrite_device_kv(c, s, a, b):
    c.pools.device_kv.write(a.value, [12345])


def overwrite_host_kv(c, s, a, b):
    c.pools.host_kv.write(s.host_value, [1, 2])


def overwrite_a_mamba_state(c, s, a, b):
    c.pools.device_mamba.write(b.mamba_value, [0])


CASES = {
    "attachment": [
        (detach_a_node_still_in_the_sets, "node 7 [3] is detached but still held by evictable_full_device_leaves, "
                                          "full_lru_list, mamba_lru_list, mamba_host_lru_list"),
        (detach_a_node_still_in_flight, "node 7 [3] is detached but still held by ongoing_write_through"),
    ],
    "tier_monotonicity": [
        (evict_a_parent_with_device_children, "node 8 [1,2] is evicted but its child node 7 [3] is on device"),
        (evict_a_node_from_both_tiers, "node 8 [1,2] is in the tree but on neither tier"),
    ],
    "backup_continuity": [
        (drop_a_parents_backup, "node 7 [3] is backed up but its parent node 8 [1,2] is not"),
    ],
    "leaf_sets": [
        (put_an_inner_node_in_the_device_leaf_set,
         "node 8 [1,2] is in evictable_full_device_leaves but is not an unlocked device leaf"),
        (put_a_locked_node_in_the_device_leaf_set,
         "node 7 [3] is in evictable_full_device_leaves but is not an unlocked device leaf"),
        (put_a_device_node_in_the_host_leaf_set,
         "node 7 [3] is in evictable_full_host_leaves but is not an unreferenced host leaf"),
    ],
    "lru_membership": [
        (drop_a_node_from_the_full_lru, "full_lru_list misses node(s) [7]"),
        (drop_a_node_from_the_mamba_lru, "mamba_lru_list misses node(s) [9]"),
        (leave_a_node_in_the_host_mamba_lru_after_its_state_went,
         "mamba_host_lru_list holds node(s) [7] that have no attached host Mamba state"),
    ],
    "size_counters": [
        (unbalance_the_full_counter, "full counters evictable=5 protected=0, recount 4 and 0"),
        (unbalance_the_mamba_counter, "mamba counters evictable=2 protected=1, recount 2 and 0"),
    ],
    "no_double_free": [
        (free_a_slot_twice, "host_kv slot(s) [4] freed twice (in the driver)"),
    ],
    "no_leak": [
        (leak_a_slot, "device_kv slot(s) [8] are allocated but nobody refers to them"),
    ],
    "kv_content": [
        (overwrite_device_kv, "node 7 [3]: device KV does not hold what was written for its prefix"),
        (overwrite_host_kv, "node 8 [1,2]: host KV does not hold what was written for its prefix"),
        (overwrite_a_mamba_state, "node 9 [4]: device Mamba state does not match its prefix"),
    ],
}


def test_every_invariant_has_a_breaking_case():
    assert set(CASES) == set(INVARIANTS)


@pytest.mark.parametrize("name, corrupt, message",
                         [(name, fn, msg) for name, cases in CASES.items() for fn, msg in cases],
                         ids=lambda v: getattr(v, "__name__", None) if callable(v) else None)
def test_a_hand_broken_state_fails_the_invariant_with_its_message(name, corrupt, message):
    cache, drv = good()
    live = list(drv.live.values())
    assert INVARIANTS[name](cache, live) is None
    corrupt(cache, *nodes(cache))
    assert INVARIANTS[name](cache, live) == message


def test_a_request_the_driver_forgets_leaks_its_slots():
    cache, drv = good()
    req = drv.live.pop("r2")
    assert problems(cache, drv) == {"no_leak": "device_kv slot(s) [6, 7] are allocated but nobody refers to them"}
    drv.live["r2"] = req
    drv.finish("r2")
    assert problems(cache, drv) == {}  # finishing it hands its slots to the tree


def test_a_double_free_names_the_simulated_caller():
    cache, drv = good()
    _, a, _ = nodes(cache)
    cache.pools.device_kv.free(a.value)  # freed by hand while A still holds it: accepted, not yet a double free
    assert INVARIANTS["no_double_free"](cache, []) is None
    cache.evict(1)  # A is the LRU device leaf: evicting it frees its slot again, from inside the cache
    assert INVARIANTS["no_double_free"](cache, []) == \
        "device_kv slot(s) [2] freed twice (in _evict_to_host <- _evict_device_leaf <- evict)"


def test_backup_continuity_does_not_apply_to_write_back():
    cache, drv = good("write_back")
    s, a, _ = nodes(cache)
    if a.host_value is None:  # write_back backs up on eviction only; give A a host copy by hand
        a.host_value = cache.pools.host_kv.alloc(1)
    assert s.host_value is None
    assert INVARIANTS["backup_continuity"](cache, list(drv.live.values())) is None


# --- the recorder's rule ----------------------------------------------------------------------------------------

def recorded():
    rec = Recorder(snapshots=False)
    cache, drv = good(recorder=rec)
    assert rec.violations == []
    return cache, drv, rec


def begin(rec, op=None):
    i = len(rec.ops)
    rec.begin_op(i, op or {"op": "events"})
    return i


def test_a_violation_repaired_within_its_operation_does_not_count():
    cache, drv, rec = recorded()
    i = begin(rec)
    cache.full_evictable_size_ += 1
    got = cache.pools.host_kv.alloc(1)        # a micro-step while the counter is off: pending
    cache.full_evictable_size_ -= 1
    cache.pools.host_kv.free(got)             # a micro-step after the repair: no longer pending
    rec.end_op(i, ".")
    assert rec.violations == []


def test_a_violation_left_at_the_end_counts_once_from_the_step_where_it_began():
    cache, drv, rec = recorded()
    i = begin(rec)
    got = cache.pools.host_kv.alloc(1)
    cache.full_evictable_size_ += 1
    cache.pools.host_kv.free(got)             # the first micro-step that sees the bad counter
    began = len(rec.steps) - 1
    cache.pools.host_kv.alloc(1)              # still bad; and this slot is never given back
    rec.end_op(i, ".")
    assert [v.as_dict() for v in rec.violations] == [
        {"step": began, "op": i, "invariant": "size_counters",
         "message": "full counters evictable=5 protected=0, recount 4 and 0"},
        # no_leak is checked only at operation boundaries (slots are in transit inside one): its step is the
        # operation's last
        {"step": len(rec.steps) - 1, "op": i, "invariant": "no_leak",
         "message": "host_kv slot(s) [5] are allocated but nobody refers to them"},  # freed 4 went to the back
    ]
    assert "no_leak" in BOUNDARY_ONLY and "size_counters" not in BOUNDARY_ONLY

    # still broken at the next boundary: not counted again
    j = begin(rec)
    cache.pools.device_kv.alloc(0)
    rec.end_op(j, ".")
    assert len(rec.violations) == 2
    # repaired, then broken again: a second violation
    cache.full_evictable_size_ -= 1
    k = begin(rec)
    cache.pools.device_kv.alloc(0)
    rec.end_op(k, ".")
    cache.full_evictable_size_ += 1
    m = begin(rec)
    cache.pools.device_kv.alloc(0)
    rec.end_op(m, ".")
    assert [(v.op, v.invariant) for v in rec.violations] == [(i, "size_counters"), (i, "no_leak"),
                                                             (m, "size_counters")]
    assert rec.violation_counts() == {**{n: 0 for n in INVARIANTS}, "size_counters": 2, "no_leak": 1}


def test_a_violation_without_micro_steps_counts_at_the_operations_last_step():
    cache, drv, rec = recorded()
    i = begin(rec)
    cache.evictable_full_device_leaves.discard(nodes(cache)[1])  # a set_discard micro-step: A leaves the set...
    cache.evictable_full_device_leaves.add(nodes(cache)[0])      # ...and S (an inner node) enters it
    rec.end_op(i, ".")
    (v,) = rec.violations
    assert (v.invariant, v.step, v.op) == ("leaf_sets", len(rec.steps) - 1, i)
    assert rec.steps[v.step].kind == "set_add" and rec.steps[v.step].node == 8


def test_every_invariant_is_documented_with_when_it_is_checked():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text()
    for name in INVARIANTS:
        when = "at operation boundaries only" if name in BOUNDARY_ONLY else "after every micro-step"
        assert any(line.startswith(f"| `{name}` |") and line.rstrip().endswith(f"| {when} |")
                   for line in doc.splitlines()), name
