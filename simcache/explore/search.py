"""Search strategies over the schedules of a scenario's actors: exhaustive (preemption-bounded), random, PCT.

Vocabulary
- A *schedule* orders the actors' operations; each actor's own operations keep their order. A *switch* is a change
  of actor between two turns; a *preemption* is a switch away from an actor that still has operations left (the
  switches a schedule needs beyond the unavoidable ones). A failing run stops at the operation that raised, so a
  failing schedule is printed up to that operation: a replayable, possibly partial, schedule string.
- **exhaustive** is iterative preemption bounding (CHESS): all schedules with 0 preemptions, then 1, ... up to
  ``bound``; inside a level, prefixes are extended breadth-first by one operation. Continuing the current actor is
  free; switching while it has operations left costs one preemption and queues the prefix for the next level.
  With pruning, a prefix whose state key (``machine.Machine.key``) was already reached with no more preemptions is
  skipped: its suffix space is identical, so every outcome and end state below it has been seen.
- **random** samples uniformly among all schedules (the next actor is drawn with weight = its operations left).
- **pct** is Burckhardt et al.'s probabilistic concurrency testing with depth ``d``: distinct random priorities
  ``d..d+n-1``, ``d-1`` change points drawn among the steps; the highest-priority actor with operations left runs,
  and at the ``i``-th change point the actor about to run drops to priority ``i``.

Determinism: every choice comes from ``random.Random(seed)`` or from the scenario's actor order; parallel runs
(``jobs > 1``, processes) compute the same function of each prefix or schedule and are merged in submission
order, so results equal a serial run's (``time_s`` aside).
"""
from __future__ import annotations

import math
import random
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from ..driver import Crash
from ..errors import SimcacheError
from ..scheduler import format_turns
from .machine import Machine, Plan, signature

STRATEGIES = ("exhaustive", "random", "pct")
MODES = ("keep", "fork", "replay")
Progress = Callable[[dict], None]


class ExploreError(SimcacheError):
    """Exploration arguments that do not fit (strategy, bound, budget, jobs)."""


@dataclass(frozen=True)
class Failure:
    schedule: str
    steps: int
    preemptions: int
    switches: int
    assertion: str  # "AssertionError: parent does not have child key, 1"
    raised_in: str
    signature: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExploreResult:
    scenario: str
    preset: str
    strategy: str
    bound: int | None
    seed: int | None
    budget: int | None
    schedules_run: int
    distinct_states: int
    failing: int
    failing_schedules: tuple[str, ...]
    outcomes: tuple[tuple[str, int], ...]  # signature -> schedules run with it, sorted
    first_failure: Failure | None  # exhaustive: the first found (fewest preemptions); else the fewest preemptions
    damage: tuple[tuple[str, str], ...]  # "leaked:host_kv" -> the first schedule whose end state has it
    pruned: int
    exhausted: bool  # every schedule within the bound was covered (no budget cut, no early stop)
    space_covered: bool  # every schedule of the scenario was covered (exhausted, and the bound cut nothing off)
    total_schedules: int  # complete interleavings of the scenario's actors
    time_s: float = field(default=0.0, compare=False)

    @property
    def signatures(self) -> set[str]:
        return {s for s, _ in self.outcomes}

    @property
    def failing_fraction(self) -> float:
        return self.failing / self.schedules_run if self.schedules_run else 0.0

    @property
    def rate(self) -> float:
        return self.schedules_run / self.time_s if self.time_s else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["outcomes"] = dict(self.outcomes)
        d["damage"] = dict(self.damage)
        d["failing_schedules"] = list(self.failing_schedules)
        d["first_failure"] = self.first_failure.as_dict() if self.first_failure else None
        return d


def count_preemptions(turns, lengths: dict[str, int]) -> int:
    left, n = dict(lengths), 0
    for i, a in enumerate(turns):
        left[a] -= 1
        if i + 1 < len(turns) and turns[i + 1] != a and left[a] > 0:
            n += 1
    return n


def count_schedules(lengths: Iterable[int]) -> int:
    lengths = list(lengths)
    out = math.factorial(sum(lengths))
    for n in lengths:
        out //= math.factorial(n)
    return out


# --- one run's result, as plain data that crosses process boundaries ---
# (turn indices, crash or None, end-state key, damage)
RunOut = tuple[tuple[int, ...], Crash | None, bytes, tuple]


