"""Exact outcomes of the scheduler side (``driver.py``) that the mutation run found no test looking at: how much a
request's start evicts, what a refused start gives back, the scheduler driver's Mamba retry, page-size tracking,
the request ids, and each operation's skip.

Each test drives a small cache through ``Driver`` and compares the request it made, the whole state
(``helpers.snapshot``) and the pools' free lists.
"""
from __future__ import annotations

import pytest
from helpers import free_lists, make_cache, node_at, snapshot

from simcache.driver import Driver, Skip
from simcache.operations import NO_ROOM, NO_SLOTS


def two_leaves(**config):
    """[1,2] and [3,4] finished and written through ([1,2] the least recent)."""
    cache = make_cache("write_through", **config)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([3, 4]))
    cache.check_hicache_events()
    return cache, drv


def request(drv, rid):
    r = drv.live[rid]
    return dict(rid=r.rid, tokens=r.tokens, kv=r.kv, mamba=r.mamba_pool_idx, track=r.track_buffer,
                protected=r.cache_protected_len, last=r.last_node.id, tracked=r.mamba_last_track_seqlen)


def test_a_start_short_of_device_kv_evicts_exactly_the_shortfall():
    """2 slots free, 4 needed: 2 tokens are evicted ([1,2], the least recent), not more."""
    cache, drv = two_leaves(device_kv=6, device_mamba=3)
    assert free_lists(cache)["device_kv"] == [4, 5]
    rid = drv.start([5, 6, 7, 8])
    assert request(drv, rid) == dict(rid="r2", tokens=[5, 6, 7, 8], kv=[4, 5, 0, 1], mamba=2, track=None,
                                     protected=0, last=cache.root_node.id, tracked=None)
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert free_lists(cache)["device_kv"] == [] and free_lists(cache)["device_mamba"] == [0]


def test_a_start_with_enough_device_kv_evicts_nothing():
    cache, drv = two_leaves(device_kv=8, device_mamba=3)
    before = snapshot(cache)
    rid = drv.start([5, 6, 7, 8])
    assert request(drv, rid)["kv"] == [4, 5, 6, 7]
    assert snapshot(cache) == before


def test_a_start_short_of_a_mamba_slot_evicts_one_mamba_state_only_when_none_is_free():
    cache, drv = two_leaves(device_mamba=3)
    before = snapshot(cache)
    rid = drv.start([5, 6])  # one slot free: nothing evicted
    assert request(drv, rid)["mamba"] == 2 and snapshot(cache) == before
    rid = drv.start([7, 8])  # none free: the least recent leaf's state goes (the leaf whole: it is backed up)
    assert request(drv, rid)["mamba"] == 0
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_a_start_that_finds_no_room_changes_nothing():
    """Every Mamba slot held by a live request: the eviction finds nothing and the start is refused."""
    cache = make_cache("write_through", device_mamba=1)
    drv = Driver(cache)
    drv.start([1, 2])
    before = snapshot(cache), free_lists(cache), drv.nreq
    with pytest.raises(Skip) as skip:
        drv.start([3, 4])
    assert skip.value.code == NO_ROOM
    assert (snapshot(cache), free_lists(cache), drv.nreq) == before and list(drv.live) == ["r0"]


def test_a_start_refused_for_want_of_its_mamba_slot_gives_back_its_kv_and_unlocks_its_match():
    """[1,2,9]: making room for the Mamba slot demotes [1,2]; the match then loads it back, which takes that
    slot, so the request's own finds none (the fuzz driver does not retry). The 1 new KV slot goes back to the
    pool and the lock the start took on [1,2] is released; the load-back's own lock stays until its ack."""
    cache, drv = two_leaves(device_mamba=2)
    with pytest.raises(Skip) as skip:
        drv.start([1, 2, 9])
    assert skip.value.code == NO_SLOTS
    assert (drv.nreq, list(drv.live)) == (2, [])
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0", "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=2, mamba_evictable=1, mamba_protected=1),
        full_lru=["1,2", "3,4"], mamba_lru=["1,2", "3,4"], host_mamba_lru=["3,4", "1,2"], device_leaves=["3,4"],
        host_leaves=[])
    assert free_lists(cache)["device_kv"] == [*range(7, 32), 0, 1, 6]
    cache.check_hicache_events()
    assert snapshot(cache)["tree"][0] == "1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"


