"""Worker processes: the plan is sent once per process; results come back in submission order.

``fork`` starts workers fast (they inherit the imported modules) and is used unless CUDA is initialised, where only
``spawn`` is safe. Each worker keeps its own damage memo (a pure function of the end state, so any split agrees).
"""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

from .machine import Plan

PLAN: Plan | None = None
DAMAGE: dict = {}


def init_worker(plan: Plan) -> None:
    global PLAN
    PLAN = plan
    DAMAGE.clear()


def mp_context():
    import multiprocessing

    import torch

    fork = "fork" in multiprocessing.get_all_start_methods() and not torch.cuda.is_initialized()
    return multiprocessing.get_context("fork" if fork else "spawn")


def make_pool(jobs: int, plan: Plan) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp_context(), initializer=init_worker, initargs=(plan,))
