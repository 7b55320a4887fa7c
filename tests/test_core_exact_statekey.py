"""The explorer's state key, exactly: the canonical state of a cache with work in every in-flight map, what the key
ignores (names: node ids, the clock's values, slot numbers, hash contents) and that every field it reads changes it.

The pruning tests in ``test_explore.py`` check the key's promise over whole searches; these check each part of it.
"""
from __future__ import annotations

import pytest
from helpers import busy_cache, node_at

from simcache.explore.statekey import canonical_state, digest
from simcache.node import TreeNode

# busy_cache()'s canonical state. Nodes are numbered root 0, then children by child key: [1,2] 1, [3,4] 2,
# [5,6] 3. Each node: key, parent, (child key, child), device kv, host kv, device mamba, host mamba, full lock,
# mamba lock, host ref, host mamba ref, hit count, hash length, access-time rank. Slots are renamed per pool by
# first appearance (nodes first, then holders, requests, prefetches, queues, free lists); -1 spells None.
BUSY = (
    (((), -1, ((1, 1), (3, 2), (5, 3)), (), -1, -1, -1, 1, 1, 0, 0, 0, -1, 2),
     ((1, 2), 0, (), (0, 1), (0, 1), (0,), (0,), 2, 2, 1, 1, 1, 2, 1),
     ((3, 4), 0, (), (2, 3), (2, 3), (1,), (1,), 0, 0, 2, 2, 1, 2, 3),
     ((5, 6), 0, (), (4, 5), (4, 5), (2,), (2,), 1, 1, 0, 0, 1, 2, 0)),
    # device leaves, host leaves, full LRU, mamba LRU, mamba host LRU (MRU first), write-through, load-back
    ((2,), (), (2, 1, 3), (2, 1, 3), (3,), (3,), (1,)),
    # L3 backups: (op rank, node, mamba pending)
    ((0, 1, True), (1, 2, True)),
    # the prefetch: request id as code points, anchor, tokens, host kv, then its storage operation
    (((112, 102), 2, (8, 9), (6, 7), ((6, 7), (8, 9), (3, 4), (((3,), -1),), 0, 0, False, False, 0)),),
    (),  # prefetch-loaded tokens by request
    # the live request: id, tokens, kv, mamba slot, track buffer, protected length, last node, track seqlen, prefix
    (((114, 51), (1, 2, 7), (0, 1, 6), 3, -1, 2, 1, -1, ()),),
    # write acks, load acks, pending backups, acked backups, revoked prefetches, host release pages, prefetch
    # tokens occupied, prefetch capacity, hit counts waiting for host KV
    ((((3,), False),), (((1,), False),),
     ((0, (0, 1), (1, 2), 2, (((0,), -1),)), (1, (2, 3), (3, 4), 2, (((1,), -1),))), (), (), (), 2, 1 << 30, 0),
    # each pool's free list and double frees: device kv, device mamba, host kv, host mamba
    ((tuple(range(7, 32)), ()), ((4, 5, 6, 7), ()), ((), ()), ((4, 5, 6, 7), ())),
    (2, 4, 1, 2),  # full evictable, full protected, mamba evictable, mamba protected
    0,  # warnings
    False,  # crashed
)


def test_the_canonical_state_of_a_busy_cache_is_exactly_this():
    cache, drv = busy_cache()
    assert canonical_state(cache, drv) == BUSY


def test_node_ids_and_the_clock_are_names_the_state_does_not_read():
    cache, drv = busy_cache(shift=1000)
    assert node_at(cache, [1, 2]).id > 1000 and cache.clock > 1000
    assert canonical_state(cache, drv) == BUSY


def test_hash_contents_and_pool_data_are_not_read():
    cache, drv = busy_cache()
    for n in (node_at(cache, [1, 2]), node_at(cache, [3, 4])):
        n.hash_value = [h[::-1] + "x" for h in n.hash_value]
    cache.pools.device_kv.write([0, 1], [99, 98])
    assert canonical_state(cache, drv) == BUSY


