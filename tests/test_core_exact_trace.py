"""The trace's lazy parts, exactly: which replays rebuild which snapshots, what the timeline keeps, and how the lazy
sequences compare. Each test names the replays it expects, with their arguments, and compares every rebuilt
snapshot with the one a single front-to-back replay gives."""
from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
from pathlib import Path

import pytest
from helpers import make_cache

from simcache import trace
from simcache.cache import HiMambaRadixCache
from simcache.driver import Driver
from simcache.invariants import failing
from simcache.operations import RAISED
from simcache.ops_run import build_config, execute, run_ops
from simcache.scenario import from_doc, load
from simcache.simulate import resolve_flags, simulate
from simcache.state import tree_lines
from simcache.trace import Recorder, hash_writer, ledger, memory, recorder, timeline, wording


def traced(name: str = "crash_pr", every: int = 2, **kw) -> Recorder:
    """``name``'s run under pre_fix with a checkpoint every ``every`` operations. crash_pr's 12 operations span
    micro-steps 0-12, 13-34, 35-54, 55-81, 82-94, 95-144, 145-175, 176-184, 185-192, 193-201, 202-222, 223-262."""
    sc = load(name)
    rec = Recorder(checkpoint_every=every, **kw)
    execute(sc.config, sc.linearize(sc.parse_schedule()), resolve_flags(sc, "pre_fix", None)[1], recorder=rec)
    return rec


def spy_replays(rec: Recorder) -> list:
    """Record each ``_replay(upto, want)`` call, then run it."""
    calls, real = [], rec._replay

    def replay(upto, want, date=False):
        calls.append((upto, sorted(want)))
        return real(upto, want, date)

    rec._replay = replay
    return calls


def count_replayers(monkeypatch) -> list:
    """The checkpoint (operation) each replayer made from now on starts at."""
    starts = []

    class Counted(trace._Replayer):
        def __init__(self, main, cp, want, date_op):
            starts.append(cp.op)
            super().__init__(main, cp, want, date_op)

    monkeypatch.setattr(recorder, "_Replayer", Counted)
    return starts


def test_the_run_the_tests_below_read():
    rec = traced()
    assert rec.replayable and len(rec.steps) == 263
    assert rec._eager == [] and rec._pending == {}  # a replayable run snapshots and dates only by replaying
    assert [c.op for c in rec.checkpoints] == [0, 2, 4, 6, 8, 10]
    assert [(o.first_step, o.last_step) for o in rec.ops] == [
        (0, 12), (13, 34), (35, 54), (55, 81), (82, 94), (95, 144), (145, 175), (176, 184), (185, 192), (193, 201),
        (202, 222), (223, 262)]


def test_prefetch_rebuilds_the_steps_and_their_operations_first_steps_in_one_replay_per_checkpoint_stretch():
    rec = traced()
    whole = list(rec.snapshots)  # one front-to-back replay
    tl = rec.snapshots
    calls = spy_replays(rec)
    tl.prefetch([260, 41, 20, 40, 100, 150])
    # grouped by the checkpoint before each step's operation (0, 2, 4, 6 and 10), each replayed through its last
    assert calls == [(1, [13, 20]), (2, [35, 40, 41]), (5, [95, 100]), (6, [145, 150]), (11, [223, 260])]
    assert list(tl._lru) == [13, 20, 35, 40, 41, 95, 100, 145, 150, 223, 260]
    assert all(tl._lru[k] == whole[k] for k in tl._lru)
    tl.prefetch([20, 13, 41])  # all kept: no replay
    assert len(calls) == 5
    tl.prefetch([41, 42])  # only the one missing
    assert calls[5:] == [(2, [42])] and 42 in tl._lru and tl._lru[42] == whole[42]
    assert tl[100] is tl._lru[100] and len(calls) == 6  # a kept snapshot is served without a replay


def test_prefetch_keeps_everything_it_rebuilt_even_past_the_frame_cache(monkeypatch):
    rec = traced()
    monkeypatch.setattr(timeline, "FRAME_CACHE", 4)
    rec.snapshots.prefetch(range(40, 50))
    assert list(rec.snapshots._lru) == [35, *range(40, 50)]


def test_prefetch_on_a_recorder_driven_by_hand_does_nothing():
    cache = make_cache("write_through")
    drv = Driver(cache)
    rec = Recorder().attach(cache, drv)
    drv.finish(drv.start([1, 2]))
    calls = spy_replays(rec)
    assert not rec.replayable and len(rec.snapshots) == len(rec.steps) > 0
    rec.snapshots.prefetch(range(len(rec.steps)))
    assert calls == [] and len(rec.snapshots._lru) == 0
    assert list(rec.snapshots) == rec._eager and rec.snapshots[0] is rec._eager[0]


@pytest.mark.parametrize("every", [1, 2, 5, 32])
def test_operation_ends_are_each_operations_state_whatever_the_checkpoints(every):
    rec = traced(every=every)
    ends = {p: rec.snapshots[o.last_step].tree_text for p, o in enumerate(rec.ops)}
    got = list(rec.iter_op_ends(3, 9, lambda c: tuple(tree_lines(c))))
    assert [p for p, _ in got] == list(range(3, 9))
    assert all(text == ends[p] for p, text in got)
    assert [p for p, _ in rec.iter_op_ends(10, 99, lambda c: None)] == [10, 11]
    assert list(rec.iter_op_ends(5, 5, lambda c: None)) == []


def by_hand(name: str, version: str = "pre_fix", **kw) -> Recorder:
    """``name``'s run driven by hand, as a notebook drives a cache: a recorder that is not replayable snapshots and
    checks the invariants eagerly, after each micro-step."""
    sc = load(name)
    cfg, flags = sc.config, resolve_flags(sc, version, None)[1]
    cache = HiMambaRadixCache(build_config(cfg, flags, "cpu"))
    drv = Driver(cache, retry_mamba_alloc=cfg["driver"] == "scheduler")
    rec = Recorder(**kw).attach(cache, drv)
    for i, (actor, op) in enumerate(sc.linearize(sc.parse_schedule())):
        rec.begin_op(i, op, actor)
        code = drv.step(op, i)
        if code == RAISED:
            rec.crash(cache.crashed)
        rec.end_op(i, code)
        if code == RAISED:
            break
    return rec


def test_scenario_d_driven_by_hand_dates_each_violation_at_the_micro_step_it_began():
    rec = by_hand("scenario_d")
    assert not rec.replayable and len(rec._eager) == len(rec.steps) == 32
    assert [v.as_dict() for v in rec.violations] == [
        dict(step=5, op=0, invariant="tier_monotonicity",
             message="node 7 [1,2] is evicted but its child node 8 [3] is on device"),
        dict(step=8, op=0, invariant="leaf_sets",
             message="node 7 [1,2] is in evictable_full_host_leaves but is not an unreferenced host leaf"),
        dict(step=15, op=1, invariant="attachment", message="node 8 [3] is detached but still held by "
             "evictable_full_device_leaves, full_lru_list, mamba_lru_list"),
        dict(step=15, op=1, invariant="lru_membership", message="full_lru_list holds extra node(s) [8]"),
        dict(step=15, op=1, invariant="size_counters",
             message="full counters evictable=1 protected=0, recount 0 and 0"),
        dict(step=16, op=1, invariant="no_leak",
             message="device_kv slot(s) [0] are allocated but nobody refers to them")]
    # node 8 [3] is attached under the evicted [1,2] at step 5; step 8 puts [1,2] in the host leaf set
    assert [s.kind for s in rec.steps[3:9]] == ["alloc", "alloc", "attach", "lru_insert", "lru_insert", "set_add"]
    assert rec._eager[-1].tree_text == tuple(tree_lines(rec.cache))


