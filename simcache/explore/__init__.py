"""Exploration: search a scenario's schedules for failing interleavings, shrink them, write replayable artefacts.

Modules: ``machine`` (stepping a scenario on the fast path), ``statekey`` (the canonical state that lets the search
prune), ``fastcopy`` (cloning a prefix's state), ``search`` (exhaustive, preemption-bounded), ``dpor`` (sleep sets
over footprints plus state caching, ``--reduce dpor``), ``sampling`` (random, PCT), ``results`` (what a search
reports), ``workers`` (the worker processes' plan), ``shrink`` and ``shrink_passes`` (the minimal failing case),
``artefacts`` (schedule, scenario, trace, pytest file), ``cli`` (``python -m simcache explore``). The process pool
and the progress line are ``simcache.pool`` and ``simcache.progress``. Re-exports only.
"""
from .artefacts import write_artefacts
from .cli import cli_explore
from .machine import Machine, Plan, plan_for, signature
from .results import ExploreResult, Failure, count_preemptions, count_schedules
from .search import ExploreError, explore
from .shrink import Shrunk, shrink
from .statekey import canonical_state

__all__ = ["explore", "ExploreResult", "Failure", "ExploreError", "shrink", "Shrunk", "write_artefacts",
           "cli_explore", "Machine", "Plan", "plan_for", "canonical_state", "signature", "count_preemptions",
           "count_schedules"]
