"""explore/sampling.py compared whole: the random and PCT draws against references written from their definitions
(same generator, same calls), uniformity, and ``sampled``'s whole result, progress and early stop against a plain
loop over the reference draws."""
from __future__ import annotations

import random
from bisect import bisect_right
from collections import Counter
from itertools import accumulate, groupby

import pytest

import simcache
from simcache.explore.machine import Machine, plan_for
from simcache.explore.results import Tally, count_preemptions, count_schedules, finish
from simcache.explore.sampling import draw_pct, draw_random, run_schedule, sampled
from simcache.scenario import load

LENGTHS = [(), (1,), (3,), (2, 1), (1, 1, 1), (0, 2, 0, 1), (2, 2, 2), (1, 1, 2, 1, 1), (4, 0, 3),
           (2, 1, 1, 1, 2, 4, 1)]


def ref_random(rng: random.Random, lengths) -> tuple[int, ...]:
    """The next actor has weight = its operations left: a draw below the total falls in one actor's share."""
    left, out = list(lengths), []
    while sum(left):
        r = rng.randrange(sum(left))
        i = bisect_right(list(accumulate(left)), r)
        out.append(i)
        left[i] -= 1
    return tuple(out)


def ref_pct(rng: random.Random, lengths, depth: int) -> tuple[int, ...]:
    """Priorities depth..depth+n-1 in random order; depth-1 change points among steps 1..k, the i-th dropping the
    running actor to priority i; each step the live actor of highest priority runs."""
    n, k = len(lengths), sum(lengths)
    priority = list(range(depth, depth + n))
    rng.shuffle(priority)
    wanted = depth - 1 if depth > 1 else 0
    points = rng.sample(range(1, k + 1), wanted if wanted < k else k)
    drop_at = {step: i for i, step in enumerate(points, start=1)}
    left, out = list(lengths), []
    for step in range(1, k + 1):
        live = [i for i in range(n) if left[i] > 0]
        best = sorted(live, key=lambda i: -priority[i])[0]
        if step in drop_at:
            priority[best] = drop_at[step]
            best = sorted(live, key=lambda i: -priority[i])[0]
        out.append(best)
        left[best] -= 1
    return tuple(out)


def is_interleaving(turns, lengths) -> bool:
    return Counter(turns) == Counter({i: n for i, n in enumerate(lengths) if n})


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
def test_draw_random_is_the_weighted_draw_and_leaves_the_generator_where_the_reference_does(lengths):
    for seed in range(60):
        a, b = random.Random(seed), random.Random(seed)
        got = draw_random(a, lengths)
        assert got == ref_random(b, lengths)
        assert is_interleaving(got, lengths)
        assert a.random() == b.random()


def test_draw_random_is_uniform_over_every_interleaving():
    rng = random.Random(7)
    counts = Counter(draw_random(rng, (2, 1)) for _ in range(3000))
    assert set(counts) == {(0, 0, 1), (0, 1, 0), (1, 0, 0)}
    assert all(900 <= c <= 1100 for c in counts.values()), counts
    counts = Counter(draw_random(rng, (1, 1, 2)) for _ in range(6000))
    assert len(counts) == 12 and all(380 <= c <= 620 for c in counts.values()), counts


@pytest.mark.parametrize("lengths", LENGTHS, ids=str)
def test_draw_pct_follows_its_definition(lengths):
    for depth in range(0, 6):
        for seed in range(25):
            a, b = random.Random(seed), random.Random(seed)
            got = draw_pct(a, lengths, depth)
            assert got == ref_pct(b, lengths, depth), (depth, seed)
            assert is_interleaving(got, lengths)
            assert a.random() == b.random()


def test_pct_depth_one_runs_each_actor_to_its_end_and_more_depth_preempts_at_most_depth_minus_one_times():
    lengths = (2, 1, 1, 1, 2, 4, 1)
    orders = set()
    for seed in range(200):
        got = draw_pct(random.Random(seed), lengths, 1)
        blocks = [k for k, _ in groupby(got)]
        assert sorted(blocks) == list(range(7))  # each actor once, whole
        orders.add(tuple(blocks))
        for depth in (2, 3, 4):
            turns = draw_pct(random.Random(seed), lengths, depth)
            assert count_preemptions(turns, dict(enumerate(lengths))) <= depth - 1
    assert len(orders) > 100  # the actors' order itself is drawn


