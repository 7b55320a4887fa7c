"""simulate.py compared whole: a run's JSON form field by field (on a hand-built run whose every field differs, so a
field read from the wrong place shows), the outcome, the ``--ops`` window's ends and refusals, the flags a run
gets (preset, the scenario's own flags, the caller's), a ``Schedule`` object's checks, and what ``simulate``
hands the replay: the scenario in each form, the recorder's settings, the window, progress and device."""
from __future__ import annotations

import importlib
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from spies import record_calls

from simcache.errors import ConfigError, ScenarioError, ScheduleError
from simcache.scenario import Scenario, load
from simcache.scheduler import Schedule
from simcache.simulate import Run, check_turns, op_window, resolve_flags, simulate
from simcache.versions import preset as preset_flags

simulate_module = importlib.import_module("simcache.simulate")  # the package re-exports the function by this name


class Event:
    def __init__(self, **fields) -> None:
        self.fields = fields

    def as_dict(self) -> dict:
        return dict(self.fields)


def hand_built_run(crash=None, violations=()) -> Run:
    trace = NS(went_stale=[Event(node=1), Event(node=2)], cleaned_up=[Event(node=3)], readmitted=[Event(node=4)],
               violations=list(violations), violation_counts=lambda: {"attachment": len(violations)},
               steps=[0] * 7, ops=[0] * 3, sha256=lambda: "abc123")
    result = dict(
        outcome="AssertionError: x", sig="sig-1", chain=["a", "b"], raised_in="f", step=5, status=["ok", "raised"],
        tree={"t": 1}, tree_slots={"s": 2}, free={"device_kv": [9]}, inflight={"i": 3},
        double_frees=[{"pool": "device_kv", "slots": [5, 2], "chain": ["x"], "extra": "dropped"},
                      {"pool": "host_kv", "slots": [7], "chain": ["y"]},
                      {"pool": "device_kv", "slots": [2, 1], "chain": ["z"]}],
        accounting={"device_kv": {"leaked": [8], "other": 0}, "host_kv": {"leaked": []},
                    "device_mamba": {"leaked": [4, 6]}},
        counters={"c": 4}, first_stale={"node": 1}, stale_final=[1], warnings=["w"])
    scenario = NS(name="hand")
    return Run(scenario, "merged_fix", preset_flags("merged_fix"), Schedule(("R1", "R2")), result, trace, crash)


def test_a_runs_json_form_field_by_field():
    crash = NS(as_dict=lambda: {"message": "m"})
    violation = NS(as_dict=lambda: {"invariant": "attachment", "step": 4})
    run = hand_built_run(crash, [violation, NS(as_dict=lambda: {"invariant": "later"})])
    assert run.outcome == "assertion"
    assert run.to_json() == dict(
        scenario="hand", preset="merged_fix", flags=preset_flags("merged_fix").as_dict(), schedule="R1 R2",
        outcome="assertion", window=None, assertion={"message": "m"},
        went_stale=[{"node": 1}, {"node": 2}], cleaned_up=[{"node": 3}], readmitted=[{"node": 4}],
        first_violation={"invariant": "attachment", "step": 4}, violations={"attachment": 2},
        pools={"device_kv": {"leaked": [8], "double_freed": [1, 2, 5]}, "host_kv": {"leaked": [], "double_freed": [7]},
               "device_mamba": {"leaked": [4, 6], "double_freed": []}},
        steps=7, operations=3, trace_sha256="abc123", warnings=["w"],
        outcome_text="AssertionError: x", sig="sig-1", chain=["a", "b"], raised_in="f", step=5,
        status=["ok", "raised"], tree={"t": 1}, tree_slots={"s": 2}, free={"device_kv": [9]}, inflight={"i": 3},
        double_frees=[{"pool": "device_kv", "slots": [5, 2], "chain": ["x"]},
                      {"pool": "host_kv", "slots": [7], "chain": ["y"]},
                      {"pool": "device_kv", "slots": [2, 1], "chain": ["z"]}],
        accounting={"device_kv": {"leaked": [8], "other": 0}, "host_kv": {"leaked": []},
                    "device_mamba": {"leaked": [4, 6]}},
        counters={"c": 4}, first_stale={"node": 1}, stale_final=[1])


def test_a_clean_run_has_no_assertion_and_no_first_violation():
    run = hand_built_run()
    assert run.outcome == "clean"
    j = run.to_json()
    assert (j["outcome"], j["assertion"], j["first_violation"], j["violations"]) == ("clean", None, None,
                                                                                      {"attachment": 0})
    assert Run(NS(name="n"), "p", None, None, {}, None).cache is None
    assert Run(NS(name="n"), "p", None, None, {}, None).driver is None


def test_the_ops_window_fills_open_ends_and_clips_the_end():
    assert op_window((None, None), 10) == (0, 10)
    assert op_window((3, None), 10) == (3, 10)
    assert op_window((None, 4), 10) == (0, 4)
    assert op_window((2, 99), 10) == (2, 10)
    assert op_window((9, 10), 10) == (9, 10)
    assert op_window((0, 1), 1) == (0, 1)


