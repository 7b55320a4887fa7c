"""Exploration benchmarks: one command, every ratio measured in the same run (not a test).

    python benchmarks/bench_explore.py            # everything (a few minutes on 2 cores)
    python benchmarks/bench_explore.py --quick    # smaller samples, skips the slowest rows

Times are the best of up to five runs of a call (two seconds in all), so that load from other processes on a shared
machine shows less. Prints markdown tables:
1. schedules per second with the trace on (``simulate``: recorder, snapshots, invariants), the fast path
   (``ops_run.execute``: no recorder) and the explorer's machine (no recorder, no KV data), on the same schedules;
2. per gallery scenario under pre_fix: time to the first failure (any assertion) and to the minimal failure of the
   stale-node race (fewest-preemptions-first search, then shrinking), with what was found;
3. the speed-up from pruning equivalent prefixes: schedules run and time without / with it, for the same verdict
   (same outcome signatures, same damage kinds, same number of distinct end states);
4. finding the hidden needle: exhaustive (fewest preemptions first) against random and PCT;
5. how a prefix's state is obtained (keep + clone, replay + clone, replay every child) and processes (jobs);
6. partial-order reduction over the whole schedule space (``--reduce dpor``) against state-hash pruning and no
   reduction, for the same verdict;
7. random search in worker processes: schedules per second of wall time with 1 and ``--jobs`` processes (the
   rate a user sees, pool start-up included), same result asserted;
8. the garbage collector's pace (``simcache.gcpace``): the same searches with the raised pace and with Python's
   default, each in its own process, alternating, CPU time, medians (same results asserted).

``--only rates,dpor`` runs some tables (rates, failure, pruning, needle, modes, dpor, parallel, gc). ``--against REF``
prints one table instead: the explorer machine's schedules per second on this tree and on git revision REF (its
``simcache`` unpacked to a temporary folder), each side in its own process, alternating A B A B, CPU time, medians.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simcache.explore import explore, plan_for, shrink  # noqa: E402
from simcache.explore.machine import Machine  # noqa: E402
from simcache.explore.sampling import draw_random, run_schedule  # noqa: E402
from simcache.ops_run import execute  # noqa: E402
from simcache.scenario import gallery, load  # noqa: E402
from simcache.scheduler import Schedule  # noqa: E402
from simcache.simulate import resolve_flags, simulate  # noqa: E402

X = "parent does not have child key"
BOUND = {"scenario_a": None, "scenario_b": None, "scenario_d": None, "scenario_c": 2, "crash_pr": 2,
         "hidden_needle": 1}


def clock(fn, *args, **kw):
    """``fn``'s result and its best wall time: quick calls are repeated (up to 5 times or 2 s in all), since other
    processes on a shared machine only ever make a run slower."""
    best, spent, n = float("inf"), 0.0, 0
    while n < 5 and (n == 0 or spent < 2.0):
        t = time.perf_counter()
        out = fn(*args, **kw)
        took = time.perf_counter() - t
        best, spent, n = min(best, took), spent + took, n + 1
    return out, best


def table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def rates(names: list[str], n: int) -> str:
    rows = []
    warm = load("scenario_d")
    simulate(warm, "pre_fix"), execute(warm.config, warm.linearize(warm.parse_schedule()), resolve_flags(warm, None,
                                                                                                          None)[1])
    for name in names:
        sc = load(name)
        _, fl = resolve_flags(sc, "pre_fix", None)
        plan = plan_for(sc, fl)
        rng = random.Random(0)
        draws = [draw_random(rng, plan.lengths) for _ in range(n)]
        scheds = [Schedule(tuple(plan.actors[i] for i in d)) for d in draws]
        _, on = clock(lambda sc, scheds: [simulate(sc, "pre_fix", schedule=s) for s in scheds], sc, scheds)
        _, off = clock(lambda sc, fl, scheds: [execute(sc.config, sc.linearize(s), fl) for s in scheds], sc, fl, scheds)
        _, fast = clock(lambda plan, draws: [run_schedule(plan, d) for d in draws], plan, draws)
        rows.append([name, f"{n / on:.0f}", f"{n / off:.0f}", f"{n / fast:.0f}", f"{on / off:.1f}x",
                     f"{off / fast:.1f}x"])
    return table(["scenario", "trace on /s", "trace off /s", "explorer machine /s", "off vs on", "machine vs off"],
                 rows)


def to_failure(names: list[str]) -> str:
    rows = []
    for name in names:
        first, t_first = clock(explore, name, "pre_fix", bound=BOUND[name], until="")
        race, t_race = clock(explore, name, "pre_fix", bound=BOUND[name], until=X)
        f = race.first_failure
        bound = "none" if BOUND[name] is None else BOUND[name]
        if f is None or X not in f.signature:
            seen = first.first_failure.schedule if first.first_failure else "none"
            rows.append([name, bound, f"{t_first:.2f}", seen, f"{t_race:.2f} (not reached)", "-", "-", "-"])
            continue
        small, t_shrink = clock(shrink, name, "pre_fix", schedule=f.schedule)
        rows.append([name, bound, f"{t_first:.2f}", f"`{first.first_failure.schedule}`",
                     f"{t_race:.2f} ({race.schedules_run} runs)", f"`{f.schedule}` ({f.preemptions} pre.)",
                     f"{t_race + t_shrink:.2f}", f"`{small.schedule}` ({small.steps} ops, {small.switches} sw.)"])
    return table(["scenario", "bound", "first failure s", "first failure", "race found s", "race (fewest preemptions)",
                  "minimal s (search + shrink)", "minimal"], rows)


def pruning(cases: list[tuple[str, str, int | None]]) -> str:
    rows = []
    for name, preset, bound in cases:
        on, t_on = clock(explore, name, preset, bound=bound)
        off, t_off = clock(explore, name, preset, bound=bound, prune=False)
        same = (on.signatures == off.signatures and dict(on.damage).keys() == dict(off.damage).keys()
                and on.distinct_states == off.distinct_states)
        rows.append([name, preset, "none" if bound is None else bound, off.schedules_run, on.schedules_run,
                     f"{off.schedules_run / on.schedules_run:.1f}x", f"{t_off:.2f}", f"{t_on:.2f}",
                     f"{t_off / t_on:.1f}x", "yes" if same else "NO"])
    return table(["scenario", "preset", "bound", "runs without", "runs with", "runs ratio", "s without", "s with",
                  "time ratio", "same verdict"], rows)


def modes(name: str, bound: int, jobs: int) -> str:
    rows, base = [], None
    for mode, j in (("keep", 1), ("fork", 1), ("replay", 1), ("fork", jobs)):
        res, t = clock(explore, name, "pre_fix", bound=bound, mode=mode, jobs=j)
        base = base or t
        rows.append([mode, j, res.schedules_run, f"{t:.2f}", f"{res.schedules_run / t:.0f}", f"{base / t:.2f}x"])
    return table(["prefix state", "jobs", "schedules", "s", "schedules/s", "speed vs keep"], rows)


def needle(budget: int) -> str:
    """How each strategy does on the needle: runs until the race (or the budget), and what else it saw."""
    rows = []
    for strategy, bound in (("exhaustive", 1), ("random", None), ("pct", 2), ("pct", 3)):
        kw = dict(bound=bound, until=X) if strategy == "exhaustive" else dict(bound=bound, seed=0, budget=budget)
        res, t = clock(explore, "hidden_needle", "pre_fix", strategy=strategy, **kw)
        f = res.failure_with(X)
        rows.append([strategy + ("" if bound is None else f" ({'bound' if strategy == 'exhaustive' else 'depth'} "
                                 f"{bound})"), res.schedules_run, f"{t:.2f}",
                     f"`{f.schedule}`" if f else "not found", res.failing - (1 if f else 0)])
    return table(["strategy", "schedules run", "s", "the race", "other failures seen"], rows)


def unreduced_runs(plan) -> int:
    """The schedules a search without reduction runs over the whole space: the leaves of the schedule tree (a run
    ends at the end or at its crash), counted with each subtree's count memoised by its state key (equal keys have
    equal suffix spaces, the invariant state-hash pruning rests on), so that it is exact without running millions."""
    memo: dict[bytes, int] = {}

    def count(m: Machine) -> int:
        total, enabled = 0, [i for i, n in enumerate(plan.lengths) if m.pos[i] < n]
        for j, i in enumerate(enabled):
            c = m.clone() if j < len(enabled) - 1 else m
            c.step(plan, i)
            if c.crash is not None or len(c.idx) == plan.total:
                total += 1
                continue
            k = c.key()
            got = memo.get(k)
            if got is None:
                got = memo[k] = count(c)
            total += got
        return total

    return count(Machine(plan))


def reduction(names: list[str], run_none: set[str]) -> str:
    """Whole schedule space, pre_fix: no reduction, state-hash pruning (the default, the baseline) and dpor."""
    rows = []
    for name in names:
        sc = load(name)
        _, fl = resolve_flags(sc, "pre_fix", None)
        state, t_state = clock(explore, name, "pre_fix", bound=None)
        dp, t_dp = clock(explore, name, "pre_fix", reduce="dpor")
        if name in run_none:
            none, t_none = clock(explore, name, "pre_fix", bound=None, reduce="none")
            n_none, how = none.schedules_run, f"{t_none:.2f}"
            same = verdict(none) == verdict(state) == verdict(dp)
        else:
            n_none, how = unreduced_runs(plan_for(sc, fl)), "counted"
            same = verdict(state) == verdict(dp)
        rows.append([name, f"{state.total_schedules:,}", f"{n_none:,}", how, f"{state.schedules_run:,}",
                     f"{n_none / state.schedules_run:.1f}x", f"{t_state:.2f}", f"{dp.schedules_run:,}",
                     f"{n_none / dp.schedules_run:.1f}x", f"{state.schedules_run / dp.schedules_run:.2f}x",
                     f"{t_dp:.2f}", "yes" if same else "NO"])
    return table(["scenario", "interleavings", "runs, no reduction", "s", "runs, state pruning", "vs none", "s",
                  "runs, dpor", "vs none", "vs state pruning", "s", "same verdict"], rows)


def verdict(res):
    return res.signatures, set(dict(res.damage)), res.distinct_states, res.space_covered


_MACHINE_RATE = r"""
import random, sys, time
from simcache.explore import plan_for
from simcache.explore.sampling import draw_random, run_schedule
from simcache.scenario import load
from simcache.simulate import resolve_flags
out = []
for name in sys.argv[2:]:
    sc = load(name)
    _, fl = resolve_flags(sc, "pre_fix", None)
    plan = plan_for(sc, fl)
    rng = random.Random(0)
    draws = [draw_random(rng, plan.lengths) for _ in range(int(sys.argv[1]))]
    run_schedule(plan, draws[0])
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for d in draws:
            run_schedule(plan, d)
        best = min(best, time.process_time() - t)
    out.append(len(draws) / best)
