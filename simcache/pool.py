"""Worker processes for the long runs (the explorer's searches, the workload's streams): how many, how started, and
how stopped at once when Ctrl-C or an error unwinds.

``fork`` starts workers fast (they inherit the imported modules) and is used unless CUDA is initialised, where only
``spawn`` is safe. Results never depend on the number of workers.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from .errors import SimcacheError


class WorkerDied(SimcacheError):
    """A worker process died under a search or a workload (the out-of-memory killer, a signal): nothing is written."""


def quiet_worker() -> None:
    """Workers ignore Ctrl-C: the parent alone stops the pool and says one sentence (no worker tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def workers_for(jobs: int, tasks: int | None = None) -> int:
    """Processes to start for ``jobs``: never more than the cores, nor than the tasks (results do not depend on it)."""
    n = min(jobs, os.cpu_count() or 1)
    return max(1, n if tasks is None else min(n, tasks))


def mp_context():
    import multiprocessing

    import torch

    fork = "fork" in multiprocessing.get_all_start_methods() and not torch.cuda.is_initialized()
    return multiprocessing.get_context("fork" if fork else "spawn")


class Pool(ProcessPoolExecutor):
    """A process pool that, shut down while Ctrl-C (or any error) unwinds, stops its workers at once instead of
    waiting for their chunks: the parent says one sentence and exits 130 within a moment."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if sys.exc_info()[0] is not None:
            stop_workers(self)
            wait, cancel_futures = False, True
        super().shutdown(wait=wait, cancel_futures=cancel_futures)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        try:
            proc.terminate()
        except (OSError, AttributeError):
            pass


def _how(code: int) -> str:
    if code == -signal.SIGKILL:
        return "killed by SIGKILL, as the out-of-memory killer does"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def died(pool: ProcessPoolExecutor | None, what: str) -> WorkerDied:
    """The sentence for a pool a worker broke by dying: which worker, how, and that ``what`` wrote nothing. The
    pool terminates the other workers (SIGTERM) once one dies, so the one that died first is the one that did not
    end by SIGTERM."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    dead = []
    for _ in range(20):  # the pool may see the break before the dead worker is reaped: up to 2 s for its exit code
        dead = [(i, p) for i, p in enumerate(procs, 1) if p.exitcode is not None and p.exitcode != -signal.SIGTERM]
        if dead or not procs:
            break
        time.sleep(0.1)
    who = (f"worker process {dead[0][0]} of {len(procs)} (pid {dead[0][1].pid}) died ({_how(dead[0][1].exitcode)})"
           if dead else "a worker process died")
    return WorkerDied(f"{who}, so {what} stopped and nothing was written; run it again with fewer --jobs or on a "
                      f"machine with more free memory")


@contextmanager
def worker_deaths(pool: ProcessPoolExecutor | None, what: str):
    """Turn a pool broken by a dead worker into ``WorkerDied`` (one sentence), never a ``BrokenProcessPool``."""
    try:
        yield
    except BrokenProcessPool:
        raise died(pool, what) from None
