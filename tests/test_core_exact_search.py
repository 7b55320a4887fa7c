"""``explore``'s entry point, exactly: every refusal's whole sentence, and each argument reaching the search it picks
(compared as whole results: the same search called directly, or the result another value gives)."""
from __future__ import annotations

import inspect
from collections import Counter

import pytest

from simcache.explore import search, workers
from simcache.explore.machine import Machine
from simcache.explore.results import Tally, count_preemptions
from simcache.explore.search import ExploreError, explore


@pytest.mark.parametrize("kw, message", [
    (dict(strategy="dfs"), "unknown strategy 'dfs'; choose one of exhaustive, random, pct"),
    (dict(mode="x"), "unknown mode 'x'; choose one of keep, fork, replay"),
    (dict(bound=-1), "--bound must be a whole number >= 0, not -1"),
    (dict(budget=0), "--budget must be a whole number >= 1, not 0"),
    (dict(jobs=0), "--jobs must be a whole number >= 1, not 0"),
    (dict(jobs=True), "--jobs must be a whole number >= 1, not True"),
    (dict(seed="1"), "--seed must be a whole number, not '1'"),
    (dict(reduce="x"), "unknown reduction 'x'; choose one of state, none, dpor"),
    (dict(reduce="dpor", bound=1, jobs=2, strategy="random"),
     "--reduce dpor searches the whole schedule space exhaustively, in one process (an equivalent order may need "
     "more preemptions than a bound allows): drop --bound and --jobs and --strategy"),
    (dict(reduce="dpor", strategy="pct"),
     "--reduce dpor searches the whole schedule space exhaustively, in one process (an equivalent order may need "
     "more preemptions than a bound allows): drop --strategy"),
    (dict(strategy="pct", bound=0), "--bound (the PCT depth) must be at least 1"),
])
def test_each_refusal_is_its_whole_sentence(kw, message):
    with pytest.raises(ExploreError) as e:
        explore("scenario_b", "pre_fix", **kw)
    assert str(e.value) == message


def test_the_smallest_budget_and_pct_depth_are_accepted():
    one = explore("scenario_b", "pre_fix", strategy="random", budget=1)
    assert (one.strategy, one.budget, one.schedules_run) == ("random", 1, 1)
    shallow = explore("scenario_b", "pre_fix", strategy="pct", bound=1, budget=5)
    assert (shallow.strategy, shallow.bound, shallow.schedules_run) == ("pct", 1, 5)


def test_sampling_defaults_to_seed_0_a_depth_of_3_and_1000_schedules():
    assert explore("scenario_b", "pre_fix", strategy="random", budget=40) == explore(
        "scenario_b", "pre_fix", strategy="random", budget=40, seed=0)
    assert explore("scenario_b", "pre_fix", strategy="random", budget=40) != explore(
        "scenario_b", "pre_fix", strategy="random", budget=40, seed=1)
    pct = explore("scenario_b", "pre_fix", strategy="pct", budget=40)
    assert pct == explore("scenario_b", "pre_fix", strategy="pct", budget=40, bound=3)
    assert (pct.preset, pct.strategy, pct.bound) == ("pre_fix", "pct", 3)
    assert pct != explore("scenario_b", "pre_fix", strategy="pct", budget=40, bound=4)
    assert explore("scenario_b", "pre_fix", strategy="random").schedules_run == 1000


def test_flags_given_with_a_preset_reach_the_search():
    plain = explore("scenario_b", "pre_fix")
    fixed = explore("scenario_b", "pre_fix", flags=dict(stale_guards=True))
    assert plain.failing and fixed.signatures != plain.signatures


def test_a_reduction_picks_the_pruning_whatever_prune_says():
    state = explore("scenario_b", "pre_fix", bound=1, prune=False, reduce="state")
    none = explore("scenario_b", "pre_fix", bound=1, prune=True, reduce="none")
    assert state == explore("scenario_b", "pre_fix", bound=1, prune=True)
    assert none == explore("scenario_b", "pre_fix", bound=1, prune=False)
    assert none.pruned == 0 < state.pruned


def test_dpor_is_handed_the_preset_budget_and_stopping_text():
    whole = explore("scenario_b", "pre_fix", reduce="dpor")
    assert (whole.preset, whole.exhausted) == ("pre_fix", True) and whole.schedules_run > 3
    cut = explore("scenario_b", "pre_fix", reduce="dpor", budget=3)
    assert (cut.schedules_run, cut.exhausted) == (3, False)
    first = explore("scenario_b", "pre_fix", reduce="dpor", until="")
    assert first.failing == 1 and first.first_failure is not None and first.schedules_run < whole.schedules_run


