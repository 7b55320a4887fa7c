"""HiMambaRadixCache: SGLang's hierarchical radix cache for hybrid Mamba models, re-expressed.

Vocabulary (see also node.py): the *device* tier (GPU, L1) and the *host* tier (CPU, L2) hold KV per token and one
Mamba state per node; *storage* (L3) is an external backend reached through the controller. A node is *evicted*
when it has no device KV, *backed up* when it has host KV, a *tombstone* when it has no device Mamba state.

The class is split by concern, one mixin a module, each mirroring the SGLang functions of the same names:
- ``tree.py``: match_prefix, insert (_insert_helper), splits, _add_new_node, _unevict_node.
- ``evict_device.py``: evict, _evict_device_leaf, _evict_to_host, _evict_regular, evict_mamba.
- ``evict_host.py``: evict_host, _evict_host_leaf, the tombstone cascade, _delete_tombstone_leaf,
  evict_mamba_host, and the stale-node guards of the described fix.
- ``hicache.py``: write_backup, _inc_hit_count, acks, host refs, load_back.
- ``storage.py``: L3 storage: write_backup_storage, the drain of the storage queues (storage acks).
- ``prefetch.py``: L3 prefetches: prefetch_from_storage, the host KV reserved at the hit count (0.5.17),
  check_prefetch_progress, _insert_helper_host.
- ``requests.py``: cache_finished_req / cache_unfinished_req.
This module holds the state, the leaf sets, the size counters and the locks.

Invariants the real code intends (and the stale-node race breaks; invariants.py checks them):
I0 every node referenced by a set, a list or an in-flight map is attached; I1 an evicted node's descendants are
evicted; I2 under write-through a backed-up node's parent is backed up; I3 an attached evicted node is backed up;
I4 no leaf is a tombstone.

The contract: every public method of the cache (here and in its mixins), of ``LRUList`` and of ``CacheController``
has a docstring saying what it mutates, what must be locked, and which SGLang function it mirrors, with its line
in SGLang at ``4a50cd78`` (#23696, the ``followup_fix`` preset); ``tests/test_contract.py`` holds every public
method to it. "Locked" means the node lock counts (``full_lock_ref``, ``mamba_lock_ref``) and host refs: SGLang's
cache runs on the scheduler's one thread, so no mutex is involved.

Methods here raise ``CacheAssertion`` (and whatever SGLang would raise) like the real code; ``simcache.driver``
turns that into an outcome at the operation boundary.
"""
from __future__ import annotations

from collections.abc import Hashable
from operator import attrgetter

from .config import CacheConfig
from .controller import CacheController
from .errors import ArgumentError, CacheAssertion
from .evict_device import DeviceEviction
from .evict_host import HostEviction
from .hicache import HiCache
from .keys import Key
from .lru import LRUList, OrderedLeafSet
from .node import TreeNode
from .pools import Pools
from .prefetch import Prefetch, PrefetchInFlight
from .requests import RequestCaching
from .storage import L3Storage
from .trace_hooks import SIMULATED_CODE, register, simulated
from .tree import TreeOps