@pytest.mark.parametrize("name", ["crash_pr", "scenario_b", "scenario_d", "nonleaf_prefetch"])
def test_a_run_driven_by_hand_gives_the_replayed_runs_steps_snapshots_and_violations(name):
    hand, replayed = by_hand(name), traced(name, every=32)
    assert list(hand.steps) == list(replayed.steps)
    assert hand._eager == list(replayed.snapshots)
    assert hand.violations == replayed.violations and hand.violations


def test_a_hand_driven_recorder_without_invariants_or_snapshots_does_neither():
    quiet = by_hand("scenario_d", invariants=False)
    assert quiet.violations == [] and quiet._pending == {} and len(quiet._eager) == 32
    blind = by_hand("scenario_d", snapshots=False)
    assert blind._eager == [] and blind.violations == by_hand("scenario_d").violations


def test_operation_ends_replay_one_checkpoint_stretch_at_a_time(monkeypatch):
    rec = traced(every=2)
    starts = count_replayers(monkeypatch)
    assert [p for p, _ in rec.iter_op_ends(3, 9, lambda c: None)] == [3, 4, 5, 6, 7, 8]
    assert starts == [2, 4, 6, 8]


def test_crash_pr_s_detach_steps_name_the_parent_the_slot_and_what_the_slot_held():
    rec = traced(every=32)
    got = [(i, s.text, s.detail) for i, s in enumerate(rec.steps) if s.kind == "detach"]
    assert got == [
        (92, "detach [3,4]#7 from [1,2]#8 slot 3", dict(parent=8, slot="3", popped=7)),
        (116, "detach [9,9]#9 from [1,2]#8 slot 9", dict(parent=8, slot="9", popped=9)),
        (122, "detach [1,2]#8 from []#2 slot 1", dict(parent=2, slot="1", popped=8)),
        (248, "detach [5,6]#10 from []#2 slot 5", dict(parent=2, slot="5", popped=10)),
        (255, "detach [7]#11 from [1,2]#8 slot 7", dict(parent=8, slot="7", popped=11)),
        # the stale node, detached a second time: its parent's slot is already empty
        (261, "detach [1,2]#8 from []#2 slot 1 (the slot held none)", dict(parent=2, slot="1", popped=None))]


def test_steps_index_slice_iterate_and_compare_like_a_list():
    rec = traced(every=32)
    steps, n = rec.steps, 263
    whole = list(steps)
    assert len(whole) == n and [s.index for s in whole] == list(range(n))
    assert steps[-1] == whole[-1] and steps[5:9] == whole[5:9] and list(reversed(steps)) == whole[::-1]
    assert steps == whole and steps == tuple(whole) and steps == traced(every=2).steps
    assert not steps == whole[:-1] and not steps == [*whole[:-1], whole[0]]
    assert steps.__eq__(5) is NotImplemented
    with pytest.raises(IndexError, match=r"^micro-step 263 is outside this run's 0\.\.262$"):
        steps[n]
    with pytest.raises(IndexError, match=r"^micro-step -1 is outside this run's 0\.\.262$"):
        steps[-n - 1]
    assert repr(steps) == "<Steps: 263 micro-steps, worded on demand>"


def test_a_timeline_compares_like_a_list_of_its_snapshots():
    rec = traced(every=2)
    tl, whole = rec.snapshots, list(rec.snapshots)
    assert tl == whole and tl == tuple(whole) and tl == traced(every=5).snapshots
    assert not tl == whole[:-1] and not tl == [*whole[:-1], whole[0]]
    assert tl.__eq__("x") is NotImplemented
    assert repr(tl) == "<Timeline of 263 snapshots, rebuilt on demand>"


def test_a_replayer_is_attached_only_when_it_is_made():
    rec = traced(every=2)
    r = rec._replay(1, {20})
    assert sorted(r.got) == [20] and r.got[20] == list(rec.snapshots)[20]
    with pytest.raises(trace.InternalError, match="^a replayer is attached when it is made$"):
        r.attach(r.cache, r.driver)


def test_call_stacks_are_interned_and_the_table_starts_again_past_65536_stacks():
    ledger._STACKS.clear()
    a = trace._intern(("evict", "_evict_device_leaf"))
    assert trace._intern(("evict", "_evict_device_leaf")) is a and trace._intern(("evict",)) == ("evict",)
    for i in range((1 << 16) - 2):
        trace._intern((str(i),))
    trace._intern(("y",))
    assert len(ledger._STACKS) == (1 << 16) + 1  # the table holds up to 65,537 stacks
    trace._intern(("x",))  # over the bound: the next new stack starts it again
    assert len(ledger._STACKS) == 1 and trace._intern(("x",)) == ("x",)
    ledger._STACKS.clear()


def test_a_timeline_miss_replays_the_step_and_its_operations_start_and_walking_forward_the_stretch_ahead():
    rec = traced(every=2)  # checkpoints before operations 0, 2, 4, 6, 8, 10
    whole = list(rec.snapshots)
    tl = rec.snapshots
    calls = spy_replays(rec)
    for step in (20, 40, 41, 186, 150, 210, 2):
        assert tl[step] == whole[step]
    assert calls == [
        (1, [13, 20]),  # the first miss: the step and its operation's first step
        (3, [35, 40, 55, 81]),  # one operation on: also the starts and ends of the stretch's later operations
        (2, [35, 41]),  # the same operation again: no walk
        (8, [185, 186]),  # 6 operations on: past 2 checkpoint stretches, no walk
        (6, [145, 150]),  # backwards: no walk
        (11, [202, 210, 223, 262]),  # 4 operations on (2 stretches): a walk, through the run's last operation
        (0, [0, 2])]
    assert tl[40] is tl[40] and tl[55] == whole[55] and tl[262] == whole[262] and len(calls) == 7


def test_a_timeline_slice_replays_once_front_to_back_and_a_stride_picks_steps():
    rec = traced(every=2)
    whole = list(rec.snapshots)
    tl = rec.snapshots
    calls = spy_replays(rec)
    assert tl[30:60] == whole[30:60]
    # one replay per checkpoint stretch the slice crosses (operations 1, then 2 and 3), nothing kept
    assert calls == [(1, list(range(30, 35))), (3, list(range(35, 60)))] and len(tl._lru) == 0
    assert tl[200:260:20] == [whole[200], whole[220], whole[240]]
    assert tl[-3:] == whole[-3:] and tl[262:999] == [whole[262]] and tl[5:5] == []


def test_a_hand_driven_timeline_serves_its_eager_snapshots():
    rec = by_hand("scenario_d")
    tl = rec.snapshots
    calls = spy_replays(rec)
    assert tl[3:9] == rec._eager[3:9] and tl[3:9:2] == rec._eager[3:9:2] and tl[-1] is rec._eager[-1]
    assert calls == []


def test_a_timeline_index_outside_the_run_is_one_sentence():
    tl = traced(every=2).snapshots
    with pytest.raises(IndexError, match=r"^step 263 is outside this run's 0\.\.262$"):
        tl[263]
    with pytest.raises(IndexError, match=r"^step -1 is outside this run's 0\.\.262$"):
        tl[-264]


def test_the_timeline_keeps_the_most_recently_rebuilt_frame_cache_snapshots():
    tl = traced(every=2).snapshots
    tl._keep({k: f"s{k}" for k in range(600)})
    assert list(tl._lru) == list(range(600 - timeline.FRAME_CACHE, 600)) and timeline.FRAME_CACHE == 512
    tl._keep({3: "again"})
    assert list(tl._lru) == [*range(89, 600), 3] and tl._lru[3] == "again"
    tl._keep({k: "wide" for k in range(1000, 1700)}, room=700)
    assert list(tl._lru) == list(range(1000, 1700))


