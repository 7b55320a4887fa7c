"""release_0_5_17 (SGLang release 0.5.17): main_2026_06 plus three flags, each shown where it is read.

``prefetch_reserves_host_at_hit`` (``prefetch_from_storage`` and the drain's ``_drain_and_alloc_storage_hit``): a
prefetch reserves no host KV when it is issued; the drain reserves exactly the L3 hit count once it arrives
(operation ``prefetch_hit``), calling ``evict_host`` on shortage, then cutting it to the page-aligned free host KV
(``prefetch_truncates_to_free_host``) or revoking it.

``prefetch_terminate_revokes_unreserved`` (``check_prefetch_progress``): a prefetch that may end before its host KV
was reserved is terminated and revoked (its anchor released, its host Mamba slot freed); before, it was kept.

``split_keeps_child_mamba_lru`` (``_split_node``): splitting a device node leaves the child where it was in the Mamba
LRU; before, the child moved to the most recently used end.

Every expected state below is also what SGLang's real 0.5.17 code gives on the same operations (checked with the
real files when these tests were written; the tests do not need them).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcache.cache import HiMambaRadixCache
from simcache.config import check_settings, from_settings
from simcache.driver import Driver
from simcache.errors import ConfigError
from simcache.ops_run import run_ops
from simcache.state import tree_lines
from simcache.versions import REAL_PRESETS, REAL_VERSIONS, preset, preset_for_real

REL = preset("release_0_5_17")
X = "AssertionError: parent does not have child key, 1"
IDLE = dict(write_through=0, load_back=0, backup=0, prefetch=0, pending_l3=0, write_acks=0)
ONE_PREFETCH = {**IDLE, "prefetch": 1}
FIXTURES = Path(__file__).parent / "fixtures"


def test_release_0_5_17_is_main_2026_06_plus_the_three_flags():
    assert REL == preset("main_2026_06").with_(prefetch_reserves_host_at_hit=True,
                                               prefetch_terminate_revokes_unreserved=True,
                                               split_keeps_child_mamba_lru=True)


def test_the_release_table_names_the_real_code_of_each_real_preset():
    assert {k: (v.preset, v.source) for k, v in REAL_VERSIONS.items()} == {
        "e9d6b9eb2d676f245863609ea611bee78ab5ce70": ("pre_fix", "mirror"),
        "14e122cdee7142ecd52e455d21be08403ed32c2a": ("merged_fix", "mirror"),
        "4a50cd781e16c793c2377600aa1745f82fbed51c": ("followup_fix", "mirror"),
        "7f67965b4dbbbedbce470af5ead78ff0af0f00da": ("main_2026_06", "mirror"),
        "0.5.17": ("release_0_5_17", "wheel")}
    assert REAL_PRESETS == ("pre_fix", "merged_fix", "followup_fix", "main_2026_06", "release_0_5_17")
    assert [preset_for_real(v) for v in ("0.5.17", "7f67965b", "4A50CD781E16", "e9d6b9e")] == \
        ["release_0_5_17", "main_2026_06", "followup_fix", "pre_fix"]


@pytest.mark.parametrize("version", ["0.5.18", "7f6796", "", None, "x" * 70])
def test_a_version_no_preset_models_is_one_sentence_listing_the_known_ones(version):
    with pytest.raises(ConfigError) as e:
        preset_for_real(version)
    said = repr(version) if version != "x" * 70 else f"'{'x' * 59}... (72 characters)"
    assert str(e.value) == (f"no preset models SGLang {said}; known: e9d6b9eb2, 14e122cde, 4a50cd781, 7f67965b4, "
                            f"0.5.17")


# --- prefetch_reserves_host_at_hit: prefetch_from_storage, then the drain's new step --------------------------

def doc(host_kv: int, ops: list, **config) -> dict:
    return {"config": dict(storage=True, host_kv=host_kv, **config), "ops": ops}


PREFETCH = {"op": "prefetch", "tokens": [1, 2, 3, 4]}


def test_a_prefetch_reserves_its_host_kv_only_when_the_hit_count_arrives():
    issued = run_ops(doc(8, [PREFETCH]), flags=REL)
    assert (issued["status"], issued["inflight"], issued["free"]["host_kv"]) == (".", ONE_PREFETCH, list(range(8)))
    assert issued["free"]["host_mamba"] == [1, 2, 3, 4, 5, 6, 7]  # its host Mamba slot is taken at issue, as before
    hit = run_ops(doc(8, [PREFETCH, {"op": "prefetch_hit", "n": 4}]), flags=REL)
    assert (hit["status"], hit["inflight"], hit["free"]["host_kv"]) == ("..", ONE_PREFETCH, [4, 5, 6, 7])
    # without the flag the host KV is taken at issue, and the hit count has nothing left to do
    old = run_ops(doc(8, [PREFETCH, {"op": "prefetch_hit", "n": 4}]),
                  flags=REL.with_(prefetch_reserves_host_at_hit=False))
    assert (old["status"], old["free"]["host_kv"]) == (".-", [4, 5, 6, 7])


DEMOTED_56 = [{"op": "request", "tokens": [5, 6]}, {"op": "events"}, {"op": "l3_ack"}, {"op": "evict", "n": 2}]


def test_the_hit_count_evicts_host_kv_where_the_issue_used_to():
    """[5,6] lives on the host only; the prefetch of four tokens needs all four host slots."""
    issued = run_ops(doc(4, [*DEMOTED_56, PREFETCH]), flags=REL)
    assert (issued["tree"], issued["free"]["host_kv"]) == (["1 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"], [2, 3])
    hit = run_ops(doc(4, [*DEMOTED_56, PREFETCH, {"op": "prefetch_hit", "n": 4}]), flags=REL)
    assert (hit["status"], hit["tree"], hit["free"]["host_kv"]) == ("......", [], [])
    old = run_ops(doc(4, [*DEMOTED_56, PREFETCH]), flags=REL.with_(prefetch_reserves_host_at_hit=False))
    assert (old["tree"], old["free"]["host_kv"]) == ([], [])  # evicted by the prefetch itself
    done = run_ops(doc(4, [*DEMOTED_56, PREFETCH, {"op": "prefetch_hit", "n": 4},
                           {"op": "prefetch_done", "n": 4, "mamba_hit": True}]), flags=REL)
    assert (done["tree_slots"], done["inflight"]) == (["1 1,2,3,4 v=- h=2,3,0,1 m=- mh=1"], IDLE)


TRUNCATED = [{"op": "request", "tokens": [5, 6]}, PREFETCH, {"op": "prefetch_hit", "n": 4},
             {"op": "prefetch_done", "n": 4, "mamba_hit": True}]


def test_a_hit_that_does_not_fit_is_cut_to_the_free_host_kv_or_revoked():
    """[5,6]'s copy (its L3 backup pending) pins two of the four host slots; evict_host frees nothing."""
    cut = run_ops(doc(4, TRUNCATED), flags=REL)
    assert (cut["status"], cut["tree_slots"]) == ("....", ["1 1,2 v=- h=2,3 m=- mh=1", "1 5,6 v=0,1 h=0,1 m=0 mh=0"])
    # below the threshold, or without truncation, the hit revokes the prefetch: its host Mamba slot 1 is freed
    for flags, threshold in ((REL, 3), (REL.with_(prefetch_truncates_to_free_host=False), 1)):
        revoked = run_ops(doc(4, TRUNCATED, prefetch_threshold=threshold), flags=flags)
        assert (revoked["status"], revoked["tree_slots"]) == ("...-", ["1 5,6 v=0,1 h=0,1 m=0 mh=0"])
        assert revoked["free"]["host_kv"] == [2, 3] and revoked["free"]["host_mamba"] == [2, 3, 4, 5, 6, 7, 1]


