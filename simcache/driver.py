"""The scheduler side: turns scheduler-level operations into cache calls, and crashes into outcomes.

Operations are the oracle's (``shared/tools/sglang_oracle/README.md``) with the same meaning, so any sequence can
run through simcache and through SGLang's real code and be compared field by field; ``operations.OPS`` lists them
with their fields, and ``Driver.apply`` runs each through ``Driver.RUN``, one method per operation.
``Driver.step`` applies one and returns its status letter (``operations.STATUS_KEY``): ``.`` applied, a skip's
letter when it did nothing, ``x`` when the simulated cache raised (the ``Crash`` is left in ``cache.crashed``).
"""
from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from .cache import HiMambaRadixCache
from .config import CacheConfig
from .crash import Crash, InternalError, crash_from, raise_if_internal
from .errors import ArgumentError, ScenarioError, SimcacheError, shown
from .fingerprints import kv_fingerprint_array, kv_fingerprints, mamba_fingerprint, mamba_fingerprint_of
from .keys import child_key
from .operations import (
    APPLIED,
    NO_ROOM,
    NO_SLOTS,
    NOTHING_TO_DO,
    NOTHING_TO_FETCH,
    OPS,
    PREFETCH_DECLINED,
    RAISED,
    Skip,
    check_op,
    node_problem,
)
from .operations import request_problem as _request_problem
from .requests import Request
from .trace_hooks import SIMULATED_CODE

__all__ = ["Crash", "Driver", "InternalError", "Skip", "Steps", "crash_from", "raise_if_internal", "simulated_stack"]


def simulated_stack() -> tuple[str, ...]:
    """Names of the simulated functions on the current Python stack, innermost first."""
    out, f = [], sys._getframe(1)
    while f is not None:
        name = SIMULATED_CODE.get(f.f_code)
        if name is not None:
            out.append(name)
        f = f.f_back
    return tuple(out)


class Steps:
    """``step``: one operation's status letter, for any driver (the model's ``Driver``, and ``simcache.real``'s
    drivers of SGLang's own code): the one place an operation is classified. The driver gives ``apply(op, index)``
    and ``raised(op, index, e)`` (what an exception of the code under test becomes); ``RESULTS`` is what such code
    raises that counts as a result (``Exception``; a driver may add a ``BaseException`` of its own)."""

    RESULTS: ClassVar[type[BaseException] | tuple[type[BaseException], ...]] = Exception

    def step(self, op: dict, index: int, run: Callable[[Driver, dict, int], str | None] | None = None, *,
             crashes: bool = True) -> str:
        """Apply operation number ``index``; its status letter: applied, a ``Skip``'s letter (turned away), or ``x``
        (the simulated cache raised: a result, its ``Crash`` in ``cache.crashed``). A user's mistake
        (``SimcacheError``) or a bug of simcache's observers (``InternalError``) is raised. Every caller classifies
        an operation here: ``run`` is the op's method (``RUN[op["op"]]``) when the caller looked it up once already
        (the explorer's machine), and ``crashes=False`` lets the simulated cache's exception go up instead of
        becoming a status (the notebooks' ``Lab``, where the learner sees the traceback)."""
        try:
            if run is None:
                self.apply(op, index)  # through ``apply``, so a replay that wraps it sees the exception (codepane)
                return APPLIED
            return run(self, op, index) or APPLIED  # None, or the letter of a skip decided at once
        except Skip as s:
            return s.code
        except SimcacheError:
            raise
        except self.RESULTS as e:  # noqa: BLE001 -- the simulated (or real) cache's exceptions are results
            if not crashes:
                raise
            return self.raised(op, index, e)

    def apply(self, op: dict, index: int) -> None:  # pragma: no cover -- each driver has its own
        raise NotImplementedError

    def raised(self, op: dict, index: int, e: BaseException) -> str:  # pragma: no cover -- each driver has its own
        raise NotImplementedError


