"""Exact outcomes of ``invariants.py``: its three ways to the same answer agree on every operation boundary, and each
named check words each of its failures exactly. Written for the mutation run (``benchmarks/mutation.py``).

``check_all`` (the named checks, the specification), ``failing`` (one pass over the tree) and ``BoundaryCheck``
(kept up to date from what each operation touched) must give the same set of failing invariants. The boundaries
compared are the gallery under every preset, a third of the frozen random operation files (injected trees, storage,
write-back, page size 2), and a workload whose state is broken by hand after some operations and repaired after
the next one (KV and Mamba contents, a slot owned twice, a Mamba value of two slots, counters, locks, host
references, leaf sets, LRU lists, a leaked slot), so the incremental check must follow a violation in and out.

``Watched`` drives the recorder's ``BoundaryCheck`` directly, one hand-made state at a time, each with its exact
set: states only a hand can make (links that disagree, dicts replaced, keys rewritten, lists shared between fields
or changed in place, each notification on its own), and ``fuzz_edits``, random hand edits over 80 seeds.
"""
from __future__ import annotations

import random
from collections import Counter

import pytest
from helpers import make_cache
from test_invariants import good, nodes, problems
from trace_cases import cases

from simcache import invariants
from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig
from simcache.driver import Driver
from simcache.errors import CacheAssertion
from simcache.invariants import INVARIANTS, BoundaryCheck, check_all, failing
from simcache.node import TreeNode
from simcache.ops_run import check_doc, execute
from simcache.simulate import simulate
from simcache.state import dfs
from simcache.trace import Recorder
from simcache.versions import preset as flags_of


def named(cache, live) -> set[str]:
    return {name for name, problem in check_all(cache, live).items() if problem is not None}


def owned_twice(cache) -> bool:
    """Whether an attached node's slot is also another's (or its own twice), counting the slots whose contents the
    kv check knows: KV of its key's length, every Mamba slot."""
    owners: Counter = Counter()
    for _, n in dfs(cache):
        for pool, v, whole in (("d", n.value, True), ("h", n.host_value, True), ("dm", n.mamba_value, False),
                               ("hm", n.mamba_host_value, False)):
            if v is not None and (not whole or len(v) == len(n.key)):
                owners.update((pool, i) for i in v)
    return any(c > 1 for c in owners.values())


class Agreement:
    """``BoundaryCheck.failing`` replaced by a version that checks it against ``failing`` and ``check_all``, and
    that it answers on its own (without ``failing``) exactly when no slot is owned twice."""

    def __init__(self, monkeypatch):
        self.seen: Counter = Counter()
        self.checked = self.fallbacks = 0
        real = BoundaryCheck.failing
        memo: dict = {}

        def counted(*args):
            self.fallbacks += 1
            return failing(*args)

        def both(bc, live=()):
            shared, before = owned_twice(bc.cache), self.fallbacks
            got = real(bc, live)
            assert (self.fallbacks > before) == shared, f"boundary {self.checked}: fell back {not shared}"
            want = named(bc.cache, live)
            assert got == want, f"boundary {self.checked}: BoundaryCheck {sorted(got)}, check_all {sorted(want)}"
            assert failing(bc.cache, live) == want, f"boundary {self.checked}: failing"
            assert failing(bc.cache, live, memo) == want, f"boundary {self.checked}: failing with a memo"
            self.seen.update(got)
            self.checked += 1
            return got

        monkeypatch.setattr(BoundaryCheck, "failing", both)
        monkeypatch.setattr(invariants.boundary, "failing", counted)


def test_the_three_checks_agree_on_every_boundary_of_the_gallery_under_every_preset(monkeypatch):
    agree = Agreement(monkeypatch)
    for _, scenario, preset, schedule in [c for c in cases() if c[0].endswith("/0")]:
        simulate(scenario, preset, schedule=schedule, snapshots=False)
    assert agree.checked > 200
    assert set(agree.seen) == {"attachment", "tier_monotonicity", "backup_continuity", "leaf_sets", "lru_membership",
                               "size_counters", "no_double_free", "no_leak"}


def test_the_three_checks_agree_on_every_boundary_of_random_operation_files(monkeypatch):
    agree = Agreement(monkeypatch)
    picked = [c for c in cases() if c[0].startswith("random/") and int(c[0].split("/")[1]) % 3 == 0]
    for _, scenario, preset, schedule in picked:
        simulate(scenario, preset, schedule=schedule, snapshots=False)
    assert agree.checked > 800
    assert set(agree.seen) == {"attachment", "tier_monotonicity", "backup_continuity", "leaf_sets", "no_leak"}


# --- a workload broken by hand after some operations and repaired after the next -------------------------------

def _device_node(cache, mamba=False, unlocked=False):
    for _, n in dfs(cache):
        if n.value is not None and (not mamba or n.mamba_value is not None) and \
                (not unlocked or (n.mamba_lock_ref if mamba else n.full_lock_ref) == 0):
            return n
    return None


def overwrite(pool_name, field):
    def corrupt(cache):
        n = next((n for _, n in dfs(cache) if getattr(n, field)), None)
        if n is None:
            return None
        pool, slots = getattr(cache.pools, pool_name), list(getattr(n, field))[:1]
        old = pool.read(slots)
        pool.write(slots, [old[0] + 1])
        return lambda: pool.write(slots, old)
    return corrupt


def share_a_slot(cache):
    n = next((n for _, n in dfs(cache) if n.value is not None and len(n.value) > 1), None)
    if n is None:
        return None
    old = n.value
    n.value = old[:1] * 2 + old[2:]

    def undo():
        n.value = old
    return undo


def one_takes_the_others_slot(taker):
    """One of the first two device nodes gets the other's first slot: when it is repaired, the other still owns the
    slot and must be checked against its own prefix again (whichever of the two was counted last)."""
    def corrupt(cache):
        on_device = [n for _, n in dfs(cache) if n.value is not None]
        if len(on_device) < 2:
            return None
        giver, took = on_device[1 - taker], on_device[taker]
        old = took.value
        took.value = giver.value[:1] + old[1:]

        def undo():
            took.value = old
        return undo
    return corrupt


def two_mamba_slots(cache):
    n = _device_node(cache, mamba=True)
    if n is None:
        return None
    old = n.mamba_value
    n.mamba_value = old * 2

    def undo():
        n.mamba_value = old
    return undo


