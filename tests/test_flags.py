"""The version flags, one at a time: each test ablates one flag from a preset with ``preset(...).with_(...)`` and shows
the behaviour change exactly where that flag is checked. Then the presets table and the errors for unknown names.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_cache, node_at, snapshot

from simcache.driver import Driver
from simcache.errors import CacheAssertion, ConfigError, SimcacheError
from simcache.ops_run import run_ops
from simcache.state import tree_lines
from simcache.versions import FLAG_NAMES, PRESETS, Flags, parse_flag, preset

FIXTURES = Path(__file__).parent / "fixtures"
X = "AssertionError: parent does not have child key, 1"


def scenario(name: str) -> dict:
    return json.loads((FIXTURES / f"scenario_{name}.json").read_text())


def outcome(report: dict) -> tuple:
    return report["outcome"], report["raised_in"], report["step"]


CLEAN = ("clean", None, None)


# --- host_leaf_predicate: _update_full_host_leaf_status -----------------------------------------------------------

@pytest.mark.parametrize("child, loop_old, no_children", [
    (None, ["1,2"], ["1,2"]),  # a host-only node without children is a host leaf under both predicates
    (dict(device=True, mamba=True), ["1,2"], []),  # a device child: ignored by the old loop, refused by #22592
    (dict(host=True, mamba_host=True), ["1,2/3"], ["1,2/3"]),  # a host-only child: only the child is a leaf
])
def test_host_leaf_predicate_decides_whether_a_parent_with_children_is_a_host_leaf(child, loop_old, no_children):
    nodes = [dict(key=[1, 2], host=True)] + ([dict(key=[3], parent=0, **child)] if child else [])
    for predicate, expected in (("loop_old", loop_old), ("no_children", no_children)):
        cache = make_cache(flags=preset("merged_fix").with_(host_leaf_predicate=predicate))
        Driver(cache).inject(nodes)
        assert snapshot(cache)["host_leaves"] == expected, predicate


def test_host_leaf_predicate_alone_decides_scenario_D():
    doc = scenario("D")
    assert outcome(run_ops(doc, flags=preset("merged_fix").with_(host_leaf_predicate="loop_old"))) == (
        X, "_delete_tombstone_leaf", 2)
    assert outcome(run_ops(doc, flags=preset("pre_fix").with_(host_leaf_predicate="no_children"))) == CLEAN


# --- stale_guards: _evict_regular, _evict_host_leaf, _delete_tombstone_leaf ---------------------------------------

def test_stale_guards_turn_scenario_As_assertion_into_a_warning_and_a_leak():
    doc = scenario("A")
    unguarded = run_ops(doc, flags=preset("described_fix").with_(stale_guards=False))
    assert outcome(unguarded) == (X, "_evict_host_leaf", 3) and unguarded["warnings"] == []
    guarded = run_ops(doc, "described_fix")
    assert outcome(guarded) == CLEAN
    assert guarded["warnings"] == [("Skip stale HiMamba eviction node_id=7 reason=stale node in _evict_host_leaf "
                                    "parent_id=2 child_key=1")]
    assert guarded["accounting"]["host_kv"]["leaked"] == [0, 1]
    # added to merged_fix, the guards alone make the same difference
    assert outcome(run_ops(doc, flags=preset("merged_fix").with_(stale_guards=True))) == CLEAN


def _stale_parent_with_a_child(flags: Flags):
    """1,2,3 with a child 4, then 1,2,3 popped from the root by hand: stale, still listed, still a parent."""
    cache = make_cache("write_back", flags=flags)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2, 3]))
    drv.finish(drv.start([1, 2, 3, 4]))
    node = node_at(cache, [1, 2, 3])
    cache.root_node.children.pop(1)
    return cache, node


def test_guard_before_asserts_skips_a_stale_node_that_would_trip_the_non_leaf_assertion():
    cache, node = _stale_parent_with_a_child(preset("reviewed_fix").with_(guard_before_asserts=False))
    before = snapshot(cache)
    assert before == dict(
        tree=[], sizes=dict(full_evictable=4, full_protected=0, mamba_evictable=2, mamba_protected=0),
        full_lru=["1,2,3/4 (detached)", "1,2,3 (detached)"], mamba_lru=["1,2,3/4 (detached)", "1,2,3 (detached)"],
        host_mamba_lru=[], device_leaves=["1,2,3/4 (detached)"], host_leaves=[])
    with pytest.raises(CacheAssertion) as e:
        cache._evict_regular(node)
    assert str(e.value) == "non-leaf, node.id=7"
    assert snapshot(cache) == before and cache.warnings == []  # the entry assertion fires before any change

    cache, node = _stale_parent_with_a_child(preset("reviewed_fix"))
    assert cache._evict_regular(node) == (0, 0)
    assert cache.warnings == [("Skip stale HiMamba eviction node_id=7 reason=stale node in _evict_regular "
                               "parent_id=2 child_key=1")]
    assert snapshot(cache) == {**before, "full_lru": ["1,2,3/4 (detached)"], "mamba_lru": ["1,2,3/4 (detached)"]}
    assert node.value == [0, 1, 2]  # skipped: nothing freed


def _stale_tombstone_still_in_the_mamba_list(flags: Flags):
    """1,2 loses its Mamba state without leaving the Mamba list (the state the review worried about), then is
    popped from the root by hand."""
    cache = make_cache("write_back", flags=flags)
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    drv.finish(drv.start([5, 6]))
    node = node_at(cache, [1, 2])
    cache.pools.device_mamba.free(node.mamba_value)
    node.mamba_value = None
    cache.mamba_evictable_size_ -= 1
    cache.root_node.children.pop(1)
    return cache, node


def test_unconditional_lru_cleanup_removes_a_tombstone_wrongly_left_in_the_mamba_list():
    cache, node = _stale_tombstone_still_in_the_mamba_list(preset("reviewed_fix").with_(
        unconditional_lru_cleanup=False))
    assert cache._evict_regular(node) == (0, 0)
    assert snapshot(cache)["mamba_lru"] == ["5,6", "1,2 (detached)"]  # gated on mamba_value: left behind
    with pytest.raises(CacheAssertion) as e:
        cache.evict(0, mamba_num=1)  # the bot's warning: the next Mamba eviction finds it
    assert str(e.value) == "node has no mamba value, x.id=7"

    cache, node = _stale_tombstone_still_in_the_mamba_list(preset("reviewed_fix"))
    assert cache._evict_regular(node) == (0, 0)
    assert snapshot(cache)["mamba_lru"] == ["5,6"]
    assert cache.evict(0, mamba_num=1) == (0, 1)  # 5,6 is written back and demoted
    assert tree_lines(cache) == ["1 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]


# --- cascade_respects_host_refs: _iteratively_delete_tombstone_leaf -----------------------------------------------

def test_cascade_respects_host_refs_alone_decides_scenario_A():
    doc = scenario("A")
    assert outcome(run_ops(doc, flags=preset("followup_fix").with_(cascade_respects_host_refs=False))) == (
        X, "_evict_host_leaf", 3)
    assert outcome(run_ops(doc, flags=preset("merged_fix").with_(cascade_respects_host_refs=True))) == CLEAN
    # after evict_host(1) the host-referenced S survives only when the cascade respects its ref
    survivor = ["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=1 hmr=0"]
    states = {}
    for respects in (False, True):
        doc1 = {**doc, "ops": doc["ops"][:2]}
        states[respects] = run_ops(doc1, flags=preset("followup_fix").with_(cascade_respects_host_refs=respects))
    assert (states[False]["tree"], states[True]["tree"]) == ([], survivor)
    # detached, S is still held by its L3 backup, whose ack will put it back in the host-leaf set
    assert (states[False]["stale_final"], states[True]["stale_final"]) == (["1,2@ongoing_backup"], [])


# --- forward_chunked: cache_unfinished_req ------------------------------------------------------------------------

@pytest.mark.parametrize("forward, tree_after_chunk", [
    (True, ["1 1,2,3,4 v=1 h=0 m=1 mh=0 fl=1 ml=1 hr=0 hmr=0"]),  # a chunk does not count as a hit
    (False, ["1 1,2,3,4 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=0 hmr=0"]),  # written through mid-prefill, locked by it
])
def test_forward_chunked_keeps_chunked_prefill_from_writing_through(forward, tree_after_chunk):
    cache = make_cache("write_through", flags=preset("followup_fix").with_(forward_chunked=forward))
    drv = Driver(cache)
    rid = drv.start([1, 2, 3, 4])
    req = drv.live[rid]

    cache.cache_unfinished_req(req, chunked=True)

    assert tree_lines(cache) == tree_after_chunk
    assert (req.cache_protected_len, req.last_node) == (4, node_at(cache, [1, 2, 3, 4]))
    drv.finish(rid)  # the final insert is not chunked: both versions end written through
    assert tree_lines(cache) == ["1 1,2,3,4 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"]


# --- write_backup_parent_check: write_backup ----------------------------------------------------------------------

@pytest.mark.parametrize("check, through, back", [
    ("none", 2, 2),
    ("all", 0, 0),
    ("write_through_only", 0, 2),  # #22185: a write-back skips the check
])
def test_write_backup_parent_check_blocks_a_child_of_a_parent_without_host_copy(check, through, back):
    results = {}
    for write_back in (False, True):
        cache = make_cache("write_back", flags=preset("pre_fix").with_(write_backup_parent_check=check))
        drv = Driver(cache)
        drv.finish(drv.start([1, 2]))
        drv.finish(drv.start([1, 2, 3, 4]))
        child = node_at(cache, [1, 2], [3, 4])
        assert node_at(cache, [1, 2]).host_value is None
        copied = cache.write_backup(child, write_back=write_back)
        results[write_back] = copied
        assert (child.host_value is not None) == (copied > 0)
        assert cache.ongoing_write_through == ({child.id: child} if copied else {})
        # only a write-through copy locks the node until its ack
        assert child.full_lock_ref == (1 if copied and not write_back else 0)
    assert (results[False], results[True]) == (through, back)


def test_write_backup_parent_check_all_stops_scenario_B_at_its_first_write_back():
    doc = scenario("B")
    report = run_ops(doc, flags=preset("pre_fix").with_(write_backup_parent_check="all"))
    # [3]'s write-back is refused (its parent S has no host copy), and demoting it then asserts
    assert outcome(report) == ("AssertionError: not backuped, node.id=7", "_evict_to_host", 2)
    assert outcome(run_ops(doc, flags=preset("pre_fix").with_(write_backup_parent_check="none"))) == (
        X, "_evict_host_leaf", 5)


# --- presets and names --------------------------------------------------------------------------------------------

def test_presets_table():
    base = dict(host_leaf_predicate="loop_old", stale_guards=False, guard_before_asserts=False,
                unconditional_lru_cleanup=False, cascade_respects_host_refs=False, forward_chunked=False,
                write_backup_parent_check="write_through_only", prefetch_truncates_to_free_host=False,
                host_hit_counts_kv_only=False, prefetch_reserves_host_at_hit=False,
                prefetch_terminate_revokes_unreserved=False, split_keeps_child_mamba_lru=False)
    merged = {**base, "host_leaf_predicate": "no_children"}
    described = {**merged, "stale_guards": True}
    followup = {**merged, "cascade_respects_host_refs": True, "forward_chunked": True}
    assert {name: flags.as_dict() for name, flags in PRESETS.items()} == {
        "pre_fix": base,
        "described_fix": described,
        "reviewed_fix": {**described, "guard_before_asserts": True, "unconditional_lru_cleanup": True},
        "merged_fix": merged,
        "followup_fix": followup,
        "main_2026_06": {**followup, "prefetch_truncates_to_free_host": True, "host_hit_counts_kv_only": True},
        "release_0_5_17": {**followup, "prefetch_truncates_to_free_host": True, "host_hit_counts_kv_only": True,
                           "prefetch_reserves_host_at_hit": True, "prefetch_terminate_revokes_unreserved": True,
                           "split_keeps_child_mamba_lru": True},
    }
    assert FLAG_NAMES == ("host_leaf_predicate", "stale_guards", "guard_before_asserts",
                          "unconditional_lru_cleanup", "cascade_respects_host_refs", "forward_chunked",
                          "write_backup_parent_check", "prefetch_truncates_to_free_host", "host_hit_counts_kv_only",
                          "prefetch_reserves_host_at_hit", "prefetch_terminate_revokes_unreserved",
                          "split_keeps_child_mamba_lru")
    assert preset("pre_fix").with_(forward_chunked=True) == Flags(forward_chunked=True)
    assert preset("pre_fix") == Flags()  # with_ returned a new value; the preset itself is unchanged


def test_unknown_preset_and_flag_names_raise_config_errors_that_list_the_choices():
    with pytest.raises(ConfigError) as e:
        preset("nope")
    assert str(e.value) == ("unknown preset 'nope'; choose one of pre_fix, described_fix, reviewed_fix, "
                            "merged_fix, followup_fix, main_2026_06, release_0_5_17")
    with pytest.raises(ConfigError) as e:
        preset("pre_fix").with_(bogus=1, zzz=2)
    assert str(e.value) == ("unknown flag(s) bogus, zzz; known flags: host_leaf_predicate, stale_guards, "
                            "guard_before_asserts, unconditional_lru_cleanup, cascade_respects_host_refs, "
                            "forward_chunked, write_backup_parent_check, prefetch_truncates_to_free_host, "
                            "host_hit_counts_kv_only, prefetch_reserves_host_at_hit, "
                            "prefetch_terminate_revokes_unreserved, split_keeps_child_mamba_lru")
    with pytest.raises(ConfigError) as e:
        run_ops({"ops": []}, "nope")
    assert "choose one of pre_fix" in str(e.value)
    assert issubclass(ConfigError, SimcacheError)


@pytest.mark.parametrize("changes, message", [
    (dict(stale_guards="yes"), "flag stale_guards must be true or false, not 'yes'"),
    (dict(host_leaf_predicate="new"), "host_leaf_predicate must be one of loop_old, no_children, not 'new'"),
    (dict(write_backup_parent_check="some"),
     "write_backup_parent_check must be one of none, all, write_through_only, not 'some'"),
])
def test_bad_flag_values_raise_config_errors(changes, message):
    with pytest.raises(ConfigError) as e:
        preset("pre_fix").with_(**changes)
    assert str(e.value) == message


def test_parse_flag_reads_name_equals_value():
    assert parse_flag("stale_guards=true") == ("stale_guards", True)
    assert parse_flag(" forward_chunked = off ") == ("forward_chunked", False)
    assert parse_flag("host_leaf_predicate=no_children") == ("host_leaf_predicate", "no_children")
    with pytest.raises(ConfigError) as e:
        parse_flag("stale_guards")
    assert str(e.value).startswith("--flag expects NAME=VALUE with NAME one of host_leaf_predicate, ")
    assert str(e.value).endswith("; got 'stale_guards'")