def test_a_hit_below_the_threshold_is_revoked_by_the_controller():
    r = run_ops(doc(8, [PREFETCH, {"op": "prefetch_hit", "n": 2}, {"op": "prefetch_done", "n": 4, "mamba_hit": True}],
                    prefetch_threshold=3), flags=REL)
    assert (r["status"], r["tree"], r["inflight"], r["free"]["host_kv"]) == ("..-", [], IDLE, list(range(8)))
    assert r["free"]["host_mamba"] == [1, 2, 3, 4, 5, 6, 7, 0]


def test_scenario_c_needs_the_hit_count_before_r2_finishes():
    """C's operations deliver the hit count with the completion, after R2 took the host: the hit is revoked."""
    c = json.loads((FIXTURES / "oracle_C.json").read_text())
    report = run_ops(c, flags=REL)
    assert (report["outcome"], report["status"]) == ("clean", "........-.")
    old = run_ops(c, flags=REL.with_(prefetch_reserves_host_at_hit=False))
    assert (old["outcome"], old["raised_in"], old["step"]) == (X, "_delete_tombstone_leaf", 9)
    early = {**c, "ops": [c["ops"][0], {"op": "prefetch_hit", "n": 4}, *c["ops"][1:]]}
    back = run_ops(early, flags=REL)
    assert (back["outcome"], back["raised_in"], back["step"], back["status"]) == \
        (X, "_delete_tombstone_leaf", 10, "..........x")
    assert [[d["pool"], d["slots"]] for d in back["double_frees"]] == [["device_kv", [0, 1]]]


# --- prefetch_hit and prefetch_done, the driver's side -------------------------------------------------------

def test_prefetch_hit_has_nothing_to_do_without_a_prefetch_waiting_for_host_kv():
    ops = [{"op": "prefetch_hit", "n": 2}, PREFETCH, {"op": "prefetch_hit", "n": 4}, {"op": "prefetch_hit", "n": 4}]
    assert run_ops(doc(8, ops), flags=REL)["status"] == "-..-"
    assert run_ops(doc(8, ops), "main_2026_06")["status"] == "-.--"