def bump(field, on):
    def corrupt(cache):
        n = on(cache)
        if n is None:
            return None
        setattr(n, field, getattr(n, field) + 1)
        return lambda: setattr(n, field, getattr(n, field) - 1)
    return corrupt


def counter(field):
    def corrupt(cache):
        setattr(cache, field, getattr(cache, field) + 1)
        return lambda: setattr(cache, field, getattr(cache, field) - 1)
    return corrupt


def inner_node_in_the_device_leaves(cache):
    n = next((n for _, n in dfs(cache) if n.value is not None and
              any(c.value is not None for c in n.children.values())), None)
    if n is None or n in cache.evictable_full_device_leaves:
        return None
    cache.evictable_full_device_leaves.add(n)
    return lambda: cache.evictable_full_device_leaves.discard(n)


def device_node_in_the_host_leaves(cache):
    n = _device_node(cache)
    if n is None:
        return None
    cache.evictable_full_host_leaves.add(n)
    return lambda: cache.evictable_full_host_leaves.discard(n)


def out_of_the_full_lru(cache):
    n = _device_node(cache)
    if n is None:
        return None
    cache.full_lru_list.remove_node(n)
    return lambda: cache.full_lru_list.insert_mru(n)


def _leaf_under_a_node(cache):
    return next((n for _, n in dfs(cache) if not n.children and n.parent is not cache.root_node), None)


def detach_a_leaf(cache):
    """Taken out of its parent's children the way the cache does it (the recorder hears of it), still held."""
    n = _leaf_under_a_node(cache)
    if n is None:
        return None
    parent = n.parent
    cache._detach(parent, n)
    return lambda: cache._attach(parent, n)


def point_a_leaf_elsewhere(cache):
    """Its parent pointer moved to the root while its parent still lists it: the links no longer agree."""
    n = _leaf_under_a_node(cache)
    if n is None:
        return None
    parent = n.parent
    n.parent = cache.root_node

    def undo():
        n.parent = parent
    return undo


def empty_a_leafs_key(cache):
    n = _leaf_under_a_node(cache)
    if n is None:
        return None
    key = n.key
    n.key = ()

    def undo():
        n.key = key
    return undo


def drop_a_host_mamba_state_still_listed(cache):
    n = next((n for n in cache.mamba_host_lru_list.mru_to_lru() if n.mamba_host_value is not None), None)
    if n is None:
        return None
    old = n.mamba_host_value
    n.mamba_host_value = None

    def undo():
        n.mamba_host_value = old
    return undo


def leak(cache):
    got = cache.pools.device_kv.alloc(1)
    if got is None:
        return None
    return lambda: cache.pools.device_kv.free(got)


def host_leaf(cache):
    return next(iter(cache.evictable_full_host_leaves), None)


def workload(policy: str, n: int = 90) -> dict:
    """Requests over shared prefixes, with acks, device and host evictions, a live request or two."""
    rng = random.Random(f"invariants:{policy}")
    prefixes = [[1, 2, 3], [1, 2, 4, 5], [6, 7], [1, 8]]
    ops = []
    for _ in range(n):
        r = rng.random()
        tokens = list(rng.choice(prefixes)) + [rng.randint(1, 9) for _ in range(rng.randint(1, 3))]
        if r < 0.4:
            ops.append({"op": "request", "tokens": tokens})
        elif r < 0.5:
            ops.append({"op": "start", "tokens": tokens})
        elif r < 0.58:
            ops.append({"op": "finish_oldest"})
        elif r < 0.72:
            ops.append({"op": "evict", "n": rng.randint(1, 6)})
        elif r < 0.8:
            ops.append({"op": "evict_host", "n": rng.randint(1, 4)})
        else:
            ops.append({"op": "events"})
    config = dict(policy=policy, page_size=1, device_kv=48, device_mamba=10, host_kv=64, host_mamba=24)
    return {"config": config, "ops": ops}


SHARED = (one_takes_the_others_slot(1), one_takes_the_others_slot(0))  # both ways, one after the other
BREAKS = [
    (overwrite("device_kv", "value"), {"kv_content"}),
    (overwrite("host_kv", "host_value"), {"kv_content"}),
    (overwrite("device_mamba", "mamba_value"), {"kv_content"}),
    (overwrite("host_mamba", "mamba_host_value"), {"kv_content"}),
    (share_a_slot, None),  # kv_content and no_leak, depending on the slots' contents
    (SHARED, None),
    (two_mamba_slots, None),
    (bump("full_lock_ref", lambda c: _device_node(c, unlocked=True)), None),  # counters (and a leaf's set)
    (bump("mamba_lock_ref", lambda c: _device_node(c, mamba=True, unlocked=True)), {"size_counters"}),
    (bump("host_ref_counter", host_leaf), {"leaf_sets"}),
    (bump("host_mamba_ref_counter", host_leaf), {"leaf_sets"}),
    (counter("full_evictable_size_"), {"size_counters"}),
    (counter("mamba_protected_size_"), {"size_counters"}),
    (inner_node_in_the_device_leaves, {"leaf_sets"}),
    (device_node_in_the_host_leaves, {"leaf_sets"}),
    (out_of_the_full_lru, {"lru_membership"}),
    (leak, {"no_leak"}),
    (detach_a_leaf, None),  # attachment and the lists that still hold it
    (point_a_leaf_elsewhere, None),
    (empty_a_leafs_key, None),
    (drop_a_host_mamba_state_still_listed, {"lru_membership", "no_leak"}),
]