class HiMambaRadixCache(TreeOps, DeviceEviction, HostEviction, HiCache, L3Storage, Prefetch, RequestCaching):
    def __init__(self, config: CacheConfig | None = None, recorder=None) -> None:
        self.config = config = _checked(config, recorder) or CacheConfig()
        self.flags = config.flags
        self.page_size = config.page_size
        self.recorder = recorder  # also picks the class: see ``_UntracedCache``
        self.pools = Pools.create(config.device_kv, config.device_mamba, config.host_kv, config.host_mamba,
                                  config.device)
        self.controller = CacheController(self.pools, config.policy, config.page_size, config.auto_complete)
        self.controller.evict_mamba_host = self.evict_mamba_host
        self.controller.evict_mamba = self.evict_mamba
        self.write_through_threshold = config.threshold
        self.load_back_threshold = config.load_back_threshold
        self.enable_storage = config.storage
        self.prefetch_threshold = config.prefetch_threshold
        self.ongoing_write_through: dict[int, TreeNode] = {}
        self.ongoing_load_back: dict[int, TreeNode] = {}
        self.ongoing_prefetch: dict[str, PrefetchInFlight] = {}
        self.ongoing_backup: dict[int, tuple[TreeNode, bool]] = {}
        self.prefetch_loaded_tokens_by_reqid: dict[str, int] = {}
        self.evictable_full_device_leaves = OrderedLeafSet("evictable_full_device_leaves")
        self.evictable_full_host_leaves = OrderedLeafSet("evictable_full_host_leaves")
        self.warnings: list[str] = []  # the stale guards' log lines
        self.detach_count = 0  # stale references can only appear in an operation that detached something
        # When a list (``ops_run`` sets it), every detach appends (node, what its slot held, node had children) and
        # every attach that displaces another node appends (displaced, None, None): the cheap stale check's input.
        self.cuts: list | None = None
        self.crashed = None  # set by the driver when a simulated assertion ends the run
        # Node ids and the logical clock follow SGLang's construction order (LRU sentinels are nodes there),
        # so ids in assertion messages and access-time order match the real code's.
        self._next_id, self.clock = 0, 3.0
        self._reserve(2)  # host-mamba LRU head and tail
        self.mamba_host_lru_list = LRUList("host_mamba")
        self.root_node = self._new_node(())
        self.root_node.value = []
        self.root_node.full_lock_ref = self.root_node.mamba_lock_ref = 1
        self._reserve(4)  # full and mamba LRU heads and tails
        self.full_lru_list = LRUList("full")
        self.mamba_lru_list = LRUList("mamba")
        self.full_evictable_size_ = self.full_protected_size_ = 0
        self.mamba_evictable_size_ = self.mamba_protected_size_ = 0

    @property
    def recorder(self):
        """The attached ``trace.Recorder`` (None: untraced). Setting it swaps the class between the traced and the
        unwrapped methods.

        Mutates: the cache's class and the controller's two bound hooks; locks: none.
        SGLang: none (simcache's observer hook)."""
        return self._recorder

    @recorder.setter
    def recorder(self, rec) -> None:
        """Attaching a recorder switches to the traced methods; detaching it, back to the unwrapped ones."""
        self._recorder = rec
        if type(self) in (HiMambaRadixCache, _UntracedCache):
            self.__class__ = HiMambaRadixCache if rec is not None else _UntracedCache
            cc = self.__dict__.get("controller")
            if cc is not None:  # its bound hooks must call this class's methods
                cc.evict_mamba_host, cc.evict_mamba = self.evict_mamba_host, self.evict_mamba

    # --- ids, clock, attachment ---
    def _reserve(self, n: int) -> None:
        self._next_id += n
        self.clock += n

    def tick(self) -> float:
        """The logical clock's next access time, advancing by one per call.

        Mutates: the clock; locks: none.
        SGLang: ``get_last_access_time``, mamba_radix_cache.py:158 (a class-level counter there, per cache here)."""
        t = self.clock
        self.clock += 1.0
        return t

    def _new_node(self, key: Key) -> TreeNode:
        node = TreeNode(self._next_id, self.tick(), key)
        self._next_id += 1
        return node

    def child_key(self, key: Key) -> Hashable:
        """The slot ``key`` occupies in its parent's ``children``: its first token, or its first page as a tuple
        (``keys.child_key``, inline: a hot path).

        Mutates: nothing; locks: none.
        SGLang: ``RadixKey.child_key``, radix_cache.py:183."""
        ps = self.page_size
        return key[0] if ps == 1 else tuple(key[:ps])

    def _attach(self, parent: TreeNode, node: TreeNode, key: Key | None = None) -> None:
        slot = self.child_key(node.key if key is None else key)
        replaced = parent.children.get(slot)
        parent.children[slot] = node
        if replaced is not None and replaced is not node and self.cuts is not None:
            self.cuts.append((replaced, None, None))
        if self.recorder is not None:
            self.recorder.event("attach", node=node, parent=parent, slot=slot, replaced=replaced)

    def _detach(self, parent: TreeNode, node: TreeNode) -> TreeNode | None:
        """Pop ``node``'s slot from ``parent`` (whatever it holds now) and return what was there."""
        slot = self.child_key(node.key)
        popped = parent.children.pop(slot, None)
        self.detach_count += 1
        if self.cuts is not None:
            self.cuts.append((node, popped, bool(node.children)))
        if self.recorder is not None:
            self.recorder.event("detach", node=node, parent=parent, slot=slot, popped=popped)
        return popped

    def _pop_from_parent(self, node: TreeNode) -> TreeNode:
        """Pop ``node``'s slot from its parent and assert it held ``node`` (SGLang's check, same message)."""
        parent = node.parent
        if self._detach(parent, node) is not node:
            raise CacheAssertion(f"parent does not have child key, {self.child_key(node.key)}")
        return parent

    def _free_host_mamba(self, node: TreeNode) -> None:
        if node.mamba_host_value is not None:
            if self.mamba_host_lru_list.in_list(node):
                self.mamba_host_lru_list.remove_node(node)
            self.pools.host_mamba.free(node.mamba_host_value)
            node.mamba_host_value = None

    # --- leaf sets (reference b.4) ---
    def _discard_from_leaf_sets(self, node: TreeNode) -> None:
        self.evictable_full_device_leaves.discard(node)
        self.evictable_full_host_leaves.discard(node)

    def _update_leaf_status(self, node: TreeNode) -> None:
        self._update_full_device_leaf_status(node)
        self._update_full_host_leaf_status(node)

    def _update_full_device_leaf_status(self, node: TreeNode) -> None:
        if node is self.root_node or node.value is None or node.full_lock_ref > 0:
            self.evictable_full_device_leaves.discard(node)
            return
        for child in node.children.values():
            if child.value is not None:
                self.evictable_full_device_leaves.discard(node)
                return
        self.evictable_full_device_leaves.add(node)

    def _update_full_host_leaf_status(self, node: TreeNode) -> None:
        new_predicate = self.flags.host_leaf_predicate == "no_children"
        if (node.value is not None or node.host_value is None or node is self.root_node
                or node.host_ref_counter > 0 or node.host_mamba_ref_counter > 0
                or (new_predicate and len(node.children) > 0)):
            self.evictable_full_host_leaves.discard(node)
            return
        if not new_predicate:  # host_leaf_predicate == "loop_old": only evicted+backed-up children disqualify
            for child in node.children.values():
                if child.value is None and child.host_value is not None:
                    self.evictable_full_host_leaves.discard(node)
                    return
        self.evictable_full_host_leaves.add(node)

    # --- locks (reference c.5) ---
    @simulated
    def inc_lock_ref(self, node: TreeNode) -> int:
        """Lock ``node`` and its device ancestors against eviction; returns minus the tokens moved from evictable to
        protected.

        Mutates: ``full_lock_ref`` on each device node up to the root (and ``mamba_lock_ref`` of ``node``), the
        evictable/protected size counters, the device leaf set. Locks: takes one full lock per device node on the
        path; every caller pairs it with ``dec_lock_ref``.
        SGLang: ``HiMambaRadixCache.inc_lock_ref``, hi_mamba_radix_cache.py:1154."""
        delta = 0
        if node.mamba_value is not None:
            if node.mamba_lock_ref == 0:
                self.mamba_evictable_size_ -= len(node.mamba_value)
                self.mamba_protected_size_ += len(node.mamba_value)
            node.mamba_lock_ref += 1
        while node is not self.root_node:
            if node.value is None:
                node = node.parent
                continue
            if not node.full_lock_ref >= 0:
                raise CacheAssertion(f"inc_lock_ref on node with node.full_lock_ref={node.full_lock_ref}, "
                                     f"node.id={node.id}")
            if node.full_lock_ref == 0:
                self.full_evictable_size_ -= len(node.value)
                self.full_protected_size_ += len(node.value)
                delta -= len(node.value)
                self.evictable_full_device_leaves.discard(node)
            node.full_lock_ref += 1
            self._lock_event(node, +1)
            node = node.parent
        return delta

    @simulated
    def dec_lock_ref(self, node: TreeNode) -> int:
        """Release one lock taken by ``inc_lock_ref(node)``; returns the tokens made evictable again.

        Mutates: the same fields as ``inc_lock_ref``, back; a device node whose last lock goes is re-checked as a
        leaf. Locks: ``node``'s path must hold a lock (SGLang's assert otherwise).
        SGLang: ``HiMambaRadixCache.dec_lock_ref``, hi_mamba_radix_cache.py:1182."""
        delta = 0
        if node.mamba_value is not None and node.mamba_lock_ref > 0:
            if node.mamba_lock_ref == 1:
                self.mamba_evictable_size_ += len(node.mamba_value)
                self.mamba_protected_size_ -= len(node.mamba_value)
            node.mamba_lock_ref -= 1
        while node is not self.root_node:
            if node.value is None:
                node = node.parent
                continue
            if not node.full_lock_ref > 0:
                raise CacheAssertion(f"dec_lock_ref on node with node.full_lock_ref={node.full_lock_ref}, "
                                     f"node.id={node.id}")
            if node.full_lock_ref == 1:
                self.full_evictable_size_ += len(node.value)
                self.full_protected_size_ -= len(node.value)
                delta += len(node.value)
            node.full_lock_ref -= 1
            self._lock_event(node, -1)
            if node.full_lock_ref == 0:
                self._update_full_device_leaf_status(node)
            node = node.parent
        return delta

    def _lock_event(self, node: TreeNode, change: int) -> None:
        if self.recorder is not None:
            self.recorder.event("lock", node=node, change=change, full_lock_ref=node.full_lock_ref)

    # --- views used by tests, invariants and renderers ---
    def sizes(self) -> dict[str, int]:
        """The four size counters: evictable and protected device tokens, evictable and protected device Mamba states.

        Mutates: nothing; locks: none.
        SGLang: ``full_evictable_size`` .. ``mamba_protected_size``, mamba_radix_cache.py:895-909."""
        return dict(full_evictable=self.full_evictable_size_, full_protected=self.full_protected_size_,
                    mamba_evictable=self.mamba_evictable_size_, mamba_protected=self.mamba_protected_size_)


