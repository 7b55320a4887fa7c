"""SGLang's real HiMambaRadixCache built over the fakes, and read-only views of its state (own code).

Construction: ``object.__new__`` and the attributes ``HiMambaRadixCache.__init__`` sets, with the pools and the cache
controller replaced by the fakes, then the real ``MambaRadixCache.__init__`` (which runs the real ``reset``). The
views (canonical tree, slot accounting, stale references, counters) have ``simcache.state``'s formats and the
field names of ``run_ops``, so a real result and a model's are diffed field by field; they change nothing.
"""
from __future__ import annotations

import collections
import json
import threading
from array import array
from types import SimpleNamespace

from numpy import float64

from .fake_controller import FakeCacheController
from .fakes import FakeDeviceKVAllocator, FakeMambaPool, FreeListPool, Ledger, ReqToTokenPool, slots_of
from .loader import Loaded
from .readout import POOLS, Readout

__all__ = ["MC", "POOLS", "Env"]
MC = "sglang.srt.mem_cache"


class Env(Readout):
    """One fresh real cache for the checked settings ``cfg`` (``config.check_settings``); ``max_ctx``: the longest
    request. Build it inside ``loaded.active()``."""

    def __init__(self, loaded: Loaded, cfg: dict, max_ctx: int) -> None:
        self.loaded, self.cfg = loaded, cfg
        hm, mrc = loaded.module(f"{MC}.hi_mamba_radix_cache"), loaded.module(f"{MC}.mamba_radix_cache")
        self.bpc = loaded.module(f"{MC}.base_prefix_cache")
        self.RadixKey, self.TreeNode = loaded.module(f"{MC}.radix_cache").RadixKey, mrc.TreeNode
        self.pool_name = loaded.module(f"{MC}.hicache_storage").PoolName.MAMBA  # the Mamba pool's name
        mrc.TreeNode.last_access_time_counter_float = float64(1.0)  # the real LRU clock, reset: deterministic
        ps, storage = cfg["page_size"], cfg["storage"]
        self.page_size, self.extra_buffer = ps, ps > 1
        self.ledger = Ledger(loaded.real_files)
        self.alloc = FakeDeviceKVAllocator(cfg["device_kv"], self.ledger)
        self.rtp = ReqToTokenPool(FakeMambaPool(cfg["device_mamba"], self.ledger), cfg["device_mamba"] + 1, max_ctx,
                                  self.extra_buffer)
        self.host_kv = FreeListPool("host_kv", cfg["host_kv"], self.ledger)
        self.host_mamba = FreeListPool("host_mamba", cfg["host_mamba"], self.ledger)
        self.cc = FakeCacheController(self.alloc, self.host_kv, self.rtp.mamba_pool, self.host_mamba, cfg["policy"],
                                      page_size=ps, prefetch_threshold=cfg["prefetch_threshold"],
                                      auto_complete=cfg.get("auto_complete", True))
        t = self.tree = object.__new__(loaded.cache_class)
        for k, v in dict(_enable_metrics_flag=False, page_size=ps, hybrid_kv_cache=None, kvcache=None,
                         full_kv_pool_host=self.host_kv, mamba_pool_host=self.host_mamba, transfer_layer_num=1,
                         host_pool_group=None, tp_group=None, tp_world_size=1, enable_storage=storage,
                         enable_storage_metrics=False, extra_metric_labels=None, metrics_collector=None).items():
            setattr(t, k, v)
        parsed = t._parse_storage_backend_extra_config(json.dumps({"prefetch_threshold": cfg["prefetch_threshold"]}))
        if len(parsed) == 5:  # two timeout floats (the older commits), or one timeout config object
            (_, pth, ptb, ptk, ppk) = parsed
            timeout = dict(prefetch_timeout_base=ptb, prefetch_timeout_per_ki_token=ptk)
        else:
            (_, pth, ptc, ppk) = parsed
            timeout = dict(prefetch_timeout_config=ptc)
        t.is_prefetch_timeout = t._prefetch_timeout_check_linear_func
        t.prefetch_stop_policy = cfg["prefetch_stop_policy"]
        t.load_cache_event = threading.Event()
        t.cache_controller = self.cc
        t._apply_storage_runtime_config(
            storage_backend="fake" if storage else None, prefetch_threshold=pth, hicache_storage_pass_prefix_keys=ppk,
            enable_storage=storage, enable_storage_metrics=False, extra_metric_labels=None, **timeout)
        t.ongoing_write_through, t.ongoing_load_back, t.ongoing_prefetch, t.ongoing_backup = {}, {}, {}, {}
        t.prefetch_loaded_tokens_by_reqid = {}
        t.write_through_threshold, t.load_back_threshold = cfg["write_through_threshold"], cfg["load_back_threshold"]
        t.evictable_full_device_leaves, t.evictable_full_host_leaves = set(), set()
        t.mamba_host_lru_list = hm.HostLRUList()
        self.cc.bind_tree(t, self.pool_name)
        mrc.MambaRadixCache.__init__(t, SimpleNamespace(
            req_to_token_pool=self.rtp, token_to_kv_pool_allocator=self.alloc, page_size=ps, disable=False,
            enable_mamba_extra_buffer=self.extra_buffer, enable_metrics=False, enable_kv_cache_events=False,
            enable_mamba_extra_buffer_lazy=False))
        self.live_reqs: collections.OrderedDict = collections.OrderedDict()
        # token containers: from 7f67965b on, RadixKey.match needs both keys to hold the same type (array('q'))
        self.seq = (lambda toks: array("q", toks)) if hasattr(self.RadixKey, "raw_token_ids") else list

    # --- reading the tree (never changing it; ``Readout`` does the rest) ---
    def _root(self):
        return self.tree.root_node

    def _slots(self, n) -> tuple:
        return n.value, n.mamba_value, n.host_value, n.mamba_host_value

    def _counters(self) -> dict:
        t = self.tree
        return dict(full_evictable=int(t.full_evictable_size_), full_protected=int(t.full_protected_size_),
                    mamba_evictable=int(t.mamba_evictable_size_), mamba_protected=int(t.mamba_protected_size_))

    def stale_refs(self) -> list[str]:
        """``keys@holder`` for every detached node still held by a leaf set, an LRU list or an ``ongoing_*`` map."""
        t, att = self.tree, self.attached()
        holders = dict(evictable_full_device_leaves=t.evictable_full_device_leaves,
                       evictable_full_host_leaves=t.evictable_full_host_leaves,
                       full_lru_list=t.full_lru_list.cache.values(), mamba_lru_list=t.mamba_lru_list.cache.values(),
                       mamba_host_lru_list=t.mamba_host_lru_list.cache.values(),
                       ongoing_write_through=t.ongoing_write_through.values(),
                       ongoing_load_back=t.ongoing_load_back.values(),
                       ongoing_backup=[v[0] for v in t.ongoing_backup.values()],
                       ongoing_prefetch=[v[0] for v in t.ongoing_prefetch.values()])
        return self.stale(holders, att)

    def canonical_tree(self) -> tuple[list[str], list[str]]:
        lines, slot_lines = [], []
        for d, c in self.dfs():
            keys = ",".join(map(str, c.key.token_ids))
            bad = any(v is not None and len(v) != len(c.key) for v in (c.value, c.host_value))
            lines.append(f"{d} {keys} v={int(c.value is not None)} h={int(c.host_value is not None)} "
                         f"m={int(c.mamba_value is not None)} mh={int(c.mamba_host_value is not None)} "
                         f"fl={c.full_lock_ref} ml={c.mamba_lock_ref} hr={c.host_ref_counter} "
                         f"hmr={c.host_mamba_ref_counter}" + (" !len" if bad else ""))
            slot_lines.append(f"{d} {keys} " + " ".join(
                f"{k}={','.join(map(str, slots_of(v))) if v is not None else '-'}"
                for k, v in (("v", c.value), ("h", c.host_value), ("m", c.mamba_value), ("mh", c.mamba_host_value))))
        return lines, slot_lines