@pytest.mark.parametrize("policy, start", [("write_through", 0), ("write_back", 0), ("write_through", 40)])
def test_the_three_checks_agree_while_a_workload_is_broken_by_hand_and_repaired(monkeypatch, policy, start):
    """After each operation one thing is broken by hand and the recorder's boundary check asked (it must name what
    the named checks name), then repaired and asked again (nothing). ``start``: the recorder is attached only there,
    so the boundary check is first built from a cache already full."""
    agree = Agreement(monkeypatch)
    cfg, ops = check_doc(workload(policy))
    rec = Recorder(snapshots=False)
    applied = []

    def step(i, cache, drv):
        if i < start:
            return
        live = list(drv.live.values())
        k = i % len(BREAKS)
        fn, expect = BREAKS[k]
        if named(cache, live):
            return
        for one in fn if isinstance(fn, tuple) else (fn,):
            undo = one(cache)
            if undo is None:
                return
            got = rec._bc.failing(live)
            assert got and (expect is None or got == expect), (k, got)
            undo()
            assert rec._bc.failing(live) == set(), k
        applied.append(k)

    execute(cfg, [(None, op) for op in ops], flags_of("followup_fix"), recorder=rec, on_step=step,
            window=(start, len(ops)))
    assert agree.checked == len(ops) - start + 2 * len(applied) + 2 * applied.count(BREAKS.index((SHARED, None)))
    assert set(applied) == set(range(len(BREAKS))) and rec.violations == []
    # the boundary check fell back on ``failing`` exactly at the breaks that left a slot owned twice
    twice = {BREAKS.index((SHARED, None)): 2, BREAKS.index((share_a_slot, None)): 1,
             BREAKS.index((two_mamba_slots, None)): 1}
    assert agree.fallbacks == sum(twice.get(k, 0) for k in applied)


# --- the named checks' words -----------------------------------------------------------------------------------

def test_the_lru_check_names_extra_nodes_and_missing_and_extra_together():
    cache, drv = good()
    s, a, b = nodes(cache)
    cache.full_lru_list.remove_node(a)
    cache.mamba_lru_list.remove_node(b)
    assert problems(cache, drv) == {"lru_membership": "full_lru_list misses node(s) [7]"}
    cache.full_lru_list.insert_mru(a)
    assert problems(cache, drv) == {"lru_membership": "mamba_lru_list misses node(s) [9]"}
    cache.mamba_lru_list.insert_mru(b)
    cache.mamba_lru_list.remove_node(a)
    b.mamba_value = None
    assert INVARIANTS["lru_membership"](cache, list(drv.live.values())) == \
        "mamba_lru_list misses node(s) [7] and holds extra node(s) [9]"


def test_the_full_lru_check_names_a_node_it_holds_that_is_off_the_device():
    cache, drv = good()
    s, a, b = nodes(cache)
    a.value = None
    assert INVARIANTS["lru_membership"](cache, list(drv.live.values())) == "full_lru_list holds extra node(s) [7]"


def test_the_host_leaf_check_names_each_way_a_host_leaf_can_be_wrong():
    cache, drv = good()
    s, a, b = nodes(cache)
    live = list(drv.live.values())
    msg = "node 7 [3] is in evictable_full_host_leaves but is not an unreferenced host leaf"
    a.value = None  # a host-only leaf: a good member
    cache.evictable_full_device_leaves.discard(a)
    cache.evictable_full_host_leaves.add(a)
    assert INVARIANTS["leaf_sets"](cache, live) is None
    for field in ("host_ref_counter", "host_mamba_ref_counter"):
        setattr(a, field, 1)
        assert INVARIANTS["leaf_sets"](cache, live) == msg
        setattr(a, field, 0)
    host = a.host_value
    a.host_value = None
    assert INVARIANTS["leaf_sets"](cache, live) == msg
    a.host_value = host
    s.value = None
    cache.evictable_full_host_leaves.add(s)  # [1,2] has attached children
    assert INVARIANTS["leaf_sets"](cache, live) == \
        "node 8 [1,2] is in evictable_full_host_leaves but is not an unreferenced host leaf"


def test_the_device_leaf_check_names_a_member_off_the_device():
    cache, drv = good()
    s, a, b = nodes(cache)
    a.value = None
    assert INVARIANTS["leaf_sets"](cache, list(drv.live.values())) == \
        "node 7 [3] is in evictable_full_device_leaves but is not an unlocked device leaf"


def test_the_counter_checks_recount_protected_tokens_and_states():
    cache, drv = good()
    s, a, b = nodes(cache)
    live = list(drv.live.values())
    s.full_lock_ref = 1
    assert INVARIANTS["size_counters"](cache, live) == "full counters evictable=4 protected=0, recount 2 and 2"
    s.full_lock_ref = 0
    b.mamba_lock_ref = 1
    assert INVARIANTS["size_counters"](cache, live) == "mamba counters evictable=2 protected=0, recount 1 and 1"


def test_the_kv_check_names_a_host_mamba_state_and_skips_kv_of_the_wrong_length():
    cache, drv = good()
    s, a, b = nodes(cache)
    live = list(drv.live.values())
    cache.pools.host_mamba.write(a.mamba_host_value, [0])
    assert INVARIANTS["kv_content"](cache, live) == "node 7 [3]: host Mamba state does not match its prefix"
    cache, drv = good()
    s, a, b = nodes(cache)
    cache.pools.device_kv.write(s.value, [0, 0])
    s.value = s.value + [9]  # three slots for a two-token key: not compared
    assert INVARIANTS["kv_content"](cache, list(drv.live.values())) is None


def test_a_double_free_inside_a_simulated_function_names_its_stack():
    cache = make_cache()
    cache.pools.device_kv.free([0])
    assert cache.pools.device_kv.double_frees[0].stack == ()
    assert check_all(cache)["no_double_free"] == "device_kv slot(s) [0] freed twice (in the driver)"


def test_the_checks_by_name_run_only_those_named():
    cache, drv = good()
    s, a, b = nodes(cache)
    a.value = None
    assert check_all(cache, list(drv.live.values()), ["leaf_sets", "no_double_free"]) == dict(
        leaf_sets="node 7 [3] is in evictable_full_device_leaves but is not an unlocked device leaf",
        no_double_free=None)


# --- the boundary check on its own: each notification, and states only a hand can make -------------------------

class Watched:
    """The good state (S = [1,2] with children A = [3] and B = [4]) with a recorder attached after it was built, so
    ``BoundaryCheck`` starts from a cache already full and hears of later changes only through the recorder's
    events (leaf sets, LRU lists, pools, the cache's own attach and detach) and its tracked nodes' writes."""

    def __init__(self, *breaks, policy: str = "write_through"):
        """``breaks`` (functions of the cache and S, A, B) are applied before the recorder attaches: the boundary
        check is then built on a broken state."""
        self.cache, self.drv = good(policy)
        self.s, self.a, self.b = nodes(self.cache)
        for brk in breaks:
            brk(self.cache, self.s, self.a, self.b)
        rec = Recorder(snapshots=False)
        rec.replayable = True  # what ``ops_run.execute`` sets: the recorder keeps a ``BoundaryCheck``
        rec.attach(self.cache, self.drv)
        self.bc = rec._bc
        self.live = list(self.drv.live.values())
        self.memo: dict = {}
        if not breaks:
            assert self.check() == set()

    def check(self) -> set[str]:
        """The boundary check's answer, after checking that the one-pass and the named checks give the same."""
        got = self.bc.failing(self.live)
        want = named(self.cache, self.live)
        assert got == failing(self.cache, self.live) == want, (sorted(got), sorted(want))
        assert failing(self.cache, self.live, self.memo) == want, "failing with a memo kept between checks"
        return got


