"""Resources on hostile input (issue 43, items 4 and 5): searches and workloads are bounded everywhere, in the
command line and in the Python API alike.

- random and PCT draws are streamed: a budget of ten million that stops at its first failure has drawn a handful;
- the exhaustive search has a default budget and a bounded frontier, and says when either cut it short;
- ``explore`` and ``crash_rates`` keep the command line's caps.
"""
from __future__ import annotations

import pytest

from simcache.errors import SimcacheError
from simcache.explore import explore, plan_for, sampling, search
from simcache.scenario import load
from simcache.versions import preset
from simcache.workload import WorkloadSpec, crash_rates


def _counting_draws(monkeypatch) -> list[int]:
    made = [0]
    for name in ("draw_random", "draw_pct"):
        real = getattr(sampling, name)

        def counted(*args, _real=real, **kw):
            made[0] += 1
            return _real(*args, **kw)

        monkeypatch.setattr(sampling, name, counted)
    return made


@pytest.mark.parametrize("strategy", ["random", "pct"])
@pytest.mark.parametrize("jobs", [1, 2])
def test_draws_are_streamed_not_built_up_front(strategy, jobs, monkeypatch):
    made = _counting_draws(monkeypatch)
    res = explore("scenario_b", "pre_fix", strategy=strategy, budget=10_000_000, until="", jobs=jobs)
    assert res.first_failure is not None and res.schedules_run < 100
    # serially, one draw per run; in workers, at most the two windows in flight
    limit = res.schedules_run if jobs == 1 else 2 * sampling.CHUNK * jobs * sampling.WINDOW
    assert res.schedules_run <= made[0] <= limit


def test_streamed_draws_give_the_runs_drawn_up_front_gave():
    import random

    plan = plan_for(load("scenario_b"), preset("pre_fix"))
    rng = random.Random(7)
    up_front = [sampling.draw_random(rng, plan.lengths) for _ in range(300)]
    expected = sampling.Tally(plan, 300)
    for idx in up_front:
        expected.add(sampling.run_schedule(plan, idx, {}))
    got = sampling.sampled(plan, "pre_fix", "random", 7, 300)
    assert (got.outcomes, got.failing_schedules, got.damage, got.distinct_states) == (
        tuple(sorted(expected.outcomes.items())), tuple(expected.failing_schedules), tuple(sorted(
            expected.damage.items())), len(expected.ends))
    assert sampling.sampled(plan, "pre_fix", "random", 7, 300, jobs=2) == got  # time_s aside, the same result


def test_a_small_space_is_still_seen_to_be_covered():
    res = explore("scenario_a", "pre_fix", strategy="random", budget=200)
    assert res.total_schedules == 3 and res.space_covered and res.exhausted


def test_the_exhaustive_search_has_a_default_budget_in_the_api_and_the_command_line(monkeypatch):
    monkeypatch.setattr(search, "DEFAULT_BUDGET", 40)
    res = explore("scenario_b", "pre_fix", bound=1)
    assert (res.budget, res.schedules_run, res.exhausted, res.space_covered) == (40, 40, False, False)
    assert explore("scenario_b", "pre_fix", bound=1, budget=41).schedules_run == 41  # a given budget wins
    assert explore("scenario_b", "pre_fix", strategy="random", budget=None).budget == 1000  # sampling's own
    assert explore("scenario_b", "pre_fix", reduce="dpor").budget == 40  # and dpor's


def test_a_full_frontier_makes_the_search_partial_not_larger(monkeypatch):
    whole = explore("scenario_b", "pre_fix", bound=1)
    assert whole.exhausted
    monkeypatch.setattr(search, "QUEUE_LIMIT", 5)
    cut = explore("scenario_b", "pre_fix", bound=1)
    assert not cut.exhausted and not cut.space_covered and cut.schedules_run < whole.schedules_run
    assert cut == explore("scenario_b", "pre_fix", bound=1, jobs=2)  # the same cut in worker processes


@pytest.mark.parametrize("kw, message", [
    (dict(budget=10_000_001), "--budget 10000001 is over the limit of 10,000,000; give a smaller number"),
    (dict(budget=10**5000), "--budget 1.00e+5000 is over the limit of 10,000,000; give a smaller number"),
    (dict(bound=10_001), "--bound 10001 is over the limit of 10,000; give a smaller number"),
    (dict(jobs=65), "--jobs 65 is over the limit of 64; give a smaller number"),
    (dict(seed=2**63), "--seed 9223372036854775808 is over the limit of 9,223,372,036,854,775,807; give a smaller "
                       "number"),
    (dict(seed=-(2**63) - 1), "--seed must be a whole number >= -9,223,372,036,854,775,808, not "
                              "-9223372036854775809"),
    (dict(budget=2.5), "--budget must be a whole number >= 1, not 2.5"),
    (dict(seed=None), "--seed must be a whole number, not None"),
])
def test_explore_in_the_api_keeps_the_command_line_caps(kw, message):
    with pytest.raises(SimcacheError) as e:
        explore("scenario_a", "pre_fix", **kw)
    assert str(e.value) == message


