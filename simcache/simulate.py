"""Simulate a scenario under a preset and schedule: the one entry point the CLI, the views and the explorer use.

``simulate(scenario, preset)`` runs the scenario's actors in schedule order on a fresh cache with a ``Recorder``
attached and returns a ``Run``: the outcome, the trace (micro-steps, snapshots, went-stale / cleaned-up events,
invariant violations) and the oracle-format fields, so a run can be stepped, rendered, replayed and diffed.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .crash import Crash
from .errors import ConfigError, ScenarioError, ScheduleError, shown
from .gcpace import fewer_collections
from .ops_run import execute
from .presets import preset_flags, with_flags
from .scenario import Scenario, from_doc, load
from .scheduler import Schedule
from .trace import Recorder
from .versions import Flags


@dataclass
class Run:
    scenario: Scenario
    preset: str
    flags: Flags
    schedule: Schedule
    result: dict  # the oracle-format fields (``ops_run.execute``'s report)
    trace: Recorder
    crash: Crash | None = None  # what the simulated cache raised, if it did
    cache: Any = None  # the cache and driver as the run left them
    driver: Any = None
    window: tuple[int, int, int] | None = None  # (A, B, total) when ``ops=`` traced only operations A..B-1 of total

    @property
    def outcome(self) -> str:
        """``"assertion"`` when the simulated cache raised (any exception of SGLang's code); ``"narrowed"`` when it
        did not but ``ops=`` stopped it before the schedule's end (whether the scenario survives is not known
        from this run); else ``"clean"``."""
        if self.crash is not None:
            return "assertion"
        return "narrowed" if self.window is not None and self.window[1] < self.window[2] else "clean"

    @property
    def narrowed(self) -> str | None:
        """How ``ops=`` narrowed this run, in words (None for a whole run): ``operations 6..8 of 0..11 (--ops
        6:9): 0..5 ran untraced, 9..11 never ran``."""
        if self.window is None:
            return None
        a, b, total = self.window
        parts = ([f"0..{a - 1} ran untraced"] if a else []) + ([f"{b}..{total - 1} never ran"] if b < total else [])
        return f"operations {a}..{b - 1} of 0..{total - 1} (--ops {a}:{b}): {', '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        r, t = self.result, self.trace
        pools = {name: dict(leaked=a["leaked"], double_freed=sorted({s for d in r["double_frees"]
                                                                      if d["pool"] == name for s in d["slots"]}))
                 for name, a in r["accounting"].items()}
        return dict(
            scenario=self.scenario.name, preset=self.preset, flags=self.flags.as_dict(),
            schedule=str(self.schedule), outcome=self.outcome,
            window=None if self.window is None else dict(ops=f"{self.window[0]}:{self.window[1]}",
                                                         operations=self.window[2], narrowed=self.narrowed),
            assertion=None if self.crash is None else self.crash.as_dict(),
            went_stale=[e.as_dict() for e in t.went_stale], cleaned_up=[e.as_dict() for e in t.cleaned_up],
            readmitted=[e.as_dict() for e in t.readmitted],
            first_violation=t.violations[0].as_dict() if t.violations else None,
            violations=t.violation_counts(), pools=pools, steps=len(t.steps), operations=len(t.ops),
            trace_sha256=t.sha256(), warnings=r["warnings"],
            # the oracle's names and formats, for a field-by-field diff with the real code
            outcome_text=r["outcome"], sig=r["sig"], chain=r["chain"],
            raised_in=r["raised_in"], step=r["step"], status=r["status"], tree=r["tree"], tree_slots=r["tree_slots"],
            free=r["free"], inflight=r["inflight"],
            double_frees=[dict(pool=d["pool"], slots=d["slots"], chain=d["chain"]) for d in r["double_frees"]],
            accounting=r["accounting"], counters=r["counters"], first_stale=r["first_stale"],
            stale_final=r["stale_final"],
        )


def op_window(ops: tuple[int | None, int | None], total: int) -> tuple[int, int]:
    """``(A, B)`` with open ends filled in, checked against the run's ``total`` operations."""
    a, b = ops
    a = 0 if a is None else a
    b = total if b is None else min(b, total)
    if not 0 <= a < total:
        raise ConfigError(f"--ops {ops[0]}:{'' if ops[1] is None else ops[1]} starts past the end: this run has "
                          f"{total} operations (0..{total - 1}); pick A below {total}")
    if b <= a:
        raise ConfigError(f"--ops {a}:{b} is empty; give A:B with A < B, like --ops {a}:{min(total, a + 100)}")
    return a, b


