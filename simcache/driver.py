"""The scheduler side: turns scheduler-level operations into cache calls, and crashes into outcomes.

Operations are the oracle's (``shared/tools/sglang_oracle/README.md``) with the same meaning, so any sequence can
run through simcache and through SGLang's real code and be compared field by field:
``request`` (start then finish), ``start``, ``finish_oldest``, ``evict``, ``evict_mamba``, ``evict_host``,
``events``, ``l3_ack``, ``prefetch``, ``prefetch_done``, ``inject``. The simulator adds named ``finish``
(``rid``; without it the oldest live request) and ``write_ack`` / ``load_ack`` (deliver copies when acks are
manual).

Status letters: ``.`` applied, ``-`` nothing to do, ``e`` device pools still short after eviction, ``u`` the
request could not get its slots, ``r`` nothing left to prefetch, ``f`` the cache declined the prefetch, ``x``
the simulated cache raised (the run ends there).
"""
from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from dataclasses import dataclass, field

from .cache import HiMambaRadixCache
from .config import CacheConfig
from .errors import ScenarioError
from .keys import child_key
from .pools import kv_fingerprints, mamba_fingerprint, mamba_fingerprint_of
from .requests import Request
from .trace_hooks import SIMULATED_CODE, simulated_frames


class Skip(Exception):
    def __init__(self, code: str) -> None:
        self.code = code


@dataclass(frozen=True)
class Crash:
    """An exception raised by the simulated cache: SGLang's message, where it was raised, and the call stack."""
    type: str
    message: str
    function: str
    stack: tuple[str, ...]

    @property
    def outcome(self) -> str:
        return f"{self.type}: {self.message}"

    def as_dict(self) -> dict:
        return dict(message=self.message, type=self.type, function=self.function, stack=list(self.stack))


_OBSERVERS = ("trace.py", "trace_hooks.py", "snapshot.py", "invariants.py", "state.py")


class InternalError(RuntimeError):
    """A bug in simcache's own observers (recorder, snapshots, invariants), never a result of the simulated cache."""


