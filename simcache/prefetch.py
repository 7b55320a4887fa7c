"""L3 prefetches (reference c.12-c.13): a request's next tokens brought from storage into reserved host slots,
inserted under a host node when they complete.

Vocabulary
- A *prefetch* (``prefetch_from_storage``) reserves host KV for the tokens after ``last_host_node`` and one host
  Mamba slot, and protects ``last_host_node``'s host KV until it ends; ``ongoing_prefetch`` maps the request to a
  ``PrefetchInFlight``. ``check_prefetch_progress`` inserts what arrived (``_insert_helper_host``, which splits
  nodes like ``match_prefix``) and frees the rest; a revoked prefetch is undone (``_revoke_pending_prefetch``) when
  the storage queues are drained.
- From release 0.5.17 (``prefetch_reserves_host_at_hit``) the host KV is reserved later: when the storage hit query
  answers, the drain's ``_drain_and_alloc_storage_hit`` reserves exactly the hit (``evict_host`` on shortage, then
  the page-aligned free host KV, else the prefetch is revoked). Until then the prefetch holds no host KV, and one
  that ends before is revoked (``prefetch_terminate_revokes_unreserved``).

Each method names the SGLang function it mirrors, with its line in ``python/sglang/srt/mem_cache/`` at
``4a50cd78`` (#23696, the ``followup_fix`` preset); the two that exist only from 0.5.17 name their line there.
"""
from __future__ import annotations

from dataclasses import dataclass

from .controller import MambaTransfer, PrefetchOp
from .keys import Key, match_len, page_floor
from .node import TreeNode
from .trace_hooks import simulated


@dataclass(slots=True)
class PrefetchInFlight:
    """One storage prefetch in flight, ``ongoing_prefetch[req_id]``: SGLang's 4-tuple with its own names
    (hi_mamba_radix_cache.py:1738). Unpacks in that order, ``anchor, tokens, host, op = record``."""

    last_host_node: TreeNode  # the node the prefetched tokens hang under; host-referenced until the prefetch ends
    token_ids: list[int]  # the tokens asked for, a whole number of pages
    host_indices: list[int]  # the host KV slots reserved for them (empty until reserved: release 0.5.17)
    operation: PrefetchOp  # the controller's operation: progress, hashes, the Mamba transfer

    def __iter__(self):
        return iter((self.last_host_node, self.token_ids, self.host_indices, self.operation))


