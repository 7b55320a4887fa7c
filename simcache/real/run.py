"""Run a scenario or an operation file on SGLang's real cache, and diff the result with the model's, field by field.

``run_real(scenario, loaded)`` returns one dict with ``run_ops``'s field names and formats (``FIELDS``): the outcome,
the exception text, the raising SGLang function and the call chain (function names, outermost first; with their
file lines in ``chain_lines``), the step, the status letters, the canonical tree and its slots, counters, in-flight
maps, double frees with their SGLang callers, slot accounting and stale references. ``diff`` lists the fields where
two such results differ.
"""
from __future__ import annotations

from collections.abc import Iterable

from ..operations import RAISED
from ..scenario import Scenario
from ..scheduler import Schedule
from .driver import RealDriver, exception_fields  # noqa: F401 -- exception_fields re-exported
from .env import Env
from .loader import Loaded

# the fields a real result shares with the model's (``run_ops`` / ``simulate(...).result``), in report order
FIELDS = ("outcome", "sig", "raised_in", "chain", "step", "status", "first_stale", "stale_final", "tree", "tree_slots",
          "counters", "inflight", "double_frees", "accounting", "free")


def linear_ops(scenario: Scenario, schedule: str | Schedule | None = None) -> list[tuple[str, dict]]:
    """(actor, op) in schedule order, as ``simulate`` runs them (the scenario's own schedule by default)."""
    sched = schedule if isinstance(schedule, Schedule) else scenario.parse_schedule(schedule)
    return scenario.linearize(sched)


def run_real(scenario: Scenario, loaded: Loaded, schedule: str | Schedule | None = None,
             ops: Iterable[tuple[str | None, dict]] | None = None, memory_limit_mb: float | None = None) -> dict:
    """Run ``scenario`` (its schedule, or ``schedule``; or the explicit (actor, op) list ``ops``) on a fresh real
    HiMamba cache of ``loaded`` -> the result dict (``FIELDS``, ``chain_lines``, ``source``); ``memory_limit_mb``
    as ``run_linear``'s."""
    return run_linear(Env, RealDriver, scenario, loaded, schedule, ops, memory_limit_mb)


def run_linear(env_cls, driver_cls, scenario: Scenario, loaded: Loaded, schedule: str | Schedule | None = None,
               ops: Iterable[tuple[str | None, dict]] | None = None, memory_limit_mb: float | None = None) -> dict:
    """The operations (``ops``, else ``scenario``'s under ``schedule``) on a fresh real cache (``env_cls(loaded,
    config, max_ctx)``) driven by ``driver_cls(env)``, one ``step`` each (``simcache.driver.Steps``: the one place
    an operation is classified), until the end or the first exception of the real code -> the result dict.

    ``memory_limit_mb`` (default ``$SIMCACHE_MEMORY_LIMIT_MB`` or 4096; 0: none) bounds what the run adds to the
    process's memory, checked after the set-up, after every operation and inside one that moves many slots; past it
    the run stops with a ``TraceLimitError`` sentence, as ``run`` does."""
    from ..trace.memory import BIG, MemoryWatch, check_memory_limit, memory_limit  # (not at import: trace imports us)

    linear = list(ops) if ops is not None else linear_ops(scenario, schedule)
    limit = memory_limit() if memory_limit_mb is None else check_memory_limit(memory_limit_mb)
    watch = MemoryWatch(limit)
    longest = max([len(op.get("tokens", ())) if isinstance(op, dict) else 0 for _, op in linear] + [8])
    with loaded.active():
        status: list[str] = []
        crash, step, first_stale = None, None, None
        env = env_cls(loaded, scenario.config, max_ctx=longest)
        _check(watch, None)
        env.ledger.watch = lambda: _check(watch, len(status))  # a big alloc or free checks inside its operation
        env.ledger.watch_from = BIG
        drv = driver_cls(env)
        for i, (_, op) in enumerate(linear):
            code = drv.step(op, i)
            status.append(code)
            if code == RAISED:
                crash, step = drv.crash_fields(drv.exception, loaded.real_files), i
                break
            _check(watch, i)
            if first_stale is None and env.stale_refs():
                first_stale = i
        state = env.state()
    head = crash or dict(outcome="clean", sig=None, raised_in=None, chain=[], chain_lines=[])
    out = dict(head, step=step, status="".join(status), first_stale=first_stale, **state)
    return {**{k: out[k] for k in FIELDS}, "chain_lines": out["chain_lines"], "source": loaded.source.label}


def _check(watch, k: int | None) -> None:
    """Stop the real run past the memory limit (``watch``, a ``trace.memory.MemoryWatch``): at operation ``k``
    (None: its set-up), with how to narrow it."""
    got = watch.over()
    if got is None:
        return
    from ..trace.records import TraceLimitError

    where = "its set-up (the pools)" if k is None else f"operation {k}"
    fix = ("make the scenario's pools or its longest request smaller, or raise the limit with --memory-limit MB"
           if not k else f"run fewer operations (e.g. the first {k}), or raise the limit with --memory-limit MB")
    raise TraceLimitError(f"the real code's run outgrew {watch.said(*got)} at {where}; {fix}")


def diff(model: dict, real: dict, fields: Iterable[str] = FIELDS) -> list[str]:
    """The fields where the model's result and the real one differ (empty: they agree field for field)."""
    return [k for k in fields if model.get(k) != real.get(k)]