@dataclass
class Driver(Steps):
    cache: HiMambaRadixCache
    # the oracle's driver "scheduler" (config ``driver: scheduler``), as SGLang's scheduler allocates a request's
    # Mamba slot: a shortage evicts once and retries, and a host hit's load-back may allocate the slot itself
    retry_mamba_alloc: bool = False
    WRITES_KV: ClassVar[bool] = True  # the KV and Mamba fingerprints a request computes (the unified driver: none)
    live: OrderedDict = field(default_factory=OrderedDict)
    nreq: int = 0

    def __post_init__(self) -> None:
        if not callable(getattr(getattr(self.cache, "pools", None), "all", None)):  # a cache (simcache.unified's too)
            raise ArgumentError(f"Driver takes a HiMambaRadixCache, not {type(self.cache).__name__}; e.g. "
                                f"Driver(HiMambaRadixCache(CacheConfig()))")
        if not isinstance(self.retry_mamba_alloc, bool) or not isinstance(self.live, OrderedDict) or \
                type(self.nreq) is not int or self.nreq < 0:
            raise ArgumentError("Driver takes a cache and, optionally, retry_mamba_alloc=True or False; leave live "
                                "and nreq to it")
        for pool in self.cache.pools.all().values():
            pool.stack_fn = simulated_stack

    @property
    def config(self) -> CacheConfig:
        return self.cache.config

    # --- requests ---
    def _alloc_mamba(self) -> list[int] | None:
        pool = self.cache.pools.device_mamba
        got = pool.alloc(1)
        if got is None and self.retry_mamba_alloc:
            self.cache.evict(0, mamba_num=1)
            got = pool.alloc(1)
        return got

    def start(self, tokens: list[int], rid: str | None = None) -> str:
        """Start a request for ``tokens`` (kept live until ``finish``); its rid (``rid``, or ``r0``, ``r1``, ...).
        Raises ``Skip`` when the pools have no room for it."""
        problem = _request_problem({"tokens": tokens} if rid is None else {"tokens": tokens, "rid": rid})
        if problem:
            raise ArgumentError(f"Driver.start: {problem}")
        if rid is not None and rid in self.live:
            raise ArgumentError(f"Driver.start: request id {rid!r} is still live; finish it first or give another rid")
        return self._start(tokens, rid)

    def _load_back(self, res, req):
        """A host hit's load-back -> (values, node): 7f67965b's scheduler anchors it at best_match_node, which that
        version sets to last_host_node; the request goes along only where the scheduler retries Mamba allocs."""
        return self.cache.init_load_back(res.last_host_node, None, req=req if self.retry_mamba_alloc else None)

    def _start(self, tokens: list[int], rid: str | None = None) -> str:
        c = self.cache
        pools, ps, extra = c.pools, c.page_size, c.config.extra_buffer
        kv_pool, mamba_pool = pools.device_kv, pools.device_mamba
        need, mneed = len(tokens), 2 if extra else 1
        if kv_pool.available_size() < need:
            c.evict(need - kv_pool.available_size())
        if mamba_pool.available_size() < mneed:
            c.evict(0, mamba_num=(mneed - mamba_pool.available_size()) if extra else 1)
        if kv_pool.available_size() < need or mamba_pool.available_size() < mneed:
            raise Skip(NO_ROOM)
        tracked = (len(tokens) // ps * ps or None) if extra else None
        req = Request(rid="", tokens=list(tokens), mamba_last_track_seqlen=tracked)
        res = c.match_prefix(tokens)
        prefix, last = list(res.device_indices), res.last_device_node
        # any host hit loads back (#27391 moved a Mamba-only hit to its own field)
        if res.host_hit_length > 0 or res.mamba_host_hit_length > 0:
            vals, node = self._load_back(res, req)
            if len(vals) > 0:
                prefix, last = prefix + list(vals), node
        c.inc_lock_ref(last)
        new = kv_pool.alloc(len(tokens) - len(prefix))
        if req.mamba_pool_idx is not None:
            m = [req.mamba_pool_idx]
        else:
            m = self._alloc_mamba() if new is not None else None
        trk = self._alloc_mamba() if (new is not None and m is not None and extra) else None
        if new is None or m is None or (extra and trk is None):
            for pool, got in ((kv_pool, new), (mamba_pool, m)):
                if got:
                    pool.free(got)
            c.dec_lock_ref(last)
            raise Skip(NO_SLOTS)
        # the "model" computes KV for the new tokens and the Mamba states; each is a function of its prefix
        if self.WRITES_KV and kv_pool.keeps_data:  # (the explorer's machines keep none: nothing to compute)
            fps = kv_fingerprint_array(tokens)  # once per request, at C speed, for every write of the request
            kv_pool.write(new, fps[len(prefix) :])
            mamba_pool.write(m, [mamba_fingerprint_of(fps, len(tokens))])
            if trk is not None:
                mamba_pool.write(trk, [mamba_fingerprint_of(fps, tracked or 0)])
        req.rid = rid or f"r{self.nreq}"
        self.nreq += 1
        req.kv = prefix + new
        req.mamba_pool_idx, req.track_buffer = m[0], (trk[0] if trk else None)
        req.cache_protected_len, req.last_node = len(prefix), last
        self.live[req.rid] = req
        return req.rid

    def finish(self, rid: str) -> None:
        if not isinstance(rid, str) or rid not in self.live:
            live = ", ".join(map(repr, self.live)) or "none"
            raise ArgumentError(f"Driver.finish: no live request {shown(rid, 40)}; the live ones: {live}")
        req = self.live.pop(rid)
        self.cache.cache_finished_req(req)

    # --- state injection (scenarios A and D) ---
    def inject(self, specs: list[dict]) -> None:
        c, made = self.cache, []
        pools = c.pools
        if not isinstance(specs, list):
            raise ArgumentError(f"Driver.inject takes a list of node objects like [{{'key': [1, 2], 'host': True}}], "
                                f"not {type(specs).__name__}")
        for i, s in enumerate(specs):
            problem = node_problem(s, i, c.page_size)
            if problem:
                raise ScenarioError(f"inject node {i}: {problem}")
        for i, s in enumerate(specs):
            key = tuple(s["key"])
            parent = c.root_node if s.get("parent") is None else made[s["parent"]]
            n = c._new_node(key)
            n.parent = parent
            for flag, attr, pool, size in (("device", "value", pools.device_kv, len(key)),
                                           ("mamba", "mamba_value", pools.device_mamba, 1),
                                           ("host", "host_value", pools.host_kv, len(key)),
                                           ("mamba_host", "mamba_host_value", pools.host_mamba, 1)):
                if s.get(flag):
                    got = pool.alloc(size)
                    if got is None:
                        raise ScenarioError(f"inject node {i}: pool {pool.name} has fewer than {size} free slots; "
                                            f"make the pool larger in the config")
                    setattr(n, attr, got)
            prefix = c._node_prefix_tokens(n)
            if n.value is not None:
                pools.device_kv.write(n.value, kv_fingerprints(prefix, start=len(prefix) - len(key)))
            if n.host_value is not None:
                pools.host_kv.write(n.host_value, kv_fingerprints(prefix, start=len(prefix) - len(key)))
            for slots, pool in ((n.mamba_value, pools.device_mamba), (n.mamba_host_value, pools.host_mamba)):
                if slots is not None:
                    pool.write(slots, [mamba_fingerprint(prefix)])
            if s.get("hash"):
                n.hash_value = [hashlib.sha256(f"inject{i}_{p}".encode()).hexdigest()
                                for p in range(len(key) // c.page_size)]
            if child_key(key, c.page_size) in parent.children:
                raise ScenarioError(f"inject node {i}: its parent already has a child starting with "
                                    f"{list(key[: c.page_size])}; give it another first page")
            c._attach(parent, n)
            if n.value is not None:
                c.full_lru_list.insert_mru(n)
                c.full_evictable_size_ += len(key)
            if n.mamba_value is not None:
                c.mamba_lru_list.insert_mru(n)
                c.mamba_evictable_size_ += 1
            if n.mamba_host_value is not None:
                c.mamba_host_lru_list.insert_mru(n)
            made.append(n)
        for n, s in zip(made, specs, strict=True):
            if s.get("l3_backup"):
                c.write_backup_storage(n)
        for n in made:
            c._update_leaf_status(n)

    # --- one operation (``Steps.step`` classifies it) ---
    def raised(self, op: dict, index: int, e: Exception) -> str:
        """``step``'s status for an exception (not a ``Skip`` or ``SimcacheError``) that operation ``index`` raised:
        ``x``, with its ``Crash`` in ``cache.crashed``; an unknown op or a bug of simcache's observers is raised."""
        if type(op) is not dict or op.get("op") not in self.RUN:
            raise ScenarioError(f"op {index}: unknown op {shown(op.get('op') if type(op) is dict else op)}") from None
        check_op(op, index, self.cache.page_size)  # a malformed op is the caller's mistake, not a crash
        raise_if_internal(e, f"op {index} ({op.get('op')})")
        self.cache.crashed = crash_from(e)
        return RAISED

    def apply(self, op: dict, index: int) -> None:
        """Apply operation number ``index`` (``index`` names it in errors and seeds a prefetch's page hashes); a
        ``Skip`` says it did nothing."""
        run = self.RUN.get(op.get("op")) if type(op) is dict else None
        if run is None:
            raise ScenarioError(f"op {index}: unknown op {shown(op.get('op') if type(op) is dict else op)}")
        skipped = run(self, op, index)
        if skipped is not None:
            raise Skip(skipped)

    def _request(self, op: dict, index: int) -> str | None:
        rid = op.get("rid")
        if rid is not None and rid in self.live:  # would silently drop the live one
            raise ScenarioError(f"op {index}: request id {rid!r} is still live; give each started request its own "
                                f"rid")
        rid = self._start(op["tokens"], rid)
        if op["op"] == "request":
            self.finish(rid)

    def _finish_oldest(self, op: dict, index: int) -> str | None:
        if not self.live:
            return NOTHING_TO_DO
        self.finish(next(iter(self.live)))

    def _finish(self, op: dict, index: int) -> str | None:
        rid = op.get("rid", next(iter(self.live), None))  # no rid (plain ops list): the oldest live request
        if rid not in self.live:
            return NOTHING_TO_DO
        self.finish(rid)

    def _evict(self, op: dict, index: int) -> str | None:
        self.cache.evict(op["n"])

    def _evict_mamba(self, op: dict, index: int) -> str | None:
        self.cache.evict(0, mamba_num=op["n"])

    def _evict_host(self, op: dict, index: int) -> str | None:
        self.cache.evict_host(op["n"])

    def _events(self, op: dict, index: int) -> str | None:
        self.cache.check_hicache_events()

    def _write_ack(self, op: dict, index: int) -> str | None:
        if self.cache.controller.complete_writes(op.get("n", 1)) == 0:
            return NOTHING_TO_DO
        self.cache.check_hicache_events()

    def _load_ack(self, op: dict, index: int) -> str | None:
        if self.cache.controller.complete_loads(op.get("n", 1)) == 0:
            return NOTHING_TO_DO
        self.cache.check_hicache_events()

    def _l3_ack(self, op: dict, index: int) -> str | None:
        cc = self.cache.controller
        if not cc.pending_backups:
            return NOTHING_TO_DO
        cc.complete_backup(min(cc.pending_backups))
        self.cache.check_hicache_events()

    def _prefetch(self, op: dict, index: int) -> str | None:
        c = self.cache
        if not c.enable_storage or c.ongoing_prefetch:
            return NOTHING_TO_DO
        tokens = list(op["tokens"])
        res = c.match_prefix(tokens)
        rest = tokens[len(res.device_indices) + res.host_hit_length :]
        if not rest:
            return NOTHING_TO_FETCH
        c.prefetch_from_storage("pf", res.last_host_node, rest)
        if "pf" not in c.ongoing_prefetch:
            return PREFETCH_DECLINED

    def _prefetch_hit(self, op: dict, index: int) -> str | None:
        pf = self.cache.ongoing_prefetch.get("pf")
        if pf is None or pf.operation.host_indices is not None:  # before 0.5.17 host KV is reserved at issue
            return NOTHING_TO_DO
        self._storage_hit(pf.operation, op["n"], index)

    def _storage_hit(self, pop, n: int, index: int) -> None:
        """The storage hit query of prefetch ``pop`` answers ``n`` tokens; then the cache drains its queues."""
        c = self.cache
        hit = min(n, len(pop.token_ids)) // c.page_size * c.page_size
        hashes = [hashlib.sha256(f"pf{index}_{i}".encode()).hexdigest() for i in range(hit // c.page_size)]
        c.controller.storage_hit(pop, hit, hashes, c.prefetch_threshold)
        c.check_hicache_events()

    def _prefetch_done(self, op: dict, index: int) -> str | None:
        c, cc = self.cache, self.cache.controller
        if "pf" not in c.ongoing_prefetch:
            return NOTHING_TO_DO
        pop = c.ongoing_prefetch["pf"].operation
        if pop.host_indices is None:  # 0.5.17, hit count not in yet: it arrives now, with n
            self._storage_hit(pop, op["n"], index)
            if "pf" not in c.ongoing_prefetch:  # revoked
                return None
        if pop.storage_hit_count:  # reserved at the hit (0.5.17): the IO fills what was reserved, under its hashes
            n = min(op["n"], len(pop.host_indices)) // c.page_size * c.page_size
            short = n < len(pop.host_indices)
            # a short KV transfer stops the operation, and the Mamba state is then never read (the hybrid
            # controller's _page_transfer reads it only after every reserved page arrived)
            cc.finish_prefetch(pop, n, op["mamba_hit"] and not short, pop.hash_value)
            pop.terminated = short
        else:
            n = min(op["n"], len(pop.token_ids)) // c.page_size * c.page_size
            hashes = [hashlib.sha256(f"pf{index}_{i}".encode()).hexdigest() for i in range(n // c.page_size)]
            cc.finish_prefetch(pop, n, op["mamba_hit"], hashes)
        cc.append_host_mem_release(pop.host_indices[n:])
        c.check_prefetch_progress("pf")

    def _inject(self, op: dict, index: int) -> str | None:
        self.inject(op["nodes"])

    # operation name -> the method that runs it (every name of operations.OPS, checked below); a method returns None
    # when it applied the operation, or the skip letter when it turned it away at once (``apply`` raises that as a
    # ``Skip``; a skip found deeper, in ``start``, is raised there)
    RUN: ClassVar[dict[str, Callable[[Driver, dict, int], str | None]]] = {
        "request": _request, "start": _request, "finish": _finish, "finish_oldest": _finish_oldest,
        "evict": _evict, "evict_mamba": _evict_mamba, "evict_host": _evict_host, "events": _events,
        "l3_ack": _l3_ack, "write_ack": _write_ack, "load_ack": _load_ack, "prefetch": _prefetch,
        "prefetch_done": _prefetch_done, "prefetch_hit": _prefetch_hit, "inject": _inject}


if list(Driver.RUN) != list(OPS):  # pragma: no cover - a new operation needs its method here
    raise InternalError(f"Driver.RUN runs {list(Driver.RUN)}, operations.OPS lists {list(OPS)}")