def test_a_leaf_set_member_is_checked_again_when_a_child_it_lists_but_that_points_elsewhere_changes():
    """The device leaf check reads the value of every child in a member's dict, and the host one whether each is
    attached, even where the child's parent pointer names another node: when such a child changes, the member it
    does not point to is checked again."""
    w = Watched()
    c, s, a, b = w.cache, w.s, w.a, w.b
    a.parent = c.root_node  # S still lists A, which points to the root: A is detached
    b.value = None  # and B is off the device: S's only device child is A
    c.evictable_full_device_leaves.discard(a)
    c.evictable_full_device_leaves.discard(b)
    c.evictable_full_device_leaves.add(s)
    assert w.check() == {"attachment", "leaf_sets", "lru_membership", "no_leak", "size_counters"}
    a.value = None  # S lists no device child any more: a good device leaf
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}
    a.value = [2]
    assert w.check() == {"attachment", "leaf_sets", "lru_membership", "no_leak", "size_counters"}


def test_a_host_leaf_is_checked_again_when_a_child_it_lists_but_that_points_elsewhere_is_attached():
    w = Watched()
    c, s, a, b = w.cache, w.s, w.a, w.b
    b.value = None  # B: a host-only leaf, a good host leaf-set member
    c.evictable_full_device_leaves.discard(b)
    c.evictable_full_host_leaves.add(b)
    c._detach(s, a)
    a.parent = c.root_node
    c._attach(b, a)  # B lists A, which points to the root (whose dict does not list it): A is detached
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}
    c._attach(c.root_node, a)  # A is attached under the root (its prefix now [3]): B lists an attached child
    assert w.check() == {"kv_content", "leaf_sets", "lru_membership", "no_leak", "size_counters"}
    c._detach(c.root_node, a)
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}


def test_a_detached_leaf_set_member_is_checked_again_when_a_child_enters_its_dict():
    w = Watched()
    c, s, a, b = w.cache, w.s, w.a, w.b
    c._detach(s, b)  # B is detached and still in the device leaf set (and the lists)
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}
    c._attach(b, a)  # B lists A (on device), which still points to S: B is no device leaf
    c._attach(s, a)  # (and S's entry for A is written again: a second link in the same operation)
    assert w.check() == {"attachment", "leaf_sets", "lru_membership", "no_leak", "size_counters"}
    c._detach(b, a)
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}



def test_the_boundary_check_built_on_a_broken_state_names_what_is_broken():
    """Built from a cache that already holds an inner node in the device leaf set, or a child that its parent lists
    but that points elsewhere (not attached), it answers as the named checks do from its first call."""
    def inner_in_the_leaves(c, s, a, b):
        c.evictable_full_device_leaves.add(s)

    def pointing_elsewhere(c, s, a, b):
        a.parent = c.root_node

    assert Watched(inner_in_the_leaves).check() == {"leaf_sets"}
    assert Watched(pointing_elsewhere).check() == {"attachment", "lru_membership", "no_leak", "size_counters"}


def test_writes_right_after_the_build_are_seen_on_attached_and_on_detached_held_nodes():
    """The build tracks every attached node (one nothing holds too) and every node a structure holds (a detached
    leaf-set member too), so a write straight after it, before any event names the node, is seen at the next
    boundary."""
    w = Watched()
    w.a.full_lock_ref += 1
    assert w.check() == {"leaf_sets", "size_counters"}

    def detach_b(c, s, a, b):
        c._detach(s, b)
        b.value = None  # still in the device leaf set, off the device: a bad member either way

    w = Watched(detach_b)
    held = {"attachment", "leaf_sets", "lru_membership", "no_leak", "size_counters"}
    assert w.check() == held
    w.b.value = [5]  # a device leaf again, but still detached
    assert w.check() == held - {"leaf_sets"}

    def unlist_a(c, s, a, b):  # attached, held by nothing
        c.evictable_full_device_leaves.discard(a)
        for lru in (c.full_lru_list, c.mamba_lru_list, c.mamba_host_lru_list):
            lru.remove_node(a)

    w = Watched(unlist_a)
    assert w.check() == {"lru_membership"}
    w.a.full_lock_ref += 1
    assert w.check() == {"lru_membership", "size_counters"}


def test_a_parent_pointer_moved_right_after_the_build_detaches_the_node():
    """The build records each node's parent, so the parent it leaves (whose dict still lists it) is walked again."""
    w = Watched()
    w.a.parent = w.cache.root_node
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}
    w.a.parent = w.s
    assert w.check() == set()


def test_a_key_replaced_by_one_with_the_same_first_token_is_fingerprinted_again_with_its_subtree():
    """S's key [1,2] becomes [1,7] (the same dict slot, the same length): S's own KV no longer holds its prefix;
    with S's KV rewritten for [1,7], only its children's (their prefixes changed under them) do not."""
    from simcache.pools import kv_fingerprints
    w = Watched()
    s, pools = w.s, w.cache.pools
    s.key = (1, 7)
    assert w.check() == {"kv_content"}
    assert failing(w.cache, w.live, {}) == {"kv_content"}
    for pool, slots in ((pools.device_kv, s.value), (pools.host_kv, s.host_value)):
        pool.write(slots, kv_fingerprints([1, 7], start=0))
    assert w.check() == {"kv_content"}
    assert invariants.kv_content(w.cache, w.live) == \
        "node 7 [3]: device KV does not hold what was written for its prefix"


def test_the_boundary_check_built_with_an_empty_key_child_leaves_it_out():
    def empty_key(c, s, a, b):
        a.key = ()

    assert Watched(empty_key).check() == {"attachment", "lru_membership", "no_leak", "size_counters"}


