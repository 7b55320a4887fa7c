"""Driving SGLang's own ``UnifiedRadixCache`` through its public methods, as the scheduler does, over the fakes.

Vocabulary
- ``RealUnified`` builds the cache of a loaded target the way SGLang's factory does (the constructor, then the
  real ``init_hicache``, whose pool assembler is our fake), with a full and a Mamba component, HiCache, the
  chosen write policy, and L3 storage on.
- Its methods speak simcache's operation vocabulary: ``request`` (start then finish), ``evict``, ``evict_host``,
  ``events``, ``write_ack``, ``l3_ack``, ``prefetch``, ``prefetch_hit`` (the L3 hit count arrives: from 0.5.16 the
  cache reserves host KV then), ``prefetch_done``.
- A *handle* is what the cache's API takes for a node: the node itself in the ``components`` layout, its id in the
  ``tree_core`` layout. ``node_of`` turns one into the node object the views read.
- ``Outcome`` is what a step did: ``ok``, or the exception with its type, text and the chain of SGLang frames.
- ``snapshot`` reads the tree, the leaf sets and the pools as plain text lines; a leaf-set member that is no longer
  reachable from the root is marked ``(DETACHED)``: that is a stale node.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import traceback
from array import array
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from ...unified.cache import watchdog
from ..fakes import FakeMambaPool, FreeListPool, Ledger, slots_of
from ..loader import Loaded
from . import fakes, stubs
from .env import WatchedHostPool


def _active(method):
    """Run a verb with the load's ``sglang`` modules in place (the real files import lazily inside methods)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self.loaded.active():
            return method(self, *args, **kwargs)

    return run


@dataclass(frozen=True)
class Frame:
    file: str  # relative to the root, e.g. sglang/srt/mem_cache/unified_radix_cache.py
    line: int
    function: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.function}: {self.text}"


@dataclass(frozen=True)
class Outcome:
    step: str
    error: str | None = None  # "AssertionError", "KeyError", ...
    message: str = ""
    chain: tuple[Frame, ...] = ()  # outermost first, SGLang's frames only
    returned: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def text(self) -> str:
        if self.ok:
            return f"{self.step}: ok{' -> ' + self.returned if self.returned else ''}"
        return f"{self.step}: {self.error}: {self.message!r}"


@dataclass
class Sizes:
    device_kv: int = 16
    device_mamba: int = 8
    host_kv: int = 4
    host_mamba: int = 4
    max_reqs: int = 8
    max_context: int = 64