def test_the_scheduler_driver_evicts_a_mamba_state_and_retries_the_requests_slot():
    """The same start with ``retry_mamba_alloc``: the load-back allocates the request's Mamba slot itself (the
    scheduler's way), evicting [3,4]'s state for it."""
    cache, drv = two_leaves(device_mamba=2)
    drv.retry_mamba_alloc = True
    rid = drv.start([1, 2, 9])
    assert request(drv, rid) == dict(rid="r2", tokens=[1, 2, 9], kv=[4, 5, 6], mamba=0, track=None, protected=2,
                                     last=node_at(cache, [1, 2]).id, tracked=None)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=0 hmr=0", "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=2, mamba_evictable=0, mamba_protected=1), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=["3,4", "1,2"], device_leaves=[], host_leaves=["3,4"])
    assert free_lists(cache)["device_mamba"] == []


def test_a_page_size_of_two_tracks_the_whole_pages_and_takes_a_second_mamba_slot():
    cache = make_cache("write_through", page_size=2)
    drv = Driver(cache)
    rid = drv.start([1, 2, 3])
    assert request(drv, rid) == dict(rid="r0", tokens=[1, 2, 3], kv=[0, 1, 2], mamba=0, track=1, protected=0,
                                     last=cache.root_node.id, tracked=2)
    drv.finish(rid)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"]
    assert free_lists(cache)["device_kv"] == [*range(3, 32), 2]
    assert free_lists(cache)["device_mamba"] == [2, 3, 4, 5, 6, 7, 0]


def test_request_ids_count_only_started_requests_and_a_given_id_is_kept():
    cache = make_cache("write_through", device_mamba=1)
    drv = Driver(cache)
    assert drv.start([1], "chat") == "chat" and drv.nreq == 1
    with pytest.raises(Skip):
        drv.start([2])
    drv.finish("chat")
    cache.check_hicache_events()  # [1]'s write ack: it can be evicted for the next start's Mamba slot
    assert drv.start([3]) == "r1" and list(drv.live) == ["r1"]


# --- inject ----------------------------------------------------------------------------------------------------

def test_inject_builds_each_node_on_the_tiers_it_names_with_the_data_of_its_prefix():
    import hashlib

    from simcache.pools import kv_fingerprints, mamba_fingerprint
    from simcache.state import tree_slot_lines
    cache = make_cache("write_through", storage=True)
    Driver(cache).inject([{"key": [1, 2], "device": True, "mamba": True, "host": True, "mamba_host": True,
                           "hash": True},
                          {"key": [3], "parent": 0, "host": True, "mamba_host": True, "l3_backup": True},
                          {"key": [5, 6], "device": True}])
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=0,1 m=0 mh=0", "2 3 v=- h=2 m=- mh=1", "1 5,6 v=2,3 h=- m=- mh=-"]
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=1 hmr=0",
              "1 5,6 v=1 h=0 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=4, full_protected=0, mamba_evictable=1, mamba_protected=0),
        full_lru=["5,6", "1,2"], mamba_lru=["1,2"], host_mamba_lru=["1,2/3", "1,2"], device_leaves=["1,2", "5,6"],
        host_leaves=[])
    top, mid, other = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3]), node_at(cache, [5, 6])
    pools = cache.pools
    assert pools.device_kv.read(top.value) == pools.host_kv.read(top.host_value) == kv_fingerprints([1, 2])
    assert pools.host_kv.read(mid.host_value) == kv_fingerprints([1, 2, 3], start=2)
    assert pools.device_kv.read(other.value) == kv_fingerprints([5, 6])
    assert pools.device_mamba.read(top.mamba_value) == pools.host_mamba.read(top.mamba_host_value) == [
        mamba_fingerprint([1, 2])]
    assert pools.host_mamba.read(mid.mamba_host_value) == [mamba_fingerprint([1, 2, 3])]
    assert top.hash_value == [hashlib.sha256(f"inject0_{p}".encode()).hexdigest() for p in range(2)]
    assert (mid.hash_value, other.hash_value) == (None, None)
    assert {k: (n, m) for k, (n, m) in cache.ongoing_backup.items()} == {1: (mid, False)}
    assert list(cache.controller.pending_backups) == [1]