def test_a_walk_wider_than_the_frame_cache_still_serves_the_step_asked_for():
    """With checkpoints far apart, a forward walk can want more snapshots than the frame cache keeps; the step asked
    for (among the earliest wanted) is then rebuilt once more on its own."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from bench_cache import workload

    doc = workload(240, seed=3, device_kv=96, host_kv=96)
    doc["config"].update(device_mamba=16, host_mamba=32)
    rec = Recorder(checkpoint_every=1000, checkpoint_steps=10**6)
    run_ops(doc, "followup_fix", trace=True, recorder=rec)
    assert [c.op for c in rec.checkpoints] == [0] and len(rec.ops) > 260
    first = {s: snap for s, snap in zip(range(40), rec.iter_snapshots(0, 40), strict=True)}
    tl = rec.snapshots
    calls = spy_replays(rec)
    i, j = rec.ops[1].first_step + 1, rec.ops[2].first_step + 1
    assert tl[i] == first[i] and tl[j] == first[j]
    walk = {rec.ops[2].first_step, j} | {s for q in range(3, len(rec.ops))
                                         for s in (rec.ops[q].first_step, rec.ops[q].last_step)}
    assert calls == [(1, [rec.ops[1].first_step, i]), (len(rec.ops) - 1, sorted(walk)), (2, [j])]
    assert len(tl._lru) == timeline.FRAME_CACHE and j not in tl._lru
    wanted = set(range(1000, 1700)) | {rec.ops[trace.op_position(rec, s)].first_step for s in range(1000, 1700)}
    assert len(wanted & tl._lru.keys()) > 0  # some were kept by the walk
    tl.prefetch(range(1000, 1700))  # a prefetch keeps all it wants, the ones kept already too, past the cache
    assert tl._lru.keys() == wanted and len(wanted) > timeline.FRAME_CACHE


def test_iter_snapshots_runs_from_the_start_to_the_end_unless_told_one_stretch_at_a_time():
    rec = traced(every=2)
    whole = list(rec.snapshots)
    calls = spy_replays(rec)
    assert list(rec.iter_snapshots()) == whole and len(calls) == 6  # one replay per checkpoint stretch
    del calls[:]
    assert list(rec.iter_snapshots(30, 55)) == whole[30:55]  # 54 ends operation 2: nothing of operation 3
    assert calls == [(1, list(range(30, 35))), (2, list(range(35, 55)))]
    del calls[:]
    assert list(rec.iter_snapshots(40, 40)) == [] and list(rec.iter_snapshots(41, 40)) == [] and calls == []


def test_operation_ends_from_the_last_stretches_replay_each_stretch_once(monkeypatch):
    rec = traced(every=2)
    starts = count_replayers(monkeypatch)
    assert [p for p, _ in rec.iter_op_ends(7, 12, lambda c: None)] == [7, 8, 9, 10, 11]
    assert starts == [6, 8, 10]


def test_a_recorder_without_invariants_never_checks_them(monkeypatch):
    checked = []
    real = trace.check_all
    monkeypatch.setattr(ledger, "check_all", lambda *a, **k: (checked.append(1), real(*a, **k))[1])
    quiet = by_hand("crash_pr", invariants=False)
    assert checked == [] and quiet.violations == [] and len(quiet._eager) == 263
    by_hand("crash_pr")
    assert len(checked) > 200


def reference_hash(rec: Recorder) -> str:
    whole = json.dumps([s.as_dict() for s in rec.steps], sort_keys=True, default=str)
    return hashlib.sha256(whole.encode()).hexdigest()


def test_the_trace_hash_is_the_whole_json_text_s_across_chunks_and_for_a_detach_of_another_node():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from bench_trace import doc_for

    rec = simulate(from_doc(dict(name="w", **doc_for(120))), "pre_fix", snapshots=False).trace
    assert len(rec.steps) > 4096  # two chunks of the streamed hash
    assert rec.sha256() == reference_hash(rec)
    # a detach whose parent's slot held another node, and one whose slot held none (by hand)
    cache = make_cache()
    drv = Driver(cache)
    for tokens in ([1, 2], [1, 2, 3]):
        drv.finish(drv.start(tokens))
    rec = Recorder(snapshots=False, invariants=False).attach(cache, drv)
    a = cache.root_node.children[1]
    cache._detach(cache.root_node, a)
    cache._detach(cache.root_node, a)
    cache._detach(a, cache._new_node((3, 9)))
    assert [s.text for s in rec.steps if s.kind == "detach"][1:] == [
        "detach [1,2]#7 from []#2 slot 1 (the slot held none)", "detach [3,9]#9 from [1,2]#7 slot 3 (the slot held "
        "[3]#8)"]
    assert rec.sha256() == reference_hash(rec)


def test_an_operation_that_ends_at_its_own_first_step_ends_there():
    """A first operation with nothing to do (no live request to finish) has one micro-step, step 0: it ends at 0,
    not at the run's end."""
    sc = load("crash_pr")
    rec = Recorder(checkpoint_every=1)
    execute(sc.config, [("A", {"op": "finish_oldest"}), ("A", {"op": "request", "tokens": [1, 2], "rid": "R"})],
            resolve_flags(sc, "pre_fix", None)[1], recorder=rec)
    assert [(o.first_step, o.last_step) for o in rec.ops] == [(0, 0), (1, len(rec.steps) - 1)]
    assert trace._op_end(rec, 0) == 0
    assert list(rec.iter_snapshots(0, 1)) == [rec.snapshots[0]]


def test_a_cleanup_names_every_holder_it_removed_the_node_from():
    node = make_cache().root_node
    text, detail = trace._describe("cleaned_up", dict(node=node, reason="stale node in x",
                                                      removed=["full_lru_list", "mamba_lru_list"], warning="w"))
    assert text == "stale guard: cleaned up []#2 (stale node in x); removed from full_lru_list, mamba_lru_list"
    assert detail == dict(reason="stale node in x", removed=["full_lru_list", "mamba_lru_list"], warning="w")
    assert trace._describe("something_new", {}) == ("something_new", {})


@pytest.mark.parametrize("name,version", [("crash_pr", "pre_fix"), ("crash_pr", "described_fix"),
                                          ("scenario_b", "described_fix")])
def test_the_trace_hash_of_a_crash_and_of_a_cleanup_is_the_whole_json_text_s(name, version):
    """Steps worded when they happened (the assertion, with its crash record; a stale guard's cleanup, with its
    holders and warning) are spelled by the JSON encoder: the same bytes as ``json.dumps``."""
    rec = simulate(name, version, snapshots=False).trace
    assert {s.kind for s in rec.steps} & {"assertion", "cleaned_up"}
    assert rec.sha256() == reference_hash(rec)


# --- the hash writer's own spellings: the frequent kinds never reach the generic wording --------------------------
FAST_KINDS = {"call", "alloc", "free", "double_free", "alloc_fail", "lock", "lru_insert", "lru_remove", "set_add",
              "set_discard", "attach", "detach", "backup", "write_ack", "load_ack", "storage_ack"}


def written_generically(e: tuple) -> bool:
    """Whether the hash writer sends log entry ``e`` to ``_words``: a step worded when it happened, a kind without a
    fast spelling, or an operation other than a plain request (``{"op", "tokens"}`` and maybe a str ``"rid"``,
    plain int tokens in a list, a str actor or none): a request's tokens, thousands on a long prompt, are written
    straight from the entry."""
    actor, kind, p = e[1], e[2], e[5]
    if p.__class__ is trace._Worded:
        return True
    if kind == "op":
        return not (type(p) is dict and set(p) in ({"op", "tokens"}, {"op", "rid", "tokens"})
                    and type(p["op"]) is str and type(p.get("rid", "")) is str and type(p["tokens"]) is list
                    and all(type(t) is int for t in p["tokens"]) and (actor is None or type(actor) is str))
    return kind not in FAST_KINDS


