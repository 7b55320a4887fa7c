"""Run a scenario or an operation file on SGLang's real cache, and diff the result with the model's, field by field.

``run_real(scenario, loaded)`` returns one dict with ``run_ops``'s field names and formats (``FIELDS``): the outcome,
the exception text, the raising SGLang function and the call chain (function names, outermost first; with their
file lines in ``chain_lines``), the step, the status letters, the canonical tree and its slots, counters, in-flight
maps, double frees with their SGLang callers, slot accounting and stale references. ``diff`` lists the fields where
two such results differ.
"""
from __future__ import annotations

import re
import traceback
from collections.abc import Iterable

from ..errors import SimcacheError
from ..operations import APPLIED, RAISED, Skip
from ..scenario import Scenario
from ..scheduler import Schedule
from .driver import RealDriver
from .env import Env
from .loader import Loaded

# the fields a real result shares with the model's (``run_ops`` / ``simulate(...).result``), in report order
FIELDS = ("outcome", "sig", "raised_in", "chain", "step", "status", "first_stale", "stale_final", "tree", "tree_slots",
          "counters", "inflight", "double_frees", "accounting", "free")
_DETAIL = re.compile(r",| with | x\.id=| node\.id=")


def exception_fields(e: BaseException, real_files: frozenset[str]) -> dict:
    """``outcome``, ``sig``, ``raised_in``, ``chain`` (and ``chain_lines``) of an exception the real cache raised."""
    tb = traceback.extract_tb(e.__traceback__)
    real = [f for f in tb if f.filename in real_files]
    msg = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x?", str(e))
    raised_in = real[-1].name if real else "driver"
    typ = "AssertionError" if isinstance(e, AssertionError) else type(e).__name__
    return dict(outcome=f"{typ}: {msg}", sig=f"{typ}: {_DETAIL.split(msg)[0]} in {raised_in}", raised_in=raised_in,
                chain=[f.name for f in real],
                chain_lines=[f"{f.filename.rsplit('/', 1)[-1]}:{f.name}:{f.lineno}" for f in real])


def linear_ops(scenario: Scenario, schedule: str | Schedule | None = None) -> list[tuple[str, dict]]:
    """(actor, op) in schedule order, as ``simulate`` runs them (the scenario's own schedule by default)."""
    sched = schedule if isinstance(schedule, Schedule) else scenario.parse_schedule(schedule)
    return scenario.linearize(sched)


def run_real(scenario: Scenario, loaded: Loaded, schedule: str | Schedule | None = None,
             ops: Iterable[tuple[str | None, dict]] | None = None) -> dict:
    """Run ``scenario`` (its schedule, or ``schedule``; or the explicit (actor, op) list ``ops``) on a fresh real
    cache of ``loaded`` -> the result dict (``FIELDS``, ``chain_lines``, ``source``)."""
    linear = list(ops) if ops is not None else linear_ops(scenario, schedule)
    cfg = scenario.config
    longest = max([len(op.get("tokens", ())) for _, op in linear] + [8])
    with loaded.active():
        env = Env(loaded, cfg, max_ctx=longest)
        drv = RealDriver(env)
        status: list[str] = []
        crash, step, first_stale = None, None, None
        for i, (_, op) in enumerate(linear):
            try:
                drv.apply(op, i)
                status.append(APPLIED)
            except Skip as s:
                status.append(s.code)
            except SimcacheError:
                raise
            except Exception as e:  # noqa: BLE001 -- the real cache's exceptions are results
                status.append(RAISED)
                crash, step = exception_fields(e, loaded.real_files), i
                break
            if first_stale is None and env.stale_refs():
                first_stale = i
        state = env.state()
    head = crash or dict(outcome="clean", sig=None, raised_in=None, chain=[], chain_lines=[])
    out = dict(head, step=step, status="".join(status), first_stale=first_stale, **state)
    out["source"] = loaded.source.label
    return {**{k: out[k] for k in FIELDS}, "chain_lines": out["chain_lines"], "source": out["source"]}


def diff(model: dict, real: dict, fields: Iterable[str] = FIELDS) -> list[str]:
    """The fields where the model's result and the real one differ (empty: they agree field for field)."""
    return [k for k in fields if model.get(k) != real.get(k)]
