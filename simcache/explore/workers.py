"""The explorer's worker state: the plan is sent once per process; results come back in submission order.

Each worker keeps its own damage memo (a pure function of the end state, so any split agrees). The pool itself
(start method, Ctrl-C handling) is ``simcache.pool``, shared with the workload.
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

from ..gcpace import pace_worker
from ..pool import Pool, mp_context, quiet_worker, workers_for
from .machine import Plan

PLAN: Plan | None = None
DAMAGE: dict = {}


def init_worker(plan: Plan) -> None:
    global PLAN
    quiet_worker()
    pace_worker()
    PLAN = plan
    DAMAGE.clear()


def make_pool(jobs: int, plan: Plan) -> ProcessPoolExecutor:
    return Pool(max_workers=workers_for(jobs), mp_context=mp_context(), initializer=init_worker, initargs=(plan,))
