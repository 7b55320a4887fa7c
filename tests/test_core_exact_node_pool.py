"""node.py and pool.py compared whole: a new tree node's every field, its four tier predicates, the host reference
counters and their refusals, heap order and repr; how many worker processes, how they start, how they stop."""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys

import pytest

from simcache import pool as pool_mod
from simcache.node import TreeNode
from simcache.pool import Pool, mp_context, quiet_worker, stop_workers, workers_for


def test_a_new_node_holds_nothing_and_keeps_its_id_key_and_time():
    n = TreeNode(7, 2.5, (3, 4))
    assert {s: getattr(n, s) for s in TreeNode.__slots__} == {
        "id": 7, "key": (3, 4), "parent": None, "children": {}, "value": None, "host_value": None,
        "mamba_value": None, "mamba_host_value": None, "full_lock_ref": 0, "mamba_lock_ref": 0,
        "host_ref_counter": 0, "host_mamba_ref_counter": 0, "hit_count": 0, "last_access_time": 2.5,
        "hash_value": None}
    assert TreeNode(0, 0.0).key == ()
    assert TreeNode(1, 0.0).children is not TreeNode(2, 0.0).children
    assert not hasattr(n, "__dict__")


def test_the_tier_predicates_read_one_field_each():
    n = TreeNode(1, 0.0)
    assert (n.evicted, n.backuped, n.mamba_evicted, n.mamba_backuped) == (True, False, True, False)
    n.value = []
    assert (n.evicted, n.backuped, n.mamba_evicted, n.mamba_backuped) == (False, False, True, False)
    n.host_value = []
    assert (n.evicted, n.backuped, n.mamba_evicted, n.mamba_backuped) == (False, True, True, False)
    n.mamba_value = [0]
    assert (n.evicted, n.backuped, n.mamba_evicted, n.mamba_backuped) == (False, True, False, False)
    n.mamba_host_value = [0]
    assert (n.evicted, n.backuped, n.mamba_evicted, n.mamba_backuped) == (False, True, False, True)


@pytest.mark.parametrize("protect, release, field, message", [
    ("protect_host", "release_host", "host_ref_counter", "Host reference counter is already zero."),
    ("protect_host_mamba", "release_host_mamba", "host_mamba_ref_counter",
     "Host mamba reference counter is already zero.")])
def test_host_counters_count_up_and_down_and_refuse_below_zero(protect, release, field, message):
    n = TreeNode(1, 0.0)
    other = "host_mamba_ref_counter" if field == "host_ref_counter" else "host_ref_counter"
    getattr(n, protect)()
    getattr(n, protect)()
    assert (getattr(n, field), getattr(n, other)) == (2, 0)
    getattr(n, release)()
    assert getattr(n, field) == 1
    getattr(n, release)()
    assert getattr(n, field) == 0
    with pytest.raises(RuntimeError) as e:
        getattr(n, release)()
    assert str(e.value) == message and getattr(n, field) == 0
    setattr(n, field, -3)
    with pytest.raises(RuntimeError):
        getattr(n, release)()
    assert getattr(n, field) == -3


def test_nodes_order_by_last_access_time_and_repr_lists_the_key():
    a, b, c = TreeNode(1, 1.0), TreeNode(2, 2.0), TreeNode(3, 1.0)
    assert (a < b, b < a, a < c, c < a) == (True, False, False, False)
    assert sorted([b, a])[0] is a
    assert repr(TreeNode(5, 0.0, (1, 2))) == "TreeNode(id=5, key=[1, 2])"
    assert repr(TreeNode(0, 0.0)) == "TreeNode(id=0, key=[])"


