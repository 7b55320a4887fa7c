"""``UnifiedRadixCache``: SGLang's cache for hybrid Mamba models with HiCache since #27759, re-expressed.

Vocabulary (see ``node.py`` and ``components.py``): one tree of nodes carrying per-component data (Full KV, Mamba
state), two leaf sets (``evictable_device_leaves``, ``evictable_host_leaves``) from which the Full component evicts
by access time, and two LRU lists of Mamba states (``mamba_lru_list`` on device, ``mamba_host_lru_list`` on host).
The tree walks are ``tree.py``, eviction ``evict.py``, the host tier ``hicache.py``, prefetches ``storage.py``;
this module holds the state and ``cache_finished_req``.

The presets (``versions.py``) are releases: ``unified_0_5_16`` (the race of issue #39 is reachable) and
``unified_0_5_17`` (#31902 drops a prefetched refill under a node that is not backed up, under write-through;
a prefetch whose Mamba state did not fully arrive is discarded whole). Each behaviour is a flag checked where the
release changed the code.

What the model leaves out, and why: the SWA component, sessions and streaming sessions, the lazy Mamba extra
buffer (page sizes above 1 use the plain one, tracking the last whole page), LFU and priorities (the LRU policy
only), KV events,
metrics, tensor and pipeline parallelism, ``cache_unfinished_req`` (no operation calls it), the int8 checkpoint pool.

Methods raise ``CacheAssertion`` where SGLang asserts; the driver turns it into an outcome.
"""
from __future__ import annotations

from ..config import CacheConfig
from ..errors import CacheAssertion
from ..pools import Pools
from ..requests import Request
from ..trace_hooks import LeafSet, simulated
from .components import FULL, MAMBA, FullComponent, Livelock, MambaComponent
from .evict import Eviction
from .hicache import HostTier, UnifiedController
from .lru import ULRU
from .node import Clock, UNode
from .storage import Storage
from .tree import TreeOps
from .versions import UnifiedFlags


def watchdog(device_kv: int, host_kv: int) -> int:
    """Host KV size queries one operation may make before it counts as looping forever. Each backup attempt makes
    one, and an operation backs up each node at most a few times (its insert path with parents, its evictions), a
    node holding at least one slot: four per slot is a safe bound. The real harness stops at the same query."""
    return max(200, 4 * (device_kv + host_kv))