def worded_by_the_generic_path(monkeypatch, rec: Recorder) -> list:
    """The log entries the hash writer sends to ``_words`` (the generic wording) while hashing ``rec``."""
    expected = reference_hash(rec)  # (wording every step: before the spy)
    sent, real = [], trace._words
    monkeypatch.setattr(hash_writer, "_words", lambda e: (sent.append(e), real(e))[1])
    assert rec.sha256() == expected
    monkeypatch.setattr(hash_writer, "_words", real)
    return sent


def test_the_hash_writer_spells_every_frequent_kind_itself_and_only_the_rest_generically(monkeypatch):
    """The writer's fast paths are why hashing a 2,000-request run is affordable: every step of a frequent kind with
    plain fields, and every request with plain tokens, is written straight from its log entry. Only the other
    operations, splits, host references and steps worded when they happened (the assertion) go through ``_words``.
    Each frequent kind occurs in these two runs, and a detach whose slot held another node is added by hand."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from bench_trace import doc_for

    runs = [simulate(from_doc(dict(name="w", **doc_for(120))), "pre_fix", snapshots=False).trace,
            simulate("crash_pr", "pre_fix", snapshots=False).trace]
    cache = make_cache()
    drv = Driver(cache)
    drv.finish(drv.start([1, 2]))
    runs.append(Recorder(snapshots=False, invariants=False).attach(cache, drv))
    a = cache.root_node.children[1]
    cache._detach(cache.root_node, a)
    cache._detach(cache.root_node, a)
    kinds, requests = set(), []
    for rec in runs:
        slow = [e for e in rec._log if written_generically(e)]
        assert worded_by_the_generic_path(monkeypatch, rec) == slow
        kinds |= {e[2] for e in rec._log}
        requests += [e for e in rec._log if e[2] == "op" and e[5]["op"] == "request"]
    assert requests and not any(map(written_generically, requests))
    assert FAST_KINDS <= kinds
    assert {e[2] for rec in runs for e in rec._log if e[2] not in FAST_KINDS} == {"op", "split", "host_ref",
                                                                                   "assertion"}


def test_the_hash_writers_memo_spells_each_repeated_text_once(monkeypatch):
    memo = trace._JsonMemo()
    encoded = []
    real = memo.enc
    memo.enc = lambda o: (encoded.append(o), real(o))[1]
    assert [memo.value("R1"), memo.value("R1"), memo.value(None), memo.value(None)] == ['"R1"', '"R1"', "null",
                                                                                         "null"]
    assert memo.value(["unhashable"]) == '["unhashable"]'
    shared = trace._call_detail("evict_host")
    assert [memo.detail(shared), memo.detail(shared), memo.detail({}), memo.detail({"b": 1, "a": "\u00e9"})] == [
        '{"function": "evict_host"}', '{"function": "evict_host"}', "{}", '{"a": "\\u00e9", "b": 1}']
    assert encoded == ["R1", None, ["unhashable"], {"function": "evict_host"}, {"b": 1, "a": "\u00e9"}]
    keyed = []
    real_key_text = trace._key_text
    monkeypatch.setattr(hash_writer, "_key_text", lambda k: (keyed.append(k), real_key_text(k))[1])
    key, same_value = (1, 2, 3), tuple([1, 2, 3])
    assert [memo.key(key), memo.key(key), memo.key(same_value), memo.key("a\u00e9\"b")] == [
        "1,2,3", "1,2,3", "1,2,3", 'a\\u00e9\\"b']
    assert keyed == [key, same_value] and keyed[1] is same_value  # by identity: an equal tuple is spelled again
    assert [memo.name("full\u00e9"), memo.name("full\u00e9")] == ["full\\u00e9"] * 2 and list(memo.names) == [
        "full\u00e9"]


def test_a_keys_text_is_spelled_once_per_key_object(monkeypatch):
    spelled = []
    real = trace.format_key
    monkeypatch.setattr(wording, "format_key", lambda k: (spelled.append(k), real(k))[1])
    trace._KEY_TEXT.clear()
    key, equal = (4, 5), tuple([4, 5])
    assert [trace._key_text(key), trace._key_text(key), trace._key_text(equal), trace._key_text([6])] == [
        "4,5", "4,5", "4,5", "6"]
    assert spelled == [key, equal, [6]] and spelled[1] is equal
    assert [k for k, _ in trace._KEY_TEXT.values()] == [key, equal]  # a list is spelled but not kept


def test_the_insert_loops_node_detached_under_it_is_stale_though_no_structure_holds_it():
    """The race's shape: ``_insert_helper``'s loop node is detached while the loop still means to use it. Only the
    loop holds it (no list, set or parent), so only the recorder's outer frames make it stale in the snapshot."""
    cache = make_cache()
    rec = Recorder(invariants=False).attach(cache, None)
    node = cache._new_node((1, 2))
    cache._attach(cache.root_node, node)
    other = cache._new_node((5,))
    rec.enter("_insert_helper", (other,))
    rec.event("current", node=node)
    cache._detach(cache.root_node, node)
    assert [s.text for s in rec.steps] == ["attach [1,2]#7 under []#2 at slot 1", "_insert_helper([5]#8)",
                                           "detach [1,2]#7 from []#2 slot 1"]
    snap = rec.snapshots[-1]
    assert (snap.stale, snap.holders, snap.current) == ((7,), {8: ("_insert_helper()",), 7: ("insert loop's node",)},
                                                        7)
    assert rec.outer_frame_ids() == frozenset({7}) and rec.frame_holders() == {8: ("_insert_helper()",)}
    assert [(e.step, e.node, e.holders, e.cause) for e in rec.went_stale] == [
        (2, 7, ("_insert_helper's loop node",), "detached by _insert_helper")]
    assert [s.stale for s in rec.snapshots] == [(), (), (7,)]


def test_an_operation_still_running_ends_at_the_last_step_so_far():
    rec = Recorder(snapshots=False, invariants=False)
    rec.begin_op(0, {"op": "events"})
    rec._log.append(rec._log[-1])
    assert trace._op_end(rec, 0) == 1
    rec.end_op(0, ".")
    rec.begin_op(1, {"op": "events"})
    assert [trace._op_end(rec, p) for p in (0, 1)] == [1, 2]
    rec._log.append(rec._log[-1])
    assert [trace._op_end(rec, p) for p in (0, 1)] == [1, 3]


def test_a_request_live_across_boundaries_is_no_leak_when_driven_by_hand():
    """A hand-driven recorder checks the boundaries with the one-pass check, handing it the live requests: their
    slots are theirs, not leaked."""
    cache = make_cache()
    drv = Driver(cache)
    rec = Recorder().attach(cache, drv)
    for i, op in enumerate([{"op": "start", "tokens": [1, 2, 3]}, {"op": "events"}, {"op": "finish"}]):
        rec.begin_op(i, op)
        rec.end_op(i, drv.step(op, i))
    assert [o.status for o in rec.ops] == [".", ".", "."] and len(drv.live) == 0 and rec.violations == []
    assert len(rec.snapshots) == len(rec.steps) > 20
    assert {v.leaked for s in rec.snapshots for v in s.pools.values()} == {()}  # the request's slots are its own
    assert rec.snapshots[rec.ops[1].first_step].pools["device_kv"].used == (0, 1, 2)


# --- the recorder's own bookkeeping: what it keeps per step, how often it checks, where it checkpoints ------------
def test_the_log_holds_each_named_nodes_key_tuple_not_its_text():
    """A step that names a node keeps the node's key object (worded only on demand): spelling a long key into every
    step that names it is what once made a 2,000-request trace outgrow memory."""
    rec = simulate("crash_pr", "pre_fix", snapshots=False).trace
    calls = [e for e in rec._log if e[2] == "call" and e[4] is not None]
    listed = [e for e in rec._log if e[2] in ("lru_insert", "lru_remove", "set_add", "set_discard")]
    assert len(calls) > 50 and len(listed) > 50
    assert {type(e[5]) for e in calls} == {tuple} and {type(e[5][0]) for e in listed} == {tuple}
    refs = [e[5][0] for e in rec._log if e[2] in ("attach", "detach", "lock", "backup", "write_ack", "split")]
    assert len(refs) == 27 and {(type(r[0]), type(r[1])) for r in refs} == {(int, tuple)}