@dataclass
class RealUnified:
    """One fresh real cache of ``loaded`` (a ``simcache.real.Loaded`` of a unified target)."""

    loaded: Loaded
    write_policy: str = "write_through"
    page_size: int = 1
    sizes: Sizes = field(default_factory=Sizes)
    prefetch_threshold: int = 1
    storage: bool = True  # L3 storage on

    def __post_init__(self) -> None:
        with self.loaded.active():
            self._build()

    def _build(self) -> None:
        m, mc = self.loaded, "sglang.srt.mem_cache"
        self.target = m.target
        ct = m.module(f"{mc}.unified_cache.component_type" if self.target.is_tree_core
                      else self.target.base_module)
        self.CT = ct.ComponentType
        self.B = m.module(f"{mc}.base_prefix_cache")
        self.RadixKey = m.module(f"{mc}.radix_cache").RadixKey
        self.PoolName = m.module(f"{mc}.hicache_storage").PoolName
        self.ledger = Ledger(m.real_files)
        s = self.sizes
        self.device = fakes.DeviceKVAllocator(s.device_kv, self.ledger)
        self.mamba = FakeMambaPool(s.device_mamba, self.ledger)
        self.host_kv = WatchedHostPool("host_kv", s.host_kv, self.ledger, self.page_size)
        self.host_kv.limit = watchdog(s.device_kv, s.host_kv)
        self.host_mamba = FreeListPool("host_mamba", s.host_mamba, self.ledger)
        self.req_pool = fakes.HybridReqToTokenPool(self.mamba, s.max_reqs, s.max_context, False)
        self.controller = fakes.UnifiedController(
            self.device, self.host_kv, self.mamba, self.host_mamba, self.write_policy, page_size=self.page_size,
            prefetch_threshold=self.prefetch_threshold, auto_complete=True)
        CacheInitParams = m.module(f"{mc}.cache_init_params").CacheInitParams
        fields = {f.name for f in dataclasses.fields(CacheInitParams)}
        extra = {"tree_core_backend": "python"} if "tree_core_backend" in fields else {}  # 0.5.23: no Rust core
        params = CacheInitParams(
            disable=False, req_to_token_pool=self.req_pool, token_to_kv_pool_allocator=self.device,
            page_size=self.page_size, eviction_policy="lru", tree_components=(self.CT.FULL, self.CT.MAMBA), **extra)
        server_args = SimpleNamespace(
            hicache_io_backend="kernel", hicache_mem_layout="layer_first", extra_metric_labels=None,
            hicache_storage_backend="fake" if self.storage else None, hicache_storage_backend_extra_config=None,
            hicache_write_policy=self.write_policy, hicache_storage_prefetch_policy="best_effort",
            served_model_name="fake")
        self.controller.enable_storage = self.storage
        self.cache = m.cache_class(params)
        stubs.CURRENT.update(attach=fakes.make_assembler(self.controller, self.CT),
                             prefetch_threshold=self.prefetch_threshold)
        self.cache.init_hicache(server_args, params)
        mamba_ct = self.CT.MAMBA
        self.controller.bind_unified(self.PoolName.MAMBA,
                                     evict_mamba_host=lambda n: self.cache.evict_host(n, mamba_ct),
                                     evict_mamba=lambda n: self.cache.evict(self.B.EvictParams(mamba_num=n)))
        assert self.cache.enable_storage == self.storage, "L3 storage did not come on as asked"
        self._finish_kw = "kv_len_to_handle" in inspect.signature(self.cache.cache_finished_req).parameters
        self._prefetch_hashes: dict[str, list[str]] = {}
        self.outcomes: list[Outcome] = []

    # ---- nodes and handles ----
    @property
    def core(self):
        """The object that owns the tree and the leaf sets."""
        return self.cache.tree_core if self.target.is_tree_core else self.cache

    @property
    def root(self):
        return self.core.root_node

    def handle(self, node):
        return node.id if self.target.is_tree_core else node

    def node_of(self, handle):
        if handle is None or not self.target.is_tree_core:
            return handle
        return self.core.node_by_id(handle)

    # ---- operations ----
    def _req(self, rid: str, tokens: list[int]):
        match = self.cache.match_prefix(self.B.MatchPrefixParams(key=self.RadixKey(array("q", tokens))))
        prefix = torch.as_tensor(match.device_indices, dtype=torch.int64)
        row = self.req_pool.alloc_req_slot()
        rest = self.device.alloc(len(tokens) - len(prefix))
        if rest is None:
            raise RuntimeError(f"{rid}: no device KV for {len(tokens) - len(prefix)} tokens")
        self.req_pool.req_to_token[row, :len(prefix)] = prefix
        self.req_pool.req_to_token[row, len(prefix):len(tokens)] = rest
        last = match.last_device_node
        self.cache.inc_lock_ref(last)
        req = SimpleNamespace(
            rid=rid, session=None, origin_input_ids=array("q", tokens), output_ids=array("q"), req_pool_idx=row,
            cache_protected_len=len(prefix), prefix_indices=prefix, extra_key=None, priority=0, last_node=last,
            mamba_pool_idx=self.mamba.alloc(1)[0], mamba_last_track_seqlen=None, mamba_ping_pong_track_buffer=None,
            mamba_next_track_idx=None, swa_prefix_lock_released=False, finished_reason=None,
            swa_uuid_for_lock=None, skip_lock_node_ids={}, fill_len=len(tokens), cache_salt=None,
            extend_range=SimpleNamespace(end=len(tokens)))
        req.pop_committed_kv_cache = lambda: len(tokens)
        return req

    @_active
    def request(self, rid: str, tokens: list[int]) -> None:
        """A request arrives, matches, runs and finishes: its tokens are cached (``cache_finished_req``)."""
        req = self._req(rid, tokens)
        if self._finish_kw:
            self.cache.cache_finished_req(req, kv_len_to_handle=len(tokens))
        else:
            self.cache.cache_finished_req(req)
        self.req_pool.free_req_slot(req.req_pool_idx)

    @_active
    def evict(self, n: int):
        return self.cache.evict(self.B.EvictParams(num_tokens=n))

    @_active
    def evict_mamba(self, n: int):
        """``evict(EvictParams(mamba_num=n))``: what the scheduler asks when the device Mamba pool runs short."""
        return self.cache.evict(self.B.EvictParams(mamba_num=n))

    @_active
    def evict_host(self, n: int):
        return self.cache.evict_host(n)

    @_active
    def events(self) -> None:
        """What the scheduler polls each round: write and load acks, then the storage queues."""
        self.cache.writing_check()
        self.cache.loading_check()
        self.cache.drain_storage_control_queues()

    @_active
    def write_ack(self, n: int = 1) -> int:
        got = self.controller.complete_writes(n)
        self.events()
        return got

    @_active
    def l3_ack(self) -> int:
        cc = self.controller
        if not cc.pending_backups:
            return 0
        cc.complete_backup(min(cc.pending_backups))
        self.events()
        return 1

    @_active
    def prefetch(self, rid: str, tokens: list[int]) -> bool:
        """The scheduler's prefetch: from the last host-matched node, if it is backed up or the root."""
        match = self.cache.match_prefix(self.B.MatchPrefixParams(key=self.RadixKey(array("q", tokens))))
        anchor = match.last_host_node
        node = self.node_of(anchor)
        if not (node is self.root or node.backuped):
            return False
        done = len(match.device_indices) + getattr(match, "host_hit_length", 0)
        last_hash = node.get_last_hash_value() if hasattr(node, "get_last_hash_value") else None
        self.cache.prefetch_from_storage(rid, anchor, array("q", tokens[done:]), last_hash)
        return rid in self.cache.ongoing_prefetch

    def _operation(self, rid: str):
        entry = self.cache.ongoing_prefetch[rid]
        op = getattr(entry, "operation", None)
        return op if op is not None else entry[3]  # before 0.5.14 a plain tuple (anchor, key, host, op, ...)

    def _hash(self, rid: str):
        return lambda i: f"{rid}-p{i}"

    @_active
    def prefetch_hit(self, rid: str, n: int) -> list[int] | None:
        """The L3 hit count (``n`` tokens) of ``rid``'s prefetch arrives; from 0.5.16 the drain reserves host KV."""
        op = self._operation(rid)
        self.controller.deliver_hit(op, n, self._hash(rid))
        self.cache.drain_storage_control_queues()
        return None if op.host_indices is None else slots_of(op.host_indices)

    @_active
    def prefetch_done(self, rid: str, n: int, mamba_hit: bool = False) -> bool:
        """``rid``'s storage I/O finished with ``n`` tokens; the cache inserts what arrived."""
        op = self._operation(rid)
        self.controller.finish_prefetch(op, n, mamba_hit, self._hash(rid), self.PoolName.MAMBA)
        done = self.cache.check_prefetch_progress(rid)
        self.cache.drain_storage_control_queues()
        return done

    # ---- running a step and reading the state ----
    def run(self, label: str, fn, *args) -> Outcome:
        """Run one step; an exception of SGLang's code is the outcome, not an error of ours."""
        self.host_kv.queries = 0
        try:
            with self.loaded.active():
                got = fn(*args)
        except Exception as e:  # noqa: BLE001 -- the real cache's exceptions are results
            out = Outcome(label, type(e).__name__, str(e), self.sglang_frames(e))
        else:
            out = Outcome(label, returned="" if got is None else str(got))
        self.outcomes.append(out)
        return out

    def sglang_frames(self, e: BaseException) -> tuple[Frame, ...]:
        root, real = self.loaded.source.root, self.loaded.real_files
        return tuple(Frame(os.path.relpath(f.filename, root), f.lineno, f.name, (f.line or "").strip())
                     for f in traceback.extract_tb(e.__traceback__) if f.filename in real)

    def attached(self) -> set[int]:
        seen, todo = {id(self.root)}, [self.root]
        while todo:
            n = todo.pop()
            for c in n.children.values():
                if c.parent is n and id(c) not in seen:
                    seen.add(id(c))
                    todo.append(c)
        return seen

    def name(self, node) -> str:
        if node is self.root:
            return "root"
        toks = list(node.key.token_ids)
        return "[" + ",".join(str(t) for t in toks) + "]"

    def stale_leaves(self) -> dict[str, list[str]]:
        """Members of the leaf sets that are no longer reachable from the root."""
        att = self.attached()
        return {which: sorted(self.name(n) for n in s if id(n) not in att)
                for which, s in (("device", self.core.evictable_device_leaves),
                                 ("host", self.core.evictable_host_leaves))}

    def snapshot(self) -> list[str]:
        F, M = self.CT.FULL, self.CT.MAMBA

        def ids(v):
            return "-" if v is None else ",".join(map(str, slots_of(v))) or "-"

        lines = []

        def walk(n, depth):
            for c in n.children.values():
                f, m = c.component_data[F], c.component_data[M]
                lines.append(f"{'  ' * depth}{self.name(c)} kv={ids(f.value)} host={ids(f.host_value)} "
                             f"mamba={ids(m.value)} mamba_host={ids(m.host_value)} lock={f.lock_ref} "
                             f"host_lock={f.host_lock_ref}")
                walk(c, depth + 1)

        walk(self.root, 0)
        att = self.attached()
        for which, s in (("device leaves", self.core.evictable_device_leaves),
                         ("host leaves", self.core.evictable_host_leaves)):
            lines.append(f"{which}: " + " ".join(sorted(self.name(n) + ("" if id(n) in att else "(DETACHED)")
                                                        for n in s)))
        lines.append(f"free device_kv: {self.device.free_slots}  free host_kv: {self.host_kv.free_slots}  "
                     f"free mamba: {self.mamba.free_slots}  free host_mamba: {self.host_mamba.free_slots}")
        for e in self.ledger.double_frees():
            lines.append(f"double free: {e['pool']} slots {e['slots']} via {' <- '.join(e['chain'])}")
        return lines
