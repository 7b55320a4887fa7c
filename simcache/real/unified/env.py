"""SGLang's real ``UnifiedRadixCache`` built over the fakes for a scenario's settings, and read-only views of its state.

``UnifiedEnv`` offers what ``simcache.real.driver.RealDriver`` drives (``tree``, the pools, the controller, the
request bookkeeping), so an operation means the same on the unified class as on HiMamba. Construction is SGLang's
own: the constructor, then ``init_hicache`` (whose pool assembler is the fake of ``fakes.make_assembler``).

The views have ``run_ops``'s field names, with the unified cache's own node fields:
- ``tree``: ``depth keys v= h= m= mh= (0/1: device KV, host KV, device Mamba, host Mamba) fl= ml= (device locks of
  Full and Mamba) hl= hml= (host locks)``; ``tree_slots``: the slots of each;
- ``stale_final``: ``keys@holder`` for every detached node still held by a leaf set, an LRU list or an in-flight
  map (the unified cache's holders: ``evictable_device_leaves``, ``evictable_host_leaves``, ``lru_lists[MAMBA]``,
  ``host_lru_lists[MAMBA]``, ``ongoing_*``);
- ``counters``: the per-component evictable and protected sizes; ``inflight``, ``double_frees``, ``accounting``,
  ``free``: as for HiMamba.
"""
from __future__ import annotations

import collections
import dataclasses
import threading
from array import array
from types import SimpleNamespace

from numpy import float64

from ...unified.cache import watchdog
from ..fakes import FakeMambaPool, FreeListPool, Ledger, slots_of
from ..loader import Loaded
from ..readout import Readout
from . import fakes, stubs

MC = "sglang.srt.mem_cache"




class Looping(BaseException):
    """Raised by the watchdog out of a real operation that would never end (a BaseException: SGLang's own
    ``except Exception`` handlers must not swallow it)."""


class WatchedHostPool(FreeListPool):
    """The host KV pool, counting ``available_size`` queries: every backup attempt makes one, so a walk that retries
    a failing backup forever makes unboundedly many."""

    queries = 0
    limit = 200  # ``simcache.unified.cache.watchdog`` of the run's pools; the model stops at the same query

    def available_size(self) -> int:
        self.queries += 1
        if self.queries > self.limit:
            raise Looping()
        return super().available_size()