print(*out)
"""


_SEARCH_TIME = r"""
import json, sys, time
import simcache.gcpace
from simcache.explore import explore
simcache.gcpace.ENABLED = sys.argv[1] == "on"
name, kw = sys.argv[2], json.loads(sys.argv[3])
t = time.process_time()
res = explore(name, "pre_fix", **kw)
took = time.process_time() - t
print(json.dumps([took, res.schedules_run, res.failing, res.distinct_states, sorted(res.signatures)]))
"""

GC_CASES = (("hidden_needle", {"bound": 1}), ("scenario_c", {"bound": 1}),
            ("crash_pr", {"bound": 2, "until": X}), ("crash_pr", {"strategy": "random", "budget": 3000}))


def gc_pace(cases, rounds: int) -> str:
    """Each search with the raised collector pace (on) and Python's default (off), alternating processes."""
    rows = []
    for name, kw in cases:
        times: dict[str, list[float]] = {"off": [], "on": []}
        results = set()
        for _ in range(rounds):
            for side in ("off", "on"):
                out = subprocess.run([sys.executable, "-c", _SEARCH_TIME, side, name, json.dumps(kw)],
                                     capture_output=True, text=True, check=True,
                                     env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)))
                took, *result = json.loads(out.stdout)
                times[side].append(took)
                results.add(json.dumps(result))
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        what = ", ".join(f"{k}={v}" for k, v in kw.items() if k != "until") + (" until the race" if "until" in kw
                                                                                else "")
        rows.append([name, what, f"{off:.2f}", f"{on:.2f}", f"{off / on:.2f}x", "yes" if len(results) == 1 else "NO"])
    return table(["scenario", "search", "s, default pace", "s, raised pace", "speed-up", "same result"], rows)


