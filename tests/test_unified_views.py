"""Every tool works on the unified model (issue #39 §4): the gallery scenario ``unified_refill``, the transcript and
``--json`` of ``simcache run``, holders and went-stale, the invariants, the explorer (finding the race on
``unified_0_5_16`` by itself and shrinking it), the code pane's SGLang lines, and the side-by-side divergence at
#31902's guard. Exact outcomes throughout; the real code's confirmation is in ``test_unified_confirm.py``."""
from __future__ import annotations

import json

import pytest

from simcache.cli import main
from simcache.codepane import code_at
from simcache.explore import explore, shrink
from simcache.explore.machine import Machine, plan_for
from simcache.invariants import check_all
from simcache.presets import preset_flags
from simcache.render.diverge import divergence_point
from simcache.scenario import load, unified_gallery
from simcache.simulate import simulate

PRESETS = ("unified_0_5_16", "unified_0_5_17")


@pytest.fixture(scope="module")
def runs():
    return {p: simulate("unified_refill", p) for p in PRESETS}


def observed(run) -> dict:
    """A run in the gallery's expect format (``tests/test_gallery.py``'s)."""
    j = run.to_json()
    return dict(outcome=j["outcome"], raised_in=j["raised_in"], step=j["step"],
                message=None if j["assertion"] is None else j["assertion"]["message"],
                double_frees=[[d["pool"], d["slots"]] for d in j["double_frees"]],
                leaked={pool: p["leaked"] for pool, p in j["pools"].items() if p["leaked"]},
                went_stale=len(j["went_stale"]), cleaned_up=len(j["cleaned_up"]))


def test_the_unified_gallery_records_every_unified_preset_and_each_run_reports_it_exactly():
    assert list(unified_gallery()) == ["unified_refill", "unified_write_back"]
    for name in unified_gallery():
        sc = load(name)
        assert list(sc.expect) == list(PRESETS) and sc.title and sc.description and sc.schedule, name
        for p in PRESETS:
            assert observed(simulate(sc, p)) == {"raised_in": None, "step": None, "message": None,
                                                 **sc.expect[p]}, (name, p)


def test_under_write_back_0_5_17_still_hangs_the_refill_and_the_explorer_finds_no_failure():
    run = simulate("unified_write_back", "unified_0_5_17", ops=(0, 4))  # prefetch, its hit, R2, its completion
    assert run.cache.root_node.children[1].key == (1, 2) and not run.cache.root_node.children[1].backuped
    assert [n.key for n in run.cache.root_node.children[1].children.values()] == [(3, 4), (9, 9)]
    r = explore("unified_write_back", "unified_0_5_17", bound=1)
    assert (r.failing, r.exhausted, dict(r.damage)) == (0, True, {})