def refused(fn, *args, error=ConfigError, **kw) -> str:
    with pytest.raises(error) as e:
        fn(*args, **kw)
    return str(e.value)


def test_the_ops_window_refusals():
    assert refused(op_window, (10, None), 10) == ("--ops 10: starts past the end: this run has 10 operations (0..9); "
                                                  "pick A below 10")
    assert refused(op_window, (12, 14), 10) == ("--ops 12:14 starts past the end: this run has 10 operations (0..9); "
                                                "pick A below 10")
    assert refused(op_window, (-1, 3), 10) == ("--ops -1:3 starts past the end: this run has 10 operations (0..9); "
                                               "pick A below 10")
    assert refused(op_window, (4, 4), 500) == "--ops 4:4 is empty; give A:B with A < B, like --ops 4:104"
    assert refused(op_window, (4, 2), 50) == "--ops 4:2 is empty; give A:B with A < B, like --ops 4:50"
    assert refused(op_window, (None, 0), 5) == "--ops 0:0 is empty; give A:B with A < B, like --ops 0:5"


def scenario_with(preset=None, flags=None) -> Scenario:
    return replace(load("scenario_a"), preset=preset, flags=flags or {})


def test_the_flags_a_run_gets():
    plain = scenario_with()
    assert resolve_flags(plain, None, None) == ("pre_fix", preset_flags("pre_fix"))
    assert resolve_flags(plain, "", None) == ("pre_fix", preset_flags("pre_fix"))
    assert resolve_flags(plain, "merged_fix", {}) == ("merged_fix", preset_flags("merged_fix"))
    own = scenario_with("followup_fix", {"stale_guards": False})
    assert resolve_flags(own, None, None) == ("followup_fix", preset_flags("followup_fix").with_(stale_guards=False))
    assert resolve_flags(own, "merged_fix", None) == ("merged_fix",
                                                      preset_flags("merged_fix").with_(stale_guards=False))
    # the caller's flags win over the scenario's own
    assert resolve_flags(own, None, {"stale_guards": True}) == ("followup_fix", preset_flags("followup_fix")
                                                                .with_(stale_guards=True))
    assert resolve_flags(plain, "pre_fix", {"stale_guards": True})[1] == preset_flags("pre_fix").with_(
        stale_guards=True)


def test_the_flags_refusals():
    plain = scenario_with()
    assert refused(resolve_flags, plain, 3, None) == "a preset is a name like 'pre_fix', not int"
    assert refused(resolve_flags, plain, b"pre_fix", None) == "a preset is a name like 'pre_fix', not bytes"
    assert refused(resolve_flags, plain, None, ["x"]) == ("flags must map flag names to values, like "
                                                          "{'stale_guards': True}, not ['x']")
    assert refused(resolve_flags, plain, None, {1: True}) == ("flags must map flag names to values, like "
                                                              "{'stale_guards': True}, not {1: True}")
    assert refused(resolve_flags, plain, None, {"a": 1, 2: 2}) == ("flags must map flag names to values, like "
                                                                   "{'stale_guards': True}, not {'a': 1, 2: 2}")
    long = ["k" * 50]
    assert refused(resolve_flags, plain, None, long) == ("flags must map flag names to values, like "
                                                         "{'stale_guards': True}, not " + repr(long)[:40]
                                                         + f"... ({len(repr(long))} characters)")
    # the flags' own sentences pass through whole; a TypeError from them becomes a ConfigError with its text
    unknown = refused(resolve_flags, plain, None, {"no_such_flag": True})
    with pytest.raises(ConfigError) as e:
        preset_flags("pre_fix").with_(no_such_flag=True)
    assert unknown == str(e.value)


def test_a_type_error_from_the_flags_is_one_config_sentence(monkeypatch):
    class Flags:
        def with_(self, **changes):
            raise TypeError(f"with_() got an unexpected keyword {sorted(changes)}")

    monkeypatch.setattr(simulate_module, "preset_flags", lambda name: Flags())
    with pytest.raises(ConfigError) as e:
        resolve_flags(scenario_with(), None, {"odd": 1})
    assert str(e.value) == "with_() got an unexpected keyword ['odd']" and e.value.__cause__ is None
    assert e.value.__suppress_context__


def test_a_schedule_objects_turns_are_checked():
    sc = load("scenario_a")  # mem: 2 operations, l3: 1
    check_turns(Schedule(("mem", "l3", "mem")), sc)
    check_turns(Schedule(()), sc)
    assert refused(check_turns, Schedule(("mem", "zz")), sc, error=ScheduleError) == (
        "schedule names unknown actor 'zz'; the actors are mem, l3")
    long = "z" * 50
    assert refused(check_turns, Schedule((long,)), sc, error=ScheduleError) == (
        f"schedule names unknown actor {repr(long)[:40]}... (52 characters); the actors are mem, l3")
    assert refused(check_turns, Schedule(("l3", "mem", "l3")), sc, error=ScheduleError) == (
        "schedule asks actor 'l3' for 2 operations but it has 1; shorten the schedule or add operations")
    assert refused(check_turns, Schedule(("mem",) * 3), sc, error=ScheduleError) == (
        "schedule asks actor 'mem' for 3 operations but it has 2; shorten the schedule or add operations")