def test_a_call_from_a_known_stack_looks_no_stack_up(monkeypatch):
    class Counted(dict):
        gets = 0

        def get(self, *args):
            Counted.gets += 1
            return super().get(*args)

    monkeypatch.setattr(ledger, "_STACKS", Counted({(): ()}))
    monkeypatch.setattr(ledger, "_NEXT_STACK", {})
    rec = Recorder(snapshots=False, invariants=False)
    for _ in range(3):
        rec.enter("a", ())
        rec.enter("b", ())
        rec.exit("b")
        rec.exit("a")
    assert Counted.gets == 2  # the first round only
    assert [e[3] for e in rec._log] == [("a",), ("a", "b")] * 3
    assert rec._log[0][3] is rec._log[4][3] and rec._log[1][3] is rec._log[5][3] and rec._stack == ()


def test_the_memo_of_stack_transitions_starts_again_past_65536_entries(monkeypatch):
    monkeypatch.setattr(ledger, "_STACKS", {(): ()})
    monkeypatch.setattr(ledger, "_NEXT_STACK", {})
    rec = Recorder(snapshots=False, invariants=False)
    for i in range(65537):
        rec.enter(f"f{i}", ())
        rec.exit(f"f{i}")
    assert len(ledger._NEXT_STACK) == 65537
    rec.enter("one more", ())
    assert list(ledger._NEXT_STACK.values()) == [((), ("one more",))]


def test_memory_is_checked_after_the_first_operation_and_every_64th(monkeypatch):
    checked, made = [], []
    monkeypatch.setattr(memory, "rss_mb", lambda: checked.append(len(made[0].ops) if made else 0) or 1.0)
    rec = Recorder(snapshots=False, invariants=False)
    made.append(rec)
    assert checked == [0]  # the run's start: what it adds is measured from here
    for i in range(130):
        rec.begin_op(i, {"op": "events"})
        rec.end_op(i, ".")
    assert checked == [0, 1, 64, 128]


def test_memory_is_checked_inside_an_operation_that_moves_many_tokens_or_slots(monkeypatch):
    checked, made = [], []
    monkeypatch.setattr(memory, "rss_mb", lambda: checked.append(len(made[0]._log) if made else 0) or 1.0)
    rec = Recorder(snapshots=False, invariants=False)
    made.append(rec)
    rec.begin_op(0, {"op": "request", "tokens": [1] * (memory.BIG - 1)})
    rec.enter("match_prefix", ())
    rec._pool_event("device_kv", "alloc", tuple(range(memory.BIG - 1)))
    assert checked == [0]  # below BIG: checked at the end of the operation only
    rec.end_op(0, ".")
    assert checked == [0, 3]  # (the log's length at each check)
    rec.begin_op(1, {"op": "request", "tokens": [1] * memory.BIG})  # at its start, then at each call inside it
    rec.enter("match_prefix", ())
    rec.exit("match_prefix")
    rec._pool_event("device_kv", "alloc", tuple(range(memory.BIG)))
    rec.end_op(1, ".")
    rec.begin_op(2, {"op": "events"})
    rec.enter("check_hicache_events", ())
    rec._pool_event("host_kv", "free", tuple(range(memory.BIG)))  # a big free inside a small operation
    rec.enter("write_backup", ())
    rec.end_op(2, ".")
    assert checked == [0, 3, 4, 4, 6, 6, 9, 9, 10]


@pytest.mark.parametrize("kw, ops", [
    (dict(snapshots=False, checkpoint_every=1), [0, 4, 8]),  # invariants only: DATING_SPREAD (4) times further apart
    (dict(snapshots=False, checkpoint_every=3), [0]),
    (dict(checkpoint_every=5), [0, 5, 10]),
    # crash_pr's operations start at steps 0, 13, 35, 55, 82, 95, 145, 176, 185, 193, 202, 223: a checkpoint once
    # 13 or more steps have passed since the last one
    (dict(checkpoint_every=100, checkpoint_steps=13), [0, 1, 2, 3, 4, 5, 6, 7, 9, 11]),
])
def test_checkpoints_are_placed_by_operations_and_by_steps_exactly(kw, ops):
    kw = dict(kw)  # (the parameter's dict is shared by every run of the test)
    rec = traced(every=kw.pop("checkpoint_every"), **kw)
    assert [c.op for c in rec.checkpoints] == ops
    assert [c.step for c in rec.checkpoints] == [rec.ops[p].first_step for p in ops]


def test_a_detached_node_put_back_into_an_lru_list_is_readmitted():
    cache = make_cache()
    rec = Recorder(invariants=False).attach(cache, None)
    node = cache._new_node((1, 2))
    cache._attach(cache.root_node, node)
    cache._detach(cache.root_node, node)
    cache.full_lru_list.insert_mru(node)
    assert [(e.step, e.node, e.key, e.holders, e.cause) for e in rec.readmitted] == [
        (2, 7, "1,2", ("full_lru_list",), "detached node re-admitted to full_lru_list")]
    assert [s.text for s in rec.steps][-1] == "insert [1,2]#7 into full_lru_list"


def _statm_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads Linux's /proc")
def test_resident_memory_is_what_the_process_holds_now_not_its_peak():
    peak_maker = bytearray(300 * 2**20)  # raise the peak 300 MB above what is held once it is freed
    peak_maker[::4096] = b"x" * len(peak_maker[::4096])
    del peak_maker
    now, peak = trace.rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert abs(now - _statm_mb()) < 20 and peak - now > 250


def test_without_proc_resident_memory_is_the_peak_and_without_either_it_is_unknown(monkeypatch):
    real_open = open

    def no_proc(path, *a, **k):
        if str(path).startswith("/proc"):
            raise OSError("no /proc here")
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", no_proc)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert trace.rss_mb() == peak
    monkeypatch.setattr(resource, "getrusage", lambda who: (_ for _ in ()).throw(OSError("none")))
    assert trace.rss_mb() is None


@pytest.mark.parametrize("ops, used, message", [
    (0, 400.0, None),  # 100 MB over the 300 MB the process held at the start: at the limit, still within it
    (0, 400.5, "this run outgrew the memory limit of 100 MB (it added 100 MB to the 300 MB the process held when it "
               "started) at operation 0; its set-up and operation 0 alone need more: raise the limit with "
               "--memory-limit MB, or make the scenario's pools or its first operation smaller"),
    (1, 1540.0, "this run outgrew the memory limit of 100 MB (it added 1,240 MB to the 300 MB the process held when it "
                "started) at operation 1; narrow it to fewer operations with --ops A:B (e.g. --ops 0:1), or raise the "
                "limit with --memory-limit MB"),
    (101, 540.0, "this run outgrew the memory limit of 100 MB (it added 240 MB to the 300 MB the process held when it "
                 "started) at operation 101; narrow it to fewer operations with --ops A:B (e.g. --ops 50:101), or "
                 "raise the limit with --memory-limit MB"),
])
def test_the_memory_limit_sentence_names_the_operation_and_a_window_to_try(monkeypatch, ops, used, message):
    monkeypatch.setattr(memory, "rss_mb", lambda: 300.0)  # what the process holds when the run starts
    rec = Recorder(snapshots=False, invariants=False, memory_limit_mb=100)
    monkeypatch.setattr(memory, "rss_mb", lambda: used)
    if ops:
        rec.begin_op(ops, {"op": "events"})
    if message is None:
        assert rec._check_memory() is None
        return
    with pytest.raises(trace.TraceLimitError) as e:
        rec._check_memory()
    assert str(e.value) == message


