"""Exploration pins the bug with outcome sets over all schedules, not with samples (STYLE items 7-9).

Each claim names its preemption bound: every schedule of the scenario's actors with at most that many preemptions
(switches away from an actor that still has operations) is covered, so "cannot reach" means "no schedule within
the bound reaches". The claims match SGLang's real code where it exists (pre_fix, merged_fix, followup_fix; see
the gallery's expect blocks): pre_fix reaches ``parent does not have child key`` on every gallery scenario,
followup_fix cannot on scenario A, merged_fix cannot on scenario D, and the described fix never raises it but
leaves leaked host slots, which the explorer reports.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.errors import SimcacheError
from simcache.explore import ExploreError, explore, plan_for, shrink, write_artefacts
from simcache.explore.machine import Machine, signature
from simcache.explore.results import count_preemptions
from simcache.explore.sampling import draw_pct, draw_random, run_schedule
from simcache.explore.shrink import shrink_again
from simcache.explore.statekey import CACHE_ATTRS, CONTROLLER_ATTRS, DRIVER_ATTRS
from simcache.ops_run import execute
from simcache.scenario import load
from simcache.simulate import simulate
from simcache.versions import preset

ROOT = Path(__file__).resolve().parent.parent
X = "parent does not have child key"
RACE_C = f"AssertionError: {X}, 1 @ _delete_tombstone_leaf"
# the bound each claim is made within: the whole space for the small scenarios
BOUND = {"scenario_a": None, "scenario_b": None, "scenario_d": None, "scenario_c": 2, "crash_pr": 2}


def races(res) -> set[str]:
    return {s for s in res.signatures if X in s}


# --- pre_fix reaches the race; what each fix rules out ----------------------------------------------------------

@pytest.mark.parametrize("name, minimal", [
    ("scenario_a", "mem l3 mem"), ("scenario_b", "A B mem*2 C mem2"), ("scenario_d", "mem*2"),
    ("scenario_c", "pf R2 pf R4 mem R6 ctl*3 mem")])
def test_pre_fix_reaches_the_race_within_the_bound_and_the_first_hit_has_the_fewest_preemptions(name, minimal):
    res = explore(name, "pre_fix", bound=BOUND[name], until=X)
    f = res.first_failure
    assert X in f.signature and f.schedule == minimal
    sc = load(name)
    assert f.preemptions == count_preemptions(sc.parse_schedule(minimal).turns, sc.lengths)
    run = simulate(sc, "pre_fix", schedule=f.schedule)  # the traced, full-fidelity path agrees
    assert signature(run.crash) == f.signature


def test_pre_fix_reaches_the_race_of_the_pr_traceback_within_two_preemptions():
    # one depth-first search over the schedules within the bound (the fewest-preemptions-first order proves on
    # scenario_c, above, that nothing with fewer preemptions fails; for crash_pr it is a benchmark)
    from simcache.explore.search import exhaustive
    from simcache.simulate import resolve_flags

    sc = load("crash_pr")
    name, fl = resolve_flags(sc, "pre_fix", None)
    res = exhaustive(plan_for(sc, fl), name, bound=2, until=X, iterative=False)
    f = res.first_failure
    assert (f.schedule, f.preemptions, f.raised_in) == ("pf R2 pf R4 mem R6 ctl*4 mem R7", 2, "_delete_tombstone_leaf")
    run = simulate("crash_pr", "pre_fix", schedule=f.schedule)
    assert run.crash.stack[:5] == ("cache_finished_req", "insert", "_insert_helper", "_inc_hit_count", "write_backup")


def test_on_scenario_a_pre_fix_has_three_outcomes_and_followup_fix_only_clean_ones():
    pre, fixed = explore("scenario_a", "pre_fix"), explore("scenario_a", "followup_fix")
    assert pre.space_covered and fixed.space_covered
    assert dict(pre.outcomes) == {f"AssertionError: {X}, 1 @ _evict_host_leaf": 1, "clean": 2}
    assert dict(fixed.outcomes) == {"clean": 3} and fixed.damage == ()


def test_on_scenario_d_merged_fix_cannot_reach_the_race_in_any_schedule():
    assert races(explore("scenario_d", "pre_fix")) == {f"AssertionError: {X}, 1 @ _delete_tombstone_leaf"}
    res = explore("scenario_d", "merged_fix")
    assert res.space_covered and res.signatures == {"clean"}


@pytest.mark.parametrize("name, leak", [("scenario_a", True), ("scenario_b", True), ("scenario_c", True),
                                        ("scenario_d", False)])
def test_described_fix_never_raises_the_race_but_the_explorer_reports_the_leak_it_leaves(name, leak):
    res = explore(name, "described_fix", bound=BOUND[name])
    assert res.exhausted and not races(res)
    assert ("leaked:host_kv" in dict(res.damage)) is leak
    if leak:  # the first schedule that leaks, replayed with the trace, leaks host slots
        run = simulate(name, "described_fix", schedule=dict(res.damage)["leaked:host_kv"])
        assert run.result["accounting"]["host_kv"]["leaked"]


def test_described_fix_on_scenario_b_trades_the_race_for_another_assertion():
    res = explore("scenario_b", "described_fix")
    assert res.space_covered and not races(res)
    assert "AssertionError: not backuped, node.id=# @ _evict_to_host" in res.signatures


# --- the search itself -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, bound", [("scenario_b", None), ("scenario_c", 0)])
def test_pruning_equivalent_prefixes_keeps_the_verdict_and_runs_fewer_schedules(name, bound):
    pruned, full = explore(name, "pre_fix", bound=bound), explore(name, "pre_fix", bound=bound, prune=False)
    assert pruned.signatures == full.signatures
    assert dict(pruned.damage).keys() == dict(full.damage).keys()
    assert pruned.distinct_states == full.distinct_states
    assert pruned.schedules_run < full.schedules_run


def test_the_state_key_covers_every_attribute_of_the_cache_the_controller_and_the_driver():
    m = Machine(plan_for(load("crash_pr"), preset("pre_fix")), data=True)
    assert set(vars(m.cache)) == CACHE_ATTRS
    assert set(vars(m.cache.controller)) == CONTROLLER_ATTRS
    assert set(vars(m.driver)) == DRIVER_ATTRS


def test_the_fast_machine_agrees_with_the_full_simulation_on_outcome_and_damage():
    sc, fl = load("crash_pr"), preset("described_fix")
    plan = plan_for(sc, fl)
    res = explore(sc, "described_fix", strategy="random", seed=3, budget=40)
    assert res.schedules_run == 40
    import random

    rng = random.Random(3)
    for _ in range(40):
        idx = draw_random(rng, plan.lengths)
        _, crash, _, damage = run_schedule(plan, idx)
        turns = tuple(plan.actors[i] for i in idx)
        from simcache.scheduler import Schedule

        r = execute(sc.config, sc.linearize(Schedule(turns)), fl)
        assert signature(crash) == signature(r["_crash"])
        leaked = {f"leaked:{p}" for p, a in r["accounting"].items() if a["leaked"]}
        assert {tag for tag, _ in damage if tag.startswith("leaked")} == leaked


def test_every_way_of_getting_a_prefix_state_gives_the_same_result():
    for name, bound in (("scenario_b", None), ("scenario_c", 0)):
        runs = [explore(name, "pre_fix", bound=bound, mode=m) for m in ("keep", "fork", "replay")]
        assert runs[0] == runs[1] == runs[2]


def test_random_and_pct_are_reproducible_with_a_seed_and_differ_across_seeds():
    import random

    for strategy in ("random", "pct"):
        a, b = (explore("scenario_b", "pre_fix", strategy=strategy, seed=7, budget=60) for _ in range(2))
        assert a == b and a.schedules_run == 60 and a.seed == 7
    lengths = load("scenario_c").lengths.values()
    for draw in (lambda r: draw_random(r, tuple(lengths)), lambda r: draw_pct(r, tuple(lengths), 3)):
        seven, eight = (draw(random.Random(s)) for s in (7, 8))
        assert seven == draw(random.Random(7)) and seven != eight and sorted(seven) == sorted(eight)


def test_pct_schedules_follow_priorities_with_at_most_depth_minus_one_changes():
    import random

    rng = random.Random(0)
    for _ in range(200):  # with depth 1 there is no change point: each actor runs to its end (no preemption)
        turns = draw_pct(rng, (2, 1, 3), 1)
        assert count_preemptions(turns, {0: 2, 1: 1, 2: 3}) == 0
    for _ in range(200):
        assert count_preemptions(draw_pct(rng, (2, 1, 3), 3), {0: 2, 1: 1, 2: 3}) <= 2


def test_parallel_exploration_equals_serial():
    for kw in (dict(strategy="exhaustive", bound=0), dict(strategy="pct", seed=5, budget=64, bound=3),
               dict(strategy="random", seed=5, budget=64)):
        assert explore("scenario_c", "pre_fix", jobs=2, **kw) == explore("scenario_c", "pre_fix", **kw)


def test_a_budget_stops_the_search_and_says_the_space_was_not_exhausted():
    res = explore("scenario_c", "pre_fix", bound=2, budget=50)
    assert res.schedules_run == 50 and not res.exhausted and not res.space_covered


# --- the needle ---------------------------------------------------------------------------------------------------

def test_the_explorer_finds_the_needle_and_shrinks_it_to_no_more_switches_than_the_known_minimum():
    sc = load("hidden_needle")
    known = sc.parse_schedule(sc.minimal_schedule)
    assert simulate(sc, "pre_fix").outcome == "clean"  # the default schedule hides it
    res = explore(sc, "pre_fix", bound=1, until=X)
    assert res.total_schedules == 302_400 and res.first_failure.schedule == sc.minimal_schedule
    assert res.first_failure.preemptions == count_preemptions(known.turns, sc.lengths) == 1
    small = shrink(sc, "pre_fix", schedule=res.first_failure.schedule)
    assert small.signature == RACE_C and "U" not in small.scenario.actors
    assert small.switches <= known.switches


# --- shrinking and artefacts --------------------------------------------------------------------------------------

def test_shrinking_keeps_the_failure_and_is_idempotent():
    small = shrink("scenario_c", "pre_fix")  # 6 operations: minimal by brute force (test_minimality.py)
    assert (small.schedule, small.steps, small.switches, small.preemptions) == ("pf R2 pf R4 R6 mem", 6, 5, 1)
    assert small.signature == RACE_C
    assert {a: len(o) for a, o in small.scenario.actors.items()} == dict(pf=2, R2=1, R4=1, R6=1, mem=1)
    run = simulate(small.scenario, "pre_fix")  # the scenario carries its schedule
    assert signature(run.crash) == RACE_C and run.crash.message == f"{X}, 1"
    assert shrink_again(small).case() == small.case()


def test_shrinking_a_clean_run_is_a_clear_error():
    with pytest.raises(ExploreError, match="does not fail under followup_fix"):
        shrink("scenario_a", "followup_fix")


def test_the_artefacts_replay_and_the_generated_pytest_file_passes(tmp_path):
    small = shrink("scenario_a", "pre_fix")
    paths = write_artefacts(tmp_path / "out", small.scenario, small.preset, small.schedule)
    assert paths["schedule"].read_text() == "mem l3 mem\n"
    again = load(str(paths["scenario"]))
    assert again.schedule == "mem l3 mem" and again.expect["pre_fix"]["raised_in"] == "_evict_host_leaf"
    import json

    trace = json.loads(paths["trace"].read_text())
    assert trace["outcome"] == "assertion" and len(trace["micro_steps"]) == trace["steps"] > 0
    assert paths["test"].name == "test_minimal_scenario_a.py"
    moved = tmp_path / "elsewhere" / paths["test"].name  # the file does not depend on where it lies
    moved.parent.mkdir()
    moved.write_text(paths["test"].read_text())
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # it needs no plugin; they only slow the start
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(moved)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


# --- the command line ---------------------------------------------------------------------------------------------

def test_cli_json_has_the_fields_and_the_shrunk_minimal_case(capsys, tmp_path):
    import json

    assert main(["explore", "scenario_a", "--shrink", "--json", "--out", str(tmp_path)]) == 0
    j = json.loads(capsys.readouterr().out)
    assert (j["strategy"], j["schedules_run"], j["distinct_states"], j["failing"], j["exhausted"]) == \
           ("exhaustive", 3, 3, 1, True)
    assert j["bound"] == 2 and j["seed"] is None
    assert j["minimal"]["schedule"] == "mem l3 mem" and j["minimal"]["steps"] == 3
    assert j["minimal"]["assertion"] == f"AssertionError: {X}, 1"
    assert {p.name for p in tmp_path.iterdir()} == {"schedule.txt", "minimal.yaml", "trace.json", "explore.json",
                                                    "test_minimal_scenario_a.py"}


def test_cli_summary_and_a_clean_search(capsys):
    assert main(["explore", "scenario_d", "--preset", "merged_fix"]) == 0
    out = capsys.readouterr().out
    assert "scenario_d under merged_fix: exhaustive, preemption bound 2" in out and "1  clean" in out
    assert main(["explore", "scenario_d", "--preset", "merged_fix", "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["minimal"] is None


@pytest.mark.parametrize("argv, sentence", [
    (["explore", "scenario_a", "--budget", "0"], "--budget must be a whole number >= 1, not 0"),
    (["explore", "scenario_a", "--jobs", "0"], "--jobs must be a whole number >= 1, not 0"),
    (["explore", "scenario_a", "--strategy", "pct", "--bound", "0"], "--bound (the PCT depth) must be at least 1"),
    (["explore", "nope"], "no scenario named 'nope'"),
    (["explore", "scenario_a", "--preset", "newest"], "unknown preset 'newest'"),
])
def test_bad_explore_calls_say_one_sentence_and_exit_2(argv, sentence, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and sentence in err


def test_bad_api_arguments_raise_simcache_errors():
    with pytest.raises(SimcacheError, match="unknown strategy 'dfs'"):
        explore("scenario_a", strategy="dfs")
    with pytest.raises(SimcacheError, match="--bound must be a whole number >= 0"):
        explore("scenario_a", bound=-1)


def test_the_progress_line_is_drawn_only_when_asked_and_goes_to_its_stream():
    import io

    from simcache.progress import ProgressBar

    quiet, loud = io.StringIO(), io.StringIO()
    ProgressBar("x", quiet, enabled=False)(dict(runs=5, total=5))
    bar = ProgressBar("explore", loud, enabled=True, width=10)
    bar(dict(runs=5, total=10, failing=1))
    bar(dict(runs=10, total=10, failing=1))  # the last update is always drawn
    bar.close()
    assert quiet.getvalue() == ""
    text = loud.getvalue()
    assert text.startswith("\rexplore: [#####.....] 5/10  failing 1") and "[##########] 10/10" in text
    assert text.endswith("\n")
    res = explore("scenario_b", "pre_fix", strategy="random", budget=128, progress=ProgressBar("r", loud, True))
    assert res.schedules_run == 128
