"""Search strategies over the schedules of a scenario's actors: exhaustive (preemption-bounded), random, PCT.

Vocabulary
- A *schedule* orders the actors' operations; each actor's own operations keep their order. A *switch* is a change
  of actor between two turns; a *preemption* is a switch away from an actor that still has operations left (the
  switches a schedule needs beyond the unavoidable ones). A failing run stops at the operation that raised, so a
  failing schedule is printed up to that operation: a replayable, possibly partial, schedule string.
- **exhaustive** is iterative preemption bounding (CHESS): all schedules with 0 preemptions, then 1, ... up to
  ``bound``; inside a level the search is depth-first, in rounds of ``BATCH`` prefixes each extended by one
  operation (a round is one process-pool map when ``jobs > 1``). Continuing the current actor is free; switching
  while it has operations left costs one preemption and queues the prefix for the next level. With pruning, a
  prefix whose state key (``statekey``) was already reached with no more preemptions is skipped: its suffix space
  is identical, so every outcome and end state below it has been seen.
- **random** and **pct** (``sampling``) run schedules drawn from a seed.

Determinism: every choice comes from ``random.Random(seed)`` or from the scenario's actor order; parallel runs
(``jobs > 1``, processes) compute the same function of each prefix or schedule and are merged in submission
order, so results equal a serial run's (``time_s`` aside).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from ..cli_numbers import LIMITS
from ..errors import SimcacheError, shown
from ..gcpace import fewer_collections
from ..pool import died
from . import workers
from .machine import Machine, Plan
from .results import SEARCH_FIX, ExploreResult, RunOut, Tally, count_text, finish, search_watch
from .sampling import sampled

STRATEGIES = ("exhaustive", "random", "pct")
MODES = ("keep", "fork", "replay")
REDUCTIONS = ("state", "none", "dpor")  # state-hash pruning (the default), none, sleep sets + state caching
Progress = Callable[[dict], None]


class ExploreError(SimcacheError):
    """Exploration arguments that do not fit (strategy, bound, budget, jobs)."""


@dataclass
class _Item:
    idx: tuple[int, ...]  # turn indices so far
    pos: tuple[int, ...]
    cur: int  # actor of the last turn, -1 at the start
    pre: int  # preemptions used
    key: bytes | None = None
    machine: Machine | None = None  # its state, while kept (keep mode)


def _choices(plan: Plan, item: _Item, bound: int | None) -> tuple[list[tuple[int, int]], bool]:
    """(actor index, preemptions after taking it) for each next turn within the bound; and whether one was cut."""
    lengths = plan.lengths
    free = item.cur >= 0 and item.pos[item.cur] < lengths[item.cur]
    order = ([item.cur] if free else []) + [i for i in range(len(lengths)) if i != item.cur or not free]
    out, cut = [], False
    for i in order:
        if item.pos[i] >= lengths[i]:
            continue
        pre = item.pre + (1 if free and i != item.cur else 0)
        if bound is not None and pre > bound:
            cut = True
            continue
        out.append((i, pre))
    return out, cut


# a child: (actor index, preemptions, state key or None when terminal or unkeyed, RunOut when terminal, machine or
# None)
Child = tuple[int, int, bytes | None, RunOut | None, Machine | None]


def _expand(plan: Plan, item: _Item, bound: int | None, mode: str, damage: dict,
            keyed: bool = True) -> tuple[list[Child], bool]:
    """The children of prefix ``item``: each choice run one step further; a non-terminal child's state key only
    when ``keyed`` (a search that prunes reads it; an unpruned one never does)."""
    choices, cut = _choices(plan, item, bound)
    base = item.machine
    if mode == "fork" or (mode == "keep" and base is None):
        base = Machine.replay(plan, item.idx)
    out: list[Child] = []
    for j, (i, pre) in enumerate(choices):
        if mode == "replay":
            m = Machine.replay(plan, item.idx + (i,))
        else:
            m = base if j == len(choices) - 1 else base.clone()
            m.step(plan, i)
        terminal = m.crash is not None or len(m.idx) == plan.total
        if terminal:
            out.append((i, pre, None, finish(m, damage), None))
        else:
            out.append((i, pre, m.key() if keyed else None, None, m if mode == "keep" else None))
    return out, cut


def _expand_remote(args) -> tuple[list[Child], bool]:
    item, bound, keyed = args
    return _expand(workers.PLAN, item, bound, "fork", workers.DAMAGE, keyed)


BATCH = 32  # prefixes expanded per round (one process-pool map); fixed, so any ``jobs`` gives the same order
PARK = 20_000  # machines kept for prefixes queued for the next level (about 15 kB each); beyond it they replay
QUEUE_LIMIT = 500_000  # prefixes queued for later levels; beyond it they are dropped and the search says it is partial
DEFAULT_BUDGET = 1_000_000  # schedules an exhaustive search runs when no budget is given (the CLI's and the API's)


@fewer_collections()
def exhaustive(plan: Plan, preset: str, bound: int | None = None, budget: int | None = None, prune: bool = True,
               jobs: int = 1, mode: str = "keep", until: str | None = None, iterative: bool = True,
               progress: Progress | None = None) -> ExploreResult:
    """Iterative preemption bounding, depth-first inside a level in rounds of ``BATCH`` prefixes; see the module
    doc. ``mode``: how a prefix's state is obtained (``keep`` the parent's machine and clone it per child,
    ``fork``: replay the parent once and clone, ``replay`` every child from scratch). ``until``: stop at the first
    failure whose signature contains this text ("" for any failure). ``iterative=False``: one depth-first search
    over all schedules within the bound (no fewest-preemptions-first order; a prefix reached again with fewer
    preemptions is searched again, since more of the bound is left)."""
    started = time.perf_counter()
    watch = search_watch()
    tally = Tally(plan, budget, until)
    visited: dict[bytes, int] = {}  # state key -> fewest preemptions it was reached with
    damage: dict = {}
    queues: dict[int, list[_Item]] = {0: [_Item((), (0,) * len(plan.actors), -1, 0)]}
    pruned, cut, stopped, parked, queued, dropped = 0, False, False, 0, 1, False
    pool = workers.make_pool(jobs, plan) if jobs > 1 else None
    try:
        while queues and not stopped:
            level = min(queues)
            parked = 0
            queued -= len(queues[level])
            # an item queued for this level and later reached with fewer preemptions was explored there
            stack = [it for it in reversed(queues.pop(level)) if it.key is None or visited.get(it.key, level) >= level]
            while stack and not stopped:
                batch = [stack.pop() for _ in range(min(BATCH, len(stack)))]
                if pool is not None:
                    args = [(_Item(it.idx, it.pos, it.cur, it.pre), bound, prune) for it in batch]
                    expanded: Iterable = pool.map(_expand_remote, args, chunksize=max(1, len(args) // jobs))
                else:
                    expanded = (_expand(plan, it, bound, mode, damage, prune) for it in batch)
                groups: list[list[_Item]] = []
                for it, (children, was_cut) in zip(batch, expanded, strict=True):
                    it.machine = None
                    cut |= was_cut
                    kept: list[_Item] = []
                    groups.append(kept)
                    for i, pre, key, out, m in children:
                        if out is not None:
                            tally.add(out)
                            if tally.full or tally.found:
                                stopped = True
                                break
                            continue
                        if prune:
                            seen = visited.get(key)
                            if seen is not None and seen <= pre:
                                pruned += 1
                                continue
                            visited[key] = pre
                        pos = list(it.pos)
                        pos[i] += 1
                        if pre == level or not iterative:
                            kept.append(_Item(it.idx + (i,), tuple(pos), i, pre, key, m))
                        elif queued >= QUEUE_LIMIT:  # the frontier is full: the search becomes partial
                            dropped = True
                        else:  # queued for the next level; its machine is kept while memory allows
                            parked += m is not None and parked < PARK
                            queue = queues.setdefault(pre, [])
                            queue.append(_Item(it.idx + (i,), tuple(pos), i, pre, key, m if parked < PARK else None))
                            queued += 1
                    if stopped:
                        break
                for kept in reversed(groups):
                    stack.extend(reversed(kept))
                watch.check("the search", SEARCH_FIX)
                if progress is not None:
                    progress(dict(runs=tally.runs, failing=tally.failing, level=level, pruned=pruned))
    except BrokenProcessPool:
        raise died(pool, "the search") from None
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    done = not (stopped or dropped)
    return tally.result("exhaustive", preset, bound, None, pruned, done, done and not cut, started)


def explore(scenario, preset: str | None = None, flags: dict | None = None, strategy: str = "exhaustive",
            bound: int | None = None, seed: int = 0, budget: int | None = None, jobs: int = 1, prune: bool = True,
            mode: str = "keep", until: str | None = None, progress: Progress | None = None,
            reduce: str | None = None) -> ExploreResult:
    """Search ``scenario``'s schedules under ``preset`` (+ ``flags``); see the module doc for the strategies.

    ``bound``: the preemption bound (exhaustive; None: unbounded) or the depth (pct; default 3). ``budget``: the
    most schedules to run (random and pct: default 1000; exhaustive: ``DEFAULT_BUDGET``). The command line's caps
    hold here too (``cli_numbers.LIMITS``: budget 10,000,000, bound 10,000, jobs 64, a 64-bit seed). ``until``:
    stop at the first failure whose signature contains this text ("" for any failure); it is then reported as
    ``first_failure``. ``reduce`` (exhaustive):
    ``state`` prunes prefixes whose state was seen (the default; ``prune=False`` is ``none``), ``none`` runs every
    schedule, ``dpor`` searches the whole space with sleep sets and state caching (``dpor``; no bound)."""
    from ..scenario import Scenario, load
    from ..simulate import resolve_flags
    from .machine import plan_for

    if strategy not in STRATEGIES:
        raise ExploreError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if mode not in MODES:
        raise ExploreError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    for name, v in (("bound", bound), ("budget", budget), ("jobs", jobs), ("seed", seed)):
        low, high = LIMITS[name]
        if name == "seed" and type(v) is not int:
            raise ExploreError(f"--seed must be a whole number, not {shown(v, 40)}")
        if v is not None and (type(v) is not int or v < low):
            raise ExploreError(f"--{name} must be a whole number >= {low:,}, not {shown(v, 40)}")
        if v is not None and v > high:  # the command line's caps hold in the API too
            said = str(v) if v < 10**100 else count_text(v)
            raise ExploreError(f"--{name} {said} is over the limit of {high:,}; give a smaller number")
    if reduce is not None and reduce not in REDUCTIONS:
        raise ExploreError(f"unknown reduction {reduce!r}; choose one of {', '.join(REDUCTIONS)}")
    if reduce == "dpor":
        extra = [o for o, given in (("--bound", bound is not None), ("--jobs", jobs != 1),
                                    ("--strategy", strategy != "exhaustive")) if given]
        if extra:
            raise ExploreError(f"--reduce dpor searches the whole schedule space exhaustively, in one process "
                               f"(an equivalent order may need more preemptions than a bound allows): drop "
                               f"{' and '.join(extra)}")
    sc = scenario if isinstance(scenario, Scenario) else load(scenario)
    name, fl = resolve_flags(sc, preset, flags)
    plan = plan_for(sc, fl)
    if strategy == "exhaustive" and budget is None:
        budget = DEFAULT_BUDGET
    if reduce == "dpor":
        from .dpor import dpor
        return dpor(plan, name, budget=budget, until=until, progress=progress)
    if reduce is not None:
        prune = reduce == "state"
    if strategy == "exhaustive":
        return exhaustive(plan, name, bound=bound, budget=budget, prune=prune, jobs=jobs, mode=mode, until=until,
                          progress=progress)
    depth = 3 if bound is None else bound
    if strategy == "pct" and depth < 1:
        raise ExploreError("--bound (the PCT depth) must be at least 1")
    return sampled(plan, name, strategy, seed, budget or 1000, depth=depth, jobs=jobs, until=until, progress=progress)
