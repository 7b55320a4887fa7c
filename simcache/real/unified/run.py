"""Run a scenario or an operation list on SGLang's real ``UnifiedRadixCache`` -> ``simcache.real.run``'s fields.

The operations are driven by ``simcache.real.driver.RealDriver`` (the same calls as on HiMamba: the cache's public
API is ``BasePrefixCache``'s) over ``env.UnifiedEnv``; ``UnifiedDriver`` changes only what differs: node handles
(ids from 0.5.17) and ``inject``, which builds HiMamba's node fields and so is refused here.
"""
from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace

import torch

from ...errors import ScenarioError, SimcacheError
from ...operations import APPLIED, NO_ROOM, NO_SLOTS, RAISED, Skip
from ...scenario import Scenario
from ...scheduler import Schedule
from ...unified.run import HANG_FIELDS
from ..driver import RealDriver
from ..loader import Loaded
from ..run import FIELDS, exception_fields, linear_ops
from .env import Looping, UnifiedEnv


class UnifiedDriver(RealDriver):
    def new_req(self, toks: list[int]) -> SimpleNamespace:
        """A request as the scheduler hands it to the unified cache (the fields its paths read)."""
        ps, eb = self.ps, self.env.extra_buffer
        return SimpleNamespace(
            rid=None, session=None, origin_input_ids=self.seq(toks), output_ids=self.seq([]), req_pool_idx=None,
            mamba_pool_idx=None, cache_protected_len=0, last_node=None, extra_key=None, priority=0, _len=len(toks),
            mamba_last_track_seqlen=(len(toks) // ps * ps or None) if eb else None,
            mamba_ping_pong_track_buffer=None, mamba_next_track_idx=0, swa_prefix_lock_released=False,
            finished_reason=None, swa_uuid_for_lock=None, skip_lock_node_ids={}, cache_salt=None,
            fill_len=len(toks), extend_range=SimpleNamespace(end=len(toks)))

    def start(self, toks: list[int], rid: str | None = None) -> str:
        """``RealDriver.start`` with the unified cache's request (and its load-back, which always takes it)."""
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
        # what the scheduler's init_next_round_input sets before a load-back (init_load_back reads them)
        req.last_node, req.host_hit_length = last, res.host_hit_length
        req.mamba_host_hit_length, req.swa_host_hit_length = getattr(res, "mamba_host_hit_length", 0), 0
        if res.host_hit_length > 0 or getattr(res, "mamba_host_hit_length", 0) > 0:
            vals, node = t.init_load_back(self.load_back_params(res, req))
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

    def inject(self, specs: list[dict]) -> None:
        raise ScenarioError("inject builds HiMamba's node fields; the unified cache's scenarios reach their state "
                            "through requests, prefetches and evictions instead")


def run_unified(scenario: Scenario, loaded: Loaded, schedule: str | Schedule | None = None,
                ops: Iterable[tuple[str | None, dict]] | None = None) -> dict:
    """``simcache.real.run.run_real`` for a unified target: the result dict (``FIELDS``, ``chain_lines``,
    ``source``)."""
    linear = list(ops) if ops is not None else linear_ops(scenario, schedule)
    longest = max([len(op.get("tokens", ())) for _, op in linear] + [8])
    with loaded.active():
        env = UnifiedEnv(loaded, scenario.config, max_ctx=longest)
        drv = UnifiedDriver(env)
        status: list[str] = []
        crash, step, first_stale = None, None, None
        for i, (_, op) in enumerate(linear):
            env.remember()
            env.host_kv.queries = 0
            try:
                drv.apply(op, i)
                status.append(APPLIED)
            except Skip as s:
                status.append(s.code)
            except SimcacheError:
                raise
            except Looping:
                status.append(RAISED)
                crash, step = dict(HANG_FIELDS, chain_lines=[]), i
                break
            except Exception as e:  # noqa: BLE001 -- the real cache's exceptions are results
                status.append(RAISED)
                crash, step = exception_fields(e, loaded.real_files), i
                break
            if first_stale is None and env.stale_refs():
                first_stale = i
        state = env.state()
    head = crash or dict(outcome="clean", sig=None, raised_in=None, chain=[], chain_lines=[])
    out = dict(head, step=step, status="".join(status), first_stale=first_stale, **state)
    out["source"] = loaded.source.label
    return {**{k: out[k] for k in FIELDS}, "chain_lines": out["chain_lines"], "source": out["source"]}
