"""Fewer garbage collections during searches and replays: the collector's pace, raised for the duration of a call.

A search keeps tens of thousands of objects alive (the visited states, the machines parked for the next preemption
level) and makes and drops a cache's worth of objects per schedule. With Python's default pace (a young collection
every 700 net allocations, an older one every 10 of those) the collector rescans that live heap over and over: a
quarter of an exhaustive search's time went there (``benchmarks/bench_explore.py --only gc``). Raising the young
threshold to ``YOUNG`` makes collections rarer and as thorough (cycles are still collected, so memory stays
bounded: a few megabytes more at the peak). A replay (``ops_run.execute``, ``simulate``) is paced too: a traced
run keeps its growing event log alive, which the default pace rescans in the same way. Results never depend on it.

``ENABLED = False`` turns pacing off (the benchmark's baseline). A caller that disabled the collector keeps it
disabled; the previous thresholds come back on exit, also when the call raises.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG, OLDER = 50_000, 50
ENABLED = True


def _raise_pace() -> tuple[int, ...]:
    """Raise the thresholds to at least ``(YOUNG, OLDER, OLDER)`` (when ``ENABLED``); the ones before."""
    old = gc.get_threshold()
    if ENABLED:
        gc.set_threshold(max(old[0], YOUNG), max(old[1], OLDER), max(old[2], OLDER))
    return old


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the body with the collector's thresholds raised to at least ``(YOUNG, OLDER, OLDER)``."""
    old = _raise_pace()
    try:
        yield
    finally:
        gc.set_threshold(*old)


def pace_worker() -> None:
    """In a worker process that only searches: the raised pace for its whole life, and what it inherited from its
    parent (a forked worker starts with the parent's heap) set aside for good (``gc.freeze``), so that no collection
    rescans it or touches its shared pages."""
    _raise_pace()
    if ENABLED:
        gc.freeze()