def test_a_detach_outside_any_call_is_the_drivers_and_its_whole_subtree_becomes_known():
    cache = make_cache()
    rec = Recorder(invariants=False).attach(cache, None)
    a = cache._new_node((1, 2))
    cache._attach(cache.root_node, a)
    cache.full_lru_list.insert_mru(a)
    b = cache._new_node((3,))  # linked by hand: no step ever names it
    b.parent, a.children[3] = a, b
    cache._detach(cache.root_node, a)
    assert [(e.node, e.holders, e.cause) for e in rec.went_stale] == [(7, ("full_lru_list",), "detached by driver")]
    assert 8 in rec._known and rec._detached == {7, 8}
    snap = rec.snapshots[-1]
    assert (snap.stale, snap.nodes[8].attached, snap.nodes[8].key) == ((7,), False, (3,))


def test_a_violation_the_named_check_does_not_word_is_a_simcache_bug(monkeypatch):
    monkeypatch.setattr(ledger, "check_all", lambda cache, live, names=None: {n: None for n in names or ()})
    with pytest.raises(trace.InternalError) as e:
        by_hand("scenario_d", snapshots=False)
    assert str(e.value) == "invariant tier_monotonicity: the one-pass check and the named check disagree"


# --- the boundary check a replayable recorder keeps up to date from its events ----------------------------------
def _replayable_busy() -> tuple:
    cache = make_cache()
    drv = Driver(cache)
    rec = Recorder(snapshots=False)
    rec.replayable = True  # as ops_run.execute sets it: the boundary check is kept from the events
    rec.attach(cache, drv)
    for tokens in ([1, 2], [1, 2, 3, 4], [5, 6]):
        drv.finish(drv.start(tokens))
    assert rec._bc.failing([]) == failing(cache, []) == set()
    return cache, drv, rec


def _replace_a_child(cache, rec):
    imposter = cache._new_node((1, 9))
    imposter.value = [30, 31]
    cache._attach(cache.root_node, imposter)  # takes [1, 2]'s slot: [1, 2] and its subtree leave the tree


def _detach_another(cache, rec):
    cache._detach(cache.root_node, cache._new_node((1, 7)))  # the slot held [1, 2]: it is popped instead


def _built_then_recorded() -> tuple:
    """A cache built before the recorder listened: its nodes are tracked only once an event names them."""
    cache = make_cache()
    drv = Driver(cache)
    for tokens in ([1, 2], [1, 2, 3, 4], [5, 6]):
        drv.finish(drv.start(tokens))
    drv.step({"op": "events"}, 3)  # the write acks: [3, 4] and [5, 6] become evictable device leaves
    rec = Recorder(snapshots=False)
    rec.replayable = True
    rec.attach(cache, drv)
    assert rec._bc.failing([]) == failing(cache, []) == set()
    assert [n.key for n in cache.evictable_full_device_leaves] == [(3, 4), (5, 6)]
    return cache, drv, rec


def _write_a_node_a_call_named(cache, rec):
    node = cache.root_node.children[5]
    rec.enter("probe", (node,))
    rec.exit("probe")
    node.value = None  # written after the call named it, by no event


def _write_a_leaf_a_set_named_at_the_last_boundary(cache, rec):
    node = cache.root_node.children[5]
    leaves = cache.evictable_full_device_leaves
    leaves.discard(node)
    leaves.add(node)
    assert rec._bc.failing([]) == set()  # a boundary
    node.value = None  # written in the next operation, by no event


def _split_then_drop_the_suffix(cache, rec):
    drv = rec.driver
    drv.finish(drv.start([5, 8]))  # splits [5, 6] into [5] and [6]
    prefix = cache.root_node.children[5]
    prefix.children.clear()  # the suffix [6] vanishes from its parent's dict, by no event


@pytest.mark.parametrize("damage, bad", [
    (_replace_a_child, {"attachment", "lru_membership", "no_leak", "size_counters"}),
    (_detach_another, {"attachment", "lru_membership", "no_leak", "size_counters"}),
    (_write_a_node_a_call_named, {"leaf_sets", "lru_membership", "no_leak", "size_counters"}),
    (_write_a_leaf_a_set_named_at_the_last_boundary, {"leaf_sets", "lru_membership", "no_leak", "size_counters"}),
    (_split_then_drop_the_suffix, {"attachment", "lru_membership", "no_leak", "size_counters"}),
])
def test_the_boundary_check_kept_from_events_sees_what_the_whole_check_sees(damage, bad):
    """Every node an event names (a call's argument, an attach's replaced child, a detach's popped node, a split's
    two halves) is re-examined at the next boundary, so the incremental check fails exactly the invariants the
    whole one-pass check fails."""
    cache, drv, rec = (_built_then_recorded if damage.__name__.startswith("_write") else _replayable_busy)()
    damage(cache, rec)
    assert rec._bc.failing(list(drv.live.values())) == failing(cache, list(drv.live.values())) == bad


# --- the memory limit read from the environment -------------------------------------------------------------------
@pytest.mark.parametrize("text, value", [
    (" 2.5 ", 2.5), ("0.5", 0.5), ("1048576", 1048576.0), ("1048576.000", 1048576.0), ("12345.678901", 12345.678901),
    ("000000000001", 1.0), ("123456.7890123", 123456.7890123), ("1e3", 1000.0), (".5E+2", 50.0),  # as --memory-limit
])
def test_the_environments_memory_limit_is_plain_megabytes(monkeypatch, text, value):
    monkeypatch.setenv("SIMCACHE_MEMORY_LIMIT_MB", text)
    assert trace.memory_limit() == value


@pytest.mark.parametrize("text", ["1.2.3", "2..5", "1048576.5", "1048577", "0" * 13 + "1", "0.0", ".", "nan", "inf",
                                  "-5", "+5", "1_0", "1e400", "x" * 40])
def test_a_memory_limit_out_of_bounds_or_not_a_number_is_named(monkeypatch, text):
    monkeypatch.setenv("SIMCACHE_MEMORY_LIMIT_MB", text)
    with pytest.raises(trace.ConfigError) as e:
        trace.memory_limit()
    said = text if len(text) <= 30 else f"'{'x' * 29}... (42 characters)"
    assert str(e.value) == (f"the environment variable SIMCACHE_MEMORY_LIMIT_MB takes megabytes above 0 and at most "
                            f"1,048,576 (plain digits like 2048, 0.5 or 1e3), not {said}; e.g. export "
                            f"SIMCACHE_MEMORY_LIMIT_MB=4096, or unset it")


def test_an_operations_position_is_read_from_any_trace_with_operations():
    class Bare:  # a trace without the recorder's cached list of first steps
        ops = [trace.OpRecord(0, None, {}, 0), trace.OpRecord(1, None, {}, 4), trace.OpRecord(2, None, {}, 9)]

    assert [trace.op_position(Bare(), s) for s in (0, 3, 4, 8, 9, 50)] == [0, 0, 1, 1, 2, 2]


# --- readmission through a host reference taken by a storage backup or prefetch -----------------------------------
@pytest.mark.parametrize("frames, holder", [
    (["write_backup_storage"], "ongoing_backup"),
    (["write_backup_storage", "inner"], "ongoing_backup"),
    (["outer", "prefetch_from_storage"], "prefetch anchor"),
    (["write_backup_storage", "prefetch_from_storage", "inner"], "ongoing_backup"),
    (["prefetch_from_storage", "inner", "deeper"], None),  # only the two innermost calls count
    (["evict_host"], None),
])
def test_a_detached_node_given_a_host_reference_by_storage_is_readmitted(frames, holder):
    cache = make_cache()
    rec = Recorder(snapshots=False, invariants=False).attach(cache, None)
    node = cache._new_node((1, 2))
    cache._attach(cache.root_node, node)
    cache._detach(cache.root_node, node)
    for f in frames:
        rec.enter(f, ())
    rec.event("host_ref", node=node, host_ref=1, host_mamba_ref=0)
    assert [(e.node, e.holders, e.cause) for e in rec.readmitted] == (
        [] if holder is None else [(7, (holder,), f"detached node re-admitted to {holder}")])


