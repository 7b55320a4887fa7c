"""Every SGLang assertion message simcache reproduces, each reached by a test: the table below.

Each row is (the exact message, the function that raises it, how it is reached). Most are reached by a scenario
of operations (``OPS``: the oracle's format, run through ``run_ops``, as a user would); the rest by a small state
built with the public ``Driver`` (requests that insert, finish, evict) and one field set as the race or a broken
caller leaves it, then SGLang's method called. The message is compared whole: a changed character fails.
``UNREACHED`` lists the messages simcache spells (``git grep 'CacheAssertion('``) that no row reaches, and why.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_cache, node_at

from simcache.driver import Driver
from simcache.errors import CacheAssertion
from simcache.ops_run import run_ops

ROOT = Path(__file__).resolve().parent.parent
WT = dict(policy="write_through", storage=True, prefetch_threshold=1)


def ops_row(config: dict, ops: list[dict], preset: str = "pre_fix"):
    def reach():
        r = run_ops(dict(config=config, ops=ops), preset)
        assert r["outcome"] != "clean", "the operations ran clean"
        return r["outcome"].split(": ", 1)[1], r["raised_in"]
    return reach


def fixture_row(name: str, preset: str = "pre_fix"):
    """An oracle-format scenario from tests/fixtures (the oracle's own example files)."""
    def reach():
        r = run_ops(json.loads((ROOT / "tests" / "fixtures" / name).read_text()), preset)
        return r["outcome"].split(": ", 1)[1], r["raised_in"]
    return reach


def cache_with(*requests, policy="write_through", **kw):
    cache = make_cache(policy, **kw)
    drv = Driver(cache)
    for tokens in requests:
        drv.finish(drv.start(list(tokens)))
    cache.controller.complete_writes(len(requests) * 8)  # settle: every write-through acknowledged, locks released
    cache.check_hicache_events()
    return cache, drv


def state_row(build):
    """``build()`` returns (callable raising the assertion, function name)."""
    def reach():
        call, function = build()
        with pytest.raises(CacheAssertion) as e:
            call()
        return str(e.value), function
    return reach


def _evict_host_leaf_on(setup):
    def build():
        cache, _ = cache_with([1, 2])
        node = node_at(cache, [1, 2])
        setup(cache, node)
        return (lambda: cache._evict_host_leaf(node)), "_evict_host_leaf"
    return build


def _host_only(cache, node):  # [1,2] on host only, as an eviction to host leaves it
    node.value, node.host_value, node.mamba_value = None, [0, 1], None
    return node


def _tombstone_on(setup):
    def build():
        cache, _ = cache_with([1, 2], [1, 2, 3])
        node = node_at(cache, [1, 2])
        setup(cache, node)
        return (lambda: cache._delete_tombstone_leaf(node)), "_delete_tombstone_leaf"
    return build


def _locked(cache, node):
    node.full_lock_ref = -1
    return lambda: cache.inc_lock_ref(node)


def on_node(call, *requests, policy="write_through", key=(1, 2), prepare=None):
    """A cache after ``requests``; ``prepare(cache, node)`` then ``call(cache, node)`` on the node at ``key``."""
    def build():
        cache, _ = cache_with(*(requests or ([1, 2],)), policy=policy)
        node = node_at(cache, list(key))
        if prepare is not None:
            prepare(cache, node)
        return (lambda: call(cache, node)), call.__name__ if hasattr(call, "__name__") else "?"
    return build


def built(function: str, call, *requests, **kw):
    """A row reached by a built state; ``function`` is the SGLang method that raises."""
    inner = on_node(call, *requests, **kw)

    def build():
        c, _ = inner()
        return c, function
    return state_row(build)


def _freed_request(cache, drv):
    """A started request whose Mamba slot was already given back (a double finish)."""
    rid = drv.start([5, 6])
    req = drv.live[rid]
    req.mamba_pool_idx = None
    return req


def _sets(**fields):
    return lambda cache, node: [setattr(node, k, v) for k, v in fields.items()]


def _twice(f):
    return lambda cache, node: (f(cache, node), f(cache, node))


def _started(*tokens, page_size=1, device_mamba=8, **fields):
    """A cache with one started request per token list; ``fields`` set on the first request (a broken caller)."""
    cache = make_cache(page_size=page_size, device_mamba=device_mamba)
    drv = Driver(cache)
    reqs = [drv.live[drv.start(list(t))] for t in tokens]
    for k, v in fields.items():
        setattr(reqs[0], k, v)
    return cache, reqs[0]


def _root_in_mamba_lru():
    cache = make_cache()
    root = cache.root_node
    root.mamba_value, root.mamba_lock_ref = [0], 0  # the root as an unlocked Mamba holder: never in SGLang
    cache.mamba_lru_list.insert_mru(root)
    return (lambda: cache.evict_mamba(1)), "evict_mamba"


def _write_back_unacknowledged():
    cache, _ = cache_with([1, 2], policy="write_back")
    node = node_at(cache, [1, 2])
    cache.ongoing_write_through[node.id] = node  # in flight with no acknowledgement queued
    return (lambda: cache.writing_check(write_back=True)), "writing_check"


UNREACHED = {
    "node is in use, x.id=": "get_lru_no_lock and get_prev_no_lock skip Mamba-locked nodes, so evict_mamba never "
    "sees one; a built state cannot make it either without changing the list's own lock test",
    "new_prefix_len=": "insert's prefix length never exceeds what match_prefix finds right after it on one "
    "thread (an evicted node on the path is un-evicted by the insert itself)",
    "'' (empty message) in cache_unfinished_req": "the node insert gave the forked Mamba state is the node "
    "match_prefix ends at, whenever the state was not already there",
}

TABLE = [
    # --- by operations (scenarios a user can write) ---
    ("parent does not have child key, 1", "_evict_host_leaf", fixture_row("scenario_A.json")),
    # (these three were found by a random search over operations; any program reaching the message would do)
    ("non-leaf, node.id=9", "_evict_regular",
     ops_row(dict(policy="write_through", storage=True, device_kv=8, device_mamba=3, host_kv=6, host_mamba=3,
                  load_back_threshold=1),
             [{"op": "request", "tokens": [5, 6, 7, 5, 9]}, {"op": "events"},
              {"op": "request", "tokens": [1, 2, 3, 6]}, {"op": "write_ack"}, {"op": "l3_ack"},
              {"op": "prefetch", "tokens": [1, 7, 1, 9]}, {"op": "prefetch_done", "n": 2, "mamba_hit": True},
              {"op": "events"}, {"op": "request", "tokens": [4]}, {"op": "evict", "n": 6}], "described_fix")),
    ("not backuped, node.id=8", "_evict_to_host",
     ops_row(dict(policy="write_back", storage=True, device_kv=12, device_mamba=3, host_kv=4, host_mamba=4),
             [{"op": "start", "tokens": [7, 6]}, {"op": "events"}, {"op": "evict", "n": 2},
              {"op": "start", "tokens": [1, 2, 3, 9, 4, 7]}, {"op": "request", "tokens": [1, 2, 7]},
              {"op": "finish_oldest"}, {"op": "request", "tokens": [1, 2, 9, 7]},
              {"op": "prefetch", "tokens": [1, 2, 9, 8, 4]}, {"op": "request", "tokens": [1, 2, 3, 4]}],
             "followup_fix")),
    ("evict device leaf: full_lock_ref mismatch with x.id=8 x.full_lock_ref=1 x.mamba_lock_ref=0", "evict_mamba",
     ops_row(dict(policy="write_through", storage=True, device_kv=11, device_mamba=4, host_kv=6, host_mamba=2,
                  load_back_threshold=1),
             [{"op": "prefetch", "tokens": [1, 1, 8]}, {"op": "request", "tokens": [1, 2, 4, 9, 2]},
              {"op": "start", "tokens": [1, 2, 4]}, {"op": "write_ack"}, {"op": "start", "tokens": [3, 6]},
              {"op": "l3_ack"}, {"op": "finish_oldest"}, {"op": "prefetch", "tokens": [1, 2, 8, 5, 5]},
              {"op": "prefetch_done", "n": 4, "mamba_hit": False}, {"op": "load_ack"},
              {"op": "evict_mamba", "n": 2}], "followup_fix")),
    # --- by a built state ---
    ("inc_lock_ref on node with node.full_lock_ref=-1, node.id=7", "inc_lock_ref",
     state_row(lambda: (lambda c: (_locked(c, node_at(c, [1, 2])), "inc_lock_ref"))(cache_with([1, 2])[0]))),
    ("dec_lock_ref on node with node.full_lock_ref=0, node.id=7", "dec_lock_ref",
     state_row(lambda: (lambda c: ((lambda: c.dec_lock_ref(node_at(c, [1, 2]))), "dec_lock_ref"))(
         cache_with([1, 2])[0]))),
    ("not evicted, node.id=7", "_evict_host_leaf", state_row(_evict_host_leaf_on(lambda c, n: None))),
    ("not backuped, node.id=7", "_evict_host_leaf",
     state_row(_evict_host_leaf_on(lambda c, n: (_host_only(c, n), setattr(n, "host_value", None))))),
    ("has device mamba, node.id=7", "_evict_host_leaf",
     state_row(_evict_host_leaf_on(lambda c, n: (_host_only(c, n), setattr(n, "mamba_value", [0]))))),
    ("host kv in use, node.id=7 node.host_ref_counter=1", "_evict_host_leaf",
     state_row(_evict_host_leaf_on(lambda c, n: (_host_only(c, n), setattr(n, "host_ref_counter", 1))))),
    ("host mamba in use, node.id=7 node.host_mamba_ref_counter=1", "_evict_host_leaf",
     state_row(_evict_host_leaf_on(lambda c, n: (_host_only(c, n), setattr(n, "host_mamba_ref_counter", 1))))),
    ("has mamba value, node.id=7", "_delete_tombstone_leaf",
     state_row(_tombstone_on(lambda c, n: setattr(n, "mamba_value", [0])))),
    ("has mamba host value, node.id=7", "_delete_tombstone_leaf",
     state_row(_tombstone_on(lambda c, n: (setattr(n, "mamba_value", None), setattr(n, "mamba_host_value", [0]))))),
    ("leaf node has children, node.id=7", "_delete_tombstone_leaf",
     state_row(_tombstone_on(lambda c, n: (setattr(n, "mamba_value", None), setattr(n, "mamba_host_value", None))))),
    ("already evicted, node.id=7", "_evict_to_host",
     built("_evict_to_host", lambda c, n: c._evict_to_host(n), prepare=_sets(value=None))),
    ("already evicted, node.id=7", "_evict_regular",
     built("_evict_regular", lambda c, n: c._evict_regular(n), prepare=_sets(value=None))),
    ("backuped node, node.id=7", "_evict_regular", built("_evict_regular", lambda c, n: c._evict_regular(n))),
    ("node has no mamba value, x.id=7", "evict_mamba",
     built("evict_mamba", lambda c, n: c.evict_mamba(1), prepare=_sets(mamba_value=None))),
    ("evicted node should not be in mamba_lru_list, x.id=7", "evict_mamba",
     built("evict_mamba", lambda c, n: c.evict_mamba(1), prepare=_sets(value=None))),
    ("Cannot tombstone a leaf node, node.id=7", "_tombstone_internal_node",
     built("_tombstone_internal_node", lambda c, n: c._tombstone_internal_node(n))),
    ("evict host leaf: host_ref_counter != 0 with x.id=7 x.host_ref_counter=1", "evict_mamba_host",
     built("evict_mamba_host", lambda c, n: c.evict_mamba_host(1),
           prepare=lambda c, n: (_host_only(c, n), c.evictable_full_host_leaves.add(n),
                                 setattr(n, "host_ref_counter", 1)))),
    ("evict host leaf: host_mamba_ref_counter != 0 with x.id=7 x.host_mamba_ref_counter=1", "evict_mamba_host",
     built("evict_mamba_host", lambda c, n: c.evict_mamba_host(1),
           prepare=lambda c, n: (_host_only(c, n), c.evictable_full_host_leaves.add(n),
                                 setattr(n, "host_mamba_ref_counter", 1)))),
    ("evict host mamba internal: host_mamba_ref_counter != 0 with x.id=7 x.host_mamba_ref_counter=1",
     "evict_mamba_host",
     built("evict_mamba_host", lambda c, n: c.evict_mamba_host(1), prepare=_sets(host_mamba_ref_counter=1))),
    ("No backup on evicted node 7", "load_back",
     built("load_back", lambda c, n: c.load_back(n), prepare=_sets(value=None, host_value=None))),
    ("not evicted, node.id=7", "_unevict_node", built("_unevict_node", lambda c, n: c._unevict_node(n, [0, 1]))),
    ("evicted node has device mamba, node.id=7", "_unevict_node",
     built("_unevict_node", lambda c, n: c._unevict_node(n, [0, 1]), prepare=_sets(value=None))),
    ("Removing node node.id=7 not in lru list", "remove_node",
     built("remove_node", lambda c, n: c.full_lru_list.remove_node(n), prepare=_twice(
         lambda c, n: None) if False else (lambda c, n: c.full_lru_list.remove_node(n)))),
    ("Removing mamba tombstone node from mamba lru list: node.id=7", "remove_node",
     built("remove_node", lambda c, n: c.mamba_lru_list.remove_node(n), prepare=_sets(mamba_value=None))),
    ("Removing host mamba tombstone node from lru list: node.id=7", "remove_node",
     built("remove_node", lambda c, n: c.mamba_host_lru_list.remove_node(n), prepare=_sets(mamba_host_value=None))),
    ("Inserting node node.id=7 already in lru list, existing node: self.cache[node.id].id=7", "insert_mru",
     built("insert_mru", lambda c, n: c.full_lru_list.insert_mru(n))),
    ("Inserting node node.id=7 already in host mamba lru list", "insert_mru",
     built("insert_mru", lambda c, n: c.mamba_host_lru_list.insert_mru(n))),
    ("Inserting mamba tombstone node in mamba lru list: node.id=7", "insert_mru",
     built("insert_mru", lambda c, n: c.mamba_lru_list.insert_mru(n), prepare=_sets(mamba_value=None))),
    ("Resetting node node.id=7 not in lru list", "reset_node_mru",
     built("reset_node_mru", lambda c, n: c.full_lru_list.reset_node_mru(n),
           prepare=lambda c, n: c.full_lru_list.remove_node(n))),
    ("Resetting node node.id=7 not in lru list when resetting node and parents mru", "reset_node_and_parents_mru",
     built("reset_node_and_parents_mru", lambda c, n: c.full_lru_list.reset_node_and_parents_mru(n, c.root_node),
           prepare=lambda c, n: c.full_lru_list.remove_node(n))),
    ("Mamba value should not be None here.", "_insert_helper",
     built("_insert_helper", lambda c, n: c.insert((5, 6), [2, 3], None))),
    ("double free? mamba_index is None", "_free_mamba_cache",
     state_row(lambda: (lambda c, d: ((lambda: c._free_mamba_cache(_freed_request(c, d), keep_track=False)),
                                      "_free_mamba_cache"))(*cache_with([1, 2])))),
    ("root node is not evictable, x.id=2", "evict_mamba", state_row(_root_in_mamba_lru)),
    ("", "writing_check", state_row(_write_back_unacknowledged)),
    ("", "write_backup",
     built("write_backup", lambda c, n: c.write_backup(n), prepare=_sets(value=[]))),  # an empty host allocation
    # a request as the scheduler hands it to cache_(un)finished_req: page size 2 with a tracking length that is
    # not page-aligned; pool exhaustion; a protected length beyond what the tree holds
    ("It is required cache_len=3, page_aligned_len=2", "cache_finished_req",
     state_row(lambda: (lambda c, r: ((lambda: c.cache_finished_req(r)), "cache_finished_req"))(
         *_started([1, 2, 3], page_size=2, mamba_last_track_seqlen=3)))),
    ("page_aligned_len != len(kv_indices), page_aligned_len=2, len(kv_indices)=3, cache_len=3, self.page_size=2",
     "cache_unfinished_req",
     state_row(lambda: (lambda c, r: ((lambda: c.cache_unfinished_req(r)), "cache_unfinished_req"))(
         *_started([1, 2, 3], page_size=2, mamba_last_track_seqlen=3)))),
    ("Can not alloc mamba cache", "cache_unfinished_req",
     state_row(lambda: (lambda c, r: ((lambda: c.cache_unfinished_req(r)), "cache_unfinished_req"))(
         *_started([1, 2], [3, 4], device_mamba=2)))),
    ("req.cache_protected_len=5, len(new_indices)=2, len(page_aligned_token_ids)=2, mamba_exist=False",
     "cache_unfinished_req",
     state_row(lambda: (lambda c, r: ((lambda: c.cache_unfinished_req(r)), "cache_unfinished_req"))(
         *_started([1, 2], cache_protected_len=5)))),
    ("Getting prev of node node.id=7 not in lru list", "get_prev_no_lock",
     built("get_prev_no_lock", lambda c, n: c.full_lru_list.get_prev_no_lock(n),
           prepare=lambda c, n: c.full_lru_list.remove_node(n))),
]


@pytest.mark.parametrize("message, function, reach", TABLE, ids=[f"{f}:{m[:40]}" for m, f, _ in TABLE])
def test_each_assertion_message_is_reached_exactly(message, function, reach):
    got_message, got_function = reach()
    assert (got_message, got_function) == (message, function)
