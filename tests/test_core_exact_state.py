"""Exact outcomes of the read-only views (``state.py``): the holder ledger in its canonical order and by node, the
in-flight counts, the slots each owner refers to, what counts as attached, stale references, and the tree texts'
edge cases. One busy cache holds a node in every kind of structure at once.
"""
from __future__ import annotations

from helpers import busy_cache, make_cache, node_at

from simcache.driver import Driver
from simcache.state import (
    accounting,
    attached_ids,
    counters,
    dfs,
    held_by,
    holder_map,
    holders,
    holders_of,
    inflight,
    is_attached,
    node_line,
    referenced_slots,
    stale_refs,
    tree_lines,
    tree_slot_lines,
    tree_text,
)


def busy():
    """``helpers.busy_cache``, its tree checked: every in-flight map holds something."""
    cache, drv = busy_cache()
    assert tree_slot_lines(cache) == ["1 1,2 v=6,7 h=0,1 m=3 mh=0", "1 3,4 v=2,3 h=2,3 m=1 mh=1",
                                      "1 5,6 v=4,5 h=4,5 m=2 mh=2"]
    return cache, drv


HOLDERS = {8: ["evictable_full_device_leaves", "full_lru_list", "mamba_lru_list", "ongoing_backup", "prefetch anchor"],
           7: ["full_lru_list", "mamba_lru_list", "ongoing_load_back", "ongoing_backup"],
           9: ["full_lru_list", "mamba_lru_list", "mamba_host_lru_list", "ongoing_write_through"]}


def test_the_ledger_lists_every_holder_in_its_canonical_order():
    cache, _ = busy()
    assert [(h, n.id) for h, n in held_by(cache)] == [
        ("evictable_full_device_leaves", 8), ("full_lru_list", 8), ("full_lru_list", 7), ("full_lru_list", 9),
        ("mamba_lru_list", 8), ("mamba_lru_list", 7), ("mamba_lru_list", 9), ("mamba_host_lru_list", 9),
        ("ongoing_write_through", 9), ("ongoing_load_back", 7), ("ongoing_backup", 7), ("ongoing_backup", 8),
        ("prefetch anchor", 8)]
    assert [(h, n.id) for h, n in held_by(cache, lrus=False)] == [
        ("evictable_full_device_leaves", 8), ("ongoing_write_through", 9), ("ongoing_load_back", 7),
        ("ongoing_backup", 7), ("ongoing_backup", 8), ("prefetch anchor", 8)]
    assert holder_map(cache) == HOLDERS
    assert {k: [n.id for n in v] for k, v in holders(cache).items()} == dict(
        evictable_full_device_leaves=[8], evictable_full_host_leaves=[], full_lru_list=[8, 7, 9],
        mamba_lru_list=[8, 7, 9], mamba_host_lru_list=[9], ongoing_write_through=[9], ongoing_load_back=[7],
        ongoing_backup=[7, 8], ongoing_prefetch=[8])


def test_the_holders_of_one_node_are_its_ledger_entries():
    cache, _ = busy()
    for keys in ([1, 2], [3, 4], [5, 6]):
        node = node_at(cache, keys)
        assert holders_of(cache, node) == HOLDERS[node.id]
    other = make_cache("write_through")
    drv = Driver(other)
    drv.finish(drv.start([1, 2]))
    twin = node_at(other, [1, 2])  # the same id in another cache: held by nothing here
    assert twin.id == 7 and holders_of(cache, twin) == []


def test_in_flight_counts_counters_and_the_slots_each_owner_refers_to():
    cache, drv = busy()
    live = list(drv.live.values())
    assert inflight(cache) == dict(write_through=1, load_back=1, backup=2, prefetch=1, pending_l3=2, write_acks=1)
    assert counters(cache, live) == dict(full_evictable=2, full_protected=4, mamba_evictable=1, mamba_protected=2,
                                         tree_device_tokens=6, live_requests=1)
    # the request's own new token (8) and Mamba slot (4); the prefetch's reserved host KV (6, 7) and Mamba slot (3)
    assert referenced_slots(cache, live) == dict(device_kv=[6, 7, 2, 3, 4, 5, 8], device_mamba=[3, 1, 2, 4],
                                                 host_kv=[0, 1, 2, 3, 4, 5, 6, 7], host_mamba=[0, 1, 2, 3])
    assert referenced_slots(cache) == dict(device_kv=[6, 7, 2, 3, 4, 5], device_mamba=[3, 1, 2],
                                           host_kv=[0, 1, 2, 3, 4, 5, 6, 7], host_mamba=[0, 1, 2, 3])
    clean = dict(leaked=[], free_but_referenced=[], duplicated_in_free_list=[], shared=[])
    assert accounting(cache, live) == dict(device_kv=clean, device_mamba=clean, host_kv=clean, host_mamba=clean)
    assert accounting(cache)["device_kv"]["leaked"] == [8]  # without the request, its slot is nobody's
    cache.controller.append_host_mem_release([9])
    assert referenced_slots(cache, live)["host_kv"] == [0, 1, 2, 3, 4, 5, 6, 7, 9]