def test_a_bound_that_cuts_schedules_off_leaves_the_space_not_covered():
    bounded = explore("scenario_b", "pre_fix", bound=0)
    whole = explore("scenario_b", "pre_fix")
    assert (bounded.exhausted, bounded.space_covered) == (True, False)
    assert (whole.exhausted, whole.space_covered, whole.total_schedules) == (True, True, 360)
    assert bounded.schedules_run < whole.schedules_run


def test_sampling_stops_at_the_first_failure_it_is_told_to_wait_for():
    whole = explore("scenario_b", "pre_fix", strategy="random", budget=200)
    first = explore("scenario_b", "pre_fix", strategy="random", budget=200, until="")
    assert whole.failing > 1 and first.failing == 1 and first.schedules_run < whole.schedules_run
    assert first.first_failure is not None and not first.exhausted


# --- exhaustive itself: its defaults, its process pool, progress, run order, how each mode gets its states ---
def _plan(scenario: str, preset: str = "pre_fix"):
    from simcache.explore.machine import plan_for
    from simcache.scenario import load
    from simcache.simulate import resolve_flags

    return plan_for(load(scenario), resolve_flags(load(scenario), preset, None)[1])


def _record_runs(monkeypatch, crashed: list | None = None) -> list[tuple[int, ...]]:
    """Each run's turns (actor indices, up to a crash), in the order the search tallies them; ``crashed`` gets
    whether each run crashed."""
    runs, add = [], Tally.add

    def spy(self, out):
        runs.append(out[0])
        if crashed is not None:
            crashed.append(out[1] is not None)
        return add(self, out)

    monkeypatch.setattr(Tally, "add", spy)
    return runs


def test_exhaustive_defaults_to_pruning_one_process_keep_mode_and_fewest_preemptions_first():
    params = inspect.signature(search.exhaustive).parameters
    assert {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty} == dict(
        bound=None, budget=None, prune=True, jobs=1, mode="keep", until=None, iterative=True, progress=None)


def test_a_process_pool_is_made_only_for_more_than_one_job_and_its_pending_work_is_cancelled(monkeypatch):
    made, real = [], workers.make_pool

    def spy(jobs, plan):
        pool, shutdown = real(jobs, plan), None
        made.append((jobs, plan.name))
        shutdown = pool.shutdown

        def closing(*args, **kwargs):
            made.append(("shutdown", args, kwargs))
            return shutdown(*args, **kwargs)

        pool.shutdown = closing
        return pool

    monkeypatch.setattr(workers, "make_pool", spy)
    plan = _plan("scenario_b")
    one = search.exhaustive(plan, "pre_fix", bound=1, jobs=1)
    assert made == []
    two = search.exhaustive(plan, "pre_fix", bound=1, jobs=2)
    assert made == [(2, "scenario_b"), ("shutdown", (), {"cancel_futures": True})]
    assert two == one and two.schedules_run == 75


def test_progress_reports_runs_failures_level_and_pruned_after_each_round_ending_at_the_result():
    seen = []
    r = search.exhaustive(_plan("scenario_b"), "pre_fix", bound=1, progress=seen.append)
    assert len(seen) > 2 and all(type(p) is dict and set(p) == {"runs", "failing", "level", "pruned"} for p in seen)
    levels, runs = [p["level"] for p in seen], [p["runs"] for p in seen]
    assert levels == sorted(levels) and (levels[0], levels[-1]) == (0, 1) and runs == sorted(runs)
    assert (seen[-1]["runs"], seen[-1]["failing"], seen[-1]["pruned"]) == (r.schedules_run, r.failing, r.pruned)
    assert r.pruned > 1 and [p["pruned"] for p in seen] == sorted(p["pruned"] for p in seen)


