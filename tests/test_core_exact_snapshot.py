"""Exact outcomes of the snapshots (``snapshot.py``): each ``NodeView`` property for every combination, the pool
views, ``node_view``, the holder map with call frames and the insert loop's node, and whole ``take`` snapshots of
two small hand-made states: a busy cache that holds nodes in every kind of structure, and a stale node left by
scenario D's host eviction on ``pre_fix``.
"""
from __future__ import annotations

import pytest
from helpers import busy_cache, make_cache, node_at

from simcache.driver import Driver
from simcache.snapshot import NodeView, PoolView, Snapshot, _t, holder_map, node_view, pool_views, take

EMPTY = dict(leaked=(), double_freed=())


def view(value=(0,), host_value=None, mamba_value=(0,), key=(1, 2), **kw) -> NodeView:
    return NodeView(**{**dict(id=5, key=key, parent=2, children=(), attached=True, value=value,
                              host_value=host_value, mamba_value=mamba_value, mamba_host_value=None,
                              full_lock_ref=0, mamba_lock_ref=0, host_ref=0, host_mamba_ref=0, hit_count=0,
                              last_access_time=1.0), **kw})


# --- NodeView -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, host, residency", [((0,), None, "device"), (None, (3,), "host"),
                                                    ((0,), (3,), "both"), (None, None, "none"),
                                                    ((), None, "device"), (None, (), "host"), ((), (), "both")])
def test_residency_evicted_and_backuped_for_each_combination(value, host, residency):
    v = view(value=value, host_value=host)
    assert (v.residency, v.evicted, v.backuped) == (residency, value is None, host is not None)


def test_tombstone_is_a_node_without_a_device_mamba_state():
    assert [view(mamba_value=m).tombstone for m in (None, (3,), ())] == [True, False, False]
    assert view(mamba_value=None, value=None, host_value=None).tombstone is True


def test_key_text_spells_the_whole_key():
    assert [view(key=k).key_text for k in ((1, 2), (7,), (10, 200, 3), ())] == ["1,2", "7", "10,200,3", ""]


def test_key_text_spells_every_page_of_a_page_size_two_node():
    cache = make_cache("write_through", page_size=2)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3, 4, 5]))
    node = node_at(cache, [1, 2, 3, 4])
    assert (node_view(node, True).key_text, node_view(node, True).key) == ("1,2,3,4", (1, 2, 3, 4))


def test_a_node_view_is_frozen_and_depth_defaults_to_zero():
    v = view()
    assert v.depth == 0 and view(depth=3).depth == 3
    with pytest.raises(AttributeError):
        v.value = None


# --- _t and node_view ------------------------------------------------------------------------------------------

def test_t_keeps_none_and_makes_anything_else_a_tuple():
    assert (_t(None), _t([1, 2]), _t([]), _t((4,)), _t(range(2))) == (None, (1, 2), (), (4,), (0, 1))


def test_node_view_copies_every_field_of_the_node():
    cache, _ = busy()
    n = node_at(cache, [1, 2])
    assert node_view(n, True, 1) == NodeView(7, (1, 2), 2, (), True, (6, 7), (0, 1), (3,), (0,), 2, 2, 1, 1, 1, 19.0,
                                             1)
    assert node_view(n, False) == NodeView(7, (1, 2), 2, (), False, (6, 7), (0, 1), (3,), (0,), 2, 2, 1, 1, 1, 19.0,
                                           0)
    n.last_access_time = 3  # an int time is kept as a float
    got = node_view(n, True)
    assert (got.last_access_time, type(got.last_access_time)) == (3.0, float)


def test_node_view_puts_each_counter_in_its_own_field():
    cache = make_cache("write_through")
    n = cache._new_node((4, 5))
    n.value, n.host_value, n.mamba_value, n.mamba_host_value = [10, 11], [12, 13], [14], [15]
    n.full_lock_ref, n.mamba_lock_ref, n.host_ref_counter, n.host_mamba_ref_counter = 1, 2, 3, 4
    n.hit_count, n.last_access_time = 5, 6.5
    assert node_view(n, False, 9) == NodeView(n.id, (4, 5), None, (), False, (10, 11), (12, 13), (14,), (15,), 1, 2,
                                              3, 4, 5, 6.5, 9)


def test_take_puts_each_of_the_roots_counters_in_its_own_field():
    cache = make_cache("write_through")
    root = cache.root_node
    root.full_lock_ref, root.mamba_lock_ref, root.host_ref_counter, root.host_mamba_ref_counter = 4, 5, 6, 7
    root.hit_count, root.last_access_time = 3, 8.5
    assert take(cache).nodes == {root.id: NodeView(root.id, (), None, (), True, (), None, None, None, 4, 5, 6, 7, 0,
                                                   8.5, 0)}


