"""Traces: deterministic replay, micro-steps nested under their operation and call stack, the staleness ledger.

The story of scenario C under ``pre_fix``: a finishing request's insert walks onto S = [1,2] and writes it through;
the host is full, so ``write_backup`` calls ``evict_host``, whose tombstone cascade detaches S while the insert loop
and two suspended calls still hold it: S *went stale*. The write that follows puts the detached S into
``ongoing_write_through`` and later into the device leaf set: S is *re-admitted*. Under ``described_fix`` the guard
finds S in the cascade and *cleans it up*. Each of these is a micro-step, and each micro-step has a snapshot.

Micro-step indices depend on how finely the cache is traced (a new simulated function adds ``call`` steps), so
the tests find each moment by what it is (the ``detach`` of node 8) and assert everything else exactly.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simcache.cli import transcript
from simcache.scenario import gallery, load
from simcache.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
GALLERY = {name: load(name) for name in gallery()}
C_STALE_STACK = ("cache_finished_req", "insert", "_insert_helper", "_inc_hit_count", "write_backup", "evict_host",
                 "_evict_host_leaf", "_iteratively_delete_tombstone_leaf", "_delete_tombstone_leaf")
C_CAUSE = "detached by " + " <- ".join(reversed(C_STALE_STACK))
KINDS = {"op", "call", "split", "attach", "detach", "alloc", "free", "double_free", "alloc_fail", "set_add",
         "set_discard", "lru_insert", "lru_remove", "lock", "host_ref", "backup", "write_ack", "load_ack",
         "storage_ack", "cleaned_up", "assertion"}


def step_of(run, kind: str, node: int, op: int | None = None) -> int:
    """Index of the first micro-step of ``kind`` on ``node`` (in operation ``op`` if given)."""
    return next(s.index for s in run.trace.steps if s.kind == kind and s.node == node and op in (None, s.op))


def without_step(events) -> list[dict]:
    return [{k: v for k, v in e.as_dict().items() if k != "step"} for e in events]


# --- determinism ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(GALLERY))
def test_the_same_scenario_and_schedule_replay_to_an_identical_trace(name):
    for preset in ("pre_fix", "described_fix"):
        a, b = simulate(GALLERY[name], preset), simulate(load(name), preset)
        assert a.trace.sha256() == b.trace.sha256()
        assert [s.as_dict() for s in a.trace.steps] == [s.as_dict() for s in b.trace.steps]
        assert a.trace.snapshots == b.trace.snapshots
        assert a.to_json() == b.to_json()


def test_the_trace_does_not_depend_on_snapshots_or_invariant_checks():
    full = simulate("scenario_c", "pre_fix")
    bare = simulate("scenario_c", "pre_fix", snapshots=False, invariants=False)
    assert bare.trace.sha256() == full.trace.sha256()
    assert bare.trace.snapshots == [] and bare.trace.violations == []


def test_another_process_with_another_hash_seed_replays_the_same_traces():
    code = ("import json; from simcache.simulate import simulate; from simcache.scenario import gallery; "
            "print(json.dumps({n: simulate(n, 'pre_fix', snapshots=False).trace.sha256() for n in gallery()}))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert json.loads(out) == {n: simulate(sc, "pre_fix").trace.sha256() for n, sc in GALLERY.items()}


def test_a_different_schedule_or_preset_gives_a_different_trace():
    base = simulate("scenario_a", "pre_fix").trace.sha256()
    assert simulate("scenario_a", "followup_fix").trace.sha256() != base
    assert simulate("scenario_a", "pre_fix", schedule="mem*2 l3").trace.sha256() != base


# --- nesting: operations and call stacks ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(GALLERY))
def test_micro_steps_nest_under_their_operation_and_call_stack(name):
    run = simulate(GALLERY[name], "pre_fix")
    t = run.trace
    covered = []
    for rec in t.ops:
        steps = t.steps[rec.first_step: rec.last_step + 1]
        covered += [s.index for s in steps]
        assert steps[0].kind == "op" and steps[0].stack == () and steps[0].detail["op"] == rec.op
        assert all(s.op == rec.index and s.actor == rec.actor for s in steps)
        for prev, s in zip(steps, steps[1:], strict=False):
            if s.kind == "call":  # entering a function: its stack is a frame still open, plus the function
                assert s.stack[-1] == s.detail["function"] and prev.stack[: len(s.stack) - 1] == s.stack[:-1]
            else:  # anything else happens inside a frame that was already open
                assert prev.stack[: len(s.stack)] == s.stack, (s.index, prev.stack, s.stack)
    assert covered == list(range(len(t.steps)))
    assert {s.kind for s in t.steps} <= KINDS
    assert [r.status for r in t.ops] == list(run.result["status"])


def test_the_scenario_c_went_stale_step_sits_at_the_bottom_of_the_prs_call_chain():
    run = simulate("scenario_c", "pre_fix")
    (e,) = run.trace.went_stale
    s = run.trace.steps[e.step]
    assert (s.kind, s.node, s.op, s.actor) == ("detach", 8, 5, "R6")
    assert s.stack == C_STALE_STACK
    assert s.text == "detach [1,2]#8 from []#2 slot 1"
    assert run.trace.ops[5].op == {"op": "request", "tokens": [1, 2, 7], "rid": "R6"}


def test_every_micro_step_kind_is_documented():
    doc = (ROOT / "docs" / "scenarios.md").read_text()
    for kind in KINDS:
        assert f"`{kind}`" in doc, kind
    seen = {s.kind for sc in GALLERY.values() for p in ("pre_fix", "described_fix")
            for s in simulate(sc, p, snapshots=False, invariants=False).trace.steps}
    assert seen <= KINDS
    assert seen >= KINDS - {"load_ack"}  # no gallery scenario loads host KV back


# --- went stale, re-admitted, cleaned up -----------------------------------------------------------------------

WENT_STALE = {  # scenario -> (the node whose detach made it, events without their step)
    "scenario_a": (7, [{"node": 7, "key": "1,2", "holders": ["ongoing_backup"],
                        "cause": "detached by _delete_tombstone_leaf <- _iteratively_delete_tombstone_leaf <- "
                                 "_evict_host_leaf <- evict_host"}]),
    "scenario_b": (8, [{"node": 8, "key": "1,2",
                        "holders": ["_evict_device_leaf() (resumes after evict_host)",
                                    "write_backup() (resumes after evict_host)"],
                        "cause": "detached by _delete_tombstone_leaf <- _iteratively_delete_tombstone_leaf <- "
                                 "_evict_host_leaf <- evict_host <- write_backup <- _evict_device_leaf <- evict"}]),
    "scenario_c": (8, [{"node": 8, "key": "1,2",
                        "holders": ["_inc_hit_count() (resumes after evict_host)",
                                    "write_backup() (resumes after evict_host)", "_insert_helper's loop node"],
                        "cause": C_CAUSE}]),
    "crash_pr": (8, [{"node": 8, "key": "1,2",
                      "holders": ["_inc_hit_count() (resumes after evict_host)",
                                  "write_backup() (resumes after evict_host)", "_insert_helper's loop node"],
                      "cause": C_CAUSE}]),
    # the old predicate evicts P = [1,2] as a host leaf; its device child C = [3] goes with it, still held
    "scenario_d": (7, [{"node": 8, "key": "3",
                        "holders": ["evictable_full_device_leaves", "full_lru_list", "mamba_lru_list"],
                        "cause": "detached by _evict_host_leaf <- evict_host"}]),
}


@pytest.mark.parametrize("name", sorted(WENT_STALE))
def test_went_stale_events_name_the_node_its_holders_and_the_cause(name):
    run = simulate(name, "pre_fix")
    detached, want = WENT_STALE[name]
    assert without_step(run.trace.went_stale) == want
    for e in run.trace.went_stale:
        assert e.step == step_of(run, "detach", detached)
        before, at = run.trace.snapshots[e.step - 1], run.trace.snapshots[e.step]
        assert before.nodes[e.node].attached and not at.nodes[e.node].attached
        assert e.node in at.stale and at.holders[e.node]


def test_followup_fix_keeps_scenario_a_and_d_free_of_stale_nodes():
    assert simulate("scenario_a", "followup_fix").trace.went_stale == []
    assert simulate("scenario_d", "merged_fix").trace.went_stale == []


READMITTED = {  # scenario -> [(micro-step kind, holder)] for node 8 (node 7 in A)
    "scenario_a": [("set_add", "evictable_full_host_leaves")],
    "scenario_b": [("backup", "ongoing_write_through"), ("set_add", "evictable_full_host_leaves")],
    # in C the detached S is written through, its write ack starts an L3 backup (a host ref), then it re-enters
    # the device-leaf set when its child is demoted
    "scenario_c": [("backup", "ongoing_write_through"), ("host_ref", "ongoing_backup"),
                   ("set_add", "evictable_full_device_leaves")],
    "crash_pr": [("backup", "ongoing_write_through"), ("host_ref", "ongoing_backup"),
                 ("set_add", "evictable_full_device_leaves")],
    "scenario_d": [],
}


@pytest.mark.parametrize("name", sorted(READMITTED))
def test_a_detached_node_entering_a_set_or_map_again_is_a_readmission(name):
    run = simulate(name, "pre_fix")
    node = 7 if name == "scenario_a" else 8
    t = run.trace
    assert without_step(t.readmitted) == [
        {"node": node, "key": "1,2", "holders": [holder], "cause": f"detached node re-admitted to {holder}"}
        for _, holder in READMITTED[name]]
    assert [(t.steps[e.step].kind, t.steps[e.step].node) for e in t.readmitted] == \
           [(kind, node) for kind, _ in READMITTED[name]]
    assert all(e.step > t.went_stale[0].step for e in t.readmitted)
    for e, (kind, holder) in zip(t.readmitted, READMITTED[name], strict=True):  # the detached node is still drawn
        snap = t.snapshots[e.step]
        assert not snap.nodes[node].attached
        if kind == "set_add":
            assert node in snap.sets[holder] and node in snap.stale


CLEANED_UP = {  # scenario -> (node, reason, removed) under described_fix
    "scenario_a": (7, "stale node in _evict_host_leaf", ["evictable_full_host_leaves"]),
    "scenario_b": (8, "stale node in _evict_host_leaf", ["evictable_full_host_leaves"]),
    "scenario_c": (8, "stale node in _delete_tombstone_leaf", []),
    "crash_pr": (8, "stale node in _delete_tombstone_leaf", []),
}


@pytest.mark.parametrize("name", sorted(CLEANED_UP))
def test_the_described_fix_cleans_up_the_stale_node(name):
    run = simulate(name, "described_fix")
    node, reason, removed = CLEANED_UP[name]
    (e,) = run.trace.cleaned_up
    assert without_step([e]) == [{"node": node, "key": "1,2", "reason": reason, "removed": removed}]
    s = run.trace.steps[e.step]
    assert (s.kind, s.node) == ("cleaned_up", node)
    assert s.stack[-1] == "_cleanup_stale_node"
    assert run.result["warnings"] == [s.detail["warning"]]
    assert s.detail["warning"] == (f"Skip stale HiMamba eviction node_id={node} reason={reason} parent_id=2 "
                                   f"child_key=1")
    after = run.trace.snapshots[e.step]
    assert not any(node in members for members in after.sets.values())


def test_no_cleanup_without_the_guards():
    for name in CLEANED_UP:
        for preset in ("pre_fix", "merged_fix", "followup_fix"):
            assert simulate(name, preset, snapshots=False).trace.cleaned_up == []


# --- snapshots ----------------------------------------------------------------------------------------------------

def test_snapshots_are_aligned_with_micro_steps_and_show_the_stale_node():
    run = simulate("scenario_c", "pre_fix")
    t = run.trace
    assert len(t.snapshots) == len(t.steps) and t.initial is not None
    assert t.initial.order == () and t.initial.stale == ()
    (e,) = t.went_stale
    at = t.snapshots[e.step]
    assert at.stack == t.steps[e.step].stack == C_STALE_STACK
    s8 = at.nodes[8]
    assert (s8.key, s8.attached, s8.parent) == ((1, 2), False, 2)
    assert 8 not in at.order and 8 not in at.nodes[at.root].children
    assert at.current == 8  # the insert loop still stands on S
    # the calls that will use S after evict_host returns hold it; _delete_tombstone_leaf() is deleting it, not using it
    assert at.holders[8] == ("_inc_hit_count() (resumes after evict_host)", "write_backup() (resumes after evict_host)",
                             "insert loop's node")
    assert 8 in at.stale
    # the stale node stays drawable afterwards: every later snapshot still has it, detached
    assert all(not snap.nodes[8].attached for snap in t.snapshots[e.step:])
    # a snapshot is plain data: its tree text is the canonical text at that moment
    assert t.snapshots[-1].tree_text == tuple(run.result["tree"])


def test_the_first_violation_points_at_the_micro_step_that_began_it():
    run = simulate("scenario_c", "pre_fix")
    v = run.trace.violations[0]
    assert (v.op, v.invariant) == (2, "backup_continuity")
    assert v.step == step_of(run, "attach", 9)  # H = [9,9] (backed up) hung under S (not backed up)
    assert run.trace.steps[v.step].text == "attach [9,9]#9 under [1,2]#8 at slot 9"
    assert run.result["status"] == ".........x"  # the run goes on after a violation


# --- the human transcript ----------------------------------------------------------------------------------------

def test_the_transcript_of_crash_pr_under_merged_fix(snapshot):
    """The whole transcript is a snapshot (tests/__snapshots__/test_trace.ambr); what a reader relies on is asserted
    here: each moment is printed under its operation, with the micro-step where it happened."""
    run = simulate("crash_pr", "merged_fix")
    stale, wt, leaf = step_of(run, "detach", 8), step_of(run, "backup", 8, op=5), step_of(run, "set_add", 8, op=10)
    l3 = step_of(run, "host_ref", 8, op=6)
    first = step_of(run, "attach", 9)
    text = transcript(run)
    assert text == snapshot
    assert first < stale < wt < l3 < leaf
    lines = text.splitlines()
    assert lines[lines.index("  5 . R6: request [1,2,7]") + 1] == (
        f"   ! node 8 [1,2] went stale (step {stale}); still held by _inc_hit_count() (resumes after evict_host), "
        f"write_backup() (resumes after evict_host), _insert_helper's loop node")
    for line in (f"re-admitted to ongoing_write_through (step {wt})", f"re-admitted to ongoing_backup (step {l3})",
                 f"re-admitted to evictable_full_device_leaves (step {leaf})",
                 f"backup_continuity: node 9 [9,9] is backed up but its parent node 8 [1,2] is not (step {first})"):
        assert sum(x.endswith(line) for x in lines) == 1, line
    assert lines[-15:-11] == [" 11 x R7: request [8,8,8]",
                              "outcome: AssertionError: parent does not have child key, 1  (raised in "
                              "_delete_tombstone_leaf)",
                              "damage: double free device_kv[0, 1]; leaked host_kv[1, 2]",
                              "traceback, outermost call first:"]


def test_the_transcript_of_a_guarded_run_shows_the_cleanup(snapshot):
    run = simulate("scenario_a", "described_fix")
    stale, back, clean = step_of(run, "detach", 7), step_of(run, "set_add", 7, op=2), step_of(run, "cleaned_up", 7)
    lines = transcript(run).splitlines()
    assert lines == snapshot
    assert f"   + stale guard cleaned up node 7 [1,2] (step {clean}): removed from evictable_full_host_leaves" in lines
    assert f"   ! node 7 [1,2] went stale (step {stale}); still held by ongoing_backup" in lines
    assert f"   ! detached node 7 [1,2] re-admitted to evictable_full_host_leaves (step {back})" in lines
    assert "outcome: no assertion; damage: leaked host_kv[0, 1]" in lines  # issue #13: never "clean" above a damage


def test_the_steps_worded_on_demand_read_like_the_list_they_replace():
    """``trace.steps`` words each micro-step from a compact log entry when it is read: indexing (negative too),
    slicing, iterating and reversing give the same ``MicroStep``s, words of the moment they happened (a node's key
    as it was then), and a step outside the run is an IndexError naming the run's range."""
    t = simulate("crash_pr", "described_fix", snapshots=False).trace
    steps = list(t.steps)
    assert len(steps) == len(t.steps) > 100
    assert [s.index for s in steps] == list(range(len(steps)))
    assert t.steps[-1] == steps[-1] and t.steps[3:9] == steps[3:9] and list(reversed(t.steps)) == steps[::-1]
    assert t.steps == steps and t.steps != steps[:-1]
    assert {s.kind for s in steps} >= {"op", "call", "attach", "detach", "lock", "alloc", "free", "set_add",
                                       "lru_insert", "cleaned_up"}
    cleaned = next(s for s in steps if s.kind == "cleaned_up")
    assert cleaned.text.startswith("stale guard: cleaned up [1,2]#8 (") and cleaned.detail["removed"] is not None
    first = steps[0]
    assert (first.kind, first.op, first.node, first.detail) == ("op", 0, None, {"op": t.ops[0].op})
    with pytest.raises(IndexError, match=r"outside this run's 0\.\."):
        t.steps[len(steps)]
