"""The collector's pace during searches (``simcache.gcpace``): raised for the call, restored after, results equal."""
from __future__ import annotations

import gc

import pytest

import simcache.gcpace as gcpace
from simcache.explore import explore


@pytest.fixture
def default_pace():
    old, was = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    yield
    gc.set_threshold(*old)
    (gc.enable if was else gc.disable)()


def test_raised_inside_and_restored_after(default_pace):
    with gcpace.fewer_collections():
        assert gc.get_threshold() == (50_000, 50, 50)
        with gcpace.fewer_collections():  # nested: still raised, and the outer pace comes back after
            assert gc.get_threshold() == (50_000, 50, 50)
        assert gc.get_threshold() == (50_000, 50, 50)
    assert gc.get_threshold() == (700, 10, 10)


def test_restored_when_the_body_raises(default_pace):
    with pytest.raises(KeyError), gcpace.fewer_collections():
        raise KeyError("x")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_pace_and_a_disabled_collector_are_kept(default_pace):
    gc.set_threshold(100_000, 5, 80)
    gc.disable()
    with gcpace.fewer_collections():
        assert gc.get_threshold() == (100_000, 50, 80)
        assert not gc.isenabled()
    assert gc.get_threshold() == (100_000, 5, 80)
    assert not gc.isenabled()


def test_disabled_pacing_leaves_the_default(default_pace, monkeypatch):
    monkeypatch.setattr(gcpace, "ENABLED", False)
    with gcpace.fewer_collections():
        assert gc.get_threshold() == (700, 10, 10)
    gcpace.pace_worker()
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(gcpace, "ENABLED", True)
    try:
        gcpace.pace_worker()
        assert gc.get_threshold() == (50_000, 50, 50)
        assert gc.get_freeze_count() > 1000  # this process's heap, set aside
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("kw", [dict(bound=1), dict(strategy="random", budget=130, seed=3), dict(reduce="dpor")])
def test_every_search_runs_at_the_raised_pace_with_the_same_result(default_pace, monkeypatch, kw):
    seen = []

    def progress(_):
        seen.append(gc.get_threshold())

    paced = explore("scenario_b", "pre_fix", progress=progress, **kw)
    assert seen and set(seen) == {(50_000, 50, 50)}
    assert gc.get_threshold() == (700, 10, 10)
    monkeypatch.setattr(gcpace, "ENABLED", False)
    plain = explore("scenario_b", "pre_fix", **kw)
    assert plain == paced  # time_s is left out of the comparison


def test_replays_run_at_the_raised_pace(default_pace, monkeypatch):
    from simcache.ops_run import run_ops
    from simcache.scenario import load
    from simcache.simulate import simulate

    seen = []
    doc = {"config": {"device_kv": 16, "device_mamba": 4, "host_kv": 16, "host_mamba": 4},
           "ops": [{"op": "request", "tokens": [1, 2, 3]}, {"op": "evict", "n": 3}]}
    out = run_ops(doc, "pre_fix", on_step=lambda *a: seen.append(gc.get_threshold()))
    assert out["status"] == ".." and seen == [(50_000, 50, 50)] * 2
    assert gc.get_threshold() == (700, 10, 10)
    paced = simulate(load("scenario_b"), "pre_fix", snapshots=False)
    assert paced.result["status"] == ".....x" and paced.result["first_stale"] == 3
    monkeypatch.setattr(gcpace, "ENABLED", False)
    assert simulate(load("scenario_b"), "pre_fix", snapshots=False).to_json() == paced.to_json()
