"""Stub modules for ``UnifiedRadixCache``: ``simcache.real``'s common stubs, plus what the unified files reach.

Own code. Beyond the common stubs: the request pool's class (the Mamba component checks the type), ``envs``, the
hybrid pool assembler that the real ``init_hicache`` calls (it hangs the run's fake controller and host pools on the
cache, as the real ``_apply_stack_result`` does), the storage config parser, the Mamba checkpoint grid (0.5.18),
and the page-interleave predicate (0.5.23). The run's fakes reach the assembler through ``CURRENT``, set by
``driver.RealUnified`` just before it calls ``init_hicache``.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

from .. import stubs as common_stubs

CURRENT: dict = {}  # "attach": the run's assembler (fakes.make_assembler), "prefetch_threshold": int


class _EnvValue:
    def __init__(self, value=None) -> None:
        self.value = value

    def get(self):
        return self.value


# the environment the run sees: SGLang's Python tree core (the default of 0.5.17 and 0.5.18; 0.5.23's default is
# compiled); every other variable unset
_ENV = {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "python"}


class _Envs:
    """``envs.NAME.get()``: ``_ENV``'s value, else None (the defaults that matter here are off)."""

    def __getattr__(self, name: str) -> _EnvValue:
        if name.startswith("__"):
            raise AttributeError(name)
        return _EnvValue(_ENV.get(name))


def _attach(cache, params, server_args, **kwargs) -> None:
    CURRENT["attach"](cache, params, server_args, **kwargs)


class _HybridCacheController:
    @staticmethod
    def parse_storage_backend_extra_config(config):
        # (extra config, prefetch threshold, timeout base, timeout per 1k tokens, pass prefix keys)
        return None, CURRENT.get("prefetch_threshold", 1), 1.0, 0.25, False


def unified() -> dict[str, dict[str, object]]:
    from . import fakes  # the request pool class the Mamba component type-checks

    base = common_stubs.common()
    sa = base["sglang.srt.server_args"]["get_global_server_args"]()
    mc = "sglang.srt.mem_cache."
    runtime = dict(base["sglang.srt.runtime_context"])
    runtime.update(
        get_exec=lambda: SimpleNamespace(mamba=SimpleNamespace(mamba_max_states_per_path=-1)),
        mamba_cache_chunk_size=lambda: sa.mamba_cache_chunk_size,
        # the depth a donated Mamba checkpoint lands on: a multiple of the chunk size and of the tree's page
        mamba_checkpoint_grid=lambda page: math.lcm(sa.mamba_cache_chunk_size, page))
    return {
        **base,
        "sglang.srt.runtime_context": runtime,
        "sglang.srt.environ": {"envs": _Envs()},
        mc + "memory_pool": {"HybridReqToTokenPool": fakes.HybridReqToTokenPool,
                             "ReqToTokenPool": fakes.HybridReqToTokenPool},
        mc + "hybrid_cache.hybrid_pool_assembler": {"attach_hybrid_pool_to_unified_cache": _attach},
        mc + "hybrid_cache.hybrid_cache_controller": {"HybridCacheController": _HybridCacheController},
        mc + "allocator.page_interleave": {"page_interleave_shard_size": lambda allocator: 1},
        "sglang.srt.utils.common": {"ceil_align": lambda x, a: (x + a - 1) // a * a},
    }