def test_a_mamba_value_of_other_than_one_slot_fails_the_kv_check_on_either_tier():
    """Zero slots, or two that both hold the prefix's state (so only the length is wrong), on the device or the
    host: the named check reads ``[m]`` from neither."""
    from simcache.pools import mamba_fingerprint
    got = []
    for field, pool in (("mamba_value", "device_mamba"), ("mamba_host_value", "host_mamba")):
        w = Watched()
        a, p = w.a, getattr(w.cache.pools, pool)
        old = getattr(a, field)
        setattr(a, field, [])
        got.append(w.check())
        extra = p.alloc(1)
        p.write(extra, [mamba_fingerprint([1, 2, 3])])
        setattr(a, field, old + extra)
        got.append(w.check())
        setattr(a, field, old)
        p.free(extra)
        got.append(w.check())
    assert got == [{"kv_content", "no_leak", "size_counters"}, {"kv_content", "size_counters"}, set(),
                   {"kv_content", "no_leak"}, {"kv_content"}, set()]


def test_a_value_list_that_is_another_fields_list_is_read_as_its_own():
    """A node's lists are remembered by identity: a field given the very list another field holds (its own slots
    now) is read again, on every pairing of fields the remembered lists could be confused by."""
    got = []
    w = Watched()
    w.b.value = w.b.host_value  # device slot 3 instead of 5
    got.append(w.check())
    w = Watched()
    w.a.host_value = w.a.mamba_value  # host slot 0 instead of 2
    got.append(w.check())
    w = Watched()
    p = w.cache.pools.host_mamba
    moved = p.alloc(1)  # B's host Mamba state moved to a new slot (a new list), the old slot freed: all good
    p.write(moved, p.read(w.b.mamba_host_value))
    p.free(w.b.mamba_host_value)
    w.b.mamba_host_value = moved
    got.append(w.check())
    w.b.mamba_value = w.b.mamba_host_value  # the device Mamba slot of that number instead of 1
    got.append(w.check())
    assert got == [{"kv_content", "no_leak"}, {"kv_content", "no_leak"}, set(), {"kv_content", "no_leak"}]


def test_a_field_given_a_new_list_of_the_same_length_is_read_again():
    got = []
    for field, pool in (("host_value", "host_kv"), ("mamba_value", "device_mamba"),
                        ("mamba_host_value", "host_mamba")):
        w = Watched()
        p = getattr(w.cache.pools, pool)
        new = p.alloc(1)
        p.write(new, p.read(getattr(w.a, field)))
        setattr(w.a, field, new)  # the old slot is left allocated, the new one holds the same content
        got.append(w.check())
    assert got == [{"no_leak"}] * 3


def test_a_value_list_changed_in_place_and_written_back_is_read_again():
    """Each of A's four lists grows to two slots (a new list), then loses the second slot in place and is written
    back (the same list object, now one slot shorter): the slot it lost is no longer referenced."""
    got = []
    for field, pool in (("value", "device_kv"), ("host_value", "host_kv"), ("mamba_value", "device_mamba"),
                        ("mamba_host_value", "host_mamba")):
        w = Watched()
        p = getattr(w.cache.pools, pool)
        extra = p.alloc(1)
        setattr(w.a, field, getattr(w.a, field) + extra)
        got.append(w.check())
        lst = getattr(w.a, field)
        lst.pop()
        setattr(w.a, field, lst)
        got.append(w.check())
    assert got == [{"size_counters"}, {"no_leak"}, set(), {"no_leak"}, {"kv_content", "size_counters"}, {"no_leak"},
                   {"kv_content"}, {"no_leak"}]


def test_an_empty_value_list_still_counts_as_present_when_its_node_is_read_again():
    """``[]`` is a value (the node is on that tier with no slots): it stays wanted in its LRU list when the node is
    re-examined later with the same lists (the remembered share)."""
    got = []
    for field in ("value", "mamba_value", "mamba_host_value"):
        w = Watched()
        setattr(w.a, field, [])
        got.append(w.check())
        w.a.full_lock_ref = 0  # a write that changes nothing: A is read again, its lists the same
        got.append(w.check())
    assert got == [{"no_leak", "size_counters"}] * 2 + [{"kv_content", "no_leak", "size_counters"}] * 2 + \
        [{"kv_content", "no_leak"}] * 2


def test_each_notification_tracks_a_node_the_build_did_not_and_moved_rescans_a_dict():
    """A detached node nothing holds is not tracked by the build. Named by an event (``see``), moved (``moved``) or
    relinked (``relinked``), it is tracked from then on: a write to it is seen, here through the device leaf S whose
    dict still lists it. ``moved`` on a node whose dict lost an entry in place makes the walk read its dict again."""
    def setup(c, s, a, b):
        a.parent = c.root_node  # S lists A, which points to the root: A is detached
        for holder in (c.evictable_full_device_leaves, c.full_lru_list, c.mamba_lru_list, c.mamba_host_lru_list):
            (holder.discard if holder is c.evictable_full_device_leaves else holder.remove_node)(a)
        b.value = None  # S's only device child is A now
        c.evictable_full_device_leaves.discard(b)
        c.evictable_full_device_leaves.add(s)

    before = {"leaf_sets", "lru_membership", "no_leak", "size_counters"}
    for notify in ("see", "moved", "relinked"):
        w = Watched(setup)
        assert type(w.a) is TreeNode and w.check() == before
        getattr(w.bc, notify)(*((w.s, w.a) if notify == "relinked" else (w.a,)))
        assert w.check() == before
        w.a.value = None  # S lists no device child now
        assert w.check() == before - {"leaf_sets"}, notify
    w = Watched()
    w.s.children.pop(3)  # A leaves S's dict in place (no event), then S is reported moved
    w.bc.moved(w.s)
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}


FUZZ_OPS = [{"op": "request", "tokens": t} for t in
            ([1, 2, 3, 4], [1, 2, 5, 6], [1, 7, 8], [9, 10, 11, 12], [9, 10, 13], [1, 2, 3, 14, 15])] + \
    [{"op": "events"}, {"op": "evict", "n": 3}, {"op": "start", "tokens": [1, 2, 3, 4, 16]}]


def watched_on(ops, policy: str = "write_through") -> Watched:
    """``Watched`` on the cache ``ops`` leave (``FUZZ_OPS``: [1] and [9,10] under the root, each with a subtree)."""
    cache = HiMambaRadixCache(CacheConfig(policy=policy, device="cpu"))
    drv = Driver(cache)
    for i, op in enumerate(ops):
        drv.apply(op, i)
    w = Watched.__new__(Watched)
    w.cache, w.drv, w.live = cache, drv, list(drv.live.values())
    rec = Recorder(snapshots=False)
    rec.replayable = True
    rec.attach(cache, drv)
    w.bc, w.memo = rec._bc, {}
    return w


