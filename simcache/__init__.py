"""simcache: a faithful, visual, deterministic simulator of SGLang's HiMambaRadixCache.

Public API (re-exports only; see README.md):

- ``HiMambaRadixCache``, ``CacheConfig``, ``Flags``, ``PRESETS``, ``preset`` — the cache and its versions.
- ``Driver``, ``Request`` — the scheduler side (start / finish requests, apply oracle-format operations).
- ``run_ops`` — replay an oracle-format ``OPS.json`` document; ``simulate`` / ``Run`` — run a scenario with a trace.
- ``Scenario``, ``load_scenario``, ``gallery``, ``Schedule``, ``parse_schedule`` — scenarios and schedules.
- ``Recorder``, ``Snapshot`` — traces and snapshots; ``check_invariants`` — the named invariants.
- ``tree_text`` — the canonical tree text (the golden format of the tests).
- ``SimcacheError`` (``ConfigError``, ``ScenarioError``, ``ScheduleError``), ``CacheAssertion``.
"""
import sys as _sys

try:
    from .cache import HiMambaRadixCache
    from .config import CacheConfig
    from .driver import Driver
    from .errors import CacheAssertion, ConfigError, ScenarioError, ScheduleError, SimcacheError
    from .invariants import check_invariants
    from .ops_run import run_ops
    from .requests import Request
    from .scenario import Scenario, gallery
    from .scenario import load as load_scenario
    from .scheduler import Schedule, parse_schedule
    from .simulate import Run, simulate
    from .snapshot import Snapshot
    from .state import tree_text
    from .trace import Recorder
    from .versions import PRESETS, Flags, preset
except KeyboardInterrupt:
    # Ctrl-C while torch loads: from the command line (``python -m simcache`` or ``simcache``) that is one sentence
    # and status 130, never a traceback; a program importing simcache gets its KeyboardInterrupt as usual
    if _sys.argv[:1] == ["-m"] or _sys.argv[0].endswith(("/simcache", "simcache.exe")):
        print("simcache: interrupted (Ctrl-C); nothing was written", file=_sys.stderr)
        raise SystemExit(130) from None
    raise

__version__ = "0.1.0"
__all__ = [
    "HiMambaRadixCache", "CacheConfig", "Flags", "PRESETS", "preset", "Driver", "Request", "run_ops", "simulate",
    "Run", "Scenario", "load_scenario", "gallery", "Schedule", "parse_schedule", "Recorder", "Snapshot",
    "check_invariants", "tree_text", "SimcacheError", "ConfigError", "ScenarioError", "ScheduleError",
    "CacheAssertion",
]
