"""Reproducer: a prefetched host refill hung under a device node that was never backed up (UnifiedRadixCache).

Run it on a release (its wheel is fetched once into simcache's cache folder and checked against its sha256):

    SGLANG_VERSION=0.5.16 python -m pytest repro/unified_prefetch_refill -q    # fails (the bug)
    SGLANG_VERSION=0.5.17 python -m pytest repro/unified_prefetch_refill -q    # passes (#31902)
    SGLANG_VERSION=0.5.16,0.5.17 python -m pytest repro/unified_prefetch_refill -q    # both, each class per version

or on a checkout: ``SGLANG_PATH=/path/to/sglang SGLANG_VERSION=0.5.16`` (the version says which file layout the
checkout has: 0.5.16 and the mirror's 7f67965b4 keep the tree in the cache class; 0.5.17 on in a tree core).

The cache is SGLang's own ``UnifiedRadixCache``, unmodified, with a full and a Mamba component, HiCache
write-through and L3 storage, built by its own ``init_hicache``; the pools, the request pool and the hybrid cache
controller are simcache's fakes (free lists that record every free), run on CPU. Each step names the SGLang call
the harness makes.
"""
from __future__ import annotations

import os
import unittest

from simcache.real.unified import load_unified
from simcache.real.unified.driver import RealUnified

VERSIONS = os.environ.get("SGLANG_VERSION", "0.5.16").split(",")
PATH = os.environ.get("SGLANG_PATH")
_LOADED: dict = {}


def build(version: str, write_policy: str) -> RealUnified:
    """Device KV 16 slots, host KV 4, device Mamba 8, host Mamba 4, page size 1."""
    if version not in _LOADED:
        _LOADED[version] = load_unified(version, path=PATH)
    return RealUnified(_LOADED[version], write_policy=write_policy)


class PrefetchRefillUnderUnbackedParent:
    version = ""

    def setUp(self):
        self.c = build(self.version, "write_through")

    def reach_the_shape(self):
        c = self.c
        # R1 = [1,2,9,9] misses; the scheduler prefetches it from L3, anchored at the root
        # (match_prefix, then prefetch_from_storage(rid, root, [1,2,9,9]))
        self.assertTrue(c.prefetch("R1", [1, 2, 9, 9]))
        if c.target.late_host_alloc:
            # 0.5.16 on: the L3 hit count (4) arrives; drain_storage_control_queues reserves all 4 host KV slots
            self.assertEqual(c.prefetch_hit("R1", 4), [0, 1, 2, 3])
        self.assertEqual(c.host_kv.available_size(), 0)
        # R2 = [1,2,3,4] finishes (cache_finished_req): its write-through backup finds the host full, so the new
        # leaf [1,2,3,4] stays on the device only
        c.request("R2", [1, 2, 3, 4])
        self.assertFalse(c.root.children[1].backuped)
        # R1's prefetch completes (check_prefetch_progress): the insert splits [1,2,3,4] into [1,2] + [3,4];
        # before 0.5.17 it also hangs the host-only [9,9] under [1,2], which is not backed up
        self.assertTrue(c.prefetch_done("R1", 4, True))

    def assert_leaf_sets_hold_only_attached_nodes(self, after: str):
        detached = {k: v for k, v in self.c.stale_leaves().items() if v}
        self.assertEqual(detached, {}, f"after {after}, a leaf set holds nodes no longer in the tree: {detached}")

    def test_evictions_leave_no_detached_node_in_a_leaf_set(self):
        self.reach_the_shape()
        self.c.evict(3)  # evict(EvictParams(num_tokens=3))
        self.assert_leaf_sets_hold_only_attached_nodes("evict(3)")
        self.c.evict_host(2)
        self.assert_leaf_sets_hold_only_attached_nodes("evict_host(2)")

    def test_evictions_run_to_completion_without_freeing_a_slot_twice(self):
        self.reach_the_shape()
        self.c.evict(3)
        self.c.evict_host(2)
        self.c.evict(2)  # before 0.5.17: AssertionError (assert v == node in _remove_leaf_from_parent)
        self.assertEqual(self.c.ledger.double_frees(), [])


class UnderWriteBack:
    """Write-back keeps the refill under [1,2] (#31902 drops it only under write-through), but never deletes a
    node that is not backed up: the evictions back [1,2] and [3,4] up first, so nothing is left detached."""

    version = ""

    def test_the_same_steps_under_write_back_run_clean(self):
        c = build(self.version, "write_back")
        self.assertTrue(c.prefetch("R1", [1, 2, 9, 9]))
        if c.target.late_host_alloc:
            c.prefetch_hit("R1", 4)
        c.request("R2", [1, 2, 3, 4])
        self.assertTrue(c.prefetch_done("R1", 4, True))
        s12 = c.root.children[1]
        self.assertIn(9, s12.children)  # the refill is hung under [1,2] ...
        self.assertFalse(s12.backuped)  # ... which is not backed up
        for step in (lambda: c.evict(3), lambda: c.evict_host(2), lambda: c.evict(2)):
            step()
            self.assertEqual({k: v for k, v in c.stale_leaves().items() if v}, {})
        self.assertTrue(s12.backuped)
        self.assertEqual(c.ledger.double_frees(), [])


# one TestCase class per version asked for: TestPrefetchRefillUnderUnbackedParent_0_5_16, TestUnderWriteBack_0_5_16
for _v in VERSIONS:
    for _base in (PrefetchRefillUnderUnbackedParent, UnderWriteBack):
        _name = f"Test{_base.__name__}_{_v.replace('.', '_')}"
        globals()[_name] = type(_name, (_base, unittest.TestCase), {"version": _v})

if __name__ == "__main__":
    unittest.main()