def raise_if_internal(exc: BaseException, where: str) -> None:
    """Re-raise ``exc`` as an ``InternalError`` when it was raised by simcache's observers rather than by the code
    that mirrors SGLang (whose exceptions, assertions or not, are results)."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last, tb = tb.tb_frame, tb.tb_next
    path = last.f_code.co_filename if last is not None else ""
    if "/simcache/" in path.replace("\\", "/") and (path.endswith(_OBSERVERS) or "/render/" in path):
        raise InternalError(f"simcache bug while observing {where}: {type(exc).__name__}: {exc} "
                            f"(in {path.rsplit('/', 1)[-1]}:{last.f_lineno})") from exc


def crash_from(exc: BaseException) -> Crash:
    frames = simulated_frames(exc)
    typ = "AssertionError" if isinstance(exc, AssertionError) else type(exc).__name__
    msg = str(exc)
    return Crash(typ, msg, frames[-1] if frames else "driver", tuple(frames))


def simulated_stack() -> tuple[str, ...]:
    """Names of the simulated functions on the current Python stack, innermost first."""
    out, f = [], sys._getframe(1)
    while f is not None:
        name = SIMULATED_CODE.get(f.f_code)
        if name is not None:
            out.append(name)
        f = f.f_back
    return tuple(out)


@dataclass
class Driver:
    cache: HiMambaRadixCache
    scheduler: bool = False  # the oracle's driver "scheduler": mamba slot shortage evicts once and retries
    live: OrderedDict = field(default_factory=OrderedDict)
    nreq: int = 0

    def __post_init__(self) -> None:
        for pool in self.cache.pools.all().values():
            pool.stack_fn = simulated_stack

    @property
    def config(self) -> CacheConfig:
        return self.cache.config

    # --- requests ---
    def _alloc_mamba(self) -> list[int] | None:
        pool = self.cache.pools.device_mamba
        got = pool.alloc(1)
        if got is None and self.scheduler:
            self.cache.evict(0, mamba_num=1)
            got = pool.alloc(1)
        return got

    def start(self, tokens: list[int], rid: str | None = None) -> str:
        c, pools, ps = self.cache, self.cache.pools, self.cache.page_size
        need, mneed = len(tokens), 2 if self.config.extra_buffer else 1
        if pools.device_kv.available_size() < need:
            c.evict(need - pools.device_kv.available_size())
        if pools.device_mamba.available_size() < mneed:
            c.evict(0, mamba_num=(mneed - pools.device_mamba.available_size()) if self.config.extra_buffer else 1)
        if pools.device_kv.available_size() < need or pools.device_mamba.available_size() < mneed:
            raise Skip("e")
        tracked = (len(tokens) // ps * ps or None) if self.config.extra_buffer else None
        req = Request(rid="", tokens=list(tokens), mamba_last_track_seqlen=tracked)
        res = c.match_prefix(tokens)
        prefix, last = list(res.device_indices), res.last_device_node
        # any host hit loads back (#27391 moved a Mamba-only hit to its own field); 7f67965b's scheduler anchors
        # the load-back at best_match_node, which that version sets to last_host_node
        if res.host_hit_length > 0 or res.mamba_host_hit_length > 0:
            vals, node = c.init_load_back(res.last_host_node, None, req=req if self.scheduler else None)
            if len(vals) > 0:
                prefix, last = prefix + list(vals), node
        c.inc_lock_ref(last)
        new = pools.device_kv.alloc(len(tokens) - len(prefix))
        if req.mamba_pool_idx is not None:
            m = [req.mamba_pool_idx]
        else:
            m = self._alloc_mamba() if new is not None else None
        trk = self._alloc_mamba() if (new is not None and m is not None and self.config.extra_buffer) else None
        if new is None or m is None or (self.config.extra_buffer and trk is None):
            for pool, got in ((pools.device_kv, new), (pools.device_mamba, m)):
                if got:
                    pool.free(got)
            c.dec_lock_ref(last)
            raise Skip("u")
        # the "model" computes KV for the new tokens and the Mamba states; each is a function of its prefix
        if pools.device_kv.keeps_data:  # (the explorer's machines keep none: nothing to compute)
            fps = kv_fingerprints(tokens)
            pools.device_kv.write(new, fps[len(prefix) :])
            pools.device_mamba.write(m, [mamba_fingerprint_of(fps, len(tokens))])
            if trk is not None:
                pools.device_mamba.write(trk, [mamba_fingerprint_of(fps, tracked or 0)])
        req.rid = rid or f"r{self.nreq}"
        self.nreq += 1
        req.kv = prefix + new
        req.mamba_pool_idx, req.track_buffer = m[0], (trk[0] if trk else None)
        req.cache_protected_len, req.last_node = len(prefix), last
        self.live[req.rid] = req
        return req.rid

    def finish(self, rid: str) -> None:
        req = self.live.pop(rid)
        self.cache.cache_finished_req(req)

    # --- state injection (scenarios A and D) ---
    def inject(self, specs: list[dict]) -> None:
        c, made = self.cache, []
        pools = c.pools
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

    # --- one operation ---
    def apply(self, op: dict, step: int) -> None:
        c, kind = self.cache, op["op"]
        cc = c.controller
        if kind in ("request", "start"):
            if op.get("rid") is not None and op["rid"] in self.live:  # would silently drop the live one
                raise ScenarioError(f"op {step}: request id {op['rid']!r} is still live; give each started "
                                    f"request its own rid")
            rid = self.start(op["tokens"], op.get("rid"))
            if kind == "request":
                self.finish(rid)
        elif kind == "finish_oldest":
            if not self.live:
                raise Skip("-")
            self.finish(next(iter(self.live)))
        elif kind == "finish":
            rid = op.get("rid", next(iter(self.live), None))  # no rid (plain ops list): the oldest live request
            if rid not in self.live:
                raise Skip("-")
            self.finish(rid)
        elif kind == "evict":
            c.evict(op["n"])
        elif kind == "evict_mamba":
            c.evict(0, mamba_num=op["n"])
        elif kind == "evict_host":
            c.evict_host(op["n"])
        elif kind == "events":
            c.check_hicache_events()
        elif kind == "write_ack":
            if cc.complete_writes(op.get("n", 1)) == 0:
                raise Skip("-")
            c.check_hicache_events()
        elif kind == "load_ack":
            if cc.complete_loads(op.get("n", 1)) == 0:
                raise Skip("-")
            c.check_hicache_events()
        elif kind == "l3_ack":
            if not cc.pending_backups:
                raise Skip("-")
            cc.complete_backup(min(cc.pending_backups))
            c.check_hicache_events()
        elif kind == "prefetch":
            if not c.enable_storage or c.ongoing_prefetch:
                raise Skip("-")
            tokens = list(op["tokens"])
            res = c.match_prefix(tokens)
            rest = tokens[len(res.device_indices) + res.host_hit_length :]
            if not rest:
                raise Skip("r")
            c.prefetch_from_storage("pf", res.last_host_node, rest)
            if "pf" not in c.ongoing_prefetch:
                raise Skip("f")
        elif kind == "prefetch_done":
            if "pf" not in c.ongoing_prefetch:
                raise Skip("-")
            pop = c.ongoing_prefetch["pf"].operation
            n = min(op["n"], len(pop.token_ids)) // c.page_size * c.page_size
            hashes = [hashlib.sha256(f"pf{step}_{i}".encode()).hexdigest() for i in range(n // c.page_size)]
            cc.finish_prefetch(pop, n, op["mamba_hit"], hashes)
            cc.append_host_mem_release(pop.host_indices[n:])
            c.check_prefetch_progress("pf")
        elif kind == "inject":
            self.inject(op["nodes"])
        else:
            raise ScenarioError(f"op {step}: unknown op {kind!r}")