def test_slots_are_renamed_by_first_appearance_so_a_consistent_renaming_gives_the_same_state():
    """Swap device kv slots 0 and 1 everywhere they appear: the nodes, the live request and the free counts."""
    cache, drv = busy_cache()
    n = node_at(cache, [1, 2])
    a, b = n.value
    swap = {a: b, b: a}
    n.value = [swap.get(s, s) for s in n.value]
    r = next(iter(drv.live.values()))
    r.kv = [swap.get(s, s) for s in r.kv]
    assert n.value == [b, a] and canonical_state(cache, drv) == BUSY


def test_the_digest_is_sixteen_bytes_from_two_differently_salted_hashes():
    v = ((1, 2), (3, -1))
    d = digest(v)
    assert d == (hash(v) & (2**64 - 1)).to_bytes(8, "little") + \
        (hash((0x9E3779B97F4A7C15, v)) & (2**64 - 1)).to_bytes(8, "little")
    assert len(d) == 16 and digest(((1, 2), (3, -1))) == d and digest(((2, 1), (3, -1))) != d


def _node(name):
    return lambda c, d: node_at(c, *name)


def _set(get, attr, value):
    def change(c, d):
        setattr(get(c, d), attr, value(getattr(get(c, d), attr)) if callable(value) else value)
    return change


def _req(c, d):
    return next(iter(d.live.values()))


def _inflight(c, d):
    return next(iter(c.ongoing_prefetch.values()))


def _pf(c, d):
    return _inflight(c, d).operation


def _mru(lru_name, path):
    def change(c, d):
        lru = getattr(c, lru_name)
        n = node_at(c, path)
        lru.remove_node(n)
        lru.insert_mru(n)
    return change


def _swap_times(c, d):
    x, y = node_at(c, [1, 2]), node_at(c, [3, 4])
    x.last_access_time, y.last_access_time = y.last_access_time, x.last_access_time


def _take_free(pool):
    """One slot taken off the free list (rotating it would only rename its slots: none is named anywhere else)."""
    def change(c, d):
        getattr(c.pools, pool).free_slots.popleft()
    return change


def _double_free(c, d):
    pool = c.pools.device_kv
    pool.free([pool.free_slots[0]])


def _detach(c, d):
    del c.root_node.children[5]  # [5,6] stays held by the write-through map and the mamba host LRU


