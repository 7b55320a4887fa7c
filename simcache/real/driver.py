"""The scheduler side for the real code: each operation of ``simcache.operations`` as calls of SGLang's own cache.

An operation means what it means to ``simcache.driver.Driver`` (the oracle's vocabulary, plus the simulator's
``finish``, ``write_ack``, ``load_ack`` and named request ids), and leaves the same status letter. The calls follow
the version loaded: token ids as ``array('q')`` where ``RadixKey`` keeps them so (7f67965b on), the load-back anchor
SGLang's ``InitLoadBackParams`` asks for, ``cache_finished_req(req, kv_len_to_handle=n)`` where it takes that
(0.5.17), and a prefetch whose host memory is reserved only when its L3 hit count arrives (0.5.17: ``prefetch_hit``).
"""
from __future__ import annotations

import hashlib
import inspect
import re
import traceback
from types import SimpleNamespace

import torch

from ..driver import Steps
from ..errors import ScenarioError
from ..operations import (
    NO_ROOM,
    NO_SLOTS,
    NOTHING_TO_DO,
    NOTHING_TO_FETCH,
    PREFETCH_DECLINED,
    RAISED,
    Skip,
    check_op,
)
from .env import Env

PF = "pf"  # the one prefetch's request id, as in the model
_DETAIL = re.compile(r",| with | x\.id=| node\.id=")


def exception_fields(e: BaseException, real_files: frozenset[str]) -> dict:
    """``outcome``, ``sig``, ``raised_in``, ``chain`` (and ``chain_lines``) of an exception the real cache raised."""
    tb = traceback.extract_tb(e.__traceback__)
    real = [f for f in tb if f.filename in real_files]
    msg = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x?", str(e))
    raised_in = real[-1].name if real else "driver"
    typ = "AssertionError" if isinstance(e, AssertionError) else type(e).__name__
    return dict(outcome=f"{typ}: {msg}", sig=f"{typ}: {_DETAIL.split(msg)[0]} in {raised_in}", raised_in=raised_in,
                chain=[f.name for f in real],
                chain_lines=[f"{f.filename.rsplit('/', 1)[-1]}:{f.name}:{f.lineno}" for f in real])