def parallel(names: list[str], budget: int, jobs: int) -> str:
    """``explore(strategy="random")`` in 1 and ``jobs`` processes: wall-time rates (``clock``)."""
    rows = []
    for name in names:
        got = {}
        for j in (1, jobs):
            res, t = clock(explore, name, "pre_fix", strategy="random", budget=budget, jobs=j)
            got[j] = (res, t)
        (one, t1), (many, tn) = got[1], got[jobs]
        rows.append([name, f"{budget:,}", f"{budget / t1:,.0f}", f"{budget / tn:,.0f}", f"{t1 / tn:.2f}x",
                     "yes" if one == many else "NO"])
    return table(["scenario", "schedules", "1 process /s", f"{jobs} processes /s", "speed-up", "same result"], rows)


def against(ref: str, names: list[str], n: int, rounds: int) -> str:
    """The explorer machine (``run_schedule``: build, replay, end key, damage) on the same random schedules, this
    tree against ``ref``: alternating processes, the best of 3 passes each (CPU time), medians over ``rounds``."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        # ``assets`` only where the revision has it (git archive refuses a path it lacks)
        listed = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", ref, "simcache", "assets"],
                                capture_output=True, text=True, check=True).stdout.split()
        archive = subprocess.run(["git", "-C", str(root), "archive", ref, *listed], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        got: dict[str, list[list[float]]] = {"ref": [], "now": []}
        for _ in range(rounds):
            for side, path in (("ref", tmp), ("now", str(root))):
                out = subprocess.run([sys.executable, "-c", _MACHINE_RATE, str(n), *names], cwd=tmp,
                                     env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True, check=True)
                got[side].append([float(x) for x in out.stdout.split()])
    rows = []
    for i, name in enumerate(names):
        old = statistics.median(r[i] for r in got["ref"])
        new = statistics.median(r[i] for r in got["now"])
        rows.append([name, f"{old:,.0f}", f"{new:,.0f}", f"{new / old:.2f}x"])
    return table(["scenario", f"{ref} schedules/s (CPU)", "this tree schedules/s (CPU)", "ratio"], rows)


_VERDICT = r"""
import json, sys, time
from simcache.explore import explore
name, bound = sys.argv[1], json.loads(sys.argv[2])
t = time.process_time()
first = explore(name, "pre_fix", bound=bound, until="")
t_first = time.process_time() - t
t = time.process_time()
whole = explore(name, "pre_fix", reduce="dpor")
t_whole = time.process_time() - t
f = first.first_failure
print(json.dumps([t_first, first.schedules_run, f.schedule if f else None, t_whole, whole.schedules_run,
                  [sorted(whole.signatures), sorted(dict(whole.damage)), whole.distinct_states, whole.space_covered]]))
