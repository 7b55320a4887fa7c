"""Traces as events + checkpoints give exactly what per-micro-step snapshots gave (see ``trace_cases.py``).

The golden file was produced by the implementation that snapshotted the world after every micro-step and checked
the invariants after every micro-step. Today's recorder keeps small events, checks invariants at operation
boundaries (replaying an operation micro-step by micro-step only to date a violation) and rebuilds snapshots on
demand from checkpoints; every case must still give the same went-stale, cleaned-up, re-admitted, first
violation, violation counts, outcome, statuses, final tree and trace hash, and (on a sample) the same snapshot at
every micro-step.
"""
from __future__ import annotations

import json

import pytest
from trace_cases import GOLDEN, cases, compute

GOLD = json.loads(GOLDEN.read_text())
CASES = cases()
# snapshots rebuilt on demand: every gallery scenario under its own schedule, and a sample of the rest
SNAPSHOT_SAMPLE = {c[0] for c in CASES if c[0].endswith("/0") or (c[0].startswith("random/")
                                                                  and int(c[0].split("/")[1]) % 6 == 0)}


def test_the_golden_file_covers_every_case():
    assert sorted(GOLD) == sorted(c[0] for c in CASES)


@pytest.mark.parametrize("chunk", range(8))
def test_events_and_boundary_invariants_give_the_golden_results(chunk):
    for case in CASES[chunk::8]:
        want = {k: v for k, v in GOLD[case[0]].items() if k != "snapshots"}
        assert compute(case, snapshots=False) == want, case[0]


@pytest.mark.parametrize("chunk", range(4))
def test_snapshots_rebuilt_on_demand_equal_the_golden_ones(chunk):
    for case in sorted(SNAPSHOT_SAMPLE)[chunk::4]:
        case = next(c for c in CASES if c[0] == case)
        assert compute(case, snapshots=True) == GOLD[case[0]], case[0]


def test_the_one_pass_boundary_check_agrees_with_the_named_invariants_on_every_boundary():
    from simcache.invariants import check_all, failing
    from simcache.ops_run import execute

    seen: set[str] = set()
    checked = 0

    def compare(i, cache, drv):
        nonlocal checked
        live = list(drv.live.values())
        want = {name for name, problem in check_all(cache, live).items() if problem is not None}
        assert failing(cache, live, memo) == want, f"op {i}"
        seen.update(want)
        checked += 1

    for case in CASES:
        if case[0].startswith("random/"):
            memo: dict = {}
            sc = case[1]
            execute(sc.config, sc.linearize(sc.parse_schedule(None)), __import__("simcache.versions").versions
                    .preset(case[2]), on_step=compare)
    assert checked > 1000 and {"attachment", "tier_monotonicity", "no_leak", "backup_continuity"} <= seen
