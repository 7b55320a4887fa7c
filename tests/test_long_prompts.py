"""Long prompts at C speed (#41): each fast path gives exactly what the plain one gives.

A pool of at least ``pools._BIG`` slots keeps its free counts in numpy and moves many slots in one indexed update;
``match_len`` finds the common prefix by slice compares; ``run_ops`` spells each key once. Each is compared here
with the plain way on random inputs, double frees and slots listed twice included."""
from __future__ import annotations

import random

import numpy as np
import pytest

from simcache import pools as P
from simcache.keys import match_len
from simcache.ops_run import run_ops
from simcache.state import tree_and_slot_lines, tree_lines, tree_slot_lines


def _match_len_by_pages(a, b, page_size: int) -> int:
    """The page-by-page compare ``match_len`` replaced (its exact behaviour, a list never equal to a tuple)."""
    if page_size == 1:
        i = 0
        for x, y in zip(a, b):  # noqa: B905
            if x != y:
                break
            i += 1
        return i
    n, i = min(len(a), len(b)), 0
    while i < n and a[i : i + page_size] == b[i : i + page_size]:
        i += page_size
    return i


def test_match_len_is_the_page_by_page_compare_on_random_keys():
    rng = random.Random(7)
    for _ in range(5_000):
        ps = rng.choice([1, 1, 2, 3, 4, 16])
        la, lb = rng.randrange(0, 80), rng.randrange(0, 80)
        base = [rng.randrange(3) for _ in range(max(la, lb))]
        a, b = base[:la], list(base[:lb])
        if b and rng.random() < 0.7:
            b[rng.randrange(len(b))] = rng.randrange(3)
        for x, y in ((tuple(a), tuple(b)), (a, tuple(b)), (tuple(a), b), (a, b)):
            assert match_len(x, y, ps) == _match_len_by_pages(x, y, ps), (x, y, ps)
    long = tuple(range(5000))
    assert match_len(long, long[:4321] + (-1,), 1) == 4321
    assert match_len(long, long[:4321] + (-1,), 16) == 4320


def _list_pool(size: int) -> P.SlotPool:
    pool = P.SlotPool("device_kv", size)
    pool._free_count = [1] * size  # the plain representation, whatever the size
    return pool


@pytest.mark.parametrize("seed", range(6))
def test_a_big_pool_counts_exactly_as_a_list_of_counts_does(seed):
    rng = random.Random(seed)
    size = rng.choice([P._BIG, 3000])
    big, plain = P.SlotPool("device_kv", size), _list_pool(size)
    assert isinstance(big._free_count, np.ndarray) and isinstance(P.SlotPool("x", P._BIG - 1)._free_count, list)
    held: list[list[int]] = []
    for step in range(120):
        r = rng.random()
        if r < 0.45:
            n = rng.choice([1, 2, 5, 40, 300, 1500])
            got = big.alloc(n)
            assert got == plain.alloc(n)
            if got:
                held.append(got)
        elif r < 0.85 and held:
            slots = held.pop(rng.randrange(len(held)))[: rng.randrange(1, 2000)]
            if rng.random() < 0.2:
                slots = slots + slots[: rng.randrange(len(slots))]  # listed twice in one free
            if rng.random() < 0.1:
                slots = slots + [rng.randrange(size)]  # perhaps already free
            assert big.free(slots) == plain.free(slots)
        else:  # frees of random slots: double frees, some of them many at once
            slots = [rng.randrange(size) for _ in range(rng.choice([1, 3, 50]))]
            big.free(slots)
            plain.free(slots)
        assert big._free_count.tolist() == plain._free_count, (seed, step)
        assert list(big.free_slots) == list(plain.free_slots)
        assert [d.slots for d in big.double_frees] == [d.slots for d in plain.double_frees]
    refs = [s for h in held for s in h] + [rng.randrange(size) for _ in range(30)] + (held[0][:5] if held else [])
    assert big.accounting(refs) == plain.accounting(refs)
    for pool in (big, plain):  # a reference past the pool: the general path, which names no slot but fails alike
        with pytest.raises(IndexError):
            pool.accounting(refs + [size + 3])
    assert big.used_slots() == plain.used_slots()
    assert [big.is_free(s) for s in range(0, size, 5)] == [plain.is_free(s) for s in range(0, size, 5)]
    assert seed != 0 or big._repeats  # the exact (np.add.at) path ran


