"""Worker processes for the long runs (the explorer's searches, the workload's streams): how many, how started, and
how stopped at once when Ctrl-C or an error unwinds.

``fork`` starts workers fast (they inherit the imported modules) and is used unless CUDA is initialised, where only
``spawn`` is safe. Results never depend on the number of workers.
"""
from __future__ import annotations

import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor


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
