"""lab.py compared whole: the live cache of notebooks 1 and 2 (its settings with and without the host tier, each
operation's status, the calls it made, nested, and the stack into one of them, match_prefix, the facts the check
cells read, and the view, legend and panels as the pieces they are made of)."""
from __future__ import annotations

from html import escape

import pytest

from simcache.errors import ScenarioError
from simcache.lab import Lab
from simcache.render.display import CSS
from simcache.render.display import columns as _columns
from simcache.render.dot import legend_dot, render_svg, snapshot_to_dot
from simcache.render.panels import holders_panel, lru_panel, pools_panel, sets_panel
from simcache.state import tree_text
from simcache.versions import preset


def test_a_labs_settings():
    lab = Lab(device_kv=12)
    assert (lab.config.device_kv, lab.config.policy, lab.config.flags, lab.hide_host, lab.legend) == (
        12, "write_through", preset("pre_fix"), False, False)
    assert lab.driver.cache is lab.cache and lab.recorder.want_snapshots is False
    assert lab.recorder.want_invariants is False and lab.statuses == [] and lab._last == "empty cache"
    device_only = Lab("followup_fix", host=False, legend=True)
    assert (device_only.config.policy, device_only.config.write_through_threshold, device_only.hide_host,
            device_only.legend, device_only.config.flags) == ("write_through_selective", 1 << 20, True, True,
                                                              preset("followup_fix"))
    chosen = Lab(host=False, policy="write_back", write_through_threshold=3)
    assert (chosen.config.policy, chosen.config.write_through_threshold) == ("write_back", 3)


def test_operations_their_statuses_and_their_calls():
    lab = Lab(device_kv=12)
    assert lab.calls() == "(no calls)" and lab.stack_of("insert") is None
    lab.do("request 1 2 3")
    assert lab.statuses == ["."] and lab._last == "request 1 2 3"
    assert lab.tree() == "1 1,2,3 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0" == tree_text(lab.cache)
    assert lab.calls().splitlines() == [
        "match_prefix()", "  _match_prefix_helper()", "  _match_post_processor([]#2)", "inc_lock_ref([]#2)",
        "cache_finished_req()", "  insert()", "    _insert_helper([]#2)", "      _add_new_node([]#2)",
        "      _inc_hit_count([1,2,3]#7)", "        write_backup([1,2,3]#7)",
        "          mamba_backup_transfers([1,2,3]#7)", "          mamba_backup_commit([1,2,3]#7)",
        "          inc_lock_ref([1,2,3]#7)", "  dec_lock_ref([]#2)"]
    assert lab.stack_of("insert") == ("cache_finished_req", "insert")
    assert lab.stack_of("write_backup") == ("cache_finished_req", "insert", "_insert_helper", "_inc_hit_count",
                                            "write_backup")
    assert lab.stack_of("nope") is None
    lab.do("request 1 2 4", "evict 2")
    assert lab.statuses == [".", ".", "."] and lab._last == "request 1 2 4 ; evict 2"
    assert lab.calls().splitlines()[0] == "evict()"  # the last operation's calls only
    lab.do("finish_oldest")
    assert lab.statuses[-1] == "-"  # nothing to finish: the driver turned it away
    assert lab.recorder.ops[-1].status == "-" and [o.index for o in lab.recorder.ops] == [0, 1, 2, 3]
    with pytest.raises(ScenarioError) as e:
        lab.do("fly 1")
    assert str(e.value) == ("Lab.do: unknown operation 'fly'; use one of request, start, finish, finish_oldest, "
                            "evict, evict_mamba, evict_host, events, l3_ack, write_ack, load_ack, prefetch, "
                            "prefetch_done, prefetch_hit")
    assert lab.statuses == [".", ".", ".", "-"]  # a refused operation changes nothing


