"""The unified model (``simcache.unified``): issue #39's race on both presets, and agreement with SGLang's real
``UnifiedRadixCache`` field for field on fresh random sequences (the releases' wheels from simcache's cache folder;
skipped with one sentence without the package index)."""
from __future__ import annotations

from pathlib import Path

import pytest

from simcache.config import check_settings
from simcache.operations import parse_op
from simcache.real.source import SourceError
from simcache.real.unified import load_unified
from simcache.unified import run_model
from simcache.unified.compare import Outcomes, compare

RACE = ["prefetch 1 2 9 9", {"op": "prefetch_hit", "n": 4}, "request 1 2 3 4", "prefetch_done 4 hit", "evict 3",
        "evict_host 2", "evict 2"]


def race(preset: str, policy: str = "write_through") -> dict:
    cfg = check_settings(dict(policy=policy, storage=True, prefetch_threshold=1, device_kv=16, device_mamba=8,
                              host_kv=4, host_mamba=4))
    return run_model(cfg, [(None, parse_op(o, "t")) for o in RACE], preset)


def test_the_race_on_the_0_5_16_model_is_the_real_codes_failure_field_for_field():
    r = race("unified_0_5_16")
    assert (r["outcome"], r["status"], r["step"], r["first_stale"]) == ("AssertionError: ", "......x", 6, 4)
    assert r["chain"] == ["evict", "drive_eviction", "_evict_device_leaf", "_remove_leaf_from_parent"]
    assert r["double_frees"] == [dict(pool="device_kv", slots=[0, 1], chain=[
        "evict_component", "_evict_component_and_detach_lru", "_evict_device_leaf", "drive_eviction", "evict"])]
    assert r["counters"]["full_evictable"] == -2
    assert r["free"]["device_kv"] == [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 2, 3, 0, 1, 0, 1]


def test_the_0_5_17_model_drops_the_refill_and_runs_clean_under_both_policies():
    assert (race("unified_0_5_17")["outcome"], race("unified_0_5_17")["tree"]) == ("clean", [])
    wb = race("unified_0_5_17", "write_back")
    assert wb["outcome"] == "clean" and wb["double_frees"] == [] and wb["stale_final"] == []
    assert wb["tree"] == ["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hl=1 hml=0",
                          "2 3,4 v=0 h=1 m=0 mh=1 fl=0 ml=0 hl=1 hml=1"]


def test_run_model_classifies_each_operation_with_the_drivers_one_step(monkeypatch):
    """#42: the model's run classifies an operation where every driver does (``Steps.step``); a looping operation
    is the hang outcome, as on the real code."""
    from simcache.driver import Steps

    seen = []
    real_step = Steps.step
    monkeypatch.setattr(Steps, "step", lambda self, op, i, *a, **k: seen.append(i) or real_step(self, op, i, *a, **k))
    assert race("unified_0_5_16")["status"] == "......x" and seen == list(range(7))
    cfg = check_settings(dict(policy="write_back", storage=True, host_kv=2))
    hang = run_model(cfg, [(None, parse_op(o, "t")) for o in ("request 1 2 3", "evict_mamba 1")], "unified_0_5_16")
    assert (hang["outcome"], hang["sig"], hang["status"], hang["step"]) == (
        "hang: the operation loops forever", "hang", ".x", 1)


def _loaded(version: str):
    try:
        return load_unified(version)
    except SourceError as e:
        if "cannot reach" in str(e) or "HTTP" in str(e):
            pytest.skip(f"the package index cannot be reached, so the {version} wheel cannot be fetched: {e}")
        raise


N = 2000  # fresh sequences per preset (seed 20261205 was never used while the model was written), both policies
DOC = Path(__file__).resolve().parent.parent / "docs" / "unified.md"


def _agrees(preset: str, release: str, seed: int, n: int, page_size: int) -> None:
    """``n`` fresh cases agree field for field, and docs/unified.md gives what they ended in, under the tool's
    command, as ``tools/compare_unified.py`` prints it."""
    seen, ends = [], Outcomes()

    def on_case(p, i, diff, cfg, real):
        seen.append(i)
        ends.add(cfg, real)

    agree, bad = compare([preset], seed=seed, n=n, loaded={release: _loaded(release)}, on_case=on_case,
                         page_size=page_size)
    assert [(d.index, d.fields) for d in bad] == []
    assert agree == {preset: n} and len(seen) == n
    head = f"{preset} vs sglang {release}: {n}/{n} agree field for field (seed {seed}, page size {page_size})"
    assert f"{head}\n  on the real code: {ends.line()}\n" in DOC.read_text()


@pytest.mark.parametrize("preset,release", [("unified_0_5_16", "0.5.16"), ("unified_0_5_17", "0.5.17")])
def test_the_model_agrees_with_the_real_code_on_2000_fresh_sequences(preset, release):
    _agrees(preset, release, 20261205, N, 1)


@pytest.mark.parametrize("preset,release", [("unified_0_5_16", "0.5.16"), ("unified_0_5_17", "0.5.17")])
def test_with_pages_of_two_tokens_and_the_mamba_extra_buffer_too(preset, release):
    _agrees(preset, release, 20261206, 500, 2)
