"""Random and PCT schedules: drawn one at a time from ``random.Random(seed)`` (no feedback is needed, every actor
with operations left can always run) and run in order, serially or in worker processes. The draws are streamed: a
budget of ten million never holds more than two windows of draws (``WINDOW`` chunks per worker) in memory.

- **random** is uniform over all schedules: the next actor is drawn with weight = its operations left.
- **pct** is Burckhardt et al.'s probabilistic concurrency testing with depth ``d``: the actors get the distinct
  priorities ``d..d+n-1`` in random order and ``d-1`` change points are drawn among the steps ``1..k``; at each step
  the highest-priority actor with operations left runs, except that at the ``i``-th change point it first drops
  to priority ``i`` (below every initial one) and the highest is picked again. A bug that needs ``d - 1`` ordering
  constraints is hit with probability at least ``1 / (n k^(d-1))`` per run.
"""
from __future__ import annotations

import collections
import itertools
import random
import time
from collections.abc import Iterator

from ..gcpace import fewer_collections
from ..pool import worker_deaths
from . import workers
from .machine import Machine, Plan
from .results import SEARCH_FIX, ExploreResult, RunOut, Tally, count_schedules, finish, search_watch


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


def run_schedule(plan: Plan, idx: tuple[int, ...], damage: dict | None = None) -> RunOut:
    return finish(Machine.replay(plan, idx), {} if damage is None else damage)


def _run_remote(idx: tuple[int, ...]) -> RunOut:
    return run_schedule(workers.PLAN, idx, workers.DAMAGE)


CHUNK = 256  # most draws sent to a worker at once
WINDOW = 4  # chunks per worker in one window; two windows are in flight at most


def _draws(rng: random.Random, plan: Plan, strategy: str, budget: int, depth: int) -> Iterator[tuple[int, ...]]:
    for _ in range(budget):
        yield draw_random(rng, plan.lengths) if strategy == "random" else draw_pct(rng, plan.lengths, depth)


def _windows(items: Iterator, size: int) -> Iterator[list]:
    while window := list(itertools.islice(items, size)):
        yield window


def _mapped(pool, draws: Iterator[tuple[int, ...]], jobs: int, budget: int) -> Iterator[RunOut]:
    """The runs of ``draws`` in order, in worker processes, with at most two windows submitted at once."""
    chunk = max(1, min(budget // (8 * jobs), CHUNK))
    pending: collections.deque = collections.deque()
    for window in _windows(draws, chunk * jobs * WINDOW):
        pending.append(pool.map(_run_remote, window, chunksize=chunk))
        if len(pending) > 1:
            yield from pending.popleft()
    while pending:
        yield from pending.popleft()


@fewer_collections()
def sampled(plan: Plan, preset: str, strategy: str, seed: int, budget: int, depth: int = 3, jobs: int = 1,
            until: str | None = None, progress=None) -> ExploreResult:
    """Run ``budget`` drawn schedules (``strategy`` random or pct), each drawn just before it is needed."""
    started = time.perf_counter()
    watch = search_watch()
    rng = random.Random(seed)
    total = count_schedules(plan.lengths)
    seen: set | None = set() if total <= budget else None  # the space can be covered only when the budget allows
    draws = _draws(rng, plan, strategy, budget, depth)
    if seen is not None:
        draws = (seen.add(d) or d for d in draws)
    tally = Tally(plan, budget, until)
    damage: dict = {}
    pool = workers.make_pool(jobs, plan) if jobs > 1 else None
    try:
        with worker_deaths(pool, "the search"):
            outs = _mapped(pool, draws, jobs, budget) if pool else (run_schedule(plan, d, damage) for d in draws)
            for out in outs:
                tally.add(out)
                if tally.runs % 64 == 0:
                    watch.check("the search", SEARCH_FIX)
                    if progress is not None:
                        progress(dict(runs=tally.runs, total=budget, failing=tally.failing))
                if tally.found:
                    break
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    covered = seen is not None and len(seen) == total
    return tally.result(strategy, preset, depth if strategy == "pct" else None, seed, 0, covered, covered, started,
                        total=total)
