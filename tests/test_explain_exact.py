"""The stale-node explanation, word for word, on a small hand-built trace (plain data: all it reads).

Story: one operation, ``main: request [1,2,7]`` (micro-steps 0-11). At step 2 ``evict_host``, called by
``write_backup`` while it worked on node #8 ``[1,2]``, detaches #8: it went stale, held by the resuming
``write_backup``, the insert loop's node, an in-flight write and the LRU list. Afterwards: #8 is re-admitted to
the device leaf set (3), a child is attached under it (4), it is locked (5) and acked (6, 9, 10: routine), code
tries to detach it again (7) and the cache raises in ``_delete_tombstone_leaf`` (11). A second trace has the same
start, then a stale guard cleans #8 up and the run ends cleanly. Written for issue 19: the mutants of
``render/explain.py`` that survived the older tests.
"""
from __future__ import annotations

from html import escape
from types import SimpleNamespace as NS

from simcache.render.explain import _gloss, explain_html, explain_stale, op_text, stale_story

CHAIN = ("cache_finished_req", "insert", "write_backup", "evict_host", "_delete_tombstone_leaf")
HOLDERS = ("write_backup() (resumes after evict_host)", "insert loop's node", "ongoing_write_through",
           "full_lru_list")


def s(i, kind, node=None, text="", stack=(), **detail):
    return NS(index=i, kind=kind, node=node, text=text or f"{kind} {i}", stack=stack, detail=detail)


def crash_trace():
    steps = [s(0, "op"), s(1, "call", 8, stack=CHAIN[:3]), s(2, "detach", 8, "detach [1,2]#8", CHAIN, popped=8),
             s(3, "set_add", 8, "add [1,2]#8"), s(4, "attach", 11, "attach [7]#11 under [1,2]#8", parent=8),
             s(5, "lock", 8, "lock [1,2]#8"), s(6, "write_ack", 8, "write ack for [1,2]#8"),
             s(7, "detach", 8, "detach [1,2]#8 again", popped=None), s(8, "lock", 9, "lock #9"),
             s(9, "storage_ack", 8, "storage ack for [1,2]#8"), s(10, "load_ack", 8, "load ack for [1,2]#8"),
             s(11, "assertion", None, "AssertionError")]
    return NS(steps=steps, ops=[NS(op={"op": "request", "tokens": [1, 2, 7]}, actor="main", first_step=0,
                                   last_step=11)],
              went_stale=[NS(node=8, step=2, key="1,2", holders=HOLDERS)],
              readmitted=[NS(node=8, step=3, holders=("evictable_full_device_leaves",)),
                          NS(node=9, step=8, holders=("x",))],
              cleaned_up=[], crashed=NS(type="AssertionError", message="parent does not have child key, 1",
                                        function="_delete_tombstone_leaf"))


HEAD = ["Node #8 [1,2] went stale at step 2, during operation 0 (main: request [1,2,7]).",
        "The call chain cache_finished_req -> insert -> write_backup -> evict_host -> _delete_tombstone_leaf "
        "detached it from its parent, so the tree no longer reaches it.",
        "This is re-entrancy: write_backup() was working on this very node, needed memory, and called an eviction; "
        "the eviction's tombstone cascade removed the node write_backup() resumes with."]
GLOSSES = ["write_backup(), which will carry on using it when evict_host returns",
           "the insert loop's variable `node`, which the next loop iteration walks from",
           "ongoing_write_through, an in-flight copy whose ack will come back to it",
           "full_lru_list, from which a later eviction can pick it"]
NEXT = [(3, "it is re-admitted to evictable_full_device_leaves although it is not in the tree (add [1,2]#8)"),
        (4, "a new child is attached under it, into a subtree the tree can no longer reach "
            "(attach [7]#11 under [1,2]#8)"),
        (5, "lock [1,2]#8"), (6, "write ack for [1,2]#8"),
        (7, "code tries to detach it again, but its old parent's slot no longer holds it (detach [1,2]#8 again)"),
        (9, "storage ack for [1,2]#8"), (10, "load ack for [1,2]#8"),
        (11, "the simulated cache raises AssertionError: parent does not have child key, 1 in "
             "_delete_tombstone_leaf")]


