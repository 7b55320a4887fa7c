"""The stale node stays on screen (issue #13, defects 1 and 3).

Story: in the PR's own traceback shape (``crash_pr``) and in scenario C, node #8 = [1,2] goes stale when the
tombstone cascade under ``write_backup -> evict_host`` detaches the node the insert loop stands on. Later a write
ack pops it from ``ongoing_write_through``, a storage ack releases its host refs, and for a while nothing but its
detached child's parent pointer refers to it; then device eviction re-admits it to a leaf set and host eviction's
cascade walks up to it again and fails to pop it from its old parent: ``parent does not have child key``.
Every frame from the moment it goes stale to the end of the run must draw it, list who holds it, and tell the
same story in the tree, the holder ledger and the explanation.
"""
from __future__ import annotations

import re
from functools import cache
from html import escape

import pytest

from simcache.codepane import code_at
from simcache.render.frames import frame, tree_dot
from simcache.render.ghosts import ghosts_at, highlight_at, holding_at, violation_nodes
from simcache.render.moments import assertion_step
from simcache.simulate import simulate


@cache
def run(scenario: str, preset: str = "pre_fix"):
    return simulate(scenario, preset)


def _drawn(dot: str, nid: int) -> bool:
    return any(line.strip().startswith(f"n{nid} [") for line in dot.splitlines())


def _missing_frames(r, nid: int) -> list[int]:
    t = r.trace
    went = min(e.step for e in t.went_stale if e.node == nid)
    cleaned = [e.step for e in t.cleaned_up if e.node == nid]
    end = len(t.steps) - 1
    if cleaned:  # drawn until the end of the operation that cleaned it up
        c = min(cleaned)
        end = next(o.last_step for o in t.ops if o.first_step <= c <= o.last_step)
    return [s for s in range(went, end + 1) if not _drawn(frame(r, s, legend=False).dot, nid)]


@pytest.mark.parametrize("scenario,preset", [("crash_pr", "pre_fix"), ("scenario_c", "pre_fix"),
                                             ("crash_pr", "described_fix")])
def test_the_stale_node_is_drawn_in_every_frame_until_it_is_cleaned_up_or_the_run_ends(scenario, preset):
    # before issue #13: crash_pr lost #8 in 35 frames (157, 190, 192-221, 259-261), scenario_c in 26
    assert _missing_frames(run(scenario, preset), 8) == []


def test_the_failing_pop_shows_the_node_and_the_cascade_holding_it():
    t = run("crash_pr").trace
    pop = next(s.index for s in t.steps if s.kind == "detach" and s.node == 8 and s.detail["popped"] != 8)
    assert "the slot held none" in t.steps[pop].text
    g = ghosts_at(t, pop)[8]
    assert (g.state, g.badge) == ("stale", "STALE since step 122")
    assert g.holders == ("_evict_host_leaf(): parent", "_iteratively_delete_tombstone_leaf(): p",
                         "_delete_tombstone_leaf(): node (deleting it)", "parent pointer of [7]#11")
    dot = tree_dot(run("crash_pr"), pop)
    assert "stale ghost-stale\"" in dot and "STALE since step 122" in dot
    assert "_delete_tombstone_leaf(): node (deleting it)" in dot.split("h8 [", 1)[1].split("];", 1)[0]


def test_the_cascade_frame_counts_as_a_holder_like_inc_hit_count():
    t = run("crash_pr").trace
    went = t.went_stale[0].step
    # the code pane's frames are the source: every local on the stack that holds #8, outermost first
    assert ghosts_at(t, went)[8].holders == (
        "_insert_helper(): node (resumes after evict_host)", "_inc_hit_count(): node (resumes after evict_host)",
        "write_backup(): node (resumes after evict_host)", "_evict_host_leaf(): parent",
        "_iteratively_delete_tombstone_leaf(): p", "_delete_tombstone_leaf(): node (deleting it)",
        "parent pointer of [9,9]#9")


def test_stretches_without_a_structure_name_the_call_or_the_child_that_still_refers_to_it():
    t = run("crash_pr").trace
    ack = next(s.index for s in t.steps if s.kind == "write_ack" and s.node == 8)
    assert ghosts_at(t, ack)[8].holders == ("writing_check(): node", "parent pointer of [7]#11")
    quiet = next(s.index for s in t.steps if s.kind == "storage_ack" and s.node == 11)
    assert ghosts_at(t, quiet)[8].holders == ("parent pointer of [7]#11",)
    assert ghosts_at(t, quiet)[8].badge == "STALE since step 122"


def test_went_stale_badge_belongs_to_the_moment_later_frames_show_the_state():
    t = run("scenario_c").trace
    went = t.went_stale[0].step
    assert highlight_at(t, went)["went_stale"] == [8] and "WENT STALE" in tree_dot(run("scenario_c"), went)
    later = tree_dot(run("scenario_c"), went + 1)
    assert "WENT STALE" not in later and "STALE since step" in later
    assert highlight_at(t, went + 1)["went_stale"] == []