for _m in (HiMambaRadixCache._update_leaf_status, HiMambaRadixCache._update_full_device_leaf_status,
           HiMambaRadixCache._update_full_host_leaf_status, HiMambaRadixCache._discard_from_leaf_sets,
           HiMambaRadixCache._has_fresh_parent_link, TreeNode.release_host, TreeNode.release_host_mamba,
           LRUList.insert_mru, LRUList.remove_node,
           LRUList.reset_node_mru, LRUList.reset_node_and_parents_mru, LRUList.get_prev_no_lock):
    register(_m)


class _UntracedCache(HiMambaRadixCache):
    """The same cache with every ``@simulated`` method unwrapped (the recorder hook is gone, not just idle): the
    class of a cache without a recorder. Names in call stacks and ``raised_in`` come from the wrapped functions'
    code objects, so they are the same in both classes."""

    # read at every hook site (``if self.recorder is not None``): a C getter, no Python call (always None here)
    recorder = property(attrgetter("_recorder"), HiMambaRadixCache.recorder.fset)


def _unwrap_simulated() -> None:
    for klass in reversed(HiMambaRadixCache.__mro__):
        for name, attr in vars(klass).items():
            raw = getattr(attr, "__wrapped__", None)
            if raw is not None and getattr(raw, "__code__", None) in SIMULATED_CODE:
                setattr(_UntracedCache, name, raw)


_unwrap_simulated()
_UntracedCache.__name__ = "HiMambaRadixCache"


def _checked(config, recorder) -> CacheConfig | None:
    """``config`` when the arguments fit (here, at the module's end, so the code pane's line numbers stay put)."""
    if config is not None and not isinstance(config, CacheConfig) or \
            recorder is not None and not callable(getattr(recorder, "enter", None)):
        raise ArgumentError(f"HiMambaRadixCache takes a CacheConfig (and optionally a Recorder), not "
                            f"{type(config if not isinstance(config, CacheConfig) else recorder).__name__}; e.g. "
                            f"HiMambaRadixCache(CacheConfig(device_kv=16))")
    return config