def fuzz_edits(seed: int, n: int = 12) -> Counter:
    """``n`` random edits by hand to a small tree (splits of attached and detached nodes, detaches, attaches with
    and without the parent pointer, parent pointers moved, children dicts replaced, keys rewritten, values,
    locks, leaf sets and LRU lists), each reported as the cache reports it, with the three checks compared after
    each. Returns how often each invariant failed."""
    w = watched_on(FUZZ_OPS, "write_back" if seed % 4 == 3 else "write_through")
    cache = w.cache
    rng = random.Random(seed)
    known = [nd for _, nd in dfs(cache)]
    seen: Counter = Counter(w.check())

    def pick(cond=lambda x: True):
        got = [x for x in known if x is not cache.root_node and cond(x)]
        return rng.choice(got) if got else None

    def above(p, x) -> bool:  # whether x is p or one of p's ancestors (a parent pointer there would make a cycle)
        for _ in range(64):
            if p is None:
                return False
            if p is x:
                return True
            p = p.parent
        return True

    log = []
    for _ in range(n):
        kind = rng.choice(["split", "detach", "attach", "repoint", "redict", "rekey", "value", "leaf", "lru",
                           "pool"])
        x = pick()
        p = rng.choice(known)
        if kind == "split" and len(x.key) > 1:
            try:
                known.append(cache._split_node(x.key, x, rng.randrange(1, len(x.key))))
            except CacheAssertion:  # SGLang's own check (a node not in an LRU list): the state is checked as left
                pass
        elif kind == "detach":
            cache._detach(x.parent if rng.random() < 0.8 or x.parent is None else p, x)
        elif kind in ("attach", "repoint") and not above(p, x):
            if kind == "repoint" or rng.random() < 0.7:
                x.parent = p
            if kind == "attach":
                cache._attach(p, x)
        elif kind == "redict":
            x.children = {k: c for k, c in x.children.items() if rng.random() < 0.7}
        elif kind == "rekey":
            x.key = x.key[:1] + tuple(rng.randint(1, 3) for _ in x.key[1:])
        elif kind == "value":
            field = rng.choice(["value", "host_value", "mamba_value", "mamba_host_value", "full_lock_ref",
                                "mamba_lock_ref", "host_ref_counter"])
            old = getattr(x, field)
            setattr(x, field, (old + rng.choice([-1, 1])) if isinstance(old, int) else
                    None if old is not None and rng.random() < 0.6 else list(old or [rng.randrange(8)]))
        elif kind == "leaf":
            s = rng.choice([cache.evictable_full_device_leaves, cache.evictable_full_host_leaves])
            (s.discard if x in s else s.add)(x)
        elif kind == "lru":
            lru = cache.full_lru_list
            if lru.in_list(x):
                lru.remove_node(x)
            elif x.value is not None:
                lru.insert_mru(x)
        elif kind == "pool":  # a slot leaked, or a used one freed (its owner, if any, keeps it)
            pool = getattr(cache.pools, rng.choice(["device_kv", "host_kv", "device_mamba", "host_mamba"]))
            used = [i for i, f in enumerate(pool._free_count) if f == 0]
            pool.alloc(1) if rng.random() < 0.5 or not used else pool.free([rng.choice(used)])
        log.append((kind, x.id, p.id))
        try:
            seen.update(w.check())
        except AssertionError as e:
            raise AssertionError(f"{e} after {log}") from None
    return seen


def test_a_node_also_listed_by_a_node_that_is_not_its_parent_is_counted_once():
    """A in B's dict too (A still points to S), then S in A's dict (below itself): the named checks count each
    attached node once, following only the links that agree, and end (``state.dfs`` follows every entry that
    names an attached node)."""
    w = Watched()
    c, s, a, b = w.cache, w.s, w.a, w.b
    c._attach(b, a)  # B lists A: B is no device leaf now, but A is attached once, under S
    assert w.check() == {"leaf_sets"}
    assert [n.id for n in invariants._tree(c)] == [8, 7, 9]
    assert [n.id for _, n in dfs(c)] == [8, 7, 9, 7]  # what the named checks walked before
    c._detach(b, a)
    c._attach(a, s, (1, 2))  # A lists S, its own parent
    assert w.check() == {"leaf_sets"}
    assert [n.id for n in invariants._tree(c)] == [8, 7, 9]
    c._detach(a, s)
    assert w.check() == set()


def test_random_hand_edits_keep_the_three_checks_in_agreement():
    """``fuzz_edits`` over 80 seeds: every boundary agrees (checked inside), and each invariant failed somewhere."""
    seen: Counter = Counter()
    for seed in range(80):
        seen.update(fuzz_edits(seed))
    assert set(seen) == set(INVARIANTS) - {"no_double_free"}


def test_slots_held_by_a_live_request_or_the_host_release_queue_are_not_leaked():
    """A used slot nobody in the tree refers to is a leak unless a live request (its KV past the cached prefix, its
    Mamba slot, its track buffer) or a page waiting in the host release queue refers to it."""
    w = Watched()
    c, r = w.cache, w.live[0]
    assert (r.kv, r.cache_protected_len, r.mamba_pool_idx, r.track_buffer) == ([6, 7], 0, 2, None)
    r.cache_protected_len = 1  # slot 6 is the cached prefix's now, and no node holds it
    assert w.check() == {"no_leak"}
    r.cache_protected_len = 0
    r.tokens = r.tokens[:1]  # slot 7 is past the request's tokens
    assert w.check() == {"no_leak"}
    r.tokens = [5, 6]
    assert w.check() == set()
    got = []
    for pool in ("device_mamba", "host_kv"):
        extra = getattr(c.pools, pool).alloc(1)
        got.append(w.check())
        if pool == "device_mamba":
            r.track_buffer = extra[0]
        else:
            c.controller.host_mem_release_queue.append(list(extra))
        got.append(w.check())
    assert got == [{"no_leak"}, set(), {"no_leak"}, set()]
    r.mamba_pool_idx, r.track_buffer = r.track_buffer, None  # its Mamba slot moves: slot 2 is left to nobody
    assert w.check() == {"no_leak"}


