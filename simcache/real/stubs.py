"""Stub modules with contents: the ``sglang.*`` names SGLang's cache files use that are not themselves loaded.

Own code, nothing of SGLang's. Each function returns ``{module name: {name: value}}`` for one target; the loader
(``loader.py``) makes every other ``sglang.*`` module an inert stub whose unknown names are placeholder classes.
Where a real module (``hicache_storage``, ``utils``, ``events``) is loaded, its stub here is replaced by it.
"""
from __future__ import annotations

import dataclasses
import hashlib
from enum import StrEnum
from types import SimpleNamespace

from . import fake_controller, fakes


class PoolName(StrEnum):
    """The extra pools a transfer names (the real ``hicache_storage`` defines its own when it is loaded)."""
    KV = "kv"
    MAMBA = "mamba"


class PoolHitPolicy(StrEnum):
    ALL_PAGES = "all_pages"
    TRAILING_PAGES = "trailing_pages"


@dataclasses.dataclass
class PoolTransfer:
    name: PoolName
    host_indices: object = None
    device_indices: object = None
    keys: list[str] | None = None
    hit_policy: PoolHitPolicy = PoolHitPolicy.ALL_PAGES


class StorageMedium(StrEnum):
    """The tiers KV-cache events name; the cache only hands them to event hooks, which do nothing with events off."""
    GPU = "GPU"
    CPU = "CPU_PINNED"


def page_hashes(token_ids, prior_hash: str | None = None, page_size: int | None = None) -> str | list[str]:
    """A chained sha256 per page of ``token_ids`` (one string when ``page_size`` is None): stands for SGLang's
    hashing helpers (a compiled extension in the releases); the cache only compares and stores the strings."""
    tokens = [t for t in getattr(token_ids, "token_ids", token_ids)]

    def digest(prior, chunk) -> str:
        h = hashlib.sha256()
        if prior:
            h.update(str(prior).encode())
        h.update(repr(list(chunk)).encode())
        return h.hexdigest()

    if page_size is None:
        return digest(prior_hash, tokens)
    out, prior = [], prior_hash
    for i in range(0, len(tokens), max(page_size, 1)):
        prior = digest(prior, tokens[i : i + page_size])
        out.append(prior)
    return out


def _native_hash(token_ids, prior_digest: bytes | None, page_size: int | None):
    return page_hashes(token_ids, prior_digest.hex() if prior_digest else None, page_size)


def _hash_str_to_int64(s: str) -> int:
    return int(s[:16], 16) - (1 << 63)


def _bigram(tokens):
    return [(tokens[i], tokens[i + 1]) for i in range(len(tokens) - 1)]


def server_args(page_size: int = 1) -> SimpleNamespace:
    """The server arguments the cache files read at run time (the Mamba chunk size; nothing else is reached)."""
    return SimpleNamespace(mamba_cache_chunk_size=64, page_size=page_size, extra_metric_labels=None,
                           enable_metrics=False, hicache_storage_backend=None)


_SERVER_ARGS = server_args()
_PARALLEL = SimpleNamespace(tp_rank=0, tp_size=1, attn_tp_rank=0, attn_tp_size=1, pp_rank=0, pp_size=1)
_OBSERVABILITY = SimpleNamespace(extra_metric_labels=None, enable_metrics=False)


def common() -> dict[str, dict[str, object]]:
    """Stubs every target of SGLang's mem_cache needs: pools, allocators, server arguments, parallel state."""
    allocators = {n: fakes.FakeDeviceKVAllocator for n in (
        "TokenToKVPoolAllocator", "PagedTokenToKVPoolAllocator", "BaseTokenToKVPoolAllocator")}
    return {
        "sglang.srt.mem_cache.allocator": allocators,
        "sglang.srt.mem_cache.hicache_storage": dict(PoolName=PoolName, PoolHitPolicy=PoolHitPolicy,
                                                     PoolTransfer=PoolTransfer),
        "sglang.srt.mem_cache.utils": dict(get_hash_str=page_hashes, hash_str_to_int64=_hash_str_to_int64,
                                           convert_to_bigram_key=_bigram),
        "sglang.srt.mem_cache.cpp_utils.native_hash": dict(get_native_hash=_native_hash),
        "sglang.srt.disaggregation.kv_events": dict(StorageMedium=StorageMedium),
        "sglang.srt.layers.attention.fla.chunk_delta_h": dict(CHUNK_SIZE=64),
        "sglang.srt.distributed": dict(get_tensor_model_parallel_rank=lambda: 0),
        "sglang.srt.server_args": dict(get_global_server_args=lambda: _SERVER_ARGS),
        "sglang.srt.runtime_context": dict(get_server_args=lambda: _SERVER_ARGS, get_parallel=lambda: _PARALLEL,
                                           get_observability=lambda: _OBSERVABILITY),
    }


def hi_mamba() -> dict[str, dict[str, object]]:
    """``HiMambaRadixCache``: the common stubs plus the hybrid cache controller (built by the env, never here)."""
    return {
        **common(),
        "sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller": dict(
            HybridCacheController=fake_controller.FakeCacheController,
            PrefetchOperation=fake_controller.FakePrefetchOperation),
    }
