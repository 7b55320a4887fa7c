"""Running operations on the unified model: the scheduler side, and the result in ``simcache.real``'s fields.

``UnifiedDriver`` is ``simcache.driver.Driver`` with what the unified cache's scheduler does differently: the
request's last device node and host hits are set before a load-back (SGLang's ``init_load_back`` reads them from
the request, and always gets it), and a prefetch's L3 hit count arrives as its own event (``prefetch_hit``; a
``prefetch_done`` before it delivers it first), as ``simcache.real.driver.RealDriver`` does on the real code.
``run_model`` returns the fields ``simcache.real.unified.run.run_unified`` returns, in the same formats, so the two
are diffed field by field.
"""
from __future__ import annotations

import hashlib
from collections import Counter

from ..config import from_settings
from ..crash import short_sig
from ..driver import Driver
from ..errors import ScenarioError
from ..operations import NOTHING_TO_DO, NOTHING_TO_FETCH, PREFETCH_DECLINED, RAISED
from ..real.run import FIELDS
from ..versions import Flags
from .cache import UnifiedRadixCache
from .components import Livelock
from .versions import preset as preset_flags

PF = "pf"
HANG = object()
# an operation that never ends (both sides stop it the same way: see ``components.Livelock`` and
# ``simcache.real.unified.env``'s watchdog)
HANG_FIELDS = dict(outcome="hang: the operation loops forever", sig="hang", raised_in=None, chain=[])
POOLS = ("device_kv", "device_mamba", "host_kv", "host_mamba")


def _hash_fn(index: int):
    return lambda i: hashlib.sha256(f"pf{index}_{i}".encode()).hexdigest()


