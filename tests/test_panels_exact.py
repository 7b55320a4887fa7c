"""The panels beside the tree, as exact HTML, on small hand-built snapshots, violations and micro-steps.

Story: a root #1, an attached node #2 ``1,2`` and a detached node #5 ``13`` (a stale reference, so its chip is red
and says why); an unknown id prints as a bare ``#id`` chip. The LRU panel lists each list MRU first (an empty one
says so); the leaf-set panel adds only the in-flight maps that hold something; a pool of at most 128 slots is a
strip of cells (free, used, leaked, double-freed), a larger one a progress bar; the holder ledger names each
holder's kind; the invariant panel turns an invariant red from its first violation on; the call stack indents
each frame and, at an assertion, lists the frames the cache raised from. Written for issue 19: the mutants of
``render/panels.py`` that survived the older tests.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from simcache.invariants import INVARIANTS
from simcache.render.ghosts import Ghost
from simcache.render.panels import (
    chip,
    holder_kind,
    holders_panel,
    invariants_panel,
    lru_panel,
    pools_panel,
    sets_panel,
    stack_panel,
    state_panels,
)
from simcache.snapshot import NodeView, PoolView, Snapshot


def nv(id, key, parent, attached=True):
    return NodeView(id, key, parent, (), attached, None, None, None, None, 0, 0, 0, 0, 0, 0.0)


NODES = {1: nv(1, (), None), 2: nv(2, (1, 2), 1), 5: nv(5, (13,), 1, attached=False),
         6: nv(6, tuple(range(1, 9)), 1)}
STALE_CHIP = '<span class="sc-chip sc-stale" title="detached from the tree: a stale reference">13 #5</span>'


def snap(lrus=None, sets=None, ongoing=None, pools=None, counters=None, holders=None, stale=()) -> Snapshot:
    return Snapshot(1, NODES, (2, 6), sets or {}, lrus or {}, ongoing or {}, pools or {}, counters or {},
                    holders or {}, stale)


def test_chips_name_the_node_and_mark_a_stale_one():
    s = snap()
    assert chip(s, 1) == '<span class="sc-chip">root #1</span>'
    assert chip(s, 2) == '<span class="sc-chip">1,2 #2</span>'
    assert chip(s, 6) == '<span class="sc-chip">1,2,3,…,8 (8) #6</span>'
    assert chip(s, 5) == STALE_CHIP
    assert chip(s, 42) == '<span class="sc-chip">#42</span>'


def test_lru_and_set_panels():
    s = snap(lrus={"full_lru_list": (2, 5), "mamba_lru_list": ()},
             sets={"evictable_full_device_leaves": (5,)}, ongoing={"ongoing_write_through": (2,), "ongoing_load": ()})
    assert lru_panel(s) == (
        '<div class="sc-panel sc-lru"><h4>LRU lists (most recent first)</h4>'
        '<div class="sc-row"><span class="sc-name">full_lru_list</span><span class="sc-chip">1,2 #2</span> '
        f"{STALE_CHIP}</div>"
        '<div class="sc-row"><span class="sc-name">mamba_lru_list</span><span class="sc-empty">empty</span></div>'
        "</div>")
    assert sets_panel(s) == (
        '<div class="sc-panel sc-sets"><h4>Evictable leaf sets</h4>'
        f'<div class="sc-row"><span class="sc-name">evictable_full_device_leaves</span>{STALE_CHIP}</div>'
        '<div class="sc-row"><span class="sc-name">in flight: ongoing_write_through</span>'
        '<span class="sc-chip">1,2 #2</span></div></div>')


def test_a_small_pool_is_a_strip_of_slots_and_a_large_one_a_bar():
    pools = {"device_kv": PoolView("device_kv", 5, free=(0, 4), used=(1, 2, 3), leaked=(3,), double_freed=(4,)),
             "host_kv": PoolView("host_kv", 129, free=tuple(range(100)), used=tuple(range(100, 129)), leaked=(),
                                 double_freed=())}
    html = pools_panel(snap(pools=pools, counters={"evictable_size": 3, "protected_size": 0}))
    assert html == (
        '<div class="sc-panel sc-pools"><h4>Pools</h4>'
        '<div class="sc-row"><span class="sc-name">device_kv</span><span class="sc-slots">'
        '<i class="sc-slot free"></i><i class="sc-slot used"></i><i class="sc-slot used"></i>'
        '<i class="sc-slot leaked"></i><i class="sc-slot double"></i></span> used 3 / 5, free 2, '
        '<span class="sc-bad">leaked [3]</span>, <span class="sc-bad">double-freed [4]</span></div>'
        '<div class="sc-row"><span class="sc-name">host_kv</span><progress max="129" value="29"></progress> '
        "used 29 / 129, free 100</div>"
        '<div class="sc-row"><span class="sc-name">size counters</span>'
        "<code>evictable_size=3, protected_size=0</code></div></div>")
    edge = {"p": PoolView("p", 128, free=(), used=(0,), leaked=(), double_freed=())}
    assert pools_panel(snap(pools=edge)).count('<i class="sc-slot') == 128  # 128 slots: still a strip


@pytest.mark.parametrize("name, kind", [
    ("insert loop's node", "the insert loop's current node"),
    ("parent pointer of #9", "a detached child's parent link (the cascade and eviction walk up through it)"),
    ("_delete_tombstone_leaf() (deleting it)", "the call deleting or cleaning it up (it still holds the node)"),
    ("_stale_guard() (cleaning it up)", "the call deleting or cleaning it up (it still holds the node)"),
    ("evict() (this step)", "the call working on it at this step"),
    ("evict() (raised here)", "the call working on it at this step"),
    ("write_backup() resumes", "a simulated call that will keep using it"),
    ("_inc_hit_count()", "a simulated call frame"),
    ("ongoing_write_through", "an in-flight copy (its ack will touch it)"),
    ("prefetch anchor", "an in-flight copy (its ack will touch it)"),
    ("evictable_full_device_leaves", "a cache structure (eviction can pick it)"),
])
def test_each_holder_has_its_kind(name, kind):
    assert holder_kind(name) == kind


ROW = "<tr><td><code>{}</code></td><td>{}</td></tr>"
HEAD = '<table class="sc-table"><tr><th>holder</th><th>kind</th></tr>'


def test_the_holder_ledger_of_the_stale_nodes_or_the_ones_named():
    s = snap(holders={5: ("full_lru_list", "write_backup() resumes"), 2: ("full_lru_list",)}, stale=(5,))
    table5 = HEAD + ROW.format("full_lru_list", "a cache structure (eviction can pick it)") + ROW.format(
        "write_backup() resumes", "a simulated call that will keep using it") + "</table>"
    assert holders_panel(s) == (f'<div class="sc-panel sc-holders"><h4>Holder ledger</h4><p>{STALE_CHIP} is '
                                f"detached, still held by:</p>{table5}</div>")
    named = holders_panel(s, node_ids=(2,))
    assert named == ('<div class="sc-panel sc-holders"><h4>Holder ledger</h4><p><span class="sc-chip">1,2 #2</span>'
                     " is detached, still held by:</p>"
                     + HEAD + ROW.format("full_lru_list", "a cache structure (eviction can pick it)")
                     + "</table></div>")
    empty = '<div class="sc-panel sc-holders"><h4>Holder ledger</h4><span class="sc-empty">no stale node</span></div>'
    assert holders_panel(snap()) == empty == holders_panel(s, node_ids=())
    assert holders_panel(s, node_ids=(42,)).endswith("<p><span class=\"sc-chip\">#42</span> is detached, still held "
                                                     "by:</p>" + HEAD + "</table></div>")


def test_the_ghost_ledger_lists_held_ghosts_first_then_unheld_then_deleted():
    ghosts = {7: Ghost(7, "deleted", 4, ("_delete_tombstone_leaf() (deleting it)",), "deleted at step 4"),
              6: Ghost(6, "unheld", 3, (), "detached (step 3), held by nothing now"),
              5: Ghost(5, "stale", 2, ("full_lru_list",), "STALE since step 2"),
              2: Ghost(2, "stale", 2, ("ongoing_load",), "STALE since step 2")}
    html = holders_panel(snap(), ghosts=ghosts)
    assert html == (
        '<div class="sc-panel sc-holders"><h4>Holder ledger</h4>'
        '<p data-node="2"><span class="sc-chip">1,2 #2</span> is detached from the tree (<b>STALE since step 2</b>), '
        "still held by:</p>" + HEAD + ROW.format("ongoing_load", "an in-flight copy (its ack will touch it)")
        + "</table>"
        f'<p data-node="5">{STALE_CHIP} is detached from the tree (<b>STALE since step 2</b>), still held by:</p>'
        + HEAD + ROW.format("full_lru_list", "a cache structure (eviction can pick it)") + "</table>"
        '<p data-node="6"><span class="sc-chip">1,2,3,…,8 (8) #6</span> is detached from the tree (<b>detached '
        '(step 3), held by nothing now</b>).</p><span class="sc-empty">nothing holds it at this step</span>'
        '<p data-node="7"><span class="sc-chip">#7</span> is detached from the tree (<b>deleted at step 4</b>), '
        "held by (while it is deleted):</p>" + HEAD + ROW.format("_delete_tombstone_leaf() (deleting it)",
                                                 "the call deleting or cleaning it up (it still holds the node)")
        + "</table></div>")
    assert holders_panel(snap(), ghosts={}) == holders_panel(snap())  # no ghosts: the stale nodes' ledger


def violation(step, name, op, message):
    return SimpleNamespace(step=step, invariant=name, op=op, message=message)


def test_the_invariant_panel_turns_an_invariant_red_from_its_first_violation():
    trace = SimpleNamespace(violations=[violation(4, "backup_continuity", 2, "#8 <not backed up>"),
                                        violation(6, "backup_continuity", 3, "again"),
                                        violation(6, "no_leak", 3, "host [2, 3]")])

    def row(name, state):
        if state is None:
            return f'<tr class="sc-ok" data-invariant="{name}"><td>{name}</td><td>holds</td></tr>'
        return f'<tr class="sc-red" data-invariant="{name}"><td>{name}</td><td>{state}</td></tr>'

    assert invariants_panel(trace, 3) == (
        '<div class="sc-panel sc-invariants"><h4>Invariants</h4><table class="sc-table">'
        + "".join(row(n, None) for n in INVARIANTS) + "</table></div>")
    first = {"backup_continuity": "violated from step 4 (op 2)"}
    assert invariants_panel(trace, 4, "pre_fix") == (
        '<div class="sc-panel sc-invariants"><h4>Invariants <span class="sc-of">· pre_fix</span></h4>'
        '<p class="sc-bad">First violation: step 4, backup_continuity: #8 &lt;not backed up&gt;</p>'
        '<table class="sc-table">' + "".join(row(n, first.get(n)) for n in INVARIANTS) + "</table></div>")
    first["no_leak"] = "violated from step 6 (op 3)"
    later = invariants_panel(trace, 9)
    assert later == ('<div class="sc-panel sc-invariants"><h4>Invariants</h4>'
                     '<p class="sc-bad">First violation: step 4, backup_continuity: #8 &lt;not backed up&gt;</p>'
                     '<table class="sc-table">' + "".join(row(n, first.get(n)) for n in INVARIANTS) + "</table></div>")


def step(kind="detach", stack=("insert", "write_backup"), text="detach [1,2]#8", op=5, detail=None):
    return SimpleNamespace(kind=kind, stack=stack, text=text, op=op, detail=detail or {})


def test_the_call_stack_indents_each_frame_and_ends_with_the_micro_step():
    assert stack_panel(step(), "main: request [1,2,7]", "pre_fix") == (
        '<div class="sc-panel sc-callstack"><h4>Call stack <span class="sc-of">· pre_fix</span></h4>'
        "<div><b>op 5</b> main: request [1,2,7]</div>"
        '<ul class="sc-stack"><li style="padding-left:0.0em">insert()</li>'
        '<li style="padding-left:0.9em">write_backup()</li>'
        '<li class="sc-here" style="padding-left:1.8em"><span class="sc-kind">detach</span> detach [1,2]#8</li>'
        "</ul></div>")
    assert stack_panel(step(stack=(), text="a <b>")) == (
        '<div class="sc-panel sc-callstack"><h4>Call stack</h4><ul class="sc-stack">'
        '<li class="sc-here" style="padding-left:0.0em"><span class="sc-kind">detach</span> a &lt;b&gt;</li>'
        "</ul></div>")


def test_no_panel_reads_removed_from_nothing():
    """#40 §6: a clean-up that found the node in no structure is said as a sentence."""
    cleanup = step(kind="cleaned_up", stack=(), text="stale guard: cleaned up [1,2]#8 (stale node in f); removed from "
                   "nothing", detail={"reason": "stale node in f", "removed": []})
    html = stack_panel(cleanup)
    assert "removed from nothing" not in html
    assert ("A stale guard cleans up #8 [1,2] (stale node in f): it is in no LRU list or leaf set, so the guard "
            "only skips it.") in html