N12, N34 = _node([[1, 2]]), _node([[3, 4]])
# (what changes, how): every field the key reads, changed alone on the busy cache
CHANGES = [
    ("a node's key", _set(N34, "key", [3, 5])),
    ("a node's full lock", _set(N34, "full_lock_ref", lambda v: v + 1)),
    ("a node's mamba lock", _set(N34, "mamba_lock_ref", lambda v: v + 1)),
    ("a node's host ref", _set(N34, "host_ref_counter", lambda v: v + 1)),
    ("a node's host mamba ref", _set(N34, "host_mamba_ref_counter", lambda v: v + 1)),
    ("a node's hit count", _set(N34, "hit_count", lambda v: v + 1)),
    ("a node's hash dropped", _set(N34, "hash_value", None)),
    ("a node's hash shortened", _set(N34, "hash_value", lambda v: v[:1])),
    ("a node's device kv dropped", _set(N34, "value", None)),
    ("a node's host kv dropped", _set(N34, "host_value", None)),
    ("a node's device mamba dropped", _set(N34, "mamba_value", None)),
    ("a node's host mamba dropped", _set(N34, "mamba_host_value", None)),
    ("a node's device kv shares a slot", _set(N34, "value", lambda v: [v[0], v[0]])),
    ("the order of two access times", _swap_times),
    ("a child detached from the root", _detach),
    ("a device leaf added", lambda c, d: c.evictable_full_device_leaves.add(node_at(c, [5, 6]))),
    ("a host leaf added", lambda c, d: c.evictable_full_host_leaves.add(node_at(c, [5, 6]))),
    ("the full LRU order", _mru("full_lru_list", [5, 6])),
    ("the mamba LRU order", _mru("mamba_lru_list", [5, 6])),
    ("the mamba host LRU membership", lambda c, d: c.mamba_host_lru_list.insert_mru(node_at(c, [1, 2]))),
    ("the write-through map", lambda c, d: c.ongoing_write_through.clear()),
    ("the load-back map", lambda c, d: c.ongoing_load_back.clear()),
    ("a backup's mamba flag", lambda c, d: c.ongoing_backup.update(
        {k: (n, not mp) for k, (n, mp) in list(c.ongoing_backup.items())[:1]})),
    ("a backup's node", lambda c, d: c.ongoing_backup.update(
        {k: (node_at(c, [5, 6]), mp) for k, (n, mp) in list(c.ongoing_backup.items())[:1]})),
    ("the prefetch anchor", _set(_inflight, "last_host_node", lambda n: n.parent)),
    ("the prefetch tokens", _set(_inflight, "token_ids", lambda t: [*t, 10])),
    ("the prefetch host slots", _set(_inflight, "host_indices", lambda h: h[:1])),
    ("the prefetch op's host slots", _set(_pf, "host_indices", lambda h: h[:1])),
    ("the prefetch op's tokens", _set(_pf, "token_ids", lambda t: [*t, 10])),
    ("the prefetch op's prefix", _set(_pf, "prefix_tokens", lambda t: t[:1])),
    ("the prefetch op's mamba transfers", _set(_pf, "mamba", None)),
    ("the prefetch op's completed tokens", _set(_pf, "completed_tokens", 1)),
    ("the prefetch op's hash length", _set(_pf, "hash_value", lambda h: [*h, "x"])),
    ("the prefetch op's mamba hit", _set(_pf, "mamba_hit", True)),
    ("the prefetch op's termination", _set(_pf, "terminated", True)),
    ("the prefetch op's storage hit count", _set(_pf, "storage_hit_count", 2)),
    ("the prefetch-loaded tokens", lambda c, d: c.prefetch_loaded_tokens_by_reqid.update(pf=2)),
    ("the request's id", lambda c, d: d.live.update(r9=d.live.pop(next(iter(d.live))))),
    ("the request's tokens", _set(_req, "tokens", lambda t: [*t, 8])),
    ("the request's kv", _set(_req, "kv", lambda kv: kv[:2])),
    ("the request's mamba slot", _set(_req, "mamba_pool_idx", None)),
    ("the request's track buffer", _set(_req, "track_buffer", lambda _: 0)),
    ("the request's protected length", _set(_req, "cache_protected_len", 1)),
    ("the request's last node", _set(_req, "last_node", lambda n: n.parent)),
    ("the request's track seqlen", _set(_req, "mamba_last_track_seqlen", 2)),
    ("the request's prefix", _set(_req, "prefix_indices", lambda _: [0])),
    ("a write ack done", lambda c, d: setattr(c.controller.ack_write_queue[0], "done", True)),
    ("a load ack's nodes", lambda c, d: setattr(c.controller.ack_load_queue[0], "node_ids", [10**6])),
    ("a pending backup's key", lambda c, d: setattr(next(iter(c.controller.pending_backups.values())), "key",
                                                    [1])),
    ("a pending backup's hash length", lambda c, d: setattr(
        next(iter(c.controller.pending_backups.values())), "hash_value", None)),
    ("a pending backup's mamba transfers", lambda c, d: setattr(
        next(iter(c.controller.pending_backups.values())), "mamba", None)),
    ("a pending backup's host slots", lambda c, d: setattr(
        next(iter(c.controller.pending_backups.values())), "host_indices", [])),
    ("a revoked prefetch", lambda c, d: c.controller.prefetch_revoke_queue.append("pf")),
    ("a hit count waiting for host KV", lambda c, d: c.controller.prefetch_hit_queue.append(_pf(c, d))),
    ("a host release page", lambda c, d: c.controller.host_mem_release_queue.append([0])),
    ("the prefetch tokens occupied", lambda c, d: setattr(c.controller, "prefetch_tokens_occupied", 0)),
    ("the prefetch capacity", lambda c, d: setattr(c.controller, "prefetch_capacity_limit", 7)),
    ("the device kv free list", _take_free("device_kv")),
    ("the device mamba free list", _take_free("device_mamba")),
    ("the host mamba free list", _take_free("host_mamba")),
    ("a double free", _double_free),
    ("the full evictable size", lambda c, d: setattr(c, "full_evictable_size_", 0)),
    ("the full protected size", lambda c, d: setattr(c, "full_protected_size_", 0)),
    ("the mamba evictable size", lambda c, d: setattr(c, "mamba_evictable_size_", 0)),
    ("the mamba protected size", lambda c, d: setattr(c, "mamba_protected_size_", 0)),
    ("a warning", lambda c, d: c.warnings.append("w")),
    ("a crash", lambda c, d: setattr(c, "crashed", AssertionError("x"))),
]