def test_a_big_pool_turns_to_exact_counting_once_a_slot_is_listed_twice():
    pool = P.SlotPool("host_kv", P._BIG)
    first = pool.alloc(100)
    assert not pool._repeats and pool.free(first + first[:3]) == 103  # three slots listed twice in one free
    assert pool._repeats and pool.double_frees == []
    assert [pool._free_count[s] for s in first[:4]] == [2, 2, 2, 1]
    assert pool.alloc(P._BIG + 3)[-3:] == first[:3]  # each repeat is handed out again, and counted down twice
    assert pool._free_count.tolist() == [0] * P._BIG


def test_the_old_accounting_and_the_new_agree_on_small_and_big_pools():
    from collections import Counter

    def by_counters(pool, referenced):  # the accounting before #41, over the free list itself
        refs = Counter(referenced)
        in_use = {s for s in range(pool.size) if pool._free_count[s] == 0}
        free_cnt = Counter(pool.free_slots)
        return P.PoolAccounting(
            leaked=tuple(sorted(in_use - set(refs))),
            free_but_referenced=tuple(sorted(s for s in refs if pool._free_count[s] > 0)),
            duplicated_in_free_list=tuple(sorted(s for s, k in free_cnt.items() if k > 1)),
            shared=tuple(sorted(s for s, k in refs.items() if k > 1)))

    rng = random.Random(3)
    for _ in range(60):
        pool = P.SlotPool("h", rng.choice([5, 40, P._BIG]))
        held = []
        for _ in range(30):
            if rng.random() < 0.5:
                got = pool.alloc(rng.choice([1, 3, 30]))
                if got:
                    held.append(got)
            elif held:
                got = held.pop()
                pool.free(got + got[:1] if rng.random() < 0.3 else got)
        refs = [s for h in held for s in h] + [rng.randrange(pool.size) for _ in range(5)]
        refs += [s for h in held[:1] for s in h]
        assert pool.accounting(refs) == by_counters(pool, refs)
        assert pool.accounting(iter(refs)) == by_counters(pool, refs)


def test_run_ops_spells_the_tree_as_the_two_views_do():
    from simcache.ops_run import check_doc, execute
    from simcache.versions import preset

    rng = random.Random(5)
    ops = [{"op": "request", "tokens": [rng.randrange(1, 9) for _ in range(rng.randrange(2, 300))]}
           for _ in range(40)]
    doc = {"config": dict(policy="write_through", device_kv=P._BIG, host_kv=P._BIG, device_mamba=64,
                          host_mamba=64), "ops": ops}
    res = run_ops(doc)
    cfg, checked = check_doc(doc)
    cache = execute(cfg, [(None, op) for op in checked], preset("pre_fix"))["_cache"]
    assert (res["tree"], res["tree_slots"]) == tree_and_slot_lines(cache) == (tree_lines(cache),
                                                                               tree_slot_lines(cache))
    assert len(res["tree"]) > 10


def _wrong_backup_data(kind: str, right: list[int]) -> list[int]:
    """What a faulty backup of node [3, 4] (under [1, 2]) could leave in its host slots."""
    from simcache.pools import kv_fingerprints

    return {"the sibling's KV": kv_fingerprints([1, 2, 5, 6], start=2),  # copied from the wrong device slots
            "its tokens' KV without their prefix": kv_fingerprints([3, 4]),
            "its KV one position later": kv_fingerprints([1, 2, 3, 4, 3, 4], start=4),
            "its two slots swapped": right[::-1],
            "a stale slot": [right[0], 0]}[kind]


