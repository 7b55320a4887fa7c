"""The canonical state key: everything that can steer the rest of a run, and nothing that only names things.

Read: the node graph (attached nodes and detached ones reachable from any holder), every node's key, slots, locks,
host refs, hit count and hash presence; the leaf sets and LRU lists in their order; the in-flight maps; the
controller's queues; every pool's free list (in order) and double-free record; the live requests. Renamed
canonically: nodes by discovery order (root, children sorted by child key, then holders); access times by rank
(only comparisons read them, and every future time is later); storage op ids by rank; slots by first appearance
per pool (nothing compares slot numbers, so states equal up to a renaming of slots behave the same). Left out:
node ids and the clock (labels), hash *contents* (only presence and length are read), pool *data* (no decision
reads the KV fingerprints; ``simulate`` checks them), and counters only the trace reads.

Invariant: two prefixes with equal keys (and equal actor positions) have identical suffix spaces: every suffix
gives the same outcome (up to node ids in messages) and the same kinds of damage. ``tests/test_explore.py``
checks it by exploring with and without pruning, and that every attribute of the cache, controller and driver
is listed below (a new attribute must be read here or knowingly left out).
"""
from __future__ import annotations

from itertools import count, filterfalse

from ..cache import HiMambaRadixCache
from ..driver import Driver

# attributes the state key reads or knowingly leaves out (ids, the clock, config, counters only the trace reads);
# a test fails when the cache grows state not listed here
CACHE_ATTRS = frozenset({
    "config", "flags", "page_size", "_recorder", "cuts", "pools", "controller", "write_through_threshold",
    "load_back_threshold", "enable_storage", "prefetch_threshold", "ongoing_write_through", "ongoing_load_back",
    "ongoing_prefetch", "ongoing_backup", "prefetch_loaded_tokens_by_reqid", "evictable_full_device_leaves",
    "evictable_full_host_leaves", "warnings", "crashed", "_next_id", "clock", "mamba_host_lru_list", "root_node",
    "full_lru_list", "mamba_lru_list", "full_evictable_size_", "full_protected_size_", "mamba_evictable_size_",
    "mamba_protected_size_", "detach_count"})
CONTROLLER_ATTRS = frozenset({
    "pools", "write_policy", "page_size", "auto_complete", "ack_write_queue", "ack_load_queue", "pending_backups",
    "ack_backup_queue", "prefetch_revoke_queue", "host_mem_release_queue", "prefetch_tokens_occupied",
    "prefetch_capacity_limit", "_op_ids", "evict_mamba_host", "evict_mamba", "stream", "prefetch_hit_queue"})
DRIVER_ATTRS = frozenset({"cache", "retry_mamba_alloc", "live", "nreq"})


# The key hashes nested tuples of ints with Python's ``hash``, which is the same in every process for ints and
# tuples (not for str or None before Python 3.12), so None is spelled -1 and text as its code points.
_NONE = -1



def _s(text: str) -> tuple[int, ...]:
    return tuple(map(ord, text))


def _n(v):
    return _NONE if v is None else v


def _first(kv):
    return kv[0]