"""


def verdicts(ref: str, names: list[str], rounds: int) -> str:
    """Per gallery scenario (pre_fix): the CPU time to the first failure (the default search: state pruning, fewest
    preemptions first, the scenario's bound) and to an exhaustive verdict over the whole schedule space (``--reduce
    dpor``), on git revision ``ref`` and on this tree, each in its own process, alternating, medians."""
    root = Path(__file__).resolve().parent.parent
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        listed = subprocess.run(["git", "-C", str(root), "ls-tree", "--name-only", ref, "simcache", "assets"],
                                capture_output=True, text=True, check=True).stdout.split()
        archive = subprocess.run(["git", "-C", str(root), "archive", ref, *listed], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for name in names:
            got: dict[str, list] = {"ref": [], "now": []}
            for _ in range(rounds):
                for side, path in (("ref", tmp), ("now", str(root))):
                    out = subprocess.run([sys.executable, "-c", _VERDICT, name, json.dumps(BOUND.get(name))],
                                         cwd=tmp, env=dict(os.environ, PYTHONPATH=path), capture_output=True,
                                         text=True, check=True)
                    got[side].append(json.loads(out.stdout))
                    print(f"[verdict] {name} {side}: {got[side][-1][0]:.2f} s / {got[side][-1][3]:.2f} s",
                          file=sys.stderr, flush=True)
            med = {side: (statistics.median(r[0] for r in runs), statistics.median(r[3] for r in runs), runs[0])
                   for side, runs in got.items()}
            (f0, w0, r0), (f1, w1, r1) = med["ref"], med["now"]
            same = "yes" if r0[1:3] == r1[1:3] and r0[4:] == r1[4:] else "NO"
            bound = "none" if BOUND.get(name) is None else BOUND[name]
            first = f"`{r1[2]}` ({r1[1]:,} runs)" if r1[2] else f"none ({r1[1]:,} runs)"
            rows.append([name, bound, first, f"{f0:.2f}", f"{f1:.2f}", f"{r1[4]:,}", f"{w0:.2f}", f"{w1:.2f}",
                         f"{w0 / w1:.2f}x", same])
    return table(["scenario", "bound", "first failure (this tree)", f"s to it, {ref}", "s to it, now",
                  "dpor runs, whole space", f"s to the verdict, {ref}", "s to the verdict, now", "speed-up",
                  "same results"], rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--only", default="rates,failure,pruning,needle,modes,dpor,parallel,gc",
                    help="comma-separated tables: rates, failure, pruning, needle, modes, dpor, parallel, gc")
    ap.add_argument("--reduce-on", metavar="NAMES", help="scenarios of the dpor table (default scenario_b,scenario_c,"
                                                        "crash_pr; crash_pr's three whole-space searches take minutes)")
    ap.add_argument("--against", metavar="REF", help="compare the explorer machine with git revision REF")
    ap.add_argument("--verdict", metavar="REF", help="time to the first failure and to an exhaustive verdict per "
                                                    "gallery scenario, git revision REF against this tree")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds for --against and gc (default 5)")
    a = ap.parse_args(argv)
    if a.verdict:
        names = [n for n in gallery() if n not in ("crash_pr",) or not a.quick]
        print(f"## Time to a verdict, {a.verdict} against this tree (pre_fix, CPU time, medians of {a.rounds} "
              f"alternating rounds, load average {os.getloadavg()[0]:.1f})\n")
        print(verdicts(a.verdict, names, a.rounds))
        return 0
    if a.against:
        print(f"## Explorer machine, this tree against {a.against} (pre_fix, random schedules, {a.rounds} rounds)\n")
        print(against(a.against, ["crash_pr", "hidden_needle", "scenario_c"], 200 if a.quick else 600, a.rounds))
        return 0
    only = set(a.only.split(","))
    names = [n for n in gallery() if n in BOUND]
    slow = {"crash_pr"} if a.quick else set()
    print(f"# simcache explore benchmarks ({'quick' if a.quick else 'full'}, {os.cpu_count()} CPUs)\n")
    if "rates" in only:
        print("## Schedules per second (same random schedules, pre_fix)\n")
        print(rates(names, 20 if a.quick else 100), "\n")
    if "failure" in only:
        print("## Time to the first failure and to the minimal failure (pre_fix)\n")
        print(to_failure([n for n in names if n not in slow]), "\n")
    if "pruning" in only:
        print("## Pruning equivalent prefixes: same verdict, fewer schedules\n")
        cases = [("scenario_a", "pre_fix", None), ("scenario_b", "pre_fix", None),
                 ("scenario_b", "described_fix", None), ("scenario_c", "pre_fix", 0 if a.quick else 1),
                 ("scenario_c", "described_fix", 0 if a.quick else 1), ("hidden_needle", "pre_fix", 0)]
        if not a.quick:
            cases.append(("crash_pr", "pre_fix", 0))
        print(pruning(cases), "\n")
    if "needle" in only:
        print("## Finding the needle (hidden_needle, pre_fix: 302,400 interleavings)\n")
        print(needle(1000 if a.quick else 5000), "\n")
    if "modes" in only:
        print(f"## Prefix states and processes (scenario_c, bound {1 if a.quick else 2})\n")
        print(modes("scenario_c", 1 if a.quick else 2, a.jobs), "\n")
    if "dpor" in only:
        print("## Partial-order reduction over the whole schedule space (pre_fix): same verdict, fewer runs\n")
        print(reduction(a.reduce_on.split(",") if a.reduce_on else
                        ["scenario_b"] if a.quick else ["scenario_b", "scenario_c", "crash_pr"], {"scenario_b"}), "\n")
    if "parallel" in only:
        print(f"\n## Random search in processes (pre_fix, wall time, {a.jobs} processes)\n")
        print(parallel(["crash_pr", "hidden_needle"], 2000 if a.quick else 10_000, a.jobs), "\n")
    if "gc" in only:
        print(f"## The collector's pace (pre_fix; CPU time, medians of {a.rounds} alternating processes)\n")
        print(gc_pace(GC_CASES[:2] if a.quick else GC_CASES, a.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
