"""Exact outcomes of ``storage.py``: L3 backups (host refs, the Mamba half, storage acks), prefetches (declined,
truncated, issued, completed, revoked) and ``_insert_helper_host``. Written for the mutation run
(``benchmarks/mutation.py``): each test compares the in-flight maps, the pools and the whole state.
"""
from __future__ import annotations

import pytest
from helpers import acked, finished, free_lists, make_cache, snapshot

from simcache.controller import MambaTransfer
from simcache.keys import page_hashes


def test_a_written_through_node_with_hashes_is_backed_up_to_storage_and_host_referenced_until_the_ack():
    cache = make_cache("write_through", page_size=2, storage=True)
    finished(cache, [1, 2, 3, 4])
    acked(cache)
    cc = cache.controller
    node = cache.root_node.children[(1, 2)]
    assert cache.ongoing_backup == {1: (node, True)}
    op = cc.pending_backups[1]
    assert (op.host_indices, op.key, op.hash_value, op.mamba) == (
        [0, 1, 2, 3], (1, 2, 3, 4), page_hashes((1, 2, 3, 4), 2, None), [MambaTransfer([0], None)])
    assert snapshot(cache)["tree"] == ["1 1,2,3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    cc.complete_backup(1)
    cache.check_hicache_events()
    assert (cache.ongoing_backup, cc.pending_backups, list(cc.ack_backup_queue)) == ({}, {}, [])
    assert snapshot(cache)["tree"] == ["1 1,2,3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert free_lists(cache)["host_kv"] == [4, 5, 6, 7]


def backed_up(**config):
    """[1,2] written through and backed up to storage, every ack in (page size 2)."""
    cache = make_cache("write_through", page_size=2, storage=True, **config)
    finished(cache, [1, 2])
    acked(cache)
    cc = cache.controller
    cc.complete_backup(min(cc.pending_backups))
    cache.check_hicache_events()
    return cache, cache.root_node.children[(1, 2)]


def in_flight(cache):
    return {k: (v.last_host_node.id, v.token_ids, v.host_indices) for k, v in cache.ongoing_prefetch.items()}


def test_a_prefetch_reserves_whole_pages_and_a_host_mamba_slot_and_protects_its_anchor():
    cache, anchor = backed_up()
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6, 7])
    op = cache.ongoing_prefetch["pf"].operation
    assert in_flight(cache) == {"pf": (7, [3, 4, 5, 6], [2, 3, 4, 5])}
    assert (op.request_id, op.host_indices, op.token_ids, op.prefix_tokens, op.mamba) == (
        "pf", [2, 3, 4, 5], [3, 4, 5, 6], [1, 2], [MambaTransfer([1], None)])
    assert cache.controller.prefetch_tokens_occupied == 4
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    assert snapshot(cache)["host_mamba_lru"] == []  # a protected host Mamba state leaves the host list
    assert (free_lists(cache)["host_kv"], free_lists(cache)["host_mamba"]) == ([6, 7], [2, 3, 4, 5, 6, 7])


def test_a_finished_prefetch_inserts_what_arrived_and_frees_the_rest_at_the_next_drain():
    cache, anchor = backed_up()
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 2, True, ["h1"])
    cc.append_host_mem_release(op.host_indices[2:])
    assert cache.check_prefetch_progress("pf") is True
    assert (in_flight(cache), cc.prefetch_tokens_occupied, cache.prefetch_loaded_tokens_by_reqid) == ({}, 0,
                                                                                                      {"pf": 2})
    leaf = anchor.children[(3, 4)]
    assert (leaf.id, leaf.key, leaf.value, leaf.host_value, leaf.mamba_host_value, leaf.hash_value) == (
        8, (3, 4), None, [2, 3], [1], ["h1"])
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=0, mamba_evictable=1, mamba_protected=0), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=["1,2", "1,2/3,4"], device_leaves=["1,2"], host_leaves=["1,2/3,4"])
    assert list(cc.host_mem_release_queue) == [[4, 5]]
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7]  # slot 1 is the new leaf's now
    cache.check_hicache_events()
    assert list(cc.host_mem_release_queue) == [] and free_lists(cache)["host_kv"] == [6, 7, 4, 5]


