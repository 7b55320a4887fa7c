"""explore/cli.py compared whole: which failure is shown, the summary's every line for each strategy and scope,
and ``cli_explore``'s work on parsed arguments: the default bound, what reaches the search, the minimal case with
and without shrinking, the JSON object, the artefacts written (all or nothing) and each refusal's sentence. Whole
summaries are syrupy snapshots (``tests/__snapshots__/test_core_exact_explore_cli.ambr``)."""
from __future__ import annotations

import importlib
import json
from types import SimpleNamespace as NS

import pytest
from spies import record_calls

from simcache.cli_numbers import UsageError
from simcache.errors import ScenarioError
from simcache.explore.cli import ARTEFACT_NAMES, DEFAULT_BOUND, cli_explore, pick_failure, summary
from simcache.explore.results import ExploreResult, Failure

cli_module = importlib.import_module("simcache.explore.cli")
STALE_SIG = "AssertionError: parent does not have child key, 1 @ _delete_tombstone_leaf"
OTHER_SIG = "AssertionError: not backuped @ write_backup"


def failure(schedule="R1 R2 R1", sig=STALE_SIG, preemptions=1) -> Failure:
    return Failure(schedule=schedule, steps=9, preemptions=preemptions, switches=2,
                   assertion="AssertionError: parent does not have child key, 1", raised_in="_delete_tombstone_leaf",
                   signature=sig)


def result(**changes) -> ExploreResult:
    stale, other = failure(), failure("R2 R1 R1", OTHER_SIG, 0)
    fields = dict(scenario="crash_pr", preset="pre_fix", strategy="exhaustive", bound=2, seed=None, budget=None,
                  schedules_run=40, distinct_states=7, failing=3, failing_schedules=("R1 R2 R1",),
                  outcomes=(("clean", 30), (STALE_SIG, 3), (OTHER_SIG, 7)), first_failure=other,
                  first_by_signature=((OTHER_SIG, other), (STALE_SIG, stale)),
                  damage=(("leaked:host_kv", "R2 R1 R1"), ("double_free:device_kv", "R1 R2 R1")), pruned=5,
                  exhausted=True, space_covered=False, total_schedules=90, time_s=2.0)
    return ExploreResult(**{**fields, **changes})


def test_the_stale_race_is_shown_first_when_the_search_saw_it():
    res = result()
    assert pick_failure(res) == failure()
    no_stale = result(first_failure=res.first_failure, first_by_signature=((OTHER_SIG, res.first_failure),))
    assert pick_failure(no_stale) is res.first_failure
    assert pick_failure(result(first_failure=None, first_by_signature=())) is None
    assert DEFAULT_BOUND == 2
    assert ARTEFACT_NAMES == ("schedule.txt", "minimal.yaml", "trace.json", "explore.json")


def test_the_summary_of_an_exhaustive_search_line_by_line(snapshot):
    minimal = dict(schedule="R1 R2 R1", steps=9, switches=2, assertion="AssertionError: x", raised_in="f",
                   shrunk=True)
    lines = summary(result(), minimal).splitlines()
    assert lines == snapshot
    # the outcomes most frequent first; each preemption count's first failure with its signature
    assert lines[5:8] == ["         30  clean", "          7  AssertionError: not backuped @ write_backup",
                          "          3  AssertionError: parent does not have child key, 1 @ _delete_tombstone_leaf"]
    assert lines[-2:] == ["  minimal (shrunk): R1 R2 R1  (9 steps, 2 switches) -> AssertionError: x in f",
                          "  time              2.00 s (20 schedules/s)"]


def test_the_summary_of_the_other_strategies_and_scopes(snapshot):
    lines = summary(result(strategy="random", seed=11, bound=None, space_covered=True, outcomes=(("a", 2), ("b", 2)),
                           damage=(), first_by_signature=(), time_s=0.0, failing=0), None).splitlines()
    assert lines == snapshot
    assert lines[0] == "crash_pr under pre_fix: random, seed 11"
    assert "  covered           the whole schedule space" in lines
    pct = summary(result(strategy="pct", bound=3, seed=4, exhausted=False, damage=(), first_by_signature=()), dict(
        schedule="R2", steps=1, assertion="A", raised_in="g", shrunk=False)).splitlines()
    assert pct[:2] + pct[-3:] == ["crash_pr under pre_fix: PCT depth 3, seed 4",
                                  "  schedules run     40 of 90 interleavings",
                                  "  covered           a part of the space (budget or stop)",
                                  "  shrink it with --shrink: R2  (1 steps, None switches) -> A in g",
                                  "  time              2.00 s (20 schedules/s)"]
    assert summary(result(bound=None, exhausted=False), None).splitlines()[0] == (
        "crash_pr under pre_fix: exhaustive, preemption bound none")
    assert "  covered           a part of the space (budget or stop)" in summary(result(exhausted=False), None)
    assert summary(result(failing=1, schedules_run=3), None).splitlines()[3] == "  failing           1 (33.3%)"