@pytest.mark.parametrize("specs, message", [
    ([{"key": [1, 2, 3], "device": True}], "inject node 0: pool device_kv has fewer than 3 free slots; make the pool "
                                           "larger in the config"),
    ([{"key": [1], "mamba": True}, {"key": [2], "mamba": True}],
     "inject node 1: pool device_mamba has fewer than 1 free slots; make the pool larger in the config"),
    ([{"key": [1, 2], "host": True}, {"key": [1, 5], "host": True}],
     "inject node 1: its parent already has a child starting with [1]; give it another first page"),
])
def test_inject_refuses_a_node_that_does_not_fit_in_one_sentence(specs, message):
    from simcache.errors import ScenarioError
    cache = make_cache("write_through", device_kv=2, device_mamba=1)
    with pytest.raises(ScenarioError) as e:
        Driver(cache).inject(specs)
    assert str(e.value) == message


# --- the operations --------------------------------------------------------------------------------------------

def test_each_operation_does_exactly_its_part_or_says_there_was_nothing_to_do():
    from simcache.operations import APPLIED, NOTHING_TO_DO
    cache = make_cache("write_through", auto_complete=False, storage=True)
    drv = Driver(cache)
    ops = [{"op": "start", "tokens": [1, 2], "rid": "a"}, {"op": "start", "tokens": [3, 4], "rid": "b"},
           {"op": "start", "tokens": [5], "rid": "c"}]
    assert [drv.step(op, i) for i, op in enumerate(ops)] == [APPLIED] * 3
    assert (drv.step({"op": "finish", "rid": "b"}, 3), list(drv.live)) == (APPLIED, ["a", "c"])
    assert (drv.step({"op": "finish"}, 4), list(drv.live)) == (APPLIED, ["c"])  # no rid: the oldest
    assert (drv.step({"op": "finish_oldest"}, 5), list(drv.live)) == (APPLIED, [])
    assert (drv.step({"op": "finish_oldest"}, 6), drv.step({"op": "finish"}, 7)) == (NOTHING_TO_DO,) * 2
    assert list(cache.ongoing_write_through) == [7, 8, 9]  # [3,4], [1,2], [5]: none acknowledged yet
    assert drv.step({"op": "write_ack"}, 8) == APPLIED  # one, by default
    assert list(cache.ongoing_write_through) == [8, 9]
    assert {k: (n.id, m) for k, (n, m) in cache.ongoing_backup.items()} == {1: (7, True)}
    assert drv.step({"op": "write_ack", "n": 2}, 9) == APPLIED and cache.ongoing_write_through == {}
    assert drv.step({"op": "write_ack"}, 10) == NOTHING_TO_DO
    assert drv.step({"op": "l3_ack"}, 11) == APPLIED  # the oldest backup's storage ack
    assert {k: n.id for k, (n, _) in cache.ongoing_backup.items()} == {2: 8, 3: 9}
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1",
                                       "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    assert [drv.step({"op": "l3_ack"}, i) for i in (12, 13, 14)] == [APPLIED, APPLIED, NOTHING_TO_DO]
    assert drv.step({"op": "load_ack"}, 15) == NOTHING_TO_DO
    assert drv.step({"op": "evict", "n": 2}, 16) == APPLIED
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert drv.step({"op": "evict_mamba", "n": 1}, 17) == APPLIED  # one Mamba state, no tokens asked
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert drv.step({"op": "evict_host", "n": 1}, 18) == APPLIED
    assert snapshot(cache)["tree"] == ["1 1,2 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert cache.crashed is None


def test_prefetch_operations_fetch_the_uncached_rest_once_at_a_time_and_insert_whole_completed_pages():
    import hashlib

    from simcache.operations import APPLIED, NOTHING_TO_DO, NOTHING_TO_FETCH, PREFETCH_DECLINED
    cache = make_cache("write_through", storage=True)
    drv = Driver(cache)
    assert [drv.step({"op": "request", "tokens": [1, 2]}, 0), drv.step({"op": "events"}, 1)] == [APPLIED] * 2
    assert drv.step({"op": "prefetch_done", "n": 1, "mamba_hit": False}, 2) == NOTHING_TO_DO  # none in flight
    assert drv.step({"op": "prefetch", "tokens": [1, 2, 3, 4, 5]}, 3) == APPLIED
    (rid, pf), = cache.ongoing_prefetch.items()
    assert (rid, pf.last_host_node, pf.token_ids, pf.host_indices) == ("pf", node_at(cache, [1, 2]), [3, 4, 5],
                                                                      [2, 3, 4])
    assert drv.step({"op": "prefetch", "tokens": [1, 2, 7]}, 4) == NOTHING_TO_DO  # one prefetch at a time
    assert drv.step({"op": "prefetch_done", "n": 2, "mamba_hit": False}, 5) == APPLIED
    assert cache.ongoing_prefetch == {}
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1",
                                       "2 3,4 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0"]
    fetched = node_at(cache, [1, 2], [3, 4])
    assert fetched.host_value == [2, 3]
    assert fetched.hash_value == [hashlib.sha256(f"pf5_{i}".encode()).hexdigest() for i in range(2)]
    # the slot reserved for the token not fetched is released at the next drain
    assert list(cache.controller.host_mem_release_queue) == [[4]] and free_lists(cache)["host_kv"] == [5, 6, 7]
    assert drv.step({"op": "events"}, 6) == APPLIED
    assert list(cache.controller.host_mem_release_queue) == [] and free_lists(cache)["host_kv"] == [5, 6, 7, 4]
    assert drv.step({"op": "prefetch", "tokens": [1, 2]}, 7) == NOTHING_TO_FETCH  # all on the device

    small = make_cache("write_through", storage=True, host_kv=2)
    drv = Driver(small)
    drv.step({"op": "request", "tokens": [1, 2]}, 0)
    drv.step({"op": "events"}, 1)
    assert drv.step({"op": "prefetch", "tokens": [1, 2, 3, 4, 5]}, 2) == PREFETCH_DECLINED  # no host room
    assert small.ongoing_prefetch == {}
    assert Driver(make_cache("write_through")).step({"op": "prefetch", "tokens": [1]}, 0) == NOTHING_TO_DO


