"""Argument checks at the Python API's entry points: a wrong type or value is one ``ArgumentError`` sentence (a
``SimcacheError``) that names the argument, what it takes and an example, never an ``AttributeError`` or a
``TypeError`` from deep inside.

Each check returns the value it accepted, so an entry point reads ``run = args.run(run, "show")``. The kinds of a
simcache object (``Run``, cache, ``ExploreResult``) are looked up among the modules already loaded (``_kind``): an
object of a kind whose module was never imported cannot be one, so this module imports ``errors`` alone and sits
at the bottom of the import graph, below every module that checks its arguments with it.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .errors import ArgumentError, shown


def said(value: Any) -> str:
    """How a wrong value is named back: ``str 'crash_pr'``, ``int 5``, ``None``."""
    if value is None:
        return "None"
    return f"{type(value).__name__} {shown(value, 40)}"


def fail(name: str, want: str, value: Any, example: str | None = None) -> ArgumentError:
    return ArgumentError(f"{name} must be {want}, not {said(value)}" + (f"; e.g. {example}" if example else ""))


def _kind(value: Any, module: str, name: str) -> bool:
    """``isinstance(value, module.name)``, without importing ``module`` (not loaded: ``value`` is not one)."""
    cls = getattr(sys.modules.get(module), name, None)
    return cls is not None and isinstance(value, cls)


def run(value: Any, fn: str, name: str = "run") -> Any:
    """A ``Run`` (what ``simcache.simulate`` returns)."""
    if not _kind(value, "simcache.simulate", "Run"):
        raise ArgumentError(f"{fn} takes a Run (what simcache.simulate returns) as {name}, not {said(value)}; e.g. "
                            f"{fn}(simulate('crash_pr'))")
    return value


def traced_run(value: Any, fn: str, name: str = "run") -> Any:
    """A ``Run`` with its snapshots (``simulate(..., snapshots=True)``, the default): the views draw its frames."""
    run(value, fn, name)
    if len(value.trace.snapshots) != len(value.trace.steps):
        raise ArgumentError(f"{fn} draws the run's frames, and this run was simulated without snapshots; simulate it "
                            f"with snapshots=True (the default)")
    return value


def cache(value: Any, fn: str, name: str = "cache") -> Any:
    if not _kind(value, "simcache.cache", "HiMambaRadixCache"):
        raise ArgumentError(f"{fn} takes a HiMambaRadixCache as {name}, not {said(value)}; e.g. "
                            f"{fn}(HiMambaRadixCache(CacheConfig()))")
    return value


def text(value: Any, name: str, example: str, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        raise fail(name, "a non-empty string" if not empty else "a string", value, example)
    return value


def optional_text(value: Any, name: str, example: str) -> str | None:
    return None if value is None else text(value, name, example)


def whole(value: Any, name: str, low: int | None = None, high: int | None = None, example: str | None = None) -> int:
    """A whole number (never a bool), within ``low..high`` where given."""
    if type(value) is not int:
        span = "a whole number" + (f" >= {low:,}" if low is not None else "")
        raise fail(name, span, value, example)
    if low is not None and value < low or high is not None and value > high:
        span = f"from {low:,} to {high:,}" if low is not None and high is not None else \
            f">= {low:,}" if low is not None else f"<= {high:,}"
        raise fail(name, f"a whole number {span}", value, example)
    return value


def number(value: Any, name: str, low: float, high: float, example: str | None = None) -> float:
    """A finite real number within ``low..high`` (never a bool, never NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            not low <= value <= high:
        raise fail(name, f"a number from {low:g} to {high:g}", value, example)
    return value


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise fail(name, "True or False", value)
    return value


def names(value: Any, name: str, example: str, known: Iterable[str] | None = None, empty: bool = False) -> list[str]:
    """Names given as a list, a tuple, a dict's keys (``gallery()``) or any other iterable of strings, never one
    string (which would be read letter by letter); each one of ``known`` where given."""
    given = value
    if isinstance(value, (list, tuple, dict, set, frozenset, type({}.keys()))):
        value = list(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, list) or \
            not all(isinstance(v, str) for v in value) or (not empty and not value):
        raise fail(name, "a list of names" + ("" if empty else " (at least one)"), given, example)
    if known is not None:
        known = list(known)
        bad = [v for v in value if v not in known]
        if bad:
            raise ArgumentError(f"{name} names unknown {shown(bad[0], 40)}; choose from {', '.join(known)}")
    return list(value)


def mapping(value: Any, name: str, example: str) -> dict:
    if not isinstance(value, dict):
        raise fail(name, "a dict", value, example)
    return value


def function(value: Any, name: str) -> Callable | None:
    if value is not None and not callable(value):
        raise fail(name, "a function or None", value)
    return value


def explore_result(value: Any, fn: str, name: str = "result") -> Any:
    """An ``ExploreResult``, or anything that reads like one (its ``outcomes`` pairs and counts)."""
    if not _kind(value, "simcache.explore.results", "ExploreResult") and not (
            isinstance(getattr(value, "outcomes", None), (tuple, list)) and
            all(isinstance(p, tuple) and len(p) == 2 for p in value.outcomes)):
        raise ArgumentError(f"{fn} takes an ExploreResult (what simcache.explore.explore returns) as {name}, not "
                            f"{said(value)}")
    return value


def results(value: Any, fn: str) -> dict:
    """``{label: ExploreResult}``."""
    if not isinstance(value, dict) or not value or not all(isinstance(k, str) for k in value):
        raise ArgumentError(f"{fn} takes a dict of labels to ExploreResults, like {{'pre_fix': explore('crash_pr')}}, "
                            f"not {said(value)}")
    for v in value.values():
        explore_result(v, fn, "each value")
    return value


def rows(value: Any, fn: str) -> list[dict]:
    """Workload rows (what ``simcache.workload.crash_rates`` returns)."""
    keys = ("preset", "pressure", "signatures")
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, dict) and all(k in r for k in keys)
                                                       for r in value):
        raise ArgumentError(f"{fn} takes the rows simcache.workload.crash_rates returns (a list of dicts), not "
                            f"{said(value)}")
    return list(value)
