"""transcript.py compared whole on runs the gallery does not give: a crash with no call stack and no damage, a
clean run with no damage, a clean-up that removed nothing, every status letter in the key, several moments under
one operation, and the damage lines' order and omissions. Whole transcripts are syrupy snapshots
(``tests/__snapshots__/test_core_exact_transcript.ambr``: ``--snapshot-update``, then read the diff)."""
from __future__ import annotations

from types import SimpleNamespace as NS

from simcache.transcript import EVENT_KEY, damage_lines, transcript


def test_the_event_key():
    assert EVENT_KEY == ("! a node went stale or a detached node was re-admitted", "+ a stale guard cleaned a node up",
                         "~ the first invariant violation")


def test_damage_lines_double_frees_first_then_each_pool_that_leaked():
    assert damage_lines([("device_kv", (3,)), ("host_kv", [1, 2])], {"host_kv": [4], "device_kv": [], "x": (5, 6)}) \
        == ["double free device_kv[3]", "double free host_kv[1, 2]", "leaked host_kv[4]", "leaked x[5, 6]"]
    assert damage_lines([], {"device_kv": []}) == []


def run_of(ops, *, went_stale=(), readmitted=(), cleaned_up=(), violations=(), steps=(), crash=None,
           double_frees=(), leaked=None):
    accounting = {p: {"leaked": s} for p, s in (leaked or {"device_kv": []}).items()}
    trace = NS(went_stale=list(went_stale), readmitted=list(readmitted), cleaned_up=list(cleaned_up),
               violations=list(violations), ops=list(ops), steps=list(steps))
    return NS(trace=trace, scenario=NS(name="s"), preset="p", schedule="A B",
              result={"double_frees": [{"pool": p, "slots": s} for p, s in double_frees], "accounting": accounting},
              crash=crash)


def op(index, status, actor, **o):
    return NS(index=index, status=status, actor=actor, op=o)


def test_a_clean_run_without_damage_says_so_and_keys_only_the_letters_used(snapshot):
    run = run_of([op(0, ".", "A", op="evict", n=2), op(10, "-", None, op="events")])
    text = transcript(run)
    assert text == snapshot
    assert text.endswith("outcome: no assertion; no damage\nkey: . applied; - nothing to do")


def test_a_run_with_no_operations_has_an_empty_key():
    assert transcript(run_of([])) == "s under p  (schedule: A B)\noutcome: no assertion; no damage\nkey: "


def test_every_status_letter_and_every_mark_in_the_key_in_order(snapshot):
    letters = [".", "x", "-", "e", "u", "r", "f"]
    steps = [NS(op=i) for i in range(7)]
    run = run_of([op(i, s, "A", op="events") for i, s in enumerate(letters)], steps=steps,
                 went_stale=[NS(step=1, node=4, key="1,2", holders=["h1", "h2"])],
                 readmitted=[NS(step=1, node=4, key="1,2", holders=["lru", "ongoing_backup"])],
                 cleaned_up=[NS(step=2, node=4, key="1,2", removed=[])],
                 violations=[NS(op=1, invariant="inv", message="m", step=1), NS(op=2, invariant="j", message="n",
                                                                               step=2)],
                 crash=NS(raised="AssertionError: boom  (raised in f)", stack=[], outcome="AssertionError: boom"))
    lines = transcript(run).splitlines()
    assert lines == snapshot
    assert lines[2:7] == ["  1 x A: events", "   ! node 4 [1,2] went stale (step 1); still held by h1, h2",
                          "   ! detached node 4 [1,2] re-admitted to lru, ongoing_backup (step 1)",
                          "   ~ first invariant violation: inv: m (step 1)", "  2 - A: events"]
    assert lines[-1].startswith("key: . applied; x raised (the simulated cache's assertion); - nothing to do; e ")


def test_a_crash_with_damage_and_a_stack_nests_each_frame(snapshot):
    run = run_of([op(0, "x", "R", op="request", tokens=[1, 2])],
                 crash=NS(raised="AssertionError: a  (raised in g)", stack=["f", "g"], outcome="AssertionError: a"),
                 double_frees=[("device_kv", [0])], leaked={"host_kv": [1, 2], "device_kv": []})
    lines = transcript(run).splitlines()
    assert lines == snapshot
    assert lines[4:8] == ["traceback, outermost call first:", "  f()", "    g()", "      AssertionError: a"]


def test_a_mark_is_keyed_only_when_its_line_is_there():
    # only a moment's own line is keyed: no "!" or "~" key without such a line
    run = run_of([op(0, ".", "A", op="events")], cleaned_up=[NS(step=0, node=1, key="9", removed=["a", "b"])],
                 steps=[NS(op=0)], leaked={"host_kv": [3], "device_kv": [5, 6]})
    assert transcript(run).splitlines()[2:] == [
        "   + stale guard cleaned up node 1 [9] (step 0): removed from a, b",
        "outcome: no assertion; damage: leaked host_kv[3]; leaked device_kv[5, 6]",
        "key: . applied; + a stale guard cleaned a node up"]