def test_more_depth_than_steps_makes_every_step_a_change_point():
    # two steps, depth 9: both steps are change points (8 wanted, 2 possible)
    for seed in range(30):
        assert draw_pct(random.Random(seed), (1, 1), 9) == ref_pct(random.Random(seed), (1, 1), 9)
    assert {draw_pct(random.Random(s), (1, 1), 9) for s in range(30)} == {(0, 1), (1, 0)}


@pytest.fixture(scope="module")
def plan_b():
    return plan_for(load("scenario_b"), simcache.preset("pre_fix"))


def test_run_schedule_is_the_finished_replay_with_its_own_memo_or_the_one_given(plan_b):
    idx = ref_random(random.Random(3), plan_b.lengths)
    memo: dict = {}
    out = run_schedule(plan_b, idx, memo)
    assert out == finish(Machine.replay(plan_b, idx), {})
    assert list(memo) == [out[2]] and memo[out[2]] == out[3]
    assert run_schedule(plan_b, idx) == out
    memo[out[2]] = {"planted": "x"}
    assert run_schedule(plan_b, idx, memo)[3] == {"planted": "x"}  # the memo given is the one read


def expected(plan, preset, strategy, seed, budget, depth=3, until=None):
    rng = random.Random(seed)
    draws = [ref_random(rng, plan.lengths) if strategy == "random" else ref_pct(rng, plan.lengths, depth)
             for _ in range(budget)]
    tally, memo = Tally(plan, budget, until), {}
    for d in draws:
        tally.add(finish(Machine.replay(plan, d), memo))
        if tally.found:
            break
    covered = len(set(draws)) == count_schedules(plan.lengths)
    return tally.result(strategy, preset, depth if strategy == "pct" else None, seed, 0, covered, covered, 0.0)


@pytest.mark.parametrize("strategy, seed, budget, depth", [
    ("random", 0, 1, 3), ("random", 5, 130, 3), ("pct", 1, 130, 3), ("pct", 2, 64, 1), ("pct", 3, 40, 5)])
def test_sampled_is_the_tally_of_the_drawn_schedules_in_order(plan_b, strategy, seed, budget, depth):
    got = sampled(plan_b, "pre_fix", strategy, seed, budget, depth=depth)
    assert got == expected(plan_b, "pre_fix", strategy, seed, budget, depth)
    assert (got.strategy, got.seed, got.budget, got.schedules_run, got.pruned) == (strategy, seed, budget, budget, 0)
    assert got.bound == (depth if strategy == "pct" else None)
    assert (got.exhausted, got.space_covered, got.total_schedules) == (False, False, 360)
    assert got.time_s > 0


def test_sampled_says_covered_when_its_draws_hold_every_schedule(plan_b):
    got = sampled(plan_b, "pre_fix", "random", 11, 4000)
    assert got == expected(plan_b, "pre_fix", "random", 11, 4000)
    assert (got.exhausted, got.space_covered, got.schedules_run, got.total_schedules) == (True, True, 4000, 360)
    a = plan_for(load("scenario_a"), simcache.preset("pre_fix"))  # 3 schedules
    assert sampled(a, "pre_fix", "random", 0, 2).space_covered is False
    assert sampled(a, "pre_fix", "random", 0, 40).space_covered is True


def test_sampled_reports_progress_every_64_runs(plan_b):
    seen = []
    got = sampled(plan_b, "pre_fix", "random", 4, 200, progress=seen.append)
    fails = expected(plan_b, "pre_fix", "random", 4, 200)
    rng, failing_so_far = random.Random(4), []
    for d in [ref_random(rng, plan_b.lengths) for _ in range(200)]:
        failing_so_far.append(Machine.replay(plan_b, d).crash is not None)
    assert seen == [dict(runs=r, total=200, failing=sum(failing_so_far[:r])) for r in (64, 128, 192)]
    assert got == fails and got.failing == sum(failing_so_far) > 0


def test_sampled_stops_at_the_first_failure_asked_for(plan_b):
    rng = random.Random(0)
    draws = [ref_random(rng, plan_b.lengths) for _ in range(300)]
    first = next(i for i, d in enumerate(draws) if Machine.replay(plan_b, d).crash is not None)
    got = sampled(plan_b, "pre_fix", "random", 0, 300, until="")
    assert got == expected(plan_b, "pre_fix", "random", 0, 300, until="")
    assert got.schedules_run == first + 1 and got.failing == 1
    assert got.exhausted is False
    never = sampled(plan_b, "pre_fix", "random", 0, 300, until="no such signature")
    assert never.schedules_run == 300