class Prefetch:
    @simulated
    def mamba_prefetch_alloc(self, tokens: list[int]):
        """One host Mamba slot for a prefetch (evicting host Mamba states once if short).

        Mutates: the host Mamba pool; may ``evict_mamba_host``. Locks: none.
        SGLang: ``HiMambaRadixCache.mamba_prefetch_alloc``, hi_mamba_radix_cache.py:1997."""
        if not tokens:
            return None
        slot = self._alloc_with_evict(self.pools.host_mamba, 1, self.evict_mamba_host)
        return None if slot is None else [MambaTransfer(slot, None)]

    @simulated
    def _revoke_pending_prefetch(self, req_id: str) -> None:
        # 0.5.17 names the revoke (hi_mamba_radix_cache.py:1488 there); the older drain did the same inline
        info = self.ongoing_prefetch.pop(req_id, None)
        if info is None:
            return
        cc = self.controller
        self.prefetch_abort(info.operation)
        self._release_host_node(info.last_host_node)
        cc.prefetch_tokens_occupied = max(0, cc.prefetch_tokens_occupied - len(info.token_ids))

    @simulated
    def _drain_and_alloc_storage_hit(self, op) -> None:
        # release 0.5.17 (hi_mamba_radix_cache.py:1524 there): reserve exactly the hit, evicting host KV on
        # shortage, then fall back to the page-aligned free host KV, else revoke
        info = self.ongoing_prefetch.get(op.request_id)
        if info is None:
            return
        if op.terminated:
            self._revoke_pending_prefetch(op.request_id)
            return
        pool, n = self.pools.host_kv, op.storage_hit_count
        host = pool.alloc(n)
        if host is None:
            self.evict_host(n)
            host = pool.alloc(n)
        if host is None and self.flags.prefetch_truncates_to_free_host:
            n = min(op.storage_hit_count, page_floor(pool.available_size(), self.page_size))
            if n >= self.prefetch_threshold:
                host = pool.alloc(n)
        if host is None:
            self._revoke_pending_prefetch(op.request_id)
            return
        op.storage_hit_count = n
        op.hash_value = op.hash_value[: n // self.page_size]
        op.host_indices = host
        info.host_indices = host

    @simulated
    def prefetch_abort(self, op) -> None:
        """Free the host Mamba slot a revoked prefetch reserved.

        Mutates: the host Mamba pool; locks: none.
        SGLang: ``HiMambaRadixCache.prefetch_abort``, hi_mamba_radix_cache.py:1379."""
        for t in op.mamba or ():
            if t.host_indices is not None:
                self.pools.host_mamba.free(t.host_indices)
            break

    # --- prefetch from storage ---
    def _node_prefix_tokens(self, node: TreeNode) -> list[int]:
        parts = []
        while node is not None and node is not self.root_node:
            parts.append(node.key)
            node = node.parent
        return [t for k in reversed(parts) for t in k]

    @simulated
    def prefetch_from_storage(self, req_id: str, last_host_node: TreeNode, tokens: list[int]) -> None:
        """Start fetching ``tokens`` (whole pages) from storage into host slots reserved now, to hang under
        ``last_host_node``.

        Mutates: the host KV and Mamba pools (may ``evict_host``), ``ongoing_prefetch`` (a ``PrefetchInFlight``), the
        prefetch token count. Locks: host-references ``last_host_node`` (KV now, Mamba once reserved) until the
        prefetch ends.
        SGLang: ``HiMambaRadixCache.prefetch_from_storage``, hi_mamba_radix_cache.py:1687."""
        n = page_floor(len(tokens), self.page_size)
        tokens = list(tokens[:n])
        cc = self.controller
        if not self.enable_storage or n < self.prefetch_threshold or cc.prefetch_rate_limited():
            return
        self._protect_host_node(last_host_node, protect_mamba=False)
        if self.flags.prefetch_reserves_host_at_hit:  # reserved when the hit count arrives
            self._issue_prefetch(req_id, last_host_node, tokens, None)
            return
        host = self._alloc_with_evict(self.pools.host_kv, n, self.evict_host)
        if host is None and self.flags.prefetch_truncates_to_free_host:
            free = self.pools.host_kv.available_size()
            n = page_floor(free, self.page_size)
            if n < self.prefetch_threshold:
                self._release_host_node(last_host_node, release_mamba=False)
                return
            tokens = tokens[:n]
            host = self.pools.host_kv.alloc(n)
        if host is None:
            self._release_host_node(last_host_node, release_mamba=False)
            return
        self._issue_prefetch(req_id, last_host_node, tokens, host)

    def _issue_prefetch(self, req_id: str, last_host_node: TreeNode, tokens: list[int], host) -> None:
        """The rest of ``prefetch_from_storage`` once the host KV is reserved (``host``) or left for the hit count
        (None): the host Mamba slot, the anchor's Mamba protection, the controller's operation."""
        extra = self.mamba_prefetch_alloc(tokens)
        if extra is None:
            if host is not None:
                self.pools.host_kv.free(host)
            self._release_host_node(last_host_node, release_mamba=False)
            return
        last_host_node.protect_host_mamba()
        if self.mamba_host_lru_list.in_list(last_host_node):
            self.mamba_host_lru_list.remove_node(last_host_node)
        self._ref_event(last_host_node)
        cc = self.controller
        op = cc.prefetch(req_id, host, tokens, self._node_prefix_tokens(last_host_node), extra)
        self.ongoing_prefetch[req_id] = PrefetchInFlight(last_host_node, tokens, host or [], op)
        cc.prefetch_tokens_occupied += len(tokens)

    @simulated
    def check_prefetch_progress(self, req_id: str) -> bool:
        """End request ``req_id``'s prefetch if it may stop: insert the tokens that arrived under its anchor and free
        the rest; False while it must wait.

        Mutates: the tree (``_insert_helper_host`` splits nodes and attaches a host-only leaf), the host pools,
        ``ongoing_prefetch``, ``prefetch_loaded_tokens_by_reqid``. Locks: releases the anchor's host refs.
        SGLang: ``HiMambaRadixCache.check_prefetch_progress``, hi_mamba_radix_cache.py:1746."""
        if req_id not in self.ongoing_prefetch:
            return True
        anchor, token_ids, host, op = self.ongoing_prefetch[req_id]  # SGLang unpacks the same four
        unreserved = op.host_indices is None  # only with prefetch_reserves_host_at_hit, before the hit count
        if unreserved and not self.flags.prefetch_terminate_revokes_unreserved:
            return True
        if not self.can_terminate_prefetch(op):
            return False
        if unreserved:  # release 0.5.17: stop it before host memory was committed, and release the request
            self.controller.terminate_prefetch(op)
            self._revoke_pending_prefetch(req_id)
            return True
        completed, hashes = self.controller.terminate_prefetch(op)
        mamba_host, mamba_loaded = None, False
        for t in op.mamba or ():
            mamba_host, mamba_loaded = t.host_indices, op.mamba_hit
            break
        fetched = token_ids[:completed]
        written = host[:completed]
        matched = self._insert_helper_host(anchor, tuple(fetched), written, hashes[: completed // self.page_size],
                                           mamba_host, mamba_loaded)
        self.pools.host_kv.free(host[:matched])
        self.controller.append_host_mem_release(host[completed:completed])
        if mamba_host is not None and (not matched < completed or not mamba_loaded):
            self.pools.host_mamba.free(mamba_host)
        self._release_host_node(anchor)
        del self.ongoing_prefetch[req_id]
        self.controller.prefetch_tokens_occupied -= len(token_ids)
        self.prefetch_loaded_tokens_by_reqid[req_id] = completed - matched
        return True

    @simulated
    def can_terminate_prefetch(self, op) -> bool:
        """Whether a prefetch may stop now. best_effort: always; wait_complete: once every page arrived; timeout: the
        same here, because the simulator's clock is logical (SGLang's wall-clock timeout never fires within a
        scripted run).

        Mutates: nothing; locks: none.
        SGLang: ``HiMambaRadixCache.can_terminate_prefetch``, hi_mamba_radix_cache.py:1621."""
        policy = self.config.prefetch_stop_policy
        if policy == "best_effort":
            return True
        completed = bool(op.hash_value) and op.completed_tokens == len(op.hash_value) * self.page_size
        return completed or op.terminated

    @simulated
    def _insert_helper_host(self, node: TreeNode, key: Key, host_value: list[int], hash_value,
                            mamba_host_value=None, mamba_loaded: bool = False) -> int:
        node.last_access_time = self.tick()
        if len(key) == 0:
            return 0
        matched = 0
        while len(key) > 0 and self.child_key(key) in node.children:
            node = node.children[self.child_key(key)]
            node.last_access_time = self.tick()
            if node is not self.root_node and node.mamba_value is not None:
                self.mamba_lru_list.reset_node_mru(node)
            p = match_len(node.key, key, self.page_size)
            key, host_value = key[p:], host_value[p:]
            hash_value = hash_value[p // self.page_size :]
            matched += p
            if p < len(node.key):
                node = self._split_node(node.key, node, p)
        leaf = None
        if len(key):
            new = self._new_node(key)
            new.parent = node
            new.host_value = list(host_value)
            new.hash_value = list(hash_value)
            self._attach(node, new)
            leaf = new
            self._update_full_host_leaf_status(new)
            self._update_full_host_leaf_status(node)
        if leaf is not None and mamba_host_value is not None and mamba_loaded:
            leaf.mamba_host_value = list(mamba_host_value)
            if not self.mamba_host_lru_list.in_list(leaf):
                self.mamba_host_lru_list.insert_mru(leaf)
        return matched