def test_a_replay_that_disagrees_with_the_run_is_a_simcache_bug():
    rec = traced()
    rec.ops[3].last_step += 1  # the run, as recorded, had one more step in operation 3
    with pytest.raises(trace.InternalError) as e:
        rec._replay(3, set())
    assert str(e.value) == ("replaying operation 3 gave 27 micro-steps and status '.', the run had 28 and '.': the "
                            "run is not deterministic")


def test_a_replay_starts_from_the_checkpoint_before_the_first_wanted_step():
    rec = traced(every=2)  # checkpoints before operations 0, 2, 4, ...
    calls = []
    real = trace._Replayer

    class Spy(real):
        def __init__(self, main, cp, want, date_op):
            calls.append(cp.op)
            super().__init__(main, cp, want, date_op)

    recorder._Replayer = Spy
    try:
        got = rec._replay(9, {40, 200}).got  # step 40 is in operation 2, step 200 in operation 9
    finally:
        recorder._Replayer = real
    assert calls == [2] and sorted(got) == [40, 200]
    assert (got[40], got[200]) == (rec.snapshots[40], rec.snapshots[200])


# --- the hash writer: which entries it writes itself, what it encodes, and how often ------------------------------
def test_the_encoder_is_json_dumps_with_sorted_keys_and_str_for_anything_else(monkeypatch):
    """``_encoder()`` gives ``json.dumps(o, sort_keys=True, default=str)``'s text (and its errors) for any value,
    through one C encoder made once; without the C encoder, through ``json.JSONEncoder`` alike."""
    values = [{"b": 1, "a": [2, {"d": None, "c": "\u00e9"}]}, [{1, 2}], ({"z": 0, "y": 1},), {3}, "t\u00e9xt", 7,
              None, [float("nan"), float("inf")], [{"k": float("-inf")}], []]
    for enc in (trace._encoder(), None):
        if enc is None:
            monkeypatch.setattr(hash_writer, "_c_make_encoder", None)
            enc = trace._encoder()
        assert [enc(v) for v in values] == [json.dumps(v, sort_keys=True, default=str) for v in values]
        loop: list = []
        loop.append(loop)
        with pytest.raises(ValueError, match="Circular reference"):
            enc(loop)
        with pytest.raises(TypeError, match="keys must be"):
            enc([{(1, 2): 3}])
    monkeypatch.undo()
    assert not hasattr(trace._encoder(), "__self__")  # the C encoder's closure, not JSONEncoder.encode


def _odd_and_plain_entries() -> tuple[list, set[int]]:
    """Log entries of every fast-written kind, plain and not, and the positions of those that are not plain: a part
    that is not an int where the fast spelling writes one bare, a reference without a node id, a name that is not a
    str. (A reference to no node at all is plain: it is spelled "none".)"""
    st = trace._intern(("cache_finished_req", "_insert_helper"))
    ref, odd_ref = (8, (1, 2)), ("x", (1, 2))
    log = [
        (2, "R1", "call", st, "n", (4,)),  # 0: plain (a node id that is not an int: the whole text escaped)
        (2, "R1", "lock", st, 8, (None, 1, 2)),  # 1: a lock of no node
        (2, "R1", "lock", st, 8, (ref, 1, "z")),  # 2: a count that is not an int
        (2, "R1", "lock", st, 8, (ref, 0, 3)),  # 3: plain (a change of 0 is spelled an unlock)
        (2, "R1", "lock", st, 8, (odd_ref, 1, 3)),  # 4
        (2, "R1", "lru_remove", st, "y", ((1, 2), "full_lru_list")),  # 5
        (2, "R1", "set_add", st, 8, ((1, 2), 5)),  # 6: a set named by a number
        (2, "R1", "attach", st, 8, (ref, (0, ()), 3, None)),  # 7: plain
        (2, "R1", "attach", st, 8, (ref, odd_ref, 3, None)),  # 8
        (2, "R1", "attach", st, 8, (ref, (0, ()), 3, "r")),  # 9: a replaced node that is not an id
        (2, "R1", "attach", st, 8, (odd_ref, (0, ()), 3, 9)),  # 10
        (2, "R1", "detach", st, 8, (ref, (0, ()), 3, True, ref)),  # 11: plain
        (2, "R1", "detach", st, 8, (ref, (0, ()), 3, False, None)),  # 12: plain (the slot held nothing)
        (2, "R1", "detach", st, 8, (ref, odd_ref, 3, True, ref)),  # 13
        (2, "R1", "detach", st, 8, (ref, (0, ()), 3, False, odd_ref)),  # 14
        (2, "R1", "backup", st, 8, (ref, (4, 5))),  # 15: plain
        (2, "R1", "backup", st, 8, (ref, [4, 5])),  # 16: host slots not as a tuple
        (2, "R1", "backup", st, 8, (ref, (4, True))),  # 17
        (2, "R1", "write_ack", st, 8, (ref,)),  # 18: plain
        (2, "R1", "load_ack", st, None, (None,)),  # 19: plain
        (2, "R1", "storage_ack", st, 8, (odd_ref,)),  # 20
        (2, "R1", "free", st, None, ("host_kv", [1, 2])),  # 21
        # requests: their tokens written straight from the entry, in the text ("1,2") and the detail ("1, 2")
        (2, "R1", "op", (), None, {"op": "request", "tokens": [1, 2, 30]}),  # 22: plain
        (2, None, "op", (), None, {"op": "request", "rid": "r\u00e9\"", "tokens": [7]}),  # 23: plain, no actor
        (2, "A\u00e9\"", "op", (), None, {"tokens": [], "op": "request"}),  # 24: plain (keys in any order)
        (2, "R1", "op", (), None, {"op": "request", "tokens": [-3, 10**20, 0, 9, 10]}),  # 25: plain
        (2, "R1", "op", (), None, {"op": "request", "tokens": [1, True]}),  # 26: a token that is not an int
        (2, "R1", "op", (), None, {"op": "request", "tokens": (1, 2)}),  # 27: tokens not as a list
        (2, "R1", "op", (), None, {"op": "request", "tokens": [1], "note": "x"}),  # 28: another field
        (2, "R1", "op", (), None, {"op": "request", "rid": 5, "tokens": [1]}),  # 29: a rid that is not a str
        (2, "R1", "op", (), None, {"op": "evict", "n": 2}),  # 30: not a request
        (2, 7, "op", (), None, {"op": "request", "tokens": [1]}),  # 31: an actor that is not a str
        # long slot lists: spelled from a table of the numbers' decimal text (grown as larger slots come)
        (2, "R1", "alloc", st, None, ("device_kv", tuple(range(100)))),  # 32: plain
        (2, "R1", "free", st, None, ("device_kv", tuple(range(12000, 0, -7)))),  # 33: plain, every digit count
        (2, "R1", "free", st, None, ("device_kv", (*range(70), 1 << 23))),  # 34: plain, past the table's end
        (2, "R1", "free", st, None, ("device_kv", (*range(70), -1))),  # 35: plain, a negative slot
        (2, "R1", "backup", st, 8, (ref, tuple(range(99_990, 100_100)))),  # 36: plain
        (2, "R1", "alloc", st, None, ("device_kv", (*range(70), True))),  # 37: a slot that is not an int
        (2, "R1", "op", (), None, {"op": "request", "tokens": [*range(99_950, 100_050), 7]}),  # 38: plain, long
        (2, "R1", "op", (), None, {"op": "request", "tokens": [*range(70), 10**20]}),  # 39: plain, past 64 bits
        (2, "R1", "op", (), None, {"op": "request", "tokens": [*range(70), -5]}),  # 40: plain, a negative token
        (2, "R1", "op", (), None, {"op": "request", "tokens": [*range(70), 1 << 22]}),  # 41: plain, past the table
        (2, "R1", "op", (), None, {"op": "request", "tokens": [*range(70), 2.0]}),  # 42: a token that is a float
        (2, "R1", "op", (), None, {"op": "request", "tokens": [*range(999_950, 1_000_050)]}),  # 43: plain, 7 digits
        (2, "R1", "free", st, None, ("device_kv", tuple(range(5, 100)))),  # 44: plain, from the grown table
    ]
    return log, {1, 2, 4, 5, 6, 8, 9, 10, 13, 14, 16, 17, 20, 21, 26, 27, 28, 29, 30, 31, 37, 42}