def test_a_prefetch_whose_mamba_state_missed_inserts_the_kv_and_frees_the_mamba_slot():
    cache, anchor = backed_up()
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 2, False, ["h1"])
    cache.check_prefetch_progress("pf")
    leaf = anchor.children[(3, 4)]
    assert (leaf.host_value, leaf.mamba_host_value) == ([2, 3], None)
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7, 1]
    assert snapshot(cache)["host_mamba_lru"] == ["1,2"]


def test_a_prefetch_of_tokens_already_on_the_host_frees_their_slots():
    """[1,2]/[3,4] is on the host already; a prefetch under [1,2] of 3,4,5,6 matches 3,4 (its slots go back) and
    inserts 5,6 under [3,4]."""
    cache, anchor = backed_up()
    finished(cache, [1, 2, 3, 4])
    acked(cache)
    cc = cache.controller
    while cc.pending_backups:
        cc.complete_backup(min(cc.pending_backups))
    cache.check_hicache_events()
    before = free_lists(cache)["host_kv"]
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 4, True, ["h1", "h2"])
    cache.check_prefetch_progress("pf")
    assert cache.prefetch_loaded_tokens_by_reqid == {"pf": 2}
    assert free_lists(cache)["host_kv"] == before[4:] + op.host_indices[:2]
    leaf = anchor.children[(3, 4)].children[(5, 6)]
    assert (leaf.host_value, leaf.mamba_host_value, leaf.hash_value) == (op.host_indices[2:], [2], ["h2"])


def test_prefetch_progress_is_done_for_an_unknown_request_and_waits_under_wait_complete_until_every_page():
    cache, anchor = backed_up(prefetch_stop_policy="wait_complete")
    assert cache.check_prefetch_progress("nobody") is True
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    op = cache.ongoing_prefetch["pf"].operation
    assert cache.check_prefetch_progress("pf") is False
    cache.controller.finish_prefetch(op, 2, True, ["h1", "h2"])  # two pages hashed, one arrived
    assert cache.check_prefetch_progress("pf") is False and "pf" in cache.ongoing_prefetch
    cache.controller.finish_prefetch(op, 4, True, ["h1", "h2"])
    assert cache.check_prefetch_progress("pf") is True and cache.ongoing_prefetch == {}


def test_a_revoked_prefetch_frees_its_mamba_slot_and_releases_its_anchor_at_the_drain():
    cache, anchor = backed_up()
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    cc.prefetch_revoke_queue.append("pf")
    cc.prefetch_revoke_queue.append("gone")  # a request with no prefetch: nothing to undo
    cache.check_hicache_events()
    assert (in_flight(cache), cc.prefetch_tokens_occupied, list(cc.prefetch_revoke_queue)) == ({}, 0, [])
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert free_lists(cache)["host_mamba"] == [2, 3, 4, 5, 6, 7, 1]
    assert snapshot(cache)["host_mamba_lru"] == ["1,2"]


@pytest.mark.parametrize("why", ["storage off", "below threshold", "rate limited", "no host kv"])
def test_a_declined_prefetch_changes_nothing(why):
    cache, anchor = backed_up(prefetch_threshold=4 if why == "below threshold" else 1)
    if why == "storage off":
        cache.enable_storage = False
    if why == "rate limited":
        cache.controller.prefetch_tokens_occupied = cache.controller.prefetch_capacity_limit
    if why == "no host kv":  # and nothing to evict: the anchor is the only host node, and it is protected
        cache.pools.host_kv.alloc(len(cache.pools.host_kv.free_slots))
    before = (snapshot(cache), free_lists(cache))
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5])
    assert cache.ongoing_prefetch == {} and (snapshot(cache), free_lists(cache)) == before


def test_a_prefetch_that_brings_only_tokens_already_on_the_host_frees_its_mamba_slot_too():
    cache, anchor = backed_up()
    finished(cache, [1, 2, 3, 4])
    acked(cache)
    cc = cache.controller
    while cc.pending_backups:
        cc.complete_backup(min(cc.pending_backups))
    cache.check_hicache_events()
    cache.prefetch_from_storage("pf", anchor, [3, 4])
    op = cache.ongoing_prefetch["pf"].operation
    slot = op.mamba[0].host_indices
    cc.finish_prefetch(op, 2, True, ["h1"])
    cache.check_prefetch_progress("pf")
    assert cache.prefetch_loaded_tokens_by_reqid == {"pf": 0}
    assert free_lists(cache)["host_mamba"][-1:] == slot and cache.pools.host_mamba.double_frees == []
    assert [n.key for n in anchor.children.values()] == [(3, 4)] and anchor.children[(3, 4)].children == {}