@pytest.fixture(autouse=True)
def _default_memory_limit(monkeypatch):
    """A developer's $SIMCACHE_MEMORY_LIMIT_MB must not change the recorder's default."""
    monkeypatch.delenv("SIMCACHE_MEMORY_LIMIT_MB", raising=False)


@pytest.fixture
def calls(monkeypatch):
    """What ``simulate`` hands the replay, recorded on the way through to the real one."""
    return record_calls(monkeypatch, simulate_module, "execute",
                        lambda a, kw: dict(zip(("cfg", "linear", "flags"), a, strict=True), **kw))


def test_simulate_takes_a_scenario_in_each_form(calls):
    sc = load("scenario_a")
    path = Path(simulate_module.__file__).parent / "scenarios" / "scenario_a.yaml"
    runs = [simulate(sc), simulate("scenario_a"), simulate(str(path)), simulate(path), simulate(_doc_of(sc))]
    assert [r.scenario.name for r in runs] == ["scenario_a"] * 5
    assert runs[0].scenario is sc
    assert len({r.trace.sha256() for r in runs}) == 1
    assert len(calls) == 5 and all(c["linear"] == sc.linearize(sc.parse_schedule(None)) for c in calls)


def _doc_of(sc: Scenario) -> dict:
    import yaml

    return yaml.safe_load((Path(simulate_module.__file__).parent / "scenarios" / f"{sc.name}.yaml").read_text())


def test_simulate_refuses_what_is_not_a_scenario_or_a_setting():
    assert refused(simulate, 3.5, error=ScenarioError) == (
        "simulate needs a Scenario, a gallery name, a file path or a scenario mapping, not float; "
        "e.g. simulate('crash_pr')")
    assert refused(simulate, "scenario_a", snapshots=1) == "snapshots must be True or False, not 1"
    assert refused(simulate, "scenario_a", invariants="yes") == "invariants must be True or False, not 'yes'"
    assert refused(simulate, "scenario_a", snapshots=True, invariants=None) == (
        "invariants must be True or False, not None")
    long = "y" * 60
    assert refused(simulate, "scenario_a", snapshots=long) == (
        f"snapshots must be True or False, not {repr(long)[:40]}... (62 characters)")
    assert refused(simulate, "scenario_a", schedule=["mem"], error=ScheduleError) == (
        "a schedule is a string like 'R1 R2*2 ctl*' or a Schedule, not list")


def test_what_simulate_hands_the_replay(calls):
    sc = load("scenario_a")
    run = simulate(sc, "merged_fix", {"stale_guards": True}, "l3 mem mem", snapshots=False, invariants=False,
                   ops=(1, None), memory_limit_mb=9876.5)
    (c,) = calls
    assert c["cfg"] == sc.config and c["flags"] == preset_flags("merged_fix").with_(stale_guards=True)
    assert (c["window"], c["progress"], c["device"], c["recorder"]) == ((1, 4), False, "cpu", run.trace)
    assert (run.trace.want_snapshots, run.trace.want_invariants, run.trace.memory_limit_mb) == (False, False, 9876.5)
    assert run.trace.snapshots == []
    assert (run.preset, run.flags, str(run.schedule)) == ("merged_fix", c["flags"], "l3 mem*2")
    assert [o.index for o in run.trace.ops] == [1, 2, 3]
    assert not {"_cache", "_driver", "_crash"} & set(run.result)
    assert run.cache is not None and run.driver is not None and run.driver.cache is run.cache
    simulate(sc, schedule=Schedule(("l3", "mem")), progress=None, device="cpu")
    assert (calls[1]["window"], calls[1]["progress"], calls[1]["recorder"].want_snapshots,
            calls[1]["recorder"].want_invariants) == (None, None, True, True)
    assert calls[1]["linear"] == sc.linearize(Schedule(("l3", "mem")))
    assert calls[1]["flags"] == preset_flags("pre_fix")


def test_a_crash_and_its_fields_come_back_from_the_replay():
    run = simulate("crash_pr", "pre_fix")
    assert run.outcome == "assertion" and run.crash is not None
    assert run.crash.as_dict()["message"] == "parent does not have child key, 1"
    clean = simulate("scenario_a", "followup_fix")
    assert clean.outcome == "clean" and clean.crash is None


def test_a_replay_error_is_prefixed_with_the_scenario_name(monkeypatch):
    def fails(*a, **kw):
        raise ScenarioError("operation 3 is odd")

    monkeypatch.setattr(simulate_module, "execute", fails)
    with pytest.raises(ScenarioError) as e:
        simulate("scenario_a")
    assert str(e.value) == "scenario_a: operation 3 is odd" and e.value.__suppress_context__