@pytest.mark.parametrize("scenario, bound", [("scenario_b", 2), ("nonleaf_prefetch", None), ("scenario_c", 1)])
def test_runs_come_fewest_preemptions_first_and_no_schedule_runs_twice(monkeypatch, scenario, bound):
    crashed = []
    runs = _record_runs(monkeypatch, crashed)
    plan = _plan(scenario)
    r = search.exhaustive(plan, "pre_fix", bound=bound)
    lengths = dict(zip(plan.actors, plan.lengths, strict=True))
    turns = [[plan.actors[i] for i in idx] for idx in runs]
    # a run ends when its prefix, expanded at the level of its preemptions, gets its last turn (a last turn that
    # preempts makes a run of the next level, tallied at once: nothing is left to queue)
    levels = [count_preemptions(t[:-1], lengths) for t in turns]
    assert levels == sorted(levels) and len(set(levels)) > 1
    assert bound is None or max(count_preemptions(t, lengths) for t in turns) <= bound
    assert len(set(runs)) == len(runs) == r.schedules_run
    failing = [(count_preemptions(t, lengths), len(t)) for t, c in zip(turns, crashed, strict=True) if c]
    assert len(failing) == r.failing > 0
    assert (r.first_failure.preemptions, r.first_failure.steps) == min(failing)  # the simplest failure found


@pytest.mark.parametrize("mode", search.MODES)
def test_each_mode_gets_its_states_as_documented(monkeypatch, mode):
    # keep: the root replayed once, each child a clone but the last (which takes its parent's machine); fork: each
    # parent replayed once and cloned likewise; replay: every child replayed from scratch, nothing cloned
    counts, children = Counter(), []
    replay, clone, expand = Machine.replay.__func__, Machine.clone, search._expand

    def counted_replay(cls, plan, turns):
        counts["replay"] += 1
        return replay(cls, plan, turns)

    def counted_clone(self):
        counts["clone"] += 1
        return clone(self)

    def counted_expand(*args):
        out = expand(*args)
        children.append(len(out[0]))
        return out

    monkeypatch.setattr(Machine, "replay", classmethod(counted_replay))
    monkeypatch.setattr(Machine, "clone", counted_clone)
    monkeypatch.setattr(search, "_expand", counted_expand)
    r = search.exhaustive(_plan("scenario_b"), "pre_fix", bound=1, mode=mode)
    assert r.schedules_run == 75 and len(children) > 10 and max(children) > 1
    shared = sum(n - 1 for n in children if n)
    assert dict(counts) == {"keep": {"replay": 1, "clone": shared}, "fork": {"replay": len(children), "clone": shared},
                            "replay": {"replay": sum(children)}}[mode]


def test_a_worker_expands_a_prefix_by_forking_from_its_own_plan_with_its_own_damage_memo(monkeypatch):
    # what each pool process runs (in a worker, so only a direct call shows it to the tests' tracing)
    plan, memo = _plan("scenario_b"), {}
    monkeypatch.setattr(workers, "PLAN", plan)
    monkeypatch.setattr(workers, "DAMAGE", memo)

    def plain(children):  # (actor, preemptions, state key, the run's turns, end and damage, machine)
        return [(i, pre, key, out and (out[0], out[2], out[3]), m) for i, pre, key, out, m in children]

    a_done = (0,), (1, 0, 0, 0, 0), 0  # A has run its one operation: every other actor is free
    mem_half = (2,), (0, 0, 1, 0, 0), 2  # mem has one of its two left: only mem is free at bound 0
    for (idx, pos, cur), bound, turns, cut in ((a_done, 0, [1, 2, 3, 4], False), (mem_half, 0, [2], True)):
        got = search._expand_remote((search._Item(idx, pos, cur, 0), bound, True))
        want = search._expand(plan, search._Item(idx, pos, cur, 0), bound, "fork", {})
        assert (plain(got[0]), got[1]) == (plain(want[0]), want[1])
        # a search that does not prune asks for no state keys: the same children, each key None
        unkeyed = search._expand_remote((search._Item(idx, pos, cur, 0), bound, False))
        assert [c[:2] + c[3:] for c in plain(unkeyed[0])] == [c[:2] + c[3:] for c in plain(want[0])]
        assert all(c[2] is None for c in unkeyed[0]) and any(c[2] is not None for c in want[0])
        assert [c[:2] for c in got[0]] == [(i, 0) for i in turns] and got[1] is cut
        assert all(c[4] is None for c in got[0])  # fork keeps no machine
    ends = [c[3] for c in search._expand_remote((search._Item(*a_done, 0), 0, True))[0] if c[3] is not None]
    assert [out[0] for out in ends] == [(0, 2), (0, 4)]  # two runs end here (A then mem, A then mem2 crash) ...
    assert sorted(memo) == sorted(out[2] for out in ends)  # ... and the worker's own memo holds their ends