@pytest.mark.parametrize("kind", ["the sibling's KV", "its tokens' KV without their prefix",
                                  "its KV one position later", "its two slots swapped", "a stale slot"])
def test_a_backup_holding_the_wrong_data_is_caught_by_every_content_check(kind):
    """The fingerprints are computed at C speed now (#41), still a function of the whole prefix: a host copy that
    holds other data, even the same tokens' KV after another prefix, fails ``kv_content`` in the named check, the
    one-pass check and the recorder's boundary check, and only there."""
    from simcache.invariants import check_all, failing
    from simcache.ops_run import check_doc, execute
    from simcache.trace import Recorder
    from simcache.versions import preset

    doc = {"config": dict(policy="write_through", device_kv=32, host_kv=16, device_mamba=8, host_mamba=8),
           "ops": [{"op": "request", "tokens": [1, 2, 3, 4]}, {"op": "request", "tokens": [1, 2, 5, 6]},
                   {"op": "events"}, {"op": "events"}]}
    seen = {}

    def corrupt(i, cache, drv):
        if i == 2:
            node = cache.root_node.children[1].children[3]
            # the backups are acknowledged: they hold the right data, then this one is damaged
            assert node.key == (3, 4) and node.host_value is not None
            right = cache.pools.host_kv.read(node.host_value)
            seen["before"] = (check_all(cache, drv.live.values())["kv_content"], failing(cache, drv.live.values()))
            wrong = _wrong_backup_data(kind, right)
            assert wrong != right
            cache.pools.host_kv.write(node.host_value, wrong)
            seen["after"] = (check_all(cache, drv.live.values())["kv_content"], failing(cache, drv.live.values()))

    cfg, ops = check_doc(doc)
    rec = Recorder(snapshots=False)
    res = execute(cfg, [(None, op) for op in ops], preset("followup_fix"), recorder=rec, on_step=corrupt)
    assert res["outcome"] == "clean"
    assert seen["before"] == (None, set())
    assert seen["after"] == ("node 7 [3,4]: host KV does not hold what was written for its prefix", {"kv_content"})
    assert [(v.op, v.invariant, v.message) for v in rec.violations] == [
        (3, "kv_content", "node 7 [3,4]: host KV does not hold what was written for its prefix")]


@pytest.mark.parametrize("policy,kept", [("write_through", "bounded"), ("write_back", "bounded"),
                                         ("write_through", "dropped at once")])
def test_the_boundary_check_of_big_pools_agrees_with_the_other_checks_while_a_workload_is_broken(monkeypatch, policy,
                                                                                                kept):
    """The boundary check keeps a big pool's per-slot state in numpy and reads only the slots written or re-owned
    since the last boundary (#41): after every operation of a workload with big KV pools (and small Mamba pools,
    the plain path), each break of ``test_core_exact_invariants`` is named as the one-pass and named checks name
    it, and its repair clears it. A big KV pool's shares are bytes read as arrays; a big Mamba pool's are tuples
    whose arrays it keeps, bounded: with big Mamba pools too and a bound of a few numbers, they are dropped at
    nearly every boundary and made again, with the same answers."""
    from test_core_exact_invariants import BREAKS, SHARED, Agreement, named, workload

    from simcache.invariants import boundary_pools
    from simcache.ops_run import check_doc, execute
    from simcache.trace import Recorder
    from simcache.versions import preset

    agree = Agreement(monkeypatch)
    doc = workload(policy)
    doc["config"].update(device_kv=P._BIG, host_kv=P._BIG + 64)
    big_mamba = kept == "dropped at once"
    if big_mamba:
        monkeypatch.setattr(boundary_pools, "_ARRS_PER_SLOT", 0)
        monkeypatch.setattr(boundary_pools, "_ARRS_EXTRA", 3)
        doc["config"].update(device_mamba=P._BIG, host_mamba=P._BIG)
    cfg, ops = check_doc(doc)
    rec = Recorder(snapshots=False)
    applied = []

    def step(i, cache, drv):
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

    execute(cfg, [(None, op) for op in ops], preset("followup_fix"), recorder=rec, on_step=step)
    assert rec._bc.big == {"device_kv": True, "host_kv": True, "device_mamba": big_mamba, "host_mamba": big_mamba}
    shares = [e for _, s in rec._bc.share.values() for e in s[10]]
    assert {(pool, type(slots)) for pool, slots, _ in shares} == {
        ("device_kv", bytes), ("host_kv", bytes), ("device_mamba", tuple), ("host_mamba", tuple)}
    assert bool(rec._bc._arrs) == big_mamba and rec._bc._arrs_n <= rec._bc._arrs_max + 3 * P._BIG
    assert agree.checked == len(ops) + 2 * len(applied) + 2 * applied.count(BREAKS.index((SHARED, None)))
    assert set(applied) == set(range(len(BREAKS))) and rec.violations == []