def resolve_flags(scenario: Scenario, preset: str | None, overrides: dict | None) -> tuple[str, Flags]:
    if preset is not None and not isinstance(preset, str):
        raise ConfigError(f"a preset is a name like 'pre_fix', not {type(preset).__name__}")
    if overrides is not None and not (isinstance(overrides, dict) and all(isinstance(k, str) for k in overrides)):
        raise ConfigError(f"flags must map flag names to values, like {{'stale_guards': True}}, not "
                          f"{shown(overrides, 40)}")
    name = preset or scenario.preset or "pre_fix"
    flags = preset_flags(name)
    changes = {**scenario.flags, **(overrides or {})}
    if changes:
        try:
            flags = with_flags(flags, changes)
        except ConfigError:
            raise
        except TypeError as e:
            raise ConfigError(str(e)) from None
    return name, flags


def check_turns(schedule: Schedule, scenario: Scenario) -> None:
    """A ``Schedule`` given as an object: only the scenario's actors, each for at most its operations."""
    lengths, used = scenario.lengths, dict.fromkeys(scenario.lengths, 0)
    for actor in schedule.turns:
        if actor not in lengths:
            raise ScheduleError(f"schedule names unknown actor {shown(actor, 40)}; the actors are "
                                f"{', '.join(lengths)}")
        used[actor] += 1
        if used[actor] > lengths[actor]:
            raise ScheduleError(f"schedule asks actor {actor!r} for {used[actor]} operations but it has "
                                f"{lengths[actor]}; shorten the schedule or add operations")


@fewer_collections()
def simulate(scenario: Scenario | str | dict, preset: str | None = None, flags: dict | None = None,
             schedule: str | Schedule | None = None, snapshots: bool = True, invariants: bool = True,
             ops: tuple[int | None, int | None] | None = None, progress: bool | None = False,
             memory_limit_mb: float | None = None, device: str = "cpu") -> Run:
    """Run ``scenario`` (a Scenario, a gallery name / path, or plain data) and return the ``Run``.

    Snapshots are never built during the run: ``run.trace.snapshots`` rebuilds any micro-step's on demand (with
    ``snapshots=False`` it is empty and the run keeps no checkpoints for it). ``ops=(A, B)`` traces only
    operations ``A..B-1`` (those before run untraced, to reach the state ``A`` starts from; ``None`` = open end).
    ``progress``: a progress bar (None: for long runs on a terminal). ``memory_limit_mb``: the trace's ceiling
    (default ``$SIMCACHE_MEMORY_LIMIT_MB`` or 4096); a run that outgrows it stops with a ``TraceLimitError``.
    ``device``: where the device pools live (cpu, cuda, cuda:N or auto; the results are the same on each)."""
    if isinstance(scenario, (str, os.PathLike)):
        scenario = load(scenario)
    elif isinstance(scenario, dict):
        scenario = from_doc(scenario)
    elif not isinstance(scenario, Scenario):
        raise ScenarioError(f"simulate needs a Scenario, a gallery name, a file path or a scenario mapping, not "
                            f"{type(scenario).__name__}; e.g. simulate('crash_pr')")
    for label, v in (("snapshots", snapshots), ("invariants", invariants)):
        if not isinstance(v, bool):
            raise ConfigError(f"{label} must be True or False, not {shown(v, 40)}")
    if ops is not None and not (isinstance(ops, tuple) and len(ops) == 2 and all(
            e is None or type(e) is int and e >= 0 for e in ops)):
        raise ConfigError(f"ops must be a pair (A, B) of operation numbers from 0 (either may be None for an open "
                          f"end), like ops=(0, 500), not {shown(ops, 40)}")
    if progress is not None and not isinstance(progress, bool):
        raise ConfigError(f"progress must be True, False or None, not {shown(progress, 40)}")
    if not isinstance(device, str):
        raise ConfigError(f"device must be a name like 'cpu', 'cuda', 'cuda:0' or 'auto', not {shown(device, 40)}")
    name, fl = resolve_flags(scenario, preset, flags)
    if isinstance(schedule, Schedule):
        check_turns(schedule, scenario)
        sched = schedule
    elif schedule is None or isinstance(schedule, str):
        sched = scenario.parse_schedule(schedule)
    else:
        raise ScheduleError(f"a schedule is a string like 'R1 R2*2 ctl*' or a Schedule, not "
                            f"{type(schedule).__name__}")
    rec = Recorder(snapshots=snapshots, invariants=invariants, memory_limit_mb=memory_limit_mb)
    linear = scenario.linearize(sched)
    window = None if ops is None else op_window(ops, len(linear))
    try:
        result = execute(scenario.config, linear, fl, recorder=rec, window=window, progress=progress,
                         device=device)
    except ScenarioError as e:
        raise ScenarioError(f"{scenario.name}: {e}") from None
    cache, driver, crash = result.pop("_cache"), result.pop("_driver"), result.pop("_crash")
    narrowed = None if window is None or window == (0, len(linear)) else (*window, len(linear))
    return Run(scenario, name, fl, sched, result, rec, crash, cache, driver, narrowed)
