"""Reproducer: under write-back, a Mamba eviction loops forever when its leaf cannot be backed up (UnifiedRadixCache).

    SGLANG_VERSION=0.5.16 python -m pytest repro/unified_writeback_livelock -q    # fails: the eviction never ends
    SGLANG_VERSION=0.5.17 python -m pytest repro/unified_writeback_livelock -q    # passes
    SGLANG_VERSION=0.5.16,0.5.17 python -m pytest repro/unified_writeback_livelock -q

(``SGLANG_PATH=/path/to/sglang`` runs a checkout; ``SGLANG_VERSION`` then names its file layout.) The cache is
SGLang's own ``UnifiedRadixCache``, unmodified, with a full and a Mamba component and HiCache write-back, built by
its own ``init_hicache``, over simcache's fake pools and controller on CPU. A watchdog in the fake host pool stops
the loop: every backup attempt asks the host pool for its free size, and the eviction here asks 200 times
without freeing anything.
"""
from __future__ import annotations

import os
import unittest

from simcache.real.unified import load_unified
from simcache.real.unified.driver import RealUnified, Sizes
from simcache.real.unified.env import Looping

VERSIONS = os.environ.get("SGLANG_VERSION", "0.5.16").split(",")
PATH = os.environ.get("SGLANG_PATH")


class WriteBackMambaEviction:
    version = ""

    def test_evict_mamba_returns_when_the_only_mamba_leaf_cannot_be_backed_up(self):
        # host KV of 2 slots; no L3 storage
        c = RealUnified(load_unified(self.version, path=PATH), write_policy="write_back", storage=False,
                        sizes=Sizes(device_kv=8, device_mamba=4, host_kv=2, host_mamba=2))
        # R1 = [1,2,3] finishes (cache_finished_req): under write-back nothing is backed up at insert, so the
        # tree holds one device leaf [1,2,3] with its Mamba state
        c.request("R1", [1, 2, 3])
        self.assertEqual(c.snapshot()[0], "[1,2,3] kv=0,1,2 host=- mamba=0 mamba_host=- lock=0 host_lock=0")
        # The device Mamba pool runs short: evict(EvictParams(mamba_num=1)). The Mamba walk picks the leaf, whose
        # write-back backup needs 3 host slots of 2 (nothing on the host to evict), so it fails and the leaf
        # stays. Before 0.5.17 the walk then restarts at the LRU end, which is the same leaf: forever.
        try:
            c.evict_mamba(1)
        except Looping:
            self.fail("evict(EvictParams(mamba_num=1)) never returns: the Mamba walk retries the same leaf, whose "
                      "write-back backup keeps failing (the watchdog stopped it after 200 attempts)")


for _v in VERSIONS:
    _name = f"TestWriteBackMambaEviction_{_v.replace('.', '_')}"
    globals()[_name] = type(_name, (WriteBackMambaEviction, unittest.TestCase), {"version": _v})

if __name__ == "__main__":
    unittest.main()