def args(**changes) -> NS:
    a = dict(scenario="scenario_a", preset=None, flag=None, strategy="exhaustive", bound=None, seed="0", budget=None,
             jobs="1", shrink=False, out=None, json=False, progress=False, reduce="state")
    return NS(**{**a, **changes})


@pytest.fixture
def searches(monkeypatch):
    """What reaches the search, recorded on the way through to the real one."""
    return record_calls(monkeypatch, cli_module, "explore")


def test_what_reaches_the_search(searches, capsys):
    assert cli_explore(args()) == 0
    assert cli_explore(args(reduce="dpor")) == 0
    assert cli_explore(args(strategy="random", budget="30", seed="5", jobs="1", flag=["stale_guards=true"],
                            preset="merged_fix")) == 0
    assert cli_explore(args(bound="1")) == 0
    no_reduce = args()
    del no_reduce.reduce  # an older namespace without --reduce searches with state pruning
    assert cli_explore(no_reduce) == 0
    sc_names = [a[0].name for a, _ in searches]
    assert sc_names == ["scenario_a"] * 5
    assert [a[1:] for a, _ in searches] == [
        (None, {}, "exhaustive", 2, 0, None, 1), (None, {}, "exhaustive", None, 0, None, 1),
        ("merged_fix", {"stale_guards": True}, "random", None, 5, 30, 1), (None, {}, "exhaustive", 1, 0, None, 1),
        (None, {}, "exhaustive", 2, 0, None, 1)]
    assert [kw for _, kw in searches] == [dict(progress=None, reduce=r) for r in ("state", "dpor", "state", "state",
                                                                                 "state")]
    capsys.readouterr()


def test_without_shrinking_the_first_failure_is_the_minimal_case(capsys):
    assert cli_explore(args(json=True)) == 0
    out = json.loads(capsys.readouterr().out)
    f = out["first_failure"]
    assert out["minimal"] == dict(schedule=f["schedule"], steps=f["steps"], assertion=f["assertion"],
                                  raised_in=f["raised_in"], signature=f["signature"], switches=f["switches"],
                                  preemptions=f["preemptions"], shrunk=False)
    assert "written" not in out


def test_shrinking_gives_the_shrunk_case(capsys):
    from simcache.explore.shrink import shrink
    from simcache.scenario import load

    assert cli_explore(args(json=True, shrink=True)) == 0
    out = json.loads(capsys.readouterr().out)
    sh = shrink(load("scenario_a"), "pre_fix", {}, out["first_failure"]["schedule"])
    assert out["minimal"] == dict(sh.as_dict(), shrunk=True)


