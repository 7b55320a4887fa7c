"""What every real environment reads back the same way (own code; review1 #11): the attached nodes, the tree in
preorder, the pools, the slot accounting, stale references and the end state, with ``run_ops``'s field names.

An environment (``env.Env`` for HiMamba, ``unified.env.UnifiedEnv``) supplies only what differs between the cache
classes: ``_root()`` (the root node), ``_slots(node)`` (its device KV, device Mamba, host KV and host Mamba values,
in ``POOLS`` order), ``canonical_tree()``, ``stale_refs()`` (which holders it has; ``stale`` formats them) and
``_counters()`` (the evictable and protected sizes). Reading changes nothing.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable

from .fakes import FreeListPool, slots_of

POOLS = ("device_kv", "device_mamba", "host_kv", "host_mamba")


class Readout:
    # --- given by each environment ---
    def _root(self):  # pragma: no cover -- each environment has its own
        raise NotImplementedError

    def _slots(self, node) -> tuple:  # pragma: no cover
        raise NotImplementedError

    def _counters(self) -> dict:  # pragma: no cover
        raise NotImplementedError

    # --- shared ---
    def ckey(self, toks):
        return toks[0] if self.page_size == 1 else tuple(toks[: self.page_size])

    def attached(self) -> set[int]:
        """ids of the nodes reachable from root through children whose parent pointer and child key agree."""
        root = self._root()
        seen, stack = {id(root)}, [root]
        while stack:
            n = stack.pop()
            for k, c in n.children.items():
                if c.parent is n and c.key is not None and len(c.key) > 0 and self.ckey(list(c.key.token_ids)) == k:
                    seen.add(id(c))
                    stack.append(c)
        return seen

    def dfs(self) -> list:
        """(depth, node) of the attached nodes, preorder, siblings sorted by key tokens."""
        att, out = self.attached(), []

        def rec(n, d):
            for c in sorted((c for c in n.children.values() if id(c) in att), key=lambda c: list(c.key.token_ids)):
                out.append((d, c))
                rec(c, d + 1)

        rec(self._root(), 1)
        return out

    @staticmethod
    def stale(holders: dict[str, Iterable], att: set[int]) -> list[str]:
        """``keys@holder`` for every node of ``holders`` (holder name -> nodes) that is not attached."""
        return sorted({f"{','.join(map(str, n.key.token_ids)) if n.key is not None else 'None'}@{h}"
                       for h, nodes in holders.items() for n in nodes if n is not None and id(n) not in att})

    def pools(self) -> dict[str, FreeListPool]:
        return dict(device_kv=self.alloc, device_mamba=self.rtp.mamba_pool, host_kv=self.host_kv,
                    host_mamba=self.host_mamba)

    def accounting(self) -> dict[str, dict[str, list[int]]]:
        """Per pool: slots in use that nothing refers to (leaked), free slots still referred to, slots twice in the
        free list, slots two holders refer to. Holders: the tree's nodes, live requests (their KV past
        ``cache_protected_len`` and their Mamba), prefetches in flight, the host pages queued for release."""
        refs: dict[str, list[int]] = {p: [] for p in POOLS}
        for _, n in self.dfs():
            for pool, v in zip(POOLS, self._slots(n), strict=True):
                refs[pool] += slots_of(v)
        for r in self.live_reqs.values():
            refs["device_kv"] += slots_of(self.rtp.req_to_token[r.req_pool_idx, r.cache_protected_len: r._len])
            refs["device_mamba"] += slots_of(r.mamba_pool_idx) + slots_of(r.mamba_ping_pong_track_buffer)
        for v in self.tree.ongoing_prefetch.values():
            refs["host_kv"] += slots_of(v[3].host_indices if v[2] is None else v[2])
            for tr in v[3].pool_transfers or []:
                refs["host_mamba"] += slots_of(tr.host_indices)
        for page in list(self.cc.host_mem_release_queue.queue):
            refs["host_kv"] += slots_of(page)
        for q in getattr(self.cc, "extra_host_mem_release_queues", {}).values():  # the unified controller's
            for page in list(q.queue):
                refs["host_mamba"] += slots_of(page)
        res = {}
        for p, pool in self.pools().items():
            free, cnt, rc = pool.free_slots, collections.Counter(pool.free_slots), collections.Counter(refs[p])
            in_use, r = set(range(pool.size)) - set(free), set(refs[p])
            res[p] = dict(leaked=sorted(in_use - r), free_but_referenced=sorted(r & set(free)),
                          duplicated_in_free_list=sorted(s for s, k in cnt.items() if k > 1),
                          shared=sorted(s for s, k in rc.items() if k > 1))
        return res

    def state(self) -> dict:
        """Everything observable at the end of a run, with ``run_ops``'s field names."""
        (tree, tree_slots), t = self.canonical_tree(), self.tree
        device = (self._slots(n)[0] for _, n in self.dfs())
        return dict(
            stale_final=self.stale_refs(), tree=tree, tree_slots=tree_slots,
            counters=dict(self._counters(), tree_device_tokens=sum(len(v) for v in device if v is not None),
                          live_requests=len(self.live_reqs)),
            inflight=dict(write_through=len(t.ongoing_write_through), load_back=len(t.ongoing_load_back),
                          backup=len(t.ongoing_backup), prefetch=len(t.ongoing_prefetch),
                          pending_l3=len(self.cc.pending_backups), write_acks=len(self.cc.ack_write_queue)),
            double_frees=self.ledger.double_frees(),
            accounting=self.accounting(),
            free={p: [int(x) for x in pool.free_slots] for p, pool in self.pools().items()})