def test_a_cleaned_up_node_is_drawn_until_its_operation_ends_then_dropped():
    r = run("scenario_c", "described_fix")
    t = r.trace
    ev = t.cleaned_up[0]
    op = next(o for o in t.ops if o.first_step <= ev.step <= o.last_step)
    assert ghosts_at(t, ev.step)[ev.node].badge == "CLEANED UP"
    assert ghosts_at(t, op.last_step)[ev.node].state == "cleaned-up"
    if op.last_step + 1 < len(t.steps):
        assert ev.node not in ghosts_at(t, op.last_step + 1)


def test_at_the_assertion_the_ledger_tree_and_explanation_agree():
    r = run("crash_pr")
    crash = assertion_step(r.trace)
    f = frame(r, crash)
    ledger = f.panels[3]
    assert "no stale node" not in ledger
    assert 'data-node="8"' in ledger and "STALE since step 122" in ledger
    assert "_delete_tombstone_leaf(): node (deleting it)" in ledger
    assert "ASSERTION FIRED HERE" in f.dot and "went stale at step 122" in f.explanation


def _ledger(html: str) -> dict[int, list[str]]:
    """node id -> the holders its ledger table lists."""
    out = {}
    for part in html.split('<p data-node="')[1:]:
        nid = int(part.split('"', 1)[0])
        out[nid] = [re.sub(r"<[^>]+>", "", c.split("</td>", 1)[0]).replace("&#x27;", "'")
                    for c in part.split("<tr><td>")[1:]]
    return out


def _box(dot: str, nid: int) -> tuple[str, list[str]]:
    """The colour and rows of the holder box drawn for node ``nid``."""
    label = dot.split(f"h{nid} [", 1)[1].split("];", 1)[0]
    cells = [r.split(">", 1)[1].split("</TD>", 1)[0] for r in label.split('<TR><TD ALIGN="LEFT"')[1:]]
    return label.split('COLOR="', 1)[1].split('"', 1)[0], [re.sub(r"<[^>]+>", "", c) for c in cells]


def test_the_assertion_frame_never_contradicts_itself():
    """Issue #40 §3: at crash_pr's assertion the code pane, the holder ledger, the tree's boxes and styles, and
    the explanation all read one source (``ghosts.holding_at``, built on the code pane's frames)."""
    r = run("crash_pr")
    t = r.trace
    crash = assertion_step(t)
    f = frame(r, crash)
    held = holding_at(t, crash)
    frames = code_at(t, crash)
    # the code pane: _evict_host_leaf and _iteratively_delete_tombstone_leaf hold #11, and #8 as its parent
    locals_of = {fr.function: dict(fr.locals) for fr in frames}
    assert locals_of["_evict_host_leaf"] == {"node": (11,), "parent": (8,)}
    assert locals_of["_iteratively_delete_tombstone_leaf"] == {"node": (11,), "p": (8,)}
    assert held[11] == ("evict_host(): x", "_evict_host_leaf(): node (deleting it)",
                        "_iteratively_delete_tombstone_leaf(): node (deleting it)")
    assert held[8] == ("_evict_host_leaf(): parent", "_iteratively_delete_tombstone_leaf(): p",
                       "_delete_tombstone_leaf(): node (deleting it)", "parent pointer of [7]#11")
    # every local the code pane shows on a drawn ghost is a holder the ledger and the box list, and only those
    for nid in (8, 11):
        shown = {f"{fr.function}(): {name}" for fr in frames for name, ids in fr.locals if nid in ids}
        assert {h.split(" (", 1)[0] for h in held[nid] if "()" in h} == shown
    ledger = _ledger(f.panels[3])
    assert {n: tuple(v) for n, v in ledger.items() if v} == {8: held[8], 11: held[11]}
    for nid in (8, 11):
        assert _box(f.dot, nid)[1] == list(held[nid])
    # styles: #8 is stale (red box, red border); #11 is being deleted (grey box, grey border), never "held by
    # nothing" while a box points at it
    assert _box(f.dot, 8)[0] == "#dc2626" and "still held by" in f.dot.split("h8 [", 1)[1].split("];", 1)[0]
    assert _box(f.dot, 11)[0] == "#6b7280"
    n11 = next(x for x in f.dot.splitlines() if x.strip().startswith("n11 ["))
    assert 'color="#6b7280"' in n11 and "detached" in n11
    assert "nothing holds it" not in f.panels[3].split('data-node="11"', 1)[1].split("<p", 1)[0]
    # the explanation says who holds #8 now, in the same words
    now = f.explanation.split("At this step it is still held by:", 1)[1]
    for h in held[8]:
        assert escape(h) in now


def test_a_violation_is_marked_on_the_nodes_it_names():
    r = run("crash_pr")
    t = r.trace
    v = t.violations[0]
    assert v.invariant == "backup_continuity" and "node 9 [9,9]" in v.message and "node 8 [1,2]" in v.message
    assert violation_nodes(t, v.step) == {8: ("backup_continuity",), 9: ("backup_continuity",)}
    dot = tree_dot(r, v.step)
    line = next(x for x in dot.splitlines() if x.strip().startswith("n9 ["))
    assert "violation" in line and "VIOLATES backup_continuity" in line
    assert violation_nodes(t, v.step - 1) == {}