def test_the_artefacts_written_and_said(tmp_path, capsys):
    folder = tmp_path / "out"
    assert cli_explore(args(out=str(folder), shrink=True)) == 0
    text = capsys.readouterr().out
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(["schedule.txt", "minimal.yaml", "trace.json", "explore.json",
                            "test_minimal_scenario_a.py"])
    said = [line for line in text.splitlines() if line.startswith("  wrote ")]
    assert said == [f"  wrote {k:9s} {folder / n}" for k, n in (
        ("schedule", "schedule.txt"), ("scenario", "minimal.yaml"), ("trace", "trace.json"),
        ("test", "test_minimal_scenario_a.py"), ("result", "explore.json"))]
    assert text.splitlines()[0] == "scenario_a under pre_fix: exhaustive, preemption bound 2"
    saved = json.loads((folder / "explore.json").read_text())
    assert saved["minimal"]["shrunk"] is True and "written" not in saved
    again = tmp_path / "json"
    assert cli_explore(args(out=str(again), json=True)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["written"]["result"] == str(again / "explore.json") and out["minimal"]["shrunk"] is False
    assert sorted(out["written"]) == ["result", "scenario", "schedule", "test", "trace"]


def test_a_clean_search_writes_only_its_result(tmp_path, capsys):
    folder = tmp_path / "clean"
    assert cli_explore(args(scenario="scenario_a", preset="followup_fix", out=str(folder), json=True)) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["minimal"] is None and out["failing"] == 0
    assert [p.name for p in folder.iterdir()] == ["explore.json"]
    assert out["written"] == {"result": str(folder / "explore.json")}


def test_a_folder_that_cannot_take_the_artefacts_is_refused_before_any_search(tmp_path, searches):
    for name in ("schedule.txt", "explore.json", "test_minimal_scenario_a.py"):
        out = tmp_path / name.split(".")[0]
        (out / name).mkdir(parents=True)
        with pytest.raises(UsageError) as e:
            cli_explore(args(out=str(out)))
        assert str(e.value) == f"{out} holds a folder named {name} where a file goes; choose another --out"
        assert e.value.__suppress_context__ and [p.name for p in out.iterdir()] == [name]
    assert searches == []


def test_a_write_that_fails_is_one_usage_sentence(monkeypatch, tmp_path):
    from simcache import safe_io
    from simcache.errors import FileError

    def full(*a, **kw):
        raise FileError("the disk is full")

    monkeypatch.setattr(safe_io, "write_folder", full)
    with pytest.raises(UsageError) as e:
        cli_explore(args(out=str(tmp_path / "o")))
    assert str(e.value) == "the disk is full" and e.value.__suppress_context__
    assert not (tmp_path / "o").exists()


def test_a_conflict_found_by_the_search_names_the_scenario(monkeypatch):
    def conflict(*a, **kw):
        raise ScenarioError("two live requests share id r1")

    monkeypatch.setattr(cli_module, "explore", conflict)
    with pytest.raises(ScenarioError) as e:
        cli_explore(args())
    assert str(e.value) == "scenario_a: two live requests share id r1" and e.value.__suppress_context__

    def named(*a, **kw):
        raise ScenarioError("scenario_a: already named")

    monkeypatch.setattr(cli_module, "explore", named)
    with pytest.raises(ScenarioError) as e:
        cli_explore(args())
    assert str(e.value) == "scenario_a: already named"


def test_the_bar_is_closed_even_when_the_search_fails(monkeypatch):
    closed = []

    class Bar:
        def __call__(self, info):
            pass

        def close(self):
            closed.append(True)

    monkeypatch.setattr(cli_module, "progress_for", lambda label, on: Bar() if on else None)

    def conflict(*a, **kw):
        raise ScenarioError("x")

    monkeypatch.setattr(cli_module, "explore", conflict)
    with pytest.raises(ScenarioError):
        cli_explore(args(progress=True))
    assert closed == [True]


@pytest.mark.parametrize("shrinking", [True, False])
def test_the_minimal_case_keeps_the_searchs_preset_flags_and_failure(tmp_path, capsys, shrinking):
    """hidden_needle's own schedule is clean, so a case built from it instead of the failure would not fail."""
    import yaml

    from simcache.explore.shrink import shrink
    from simcache.scenario import load

    folder = tmp_path / "out"
    assert cli_explore(args(scenario="hidden_needle", preset="merged_fix", flag=["stale_guards=true"], out=str(folder),
                            json=True, shrink=shrinking)) == 0
    printed = capsys.readouterr().out
    out = json.loads(printed)
    assert printed == json.dumps(out, indent=1) + "\n"
    saved = (folder / "explore.json").read_text()
    assert saved == json.dumps({k: v for k, v in out.items() if k != "written"}, indent=1) + "\n"
    doc = yaml.safe_load((folder / "minimal.yaml").read_text())
    assert (doc["preset"], doc["flags"]) == ("merged_fix", {"stale_guards": True})
    failing = out["first_failure"]["schedule"]
    if shrinking:
        sh = shrink(load("hidden_needle"), "merged_fix", {"stale_guards": True}, failing)
        assert out["minimal"] == dict(sh.as_dict(), shrunk=True)
    else:
        assert doc["schedule"] == failing == out["minimal"]["schedule"]


def test_the_text_summary_shows_the_minimal_case_and_the_bar_follows_the_search(capsys):
    assert cli_explore(args(progress=True)) == 0
    out, err = capsys.readouterr()
    assert "  shrink it with --shrink: mem l3 mem  (3 steps, 2 switches) -> " in out
    assert err.startswith("\rexplore scenario_a: 0 runs  failing 0  level 0  pruned 0  ") and err.endswith("\033[K\n")
    quiet = args()
    del quiet.progress  # a namespace without --progress shows no bar
    assert cli_explore(quiet) == 0 and capsys.readouterr().err == ""