def test_match_prefix_and_the_facts_the_check_cells_read():
    lab = Lab(device_kv=12)
    lab.do("request 1 2 3", "request 1 2 4", "evict 2")
    assert [tuple(n.key) for n in (lab.node(1, 2), lab.node(1, 2, 3))] == [(1, 2), (3,)]
    assert lab.node(1, 2, 3).parent is lab.node(1, 2) and lab.node(9) is None and lab.node(1) is None
    assert lab.node() is None  # the root is not a node with a path
    assert (lab.lru(), lab.lru("mamba"), lab.lru("host_mamba")) == ([(4,), (1, 2), (3,)], [(4,), (3,)], [(4,), (3,)])
    assert (lab.leaves(), lab.leaves("host")) == ([], [])
    assert (lab.free(), lab.free("host_kv"), lab.free("device_mamba")) == (8, 4, lab.cache.pools.device_mamba
                                                                           .available_size())
    before = len(lab.recorder.ops)
    result = lab.match(1, 2, 4)
    assert type(result).__name__ == "MatchResult" and lab._last == "match_prefix [1, 2, 4]"
    assert len(lab.recorder.ops) == before + 1 and lab.recorder.ops[-1].op == {"op": "match", "tokens": [1, 2, 4]}
    assert lab.calls().splitlines()[0] == "match_prefix()"
    lab.do("evict_host 1")
    assert lab.leaves("host") == sorted(tuple(n.key) for n in lab.cache.evictable_full_host_leaves)


def test_the_view_legend_and_panels_are_their_pieces():
    lab = Lab(device_kv=12, host=False, legend=True)
    lab.do("request 1 2 3")
    before = lab._before
    dot = snapshot_to_dot(lab.snapshot(), before, hide_host=True, page_size=1, legend=True)
    assert lab.view().html == CSS + "<b>after: request 1 2 3</b>" + _columns(
        f'<div class="sc-tree">{render_svg(dot)}</div>', f"<pre style='font-size:13px'>{escape(lab.tree())}</pre>")
    assert lab.legend_view().html == CSS + (f'<div class="sc-tree" style="max-width:420px">'
                                            f"{render_svg(legend_dot(True))}</div>")
    snap = lab.snapshot()
    assert lab.panels().html == CSS + lru_panel(snap) + sets_panel(snap)
    assert lab.panels("pools", "holders").html == CSS + pools_panel(snap) + holders_panel(snap)
    lab.match(1, 2)  # a call's name is escaped in the head: "after: match_prefix [1, 2]"
    assert "<b>after: match_prefix [1, 2]</b>" in lab.view().html


def test_the_leaf_sets_by_tier():
    lab = Lab(device_kv=12)
    lab.do("request 1 2 3", "events", "request 4 5", "events")
    assert (lab.leaves(), lab.leaves("host")) == ([(1, 2, 3), (4, 5)], [])
    lab.do("evict 2")
    assert (lab.leaves(), lab.leaves("device"), lab.leaves("host")) == ([(4, 5)], [(4, 5)], [(1, 2, 3)])


def test_the_calls_and_stacks_are_the_last_operations():
    lab = Lab(device_kv=12)
    lab.do("request 1 2 3")
    lab.do("events")
    assert lab.stack_of("insert") is None and "insert()" not in lab.calls()
    lab.match(1, 2)
    assert lab.recorder.ops[-1].status == "." and lab.stack_of("_match_prefix_helper") == (
        "match_prefix", "_match_prefix_helper")


def test_the_view_marks_what_the_last_call_changed():
    lab = Lab(device_kv=12)
    empty = lab.snapshot()
    lab.do("request 1 2 3", "events")  # two operations: the marks are against the state before both
    mark = snapshot_to_dot(lab.snapshot(), empty, hide_host=False, page_size=1, legend=False)
    assert mark != snapshot_to_dot(lab.snapshot(), None, hide_host=False, page_size=1, legend=False)
    assert f'<div class="sc-tree">{render_svg(mark)}</div>' in lab.view().html
    before = lab.snapshot()
    lab.match(1, 2)  # a split: marked against the state before the match
    split = snapshot_to_dot(lab.snapshot(), before, hide_host=False, page_size=1, legend=False)
    assert split != snapshot_to_dot(lab.snapshot(), None, hide_host=False, page_size=1, legend=False)
    assert f'<div class="sc-tree">{render_svg(split)}</div>' in lab.view().html
    pages = Lab(device_kv=24, page_size=2)
    pages.do("request 1 2 3 4")
    dot = snapshot_to_dot(pages.snapshot(), pages._before, hide_host=False, page_size=2, legend=False)
    assert dot != snapshot_to_dot(pages.snapshot(), pages._before, hide_host=False, page_size=1, legend=False)
    assert f'<div class="sc-tree">{render_svg(dot)}</div>' in pages.view().html


def test_a_live_requests_hold_is_in_the_snapshot():
    from simcache.snapshot import take

    lab = Lab(device_kv=12)
    lab.do("request 1 2 3", "start 1 2 9")
    held = take(lab.cache, list(lab.driver.live.values()))
    assert held != take(lab.cache, []) and lab.snapshot() == held