def test_node_view_lists_the_children_and_gives_a_missing_value_as_none():
    cache = make_cache("write_through")
    drv = Driver(cache)
    for tokens in ([1, 2], [1, 2, 3], [1, 2, 4]):
        drv.finish(drv.start(tokens))
    top = node_at(cache, [1, 2])
    assert node_view(top, True, 1) == NodeView(7, (1, 2), 2, (8, 9), True, (0, 1), (0, 1), (0,), (0,), 3, 1, 0, 0,
                                               3, 19.0, 1)
    loose = cache._new_node((9,))
    assert node_view(loose, False) == NodeView(loose.id, (9,), None, (), False, None, None, None, None, 0, 0, 0, 0,
                                               0, float(loose.last_access_time), 0)


# --- holder_map --------------------------------------------------------------------------------------------------

def busy():
    """``helpers.busy_cache``: every in-flight map holds something."""
    return busy_cache()


BUSY_HOLDERS = {7: ["full_lru_list", "mamba_lru_list", "ongoing_load_back", "ongoing_backup"],
                8: ["evictable_full_device_leaves", "full_lru_list", "mamba_lru_list", "ongoing_backup",
                    "prefetch anchor"],
                9: ["full_lru_list", "mamba_lru_list", "mamba_host_lru_list", "ongoing_write_through"]}


def test_holder_map_names_every_kind_of_holder():
    cache, _ = busy()
    assert holder_map(cache) == BUSY_HOLDERS
    assert holder_map(cache, {}) == BUSY_HOLDERS and holder_map(cache, (), None) == BUSY_HOLDERS


def test_holder_map_adds_the_call_frames_after_the_structures_and_the_insert_loops_node_last():
    cache, _ = busy()
    loose = cache._new_node((9,))
    got = holder_map(cache, {8: ("evict", "_evict_regular"), loose.id: ("insert",)}, current=node_at(cache, [5, 6]))
    assert got == {**BUSY_HOLDERS, 8: [*BUSY_HOLDERS[8], "evict", "_evict_regular"], loose.id: ["insert"],
                   9: [*BUSY_HOLDERS[9], "insert loop's node"]}
    got = holder_map(cache, {loose.id: ("insert",)}, current=loose)
    assert got == {**BUSY_HOLDERS, loose.id: ["insert", "insert loop's node"]}
    assert holder_map(make_cache("write_through"), current=loose) == {loose.id: ["insert loop's node"]}


# --- pool_views --------------------------------------------------------------------------------------------------

def test_pool_views_of_a_live_request_and_a_leak():
    cache = make_cache("write_through", device_kv=6, device_mamba=3, host_kv=2, host_mamba=2)
    drv = Driver(cache)
    drv.start([1, 2, 3])
    live = list(drv.live.values())
    assert pool_views(cache, live) == dict(
        device_kv=PoolView("device_kv", 6, (3, 4, 5), (0, 1, 2), (), ()),
        device_mamba=PoolView("device_mamba", 3, (1, 2), (0,), (), ()),
        host_kv=PoolView("host_kv", 2, (0, 1), (), (), ()), host_mamba=PoolView("host_mamba", 2, (0, 1), (), (), ()))
    leaked = pool_views(cache)  # nobody refers to the request's slots: they leak
    assert {name: p.leaked for name, p in leaked.items()} == dict(device_kv=(0, 1, 2), device_mamba=(0,), host_kv=(),
                                                                  host_mamba=())


def test_pool_views_take_the_leaks_they_are_given_and_sort_the_used_and_double_freed_slots():
    cache = make_cache("write_through", device_kv=6, device_mamba=3, host_kv=2, host_mamba=2)
    pool = cache.pools.device_kv
    assert pool.alloc(4) == [0, 1, 2, 3]
    pool.free([3, 1])
    pool.free([1, 3])  # both twice
    pool.free([3])  # 3 a third time
    assert pool.alloc(2) == [4, 5]
    assert pool_views(cache, leaked={"device_kv": [2, 0], "nope": (1,)}) == dict(
        device_kv=PoolView("device_kv", 6, (3, 1, 1, 3, 3), (0, 2, 4, 5), (2, 0), (1, 3)),
        device_mamba=PoolView("device_mamba", 3, (0, 1, 2), (), (), ()),
        host_kv=PoolView("host_kv", 2, (0, 1), (), (), ()), host_mamba=PoolView("host_mamba", 2, (0, 1), (), (), ()))
    assert pool_views(cache)["device_kv"].leaked == (0, 2, 4, 5)


def test_pool_views_list_the_used_slots_in_order_whatever_order_a_set_holds_them_in():
    cache = make_cache("write_through", device_kv=10)
    pool = cache.pools.device_kv
    pool.alloc(9)
    pool.free(list(range(7)))
    assert pool_views(cache)["device_kv"] == PoolView("device_kv", 10, (9, *range(7)), (7, 8), (7, 8), ())