@pytest.mark.parametrize("what,change", CHANGES, ids=[w for w, _ in CHANGES])
def test_every_field_the_key_reads_changes_it(what, change):
    cache, drv = busy_cache()
    change(cache, drv)
    assert canonical_state(cache, drv) != BUSY


def test_a_free_list_s_order_is_a_renaming_until_a_slot_in_it_is_named_elsewhere():
    cache, drv = busy_cache()
    free = cache.pools.device_kv.free_slots
    free.rotate(3)  # its slots are named nowhere else: the same state up to the names of slots
    assert canonical_state(cache, drv) == BUSY
    _req(cache, drv).prefix_indices = [free[0]]  # now a live request names the first free slot
    named_first = canonical_state(cache, drv)
    free.rotate(-1)  # and it moves to the back of the free list
    assert canonical_state(cache, drv) != named_first
    # the request's kv names 0, 1 and 6 before its prefix is read: the prefix slot is 7 both times
    assert named_first[5][0][8] == (7,) and canonical_state(cache, drv)[5][0][8] == (7,)
    assert named_first[7][0][0] == tuple(range(7, 32)) and \
        canonical_state(cache, drv)[7][0][0] == (*range(8, 32), 7)


def test_a_node_with_one_child_lists_it_and_its_parent_is_numbered():
    cache, drv = busy_cache()
    n34, n56 = node_at(cache, [3, 4]), node_at(cache, [5, 6])
    del cache.root_node.children[5]
    n34.children[5], n56.parent = n56, n34  # [5,6] moved under [3,4]
    nodes = canonical_state(cache, drv)[0]
    assert nodes[0][2] == ((1, 1), (3, 2)) and nodes[2][2] == ((5, 3),) and nodes[3][1] == 2
    assert nodes[1:] == (BUSY[0][1], (*BUSY[0][2][:2], ((5, 3),), *BUSY[0][2][3:]), (BUSY[0][3][0], 2,
                                                                                       *BUSY[0][3][2:]))


def test_a_detached_node_s_unseen_parent_is_numbered_after_it():
    """[5,6] detached (held by the write-through map and the mamba host LRU) with a parent nothing else holds: the
    parent is numbered when [5,6] is described. The live request, read before that, names device kv slot 6 as 4,
    and the request's mamba slot as 2, so [5,6]'s slots come after them."""
    cache, drv = busy_cache()
    n56 = node_at(cache, [5, 6])
    del cache.root_node.children[5]
    n56.parent = TreeNode(999, 1.0, (9,))
    nodes = canonical_state(cache, drv)[0]
    assert nodes == (
        ((), -1, ((1, 1), (3, 2)), (), -1, -1, -1, 1, 1, 0, 0, 0, -1, 3),
        ((1, 2), 0, (), (0, 1), (0, 1), (0,), (0,), 2, 2, 1, 1, 1, 2, 2),
        ((3, 4), 0, (), (2, 3), (2, 3), (1,), (1,), 0, 0, 2, 2, 1, 2, 4),
        ((5, 6), 4, (), (5, 6), (4, 5), (3,), (2,), 1, 1, 0, 0, 1, 2, 1),
        ((9,), -1, (), -1, -1, -1, -1, 0, 0, 0, 0, 0, -1, 0))