@pytest.mark.parametrize("kw, message", [
    (dict(n_streams=100_001), "n_streams 100,001 is over the limit of 100,000; give a smaller number"),
    (dict(spec=WorkloadSpec(requests=10_001)), "spec.requests 10,001 is over the limit of 10,000; give a smaller "
                                               "number"),
    (dict(spec=WorkloadSpec(requests=0)), "spec.requests must be a whole number >= 1, not 0"),
    (dict(jobs=65), "jobs 65 is over the limit of 64; give a smaller number"),
    (dict(seed="0"), "seed must be a whole number >= -9,223,372,036,854,775,808, not '0'"),
    (dict(n_streams=100_000, spec=WorkloadSpec(requests=1000)),
     "this workload has 100,000,000 chat turns (streams x requests x presets x pressures); keep it under 20,000,000"),
    (dict(presets="pre_fix"), "presets must be a list, like ['pre_fix'], not 'pre_fix'"),
    (dict(pressures=2.0), "pressures must be a list, like [0.5, 1, 2], not 2.0"),
    (dict(pressures=[True]), "pressures must be numbers between 0.001 and 1000000, like 0.5 1 2 4 (working set / "
                             "host KV slots)"),
    (dict(presets=[None]), "unknown preset(s) None; choose from pre_fix, described_fix, reviewed_fix, merged_fix, "
                           "followup_fix, main_2026_06, release_0_5_17"),
    (dict(spec={"requests": 2}), "spec must be a WorkloadSpec, like WorkloadSpec(requests=32), not {'requests': 2}"),
    (dict(progress=3), "progress must be a function taking a dict, or None, not 3"),
])
def test_crash_rates_in_the_api_keeps_the_command_line_caps(kw, message):
    args = dict(presets=["pre_fix"], pressures=[1.0], n_streams=1)
    with pytest.raises(SimcacheError) as e:
        crash_rates(**{**args, **kw})
    assert str(e.value) == message


# --- item 4: the memory limit measures what the run adds, inside long operations too, with one rule ---------------

def test_a_nan_or_wrong_typed_limit_is_refused_not_ignored():
    from simcache.simulate import simulate

    for bad, said in ((float("nan"), "nan"), (float("inf"), "inf"), (-1, "-1"), (True, "True"), ("2048", "'2048'"),
                      (2**21, "2097152")):
        with pytest.raises(SimcacheError) as e:
            simulate("scenario_a", memory_limit_mb=bad)
        assert str(e.value) == (f"memory_limit_mb must be megabytes above 0 and at most 1,048,576 (or 0 for no "
                                f"limit), not {said}; e.g. memory_limit_mb=2048"), bad
    assert simulate("scenario_a", memory_limit_mb=0).trace.memory_limit_mb == 0  # 0: no limit, said so


def test_one_huge_request_is_stopped_inside_itself():
    import traceback

    from simcache.simulate import simulate
    from simcache.trace import TraceLimitError

    n = 200_000
    doc = {"name": "huge", "config": {"device_kv": n + 8, "device_mamba": 4, "host_kv": 8, "host_mamba": 4},
           "actors": {"R1": [{"op": "request", "tokens": list(range(1, n + 1))}]}}
    with pytest.raises(TraceLimitError) as e:
        simulate(doc, "pre_fix", memory_limit_mb=2)
    assert str(e.value).startswith("this run outgrew the memory limit of 2 MB (it added ")
    assert str(e.value).endswith("at operation 0; its set-up and operation 0 alone need more: raise the limit with "
                                 "--memory-limit MB, or make the scenario's pools or its first operation smaller")
    raised_in = traceback.extract_tb(e.value.__traceback__)[-2].name  # the recorder hook that checked
    assert raised_in in ("begin_op", "enter", "_pool_event"), raised_in  # not end_op: inside the operation


def _growing(monkeypatch, after: str | None = None, module=None):
    """``rss_mb`` holds 300 MB, then 2,300 MB once ``module.after`` is first called (every call when None)."""
    from simcache.trace import memory

    state = {"on": after is None}
    monkeypatch.setattr(memory, "rss_mb", lambda: 2300.0 if state["on"] else 300.0)
    if after is not None:
        real = getattr(module, after)

        def flip(*a, **k):
            state["on"] = True
            return real(*a, **k)

        monkeypatch.setattr(module, after, flip)
    return state


@pytest.mark.parametrize("strategy", ["exhaustive", "random"])
def test_a_search_is_under_the_memory_limit(monkeypatch, strategy):
    from simcache.trace import TraceLimitError

    monkeypatch.setenv("SIMCACHE_MEMORY_LIMIT_MB", "1000")
    _growing(monkeypatch, "finish", sampling if strategy == "random" else search)
    with pytest.raises(TraceLimitError) as e:
        explore("scenario_b", "pre_fix", strategy=strategy, bound=1 if strategy == "exhaustive" else None)
    assert str(e.value) == ("the search outgrew the memory limit of 1,000 MB (it added 2,000 MB to the 300 MB the "
                            "process held when it started); give a smaller --budget or --bound, or raise "
                            "$SIMCACHE_MEMORY_LIMIT_MB")


def test_the_page_build_is_under_the_runs_memory_limit(monkeypatch, capsys, tmp_path):
    import simcache.export as export
    from simcache.cli import main

    _growing(monkeypatch, "code_frames", export)
    assert main(["export", "scenario_a", "--memory-limit", "1000", "-o", str(tmp_path / "p.html")]) == 2
    assert capsys.readouterr() == ("", "simcache: the page of this run outgrew the memory limit of 1,000 MB (it added "
                                       "2,000 MB to the 300 MB the process held when it started); export fewer "
                                       "operations with --ops A:B, or raise the limit with --memory-limit MB\n")
    assert list(tmp_path.iterdir()) == []