def test_the_whole_story_of_a_node_that_went_stale_and_crashed_the_run():
    t = crash_trace()
    story = stale_story(t, 8)
    assert (story.node, story.key, story.step, story.op_index, story.op_text, story.chain, story.holders,
            story.reentrant) == (8, "1,2", 2, 0, "main: request [1,2,7]", CHAIN, HOLDERS, "write_backup")
    assert list(story.next_events) == NEXT  # 4 telling + 4 routine: the look-ahead's limit of 8
    assert explain_stale(t, 8) == "\n".join(
        HEAD + ["At that moment it was still held by:"] + [f"  - {g}" for g in GLOSSES] + ["What happens next:"]
        + [f"  - step {st}: {text}" for st, text in NEXT])
    assert op_text(t, 0) == "main: request [1,2,7]"


def test_routine_events_fill_only_the_room_the_telling_ones_leave():
    t = crash_trace()
    t.steps[9:11] = [s(9, "backup", 8, "backup [1,2]#8"), s(10, "cleaned_up", 8, "cleaned [1,2]#8")]
    t.steps.insert(11, s(11, "write_ack", 8, "one routine event too many"))
    t.steps[12].index = 12
    t.ops[0].last_step = 12
    events = stale_story(t, 8).next_events
    assert [st for st, _ in events] == [3, 4, 5, 6, 7, 9, 10, 12]  # step 11 is the ninth: left out
    assert "one routine event too many" not in explain_stale(t, 8)


def test_the_story_at_a_step_is_of_the_latest_time_it_went_stale_by_then():
    t = crash_trace()
    t.went_stale.append(NS(node=8, step=7, key="1,2", holders=("full_lru_list",)))
    assert stale_story(t, 8).step == 7 and stale_story(t, 8, at_step=6).step == 2
    assert stale_story(t, 8, at_step=7).step == 7 and stale_story(t, 8, at_step=1) is None
    assert stale_story(t, 9) is None
    assert explain_stale(t, 9) == "Node #9 never went stale in this run."
    late = stale_story(t, 8)  # the chain of step 7 has no eviction entry: no re-entrancy
    assert late.chain == () and late.reentrant is None


def test_no_reentrancy_without_a_resuming_caller():
    t = crash_trace()
    t.went_stale[0].holders = ("full_lru_list",)
    story = stale_story(t, 8)
    assert story.reentrant is None
    assert "re-entrancy" not in explain_stale(t, 8)


def test_a_cleaned_up_node_and_a_run_that_ends_elsewhere():
    t = crash_trace()
    t.steps = t.steps[:4] + [s(4, "cleaned_up", 8, "cleanup")]
    t.ops[0].last_step = 4
    t.crashed = None
    t.cleaned_up = [NS(node=8, step=4, removed=("full_lru_list", "ongoing_write_through"), reason="stale node in "
                       "evict")]
    assert list(stale_story(t, 8).next_events) == [
        NEXT[0], (4, "a stale guard cleans it up (stale node in evict), removing it from full_lru_list, "
                     "ongoing_write_through")]
    t.cleaned_up[0].removed = ()
    assert stale_story(t, 8).next_events[-1] == (4, "a stale guard cleans it up (stale node in evict), and skips "
                                                    "it (it is in no LRU list or leaf set)")
    quiet = crash_trace()
    quiet.steps = quiet.steps[:3] + [s(3, "lock", 9, "lock #9"), s(4, "assertion", None)]
    quiet.readmitted = []
    assert explain_stale(quiet, 8).endswith(  # the assertion's node is #9 here, not #8: the run's end is told apart
        "  - full_lru_list, from which a later eviction can pick it\nNothing touches it again before the run ends.\n"
        "The run ends at step 4 with AssertionError: parent does not have child key, 1 in _delete_tombstone_leaf.")


def test_glosses():
    assert [_gloss(h) for h in HOLDERS] == GLOSSES
    assert _gloss("ongoing_backup") == "ongoing_backup, an in-flight copy whose ack will come back to it"


def test_the_html_explanation_marks_past_events_and_names_the_run():
    t = crash_trace()
    html = explain_html(t, 5, "pre_fix")
    items = "".join(f'<li data-step="{st}"{" class=sc-past" if st <= 5 else ""}><b>step {st}</b>: '
                    f"{escape(text)}</li>" for st, text in NEXT)
    assert html == (
        '<div class="sc-explain"><h4>Why is this node stale? <span class="sc-of">· pre_fix</span></h4>'
        + "".join(f"<p>{escape(p)}</p>" for p in HEAD)
        + "<p>At that moment it was still held by:</p><ol>"
        + "".join(f"<li>{escape(g)}</li>" for g in GLOSSES) + "</ol>"
        + f"<p>What happens next:</p><ol>{items}</ol></div>")
    assert explain_html(t, 1) == ('<div class="sc-explain"><h4>Why is this node stale?</h4><p>No node is stale yet; '
                                  "the first one goes stale at step 2.</p></div>")
    t.went_stale = []
    assert explain_html(t, 5) == ('<div class="sc-explain"><h4>Why is this node stale?</h4>'
                                  "<p>No node goes stale in this run.</p></div>")