def test_a_best_effort_prefetch_stops_with_the_pages_that_arrived_and_inserts_only_those():
    """best_effort ends a prefetch whenever it is checked: one of two hashed pages arrived, so [3,4] (hash h1) is
    inserted and the prefetch ends, where wait_complete would still wait."""
    cache, anchor = backed_up()
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 2, True, ["h1", "h2"])
    assert cache.check_prefetch_progress("pf") is True
    assert (in_flight(cache), cc.prefetch_tokens_occupied, cache.prefetch_loaded_tokens_by_reqid, op.terminated) == (
        {}, 0, {"pf": 2}, True)
    leaf = anchor.children[(3, 4)]
    assert (leaf.key, leaf.host_value, leaf.mamba_host_value, leaf.hash_value, leaf.children) == (
        (3, 4), [2, 3], [1], ["h1"], {})
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                                       "2 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert (free_lists(cache)["host_kv"], free_lists(cache)["host_mamba"]) == ([6, 7], [2, 3, 4, 5, 6, 7])


def test_a_best_effort_prefetch_with_nothing_arrived_ends_with_nothing_inserted_and_frees_its_mamba_slot():
    cache, anchor = backed_up()
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    op = cache.ongoing_prefetch["pf"].operation
    t = cache.clock
    assert cache.check_prefetch_progress("pf") is True
    assert (in_flight(cache), cc.prefetch_tokens_occupied, cache.prefetch_loaded_tokens_by_reqid, op.terminated) == (
        {}, 0, {"pf": 0}, True)
    assert (anchor.children, anchor.last_access_time, cache.clock) == ({}, t, t + 1)  # the anchor's access only
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert (free_lists(cache)["host_kv"], free_lists(cache)["host_mamba"]) == ([6, 7], [2, 3, 4, 5, 6, 7, 1])
    assert snapshot(cache)["host_mamba_lru"] == ["1,2"]


@pytest.mark.parametrize("policy", ["wait_complete", "timeout"])
def test_a_prefetch_with_no_hashed_page_waits_under_every_policy_but_best_effort(policy):
    cache, anchor = backed_up(prefetch_stop_policy=policy)
    cache.prefetch_from_storage("pf", anchor, [3, 4])
    op = cache.ongoing_prefetch["pf"].operation
    before = (snapshot(cache), free_lists(cache))
    assert cache.check_prefetch_progress("pf") is False
    cache.controller.finish_prefetch(op, 0, False, [])  # storage answered with no page at all
    assert cache.check_prefetch_progress("pf") is False
    assert (in_flight(cache), op.terminated) == ({"pf": (7, [3, 4], [2, 3])}, False)
    assert (snapshot(cache), free_lists(cache)) == before
    cache.controller.finish_prefetch(op, 2, True, ["h1"])
    assert cache.check_prefetch_progress("pf") is True and in_flight(cache) == {}


def test_a_prefetch_whose_operation_has_no_host_slots_is_done_and_left_as_it_is():
    """SGLang's not-issued prefetch (``operation.host_indices is None``): done at once, nothing inserted, freed or
    released, the entry left in ``ongoing_prefetch``."""
    cache, anchor = backed_up()
    cache.prefetch_from_storage("pf", anchor, [3, 4])
    op = cache.ongoing_prefetch["pf"].operation
    op.host_indices = None
    before = (snapshot(cache), free_lists(cache), cache.controller.prefetch_tokens_occupied)
    assert cache.check_prefetch_progress("pf") is True
    assert (in_flight(cache), op.terminated, cache.prefetch_loaded_tokens_by_reqid) == (
        {"pf": (7, [3, 4], [2, 3])}, False, {})
    assert (snapshot(cache), free_lists(cache), cache.controller.prefetch_tokens_occupied) == before


def on_host_and_device(*more, host_kv=8):
    """[1,2] and [1,2]/[3,4] written through and backed up, every ack in; then ``more`` requests finished."""
    cache, anchor = backed_up(host_kv=host_kv)
    finished(cache, [1, 2, 3, 4], *more)
    acked(cache)
    cc = cache.controller
    while cc.pending_backups:
        cc.complete_backup(min(cc.pending_backups))
    cache.check_hicache_events()
    return cache, anchor