class _Tally:
    def __init__(self, plan: Plan, budget: int | None) -> None:
        self.plan, self.budget = plan, budget
        self.lengths = dict(zip(plan.actors, plan.lengths))
        self.runs = self.failing = 0
        self.outcomes: Counter = Counter()
        self.ends: set[bytes] = set()
        self.failing_schedules: list[str] = []
        self.first: Failure | None = None
        self.best: Failure | None = None
        self.damage: dict[str, str] = {}

    @property
    def full(self) -> bool:
        return self.budget is not None and self.runs >= self.budget

    def add(self, out: RunOut) -> None:
        idx, crash, end, damage = out
        turns = tuple(self.plan.actors[i] for i in idx)
        self.runs += 1
        sig = signature(crash)
        self.outcomes[sig] += 1
        self.ends.add(end)
        text = format_turns(turns)
        for tag, _ in damage:
            self.damage.setdefault(tag, text)
        if crash is None:
            return
        self.failing += 1
        if len(self.failing_schedules) < 5:
            self.failing_schedules.append(text)
        sw = sum(1 for a, b in zip(turns, turns[1:]) if a != b)
        f = Failure(text, len(turns), count_preemptions(turns, self.lengths), sw, crash.outcome, crash.function, sig)
        self.first = self.first or f
        if self.best is None or (f.preemptions, f.steps, f.switches, f.schedule) < \
                (self.best.preemptions, self.best.steps, self.best.switches, self.best.schedule):
            self.best = f

    def result(self, strategy: str, preset: str, bound, seed, pruned: int, exhausted: bool, covered: bool,
               started: float, first: bool) -> ExploreResult:
        return ExploreResult(
            self.plan.name, preset, strategy, bound, seed, self.budget, self.runs, len(self.ends), self.failing,
            tuple(self.failing_schedules), tuple(sorted(self.outcomes.items())), self.first if first else self.best,
            tuple(sorted(self.damage.items())), pruned, exhausted, covered, count_schedules(self.plan.lengths),
            time.perf_counter() - started)


def _finish(m: Machine) -> RunOut:
    return tuple(m.idx), m.crash, m.key() + signature(m.crash).encode(), m.damage()


# --- workers: the plan is sent once per process ---
_PLAN: Plan | None = None


def _init_worker(plan: Plan) -> None:
    global _PLAN
    _PLAN = plan


def _pool(jobs: int, plan: Plan) -> ProcessPoolExecutor:
    import multiprocessing

    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(plan,))


# --- exhaustive ---
@dataclass
class _Item:
    idx: tuple[int, ...]  # turn indices so far
    pos: tuple[int, ...]
    cur: int  # actor of the last turn, -1 at the start
    pre: int  # preemptions used
    key: bytes | None = None
    machine: Machine | None = None  # kept only for the next breadth-first layer of the same level


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


# a child: (actor index, preemptions, state key or None when terminal, RunOut when terminal, machine or None)
Child = tuple[int, int, bytes | None, RunOut | None, Machine | None]


def _expand(plan: Plan, item: _Item, bound: int | None, mode: str) -> tuple[list[Child], bool]:
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
        terminal = m.crash is not None or len(m.turns) == plan.total
        if terminal:
            out.append((i, pre, None, _finish(m), None))
        else:
            out.append((i, pre, m.key(), None, m if mode == "keep" else None))
    return out, cut


def _expand_remote(args) -> tuple[list[Child], bool]:
    item, bound = args
    return _expand(_PLAN, item, bound, "fork")