def test_load_ack_completes_the_oldest_loads_it_names_and_consumes_their_acks():
    from simcache.operations import APPLIED, NOTHING_TO_DO
    cache = make_cache("write_through", load_back_threshold=1, auto_complete=False)
    drv = Driver(cache)
    for tokens in ([1, 2], [3, 4], [5, 6]):
        drv.finish(drv.start(tokens))
    drv.step({"op": "write_ack", "n": 3}, 3)
    cache.evict(32)
    for i, tokens in enumerate(([1, 2, 7], [3, 4, 7], [5, 6, 7])):
        drv.start(tokens, f"q{i}")  # each loads its host hit back
    assert list(cache.ongoing_load_back) == [7, 8, 9]
    assert drv.step({"op": "load_ack"}, 7) == APPLIED  # one, by default
    assert list(cache.ongoing_load_back) == [8, 9]
    assert drv.step({"op": "load_ack", "n": 2}, 8) == APPLIED and cache.ongoing_load_back == {}
    assert drv.step({"op": "load_ack"}, 9) == NOTHING_TO_DO


@pytest.mark.parametrize("retry", [True, False])
def test_a_track_slot_taken_by_the_load_back_is_found_by_evicting_only_in_the_scheduler_driver(retry):
    """Page size 2: a start needs two Mamba slots (its own and the tracking buffer) and finds exactly two free.
    Loading back [1,2] takes both (the restored state and, in the scheduler driver, the request's own slot), so
    the tracking buffer finds none: the scheduler driver evicts one Mamba state for it ([3,4]'s, the least
    recent; [7,8] stays), the fuzz driver gives up."""
    cache = make_cache("write_through", page_size=2, device_mamba=5)
    drv = Driver(cache, retry_mamba_alloc=retry)
    for tokens in ([1, 2], [3, 4], [7, 8]):
        drv.finish(drv.start(tokens))
    cache.check_hicache_events()
    assert cache.evict(2) == (2, 1)
    cache.pools.device_mamba.alloc(1)
    assert free_lists(cache)["device_mamba"] == [4, 1]
    if not retry:
        with pytest.raises(Skip) as skip:
            drv.start([1, 2, 5, 6])
        assert skip.value.code == NO_SLOTS
        assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0",
                                           "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                           "1 7,8 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
        assert free_lists(cache)["device_mamba"] == [1]
        return
    rid = drv.start([1, 2, 5, 6])
    assert request(drv, rid) == dict(rid="r3", tokens=[1, 2, 5, 6], kv=[6, 7, 8, 9], mamba=4, track=3, protected=2,
                                     last=node_at(cache, [1, 2]).id, tracked=4)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=0 hmr=0",
                                       "1 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "1 7,8 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert free_lists(cache)["device_mamba"] == []