def test_a_prefetch_through_a_host_only_node_hangs_the_new_leaf_under_it_and_takes_it_out_of_the_host_leaves():
    cache, anchor = on_host_and_device()
    assert cache.evict(num_tokens=2) == (2, 1)  # [3,4] leaves the device, stays on the host
    assert snapshot(cache)["host_leaves"] == ["1,2/3,4"]
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 4, True, ["h1", "h2"])
    mid = anchor.children[(3, 4)]
    t = cache.clock
    assert cache.check_prefetch_progress("pf") is True
    leaf = mid.children[(5, 6)]
    assert (anchor.last_access_time, mid.last_access_time, leaf.last_access_time, cache.clock) == (
        t, t + 1, t + 2, t + 3)
    assert (leaf.host_value, leaf.hash_value, leaf.mamba_host_value) == (op.host_indices[2:], ["h2"], [2])
    assert cache.prefetch_loaded_tokens_by_reqid == {"pf": 2}
    assert snapshot(cache) == dict(
        tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "2 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
              "3 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        sizes=dict(full_evictable=2, full_protected=0, mamba_evictable=1, mamba_protected=0), full_lru=["1,2"],
        mamba_lru=["1,2"], host_mamba_lru=["1,2", "1,2/3,4/5,6", "1,2/3,4"], device_leaves=["1,2"],
        host_leaves=["1,2/3,4/5,6"])
    assert (free_lists(cache)["host_kv"], free_lists(cache)["host_mamba"]) == ([4, 5], [3, 4, 5, 6, 7])


def test_a_prefetch_through_a_node_with_a_device_mamba_state_makes_it_the_most_recent_mamba_state():
    cache, anchor = on_host_and_device([7, 8], host_kv=10)
    assert snapshot(cache)["mamba_lru"] == ["7,8", "1,2/3,4", "1,2"]
    cc = cache.controller
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    cc.finish_prefetch(cache.ongoing_prefetch["pf"].operation, 4, True, ["h1", "h2"])
    assert cache.check_prefetch_progress("pf") is True
    state = snapshot(cache)
    assert (state["mamba_lru"], state["full_lru"]) == (["1,2/3,4", "7,8", "1,2"], ["7,8", "1,2/3,4", "1,2"])
    assert state["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                             "2 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                             "3 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
                             "1 7,8 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


def test_at_page_size_1_a_prefetched_token_already_on_the_host_is_matched_not_inserted_again():
    """Page size 1: [1] has the child [2] on the host; a prefetch under [1] of the one token 2 matches it (its slot
    goes back) and adds no node."""
    cache = make_cache("write_through", page_size=1, storage=True)
    finished(cache, [1], [1, 2])
    acked(cache)
    cc = cache.controller
    while cc.pending_backups:
        cc.complete_backup(min(cc.pending_backups))
    cache.check_hicache_events()
    anchor = cache.root_node.children[1]
    child = anchor.children[2]
    before = snapshot(cache)["tree"]
    cache.prefetch_from_storage("pf", anchor, [2])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 1, True, ["h1"])
    assert cache.check_prefetch_progress("pf") is True
    assert (anchor.children, child.children, cache.prefetch_loaded_tokens_by_reqid) == ({2: child}, {}, {"pf": 0})
    assert snapshot(cache)["tree"] == before
    assert free_lists(cache)["host_kv"][-1:] == op.host_indices and cache.pools.host_kv.double_frees == []


def test_a_prefetch_short_of_a_host_mamba_slot_evicts_the_least_recent_host_mamba_state_even_its_anchors():
    """One host Mamba slot, held by the anchor's own state, which nothing protects yet: it is evicted for the
    prefetch (the anchor keeps its host KV and gets the Mamba host reference all the same)."""
    cache, anchor = backed_up(host_mamba=1)
    assert free_lists(cache)["host_mamba"] == []
    cache.prefetch_from_storage("pf", anchor, [3, 4])
    assert in_flight(cache) == {"pf": (7, [3, 4], [2, 3])}
    assert cache.ongoing_prefetch["pf"].operation.mamba == [MambaTransfer([0], None)]
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=0 fl=0 ml=0 hr=1 hmr=1"]
    assert (snapshot(cache)["host_mamba_lru"], cache.controller.prefetch_tokens_occupied) == ([], 2)