def test_the_html_of_a_quiet_node_says_nothing_touches_it_and_how_the_run_ends():
    t = crash_trace()
    t.steps = t.steps[:3] + [s(3, "lock", 9, "lock #9"), s(4, "assertion", None)]
    t.readmitted = []
    t.went_stale.append(NS(node=9, step=3, key="9", holders=("full_lru_list",)))
    html = explain_html(t, 4)
    assert html.index("<p>Node #9 [9] went stale at step 3") < html.index("<p>Node #8 [1,2]")  # latest first
    assert html.count("<p>Nothing touches it again before the run ends.</p>") == 1  # #8's; #9 is where it raised
    assert html.endswith("<p>Nothing touches it again before the run ends.</p><p>The run ends at step 4 with "
                         "AssertionError: parent does not have child key, 1 in _delete_tombstone_leaf.</p></div>")


def test_only_later_steps_that_tell_something_about_the_node_are_listed():
    t = crash_trace()
    t.steps[1] = s(1, "lock", 8, "lock before it went stale")  # before the detach: never part of what comes next
    t.steps[8:9] = [s(8, "set_add", 8, "routine set add"), s(9, "lru_insert", 8, "routine lru insert"),
                    s(10, "attach", 8, "attach [1,2]#8 under #3", parent=3),  # it is the child here, not the parent
                    s(11, "attach", 12, "attach #12 under #3", parent=3),
                    s(12, "detach", 8, "a real detach of it", popped=8)]
    t.steps = t.steps[:13] + [s(13, "assertion", None)]
    t.ops[0].last_step = 13
    t.readmitted = t.readmitted[:1]
    texts = [text for _, text in stale_story(t, 8).next_events]
    assert [st for st, _ in stale_story(t, 8).next_events] == [3, 4, 5, 6, 7, 13]
    assert not any(x in " ".join(texts) for x in ("before it went stale", "routine", "#12", "under #3", "real detach"))


def test_past_the_limit_only_telling_events_are_listed():
    t = crash_trace()
    t.steps = t.steps[:3] + [s(3 + i, "attach", 20 + i, f"attach #{20 + i}", parent=8) for i in range(8)] + [
        s(11, "lock", 8, "a routine lock")]
    t.readmitted, t.crashed = [], None
    assert [st for st, _ in stale_story(t, 8).next_events] == list(range(3, 11))  # 8 telling, no room for the lock


def test_the_run_end_is_told_when_the_nodes_own_events_do_not_reach_it():
    t = crash_trace()
    t.steps = t.steps[:3] + [s(3, "lock", 8, "lock [1,2]#8"), s(4, "lock", 9, "lock #9"), s(5, "assertion", None)]
    t.readmitted = []
    assert explain_stale(t, 8).endswith(
        "What happens next:\n  - step 3: lock [1,2]#8\nThe run ends at step 5 with AssertionError: parent does not "
        "have child key, 1 in _delete_tombstone_leaf.")


def test_the_explanation_at_a_step_tells_the_latest_time_by_then():
    t = crash_trace()
    t.went_stale.append(NS(node=8, step=7, key="1,2", holders=("full_lru_list",)))
    assert explain_stale(t, 8, at_step=5).startswith("Node #8 [1,2] went stale at step 2,")
    assert explain_stale(t, 8).startswith("Node #8 [1,2] went stale at step 7,")
    assert "<p>Node #8 [1,2] went stale at step 2," in explain_html(t, 5)
    assert "<p>Node #8 [1,2] went stale at step 7," in explain_html(t, 7)
    assert explain_html(t, 2).startswith('<div class="sc-explain"><h4>Why is this node stale?</h4><p>Node #8 [1,2] '
                                         "went stale at step 2,")  # at the very step it went stale


def test_no_reentrancy_when_no_eviction_detached_it():
    t = crash_trace()
    # a resuming holder, but no eviction on the stack
    t.steps[2].stack = ("cache_finished_req", "insert", "_split_node")
    story = stale_story(t, 8)
    assert story.reentrant is None and "re-entrancy" not in explain_stale(t, 8)