def test_worker_processes_give_the_same_result(plan_b):
    for strategy in ("random", "pct"):
        assert sampled(plan_b, "pre_fix", strategy, 9, 150, jobs=2) == sampled(plan_b, "pre_fix", strategy, 9, 150)
    seen = []
    got = sampled(plan_b, "pre_fix", "random", 0, 300, jobs=2, until="", progress=seen.append)
    assert got == sampled(plan_b, "pre_fix", "random", 0, 300, until="")


class FakePool:
    """Stands in for the process pool (mutmut sees no test inside worker processes): runs the worker's function
    here, after setting the worker's state as ``workers.init_worker`` would, and records what it was asked."""

    made: list = []

    def __init__(self, jobs, plan):
        from simcache.explore import workers

        self.calls, self.shut = [], []
        workers.PLAN = plan
        workers.DAMAGE.clear()
        FakePool.made.append((jobs, plan, self))

    def map(self, fn, items, chunksize=1):
        self.calls.append((fn.__name__, len(items), chunksize))
        return map(fn, items)

    def shutdown(self, wait=True, *, cancel_futures=False):
        self.shut.append(cancel_futures)


@pytest.fixture
def fake_pool(monkeypatch):
    from simcache.explore import workers

    FakePool.made = []
    monkeypatch.setattr(workers, "make_pool", FakePool)
    monkeypatch.setattr(workers, "PLAN", None)
    return FakePool.made


def test_a_pool_is_made_only_for_more_than_one_job_and_its_pending_work_is_cancelled(plan_b, fake_pool):
    serial = sampled(plan_b, "pre_fix", "random", 9, 150)
    assert sampled(plan_b, "pre_fix", "random", 9, 150, jobs=1) == serial
    assert fake_pool == []
    assert sampled(plan_b, "pre_fix", "random", 9, 150, jobs=2) == serial
    assert sampled(plan_b, "pre_fix", "random", 9, 10, jobs=3) == sampled(plan_b, "pre_fix", "random", 9, 10)
    assert sampled(plan_b, "pre_fix", "random", 9, 400, jobs=3, until="") == sampled(
        plan_b, "pre_fix", "random", 9, 400, until="")
    assert [(jobs, plan is plan_b, pool.calls, pool.shut) for jobs, plan, pool in fake_pool] == [
        # windows of chunk x jobs x WINDOW draws (chunks of budget / (8 jobs)), at most two submitted at once
        (2, True, [("_run_remote", 72, 9), ("_run_remote", 72, 9), ("_run_remote", 6, 9)], [True]),
        (3, True, [("_run_remote", 10, 1)], [True]),  # never below 1
        (3, True, [("_run_remote", 192, 16), ("_run_remote", 192, 16)], [True])]  # stopped in the first window


def test_a_worker_runs_its_schedule_on_the_plan_and_memo_it_was_given(plan_b, monkeypatch):
    from simcache.explore import workers
    from simcache.explore.sampling import _run_remote

    idx = ref_random(random.Random(5), plan_b.lengths)
    monkeypatch.setattr(workers, "PLAN", plan_b)
    monkeypatch.setattr(workers, "DAMAGE", {})
    out = _run_remote(idx)
    assert out == finish(Machine.replay(plan_b, idx), {})
    assert workers.DAMAGE == {out[2]: out[3]}


def test_each_end_state_s_damage_is_worked_out_once_per_search(plan_b, monkeypatch):
    calls = []
    real = Machine.damage

    def counted(self):
        calls.append(1)
        return real(self)

    monkeypatch.setattr(Machine, "damage", counted)
    got = sampled(plan_b, "pre_fix", "random", 2, 500)
    assert len(calls) == got.distinct_states < 500


def test_pct_s_default_depth_is_3():
    plan = plan_for(load("scenario_b"), simcache.preset("pre_fix"))
    got = sampled(plan, "pre_fix", "pct", 6, 80)
    assert got == expected(plan, "pre_fix", "pct", 6, 80, depth=3) and got.bound == 3