def exhaustive(plan: Plan, preset: str, bound: int | None = None, budget: int | None = None, prune: bool = True,
               jobs: int = 1, mode: str = "keep", stop_at_first: bool = False,
               progress: Progress | None = None) -> ExploreResult:
    """Iterative preemption bounding; see the module doc. ``mode``: how a prefix's state is obtained (``keep`` the
    parent's machine and clone it per child, ``fork``: replay the parent once and clone, ``replay`` every child)."""
    started = time.perf_counter()
    tally = _Tally(plan, budget)
    visited: dict[bytes, int] = {}  # state key -> fewest preemptions it was reached with
    queues: dict[int, list[_Item]] = {0: [_Item((), (0,) * len(plan.actors), -1, 0)]}
    pruned, cut, stopped = 0, False, False
    pool = _pool(jobs, plan) if jobs > 1 else None
    try:
        while queues and not stopped:
            level = min(queues)
            # an item queued for this level and later reached with fewer preemptions was explored there
            frontier = [it for it in queues.pop(level) if it.key is None or visited.get(it.key, level) >= level]
            while frontier and not stopped:
                if pool is not None:
                    args = [(_Item(it.idx, it.pos, it.cur, it.pre), bound) for it in frontier]
                    expanded: Iterable = pool.map(_expand_remote, args, chunksize=max(1, len(args) // (4 * jobs)))
                else:
                    expanded = (_expand(plan, it, bound, mode) for it in frontier)
                nxt: list[_Item] = []
                for it, (children, was_cut) in zip(frontier, expanded):
                    it.machine = None
                    cut |= was_cut
                    for i, pre, key, out, m in children:
                        if out is not None:
                            tally.add(out)
                            if tally.full or (stop_at_first and tally.failing):
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
                        child = _Item(it.idx + (i,), tuple(pos), i, pre, key, m if pre == level else None)
                        (nxt if pre == level else queues.setdefault(pre, [])).append(child)
                    if progress is not None:
                        progress(dict(runs=tally.runs, failing=tally.failing, level=level, pruned=pruned))
                    if stopped:
                        break
                frontier = nxt
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return tally.result("exhaustive", preset, bound, None, pruned, not stopped, not (cut or stopped), started, True)


# --- random and PCT: schedules drawn up front (no feedback needed), run in order ---
def draw_random(rng: random.Random, lengths: tuple[int, ...]) -> tuple[int, ...]:
    left, total, out = list(lengths), sum(lengths), []
    while total:
        r = rng.randrange(total)
        i = 0
        while r >= left[i]:
            r -= left[i]
            i += 1
        out.append(i)
        left[i] -= 1
        total -= 1
    return tuple(out)


def draw_pct(rng: random.Random, lengths: tuple[int, ...], depth: int) -> tuple[int, ...]:
    n, k = len(lengths), sum(lengths)
    prio = list(range(depth, depth + n))
    rng.shuffle(prio)
    points = rng.sample(range(1, k + 1), min(max(depth - 1, 0), k))
    change = {step: j + 1 for j, step in enumerate(points)}
    left, out = list(lengths), []
    for s in range(1, k + 1):
        live = [i for i in range(n) if left[i]]
        t = max(live, key=lambda i: prio[i])
        if s in change:
            prio[t] = change[s]
            t = max(live, key=lambda i: prio[i])
        out.append(t)
        left[t] -= 1
    return tuple(out)


def run_schedule(plan: Plan, idx: tuple[int, ...]) -> RunOut:
    return _finish(Machine.replay(plan, idx))


def _run_remote(idx: tuple[int, ...]) -> RunOut:
    return run_schedule(_PLAN, idx)


def sampled(plan: Plan, preset: str, strategy: str, seed: int, budget: int, depth: int = 3, jobs: int = 1,
            stop_at_first: bool = False, progress: Progress | None = None) -> ExploreResult:
    started = time.perf_counter()
    rng = random.Random(seed)
    draws = [draw_random(rng, plan.lengths) if strategy == "random" else draw_pct(rng, plan.lengths, depth)
             for _ in range(budget)]
    tally = _Tally(plan, budget)
    pool = _pool(jobs, plan) if jobs > 1 and not stop_at_first else None
    try:
        outs = pool.map(_run_remote, draws, chunksize=max(1, budget // (8 * jobs))) if pool else \
            (run_schedule(plan, d) for d in draws)
        for out in outs:
            tally.add(out)
            if progress is not None and tally.runs % 64 == 0:
                progress(dict(runs=tally.runs, total=budget, failing=tally.failing))
            if stop_at_first and tally.failing:
                break
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    covered = len(set(draws)) == count_schedules(plan.lengths)
    return tally.result(strategy, preset, depth if strategy == "pct" else None, seed, 0, covered, covered,
                        started, False)


def explore(scenario, preset: str | None = None, flags: dict | None = None, strategy: str = "exhaustive",
            bound: int | None = None, seed: int = 0, budget: int | None = None, jobs: int = 1, prune: bool = True,
            mode: str = "keep", stop_at_first: bool = False, progress: Progress | None = None) -> ExploreResult:
    """Search ``scenario``'s schedules under ``preset`` (+ ``flags``); see the module doc for the strategies.

    ``bound``: the preemption bound (exhaustive; None: unbounded) or the depth (pct; default 3). ``budget``: the
    most schedules to run (random and pct: default 1000)."""
    from ..scenario import Scenario, load
    from ..simulate import resolve_flags
    from .machine import plan_for

    if strategy not in STRATEGIES:
        raise ExploreError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if mode not in MODES:
        raise ExploreError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    for name, v, low in (("bound", bound, 0), ("budget", budget, 1), ("jobs", jobs, 1)):
        if v is not None and (type(v) is not int or v < low):
            raise ExploreError(f"--{name} must be a whole number >= {low}, not {v!r}")
    if type(seed) is not int:
        raise ExploreError(f"--seed must be a whole number, not {seed!r}")
    sc = scenario if isinstance(scenario, Scenario) else load(scenario)
    name, fl = resolve_flags(sc, preset, flags)
    plan = plan_for(sc, fl)
    if strategy == "exhaustive":
        return exhaustive(plan, name, bound, budget, prune, jobs, mode, stop_at_first, progress)
    depth = 3 if bound is None else bound
    if strategy == "pct" and depth < 1:
        raise ExploreError("--bound (the PCT depth) must be at least 1")
    return sampled(plan, name, strategy, seed, budget or 1000, depth, jobs, stop_at_first, progress)
