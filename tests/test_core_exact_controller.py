"""Exact outcomes of the cache controller (``controller.py``) at unit level: what a write or a load allocates, in
which order it gives up, what it rolls back, which eviction hook it calls and with what count; manual acks; L3
backups, prefetches and the host release queue.

Each test builds tiny ``Pools`` and a ``CacheController`` directly and compares return values, the pools' free
lists, the transfers and the queues.
"""
from __future__ import annotations

import pytest

from simcache.controller import CacheController, MambaTransfer, PrefetchOp
from simcache.pools import Pools, kv_fingerprints, mamba_fingerprint


def controller(device_kv=8, device_mamba=2, host_kv=4, host_mamba=2, page_size=1, auto_complete=True):
    pools = Pools.create(device_kv, device_mamba, host_kv, host_mamba)
    cc = CacheController(pools, "write_through", page_size, auto_complete=auto_complete)
    calls: list[tuple[str, int]] = []
    cc.evict_mamba_host = lambda n: calls.append(("evict_mamba_host", n))
    cc.evict_mamba = lambda n: calls.append(("evict_mamba", n))
    return cc, pools, calls


def free(pools):
    return {name: list(pool.free_slots) for name, pool in pools.all().items()}


def test_a_write_allocates_host_kv_then_each_host_mamba_slot_and_queues_one_ack():
    cc, pools, calls = controller(auto_complete=False)
    tr = MambaTransfer(None, [0])
    assert cc.write([0, 1], 7, [tr]) == [0, 1]
    assert tr.host_indices == [0]
    assert free(pools) == dict(device_kv=list(range(8)), device_mamba=[0, 1], host_kv=[2, 3], host_mamba=[1])
    assert [(a.node_ids, a.done, a.copies) for a in cc.ack_write_queue] == [([7], False, [])]
    assert calls == [] and cc.ack_load_queue == []


def test_a_write_short_of_host_kv_allocates_nothing_and_evicts_nothing():
    cc, pools, calls = controller(host_kv=1)
    tr = MambaTransfer(None, [0])
    assert cc.write([0, 1], 7, [tr]) is None
    assert tr.host_indices is None and calls == [] and cc.ack_write_queue == []
    assert free(pools)["host_kv"] == [0] and free(pools)["host_mamba"] == [0, 1]


def test_a_write_short_of_host_mamba_evicts_once_and_rolls_back_every_slot_it_took():
    """Two Mamba states, one host slot: the first is allocated, the second evicts (the hook frees nothing) and
    still fails, so the first slot and the host KV go back and both transfers are as they came."""
    cc, pools, calls = controller(host_mamba=1)
    first, second = MambaTransfer(None, [1]), MambaTransfer(None, [0])
    assert cc.write([2, 3], 8, [first, second]) is None
    assert (first.host_indices, second.host_indices) == (None, None)
    assert calls == [("evict_mamba_host", 1)]
    assert free(pools)["host_kv"] == [2, 3, 0, 1] and free(pools)["host_mamba"] == [0]
    assert cc.ack_write_queue == []


def test_a_write_whose_mamba_eviction_frees_a_slot_takes_it():
    cc, pools, calls = controller(host_mamba=1)
    pools.host_mamba.alloc(1)
    cc.evict_mamba_host = lambda n: (calls.append(("evict_mamba_host", n)), pools.host_mamba.free([0]))
    tr = MambaTransfer(None, [1])
    assert cc.write([2], 8, [tr]) == [0]
    assert tr.host_indices == [0] and calls == [("evict_mamba_host", 1)]
    assert len(cc.ack_write_queue) == 1


def test_a_transfer_that_already_has_its_slot_allocates_nothing():
    cc, pools, calls = controller()
    pools.host_mamba.alloc(2)
    kept = MambaTransfer([1], [0])
    assert cc.write([0], 7, [kept]) == [0]
    assert kept.host_indices == [1] and free(pools)["host_mamba"] == [] and calls == []


def test_a_load_of_no_kv_allocates_only_the_device_mamba_slot():
    cc, pools, calls = controller()
    tr = MambaTransfer([0], None)
    assert cc.load([], 7, [tr]) == []
    assert tr.device_indices == [0]
    assert free(pools)["device_kv"] == list(range(8)) and free(pools)["device_mamba"] == [1]
    assert [(a.node_ids, a.done) for a in cc.ack_load_queue] == [([7], True)]


def test_a_load_short_of_device_mamba_evicts_once_and_gives_back_its_kv_and_slots():
    cc, pools, calls = controller(device_mamba=1)
    first, second = MambaTransfer([0], None), MambaTransfer([1], None)
    assert cc.load([0, 1, 2], 8, [first, second]) is None
    assert (first.device_indices, second.device_indices) == (None, None)
    assert calls == [("evict_mamba", 1)]
    assert free(pools)["device_kv"] == [3, 4, 5, 6, 7, 0, 1, 2] and free(pools)["device_mamba"] == [0]
    assert cc.ack_load_queue == []


def test_a_load_rolls_back_the_device_slots_it_took_never_the_host_slots_they_copy_from():
    """The first state's host slot (5) differs from the device slot it was given (0): the roll-back frees 0."""
    cc, pools, calls = controller(device_mamba=1)
    first, second = MambaTransfer([5], None), MambaTransfer([1], None)
    assert cc.load([0], 8, [first, second]) is None
    assert (first.host_indices, first.device_indices, second.device_indices) == ([5], None, None)
    assert free(pools)["device_mamba"] == [0] and free(pools)["host_mamba"] == [0, 1]
    assert calls == [("evict_mamba", 1)]