def test_two_nodes_failing_the_same_check_are_repaired_one_at_a_time():
    """Each node's share of a check is counted: with A and B both failing it, repairing one leaves it failing and
    repairing the other clears it (a Mamba value of no slot, a node on neither tier, a backup under a parent
    without one)."""
    got = []
    for fields in (("mamba_value",), ("value", "host_value")):
        w = Watched()
        a, b = w.a, w.b
        saved = {n: {f: getattr(n, f) for f in fields} for n in (a, b)}
        for n in (a, b):
            for f in fields:
                setattr(n, f, [] if f == "mamba_value" else None)
        got.append(w.check())
        for n in (a, b):
            for f, v in saved[n].items():
                setattr(n, f, v)
            got.append(w.check())
    w = Watched()
    host = w.s.host_value
    w.s.host_value = None  # A and B are backed up under a parent that is not
    got.append(w.check())
    w.s.host_value = host
    got.append(w.check())
    assert got == [{"kv_content", "no_leak", "size_counters"}, {"kv_content", "no_leak", "size_counters"}, set(),
                   {"leaf_sets", "lru_membership", "no_leak", "size_counters", "tier_monotonicity"},
                   {"leaf_sets", "lru_membership", "no_leak", "size_counters", "tier_monotonicity"}, set(),
                   {"backup_continuity", "no_leak"}, set()]


def test_a_kv_list_of_the_wrong_length_still_refers_to_its_slots_until_it_is_dropped():
    """A's device KV grows to two slots for a one-token key: not compared, but its slots are referenced; when A
    leaves the device (its only change in that pool: references dropped, no content), both slots are leaked."""
    w = Watched()
    extra = w.cache.pools.device_kv.alloc(1)
    w.a.value = w.a.value + extra
    assert w.check() == {"size_counters"}
    w.a.value = None
    assert w.check() == {"leaf_sets", "lru_membership", "no_leak", "size_counters"}
    assert invariants.no_leak(w.cache, w.live) == \
        f"device_kv slot(s) [2, {extra[0]}] are allocated but nobody refers to them"


def test_an_evicted_parent_is_checked_again_when_its_last_device_child_leaves_the_device():
    w = Watched()
    w.s.value = None  # S is evicted above its device children A and B
    got = [w.check()]
    w.a.value = None
    got.append(w.check())
    w.b.value = None  # no device child left: S is a good evicted node
    got.append(w.check())
    assert got == [{"lru_membership", "no_leak", "size_counters", "tier_monotonicity"},
                   {"leaf_sets", "lru_membership", "no_leak", "size_counters", "tier_monotonicity"},
                   {"leaf_sets", "lru_membership", "no_leak", "size_counters"}]


def test_a_node_moved_by_replacing_children_dicts_is_attached_under_its_new_parent():
    """A moves from S to B by new dicts (S's without it, B's with it) and its parent pointer: it stays attached,
    now under B (its prefix [1,2,4,3], so its contents no longer match); moved back the same way, all is good."""
    w = Watched()
    s, a, b = w.s, w.a, w.b
    a.parent = b
    b.children = {3: a}
    s.children = {4: b}
    assert w.check() == {"kv_content", "leaf_sets"}
    assert [n.id for n in invariants._tree(w.cache)] == [8, 9, 7]
    a.parent = s
    b.children = {}
    s.children = {3: a, 4: b}
    assert w.check() == set()
    w.cache._detach(s, a)  # the same move, S's entry popped in place, B given a new dict holding A
    a.parent = b
    b.children = {3: a}
    assert w.check() == {"kv_content", "leaf_sets"}
    fresh = TreeNode(99, 0.0, (7,))  # a node no event named, put in place by a new dict: on neither tier
    fresh.parent = s
    s.children = {**s.children, 7: fresh}
    assert w.check() == {"kv_content", "leaf_sets", "tier_monotonicity"}
    assert invariants.tier_monotonicity(w.cache, w.live) == "node 99 [7] is in the tree but on neither tier"
    fresh.host_value = []  # tracked from its first boundary on: on the host now (no slots, not compared)
    assert w.check() == {"kv_content", "leaf_sets"}


def test_two_subtrees_leaving_and_joining_in_one_boundary_are_both_counted():
    """[1] and [9,10] (each with a subtree) are detached in one operation, then attached again in one: every node
    below them leaves and rejoins the counts, whichever of the two the walk finds first. Then a key is rewritten
    in its slot while a child leaves it in place: the child is not re-attached with the rewritten subtree."""
    w = watched_on(FUZZ_OPS)
    c, root = w.cache, w.cache.root_node
    assert w.check() == set()
    one, nine = root.children[1], root.children[9]
    assert (one.key, nine.key, sorted(nine.children)) == ((1,), (9, 10), [11, 13])
    c._detach(root, one)
    c._detach(root, nine)
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}
    c._attach(root, one)
    c._attach(root, nine)
    assert w.check() == set()
    below = invariants._tree(c)
    c._detach(root, one)
    c._detach(root, nine)
    for n in below:  # and every holder and counter let go of them: only their slots are left (leaked)
        c.evictable_full_device_leaves.discard(n)
        c.evictable_full_host_leaves.discard(n)
        for lru in (c.full_lru_list, c.mamba_lru_list, c.mamba_host_lru_list):
            if lru.in_list(n):
                lru.remove_node(n)
    c.full_evictable_size_ = c.full_protected_size_ = c.mamba_evictable_size_ = c.mamba_protected_size_ = 0
    assert w.check() == {"no_leak"}
    c._attach(root, one)
    c._attach(root, nine)
    assert w.check() == {"lru_membership", "size_counters"}
    w = watched_on(FUZZ_OPS)
    nine = w.cache.root_node.children[9]
    leaf = nine.children[13]
    nine.key = (9, 11)
    w.cache._detach(nine, leaf)
    assert w.check() == {"attachment", "kv_content", "lru_membership", "no_leak", "size_counters"}
    assert invariants.attachment(w.cache, w.live).startswith(f"node {leaf.id} [13] is detached but still held by")


def test_every_child_of_a_node_whose_host_value_changed_is_checked_again():
    """S loses its host KV while one of its children loses its own too: the other child, untouched, is backed up
    under a parent that is not, found only if every child of S is read again; S gets its host KV back: good."""
    for name in ("a", "b"):
        w = Watched()
        host = w.s.host_value
        w.s.host_value = None
        getattr(w, name).host_value = None
        assert w.check() == {"backup_continuity", "no_leak"}
        w.s.host_value = host
        assert w.check() == {"no_leak"}