class UnifiedDriver(Driver):
    exception: BaseException | None = None  # what the last operation that raised raised (``run_model`` reads it)
    WRITES_KV = False  # the unified model keeps no KV fingerprints (Driver._start skips them)

    def step(self, op: dict, index: int, run=None, *, crashes: bool = True) -> str:
        """``Driver.step``, with the watchdog's count of host queries started afresh (it counts one operation's:
        ``cache.watchdog``), for every caller: a traced run, the explorer's machines, a replay."""
        self.cache.host_queries = 0
        return super().step(op, index, run, crashes=crashes)

    def raised(self, op: dict, index: int, e: Exception) -> str:
        """``Driver.raised``, keeping the exception: a ``Livelock`` (an operation the watchdog stopped) is the
        outcome ``HANG_FIELDS``, on the model as on the real code."""
        code = super().raised(op, index, e)
        self.exception = e
        return code

    def _load_back(self, res, req):
        """The unified scheduler's load-back: the request learns its match (node, host hit lengths) first, then
        loads back anchored at best_match_node, the request always given."""
        req.last_node, req.host_hit_length, req.mamba_host_hit_length = res.last_device_node, res.host_hit_length, \
            res.mamba_host_hit_length
        return self.cache.init_load_back(res.best_match_node, None, req=req)

    def _deliver_hit(self, n: int, index: int) -> None:
        c, cc = self.cache, self.cache.controller
        op = c.ongoing_prefetch[PF].operation
        op.hit_known = True
        hit = 0 if op.terminated else min(n, len(op.token_ids)) // c.page_size * c.page_size
        if hit < max(c.prefetch_threshold, c.page_size):
            cc.prefetch_revoke_queue.append(PF)
        else:
            f = _hash_fn(index)
            op.hash_value = [f(i) for i in range(hit // c.page_size)]
            op.storage_hit_count = hit
            cc.prefetch_hit_queue.append(op)
        c.check_hicache_events()

    def _prefetch(self, op: dict, index: int) -> str | None:
        c = self.cache
        if not c.enable_storage or c.ongoing_prefetch:
            return NOTHING_TO_DO
        res = c.match_prefix(op["tokens"])
        rest = list(op["tokens"])[len(res.device_indices) + res.host_hit_length:]
        if not rest:
            return NOTHING_TO_FETCH
        c.prefetch_from_storage(PF, res.last_host_node, rest)
        if PF not in c.ongoing_prefetch:
            return PREFETCH_DECLINED
        c.ongoing_prefetch[PF].operation.hit_known = False

    def _prefetch_hit(self, op: dict, index: int) -> str | None:
        c = self.cache
        if PF not in c.ongoing_prefetch or c.ongoing_prefetch[PF].operation.hit_known:
            return NOTHING_TO_DO
        self._deliver_hit(op["n"], index)

    def _prefetch_done(self, op: dict, index: int) -> str | None:
        c, cc = self.cache, self.cache.controller
        if PF not in c.ongoing_prefetch:
            return NOTHING_TO_DO
        if not c.ongoing_prefetch[PF].operation.hit_known:
            self._deliver_hit(op["n"], index)
        info = c.ongoing_prefetch.get(PF)
        if info is not None and info.operation.host_indices is not None:
            pop = info.operation
            n = min(op["n"], len(pop.host_indices)) // c.page_size * c.page_size
            hit = op["mamba_hit"] and n // c.page_size == len(pop.hash_value)
            pop.completed_tokens, pop.mamba_hit = n, hit
            cc.append_host_mem_release(pop.host_indices[n:])
        c.check_prefetch_progress(PF)

    def inject(self, specs: list[dict]) -> None:
        raise ScenarioError("inject builds HiMamba's node fields; the unified cache's scenarios reach their state "
                            "through requests, prefetches and evictions instead")

    RUN = {**Driver.RUN, "prefetch": _prefetch, "prefetch_done": _prefetch_done, "prefetch_hit": _prefetch_hit}


# --- the result, in simcache.real's fields ---
def _dfs(cache):
    att, out = cache.attached(), []

    def rec(n, d):
        for c in sorted((c for c in n.children.values() if id(c) in att), key=lambda c: list(c.key)):
            out.append((d, c))
            rec(c, d + 1)

    rec(cache.root_node, 1)
    return out


def _ids(v) -> str:
    return ",".join(map(str, v)) if v is not None else "-"


def stale_refs(cache) -> list[str]:
    """``keys@holder`` for every node a holder refers to that is no longer reachable from the root."""
    att = cache.attached()
    return sorted({f"{','.join(map(str, n.key))}@{h}" for h, ns in cache.holders().items() for n in ns
                   if n is not None and id(n) not in att})


def state(cache, live) -> dict:
    nodes = _dfs(cache)
    tree, slots = [], []
    for d, n in nodes:
        keys = ",".join(map(str, n.key))
        bad = any(v is not None and len(v) != len(n.key) for v in (n.value, n.host_value))
        tree.append(f"{d} {keys} v={int(n.value is not None)} h={int(n.host_value is not None)} "
                    f"m={int(n.mamba_value is not None)} mh={int(n.mamba_host_value is not None)} "
                    f"fl={n.full_lock_ref} ml={n.mamba_lock_ref} hl={n.host_ref_counter} "
                    f"hml={n.host_mamba_ref_counter}" + (" !len" if bad else ""))
        slots.append(f"{d} {keys} " + " ".join(f"{k}={_ids(v)}" for k, v in (
            ("v", n.value), ("h", n.host_value), ("m", n.mamba_value), ("mh", n.mamba_host_value))))
    stale = stale_refs(cache)
    cc = cache.controller
    refs: dict[str, list[int]] = {p: [] for p in POOLS}
    for _, n in nodes:
        for p, v in zip(POOLS, (n.value, n.mamba_value, n.host_value, n.mamba_host_value), strict=True):
            refs[p] += v or []
    for r in live:
        refs["device_kv"] += r.kv[r.cache_protected_len: len(r.tokens)]
        refs["device_mamba"] += [s for s in (r.mamba_pool_idx, r.track_buffer) if s is not None]
    for v in cache.ongoing_prefetch.values():
        refs["host_kv"] += v.host_indices or v.operation.host_indices or []
        for t in v.mamba:
            refs["host_mamba"] += t.host_indices or []
    for page in cc.host_mem_release_queue:
        refs["host_kv"] += page
    for page in cc.mamba_release_queue:
        refs["host_mamba"] += page
    accounting = {}
    for p, pool in cache.pools.all().items():
        free, in_use, r = list(pool.free_slots), pool.used_slots(), set(refs[p])
        accounting[p] = dict(leaked=sorted(in_use - r), free_but_referenced=sorted(r & set(free)),
                             duplicated_in_free_list=sorted(s for s, k in Counter(free).items() if k > 1),
                             shared=sorted(s for s, k in Counter(refs[p]).items() if k > 1))
    ev, pr = cache.evictable, cache.protected
    return dict(
        stale_final=stale, tree=tree, tree_slots=slots,
        counters=dict(full_evictable=ev["full"], full_protected=pr["full"], mamba_evictable=ev["mamba"],
                      mamba_protected=pr["mamba"],
                      tree_device_tokens=sum(len(n.value) for _, n in nodes if n.value is not None),
                      live_requests=len(live)),
        inflight=dict(write_through=len(cache.ongoing_write_through), load_back=len(cache.ongoing_load_back),
                      backup=len(cache.ongoing_backup), prefetch=len(cache.ongoing_prefetch),
                      pending_l3=len(cc.pending_backups), write_acks=len(cc.ack_write_queue)),
        double_frees=[dict(pool=d.pool, slots=list(d.slots), chain=list(d.stack))
                      for p in cache.pools.all().values() for d in p.double_frees],
        accounting=accounting,
        free={p: [int(x) for x in pool.free_slots] for p, pool in cache.pools.all().items()})


def run_model(cfg: dict, ops: list[tuple[str | None, dict]], preset: str) -> dict:
    """Run (actor, op) pairs on a fresh unified model of ``preset`` with checked settings ``cfg`` (as
    ``config.check_settings`` gives them) -> the result in ``simcache.real``'s fields."""
    cache = UnifiedRadixCache(from_settings(cfg, Flags()), preset_flags(preset))
    drv = UnifiedDriver(cache, retry_mamba_alloc=cfg["driver"] == "scheduler")
    status, crash, step, first_stale = [], None, None, None
    for i, (_, op) in enumerate(ops):
        code = drv.step(op, i)  # Steps.step: the one place an operation is classified (the watchdog restarts there)
        status.append(code)
        if code == RAISED:
            crash, step = (HANG if isinstance(drv.exception, Livelock) else cache.crashed), i
            break
        if first_stale is None and stale_refs(cache):
            first_stale = i
    st = state(cache, list(drv.live.values()))
    if crash is None:
        head = dict(outcome="clean", sig=None, raised_in=None, chain=[])
    elif crash is HANG:
        head = dict(HANG_FIELDS)
    else:
        head = dict(outcome=crash.outcome, sig=short_sig(crash), raised_in=crash.function, chain=list(crash.stack))
    out = dict(head, step=step, status="".join(status), first_stale=first_stale, **st)
    return {k: out[k] for k in FIELDS}