def test_a_pool_view_is_frozen_plain_data():
    p = PoolView("host_kv", 2, (0,), (1,), (), (1,))
    assert (p.name, p.size, p.free, p.used, p.leaked, p.double_freed) == ("host_kv", 2, (0,), (1,), (), (1,))
    with pytest.raises(AttributeError):
        p.size = 3


# --- take --------------------------------------------------------------------------------------------------------

BUSY = Snapshot(
    root=2,
    nodes={2: NodeView(2, (), None, (7, 8, 9), True, (), None, None, None, 1, 1, 0, 0, 0, 19.99999, 0),
           7: NodeView(7, (1, 2), 2, (), True, (6, 7), (0, 1), (3,), (0,), 2, 2, 1, 1, 1, 19.0, 1),
           8: NodeView(8, (3, 4), 2, (), True, (2, 3), (2, 3), (1,), (1,), 0, 0, 2, 2, 1, 20.0, 1),
           9: NodeView(9, (5, 6), 2, (), True, (4, 5), (4, 5), (2,), (2,), 1, 1, 0, 0, 1, 18.0, 1)},
    order=(7, 8, 9),
    sets=dict(evictable_full_device_leaves=(8,), evictable_full_host_leaves=()),
    lrus=dict(full_lru_list=(8, 7, 9), mamba_lru_list=(8, 7, 9), mamba_host_lru_list=(9,)),
    ongoing=dict(write_through=(9,), load_back=(7,), backup=(7, 8), prefetch=(8,)),
    pools=dict(device_kv=PoolView("device_kv", 32, (*range(9, 32), 0, 1), (2, 3, 4, 5, 6, 7, 8), (), ()),
               device_mamba=PoolView("device_mamba", 8, (5, 6, 7, 0), (1, 2, 3, 4), (), ()),
               host_kv=PoolView("host_kv", 8, (), tuple(range(8)), (), ()),
               host_mamba=PoolView("host_mamba", 8, (4, 5, 6, 7), (0, 1, 2, 3), (), ())),
    counters=dict(full_evictable=2, full_protected=4, mamba_evictable=1, mamba_protected=2),
    holders={k: tuple(v) for k, v in BUSY_HOLDERS.items()},
    stale=(),
    tree_text=("1 1,2 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=1 hmr=1", "1 3,4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=2 hmr=2",
               "1 5,6 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"))


def test_take_of_a_busy_cache_field_for_field():
    cache, drv = busy()
    snap = take(cache, list(drv.live.values()))
    assert snap == BUSY
    assert (snap.current, snap.stack) == (None, ())
    assert snap.node(8) == BUSY.nodes[8] and snap.node(2).key == ()
    with pytest.raises(KeyError):
        snap.node(99)


def test_take_passes_frames_current_stack_and_given_pools_on():
    cache, drv = busy()
    pools = {"device_kv": PoolView("device_kv", 1, (), (), (), ())}
    current = node_at(cache, [5, 6])
    snap = take(cache, list(drv.live.values()), frames={7: ("evict",)}, current=current, stack=["evict", "_x"],
                pools=pools)
    assert snap == Snapshot(**{**vars(BUSY), "pools": pools, "current": 9, "stack": ("evict", "_x"),
                               "holders": {**BUSY.holders, 7: (*BUSY.holders[7], "evict"),
                                           9: (*BUSY.holders[9], "insert loop's node")}})
    assert snap.pools is pools


def test_take_without_live_requests_shows_their_slots_as_leaked():
    cache, _ = busy()
    snap = take(cache)
    assert {name: p.leaked for name, p in snap.pools.items()} == dict(device_kv=(8,), device_mamba=(4,), host_kv=(),
                                                                     host_mamba=())


def stale_state():
    """Scenario D on pre_fix after its host eviction: P=[1,2] and its child C=[3] are cut off the tree, and C is
    still in the device leaf set and both device LRU lists."""
    cache = make_cache("write_through", "pre_fix")
    drv = Driver(cache)
    drv.step({"op": "inject", "nodes": [{"key": [1, 2], "host": True},
                                        {"key": [3], "parent": 0, "device": True, "mamba": True}]}, 0)
    parent, child = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    assert drv.step({"op": "evict_host", "n": 2}, 1) == "."
    return cache, parent, child