def test_at_the_assertion_the_stack_lists_the_frames_the_cache_raised_from():
    raised = step(kind="assertion", stack=(), text="AssertionError", detail={"stack": ("evict", "_delete")})
    html = stack_panel(raised)
    assert '<li style="padding-left:0.0em">evict()</li><li style="padding-left:0.9em">_delete()</li>' in html
    assert '<li class="sc-here" style="padding-left:1.8em"><span class="sc-kind">assertion</span>' in html
    # a stack still on record wins; another kind of step never borrows the detail's frames
    assert "evict()" not in stack_panel(step(kind="assertion", stack=("insert",), detail={"stack": ("evict",)}))
    assert "evict()" not in stack_panel(step(kind="detach", stack=(), detail={"stack": ("evict",)}))


def test_state_panels_are_the_four_in_order():
    s = snap(lrus={"full_lru_list": (2,)}, sets={"evictable_full_device_leaves": ()},
             pools={"p": PoolView("p", 2, (0,), (1,), (), ())}, holders={5: ("full_lru_list",)}, stale=(5,))
    assert state_panels(s) == lru_panel(s) + sets_panel(s) + pools_panel(s) + holders_panel(s)


def test_panels_join_several_rows_and_ledgers_without_separators():
    """Several sets, in-flight maps, stale nodes and holders: each row or ledger follows the last directly."""
    s = snap(sets={"evictable_full_device_leaves": (2,), "evictable_full_host_leaves": (5,)},
             ongoing={"ongoing_write_through": (2,), "ongoing_load": (5,)},
             holders={5: ("full_lru_list",), 2: ("ongoing_load",)}, stale=(5, 2))
    assert sets_panel(s) == (
        '<div class="sc-panel sc-sets"><h4>Evictable leaf sets</h4>'
        '<div class="sc-row"><span class="sc-name">evictable_full_device_leaves</span><span class="sc-chip">1,2 #2'
        '</span></div><div class="sc-row"><span class="sc-name">evictable_full_host_leaves</span>'
        f'{STALE_CHIP}</div>'
        '<div class="sc-row"><span class="sc-name">in flight: ongoing_write_through</span><span class="sc-chip">'
        '1,2 #2</span></div><div class="sc-row"><span class="sc-name">in flight: ongoing_load</span>'
        f"{STALE_CHIP}</div></div>")
    assert holders_panel(s) == (
        f'<div class="sc-panel sc-holders"><h4>Holder ledger</h4><p>{STALE_CHIP} is detached, still held by:</p>'
        + HEAD + ROW.format("full_lru_list", "a cache structure (eviction can pick it)") + "</table>"
        '<p><span class="sc-chip">1,2 #2</span> is detached, still held by:</p>'
        + HEAD + ROW.format("ongoing_load", "an in-flight copy (its ack will touch it)") + "</table></div>")
    two = {5: Ghost(5, "stale", 2, ("full_lru_list", "ongoing_load"), "STALE since step 2")}
    assert holders_panel(s, ghosts=two) == (
        '<div class="sc-panel sc-holders"><h4>Holder ledger</h4><p data-node="5">'
        f"{STALE_CHIP} is detached from the tree (<b>STALE since step 2</b>), still held by:</p>"
        + HEAD + ROW.format("full_lru_list", "a cache structure (eviction can pick it)")
        + ROW.format("ongoing_load", "an in-flight copy (its ack will touch it)") + "</table></div>")


def test_an_assertion_with_no_frames_on_record_shows_only_itself():
    html = stack_panel(step(kind="assertion", stack=(), text="AssertionError"))
    assert html == ('<div class="sc-panel sc-callstack"><h4>Call stack</h4><ul class="sc-stack">'
                    '<li class="sc-here" style="padding-left:0.0em"><span class="sc-kind">assertion</span> '
                    "AssertionError</li></ul></div>")