def test_a_big_pool_shows_its_observer_the_index_array_of_the_slots_it_tells():
    """During the observer's call for an alloc or free a big pool made an index array of (``_MANY`` slots or more),
    ``event_idx`` is that array (the boundary check reads it instead of converting the slots again); else None,
    and None after every call, also one the observer raised in."""
    pool = P.SlotPool("device_kv", P._BIG)
    seen = []
    pool.observer = lambda name, what, slots: seen.append(
        (what, slots, None if pool.event_idx is None else pool.event_idx.tolist()))
    many = pool.alloc(100)
    one = pool.alloc(1)
    pool.free(many[:40])
    pool.free(many[40:45])
    pool.free(one)
    assert [(w, len(s), i is None or i == list(s)) for w, s, i in seen] == [
        ("alloc", 100, True), ("alloc", 1, True), ("free", 40, True), ("free", 5, True), ("free", 1, True)]
    assert [i is None for _, _, i in seen] == [False, True, False, True, True] and pool.event_idx is None

    def fails(name, what, slots):
        raise RuntimeError("observer")

    pool.observer = fails
    with pytest.raises(RuntimeError):
        pool.alloc(50)
    assert pool.event_idx is None
    small = P.SlotPool("device_kv", 64)
    small.observer = lambda name, what, slots: seen.append(small.event_idx)
    small.free(small.alloc(40))
    assert seen[-2:] == [None, None]


def test_the_trace_hash_is_the_same_whatever_its_chunk_and_is_json_dumps_of_the_steps(monkeypatch):
    """The hash writer streams a few hundred steps at a time (a long prompt's step is tens of kB of text; #41 found
    4,096 of them alive at once): the digest is that of ``json.dumps`` of every step, for any chunk size."""
    import hashlib
    import json

    from simcache.ops_run import check_doc, execute
    from simcache.trace import Recorder, hash_writer
    from simcache.versions import preset

    rng = random.Random(11)
    ops = [{"op": "request", "tokens": [rng.randrange(1, 6) for _ in range(rng.randrange(2, 400))]}
           for _ in range(80)] + [{"op": "events"}, {"op": "evict", "n": 500}]
    cfg, checked = check_doc({"config": dict(policy="write_through", device_kv=P._BIG, host_kv=P._BIG,
                                             device_mamba=64, host_mamba=64), "ops": ops})
    rec = Recorder(snapshots=False)
    execute(cfg, [(None, op) for op in checked], preset("followup_fix"), recorder=rec)
    assert len(rec.steps) > 2 * hash_writer.CHUNK  # three chunks at least
    want = hashlib.sha256(json.dumps([s.as_dict() for s in rec.steps], sort_keys=True, default=str).encode())
    got = {}
    for chunk in (1, 7, hash_writer.CHUNK, 4096, 10**6):
        monkeypatch.setattr(hash_writer, "CHUNK", chunk)
        got[chunk] = rec.sha256()
    assert set(got.values()) == {want.hexdigest()}
