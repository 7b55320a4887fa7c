"""Caching a request's KV when it finishes or pauses (reference c.4), at the level the scheduler calls it.

A ``Request`` holds what the scheduler gave it: its tokens, the device KV slots of each token (``kv``), its
working Mamba slot, and (pages larger than 1) a tracking slot holding the Mamba state at the last page boundary.
``cache_protected_len`` tokens of its prefix are owned by the tree (matched at start); the rest are its own until
``insert`` hands them over. A running request locks the path root..``last_node``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import CacheAssertion
from .keys import page_floor
from .node import TreeNode
from .trace_hooks import simulated


@dataclass(eq=False)
class Request:
    rid: str
    tokens: list[int]
    kv: list[int] = field(default_factory=list)
    mamba_pool_idx: int | None = None
    track_buffer: int | None = None
    cache_protected_len: int = 0
    last_node: TreeNode | None = None
    mamba_last_track_seqlen: int | None = None
    prefix_indices: list[int] = field(default_factory=list)


class RequestCaching:
    def _free_mamba_cache(self, req: Request, keep_track: bool) -> None:
        if req.mamba_pool_idx is None:
            raise CacheAssertion("double free? mamba_index is None")
        self.pools.device_mamba.free([req.mamba_pool_idx])
        req.mamba_pool_idx = None
        if self.config.extra_buffer:
            if not keep_track and req.track_buffer is not None:
                self.pools.device_mamba.free([req.track_buffer])
            req.track_buffer = None

    @simulated
    def cache_finished_req(self, req: Request, is_insert: bool = True) -> None:
        """Hand a finished request's KV and Mamba state to the tree, then unlock its matched node.

        Mutates: the tree (``insert``), the device KV and Mamba pools (the request's surplus slots freed), the
        request's slots. Locks: releases the lock the scheduler took on ``req.last_node`` at start
        (``dec_lock_ref``).
        SGLang: ``MambaRadixCache.cache_finished_req``, mamba_radix_cache.py:506."""
        tokens, kv = list(req.tokens), list(req.kv[: len(req.tokens)])
        keep_track, extra = False, self.config.extra_buffer
        if is_insert:
            cache_len = req.mamba_last_track_seqlen if extra else len(tokens)
            if cache_len is None:
                cache_len = 0
            if cache_len != len(tokens):
                end = max(cache_len, req.cache_protected_len)
                self.pools.device_kv.free(kv[end:])
                tokens, kv = tokens[:cache_len], kv[:cache_len]
            aligned = page_floor(len(kv), self.page_size)
            if cache_len != aligned:
                raise CacheAssertion(f"It is required cache_len={cache_len}, page_aligned_len={aligned}")
            if extra:
                mamba_value, keep_track = [req.track_buffer], True
            else:
                mamba_value = [req.mamba_pool_idx]
            _, mamba_exist = self.insert(tokens[:aligned], kv[:aligned], mamba_value,
                                         prev_prefix_len=req.cache_protected_len)
        else:
            self.pools.device_kv.free(kv[req.cache_protected_len :])
            mamba_exist = True
        if mamba_exist:
            keep_track = False
        if extra or mamba_exist:
            self._free_mamba_cache(req, keep_track)
        self.dec_lock_ref(req.last_node)

    @simulated
    def cache_unfinished_req(self, req: Request, chunked: bool = False) -> None:
        """Cache a running (chunked) request's prefix so far and move its lock to the prefix's new last node.

        Mutates: the tree (``insert`` of a forked Mamba state, then ``match_prefix``, which may split), the device
        Mamba pool (may ``evict`` one state), the request's prefix fields. Locks: unlocks the old ``req.last_node``,
        locks the new one.
        SGLang: ``MambaRadixCache.cache_unfinished_req``, mamba_radix_cache.py:594."""
        tokens = list(req.tokens)
        cache_len = req.mamba_last_track_seqlen if self.config.extra_buffer else len(tokens)
        if cache_len is None:
            req.prefix_indices = list(req.kv[: len(tokens)])
            return
        kv_orig = list(req.kv[: len(tokens)])
        kv = kv_orig[:cache_len]
        aligned = page_floor(len(kv), self.page_size)
        if aligned != len(kv):
            raise CacheAssertion(f"page_aligned_len != len(kv_indices), page_aligned_len={aligned}, "
                                 f"len(kv_indices)={len(kv)}, cache_len={cache_len}, self.page_size={self.page_size}")
        source = req.track_buffer if self.config.extra_buffer else req.mamba_pool_idx
        forked = self._fork_mamba(source)
        if forked is None:
            self.evict(num_tokens=0, mamba_num=1)
            forked = self._fork_mamba(source)
            if forked is None:
                raise CacheAssertion("Can not alloc mamba cache")
        forward = chunked if self.flags.forward_chunked else False
        new_prefix_len, exist = self.insert(tokens[:aligned], kv[:aligned], forked, chunked=forward,
                                            prev_prefix_len=req.cache_protected_len)
        if exist:
            self.pools.device_mamba.free(forked)
        match = self.match_prefix(tokens[:aligned])
        new_indices, new_last = match.device_indices, match.last_device_node
        if not exist and new_last.mamba_value != forked:
            raise CacheAssertion("")
        if not req.cache_protected_len <= len(new_indices) + self.page_size - 1:
            raise CacheAssertion(f"req.cache_protected_len={req.cache_protected_len}, "
                                 f"len(new_indices)={len(new_indices)}, len(page_aligned_token_ids)={aligned}, "
                                 f"mamba_exist={exist}")
        if not new_prefix_len <= len(new_indices):
            raise CacheAssertion(f"new_prefix_len={new_prefix_len}, len(new_indices)={len(new_indices)}")
        req.kv[req.cache_protected_len : len(new_indices)] = new_indices[req.cache_protected_len :]
        self.dec_lock_ref(req.last_node)
        self.inc_lock_ref(new_last)
        req.prefix_indices = list(new_indices) + kv_orig[len(new_indices) :]
        req.cache_protected_len = len(new_indices)
        req.mamba_last_track_seqlen = None
        req.last_node = new_last

    def _fork_mamba(self, source: int | None) -> list[int] | None:
        """A copy of a request's Mamba state in a fresh slot (SGLang's ``mamba_pool.fork_from``)."""
        got = self.pools.device_mamba.alloc(1)
        if got is not None and source is not None:
            self.pools.device_mamba.write(got, self.pools.device_mamba.read([source]))
        return got
