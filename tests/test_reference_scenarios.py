"""The four reference scenarios (shared/design/sglang_reference.md, "Exact step lists") against the real code.

``fixtures/scenario_{A,B,C,D}.json`` are copies of the oracle's examples; their ``expect`` blocks hold what SGLang's
own code did at the three older real commits, ``fixtures/main_2026_06_on_the_examples.json`` what it did at the
fourth (main of 2026-06), and ``fixtures/release_0_5_17_on_the_examples.json`` what release 0.5.17 did.
simcache must reproduce them exactly. The two never-merged guard variants
(``described_fix``, ``reviewed_fix``) have no real code; they are checked against the reference's section (f.1)
and its "Outcomes on the real code" table, and where the table is silent (B), what simcache does is pinned and
explained.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcache.ops_run import run_ops
from simcache.versions import REAL_PRESETS

FIXTURES = Path(__file__).parent / "fixtures"
X = "AssertionError: parent does not have child key, 1"
GUARDED = ("described_fix", "reviewed_fix")
PINNED_BY_EXAMPLES = ("pre_fix", "merged_fix", "followup_fix")  # the examples' expect blocks pin these three


def load(scenario: str) -> dict:
    return json.loads((FIXTURES / f"scenario_{scenario}.json").read_text())


def real_expect(scenario: str, version: str) -> dict:
    if version in PINNED_BY_EXAMPLES:
        return load(scenario)["expect"][version]
    return json.loads((FIXTURES / f"{version}_on_the_examples.json").read_text())["expect"][scenario]


def observed(report: dict) -> dict:
    """A run report in the expect blocks' format."""
    return dict(outcome=report["outcome"], raised_in=report["raised_in"], step=report["step"], tree=report["tree"],
                double_frees=[[d["pool"], d["slots"]] for d in report["double_frees"]],
                leaked={pool: a["leaked"] for pool, a in report["accounting"].items() if a["leaked"]})


def warning(node_id: int, where: str) -> str:
    return (f"Skip stale HiMamba eviction node_id={node_id} reason=stale node in {where} parent_id=2 "
            f"child_key=1")


@pytest.mark.parametrize("version", REAL_PRESETS)
@pytest.mark.parametrize("scenario", "ABCD")
def test_real_versions_do_what_the_real_code_did(scenario, version):
    doc = load(scenario)
    report = run_ops(doc, version)
    assert observed(report) == real_expect(scenario, version)
    assert report["warnings"] == []  # no guards in any real version


def test_the_fixtures_expect_the_reference_table():
    """The outcome table of the reference, read from the fixtures: a damaged copy fails here."""
    table = {s: {v: (real_expect(s, v)["outcome"], real_expect(s, v)["raised_in"]) for v in REAL_PRESETS}
             for s in "ABCD"}
    clean = ("clean", None)
    assert table == {
        "A": dict(pre_fix=(X, "_evict_host_leaf"), merged_fix=(X, "_evict_host_leaf"), followup_fix=clean,
                  main_2026_06=clean, release_0_5_17=clean),
        "B": {v: (X, "_evict_host_leaf") for v in REAL_PRESETS},
        # 0.5.17 reserves the prefetch's host KV only when its hit count arrives: with C's operations, too late
        "C": {**{v: (X, "_delete_tombstone_leaf") for v in REAL_PRESETS}, "release_0_5_17": clean},
        "D": dict(pre_fix=(X, "_delete_tombstone_leaf"), merged_fix=clean, followup_fix=clean, main_2026_06=clean,
                  release_0_5_17=clean),
    }


# --- the guard variant (never merged) -------------------------------------------------------------------------

@pytest.mark.parametrize("version", GUARDED)
def test_guard_variant_A_is_clean_but_the_stale_nodes_host_slots_leak(version):
    # evict_host(1) evicts C and the cascade detaches S, whose host copy stays because its L3 backup holds a
    # host ref; the L3 ack re-admits the detached S to the host-leaf set; evict_host(2) pops it, the guard sees
    # that root's slot 1 no longer holds S, cleans it up and skips it without freeing: host 0,1 leak.
    report = run_ops(load("A"), version)
    assert observed(report) == dict(outcome="clean", raised_in=None, step=None, tree=[], double_frees=[],
                                    leaked={"host_kv": [0, 1]})
    assert report["status"] == "...."
    assert report["warnings"] == [warning(7, "_evict_host_leaf")]
    assert report["stale_final"] == []  # the cleanup took S out of every structure


@pytest.mark.parametrize("version", GUARDED)
def test_guard_variant_B_moves_the_crash_to_evict_to_host(version):
    # Steps 0-4 are those of the real code: at step 3 S's own write-back calls evict_host, whose cascade detaches
    # S and frees its device slots 0,1; the retried write gives the detached S host slots 0,1, and _evict_to_host
    # frees device 0,1 a second time and puts S in the host-leaf set. At step 5 the write-back of 5,6 finds the
    # host full (S holds both slots) and calls evict_host(2): the heap pops the stale S, the guard cleans it up
    # and skips it, frees nothing, and nothing else is evictable. The retried write fails, so write_backup
    # returns without a host copy, and _evict_device_leaf goes on to _evict_to_host(5,6), which asserts that a
    # node being demoted is backed up. The guard turned one assertion into another; S's host slots leak.
    report = run_ops(load("B"), version)
    assert observed(report) == dict(
        outcome="AssertionError: not backuped, node.id=10", raised_in="_evict_to_host", step=5,
        tree=["1 5,6 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"], double_frees=[["device_kv", [0, 1]]],
        leaked={"host_kv": [0, 1]})
    assert report["chain"] == ["evict", "_evict_device_leaf", "_evict_to_host"]
    assert report["status"] == ".....x"
    assert report["warnings"] == [warning(8, "_evict_host_leaf")]
    assert report["free"]["host_kv"] == []


@pytest.mark.parametrize("version", GUARDED)
def test_guard_variant_C_is_clean_but_the_damage_stays(version):
    # At step 9 the cascade from M frees the detached S's device slots a second time before the guard in
    # _delete_tombstone_leaf notices S is stale; the guard stops the assertion, not the double free, the leak
    # of S's host slots 2,3, or the counter drift.
    report = run_ops(load("C"), version)
    assert observed(report) == dict(
        outcome="clean", raised_in=None, step=None, tree=["1 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"],
        double_frees=[["device_kv", [0, 1]]], leaked={"host_kv": [2, 3]})
    assert report["double_frees"][0]["chain"] == ["_iteratively_delete_tombstone_leaf", "_evict_regular",
                                                  "_evict_device_leaf", "evict"]
    assert report["counters"] == dict(full_evictable=-2, full_protected=0, mamba_evictable=0, mamba_protected=0,
                                      tree_device_tokens=0, live_requests=0)
    assert report["warnings"] == [warning(8, "_delete_tombstone_leaf")]


@pytest.mark.parametrize("version", GUARDED)
def test_guard_variant_D_is_clean_by_the_predicate_alone(version):
    report = run_ops(load("D"), version)
    assert observed(report) == dict(outcome="clean", raised_in=None, step=None, tree=[], double_frees=[],
                                    leaked={})
    assert report["warnings"] == []  # the no-children predicate never lets the stale state arise