def test_a_transfer_that_already_has_its_slot_is_skipped_and_the_next_one_still_gets_its_own():
    cc, pools, calls = controller()
    kept, needs = MambaTransfer([1], [1]), MambaTransfer([0], None)
    assert cc.load([], 7, [kept, needs]) == []
    assert (kept.device_indices, needs.device_indices) == ([1], [0])
    assert free(pools)["device_mamba"] == [1] and calls == []
    up = MambaTransfer(None, [0])
    assert cc.write([0], 9, [MambaTransfer([1], [1]), up]) == [0] and up.host_indices == [0]


def test_a_load_short_of_device_kv_allocates_nothing():
    cc, pools, calls = controller(device_kv=2)
    tr = MambaTransfer([0], None)
    assert cc.load([0, 1, 2], 8, [tr]) is None
    assert tr.device_indices is None and calls == [] and free(pools)["device_mamba"] == [0, 1]


def test_manual_acks_complete_the_oldest_pending_ones_and_say_how_many():
    cc, pools, calls = controller(auto_complete=False)
    for node in (7, 8, 9, 10):
        cc.write([0], node)
    cc.ack_write_queue[0].done = True  # already complete: not counted again
    assert cc.complete_writes() == 1  # one by default
    assert [a.done for a in cc.ack_write_queue] == [True, True, False, False]
    assert cc.complete_writes(5) == 2 and cc.complete_writes() == 0
    assert cc.complete_loads() == 0
    cc.load([0], 7)
    cc.load([0], 8)
    assert cc.complete_loads() == 1 and [a.done for a in cc.ack_load_queue] == [True, False]


def test_freeing_device_and_host_kv_returns_how_many_slots():
    cc, pools, calls = controller()
    pools.device_kv.alloc(3)
    pools.host_kv.alloc(2)
    assert (cc.evict_device([0, 2]), cc.evict_host([1])) == (2, 1)
    assert free(pools)["device_kv"] == [3, 4, 5, 6, 7, 0, 2] and free(pools)["host_kv"] == [2, 3, 1]


def test_l3_backups_are_numbered_from_1_and_an_ack_moves_one_to_the_queue():
    cc, pools, calls = controller()
    extra = [MambaTransfer([1], None)]
    assert (cc.write_storage([1], (1,), None), cc.write_storage([2, 3], (2, 3), ["h"], extra)) == (1, 2)
    assert [(o.id, o.host_indices, o.key, o.hash_value, o.mamba) for o in cc.pending_backups.values()] == [
        (1, [1], (1,), None, None), (2, [2, 3], (2, 3), ["h"], extra)]
    cc.complete_backup(2)
    assert list(cc.pending_backups) == [1] and [o.id for o in cc.ack_backup_queue] == [2]


@pytest.mark.parametrize("occupied, limited", [(9, False), (10, True), (11, True)])
def test_prefetch_is_rate_limited_once_the_occupied_tokens_reach_the_limit(occupied, limited):
    cc, pools, calls = controller()
    cc.prefetch_capacity_limit, cc.prefetch_tokens_occupied = 10, occupied
    assert cc.prefetch_rate_limited() is limited


@pytest.mark.parametrize("mamba_hit", [True, False])
def test_a_finished_prefetch_fills_the_completed_slots_with_the_data_of_their_prefix(mamba_hit):
    cc, pools, calls = controller()
    op = cc.prefetch("r", [0, 1, 2], [5, 6, 7], [1, 2], [MambaTransfer([1], None)])
    assert op == PrefetchOp("r", [0, 1, 2], [5, 6, 7], [1, 2], [MambaTransfer([1], None)])
    cc.finish_prefetch(op, 2, mamba_hit, ["h1"])
    assert (op.completed_tokens, op.hash_value, op.mamba_hit) == (2, ["h1"], mamba_hit)
    assert pools.host_kv.read([0, 1]) == kv_fingerprints([1, 2, 5, 6], start=2)
    assert pools.host_kv.read([2]) == [0]  # not fetched
    assert pools.host_mamba.read([1]) == ([mamba_fingerprint([1, 2, 5, 6])] if mamba_hit else [0])
    assert cc.terminate_prefetch(op) == (2, ["h1"]) and op.terminated


def test_host_slots_to_release_are_queued_a_page_at_a_time():
    cc, pools, calls = controller(page_size=2)
    cc.append_host_mem_release([0, 1, 2, 3, 4])
    assert list(cc.host_mem_release_queue) == [[0, 1], [2, 3], [4]]


def test_a_new_controller_completes_copies_at_once_and_holds_nothing():
    pools = Pools.create(8, 2, 4, 2)
    cc = CacheController(pools, "write_back", 2)
    assert (cc.write_policy, cc.page_size, cc.auto_complete, cc.stream) == ("write_back", 2, True, None)
    assert (cc.ack_write_queue, cc.ack_load_queue, cc.pending_backups) == ([], [], {})
    assert (list(cc.ack_backup_queue), list(cc.prefetch_revoke_queue), list(cc.host_mem_release_queue)) == ([], [], [])
    assert (cc.prefetch_tokens_occupied, cc.prefetch_capacity_limit) == (0, 1 << 30)
    assert not cc.prefetch_rate_limited()
    assert (cc.evict_mamba_host(3), cc.evict_mamba(3)) == (0, 0)  # no cache attached: the hooks evict nothing
    cc.write([0], 7)
    assert [a.done for a in cc.ack_write_queue] == [True]