def test_a_prefetch_with_no_host_mamba_slot_to_be_had_gives_back_its_host_kv_and_its_anchor():
    """The only host Mamba slot is the anchor's, held by its L3 backup in flight: the prefetch is declined, its host
    KV goes back (to the end of the free list) and the anchor keeps only the backup's references."""
    cache = make_cache("write_through", page_size=2, storage=True, host_mamba=1)
    finished(cache, [1, 2])
    acked(cache)
    anchor = cache.root_node.children[(1, 2)]
    assert cache.ongoing_backup == {1: (anchor, True)}
    before = snapshot(cache)
    cache.prefetch_from_storage("pf", anchor, [3, 4])
    assert (in_flight(cache), cache.controller.prefetch_tokens_occupied) == ({}, 0)
    assert snapshot(cache) == before and before["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    assert (free_lists(cache)["host_kv"], free_lists(cache)["host_mamba"]) == ([4, 5, 6, 7, 2, 3], [])


def test_a_prefetch_cut_down_to_the_free_host_kv_goes_ahead_when_that_is_exactly_the_threshold():
    """main_2026_06 cuts a prefetch to the free host KV: 2 tokens free, threshold 2, so [3,4] of [3,4,5,6]."""
    cache, anchor = backed_up(version="main_2026_06", host_kv=4, prefetch_threshold=2)
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6])
    assert (in_flight(cache), cache.controller.prefetch_tokens_occupied) == ({"pf": (7, [3, 4], [2, 3])}, 2)
    assert free_lists(cache)["host_kv"] == []


def test_two_prefetches_in_flight_count_both_their_tokens():
    cache, anchor = backed_up()
    cache.prefetch_from_storage("a", anchor, [3, 4])
    cache.prefetch_from_storage("b", anchor, [5, 6, 7, 8])
    assert in_flight(cache) == {"a": (7, [3, 4], [2, 3]), "b": (7, [5, 6, 7, 8], [4, 5, 6, 7])}
    assert cache.controller.prefetch_tokens_occupied == 6
    assert snapshot(cache)["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=2 hmr=2"]
    cache.controller.finish_prefetch(cache.ongoing_prefetch["a"].operation, 2, True, ["h1"])
    assert cache.check_prefetch_progress("a") is True
    assert (cache.controller.prefetch_tokens_occupied, list(cache.ongoing_prefetch)) == (4, ["b"])


def test_a_prefetch_through_two_nodes_on_the_host_counts_both_as_matched():
    """[1,2]/[3,4]/[5,6] is on the host; a prefetch under [1,2] of 3..8 matches 4 tokens (their slots go back) and
    inserts [7,8] under [5,6]."""
    cache, anchor = on_host_and_device([1, 2, 3, 4, 5, 6], host_kv=14)
    cc = cache.controller
    before = free_lists(cache)["host_kv"]
    cache.prefetch_from_storage("pf", anchor, [3, 4, 5, 6, 7, 8])
    op = cache.ongoing_prefetch["pf"].operation
    cc.finish_prefetch(op, 6, True, ["h1", "h2", "h3"])
    assert cache.check_prefetch_progress("pf") is True
    assert cache.prefetch_loaded_tokens_by_reqid == {"pf": 2}
    assert free_lists(cache)["host_kv"] == before[6:] + op.host_indices[:4]
    leaf = anchor.children[(3, 4)].children[(5, 6)].children[(7, 8)]
    assert (leaf.host_value, leaf.hash_value, leaf.children) == (op.host_indices[4:], ["h3"], {})


def test_a_storage_ack_is_a_step_of_the_trace_that_names_its_node():
    from simcache.simulate import simulate

    ops = [{"op": "request", "tokens": [1, 2]}, {"op": "events"}, {"op": "l3_ack"}]
    t = simulate(dict(name="l3", config=dict(storage=True, page_size=2), ops=ops), "followup_fix",
                 snapshots=False).trace
    assert [(s.kind, s.node, s.text) for s in t.steps if s.kind.endswith("ack") or s.kind == "host_ref"] == [
        ("write_ack", 7, "write ack for [1,2]#7"),
        ("host_ref", 7, "host refs of [1,2]#7: host_ref=1 host_mamba_ref=1"),
        ("storage_ack", 7, "storage ack for [1,2]#7"),
        ("host_ref", 7, "host refs of [1,2]#7: host_ref=0 host_mamba_ref=0")]