def test_a_pool_that_is_no_numpy_view_makes_the_boundary_check_answer_with_failing(monkeypatch):
    """A pool whose data is not a CPU numpy view (a GPU pool) cannot be compared through ``_np``: the boundary check
    answers with ``failing`` (the live requests and its memo passed on), here on a state that fails twice."""
    calls = []
    real = invariants.failing

    def counted(cache, live=(), memo=None):
        calls.append((cache, list(live), memo))
        return real(cache, live, memo)

    w = Watched()
    monkeypatch.setattr(invariants.boundary, "failing", counted)
    w.cache.pools.device_kv._np = None
    w.a.full_lock_ref += 1
    assert w.bc.failing(w.live) == {"leaf_sets", "size_counters"} == named(w.cache, w.live)
    assert [call[:2] for call in calls] == [(w.cache, w.live)]


def test_a_detached_node_held_only_by_one_in_flight_map_fails_attachment():
    """A leaves the tree and every list and set, held only by one of the in-flight maps (write-through, load-back,
    storage backup, a prefetch's anchor): attachment fails through that map alone; let go, only its slots leak."""
    from types import SimpleNamespace

    from simcache.prefetch import PrefetchInFlight
    no_mamba = SimpleNamespace(mamba=None)  # a prefetch operation that reserved no host Mamba slot
    holders = [lambda c, a: c.ongoing_write_through.__setitem__(a.id, a),
               lambda c, a: c.ongoing_load_back.__setitem__(a.id, a),
               lambda c, a: c.ongoing_backup.__setitem__(1, (a, False)),
               lambda c, a: c.ongoing_prefetch.__setitem__("pf", PrefetchInFlight(a, [], [], no_mamba))]
    got = []
    for hold in holders:
        w = Watched()
        c, a = w.cache, w.a
        c._detach(w.s, a)
        c.evictable_full_device_leaves.discard(a)
        for lru in (c.full_lru_list, c.mamba_lru_list, c.mamba_host_lru_list):
            lru.remove_node(a)
        c.full_evictable_size_ -= 1
        c.mamba_evictable_size_ -= 1
        hold(c, a)
        got.append(w.check())
        for held in (c.ongoing_write_through, c.ongoing_load_back, c.ongoing_backup, c.ongoing_prefetch):
            held.clear()
        got.append(w.check())
    assert got == [{"attachment", "no_leak"}, {"no_leak"}] * 4


def test_two_slots_shared_at_once_then_one_parted_leave_the_other_still_shared():
    """A takes S's first device slot and B its second: two slots owned twice at once (the boundary check answers
    with ``failing``). A gets its own back: S's second slot is still owned twice, and its content (S's or B's,
    one variant each) fails the other owner's check."""
    from simcache.pools import kv_fingerprints
    for holds in ("S", "B"):
        w = Watched()
        s, a, b, dev = w.s, w.a, w.b, w.cache.pools.device_kv
        a_value, b_value = a.value, b.value
        if holds == "B":
            dev.write(s.value[1:], kv_fingerprints([1, 2, 4], start=2))
        a.value, b.value = s.value[:1], s.value[1:]
        assert w.check() == {"kv_content", "no_leak"}
        a.value = a_value
        assert w.check() == {"kv_content", "no_leak"}
        b.value = b_value
        assert w.check() == ({"kv_content"} if holds == "B" else set())


def test_a_child_dropped_by_a_new_dict_stays_dropped_when_a_dict_below_is_replaced_too():
    w = Watched()
    w.s.children = {4: w.b}  # A is left out of S's new dict (still pointing to S): detached
    w.b.children = {}  # and B, below S, gets a new (empty) dict in the same operation
    assert w.check() == {"attachment", "lru_membership", "no_leak", "size_counters"}


def test_a_host_pool_that_copies_with_streams_is_read_through_its_reads():
    """A host pool with streams (as on CUDA) may have copies in flight: ``failing`` reads it through ``read`` (which
    lands them), and the boundary check answers with ``failing``; a host KV slot overwritten is found either way."""
    w = Watched()
    host = w.cache.pools.host_kv
    host.streams = object()  # no copy is in flight: reads of a host pool land pending copies, then read numpy
    assert w.check() == set()
    old = host.read(w.a.host_value)
    host.write(w.a.host_value, [old[0] + 1])
    assert w.check() == {"kv_content"}
    host.write(w.a.host_value, old)
    assert w.check() == set()


def test_the_named_checks_name_the_first_failing_sibling_by_key_not_by_age():
    w = Watched()
    a, b, dev = w.a, w.b, w.cache.pools.device_kv
    a.last_access_time = b.last_access_time + 1  # A, key [3], is now the more recently used of the two
    for n in (a, b):
        dev.write(n.value, [0])
    assert invariants.kv_content(w.cache, w.live) == \
        "node 7 [3]: device KV does not hold what was written for its prefix"
    assert w.check() == {"kv_content"}


def test_a_slot_owned_three_times_that_loses_two_owners_is_still_checked_for_its_last_owner():
    """S and B take A's host Mamba slot before the check is built: one slot owned three times, the pool's only owned
    slot. B lets go (two owners: the check answers with ``failing``), then A (one owner, S, whose state the slot does
    not hold): the boundary check must still compare that pool, so it counts the slot owned until its last owner
    goes, not once the third does."""
    def three_own_one(c, s, a, b):
        s.mamba_host_value, b.mamba_host_value = list(a.mamba_host_value), list(a.mamba_host_value)

    w = Watched(three_own_one)
    assert w.bc.owned["host_mamba"] == 1 and w.bc.cnt["host_mamba"][:2] == [3, 0]
    assert w.check() == {"kv_content", "no_leak"}
    w.b.mamba_host_value = None
    assert w.check() == {"kv_content", "lru_membership", "no_leak"}
    assert (w.bc.owned["host_mamba"], w.bc.multi["host_mamba"]) == (1, 1)
    w.a.mamba_host_value = None
    assert w.check() == {"kv_content", "lru_membership", "no_leak"}
    assert (w.bc.owned["host_mamba"], w.bc.multi["host_mamba"], w.bc.cnt["host_mamba"][:2]) == (1, 0, [1, 0])