def test_the_hash_writer_writes_plain_entries_itself_and_sends_exactly_the_others_to_the_generic_wording(
        monkeypatch):
    log, odd = _odd_and_plain_entries()
    want = [json.dumps(trace._step(i, e).as_dict(), sort_keys=True, default=str) for i, e in enumerate(log)]
    sent, real = [], trace._words
    monkeypatch.setattr(hash_writer, "_words", lambda e: (sent.append(e), real(e))[1])
    assert trace._json_lines(log, 0, len(log), trace._JsonMemo()) == want
    assert [log.index(e) for e in sent] == sorted(odd)
    assert [trace._step(i, log[i]).text for i in (3, 12, 19, 22, 23, 24)] == [
        "unlock [1,2]#8 (full_lock_ref=3)", "detach [1,2]#8 from []#0 slot 3 (the slot held none)",
        "load ack for none", "R1: request [1,2,30]", "request [7]", 'A\u00e9": request []']


def test_the_hash_writer_encodes_each_repeated_text_once_and_writes_numbers_bare(monkeypatch):
    """Over a whole run: every stack, actor, kind and shared detail is encoded once, each call's detail and each
    pool, list and set name made once, and node ids, operation indices and texts are never handed to the encoder
    (only the details of generically worded steps, which differ, are encoded per step)."""
    rec = simulate("crash_pr", "pre_fix", snapshots=False).trace
    expected = reference_hash(rec)
    encoded, details, names = [], [], []
    real_encoder, real_detail, real_name = trace._encoder, trace._call_detail, trace._JsonMemo.name

    def counted_encoder():
        enc = real_encoder()
        return lambda o: (encoded.append(o), enc(o))[1]

    monkeypatch.setattr(hash_writer, "_encoder", counted_encoder)
    monkeypatch.setattr(hash_writer, "_call_detail", lambda n: (details.append(n), real_detail(n))[1])
    monkeypatch.setattr(trace._JsonMemo, "name", lambda self, s: (names.append(s), real_name(self, s))[1])
    assert rec.sha256() == expected
    monkeypatch.undo()
    log = rec._log
    stacks = {id(e[3]): list(e[3]) for e in log}
    words = {e[1] for e in log} | {e[2] for e in log}
    generic = [d for e in log if written_generically(e) and (d := trace._words(e)[1])]
    per_step = [d for d in generic if id(d) not in trace._SHARED_DETAIL_IDS]
    shared = list({id(d): d for e in log if (d := trace._words(e)[1]) and id(d) in trace._SHARED_DETAIL_IDS}.values())
    assert {e[2] for e in log} - FAST_KINDS == {"op", "host_ref", "split", "assertion"} and shared
    assert sorted(map(repr, encoded)) == sorted(map(repr, [*stacks.values(), *words, *per_step, *shared]))
    calls = [e[3][-1] for e in log if e[2] == "call"]
    assert sorted(details) == sorted(set(calls)) and len(calls) > len(set(calls))
    pool_and_set_names = {e[5][0] for e in log if e[2] in trace._POOL_WORDS} | {
        e[5][1] for e in log if e[2] in trace._LRU_SET_FIELD}
    assert sorted(names) == sorted(pool_and_set_names)


def test_the_hash_writers_key_memo_starts_again_past_4096_keys():
    memo = trace._JsonMemo()
    keys = [(i,) for i in range(4098)]
    for k in keys[:4097]:
        memo.key(k)
    assert len(memo.keys) == 4097 and memo.key(keys[0]) == "0"  # still kept: no new entry
    assert memo.key(keys[4097]) == "4097" and list(memo.keys.values()) == [(keys[4097], "4097")]


def test_a_name_is_escaped_once_per_memo(monkeypatch):
    escaped, real = [], trace._ebs
    monkeypatch.setattr(hash_writer, "_ebs", lambda s: (escaped.append(s), real(s))[1])
    memo = trace._JsonMemo()
    assert [memo.name('le"af'), memo.name('le"af'), memo.name("x")] == ['le\\"af', 'le\\"af', "x"]
    assert escaped == ['le"af', "x"]


def test_the_key_text_memo_starts_again_past_4096_keys():
    trace._KEY_TEXT.clear()
    keys = [(i,) for i in range(4098)]
    for k in keys[:4097]:
        trace._key_text(k)
    assert len(trace._KEY_TEXT) == 4097 and trace._key_text(keys[0]) == "0"  # still kept: no new entry
    assert trace._key_text(keys[4097]) == "4097" and list(trace._KEY_TEXT.values()) == [(keys[4097], "4097")]
    trace._KEY_TEXT.clear()


def test_a_new_recorder_holds_nothing_and_a_step_before_any_operation_is_operation_minus_one():
    rec = Recorder(checkpoint_every=0, checkpoint_steps=0)
    assert (rec.checkpoint_every, rec.checkpoint_steps, rec.crashed, rec.initial, rec.replayable, rec.cache,
            rec.driver, rec._bc) == (1, 1, None, None, False, None, None, None)
    assert (Recorder(checkpoint_every=1, checkpoint_steps=1).checkpoint_steps, Recorder(checkpoint_steps=7)
            .checkpoint_steps) == (1, 7)
    cache = make_cache()
    rec.attach(cache, Driver(cache))
    assert rec._bc is None  # driven by hand: the invariants are checked whole, per micro-step
    cache.evict_host(1)
    assert [e[:3] for e in rec._log] == [(-1, None, "call")]
    replayable = Recorder(invariants=False)
    replayable.replayable = True
    assert replayable.attach(make_cache(), None)._bc is None  # no invariants wanted: no boundary check kept


def test_a_leak_the_first_traced_operation_leaves_shows_in_snapshots_replayed_from_the_checkpoint_after_it():
    """scenario_a's operation 1 (pre_fix) leaks two host slots. Traced from operation 1 on with a checkpoint before
    every operation, the checkpoint after that first traced operation keeps the leak, so the next operation's first
    snapshot, replayed from there, shows it as one replayed from the start does."""
    sc = load("scenario_a")
    ops, flags = sc.linearize(sc.parse_schedule()), resolve_flags(sc, "pre_fix", None)[1]
    fine, coarse = Recorder(checkpoint_every=1), Recorder(checkpoint_every=100)
    for rec in (fine, coarse):
        execute(sc.config, ops, flags, recorder=rec, window=(1, len(ops)))
    leaked = {"device_kv": (), "device_mamba": (), "host_kv": (0, 1), "host_mamba": ()}
    assert [(c.op, c.leaked) for c in fine.checkpoints] == [(0, {}), (1, leaked), (2, leaked)]
    step = fine.ops[1].first_step
    assert {n: v.leaked for n, v in fine.snapshots[step].pools.items()} == leaked
    assert fine.snapshots[step] == coarse.snapshots[step]
