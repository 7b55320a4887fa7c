"""Random and PCT schedules: drawn up front from ``random.Random(seed)`` (no feedback is needed, every actor with
operations left can always run), then run in order, serially or in worker processes.

- **random** is uniform over all schedules: the next actor is drawn with weight = its operations left.
- **pct** is Burckhardt et al.'s probabilistic concurrency testing with depth ``d``: the actors get the distinct
  priorities ``d..d+n-1`` in random order and ``d-1`` change points are drawn among the steps ``1..k``; at each step
  the highest-priority actor with operations left runs, except that at the ``i``-th change point it first drops
  to priority ``i`` (below every initial one) and the highest is picked again. A bug that needs ``d - 1`` ordering
  constraints is hit with probability at least ``1 / (n k^(d-1))`` per run.
"""
from __future__ import annotations

import random
import time

from ..gcpace import fewer_collections
from . import workers
from .machine import Machine, Plan
from .results import ExploreResult, RunOut, Tally, count_schedules, finish


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


@fewer_collections()
def sampled(plan: Plan, preset: str, strategy: str, seed: int, budget: int, depth: int = 3, jobs: int = 1,
            until: str | None = None, progress=None) -> ExploreResult:
    """Run ``budget`` drawn schedules (``strategy`` random or pct)."""
    started = time.perf_counter()
    rng = random.Random(seed)
    draws = [draw_random(rng, plan.lengths) if strategy == "random" else draw_pct(rng, plan.lengths, depth)
             for _ in range(budget)]
    tally = Tally(plan, budget, until)
    damage: dict = {}
    pool = workers.make_pool(jobs, plan) if jobs > 1 else None
    try:
        outs = pool.map(_run_remote, draws, chunksize=max(1, budget // (8 * jobs))) if pool else \
            (run_schedule(plan, d, damage) for d in draws)
        for out in outs:
            tally.add(out)
            if progress is not None and tally.runs % 64 == 0:
                progress(dict(runs=tally.runs, total=budget, failing=tally.failing))
            if tally.found:
                break
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    covered = len(set(draws)) == count_schedules(plan.lengths)
    return tally.result(strategy, preset, depth if strategy == "pct" else None, seed, 0, covered, covered, started)
