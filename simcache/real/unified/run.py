"""Run a scenario or an operation list on SGLang's real ``UnifiedRadixCache`` -> ``simcache.real.run``'s fields.

The operations are driven by ``simcache.real.driver.RealDriver`` (the same calls as on HiMamba: the cache's public
API is ``BasePrefixCache``'s) over ``env.UnifiedEnv``; ``UnifiedDriver`` changes only what differs: node handles
(ids from 0.5.17) and ``inject``, which builds HiMamba's node fields and so is refused here.
"""
from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace

from ...errors import ScenarioError
from ...scenario import Scenario
from ...scheduler import Schedule
from ...unified.run import HANG_FIELDS
from ..driver import RealDriver
from ..loader import Loaded
from ..run import run_linear
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

    def load_back_req(self, req, res):
        """What the scheduler's ``init_next_round_input`` sets before a load-back (``init_load_back`` reads them);
        the unified cache's load-back always takes the request."""
        req.last_node, req.host_hit_length = res.last_device_node, res.host_hit_length
        req.mamba_host_hit_length, req.swa_host_hit_length = getattr(res, "mamba_host_hit_length", 0), 0
        return req

    RESULTS = (Exception, Looping)  # the watchdog's stop is a result too (a BaseException: SGLang cannot catch it)

    def step(self, op: dict, index: int, run=None, *, crashes: bool = True) -> str:
        """``Steps.step``, after the cache's state is remembered (stale references) and the watchdog reset."""
        self.env.remember()
        self.env.host_kv.queries = 0
        return super().step(op, index, run, crashes=crashes)

    def crash_fields(self, e: BaseException, real_files: frozenset[str]) -> dict:
        if isinstance(e, Looping):
            return dict(HANG_FIELDS, chain_lines=[])
        return super().crash_fields(e, real_files)

    def inject(self, specs: list[dict]) -> None:
        raise ScenarioError("inject builds HiMamba's node fields; the unified cache's scenarios reach their state "
                            "through requests, prefetches and evictions instead")


def run_unified(scenario: Scenario, loaded: Loaded, schedule: str | Schedule | None = None,
                ops: Iterable[tuple[str | None, dict]] | None = None, memory_limit_mb: float | None = None) -> dict:
    """``simcache.real.run.run_real`` for a unified target (``run_linear`` over ``UnifiedEnv`` and
    ``UnifiedDriver``): the result dict (``FIELDS``, ``chain_lines``, ``source``)."""
    return run_linear(UnifiedEnv, UnifiedDriver, scenario, loaded, schedule, ops, memory_limit_mb)