def test_workers_are_capped_by_the_cores_and_the_tasks(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert [workers_for(j) for j in (1, 3, 4, 9)] == [1, 3, 4, 4]
    assert [workers_for(8, t) for t in (1, 2, 5, 100)] == [1, 2, 4, 4]
    assert workers_for(3, 0) == 1 and workers_for(0) == 1
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert workers_for(5) == 1 and workers_for(5, 9) == 1


def test_fork_unless_cuda_is_initialised(monkeypatch):
    import torch

    assert mp_context().get_start_method() == "fork"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert mp_context().get_start_method() == "spawn"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn", "forkserver"])
    assert mp_context().get_start_method() == "spawn"


def test_a_quiet_worker_ignores_ctrl_c():
    before = signal.getsignal(signal.SIGINT)
    try:
        quiet_worker()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


class FakeProcess:
    def __init__(self, fail=None):
        self.terminated, self.fail = 0, fail

    def terminate(self):
        if self.fail:
            raise self.fail
        self.terminated += 1


def test_stop_workers_terminates_each_and_survives_ones_already_gone():
    class Holder:
        pass

    h = Holder()
    procs = {1: FakeProcess(), 2: FakeProcess(OSError("gone")), 3: FakeProcess(AttributeError("x")), 4: FakeProcess()}
    h._processes = procs
    stop_workers(h)
    assert [p.terminated for p in procs.values()] == [1, 0, 0, 1]
    h._processes = None
    stop_workers(h)  # a pool already shut down has no processes
    stop_workers(Holder())


def test_shutdown_waits_normally_and_stops_at_once_while_an_error_unwinds(monkeypatch):
    seen = []
    monkeypatch.setattr(pool_mod, "stop_workers", lambda p: seen.append(("stop", p)))
    real = pool_mod.ProcessPoolExecutor.shutdown
    monkeypatch.setattr(pool_mod.ProcessPoolExecutor, "shutdown",
                        lambda self, wait=True, *, cancel_futures=False: seen.append((wait, cancel_futures)))
    p = Pool(1, mp_context=mp_context())
    try:
        p.shutdown()
        p.shutdown(wait=False, cancel_futures=True)
        assert seen == [(True, False), (False, True)]
        seen.clear()
        try:
            raise ValueError("unwinding")
        except ValueError:
            assert sys.exc_info()[0] is ValueError
            p.shutdown(wait=True, cancel_futures=False)
        assert seen == [("stop", p), (False, True)]
    finally:
        real(p)


def test_an_explorer_worker_takes_its_plan_and_starts_with_an_empty_damage_memo(monkeypatch):
    from simcache.explore import workers

    said = []
    monkeypatch.setattr(workers, "quiet_worker", lambda: said.append("quiet"))
    monkeypatch.setattr(workers, "pace_worker", lambda: said.append("pace"))
    monkeypatch.setattr(workers, "PLAN", None)
    memo = workers.DAMAGE
    memo["left over"] = 1
    plan = object()
    workers.init_worker(plan)
    assert said == ["quiet", "pace"] and workers.PLAN is plan
    assert workers.DAMAGE is memo and memo == {}


def test_an_explorer_pool_starts_its_workers_with_the_plan(monkeypatch):
    from simcache.explore import workers

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert workers.make_pool(1, None)._max_workers == 1  # as many as asked for, not one per core
    chosen = multiprocessing.get_context("spawn" if mp_context().get_start_method() == "fork" else "fork")
    monkeypatch.setattr(workers, "mp_context", lambda: chosen)
    assert workers.make_pool(1, None)._mp_context is chosen  # the start method pool.mp_context chooses
    monkeypatch.undo()
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    plan = ("a", "plan")
    pool = workers.make_pool(3, plan)
    try:
        assert type(pool) is Pool
        assert (pool._max_workers, pool._initializer, pool._initargs) == (2, workers.init_worker, (plan,))
        assert pool._mp_context.get_start_method() == mp_context().get_start_method()
        assert pool.submit(_plan_in_worker).result(timeout=120) == ("a", "plan")
    finally:
        pool.shutdown()


def _plan_in_worker():
    from simcache.explore import workers

    return workers.PLAN