def test_a_completion_before_the_hit_count_is_the_hit_count_then_the_completion():
    without = run_ops(doc(8, [PREFETCH, {"op": "prefetch_done", "n": 3, "mamba_hit": True}]), flags=REL)
    with_hit = run_ops(doc(8, [PREFETCH, {"op": "prefetch_hit", "n": 3},
                               {"op": "prefetch_done", "n": 3, "mamba_hit": True}]), flags=REL)
    assert without["tree_slots"] == with_hit["tree_slots"] == ["1 1,2,3 v=- h=0,1,2 m=- mh=0"]
    fields = ("outcome", "tree", "tree_slots", "counters", "inflight", "accounting", "free", "double_frees")
    assert [without[k] for k in fields] == [with_hit[k] for k in fields]
    # the three reserved slots are filled: nothing goes back through the release queue, unlike at issue time
    assert without["free"]["host_kv"] == [3, 4, 5, 6, 7]


def test_a_short_transfer_ends_the_prefetch_and_never_reads_the_mamba_state():
    """Four host slots reserved, two filled: the transfer stops there, so even a prefetch that waits for completion
    ends; the hybrid controller reads the Mamba state only after every reserved page arrived, so [1,2] comes without
    it and the prefetch's host Mamba slot 0 is freed."""
    r = run_ops(doc(8, [PREFETCH, {"op": "prefetch_hit", "n": 4}, {"op": "prefetch_done", "n": 2, "mamba_hit": True}],
                    prefetch_stop_policy="wait_complete"), flags=REL)
    assert (r["status"], r["tree_slots"], r["inflight"]) == ("...", ["1 1,2 v=- h=0,1 m=- mh=-"], IDLE)
    assert r["free"]["host_mamba"] == [1, 2, 3, 4, 5, 6, 7, 0]
    ops = [PREFETCH, {"op": "prefetch_hit", "n": 2}, {"op": "prefetch_done", "n": 2, "mamba_hit": True}]
    full = run_ops(doc(8, ops, prefetch_stop_policy="wait_complete"), flags=REL)
    assert full["tree_slots"] == ["1 1,2 v=- h=0,1 m=- mh=0"]  # two reserved, two filled: the state comes along


# --- prefetch_terminate_revokes_unreserved: check_prefetch_progress ------------------------------------------

def anchored_prefetch(flags, policy: str = "best_effort"):
    """[1,2] written through and backed up to L3, then a prefetch of [1,2,3,4] anchored at it, its hit count not in."""
    settings = check_settings(dict(storage=True, prefetch_stop_policy=policy))
    cache = HiMambaRadixCache(from_settings(settings, flags))
    drv = Driver(cache)
    for i, op in enumerate([{"op": "request", "tokens": [1, 2]}, {"op": "events"}, {"op": "l3_ack"}, PREFETCH]):
        assert drv.step(op, i) == "."
    assert tree_lines(cache) == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    return cache


def test_a_prefetch_ending_before_its_host_kv_was_reserved_is_revoked():
    cache = anchored_prefetch(REL)
    op = cache.ongoing_prefetch["pf"].operation
    assert cache.check_prefetch_progress("pf") is True
    assert op.terminated and cache.ongoing_prefetch == {} and cache.controller.prefetch_tokens_occupied == 0
    assert tree_lines(cache) == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert list(cache.pools.host_mamba.free_slots) == [2, 3, 4, 5, 6, 7, 1]  # the prefetch's host Mamba slot


def test_without_the_flag_an_unreserved_prefetch_stays_in_flight():
    cache = anchored_prefetch(REL.with_(prefetch_terminate_revokes_unreserved=False))
    assert cache.check_prefetch_progress("pf") is True
    # [1,2] is on device: the prefetch asked for [3,4] only
    assert not cache.ongoing_prefetch["pf"].operation.terminated and cache.controller.prefetch_tokens_occupied == 2
    assert tree_lines(cache) == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]


def test_an_unreserved_prefetch_that_must_wait_for_completion_is_kept():
    cache = anchored_prefetch(REL, policy="wait_complete")
    assert cache.check_prefetch_progress("pf") is False
    assert "pf" in cache.ongoing_prefetch and list(cache.pools.host_mamba.free_slots) == [2, 3, 4, 5, 6, 7]


# --- split_keeps_child_mamba_lru: _split_node ------------------------------------------------------------------

SPLIT = {"config": {"policy": "write_through", "storage": False},
         "ops": [{"op": "request", "tokens": [1, 2, 3]}, {"op": "request", "tokens": [5, 6]},
                 {"op": "request", "tokens": [1, 2, 4]}, {"op": "events"}, {"op": "evict_mamba", "n": 1}]}


def test_a_split_leaves_the_child_s_mamba_state_where_it_was_in_the_lru():
    """[1,2,4] splits [1,2,3]: [3] keeps its old place behind [5,6], so the Mamba eviction takes [3]'s state."""
    assert run_ops(SPLIT, flags=REL)["tree"] == [
        "1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0",
        "2 4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "1 5,6 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    # before 0.5.17 the split moved [3] to the most recent end, and [5,6] lost its state instead
    assert run_ops(SPLIT, flags=REL.with_(split_keeps_child_mamba_lru=False))["tree"] == \
        run_ops(SPLIT, "main_2026_06")["tree"] == [
        "1 1,2 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
        "2 4 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0", "1 5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