# the pending L3 backups' part of the controller: (op rank, host kv, key, hash length, mamba transfers)
PENDING_1 = (0, (0, 1), (1, 2), 2, (((0,), -1),))
PENDING_2 = (1, (2, 3), (3, 4), 2, (((1,), -1),))


def _backups(change):
    cache, drv = busy_cache()
    change(cache, cache.controller)
    s = canonical_state(cache, drv)
    return s[2], s[6][2], s[6][3]  # the cache's backups in flight, the controller's pending and acked ones


def test_backup_operations_are_ranked_over_the_pending_acked_and_in_flight_ones_together():
    both = ((0, 1, True), (1, 2, True))
    assert _backups(lambda c, cc: None) == (both, (PENDING_1, PENDING_2), ())
    # op 2 pending but no longer in flight in the cache; op 2 in flight but not pending
    assert _backups(lambda c, cc: c.ongoing_backup.pop(2)) == (both[:1], (PENDING_1, PENDING_2), ())
    assert _backups(lambda c, cc: cc.pending_backups.pop(2)) == (both, (PENDING_1,), ())
    assert _backups(lambda c, cc: cc.pending_backups.clear()) == (both, (), ())
    assert _backups(lambda c, cc: c.ongoing_backup.clear()) == ((), (PENDING_1, PENDING_2), ())

    def acked(c, cc):  # op 1 acked (only in the ack queue), op 2 still pending and in flight
        cc.ack_backup_queue.append(cc.pending_backups.pop(1))
        del c.ongoing_backup[1]

    assert _backups(acked) == ((both[1],), (PENDING_2,), (PENDING_1,))


# Each slot below is one nothing else names (100 or 101), so its name is the next free one of the pool it is
# named in: device mamba has 0-3 (the nodes', then the request's), host mamba 0-3 (the nodes', then the
# prefetch's transfer), host kv 0-7 (the nodes', then the prefetch's). A slot read as the wrong pool's would be
# named differently.
def _named(change):
    cache, drv = busy_cache()
    change(cache, drv)
    return canonical_state(cache, drv)


def test_a_track_buffer_is_named_as_a_device_mamba_slot():
    s = _named(lambda c, d: setattr(_req(c, d), "track_buffer", 100))
    assert s[5] == (((114, 51), (1, 2, 7), (0, 1, 6), 3, 4, 2, 1, -1, ()),)


def test_a_mamba_transfer_s_device_slots_are_named_as_device_mamba_slots():
    s = _named(lambda c, d: setattr(_pf(c, d).mamba[0], "device_indices", [100]))
    assert s[3] == (((112, 102), 2, (8, 9), (6, 7), ((6, 7), (8, 9), (3, 4), (((3,), (4,)),), 0, 0, False, False, 0)),)


def test_a_pending_backup_s_and_a_release_page_s_slots_are_named_as_host_kv_slots():
    s = _named(lambda c, d: setattr(c.controller.pending_backups[1], "host_indices", [100, 0]))
    assert s[6][2] == ((0, (8, 0), (1, 2), 2, (((0,), -1),)), PENDING_2)
    s = _named(lambda c, d: c.controller.host_mem_release_queue.append([101]))
    assert s[6][5] == ((8,),)


def test_a_double_free_is_listed_with_its_slots_and_the_free_list_holds_the_slot_twice():
    def free_twice(c, d):
        pool = c.pools.device_kv
        pool.free([pool.free_slots[0]])

    pools = _named(free_twice)[7]
    assert pools[0] == ((*range(7, 32), 7), ((7,),)) and pools[1:] == BUSY[7][1:]


def test_an_ack_of_an_unknown_node_keeps_its_id():
    s = _named(lambda c, d: setattr(c.controller.ack_load_queue[0], "node_ids", [10**6]))
    assert s[6][1] == ((((-1, 10**6),), False),)
