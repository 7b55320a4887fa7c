"""The trace's lazy parts, exactly: which replays rebuild which snapshots, what the timeline keeps, and how the lazy
sequences compare. Each test names the replays it expects, with their arguments, and compares every rebuilt
snapshot with the one a single front-to-back replay gives."""
from __future__ import annotations

import pytest
from helpers import make_cache

from simcache import trace
from simcache.driver import Driver
from simcache.ops_run import execute
from simcache.scenario import load
from simcache.simulate import resolve_flags
from simcache.state import tree_lines
from simcache.trace import Recorder


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


def test_the_run_the_tests_below_read():
    rec = traced()
    assert rec.replayable and len(rec.steps) == 263
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
    monkeypatch.setattr(trace, "FRAME_CACHE", 4)
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