def canonical_state(cache: HiMambaRadixCache, driver: Driver) -> tuple:
    """Everything that can steer the rest of a run, as nested tuples of ints with canonical node numbers and slot
    numbers (each pool's slots renamed by first appearance: nothing in the cache compares slot numbers, so states
    equal up to a renaming of slots behave the same).

    Written for speed (the explorer computes one per prefix): the helpers are inlined where a node's four slot
    lists are mostly None, and a list of slots is renamed with C-level ``map`` once its new slots are named."""
    index: dict = {}  # node -> its canonical number (nodes hash by identity)
    order: list = []
    names: tuple[dict, ...] = ({}, {}, {}, {})  # device_kv, device_mamba, host_kv, host_mamba

    def ref(n) -> int:
        if n is None:
            return _NONE
        k = index.get(n)
        if k is None:
            k = index[n] = len(order)
            order.append(n)
        return k

    def sl(pool: int, slots):
        if slots is None:
            return _NONE
        d = names[pool]
        # name the new slots in order of first appearance, at C speed: (distinct slots not yet named, next numbers)
        d.update(zip(filterfalse(d.__contains__, dict.fromkeys(slots)), count(len(d))))
        return tuple(map(d.__getitem__, slots))

    def one(pool: int, slot):
        return _NONE if slot is None else sl(pool, (slot,))[0]

    def transfers(ts):
        return _NONE if ts is None else tuple((sl(3, t.host_indices), sl(1, t.device_indices)) for t in ts)

    shapes: list[tuple] = []

    def describe_pending() -> None:
        get = index.get
        while len(shapes) < len(order):
            n = order[len(shapes)]
            ch = n.children
            if not ch:
                kids = ()
            elif len(ch) == 1:
                (ck, c), = ch.items()
                kids = ((ck, ref(c)),)
            else:
                kids = tuple([(ck, ref(c)) for ck, c in sorted(ch.items(), key=_first)])
            p = n.parent
            v, hv, mv, mhv, hv_ = n.value, n.host_value, n.mamba_value, n.mamba_host_value, n.hash_value
            shapes.append((n.key, get(p) if p in index else ref(p), kids, _NONE if v is None else sl(0, v),
                           _NONE if hv is None else sl(2, hv), _NONE if mv is None else sl(1, mv),
                           _NONE if mhv is None else sl(3, mhv), n.full_lock_ref, n.mamba_lock_ref,
                           n.host_ref_counter, n.host_mamba_ref_counter, n.hit_count,
                           _NONE if hv_ is None else len(hv_)))

    ref(cache.root_node)
    describe_pending()
    cc = cache.controller
    holders = (
        tuple(map(ref, dict.__iter__(cache.evictable_full_device_leaves))),
        tuple(map(ref, dict.__iter__(cache.evictable_full_host_leaves))),
        tuple(map(ref, cache.full_lru_list.mru_to_lru())),
        tuple(map(ref, cache.mamba_lru_list.mru_to_lru())),
        tuple(map(ref, cache.mamba_host_lru_list.mru_to_lru())),
        tuple(map(ref, cache.ongoing_write_through.values())),
        tuple(map(ref, cache.ongoing_load_back.values())),
    )
    if cc.pending_backups or cc.ack_backup_queue or cache.ongoing_backup:
        op_ids = sorted(set(cc.pending_backups) | {op.id for op in cc.ack_backup_queue} | set(cache.ongoing_backup))
        rank = {op_id: i for i, op_id in enumerate(op_ids)}
        backups = tuple((rank[k], ref(n), mp) for k, (n, mp) in cache.ongoing_backup.items())
    else:
        rank, backups = {}, ()
    live = tuple((_s(rid), tuple(r.tokens), sl(0, r.kv), one(1, r.mamba_pool_idx), one(1, r.track_buffer),
                  r.cache_protected_len, ref(r.last_node), _n(r.mamba_last_track_seqlen), sl(0, r.prefix_indices))
                 for rid, r in driver.live.items())
    describe_pending()
    prefetch = tuple((_s(rid), ref(anchor), tuple(tokens), sl(2, host),
                      (sl(2, op.host_indices), tuple(op.token_ids), tuple(op.prefix_tokens), transfers(op.mamba),
                       op.completed_tokens, len(op.hash_value), op.mamba_hit, op.terminated, op.storage_hit_count))
                     for rid, (anchor, tokens, host, op) in cache.ongoing_prefetch.items())
    describe_pending()

    def acks(queue):
        if not queue:
            return ()
        by_id = {n.id: i for i, n in enumerate(order)}
        return tuple((tuple(by_id.get(i, (_NONE, i)) for i in a.node_ids), a.done) for a in queue)

    def storage(op):
        return (rank[op.id], sl(2, op.host_indices), tuple(op.key),
                _NONE if op.hash_value is None else len(op.hash_value), transfers(op.mamba))

    times = sorted({n.last_access_time for n in order})
    t_rank = {t: i for i, t in enumerate(times)}
    nodes = tuple([s + (t_rank[n.last_access_time],) for s, n in zip(shapes, order, strict=False)])
    pending = cc.pending_backups
    controller = (acks(cc.ack_write_queue), acks(cc.ack_load_queue),
                  tuple([storage(pending[k]) for k in sorted(pending)]) if pending else (),
                  tuple([storage(op) for op in cc.ack_backup_queue]),
                  tuple([_s(r) for r in cc.prefetch_revoke_queue]),
                  tuple([sl(2, p) for p in cc.host_mem_release_queue]), cc.prefetch_tokens_occupied,
                  cc.prefetch_capacity_limit, len(cc.prefetch_hit_queue))
    # a slot's free count equals its occurrences in the free list, so the list (in order) says it all
    p = cache.pools
    pools = tuple((sl(i, q.free_slots), tuple([sl(i, d.slots) for d in q.double_frees]) if q.double_frees else ())
                  for i, q in enumerate((p.device_kv, p.device_mamba, p.host_kv, p.host_mamba)))
    sizes = (cache.full_evictable_size_, cache.full_protected_size_, cache.mamba_evictable_size_,
             cache.mamba_protected_size_)
    loaded = tuple(sorted((_s(k), v) for k, v in cache.prefetch_loaded_tokens_by_reqid.items()))
    return (nodes, holders, backups, prefetch, loaded, live, controller, pools, sizes, len(cache.warnings),
            cache.crashed is not None)


def digest(value: tuple) -> bytes:
    """A 16-byte digest of nested int tuples, equal in every process (two differently salted tuple hashes)."""
    return (hash(value) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little") + \
        (hash((0x9E3779B97F4A7C15, value)) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