def test_a_request_refers_only_to_the_kv_past_what_the_cache_protects_and_to_its_track_buffer():
    cache = make_cache("write_through", page_size=2)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    rid = drv.start([1, 2, 3, 4, 5])
    req = drv.live[rid]
    assert (req.kv, req.cache_protected_len, req.mamba_pool_idx, req.track_buffer) == ([0, 1, 2, 3, 4], 2, 2, 3)
    assert tree_slot_lines(cache) == ["1 1,2 v=0,1 h=0,1 m=1 mh=0"]
    refs = referenced_slots(cache, [req])  # [1,2]'s own slots, then the request's past them
    assert refs["device_kv"] == [0, 1, 2, 3, 4] and refs["device_mamba"] == [1, 2, 3]


def test_a_node_detached_by_hand_leaves_the_tree_texts_and_shows_as_stale_where_it_is_still_held():
    cache, _ = busy()
    node = node_at(cache, [5, 6])
    del cache.root_node.children[cache.child_key(node.key)]
    assert not is_attached(cache, node) and id(node) not in attached_ids(cache)
    assert tree_lines(cache) == ["1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=1 hmr=1",
                                 "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=2 hmr=2"]
    assert stale_refs(cache) == ["5,6@full_lru_list", "5,6@mamba_host_lru_list", "5,6@mamba_lru_list",
                                 "5,6@ongoing_write_through"]
    assert referenced_slots(cache)["device_kv"] == [6, 7, 2, 3]


def test_attached_means_reachable_through_links_that_agree_both_ways():
    cache = make_cache("write_through")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([1, 2, 3]))
    top, leaf = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    assert is_attached(cache, leaf) and is_attached(cache, cache.root_node)
    assert attached_ids(cache) == {id(cache.root_node), id(top), id(leaf)}
    leaf.parent = cache.root_node  # the parent still lists it, but it points elsewhere
    assert not is_attached(cache, leaf) and attached_ids(cache) == {id(cache.root_node), id(top)}
    leaf.parent = top
    leaf.key = (4,)  # under a slot its key no longer names
    assert not is_attached(cache, leaf) and id(leaf) not in attached_ids(cache)
    leaf.key = ()
    assert not is_attached(cache, leaf) and id(leaf) not in attached_ids(cache)
    leaf.key = (3,)
    top.parent = leaf  # a cycle: never reaches the root
    assert not is_attached(cache, leaf)
    top.parent = None
    assert not is_attached(cache, top)


def test_the_tree_texts_mark_a_value_of_the_wrong_length_and_name_an_empty_tree():
    cache = make_cache("write_through")
    assert (tree_text(cache), tree_lines(cache), dfs(cache)) == ("(empty)", [], [])
    drv = Driver(cache)
    drv.finish(drv.start([3, 4]))
    drv.finish(drv.start([1, 2, 5]))
    drv.finish(drv.start([1, 2, 4]))
    cache.check_hicache_events()
    assert tree_text(cache) == ("1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0\n"  # siblings sorted by key
                                "2 4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0\n"
                                "2 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0\n"
                                "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0")
    node = node_at(cache, [3, 4])
    node.value = node.value[:1]
    assert node_line(0, node) == "0 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0 !len"
    node.value, node.host_value = [9, 9], [9]
    assert node_line(0, node).endswith(" !len")
    node.host_value = None
    assert node_line(2, node) == "2 3,4 v=1 h=0 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"
    assert tree_slot_lines(cache)[-1] == "1 3,4 v=9,9 h=- m=0 mh=0"


def test_the_preorder_walk_and_the_slot_references_take_the_nodes_the_caller_already_has():
    """``dfs(cache, attached)`` walks only the ids it is given (a snapshot passes the set it computed), and
    ``referenced_slots(..., attached_nodes)`` counts only the nodes it is given (the one-pass check passes its own)."""
    cache, drv = busy()
    top, mid, other = node_at(cache, [1, 2]), node_at(cache, [3, 4]), node_at(cache, [5, 6])
    assert [(d, n.id) for d, n in dfs(cache)] == [(1, top.id), (1, mid.id), (1, other.id)]
    assert [(d, n.id) for d, n in dfs(cache, {id(cache.root_node), id(mid)})] == [(1, mid.id)]
    assert dfs(cache, set()) == []
    live = list(drv.live.values())
    assert referenced_slots(cache, live, [mid]) == dict(device_kv=[2, 3, 8], device_mamba=[1, 4], host_kv=[2, 3, 6, 7],
                                                        host_mamba=[1, 3])
    assert referenced_slots(cache, (), []) == dict(device_kv=[], device_mamba=[], host_kv=[6, 7], host_mamba=[3])


def test_two_nodes_that_are_each_others_parent_and_child_are_not_attached():
    """A cycle whose links agree both ways never reaches the root: ``is_attached`` must stop, not walk it forever."""
    cache = make_cache("write_through")
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([1, 2, 3]))
    top, leaf = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    del cache.root_node.children[cache.child_key(top.key)]
    top.parent = leaf
    leaf.children[cache.child_key(top.key)] = top
    assert (is_attached(cache, leaf), is_attached(cache, top)) == (False, False)
    assert attached_ids(cache) == {id(cache.root_node)} and tree_lines(cache) == []
