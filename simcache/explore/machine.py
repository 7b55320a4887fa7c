"""Stepping a scenario one operation at a time, and the canonical state key that lets the explorer prune.

Vocabulary
- A *plan* is what a run needs besides its schedule: the config, the flags, and each actor's operations with their
  request ids already resolved (an actor's ids depend only on its own earlier operations, never on the interleaving,
  so ``Scenario.linearize`` and the plan agree on every schedule).
- A *machine* is a fresh cache and driver that applies one actor's next operation per ``step``, exactly as
  ``ops_run.execute`` does (same op indices, same ``Skip`` statuses, the first exception of the simulated cache ends
  the run), without a recorder: the fast path.
- The *state key* of a machine (``key``) digests its canonical state (``statekey``) and each actor's position.
- With ``data=False`` (the explorer's default) the pools keep no KV data: writes, reads and tier copies of the
  fingerprints are skipped, since no decision of the cache reads them. ``clone`` copies a machine (``fastcopy``).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from itertools import compress, filterfalse
from operator import not_

from ..cache import HiMambaRadixCache
from ..crash import signature  # noqa: F401 -- its home is crash.py; the explorer imports it from here
from ..driver import Driver
from ..errors import SimcacheError
from ..operations import RAISED
from ..ops_run import build_config, new_cache
from ..presets import is_unified
from ..scenario import Scenario
from ..scheduler import Schedule, format_turns
from ..versions import Flags
from .fastcopy import fast_copy
from .statekey import canonical_state, digest


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


# id(plan) -> (plan, its cache config, its ops by actor index, its steps by actor index): once per plan. A step is
# (op, the driver method that runs it), looked up once here rather than per operation (None for an unknown op:
# ``Driver.step`` names it).
_PREPARED: dict[int, tuple] = {}


def _prepared(plan: Plan) -> tuple:
    got = _PREPARED.get(id(plan))
    if got is None or got[0] is not plan:
        if len(_PREPARED) > 64:
            _PREPARED.clear()
        ops = tuple(plan.ops[a] for a in plan.actors)
        if is_unified(plan.flags):  # the unified family: its cache, its driver (``ops_run.new_cache``)
            from ..unified.cache import UnifiedRadixCache
            from ..unified.run import UnifiedDriver

            new_cache(plan.config, plan.flags)  # a config it refuses: one sentence, here
            config = dataclasses.replace(build_config(plan.config, Flags()), device="cpu")
            driver, make = UnifiedDriver, functools.partial(UnifiedRadixCache, config, plan.flags)
        else:
            config = dataclasses.replace(build_config(plan.config, plan.flags), device="cpu")
            driver, make = Driver, functools.partial(HiMambaRadixCache, config)
        steps = tuple(tuple((op, driver.RUN.get(op.get("op"))) for op in actor_ops) for actor_ops in ops)
        got = _PREPARED[id(plan)] = (plan, config, ops, steps, driver, make)
    return got


def _config(plan: Plan):
    return _prepared(plan)[1]


def _no_write(slots, values) -> None:
    return None


def _zeros(slots) -> list[int]:
    return [0] * len(slots)


def _no_copy(pairs) -> None:
    return None


class Machine:
    """A cache + driver stepped one scheduler-level operation at a time (no recorder); see the module doc."""

    __slots__ = ("cache", "driver", "index", "crash", "pos", "actors", "idx", "statuses")

    def __init__(self, plan: Plan, data: bool = False) -> None:
        prepared = _prepared(plan)
        self.cache = prepared[5]()
        if not data:
            for pool in self.cache.pools.all().values():
                pool.write, pool.read, pool.keeps_data = _no_write, _zeros, False
            self.cache.controller._copy = _no_copy
        self.driver = prepared[4](self.cache, retry_mamba_alloc=plan.config.get("driver") == "scheduler")
        self.index, self.crash = 0, None
        self.pos = [0] * len(plan.actors)
        self.actors = plan.actors
        self.idx: list[int] = []  # the turns so far, as actor indices
        self.statuses: list[str] = []
        if plan.initial:
            self._apply(({"op": "inject", "nodes": list(plan.initial)}, Driver.RUN["inject"]))

    @property
    def turns(self) -> list[str]:
        """The turns so far, as actor names."""
        actors = self.actors
        return [actors[i] for i in self.idx]

    @classmethod
    def replay(cls, plan: Plan, turns) -> Machine:
        """A machine after ``turns`` (actor indices), stopped early at a crash."""
        m = cls(plan)
        steps = _prepared(plan)[3]
        pos, idx, apply = m.pos, m.idx, m._apply
        for i in turns if m.crash is None else ():  # ``step``, inlined: one schedule is a dozen operations
            k = pos[i]
            pos[i] = k + 1
            idx.append(i)
            if apply(steps[i][k]) == RAISED:
                break
        return m

    def _apply(self, step: tuple) -> str:
        """``Driver.step`` on a prepared step, without its lookup of the op's method (same statuses, same crash)."""
        op, run = step
        driver, index = self.driver, self.index
        try:
            status = driver.step(op, index, run)  # run None: an unknown op, its error
        except SimcacheError as e:  # a conflict only some interleavings reach: name the one that did
            raise type(e)(f"{e} (schedule: {format_turns(self.turns)})" if self.idx else str(e)) from None
        if status == RAISED:
            self.crash = self.cache.crashed
        self.index = index + 1
        self.statuses.append(status)
        return status

    def step(self, plan: Plan, actor_index: int) -> str:
        k = self.pos[actor_index]
        self.pos[actor_index] = k + 1
        self.idx.append(actor_index)
        return self._apply(_prepared(plan)[3][actor_index][k])

    def clone(self) -> Machine:
        """An independent copy (``fast_copy``); the pools' data tensors are shared (see the class doc)."""
        memo: dict = {}
        new = Machine.__new__(Machine)
        new.cache = fast_copy(self.cache, memo)
        new.driver = fast_copy(self.driver, memo)
        new.index, new.crash = self.index, self.crash
        new.pos, new.actors, new.idx = list(self.pos), self.actors, list(self.idx)
        new.statuses = list(self.statuses)
        return new

    def damage(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``(("leaked:host_kv", slots), ("double_free:device_kv", slots))`` for every damaged pool, sorted.

        Leaked: allocated, and referenced by no attached node, live request, prefetch or host release page (what
        ``state.accounting`` calls leaked, computed without its other columns)."""
        cache = self.cache
        pools = cache.pools
        if is_unified(cache.flags):
            return self._unified_damage()
        refs: dict[str, set] = {"device_kv": set(), "device_mamba": set(), "host_kv": set(), "host_mamba": set()}
        dkv, dm, hkv, hm = refs["device_kv"], refs["device_mamba"], refs["host_kv"], refs["host_mamba"]
        root, ck = cache.root_node, cache.child_key
        stack = [root]
        while stack:  # the attached nodes (state.attached_ids), root included
            n = stack.pop()
            if n.value is not None:
                dkv.update(n.value)
            if n.mamba_value is not None:
                dm.update(n.mamba_value)
            if n.host_value is not None:
                hkv.update(n.host_value)
            if n.mamba_host_value is not None:
                hm.update(n.mamba_host_value)
            for k, c in n.children.items():
                if c.parent is n and len(c.key) > 0 and ck(c.key) == k:
                    stack.append(c)
        for r in self.driver.live.values():
            dkv.update(r.kv[r.cache_protected_len : len(r.tokens)])
            dm.update(s for s in (r.mamba_pool_idx, r.track_buffer) if s is not None)
        for _, _, host, op in cache.ongoing_prefetch.values():
            hkv.update(host)
            for t in op.mamba or ():
                hm.update(t.host_indices or ())
        for page in cache.controller.host_mem_release_queue:
            hkv.update(page)
        out = []
        for name in pools.NAMES:
            pool = getattr(pools, name)
            if len(pool.free_slots) == pool.size and not pool.double_frees:
                continue  # every slot free once (counts equal occurrences in the free list): nothing allocated
            # allocated (free count 0) and held by nothing, at C speed: the slots whose count is falsy, less held ones
            counts = pool._free_count
            leaked = tuple(filterfalse(refs[name].__contains__, compress(range(len(counts)), map(not_, counts))))
            if leaked:
                out.append((f"leaked:{name}", leaked))
        for name in pools.NAMES:
            pool = getattr(pools, name)
            if pool.double_frees:
                out.append((f"double_free:{name}", tuple(sorted({s for d in pool.double_frees for s in d.slots}))))
        return tuple(sorted(out))

    def _unified_damage(self) -> tuple:
        """``damage`` of a unified machine: the slots its owners refer to are ``unified.ledger``'s."""
        from ..unified.ledger import referenced_slots

        refs = referenced_slots(self.cache, list(self.driver.live.values()))
        out = []
        for name, pool in self.cache.pools.all().items():
            used = set(compress(range(len(pool._free_count)), map(not_, pool._free_count)))
            leaked = tuple(sorted(used - set(refs[name])))
            if leaked:
                out.append((f"leaked:{name}", leaked))
            if pool.double_frees:
                out.append((f"double_free:{name}", tuple(sorted({s for d in pool.double_frees for s in d.slots}))))
        return tuple(sorted(out))

    def key(self) -> bytes:
        """The canonical state key (a 16-byte digest), positions included."""
        if is_unified(self.cache.flags):
            from .unified_key import unified_key

            return unified_key(self.cache, self.driver, tuple(self.pos))
        return digest((tuple(self.pos), canonical_state(self.cache, self.driver)))
