"""Stepping a scenario one operation at a time, and the canonical state key that lets the explorer prune.

Vocabulary
- A *plan* is what a run needs besides its schedule: the config, the flags, and each actor's operations with their
  request ids already resolved (an actor's ids depend only on its own earlier operations, never on the interleaving,
  so ``Scenario.linearize`` and the plan agree on every schedule).
- A *machine* is a fresh cache and driver that applies one actor's next operation per ``step``, exactly as
  ``ops_run.execute`` does (same op indices, same ``Skip`` statuses, the first exception of the simulated cache ends
  the run), without a recorder: the fast path.
- The *state key* of a prefix is a digest of everything that can influence the rest of a run: the node graph
  (attached and detached nodes reachable from the root or from any holder), every node's slots, locks, host refs and
  hit count, the leaf sets and LRU lists in their order, the in-flight maps, the controller's queues, every pool's
  free list and double-free record, the live requests, and each actor's position. Identities that only name things
  are canonicalised: nodes by discovery order (root, then children sorted by child key, then holders), access times
  by rank (only comparisons read them, and every future time is later), storage op ids by rank. Left out: node ids
  and the clock (labels), hash *contents* (only their presence and length are ever read) and pool *data* (the KV
  fingerprints are never read by a decision; ``simulate`` checks them).

Invariant: two prefixes with equal keys have identical suffix spaces: every suffix gives the same outcome (up to node
ids in assertion messages) and the same damage. ``tests/test_explore.py`` checks it by exploring with and without
pruning and comparing the outcome sets, and that the key covers every attribute of the cache, controller and driver.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import re
from dataclasses import dataclass

from ..cache import HiMambaRadixCache
from ..driver import Crash, Driver, Skip, crash_from
from ..errors import SimcacheError
from ..ops_run import build_config
from ..scenario import Scenario
from ..scheduler import Schedule
from ..versions import Flags

# attributes the state key reads or knowingly leaves out; a test fails when the cache grows state not listed here
CACHE_ATTRS = frozenset({
    "config", "flags", "page_size", "recorder", "pools", "controller", "write_through_threshold",
    "load_back_threshold", "enable_storage", "prefetch_threshold", "ongoing_write_through", "ongoing_load_back",
    "ongoing_prefetch", "ongoing_backup", "prefetch_loaded_tokens_by_reqid", "evictable_full_device_leaves",
    "evictable_full_host_leaves", "warnings", "crashed", "_next_id", "clock", "mamba_host_lru_list", "root_node",
    "full_lru_list", "mamba_lru_list", "full_evictable_size_", "full_protected_size_", "mamba_evictable_size_",
    "mamba_protected_size_"})
CONTROLLER_ATTRS = frozenset({
    "pools", "write_policy", "page_size", "auto_complete", "ack_write_queue", "ack_load_queue", "pending_backups",
    "ack_backup_queue", "prefetch_revoke_queue", "host_mem_release_queue", "prefetch_tokens_occupied",
    "prefetch_capacity_limit", "_op_ids", "evict_mamba_host", "evict_mamba", "observer", "stream"})
DRIVER_ATTRS = frozenset({"cache", "scheduler", "live", "nreq"})
_IDS = re.compile(r"\b(node\.id|x\.id|self\.cache\[node\.id\]\.id)=\d+|(?<=evicted node )\d+")


def signature(crash: Crash | None) -> str:
    """``"clean"`` or ``"AssertionError: <message> @ <function>"`` with node ids blanked (they are labels)."""
    if crash is None:
        return "clean"
    return f"{crash.type}: {_IDS.sub(lambda m: (m.group(1) + '=#') if m.group(1) else '#', crash.message)} " \
           f"@ {crash.function}"


@dataclass(frozen=True)
class Plan:
    """A scenario's config, flags and per-actor resolved operations (picklable, for worker processes)."""
    name: str
    config: dict
    flags: Flags
    actors: tuple[str, ...]
    ops: dict  # actor -> tuple of op dicts
    initial: tuple = ()

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(len(self.ops[a]) for a in self.actors)

    @property
    def total(self) -> int:
        return sum(self.lengths)


