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
from importlib import import_module

from .errors import CacheAssertion, ConfigError, ScenarioError, ScheduleError, SimcacheError

# Loaded on first use (PEP 562), so ``python -m simcache`` starts at once and a Ctrl-C while torch loads is caught by
# the command line's own handler (one sentence, status 130) instead of ending in a traceback.
_LAZY = {
    "HiMambaRadixCache": ("cache", "HiMambaRadixCache"), "CacheConfig": ("config", "CacheConfig"),
    "Driver": ("driver", "Driver"), "check_invariants": ("invariants", "check_all"), "run_ops": ("ops_run", "run_ops"),
    "Request": ("requests", "Request"), "Scenario": ("scenario", "Scenario"), "gallery": ("scenario", "gallery"),
    "load_scenario": ("scenario", "load"), "Schedule": ("scheduler", "Schedule"),
    "parse_schedule": ("scheduler", "parse_schedule"), "Run": ("simulate", "Run"), "simulate": ("simulate", "simulate"),
    "Snapshot": ("snapshot", "Snapshot"), "tree_text": ("state", "tree_text"), "Recorder": ("trace", "Recorder"),
    "PRESETS": ("versions", "PRESETS"), "Flags": ("versions", "Flags"), "preset": ("versions", "preset"),
}


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'simcache' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"
__all__ = [
    "HiMambaRadixCache", "CacheConfig", "Flags", "PRESETS", "preset", "Driver", "Request", "run_ops", "simulate",
    "Run", "Scenario", "load_scenario", "gallery", "Schedule", "parse_schedule", "Recorder", "Snapshot",
    "check_invariants", "tree_text", "SimcacheError", "ConfigError", "ScenarioError", "ScheduleError",
    "CacheAssertion",
]