class UnifiedRadixCache(TreeOps, Eviction, HostTier, Storage):
    family = "unified"

    def __init__(self, config: CacheConfig, flags: UnifiedFlags, recorder=None) -> None:
        if config.page_size != 1 and not config.extra_buffer:
            raise CacheAssertion(f"MambaComponent requires page_size=1 when mamba_extra_buffer is disabled, got "
                                 f"{config.page_size}")
        self.config, self.flags, self.recorder = config, flags, recorder
        self.page_size = config.page_size
        self.write_policy = config.policy
        self.pools = Pools.create(config.device_kv, config.device_mamba, config.host_kv, config.host_mamba,
                                  config.device)
        self.host_queries = 0  # host KV size queries in the current operation (``host_available``)
        self.watchdog = watchdog(config.device_kv, config.host_kv)
        self.controller = UnifiedController(self.pools, config.policy, config.page_size, config.auto_complete)
        self.controller.evict_mamba_host = self.evict_mamba_host
        self.controller.evict_mamba = self.evict_mamba
        self.write_through_threshold = config.threshold
        self.load_back_threshold = config.load_back_threshold
        self.enable_storage = config.storage
        self.prefetch_threshold = config.prefetch_threshold
        self.full, self.mamba = FullComponent(self), MambaComponent(self)
        self.components = (self.full, self.mamba)
        self.clock = Clock()
        self.next_id = 0
        self.arena: set[int] | None = set() if flags.tree_core_api else None
        if flags.tree_core_resets_twice:
            for _ in range(9):  # the first root and its eight LRU sentinels, replaced by the reset
                self._new_node()
        self.root_node = self._new_node()
        self.root_node.value, self.root_node.hash_value, self.root_node.is_root = [], [], True
        self.root_node.full_lock_ref = self.root_node.mamba_lock_ref = 1
        # SGLang's LRU lists have sentinel nodes: four lists of two (device and host, Full and Mamba), made after
        # the root; they take ids and clock ticks, and the model keeps both in step
        for _ in range(8):
            self._new_node()
        self.evictable = {FULL: 0, MAMBA: 0}
        self.protected = {FULL: 0, MAMBA: 0}
        self.mamba_lru_list = ULRU("mamba_lru_list", lambda n: n.mamba_lock_ref)
        self.mamba_host_lru_list = ULRU("mamba_host_lru_list", lambda n: n.host_mamba_ref_counter)
        self.evictable_device_leaves = LeafSet("evictable_device_leaves")
        self.evictable_host_leaves = LeafSet("evictable_host_leaves")
        self.ongoing_write_through: dict[int, tuple] = {}
        self.ongoing_load_back: dict[int, tuple] = {}
        self.ongoing_prefetch: dict = {}
        self.ongoing_backup: dict[int, tuple] = {}
        self.last_lock_delta = 0
        self.detach_count = 0
        self.cuts: list | None = None
        self.crashed = None

    def host_available(self) -> int:
        """The host KV pool's free size, counting the query: every backup attempt makes one, so an operation that
        retries a failing backup forever (0.5.16) makes unboundedly many. Past ``watchdog`` in one operation it
        stops where ``simcache.real.unified`` stops the real code, so both leave the same state behind."""
        self.host_queries += 1
        if self.host_queries > self.watchdog:
            raise Livelock("the operation retries a failing backup forever")
        return self.pools.host_kv.available_size()

    @property
    def flag_values(self) -> dict:
        return self.flags.as_dict()

    # --- requests ---
    @simulated
    def cache_finished_req(self, req: Request) -> None:
        """The request's KV and Mamba state go to the tree. With the Mamba extra buffer (page size > 1) the state
        cached is the request's track buffer, taken at ``mamba_last_track_seqlen`` tokens: the KV past that point is
        freed and not inserted."""
        tokens, kv = list(req.tokens), list(req.kv[: len(req.tokens)])
        if self.config.extra_buffer:
            cache_len = req.mamba_last_track_seqlen or 0
            mamba_value = [req.track_buffer]
        else:
            cache_len = len(tokens)
            mamba_value = [req.mamba_pool_idx]
        tail = []
        if cache_len < len(tokens):
            tail = kv[max(cache_len, req.cache_protected_len):]
            if not self.flags.tail_free_after_insert:
                self.pools.device_kv.free(tail)
            tokens, kv = tokens[:cache_len], kv[:cache_len]
        result = self.insert(tokens, kv, req.cache_protected_len, mamba_value)
        self.pools.device_kv.free(kv[len(tokens) // self.page_size * self.page_size:])
        if tail and self.flags.tail_free_after_insert:
            self.pools.device_kv.free(tail)
        self.dec_lock_ref(req.last_node)
        self.cleanup_after_caching_req(req, result)

    @simulated
    def cleanup_after_caching_req(self, req: Request, result) -> None:
        """The Mamba component's cleanup: the request's slots are freed, but not one the tree now holds."""
        inserted = result is not None and not result.mamba_exist
        if self.config.extra_buffer:
            if req.mamba_pool_idx is None:
                raise CacheAssertion("double free? mamba_index is None")
            self.pools.device_mamba.free([req.mamba_pool_idx])
            req.mamba_pool_idx = None
            if not inserted:
                self.pools.device_mamba.free([req.track_buffer])
            req.track_buffer = None
            return
        if not inserted:
            if req.mamba_pool_idx is None:
                raise CacheAssertion("double free? mamba_index is None")
            self.pools.device_mamba.free([req.mamba_pool_idx])
            req.mamba_pool_idx = None

    # --- what the views and checks read ---
    def attached(self) -> set[int]:
        seen, todo = {id(self.root_node)}, [self.root_node]
        while todo:
            n = todo.pop()
            for k, c in n.children.items():
                if c.parent is n and c.key and self.child_key(c.key) == k and id(c) not in seen:
                    seen.add(id(c))
                    todo.append(c)
        return seen

    def holders(self) -> dict[str, list[UNode]]:
        """Every structure that refers to nodes, by SGLang's name."""
        return dict(
            evictable_device_leaves=list(self.evictable_device_leaves),
            evictable_host_leaves=list(self.evictable_host_leaves),
            mamba_lru_list=self.mamba_lru_list.nodes(), mamba_host_lru_list=self.mamba_host_lru_list.nodes(),
            ongoing_write_through=[v[0] for v in self.ongoing_write_through.values()],
            ongoing_load_back=[v[0] for v in self.ongoing_load_back.values()],
            ongoing_backup=[v[0] for v in self.ongoing_backup.values()],
            ongoing_prefetch=[v.last_host_node for v in self.ongoing_prefetch.values()])