TWO_WAYS = """
name: two_ways
title: the same crash with one preemption in two steps, or with none in four
description: scenario_d's injected state; b's eviction after a's host eviction asserts
config: {policy: write_through, storage: false, device_kv: 32, device_mamba: 8, host_kv: 8, host_mamba: 8}
initial:
  - {key: [1, 2], parent: null, host: true}
  - {key: [3], parent: 0, device: true, mamba: true}
actors:
  a: ["evict_host 2", "events", "events"]
  b: ["evict 1"]
schedule: a*3 b
"""


def test_the_reported_failure_has_the_fewest_preemptions_even_when_one_with_more_was_found_first(tmp_path):
    # at level 0 a prefix's last turn may preempt (a b: switching away from a with a left) and crash; that run is
    # tallied at once, before the level's own a*3 b, but a*3 b is the simpler failure: no preemption
    from simcache.explore.machine import plan_for
    from simcache.scenario import load
    from simcache.simulate import resolve_flags

    path = tmp_path / "two_ways.yaml"
    path.write_text(TWO_WAYS)
    sc = load(str(path))
    plan = plan_for(sc, resolve_flags(sc, "pre_fix", None)[1])
    for bound in (1, None):
        r = search.exhaustive(plan, "pre_fix", bound=bound)
        assert (r.schedules_run, r.failing_schedules) == (4, ("a b", "a*2 b", "a*3 b"))
        assert (r.first_failure.schedule, r.first_failure.preemptions, r.first_failure.steps) == ("a*3 b", 0, 4)
    asked = search.exhaustive(plan, "pre_fix", bound=1, until="")  # stopping at the first failure: that one
    assert (asked.schedules_run, asked.first_failure.schedule, asked.exhausted) == (1, "a b", False)
    assert search.exhaustive(plan, "pre_fix", bound=0).first_failure.schedule == "a*3 b"


@pytest.mark.parametrize("scenario", ["scenario_b", "scenario_c"])
def test_each_child_whose_state_was_reached_before_is_pruned_once(monkeypatch, scenario):
    # at bound 0 nothing is queued for a later level: every child that is not a whole run is either pruned or
    # expanded itself (the root is nobody's child)
    expansions, expand = [], search._expand

    def counted_expand(*args):
        out = expand(*args)
        expansions.append(sum(child[3] is None for child in out[0]))  # children that are not whole runs
        return out

    monkeypatch.setattr(search, "_expand", counted_expand)
    r = search.exhaustive(_plan(scenario), "pre_fix", bound=0)
    assert r.exhausted and r.pruned > 2
    assert r.pruned == sum(expansions) - (len(expansions) - 1)
    monkeypatch.setattr(search, "_expand", expand)
    assert search.exhaustive(_plan(scenario), "pre_fix", bound=0, prune=False).pruned == 0


def test_inside_a_level_the_search_goes_depth_first_in_rounds_of_batch_prefixes(monkeypatch):
    # the first whole run comes after at most one round per operation (not after a whole layer of prefixes, as
    # breadth-first would), so the stack stays small
    calls, expand = [], search._expand

    def counted_expand(*args):
        calls.append(len(args[1].idx))
        return expand(*args)

    monkeypatch.setattr(search, "_expand", counted_expand)
    plan = _plan("crash_pr")
    r = search.exhaustive(plan, "pre_fix", bound=1, budget=1)
    assert r.schedules_run == 1 and not r.exhausted
    assert len(calls) <= search.BATCH * plan.total and max(calls) == plan.total - 1


def test_explore_hands_jobs_and_the_mode_to_the_search_it_picks(monkeypatch):
    made, real = [], workers.make_pool
    monkeypatch.setattr(workers, "make_pool", lambda jobs, plan: made.append(jobs) or real(jobs, plan))
    serial = explore("scenario_b", "pre_fix", bound=1)
    assert explore("scenario_b", "pre_fix", bound=1, jobs=2) == serial and made == [2]
    drawn = explore("scenario_b", "pre_fix", strategy="random", budget=40)
    assert explore("scenario_b", "pre_fix", strategy="random", budget=40, jobs=3) == drawn and made == [2, 3]
    replays, replay = [], Machine.replay.__func__
    monkeypatch.setattr(Machine, "replay", classmethod(lambda cls, plan, turns: replays.append(1) or
                                                       replay(cls, plan, turns)))
    assert explore("scenario_b", "pre_fix", bound=1, mode="replay") == serial
    assert len(replays) > serial.schedules_run  # every child replayed, not one machine kept and cloned