def plan_for(scenario: Scenario, flags: Flags) -> Plan:
    actors = tuple(a for a in scenario.actors if scenario.actors[a])
    sequential = Schedule(tuple(a for a in actors for _ in scenario.actors[a]))
    ops: dict[str, list[dict]] = {a: [] for a in actors}
    for actor, op in scenario.linearize(sequential):
        if actor in ops:
            ops[actor].append(op)
    return Plan(scenario.name, dict(scenario.config), flags, actors, {a: tuple(o) for a, o in ops.items()},
                tuple(scenario.initial))


class Machine:
    """A cache + driver stepped one scheduler-level operation at a time (no recorder)."""

    __slots__ = ("cache", "driver", "index", "crash", "pos", "turns", "idx", "statuses")

    def __init__(self, plan: Plan) -> None:
        cfg = dataclasses.replace(build_config(plan.config, plan.flags), device="cpu")
        self.cache = HiMambaRadixCache(cfg)
        self.driver = Driver(self.cache, scheduler=plan.config.get("driver") == "scheduler")
        self.index, self.crash = 0, None
        self.pos = [0] * len(plan.actors)
        self.turns: list[str] = []  # actor names, in schedule order
        self.idx: list[int] = []  # the same turns as actor indices
        self.statuses: list[str] = []
        if plan.initial:
            self._apply({"op": "inject", "nodes": list(plan.initial)})

    @classmethod
    def replay(cls, plan: Plan, turns) -> Machine:
        """A machine after ``turns`` (actor indices), stopped early at a crash."""
        m = cls(plan)
        for i in turns:
            if m.crash is not None:
                break
            m.step(plan, i)
        return m

    def _apply(self, op: dict) -> str:
        try:
            self.driver.apply(op, self.index)
            status = "."
        except Skip as s:
            status = s.code
        except SimcacheError:
            raise
        except Exception as e:  # noqa: BLE001 -- the simulated cache's exceptions are results
            self.crash = crash_from(e)
            self.cache.crashed = self.crash
            status = "x"
        self.index += 1
        self.statuses.append(status)
        return status

    def step(self, plan: Plan, actor_index: int) -> str:
        actor = plan.actors[actor_index]
        op = plan.ops[actor][self.pos[actor_index]]
        self.pos[actor_index] += 1
        self.turns.append(actor)
        self.idx.append(actor_index)
        return self._apply(op)

    def clone(self) -> Machine:
        """A deep copy that shares the pools' data tensors (data never steers a decision, see the module doc)."""
        memo: dict = {id(self.cache.config): self.cache.config, id(self.cache.flags): self.cache.flags}
        for pool in self.cache.pools.all().values():
            memo[id(pool.data)] = pool.data
        return copy.deepcopy(self, memo)

    def __deepcopy__(self, memo):
        new = Machine.__new__(Machine)
        memo[id(self)] = new
        new.cache = copy.deepcopy(self.cache, memo)
        new.driver = copy.deepcopy(self.driver, memo)
        new.index, new.crash = self.index, self.crash
        new.pos, new.turns, new.idx = list(self.pos), list(self.turns), list(self.idx)
        new.statuses = list(self.statuses)
        return new

    def damage(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``(("leaked:host_kv", slots), ("double_free:device_kv", slots))`` for every damaged pool, sorted."""
        from ..state import accounting

        out = []
        for name, a in accounting(self.cache, list(self.driver.live.values())).items():
            if a["leaked"]:
                out.append((f"leaked:{name}", tuple(a["leaked"])))
        for name, pool in self.cache.pools.all().items():
            slots = sorted({s for d in pool.double_frees for s in d.slots})
            if slots:
                out.append((f"double_free:{name}", tuple(slots)))
        return tuple(sorted(out))

    def key(self) -> bytes:
        """The canonical state key (a 16-byte digest), positions included."""
        return hashlib.blake2b(repr((tuple(self.pos), canonical_state(self.cache, self.driver))).encode(),
                               digest_size=16).digest()


def _t(v):
    return None if v is None else tuple(v)


def _transfers(ts):
    return None if ts is None else tuple((_t(t.host_indices), _t(t.device_indices)) for t in ts)


def canonical_state(cache: HiMambaRadixCache, driver: Driver) -> tuple:
    """Everything that can steer the rest of a run, as nested tuples with canonical node numbers."""
    index: dict[int, int] = {}
    order: list = []

    def ref(n) -> int:
        if n is None:
            return -1
        k = index.get(id(n))
        if k is None:
            k = index[id(n)] = len(order)
            order.append(n)
        return k

    shapes: list[tuple] = []

    def describe_pending() -> None:
        while len(shapes) < len(order):
            n = order[len(shapes)]
            kids = tuple((repr(ck), ref(ch)) for ck, ch in sorted(n.children.items(), key=lambda kv: repr(kv[0])))
            shapes.append((tuple(n.key), ref(n.parent), kids, _t(n.value), _t(n.host_value), _t(n.mamba_value),
                           _t(n.mamba_host_value), n.full_lock_ref, n.mamba_lock_ref, n.host_ref_counter,
                           n.host_mamba_ref_counter, n.hit_count, None if n.hash_value is None else len(n.hash_value)))

    ref(cache.root_node)
    describe_pending()
    cc = cache.controller
    holders = (
        tuple(ref(n) for n in cache.evictable_full_device_leaves),
        tuple(ref(n) for n in cache.evictable_full_host_leaves),
        tuple(ref(n) for n in cache.full_lru_list.mru_to_lru()),
        tuple(ref(n) for n in cache.mamba_lru_list.mru_to_lru()),
        tuple(ref(n) for n in cache.mamba_host_lru_list.mru_to_lru()),
        tuple(ref(n) for n in cache.ongoing_write_through.values()),
        tuple(ref(n) for n in cache.ongoing_load_back.values()),
    )
    op_ids = sorted(set(cc.pending_backups) | {op.id for op in cc.ack_backup_queue} | set(cache.ongoing_backup))
    rank = {op_id: i for i, op_id in enumerate(op_ids)}
    backups = tuple((rank[k], ref(n), mp) for k, (n, mp) in cache.ongoing_backup.items())
    prefetch = tuple((rid, ref(anchor), tuple(tokens), tuple(host),
                      (tuple(op.host_indices), tuple(op.token_ids), tuple(op.prefix_tokens), _transfers(op.mamba),
                       op.completed_tokens, len(op.hash_value), op.mamba_hit, op.terminated))
                     for rid, (anchor, tokens, host, op) in cache.ongoing_prefetch.items())
    live = tuple((rid, tuple(r.tokens), tuple(r.kv), r.mamba_pool_idx, r.track_buffer, r.cache_protected_len,
                  ref(r.last_node), r.mamba_last_track_seqlen, tuple(r.prefix_indices))
                 for rid, r in driver.live.items())
    describe_pending()
    by_id = {n.id: i for i, n in enumerate(order)}

    def acks(queue):
        return tuple((tuple(by_id.get(i, ("?", i)) for i in a.node_ids), a.done) for a in queue)

    def storage(op):
        return (rank[op.id], tuple(op.host_indices), tuple(op.key),
                None if op.hash_value is None else len(op.hash_value), _transfers(op.mamba))

    times = sorted({n.last_access_time for n in order})
    t_rank = {t: i for i, t in enumerate(times)}
    nodes = tuple(s + (t_rank[n.last_access_time],) for s, n in zip(shapes, order))
    pools = tuple((tuple(p.free_slots), tuple(p._free_count), tuple(d.slots for d in p.double_frees))
                  for p in cache.pools.all().values())
    controller = (acks(cc.ack_write_queue), acks(cc.ack_load_queue),
                  tuple(storage(cc.pending_backups[k]) for k in sorted(cc.pending_backups)),
                  tuple(storage(op) for op in cc.ack_backup_queue), tuple(cc.prefetch_revoke_queue),
                  tuple(tuple(p) for p in cc.host_mem_release_queue), cc.prefetch_tokens_occupied,
                  cc.prefetch_capacity_limit)
    sizes = (cache.full_evictable_size_, cache.full_protected_size_, cache.mamba_evictable_size_,
             cache.mamba_protected_size_)
    return (nodes, holders, backups, prefetch, tuple(sorted(cache.prefetch_loaded_tokens_by_reqid.items())), live,
            controller, pools, sizes, len(cache.warnings), cache.crashed is not None)