@pytest.mark.parametrize("held, slots", [(0, (2, 4)), (1, (4, 1)), (2, (1, 3))])
def test_a_start_with_page_size_two_makes_room_for_exactly_its_two_mamba_slots(held, slots):
    """Two slots free: nothing evicted. One free: exactly one Mamba state is evicted ([1,2], the least recent);
    none free: two ([1,2] and [3,4])."""
    cache = make_cache("write_through", page_size=2, device_mamba=5)
    drv = Driver(cache)
    for tokens in ([1, 2], [3, 4], [7, 8]):
        drv.finish(drv.start(tokens))
    cache.check_hicache_events()
    cache.pools.device_mamba.alloc(held)
    rid = drv.start([5, 6])
    assert (drv.live[rid].mamba_pool_idx, drv.live[rid].track_buffer) == slots
    on_device = [int(held <= 0), int(held <= 1), 1]
    assert snapshot(cache)["tree"] == [f"1 {k} v={d} h=1 m={d} mh=1 fl=0 ml=0 hr=0 hmr=0"
                                       for k, d in zip(("1,2", "3,4", "7,8"), on_device, strict=True)]


def test_the_scheduler_driver_evicts_nothing_when_a_mamba_slot_is_free():
    cache, drv = two_leaves(device_mamba=3)
    drv.retry_mamba_alloc = True
    before = snapshot(cache)
    rid = drv.start([5, 6])
    assert request(drv, rid)["mamba"] == 2 and snapshot(cache) == before
    assert free_lists(cache)["device_mamba"] == []


def test_a_prefetch_fetches_only_what_follows_the_device_and_host_hits():
    cache = make_cache("write_through", storage=True, load_back_threshold=1)
    drv = Driver(cache)
    for i, op in enumerate([{"op": "request", "tokens": [1, 2]}, {"op": "request", "tokens": [1, 2, 3, 4]},
                            {"op": "events"}]):
        drv.step(op, i)
    cache.evict(2)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1",
                                       "2 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    drv.step({"op": "prefetch", "tokens": [1, 2, 3, 4, 5, 6]}, 3)
    pf = cache.ongoing_prefetch["pf"]
    assert (pf.last_host_node, pf.token_ids, pf.operation.prefix_tokens) == (node_at(cache, [1, 2], [3, 4]), [5, 6],
                                                                             [1, 2, 3, 4])


@pytest.mark.parametrize("hit", [True, False])
def test_prefetch_done_passes_on_whether_storage_had_the_mamba_state(hit):
    cache = make_cache("write_through", storage=True)
    drv = Driver(cache)
    for i, op in enumerate([{"op": "request", "tokens": [1, 2]}, {"op": "events"},
                            {"op": "prefetch", "tokens": [1, 2, 3, 4]},
                            {"op": "prefetch_done", "n": 2, "mamba_hit": hit}]):
        drv.step(op, i)
    assert snapshot(cache)["tree"][1] == f"2 3,4 v=0 h=1 m=0 mh={int(hit)} fl=0 ml=0 hr=0 hmr=0"


def test_simulated_stack_names_the_simulated_functions_on_the_stack_innermost_first():
    from simcache.driver import simulated_stack
    from simcache.trace_hooks import SIMULATED_CODE, register

    def outer():
        return plain()

    def plain():  # not simulated: left out
        return inner()

    def inner():
        return simulated_stack()

    register(outer, "outer_for_test")
    register(inner, "inner_for_test")
    try:
        assert outer() == ("inner_for_test", "outer_for_test")
    finally:  # the registry is global (the code pane's table test reads every name in it)
        del SIMULATED_CODE[outer.__code__], SIMULATED_CODE[inner.__code__]


