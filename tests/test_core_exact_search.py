"""``explore``'s entry point, exactly: every refusal's whole sentence, and each argument reaching the search it picks
(compared as whole results: the same search called directly, or the result another value gives)."""
from __future__ import annotations

import pytest

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