ROOT_ALONE = NodeView(2, (), None, (), True, (), None, None, None, 1, 1, 0, 0, 0, 5.0, 0)
C_VIEW = NodeView(8, (3,), 7, (), False, (0,), None, (0,), None, 0, 0, 0, 0, 0, 11.0, 0)
P_VIEW = NodeView(7, (1, 2), 2, (8,), False, None, None, None, None, 0, 0, 0, 0, 0, 10.0, 0)
STALE = Snapshot(
    root=2, nodes={2: ROOT_ALONE, 8: C_VIEW}, order=(),
    sets=dict(evictable_full_device_leaves=(8,), evictable_full_host_leaves=()),
    lrus=dict(full_lru_list=(8,), mamba_lru_list=(8,), mamba_host_lru_list=()),
    ongoing=dict(write_through=(), load_back=(), backup=(), prefetch=()),
    pools=dict(device_kv=PoolView("device_kv", 32, tuple(range(1, 32)), (0,), (0,), ()),
               device_mamba=PoolView("device_mamba", 8, tuple(range(1, 8)), (0,), (0,), ()),
               host_kv=PoolView("host_kv", 8, (*range(2, 8), 0, 1), (), (), ()),
               host_mamba=PoolView("host_mamba", 8, tuple(range(8)), (), (), ())),
    counters=dict(full_evictable=1, full_protected=0, mamba_evictable=1, mamba_protected=0),
    holders={8: ("evictable_full_device_leaves", "full_lru_list", "mamba_lru_list")}, stale=(8,), tree_text=())


def test_take_draws_a_detached_node_that_is_still_held_as_stale():
    cache, parent, child = stale_state()
    assert (parent.id, child.id) == (7, 8)
    assert take(cache) == STALE


def test_take_draws_known_detached_nodes_but_calls_only_held_ones_stale():
    cache, parent, _ = stale_state()
    snap = take(cache, known={7: parent})
    assert snap == Snapshot(**{**vars(STALE), "nodes": {**STALE.nodes, 7: P_VIEW}})
    frozen = NodeView(7, (1, 2), None, (), False, None, None, None, None, 0, 0, 0, 0, 0, 1.0, 4)
    assert take(cache, known={7: frozen}).nodes[7] is frozen  # a frozen view is drawn as it was left


def test_a_detached_node_held_by_an_outer_call_is_stale_and_one_held_by_the_eviction_itself_is_not():
    cache, parent, _ = stale_state()
    snap = take(cache, frames={7: ("insert",)}, known={7: parent})
    assert (snap.stale, snap.holders[7]) == ((7, 8), ("insert",))
    assert take(cache, frames={7: ("insert",)}, known={7: parent}, outer=frozenset()).stale == (8,)
    assert take(cache, known={7: parent}, outer=frozenset({7})).stale == (7, 8)
    assert take(cache, frames={7: ("insert",)}).holders == STALE.holders  # 7 is not drawn: no holders for it


def test_only_a_node_detached_before_can_be_stale():
    cache, parent, _ = stale_state()
    assert take(cache, detached={8}) == STALE
    assert take(cache, detached=set()).stale == ()
    assert take(cache, frames={7: ("insert",)}, known={7: parent}, detached={7}).stale == (7,)


def test_the_insert_loops_node_is_drawn_even_when_nothing_else_reaches_it():
    cache, _, _ = stale_state()
    fresh = cache._new_node((4,))
    snap = take(cache, current=fresh)
    assert snap.nodes[fresh.id] == NodeView(fresh.id, (4,), None, (), False, None, None, None, None, 0, 0, 0, 0, 0,
                                            float(fresh.last_access_time), 0)
    assert (snap.current, snap.holders[fresh.id], snap.stale) == (fresh.id, ("insert loop's node",), (8,))
    assert take(cache, current=fresh, detached={8}).stale == (8,)  # new, never detached: not stale


def test_the_root_is_drawn_as_the_root_even_when_a_prefetch_anchors_at_it():
    cache = make_cache("write_through", storage=True, host_kv=4)
    Driver(cache).step({"op": "prefetch", "tokens": [1, 2, 9, 9]}, 0)
    cache.root_node.hit_count = 3  # the root's view always counts 0 hits: it is not drawn as a plain node
    snap = take(cache)
    assert snap.nodes == {2: NodeView(2, (), None, (), True, (), None, None, None, 1, 1, 1, 1, 0, 10.0, 0)}
    assert (snap.holders, snap.ongoing["prefetch"], snap.stale, snap.order) == ({2: ("prefetch anchor",)}, (2,), (),
                                                                                  ())


def test_the_roots_view_lists_only_attached_children():
    cache, drv = busy()
    node = node_at(cache, [3, 4])
    node.parent = None  # its slot under the root stays, but the link no longer agrees both ways
    snap = take(cache, list(drv.live.values()))
    assert (snap.nodes[2].children, snap.order, snap.nodes[8].attached, snap.nodes[8].depth) == ((7, 9), (7, 9),
                                                                                                  False, 0)
    assert snap.stale == (8,)