class RealDriver(Steps):
    """Operations as calls of the real cache; ``step`` (``simcache.driver.Steps``, shared with the model's driver)
    classifies each, and the exception the real code raised stays in ``exception`` for ``crash_fields``."""

    exception: BaseException | None = None

    def __init__(self, env: Env) -> None:
        self.env, self.t, self.ps, self.K = env, env.tree, env.page_size, env.RadixKey
        self.nreq, self.scheduler = 0, env.cfg["driver"] == "scheduler"
        self.seq = env.seq
        params = inspect.signature(self.t.cache_finished_req).parameters
        self.kv_len_keyword = "kv_len_to_handle" in params  # 0.5.17

    def load_back_params(self, res, req):
        ilb = self.env.bpc.InitLoadBackParams
        anchor = ({"best_match_node": res.best_match_node} if "best_match_node" in ilb.__dataclass_fields__
                  else {"last_host_node": res.last_host_node})
        return ilb(host_hit_length=res.host_hit_length, mem_quota=None, req=req, **anchor)

    def evict(self, n: int = 0, mamba: int = 0):
        return self.t.evict(self.env.bpc.EvictParams(num_tokens=n, mamba_num=mamba))

    def alloc_mamba(self):
        x = self.env.rtp.mamba_pool.alloc(1)
        if x is None and self.scheduler:  # one evict-and-retry; the caller holds the lock on the prefix
            self.evict(0, mamba=1)
            x = self.env.rtp.mamba_pool.alloc(1)
        return x

    def raised(self, op: dict, index: int, e: BaseException) -> str:
        """``step``'s status for an exception of the real code: ``x``, the exception kept; a malformed operation is
        the caller's mistake, said in one sentence, as on the model."""
        if type(op) is dict and op.get("op") is not None:
            check_op(op, index, self.ps)
        self.exception = e
        return RAISED

    def crash_fields(self, e: BaseException, real_files: frozenset[str]) -> dict:
        """The result's ``outcome``, ``sig``, ``raised_in``, ``chain`` and ``chain_lines`` for what the real code
        raised (``exception_fields``; a driver with an outcome of its own overrides it)."""
        return exception_fields(e, real_files)

    def new_req(self, toks: list[int]) -> SimpleNamespace:
        """A request as the scheduler hands it to the cache (the fields its paths read)."""
        return SimpleNamespace(
            rid=None, origin_input_ids=self.seq(toks), output_ids=self.seq([]), req_pool_idx=None, mamba_pool_idx=None,
            cache_protected_len=0, last_node=None, extra_key=None, _len=len(toks),
            mamba_last_track_seqlen=(len(toks) // self.ps * self.ps or None) if self.env.extra_buffer else None,
            mamba_ping_pong_track_buffer=None, mamba_next_track_idx=0)

    def load_back_req(self, req, res):
        """The request a load-back is given, made ready after the match ``res`` (HiMamba: only the scheduler driver
        passes one)."""
        return req if self.scheduler else None

    def start(self, toks: list[int], rid: str | None = None) -> str:
        env, t = self.env, self.t
        alloc, mpool = env.alloc, env.rtp.mamba_pool
        need, mneed = len(toks), 2 if env.extra_buffer else 1
        if alloc.available_size() < need:
            self.evict(need - alloc.available_size())
        if mpool.available_size() < mneed:
            self.evict(0, mamba=(mneed - mpool.available_size()) if env.extra_buffer else 1)
        if alloc.available_size() < need or mpool.available_size() < mneed:
            raise Skip(NO_ROOM)
        req = self.new_req(toks)
        res = t.match_prefix(env.bpc.MatchPrefixParams(key=self.K(self.seq(toks))))
        prefix, last = res.device_indices, res.last_device_node
        lb_req = self.load_back_req(req, res)
        if res.host_hit_length > 0 or getattr(res, "mamba_host_hit_length", 0) > 0:
            vals, node = t.init_load_back(self.load_back_params(res, lb_req))
            if len(vals) > 0:
                prefix, last = torch.cat([prefix.to(torch.int64), vals]), node
            t.ready_to_load_host_cache()
        t.inc_lock_ref(last)
        new = alloc.alloc(len(toks) - len(prefix))
        if req.mamba_pool_idx is not None:  # allocated (and filled) by the load-back
            m = req.mamba_pool_idx.reshape(1)
        else:
            m = self.alloc_mamba() if new is not None else None
        trk = self.alloc_mamba() if (new is not None and m is not None and env.extra_buffer) else None
        if new is None or m is None or (env.extra_buffer and trk is None):
            for pool, x in ((alloc, new), (mpool, m), (mpool, trk)):
                if x is not None and len(x):
                    pool.free(x)
            t.dec_lock_ref(last)
            raise Skip(NO_SLOTS)
        kv = torch.cat([prefix.to(torch.int64), new])
        row = env.rtp.alloc_req_slot()
        env.rtp.req_to_token[row, : len(kv)] = kv
        rid = rid or f"r{self.nreq}"
        self.nreq += 1
        req.rid, req.req_pool_idx, req.mamba_pool_idx = rid, row, m[0]
        req.cache_protected_len, req.last_node, req.mamba_ping_pong_track_buffer = len(prefix), last, trk
        req.pop_committed_kv_cache = lambda r=req: r._len
        env.live_reqs[rid] = req
        return rid

    def finish(self, rid: str) -> None:
        req = self.env.live_reqs.pop(rid)
        if self.kv_len_keyword:
            self.t.cache_finished_req(req, kv_len_to_handle=req._len)
        else:
            self.t.cache_finished_req(req)
        self.env.rtp.free_req_slot(req.req_pool_idx)

    def inject(self, specs: list[dict]) -> None:
        """Build nodes directly (scenarios A and D), then the real ``write_backup_storage`` and
        ``_update_leaf_status``, as ``simcache.driver.Driver.inject`` does on the model."""
        env, t, made = self.env, self.t, []
        for i, s in enumerate(specs):
            key, parent = list(s["key"]), t.root_node if s.get("parent") is None else made[s["parent"]]
            n = env.TreeNode()
            n.parent, n.key, n.value = parent, self.K(self.seq(key)), None
            for flag, attr, pool, size in (("device", "value", env.alloc, len(key)),
                                           ("mamba", "mamba_value", env.rtp.mamba_pool, 1),
                                           ("host", "host_value", env.host_kv, len(key)),
                                           ("mamba_host", "mamba_host_value", env.host_mamba, 1)):
                if s.get(flag):
                    setattr(n, attr, pool.alloc(size))
                    if getattr(n, attr) is None:
                        raise ScenarioError(f"inject node {i}: pool {pool.name} has fewer than {size} free slots; "
                                            f"make the pool larger in the config")
            if s.get("hash"):
                n.hash_value = [hashlib.sha256(f"inject{i}_{p}".encode()).hexdigest()
                                for p in range(len(key) // self.ps)]
            if env.ckey(key) in parent.children:
                raise ScenarioError(f"inject node {i}: its parent already has a child starting with "
                                    f"{key[: self.ps]}; give it another first page")
            parent.children[env.ckey(key)] = n
            if n.value is not None:
                t.full_lru_list.insert_mru(n)
                t.full_evictable_size_ += len(key)
            if n.mamba_value is not None:
                t.mamba_lru_list.insert_mru(n)
                t.mamba_evictable_size_ += 1
            if n.mamba_host_value is not None:
                t.mamba_host_lru_list.insert_mru(n)
            made.append(n)
        for n, s in zip(made, specs, strict=True):
            if s.get("l3_backup"):
                t.write_backup_storage(n)
        for n in made:
            t._update_leaf_status(n)

    # --- prefetches ---
    def _pf_op(self):
        return self.t.ongoing_prefetch[PF][3]

    def _hash_fn(self, index: int):
        return lambda i: hashlib.sha256(f"pf{index}_{i}".encode()).hexdigest()

    def _deliver_hit(self, n: int, index: int) -> None:
        pop = self._pf_op()
        hit = min(n, len(pop.token_ids)) // self.ps * self.ps
        self.env.cc.deliver_hit(pop, hit, self._hash_fn(index))
        self.t.check_hicache_events()

    def apply(self, op: dict, index: int) -> None:
        """Apply one operation; a ``Skip`` says it did nothing (its status letter)."""
        t, env, kind = self.t, self.env, op["op"]
        if kind in ("request", "start"):
            rid = op.get("rid")
            if rid is not None and rid in env.live_reqs:
                raise ScenarioError(f"op {index}: request id {rid!r} is still live; give each started request its "
                                    f"own rid")
            rid = self.start(op["tokens"], rid)
            if kind == "request":
                self.finish(rid)
        elif kind in ("finish", "finish_oldest"):
            rid = op.get("rid", next(iter(env.live_reqs), None))
            if rid not in env.live_reqs:
                raise Skip(NOTHING_TO_DO)
            self.finish(rid)
        elif kind in ("evict", "evict_mamba"):
            self.evict(op["n"]) if kind == "evict" else self.evict(0, mamba=op["n"])
        elif kind == "evict_host":
            t.evict_host(op["n"])
        elif kind == "events":
            t.check_hicache_events()
        elif kind in ("write_ack", "load_ack"):
            done = env.cc.complete_writes(op.get("n", 1)) if kind == "write_ack" else \
                env.cc.complete_loads(op.get("n", 1))
            if done == 0:
                raise Skip(NOTHING_TO_DO)
            t.check_hicache_events()
        elif kind == "l3_ack":
            if not env.cc.pending_backups:
                raise Skip(NOTHING_TO_DO)
            env.cc.complete_backup(min(env.cc.pending_backups))
            t.check_hicache_events()
        elif kind == "prefetch":
            if not env.cfg["storage"] or t.ongoing_prefetch:
                raise Skip(NOTHING_TO_DO)
            res = t.match_prefix(env.bpc.MatchPrefixParams(key=self.K(self.seq(op["tokens"]))))
            rest = self.seq(op["tokens"][len(res.device_indices) + res.host_hit_length:])
            if not rest:
                raise Skip(NOTHING_TO_FETCH)
            t.prefetch_from_storage(PF, res.last_host_node, rest)
            if PF not in t.ongoing_prefetch:
                raise Skip(PREFETCH_DECLINED)
        elif kind == "prefetch_hit":
            if PF not in t.ongoing_prefetch or self._pf_op().host_indices is not None:
                raise Skip(NOTHING_TO_DO)
            self._deliver_hit(op["n"], index)
        elif kind == "prefetch_done":
            if PF not in t.ongoing_prefetch:
                raise Skip(NOTHING_TO_DO)
            if self._pf_op().host_indices is None:  # 0.5.17: the hit count arrives first, then its drain
                self._deliver_hit(op["n"], index)
            if PF in t.ongoing_prefetch and t.ongoing_prefetch[PF][3].host_indices is not None:
                pop = self._pf_op()
                n = min(op["n"], len(pop.host_indices)) // self.ps * self.ps
                if pop.storage_hit_count and n < len(pop.host_indices):
                    pop.mark_terminate()  # 0.5.17's _page_transfer: a short batch terminates the operation
                env.cc.finish_prefetch(pop, n, op["mamba_hit"], self._hash_fn(index), env.pool_name)
                env.cc.append_host_mem_release(pop.host_indices[n:])  # as the real controller's IO thread does
            t.check_prefetch_progress(PF)
        elif kind == "inject":
            self.inject(op["nodes"])
        else:
            raise ScenarioError(f"op {index}: unknown op {kind!r}")
