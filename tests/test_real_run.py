"""``simcache.real.run.run_linear``, the one loop every real target runs through (review1 #8, #11): each operation is
classified by ``simcache.driver.Steps.step``, the model's own classifier (a skip's letter, ``x`` for an exception of
the code under test, a user's mistake raised); the memory limit stops a run after its set-up, after an operation and
inside one that moves many slots. A made-up environment and driver stand in for SGLang's cache (no SGLang code)."""
from __future__ import annotations

import contextlib
import importlib.util
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

import simcache.trace.memory as memory
from simcache.driver import Driver, Steps
from simcache.errors import ScenarioError
from simcache.operations import NOTHING_TO_DO, Skip
from simcache.real import sequences
from simcache.real.driver import RealDriver
from simcache.real.fakes import FreeListPool, Ledger
from simcache.real.run import FIELDS, run_linear
from simcache.scenario import from_doc
from simcache.trace.records import TraceLimitError

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = from_doc({"config": {"device_kv": 8}, "ops": [{"op": "events"}]})
LOADED = SimpleNamespace(active=contextlib.nullcontext, real_files=frozenset(), source=SimpleNamespace(label="made up"))


class Env:
    """What ``run_linear`` reads of an environment; a pool that checks memory when it moves many slots."""

    def __init__(self, loaded, cfg: dict, max_ctx: int) -> None:
        self.ledger = Ledger()
        self.pool = FreeListPool("device_kv", 5000, self.ledger)

    def stale_refs(self) -> list[str]:
        return []

    def state(self) -> dict:
        return {k: None for k in FIELDS if k not in ("outcome", "sig", "raised_in", "chain", "step", "status",
                                                       "first_stale")}


class Drv(RealDriver):
    """``RealDriver``'s classification (``raised``, ``crash_fields``) over made-up operations."""

    def __init__(self, env: Env) -> None:
        self.env, self.ps = env, 1

    def apply(self, op: dict, index: int) -> None:
        kind = op["op"]
        if kind == "finish_oldest":
            raise Skip(NOTHING_TO_DO)
        if kind == "evict":
            self.env.pool.alloc(op["n"])
        if kind == "request":
            raise AssertionError(f"the code under test failed on {op['tokens']}")
        if kind == "inject":
            raise ScenarioError(f"op {index}: a user's mistake")
        if kind == "prefetch":
            op["tokens"].pop()  # ``tokens`` must be there: a malformed one is the caller's mistake


def ops(*kinds: dict) -> list[tuple[str, dict]]:
    return [("R1", k) for k in kinds]


def test_every_driver_classifies_an_operation_in_one_place():
    assert Driver.step is Steps.step and RealDriver.step is Steps.step
    owners = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "simcache").rglob("*.py"))
              if "except Skip" in p.read_text() and (p.parent.name == "real" or p.parent.parent.name == "real"
                                                     or p.name == "driver.py")]
    assert owners == ["simcache/driver.py"]


def test_run_linear_gives_statuses_and_the_exception_as_the_model_does():
    got = run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "events"}, {"op": "finish_oldest"},
                                                         {"op": "request", "tokens": [1, 2]}, {"op": "events"}))
    assert (got["status"], got["step"], got["outcome"], got["raised_in"], got["source"]) == (
        ".-x", 2, "AssertionError: the code under test failed on [1, 2]", "driver", "made up")
    assert list(got) == [*FIELDS, "chain_lines", "source"]


def test_a_users_mistake_is_raised_not_a_result():
    with pytest.raises(ScenarioError, match="op 1: a user's mistake"):
        run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "events"}, {"op": "inject", "nodes": []}))
    with pytest.raises(ScenarioError) as e:  # a malformed op that makes the code raise: said, not a crash
        run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "prefetch"}))
    assert str(e.value) == "op 0 (prefetch) needs exactly tokens; it has []"


def fake_rss(monkeypatch, values: list[float]) -> None:
    """This process's memory as ``values`` say, one per reading (the last repeated)."""
    seen = iter(values)
    monkeypatch.setattr(memory, "rss_mb", lambda: next(seen, values[-1]))


def test_the_memory_limit_stops_a_run_after_an_operation(monkeypatch):
    fake_rss(monkeypatch, [300, 310, 320, 900])  # the watch's start, the set-up, op 0, op 1
    with pytest.raises(TraceLimitError) as e:
        run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "events"}, {"op": "events"}, {"op": "events"}),
                   memory_limit_mb=100)
    assert str(e.value) == (
        "the real code's run outgrew the memory limit of 100 MB (it added 600 MB to the 300 MB the process held when "
        "it started) at operation 1; run fewer operations (e.g. the first 1), or raise the limit with --memory-limit "
        "MB")


def test_the_memory_limit_stops_a_run_inside_a_big_operation_and_after_its_set_up(monkeypatch):
    fake_rss(monkeypatch, [300, 310, 900])  # the watch's start, the set-up, inside op 0's alloc of 4,096 slots
    with pytest.raises(TraceLimitError) as e:
        run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "evict", "n": 4096}), memory_limit_mb=100)
    assert str(e.value).endswith(" at operation 0; make the scenario's pools or its longest request smaller, or "
                                 "raise the limit with --memory-limit MB")
    fake_rss(monkeypatch, [300, 301, 302])
    run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "evict", "n": 4095}), memory_limit_mb=100)
    fake_rss(monkeypatch, [300, 5000])
    with pytest.raises(TraceLimitError, match=r" at its set-up \(the pools\); make the scenario's pools"):
        run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "events"}), memory_limit_mb=100)
    fake_rss(monkeypatch, [300, 5000])  # 0: no limit
    assert run_linear(Env, Drv, SCENARIO, LOADED, ops=ops({"op": "events"}), memory_limit_mb=0)["status"] == "."


def test_the_oracle_tool_draws_the_sequences_simcache_real_draws():
    spec = importlib.util.spec_from_file_location("compare_with_oracle", ROOT / "tools" / "compare_with_oracle.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for seed in range(30):
        for profile in sequences.PROFILES:
            assert tool.random_doc(random.Random(seed), profile) == sequences.random_doc(
                random.Random(seed), profile, hit_op=False)


def test_the_models_cache_is_let_go_before_the_real_code_runs(monkeypatch):
    import gc

    import simcache.real.run as real_run
    from simcache.cache import HiMambaRadixCache
    from simcache.real.cli import compare_one
    from simcache.scenario import load

    held = []

    def fake_run_real(scenario, loaded, schedule, memory_limit_mb=None):
        held.append(sum(type(o) is HiMambaRadixCache for o in gc.get_objects()))
        return {k: None for k in FIELDS}

    monkeypatch.setattr(real_run, "run_real", fake_run_real)
    gc.collect()
    before = sum(type(o) is HiMambaRadixCache for o in gc.get_objects())
    preset, model, _ = compare_one(load("crash_pr"), LOADED, "pre_fix", None, 100)
    assert (preset, model["outcome"].split(":")[0], held) == ("pre_fix", "AssertionError", [before])