def test_the_tracking_buffer_holds_the_mamba_state_of_the_whole_pages():
    from simcache.pools import mamba_fingerprint
    cache = make_cache("write_through", page_size=2)
    drv = Driver(cache)
    req = drv.live[drv.start([1, 2, 3])]
    assert (req.mamba_pool_idx, req.track_buffer, req.mamba_last_track_seqlen) == (0, 1, 2)
    assert cache.pools.device_mamba.read([0, 1]) == [mamba_fingerprint([1, 2, 3]), mamba_fingerprint([1, 2])]


def test_a_request_shorter_than_a_page_tracks_the_state_of_no_token():
    """Page size 2, a one-token request: no whole page, so nothing is tracked (``mamba_last_track_seqlen`` None) and
    its tracking buffer holds the Mamba state of the empty prefix, not of its one token."""
    from simcache.pools import mamba_fingerprint
    cache = make_cache("write_through", page_size=2)
    drv = Driver(cache)
    req = drv.live[drv.start([1])]
    assert (req.mamba_pool_idx, req.track_buffer, req.mamba_last_track_seqlen) == (0, 1, None)
    assert cache.pools.device_mamba.read([0, 1]) == [mamba_fingerprint([1]), mamba_fingerprint([])]
    assert mamba_fingerprint([]) != mamba_fingerprint([1])


def test_inject_counts_every_injected_mamba_state_as_evictable():
    cache = make_cache("write_through")
    Driver(cache).inject([{"key": [1], "device": True, "mamba": True}, {"key": [2], "device": True, "mamba": True}])
    assert cache.sizes() == dict(full_evictable=2, full_protected=0, mamba_evictable=2, mamba_protected=0)


def test_a_host_hit_of_one_token_is_loaded_back_and_joins_the_requests_prefix():
    """Page size 1, threshold 1: [1,2]/[3] with [3] on the host only; a start of [1,2,3,4] loads [3] back (one
    token), so the request reuses three tokens and locks [3]."""
    cache = make_cache("write_through", load_back_threshold=1)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([1, 2, 3]))
    cache.controller.complete_writes(64)
    cache.check_hicache_events()
    assert cache.evict(num_tokens=1) == (1, 1)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    rid = drv.start([1, 2, 3, 4])
    mid = node_at(cache, [1, 2], [3])
    assert request(drv, rid) == dict(rid="r2", tokens=[1, 2, 3, 4], kv=[0, 1, 3, 4], mamba=3, track=None,
                                     protected=3, last=mid.id, tracked=None)
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=0 hr=0 hmr=0",
                                       "2 3 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=0 hmr=0"]


@pytest.mark.parametrize("version", ["followup_fix", "main_2026_06"])
def test_a_mamba_state_only_on_the_host_above_the_device_match_is_restored_and_the_match_stays_locked(version):
    """[1,2] has device KV and its Mamba state only on the host; [1,2]/[3,4] is on device. A start of 1..5 is a
    host hit of the Mamba state alone (main_2026_06 counts it apart, as #27391 does): [1,2]'s state is restored
    (no KV is loaded), and the request still locks its device match [3,4]."""
    cache = make_cache("write_through", version)
    drv = Driver(cache)
    drv.inject([{"key": [1, 2], "device": True, "host": True, "mamba_host": True},
                {"key": [3, 4], "parent": 0, "device": True, "mamba": True}])
    res = cache.match_prefix([1, 2, 3, 4, 5])
    assert (res.host_hit_length, res.mamba_host_hit_length) == ((0, 1) if version == "main_2026_06" else (1, 0))
    rid = drv.start([1, 2, 3, 4, 5])
    assert request(drv, rid) == dict(rid="r0", tokens=[1, 2, 3, 4, 5], kv=[0, 1, 2, 3, 4], mamba=2, track=None,
                                     protected=4, last=node_at(cache, [1, 2], [3, 4]).id, tracked=None)
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=1 hr=0 hmr=0", "2 3,4 v=1 h=0 m=1 mh=0 fl=1 ml=1 hr=0 hmr=0"],
        sizes=dict(full_evictable=0, full_protected=4, mamba_evictable=0, mamba_protected=2),
        full_lru=["1,2/3,4", "1,2"], mamba_lru=["1,2", "1,2/3,4"], host_mamba_lru=["1,2"], device_leaves=[],
        host_leaves=[])
    assert free_lists(cache)["device_mamba"] == [3, 4, 5, 6, 7]