def test_run_prints_the_moment_the_refill_goes_stale_with_its_parent_and_the_crash(capsys):
    assert main(["run", "unified_refill", "--preset", "unified_0_5_16"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "unified_refill under unified_0_5_16  (schedule: pf*2 R2 pf mem*3)",
        "  0 . pf: prefetch [1,2,9,9]",
        "  1 . pf: prefetch_hit n=4",
        "  2 . R2: request [1,2,3,4]",
        "  3 . pf: prefetch_done n=4 mamba_hit=True",
        "   ~ first invariant violation: backup_continuity: node 11 [9,9] is backed up but its parent node 10 [1,2] "
        "is not (step 42)",
        "  4 . mem: evict n=3",
        "   ! node 11 [9,9] went stale (step 71) with its ancestor node 10 (detach [1,2]#10 from []#0 slot 1); still "
        "held by evictable_host_leaves, mamba_host_lru_list",
        "  5 . mem: evict_host n=2",
        "   ! detached node 10 [1,2] re-admitted to evictable_device_leaves (step 89)",
        "  6 x mem: evict n=2",
        "outcome: AssertionError (no message)  (raised in _remove_leaf_from_parent)",
        "damage: double free device_kv[0, 1]",
        "traceback, outermost call first:",
        "  evict()",
        "    drive_eviction()",
        "      _evict_device_leaf()",
        "        _remove_leaf_from_parent()",
        "          AssertionError: ",
        "key: . applied; x raised (the simulated cache's assertion); ! a node went stale or a detached node was "
        "re-admitted; ~ the first invariant violation"]


def test_run_json_has_the_real_harness_fields_and_the_stale_events(capsys):
    assert main(["run", "unified_refill", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert (j["preset"], j["outcome"], j["status"], j["step"], j["first_stale"]) == (
        "unified_0_5_16", "assertion", "......x", 6, 4)
    assert j["flags"] == {"drop_refill_under_unbacked": False, "prefetch_all_or_nothing": False,
                          **{k: v for k, v in j["flags"].items() if k not in ("drop_refill_under_unbacked",
                                                                              "prefetch_all_or_nothing")}}
    assert j["chain"] == ["evict", "drive_eviction", "_evict_device_leaf", "_remove_leaf_from_parent"]
    assert [(e["node"], e["key"], e["holders"]) for e in j["went_stale"]] == [
        (11, "9,9", ["evictable_host_leaves", "mamba_host_lru_list"])]
    assert [(e["node"], e["key"], e["holders"]) for e in j["readmitted"]] == [
        (10, "1,2", ["evictable_device_leaves"])]
    assert j["first_violation"]["invariant"] == "backup_continuity" and j["first_violation"]["op"] == 3
    assert j["violations"] == {"attachment": 1, "tier_monotonicity": 0, "backup_continuity": 1, "leaf_sets": 1,
                               "lru_membership": 1, "size_counters": 1, "no_double_free": 1, "no_leak": 1,
                               "kv_content": 0}
    assert j["stale_final"] == []  # evict_host(2) took [9,9] out of the host leaf set before the crash
    assert j["counters"]["full_evictable"] == -2  # SGLang's counter, decremented twice


def test_holders_leaf_sets_and_lists_are_the_unified_cache_own_in_every_snapshot(runs):
    run = runs["unified_0_5_16"]
    e = run.trace.went_stale[0]
    snap = run.trace.snapshots[e.step]
    assert set(snap.sets) == {"evictable_device_leaves", "evictable_host_leaves"}
    assert set(snap.lrus) == {"mamba_lru_list", "mamba_host_lru_list"}
    assert snap.stale == (11,) and snap.holders[11] == ("evictable_host_leaves", "mamba_host_lru_list")
    assert 11 in snap.sets["evictable_host_leaves"] and not snap.nodes[10].attached


def test_the_invariants_name_the_detached_members_then_the_counters_and_the_double_free(runs):
    plan = plan_for(load("unified_refill"), preset_flags("unified_0_5_16"))
    m = Machine.replay(plan, [0, 0, 1, 0, 2])  # pf*2 R2 pf mem: after evict(3)
    problems = {k: v for k, v in check_all(m.cache, list(m.driver.live.values())).items() if v}
    assert problems == {
        "attachment": "node 11 [9,9] is detached but still held by evictable_host_leaves, mamba_host_lru_list",
        "leaf_sets": "node 11 [9,9] is in evictable_host_leaves but detached from the tree",
        "lru_membership": "mamba_host_lru_list holds node(s) [11] that have no attached host Mamba state",
        "no_leak": "host_kv slot(s) [2, 3] are allocated but nobody refers to them"}  # held by the unreachable [9,9]
    run = runs["unified_0_5_16"]  # at the crash: S's slots freed twice, the Full counter at -2
    assert {k: v for k, v in check_all(run.cache, list(run.driver.live.values())).items() if v} == {
        "size_counters": "full counters evictable=-2 protected=0, recount 0 and 0",
        "no_double_free": "device_kv slot(s) [0, 1] freed twice (in evict_component <- _evict_component_and_detach_lru "
                          "<- _evict_device_leaf <- drive_eviction <- evict)"}
    assert set(check_all(runs["unified_0_5_17"].cache).values()) == {None}


def test_the_explorer_finds_the_race_on_0_5_16_by_itself_and_0_5_17_runs_clean():
    r16 = explore("unified_refill", "unified_0_5_16", bound=2)
    assert (r16.schedules_run, r16.failing, r16.exhausted, r16.total_schedules) == (28, 1, True, 140)
    assert dict(r16.outcomes) == {"clean": 27, "AssertionError (no message) @ _remove_leaf_from_parent": 1}
    assert r16.first_failure.schedule == "pf*2 R2 pf mem*3"
    assert dict(r16.damage) == {"double_free:device_kv": "pf*2 R2 pf mem*3"}
    r17 = explore("unified_refill", "unified_0_5_17", bound=None)
    assert (r17.failing, r17.space_covered, dict(r17.damage)) == (0, True, {})


def test_pruning_by_the_unified_state_key_loses_no_outcome_and_no_end_state():
    pruned = explore("unified_refill", "unified_0_5_16", bound=None)
    every = explore("unified_refill", "unified_0_5_16", bound=None, prune=False)
    assert (pruned.schedules_run, pruned.pruned, every.schedules_run) == (32, 31, 140)
    assert (pruned.signatures, pruned.damage, pruned.distinct_states) == (every.signatures, every.damage,
                                                                          every.distinct_states)


def test_a_cloned_unified_machine_has_the_same_key_and_diverges_independently():
    plan = plan_for(load("unified_refill"), preset_flags("unified_0_5_16"))
    m = Machine.replay(plan, [0, 0, 1])
    c = m.clone()
    assert c.key() == m.key()
    c.step(plan, 0)
    assert c.key() != m.key() and Machine.replay(plan, [0, 0, 1, 0]).key() == c.key()
    # 0.5.17's node arena is a set of ids: a clone carries it (fast_copy copies sets), so the clone runs on alike
    plan17 = plan_for(load("unified_refill"), preset_flags("unified_0_5_17"))
    m17 = Machine.replay(plan17, [0, 0])
    c17 = m17.clone()
    assert c17.cache.arena == m17.cache.arena and c17.cache.arena is not m17.cache.arena and m17.cache.arena
    for i in (1, 0, 2, 2, 2):
        c17.step(plan17, i)
    assert (c17.crash, c17.statuses) == (None, [".", ".", ".", ".", ".", ".", "."])


def test_shrinking_the_race_keeps_its_shape_and_needs_no_prefetch_holding_the_host():
    sh = shrink("unified_refill", "unified_0_5_16", schedule="pf*2 R2 pf mem*3")
    doc = sh.scenario.as_doc()
    assert (sh.schedule, sh.steps, sh.signature) == ("R2 pf*2 mem*3", 6,
                                                     "AssertionError (no message) @ _remove_leaf_from_parent")
    # the backup fails because the host (3 slots) is smaller than the request: the prefetch need not reserve it
    assert doc["actors"] == {
        "pf": [{"op": "prefetch", "tokens": [1, 2, 9]}, {"op": "prefetch_done", "n": 3, "mamba_hit": True}],
        "R2": [{"op": "request", "tokens": [1, 2, 3, 4]}],
        "mem": [{"op": "evict", "n": 3}, {"op": "evict_host", "n": 1}, {"op": "evict", "n": 1}]}
    assert {k: doc["config"][k] for k in ("host_kv", "device_kv")} == {"host_kv": 3, "device_kv": 4}


def test_the_code_pane_mirrors_the_unified_files_lines_at_each_release(runs):
    run = runs["unified_0_5_16"]
    frames = code_at(run.trace, len(run.trace.steps) - 1)
    assert [(f.function, f.path, f.sglang("unified_0_5_16")) for f in frames] == [
        ("evict", "simcache/unified/evict.py", "unified_radix_cache.py:615 @ 0.5.16"),
        ("drive_eviction", "simcache/unified/components.py", "full_component.py:132 @ 0.5.16"),
        ("_evict_device_leaf", "simcache/unified/evict.py", "unified_radix_cache.py:1485 @ 0.5.16"),
        ("_remove_leaf_from_parent", "simcache/unified/evict.py", "unified_radix_cache.py:1312 @ 0.5.16")]
    assert frames[-1].locals == (("node", (10,)),)
    assert frames[-1].sglang("unified_0_5_17") == "unified_tree_core.py:1416 @ 0.5.17"


def test_side_by_side_the_runs_part_at_the_31902_guard():
    a, b = (simulate("unified_refill", p) for p in PRESETS)
    d = divergence_point(a, b)
    assert (d.op, d.function, d.flag) == (3, "_insert_helper_host", "drop_refill_under_unbacked")
    # 0.5.17 looks the anchor up by id first (its tree core's insert_host), then drops the refill
    assert (a.trace.steps[d.steps[0]].text, b.trace.steps[d.steps[1]].text) == (
        "_insert_helper_host([]#0)", "insert_host([]#9)")  # (0.5.17 builds its tree core twice: ids from 9)
    assert [s.text for s in b.trace.steps if s.kind == "refill_dropped"] == [
        "#31902: the prefetched refill [9,9] is dropped: [1,2]#19, where it would hang, is not backed up"]


def test_the_sglang_lines_table_names_every_simulated_function_of_the_unified_model():
    """A function added to the model needs its row: ``python tools/sglang_lines_unified.py --git MIRROR --wheel
    0.5.16=DIR --wheel 0.5.17=DIR`` (facts only: a file name and a line per version)."""
    import simcache.unified  # noqa: F401
    from simcache.codepane import unified_lines
    from simcache.trace_hooks import SIMULATED_CODE

    names = set()
    for code, name in SIMULATED_CODE.items():
        if "/simcache/unified/" in code.co_filename.replace("\\", "/"):
            cls = code.co_qualname.split(".")[0]
            names.add(f"{cls}.{name}" if cls in ("FullComponent", "MambaComponent") else name)
    table = unified_lines()
    assert names == set(table)
    assert all(set(v) <= {"0.5.16", "0.5.17", "7f67965b4dbbbedbce470af5ead78ff0af0f00da"} for v in table.values())


def test_a_unified_preset_needs_page_size_one_and_its_own_flags():
    from simcache.errors import ScenarioError
    from simcache.scenario import from_doc

    base = dict(actors={"A": ["request 1 2"]}, preset="unified_0_5_16")
    with pytest.raises(ScenarioError, match="needs page_size 1, not 2; set page_size: 1"):
        from_doc(dict(base, config={"page_size": 2}), name="s")
    with pytest.raises(ScenarioError, match="unknown flag.* stale_guards; known flags: drop_refill_under_unbacked"):
        from_doc(dict(base, flags={"stale_guards": True}), name="s")
    run = simulate(from_doc(dict(base, flags={"drop_refill_under_unbacked": True}), name="s"))
    assert run.flags.drop_refill_under_unbacked and run.outcome == "clean"


def test_the_storyboard_of_the_fix_names_the_scenario_and_parts_at_the_31902_guard(tmp_path):
    """``export --compare unified_0_5_16,unified_0_5_17 --storyboard``: the outcome table, the divergence at #31902's
    guard, the refill that goes stale, and a replay command that names the unified gallery's scenario by name."""
    out = tmp_path / "sb"
    assert main(["export", "unified_refill", "--compare", "unified_0_5_16,unified_0_5_17", "--storyboard",
                 str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["1-divergence.png", "2-went-stale.png", "3-end.png",
                                                     "comment.md"]
    md = (out / "comment.md").read_text().splitlines()
    assert md[1:7] == [
        "### simcache: `unified_refill` under `unified_0_5_16` vs `unified_0_5_17`", "",
        "| preset | outcome | went stale | cleaned up |", "|---|---|---|---|",
        "| `unified_0_5_16` | AssertionError (no message) (in _remove_leaf_from_parent); damage: double free "
        "device_kv[0, 1] | 1 | 0 |",
        "| `unified_0_5_17` | no assertion; no damage | 0 | 0 |"]
    assert "Schedule: `pf*2 R2 pf mem*3`. Replay: `python -m simcache run unified_refill --preset unified_0_5_16` " \
           "and `python -m simcache run unified_refill --preset unified_0_5_17`." in md
    assert ("**1.** the runs part at operation 3, steps 37 / 39: `_insert_helper_host` line 273, the "
            "`drop_refill_under_unbacked` guard, is on in unified_0_5_17 and off in unified_0_5_16") in md
    assert any(line.startswith("**2.** node #11 [9,9] went stale: detached by _remove_leaf_from_parent") for line in md)
