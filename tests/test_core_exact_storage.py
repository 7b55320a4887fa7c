"""Exact outcomes of ``storage.py``: L3 backups (host refs, the Mamba half, storage acks), prefetches (declined,
truncated, issued, completed, revoked) and ``_insert_helper_host``. Written for the mutation run
(``benchmarks/mutation.py``): each test compares the in-flight maps, the pools and the whole state.
"""
from __future__ import annotations

from helpers import free_lists, make_cache, snapshot

from simcache.controller import MambaTransfer
from simcache.driver import Driver
from simcache.keys import page_hashes


def finished(cache, *requests):
    drv = Driver(cache)
    for tokens in requests:
        drv.finish(drv.start(list(tokens)))
    return drv


def acked(cache):
    cache.controller.complete_writes(64)
    cache.check_hicache_events()


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