class UnifiedEnv(Readout):
    """One fresh real unified cache for the checked settings ``cfg``; build it inside ``loaded.active()``."""

    def __init__(self, loaded: Loaded, cfg: dict, max_ctx: int) -> None:
        self.loaded, self.cfg = loaded, cfg
        target = self.target = loaded.target
        ct = loaded.module(f"{MC}.unified_cache.component_type" if target.is_tree_core
                           else f"{MC}.unified_cache_components.tree_component")
        self.CT = ct.ComponentType
        # SGLang's node ids and access clock are process-wide counters: restart them, so a run's ids (some
        # assertion texts name them) do not depend on the runs before it
        tc = loaded.module(target.base_module)
        tc._LAST_ACCESS_TIME_COUNTER_FLOAT = float64(1.0)
        nodes = loaded.module(f"{MC}.unified_cache.unified_tree_core" if target.is_tree_core else
                              f"{MC}.unified_radix_cache")
        nodes.UnifiedTreeNode.counter = 0
        self.bpc = loaded.module(f"{MC}.base_prefix_cache")
        self.RadixKey = loaded.module(f"{MC}.radix_cache").RadixKey
        self.pool_name = loaded.module(f"{MC}.hicache_storage").PoolName.MAMBA
        ps, storage = cfg["page_size"], cfg["storage"]
        self.page_size, self.extra_buffer = ps, ps > 1
        self.ledger = Ledger(loaded.real_files)
        self.alloc = fakes.DeviceKVAllocator(cfg["device_kv"], self.ledger)
        self.rtp = fakes.HybridReqToTokenPool(FakeMambaPool(cfg["device_mamba"], self.ledger), cfg["device_mamba"] + 1,
                                              max_ctx, self.extra_buffer)
        self.host_kv = WatchedHostPool("host_kv", cfg["host_kv"], self.ledger, ps)
        self.host_kv.limit = watchdog(cfg["device_kv"], cfg["host_kv"])
        self.host_mamba = FreeListPool("host_mamba", cfg["host_mamba"], self.ledger)
        self.cc = fakes.UnifiedController(self.alloc, self.host_kv, self.rtp.mamba_pool, self.host_mamba,
                                          cfg["policy"], page_size=ps, prefetch_threshold=cfg["prefetch_threshold"],
                                          auto_complete=cfg.get("auto_complete", True))
        self.cc.enable_storage = storage
        CacheInitParams = loaded.module(f"{MC}.cache_init_params").CacheInitParams
        extra = {"tree_core_backend": "python"} if "tree_core_backend" in {
            f.name for f in dataclasses.fields(CacheInitParams)} else {}
        params = CacheInitParams(
            disable=False, req_to_token_pool=self.rtp, token_to_kv_pool_allocator=self.alloc, page_size=ps,
            eviction_policy="lru", tree_components=(self.CT.FULL, self.CT.MAMBA),
            enable_mamba_extra_buffer=self.extra_buffer, **extra)
        policy = {"write_through": "write_through", "write_back": "write_back"}.get(cfg["policy"], cfg["policy"])
        server_args = SimpleNamespace(
            hicache_io_backend="kernel", hicache_mem_layout="layer_first", extra_metric_labels=None,
            hicache_storage_backend="fake" if storage else None, hicache_storage_backend_extra_config=None,
            hicache_write_policy=policy, hicache_storage_prefetch_policy=cfg["prefetch_stop_policy"],
            served_model_name="fake")
        t = self.tree = loaded.cache_class(params)
        stubs.CURRENT.update(attach=fakes.make_assembler(self.cc, self.CT),
                             prefetch_threshold=cfg["prefetch_threshold"])
        t.init_hicache(server_args, params)
        t.load_cache_event = threading.Event()
        mamba = self.CT.MAMBA
        self.cc.bind_unified(self.pool_name, evict_mamba_host=lambda n: t.evict_host(n, mamba),
                             evict_mamba=lambda n: t.evict(self.bpc.EvictParams(mamba_num=n)))
        if cfg["write_through_threshold"] != t.write_through_threshold:
            t.write_through_threshold = cfg["write_through_threshold"]
        t.load_back_threshold = cfg["load_back_threshold"]
        self.live_reqs: collections.OrderedDict = collections.OrderedDict()
        self.known: dict = {}
        self.seq = lambda toks: array("q", toks)

    # --- nodes ---
    @property
    def core(self):
        """The object that owns the tree, the leaf sets, the LRUs and the counters."""
        return self.tree.tree_core if self.target.is_tree_core else self.tree

    def node(self, handle):
        """The node object of a handle the cache's API returned (a node, or a node id from 0.5.17). An id the
        tree core no longer knows (it unregisters a node as it unlinks it) is looked up in ``known``."""
        if handle is None or not self.target.is_tree_core or not isinstance(handle, int):
            return handle
        arena = self.core._node_arena
        return arena[handle] if handle in arena else self.known.get(handle)

    def remember(self) -> None:
        """Keep every node the tree core has registered so far (called after each operation)."""
        if self.target.is_tree_core:
            self.known.update(self.core._node_arena)

    def data(self, node, ct):
        return node.component_data[ct]

    # --- reading the tree (``Readout`` does the rest) ---
    def _root(self):
        return self.core.root_node

    def _slots(self, n) -> tuple:
        f, m = n.component_data[self.CT.FULL], n.component_data[self.CT.MAMBA]
        return f.value, m.value, f.host_value, m.host_value

    def _counters(self) -> dict:
        c, F, M = self.core, self.CT.FULL, self.CT.MAMBA
        ev, pr = c.component_evictable_size_, c.component_protected_size_
        return dict(full_evictable=int(ev[F]), full_protected=int(pr[F]), mamba_evictable=int(ev[M]),
                    mamba_protected=int(pr[M]))

    def _lru_nodes(self, lru) -> list:
        return list(lru.cache.values())  # node id -> node, in every version

    def stale_refs(self) -> list[str]:
        c, t, att, M = self.core, self.tree, self.attached(), self.CT.MAMBA

        def first(v):
            return self.node(v[0] if isinstance(v, tuple) else v)

        holders = dict(evictable_device_leaves=[self.node(n) for n in c.evictable_device_leaves],
                       evictable_host_leaves=[self.node(n) for n in c.evictable_host_leaves],
                       mamba_lru_list=self._lru_nodes(c.lru_lists[M]),
                       mamba_host_lru_list=self._lru_nodes(c.host_lru_lists[M]),
                       ongoing_write_through=[first(v) for v in t.ongoing_write_through.values()],
                       ongoing_load_back=[first(v) for v in t.ongoing_load_back.values()],
                       ongoing_backup=[first(v) for v in t.ongoing_backup.values()],
                       ongoing_prefetch=[first(v) for v in t.ongoing_prefetch.values()])
        return self.stale(holders, att)

    def canonical_tree(self) -> tuple[list[str], list[str]]:
        F, M = self.CT.FULL, self.CT.MAMBA
        lines, slot_lines = [], []
        for d, c in self.dfs():
            f, m = c.component_data[F], c.component_data[M]
            keys = ",".join(map(str, c.key.token_ids))
            bad = any(v is not None and len(v) != len(c.key) for v in (f.value, f.host_value))
            lines.append(f"{d} {keys} v={int(f.value is not None)} h={int(f.host_value is not None)} "
                         f"m={int(m.value is not None)} mh={int(m.host_value is not None)} fl={f.lock_ref} "
                         f"ml={m.lock_ref} hl={f.host_lock_ref} hml={m.host_lock_ref}" + (" !len" if bad else ""))
            slot_lines.append(f"{d} {keys} " + " ".join(
                f"{k}={','.join(map(str, slots_of(v))) if v is not None else '-'}"
                for k, v in (("v", f.value), ("h", f.host_value), ("m", m.value), ("mh", m.host_value))))
        return lines, slot_lines
