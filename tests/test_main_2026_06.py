"""main_2026_06 (SGLang main 7f67965b, 2026-06-22): followup_fix plus two flags, each shown where it is read.

``prefetch_truncates_to_free_host`` (#26945, ``prefetch_from_storage``): a prefetch whose tokens do not fit on the
host even after ``evict_host`` is cut down to the page-aligned free host KV and issued, if that is at least
``prefetch_threshold``; before, it was declined (status ``f``).

``host_hit_counts_kv_only`` (#27391, ``match_prefix``): ``host_hit_length`` counts only the KV host hit; a host hit
of the Mamba state alone is reported as ``mamba_host_hit_length``. The driver loads back on either field, so a
request still restores the Mamba state; a prefetch's rest (device match + ``host_hit_length`` onwards) now starts
one token earlier, where the older code skipped a token.

Every expected state below is also what SGLang's real code gives on the same operations (checked with the oracle
when these tests were written; the tests do not need it).
"""
from __future__ import annotations

import pytest

from simcache.ops_run import run_ops
from simcache.versions import preset

MAIN = preset("main_2026_06")
IDLE = dict(write_through=0, load_back=0, backup=0, prefetch=0, pending_l3=0, write_acks=0)


def test_main_2026_06_is_followup_fix_plus_the_two_flags():
    assert MAIN == preset("followup_fix").with_(prefetch_truncates_to_free_host=True, host_hit_counts_kv_only=True)


# --- prefetch_truncates_to_free_host: prefetch_from_storage ----------------------------------------------------

def prefetch_doc(host_kv: int, page_size: int = 1, threshold: int = 1) -> dict:
    return {"config": dict(storage=True, host_kv=host_kv, page_size=page_size, prefetch_threshold=threshold),
            "ops": [{"op": "prefetch", "tokens": [1, 2, 3, 4, 5, 6]},
                    {"op": "prefetch_done", "n": 6, "mamba_hit": True}]}


@pytest.mark.parametrize("host_kv, page_size, free_after", [(4, 1, []), (5, 2, [4])])
def test_a_prefetch_larger_than_the_host_is_truncated_to_the_free_host_kv(host_kv, page_size, free_after):
    doc = prefetch_doc(host_kv, page_size)
    before = run_ops(doc, flags=MAIN.with_(prefetch_truncates_to_free_host=False))
    assert (before["status"], before["tree"], before["free"]["host_kv"]) == ("f-", [], list(range(host_kv)))
    after = run_ops(doc, flags=MAIN)
    # 6 tokens asked, 4 page-aligned host slots free: the first 4 tokens are fetched and hung under the root
    assert (after["status"], after["outcome"]) == ("..", "clean")
    assert after["tree"] == ["1 1,2,3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert after["tree_slots"] == ["1 1,2,3,4 v=- h=0,1,2,3 m=- mh=0"]
    assert after["free"]["host_kv"] == free_after and after["inflight"] == IDLE


def test_a_truncated_prefetch_below_the_threshold_is_still_declined():
    doc = prefetch_doc(host_kv=4, threshold=5)
    for flags in (MAIN, MAIN.with_(prefetch_truncates_to_free_host=False)):
        r = run_ops(doc, flags=flags)
        assert (r["status"], r["tree"], r["free"]["host_kv"], r["inflight"]) == ("f-", [], [0, 1, 2, 3], IDLE)


def test_a_prefetch_that_fits_is_the_same_with_or_without_truncation():
    doc = prefetch_doc(host_kv=8)
    with_flag, without = run_ops(doc, flags=MAIN), run_ops(doc, flags=MAIN.with_(prefetch_truncates_to_free_host=False))
    assert with_flag["tree"] == without["tree"] == ["1 1,2,3,4,5,6 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert with_flag["free"] == without["free"]


# --- host_hit_counts_kv_only: match_prefix, and the driver's load-back and prefetch ------------------------------

SHARED = [{"op": "request", "tokens": [1, 2, 3]}, {"op": "events"},
          {"op": "request", "tokens": [1, 2, 3, 4, 5]}, {"op": "events"},
          {"op": "evict_mamba", "n": 1}]  # [1,2,3] keeps its KV on device; its Mamba state is on the host only
CONFIG = dict(storage=True, host_kv=16)


@pytest.mark.parametrize("kv_only, host_hit, mamba_host_hit", [(False, 1, 0), (True, 0, 1)])
def test_a_mamba_only_host_hit_moves_to_its_own_field(kv_only, host_hit, mamba_host_hit):
    r = run_ops({"config": CONFIG, "ops": SHARED}, flags=MAIN.with_(host_hit_counts_kv_only=kv_only))
    assert r["tree"] == ["1 1,2,3 v=1 h=1 m=0 mh=1 fl=0 ml=0 hr=1 hmr=1",
                         "2 4,5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    cache = r["_cache"]
    res = cache.match_prefix([1, 2, 3, 7])
    s123 = cache.root_node.children[cache.child_key((1, 2, 3))]
    assert res.device_indices == [0, 1, 2] and res.last_device_node is s123 and res.last_host_node is s123
    assert (res.host_hit_length, res.mamba_host_hit_length) == (host_hit, mamba_host_hit)


def test_a_request_still_loads_back_a_mamba_only_host_hit():
    """The driver checks every host-hit field, as 7f67965b's scheduler does: same load-back either way."""
    doc = {"config": CONFIG, "ops": SHARED + [{"op": "start", "tokens": [1, 2, 3, 7]}]}
    for kv_only in (False, True):
        r = run_ops(doc, flags=MAIN.with_(host_hit_counts_kv_only=kv_only))
        assert r["status"] == "......"
        assert r["tree"] == ["1 1,2,3 v=1 h=1 m=1 mh=1 fl=2 ml=2 hr=1 hmr=1",  # Mamba state restored, locked
                             "2 4,5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"], kv_only
        assert r["inflight"] == dict(IDLE, load_back=1, backup=2, pending_l3=2)


def test_a_prefetch_after_a_mamba_only_host_hit_no_longer_skips_a_token():
    doc = {"config": CONFIG, "ops": SHARED + [{"op": "prefetch", "tokens": [1, 2, 3, 4, 9]},
                                              {"op": "prefetch_done", "n": 4, "mamba_hit": True}]}
    common = ["1 1,2,3 v=1 h=1 m=0 mh=1 fl=0 ml=0 hr=1 hmr=1", "2 4 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0",
              "3 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=1 hmr=1"]
    old = run_ops(doc, flags=MAIN.with_(host_hit_counts_kv_only=False))
    # the rest started after 1,2,3 plus one "host token" (the Mamba hit): [9] alone, hung under 1,2,3 as if it
    # followed 3 directly
    assert old["tree"] == common + ["2 9 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    new = run_ops(doc, flags=MAIN)
    # the rest is [4, 9]; 4 is already in the tree, so only 9 is new, under 1,2,3 -> 4
    assert new["tree"] == common + ["3 9 v=0 h=1 m=0 mh=1 fl=0 ml=0 hr=0 hmr=0"]
    assert (old["status"], new["status"]) == (".......", ".......")


# --- the preset everywhere presets are named ---------------------------------------------------------------------

def test_export_compare_takes_the_newest_preset(tmp_path, capsys):
    from simcache.cli import main

    out = tmp_path / "b.html"
    assert main(["export", "scenario_b", "--compare", "followup_fix,main_2026_06", "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    html = out.read_text()
    assert "followup_fix" in html and "main_2026_06" in html
