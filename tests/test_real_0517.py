"""SGLang 0.5.17's own HiMambaRadixCache, run by simcache.real from its wheel (fetched once per machine into the cache
folder, pinned by sha256; skipped with one sentence when the package index cannot be reached): the gallery's real
outcomes, the command line beside the model, and, once the ``release_0_5_17`` preset exists, the model agreeing
with the real code field for field on the gallery and on 1,200 fresh random sequences."""
from __future__ import annotations

import json
import sys
from collections import Counter

import pytest

from simcache.cli import main
from simcache.ops_run import run_ops
from simcache.real import FIELDS, SourceError, diff, load_target, run_real
from simcache.real.sequences import docs
from simcache.scenario import from_doc, gallery, load
from simcache.simulate import simulate
from simcache.trace.records import TraceLimitError
from simcache.versions import PRESETS

PINNED_LABEL = ("sglang 0.5.17 (sglang-0.5.17-cp311-cp311-manylinux_2_34_x86_64.whl, sha256 575e38f56836...)")
RELEASE = "release_0_5_17"
needs_preset = pytest.mark.skipif(RELEASE not in PRESETS, reason=f"the {RELEASE} preset is not in simcache yet")


@pytest.fixture(scope="module")
def real():
    try:
        return load_target(version="0.5.17")
    except SourceError as e:
        if "cannot reach" in str(e) or "answered HTTP" in str(e) or "download of" in str(e):
            pytest.skip(f"the sglang 0.5.17 wheel cannot be fetched from the package index: {e}")
        raise


def expect_view(r: dict) -> dict:
    """A real result as a scenario's ``expect`` block says it (the fields the real code has)."""
    out = dict(outcome="clean" if r["outcome"] == "clean" else "assertion",
               double_frees=[[d["pool"], d["slots"]] for d in r["double_frees"]],
               leaked={p: a["leaked"] for p, a in r["accounting"].items() if a["leaked"]})
    if r["outcome"] != "clean":
        out.update(raised_in=r["raised_in"], step=r["step"], message=r["outcome"].split(": ", 1)[1])
    return out


# the real code's outcome on each gallery scenario, as SGLang 0.5.17 gave it (see docs/real.md); where the gallery's
# expect blocks pin release_0_5_17, they must say the same
REAL_0517 = {
    "crash_pr": dict(outcome="clean", double_frees=[], leaked={}),
    "hidden_needle": dict(outcome="clean", double_frees=[], leaked={}),
    "nonleaf_prefetch": dict(outcome="assertion", raised_in="_evict_regular", step=3, message="non-leaf, node.id=7",
                             double_frees=[], leaked={}),
    "scenario_a": dict(outcome="clean", double_frees=[], leaked={}),
    "scenario_b": dict(outcome="assertion", raised_in="_evict_host_leaf", step=5,
                       message="parent does not have child key, 1", double_frees=[["device_kv", [0, 1]]], leaked={}),
    "scenario_c": dict(outcome="clean", double_frees=[], leaked={}),
    "scenario_d": dict(outcome="clean", double_frees=[], leaked={}),
}


def test_the_wheel_is_pinned_and_its_files_load_without_leaking_into_sys_modules(real):
    assert real.source.label == PINNED_LABEL
    assert sorted(m.rsplit(".", 1)[1] for m in real.real) == [
        "base_prefix_cache", "events", "evict_policy", "hi_mamba_radix_cache", "hicache_storage",
        "mamba_radix_cache", "radix_cache", "utils"]
    assert not real.fallbacks and "sglang" not in sys.modules


def test_the_gallery_on_0517_gives_the_real_outcomes(real):
    assert set(REAL_0517) == set(gallery())
    for name in gallery():
        sc = load(name)
        got = expect_view(run_real(sc, real))
        assert got == REAL_0517[name], name
        pinned = sc.expect.get(RELEASE)
        if pinned is not None:
            assert {k: v for k, v in pinned.items() if k in got} == got, name


@needs_preset
def test_the_release_preset_agrees_with_0517_field_for_field_on_the_gallery(real):
    for name in gallery():
        sc = load(name)
        run = simulate(sc, RELEASE, snapshots=False, invariants=False)
        assert diff(run.result, run_real(sc, real, run.schedule)) == [], name


@needs_preset
def test_the_release_preset_agrees_with_0517_on_fresh_random_sequences(real):
    seqs = docs(1200, seed=517, profiles=("storage", "storage", "mixed"))
    seen, bad = Counter(), []
    for i, doc in enumerate(seqs):
        got, model = run_real(from_doc(doc), real), run_ops(doc, RELEASE)
        if diff(model, got):
            bad.append((i, diff(model, got)))
        seen["page 2"] += doc["config"]["page_size"] == 2
        seen["raised"] += got["outcome"] != "clean"
        seen["prefetch issued"] += any(op["op"] == "prefetch" and s == "." for op, s in zip(
            doc["ops"], got["status"], strict=False))
        seen["prefetch_hit applied"] += any(op["op"] == "prefetch_hit" and s == "." for op, s in zip(
            doc["ops"], got["status"], strict=False))
        seen["host hit loaded back"] += any(line.split()[2] == "v=1" and " h=1 " in line for line in got["tree"])
    assert bad == []
    assert all(seen[k] >= 50 for k in ("page 2", "raised", "prefetch issued", "prefetch_hit applied")), seen


def test_real_prints_the_model_beside_the_real_code(real, capsys):
    assert main(["real", "scenario_b", "--sglang-version", "0.5.17", "--preset", "main_2026_06", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["scenario"], doc["preset"], doc["source"], doc["differ"]) == ("scenario_b", "main_2026_06",
                                                                              PINNED_LABEL, [])
    assert list(doc["real"]) == [*FIELDS, "chain_lines", "source"]
    assert doc["real"]["chain_lines"][-1] == "hi_mamba_radix_cache.py:_evict_host_leaf:629"
    assert doc["real"]["chain"] == ["evict", "_evict_device_leaf", "write_backup", "evict_host", "_evict_host_leaf"]
    assert doc["real"]["double_frees"] == [dict(pool="device_kv", slots=[0, 1],
                                                chain=["_evict_to_host", "_evict_device_leaf", "evict"])]
    assert (doc["real"]["first_stale"], doc["real"]["stale_final"]) == (3, [])
    assert main(["real", "scenario_c", "--sglang-version", "0.5.17", "--preset", "main_2026_06"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["scenario_c: the model beside the real code", "  model: preset main_2026_06",
                       f"  real:  {PINNED_LABEL} (loading its files ran their code)"]
    assert out[4:7] == ["* outcome       model: AssertionError: parent does not have child key, 1",
                        "                real:  clean",
                        "* sig           model: AssertionError: parent does not have child key in "
                        "_delete_tombstone_leaf"]
    assert out[-1] == "13 of 15 fields differ (marked *)"


def test_run_states_the_real_outcome_in_its_header(real, capsys):
    assert main(["run", "scenario_b", "--preset", "main_2026_06", "--against-real", "0.5.17"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"real code, {PINNED_LABEL}: AssertionError: parent does not have child key, 1 in _evict_host_leaf at op 5; "
        f"the model agrees on every field",
        "scenario_b under main_2026_06  (schedule: A B mem*2 C mem2)"]
    assert main(["run", "scenario_c", "--preset", "main_2026_06", "--against-real", "0.5.17", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["real"]["outcome"] == "clean" and doc["real"]["differ"][:3] == ["outcome", "sig", "raised_in"]


def test_against_real_runs_the_same_window_as_a_run_narrowed_by_ops(real, capsys):
    assert main(["run", "crash_pr", "--preset", RELEASE, "--ops", "0:3", "--against-real", "0.5.17",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["status"], doc["real"]["status"], doc["real"]["differ"]) == ("...", "...", [])
    assert main(["run", "crash_pr", "--preset", RELEASE, "--ops", "1:3", "--against-real", "0.5.17"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"real code, {PINNED_LABEL}, narrowed to operations 1..2 of 0..11 (--ops 1:3): 0..0 ran untraced, 3..11 never "
        f"ran: clean in this window; the model agrees on every field")


def test_the_real_side_runs_under_the_memory_limit(real, capsys, monkeypatch):
    import simcache.trace.memory as memory

    big = from_doc({"config": {"device_kv": 200_000, "host_kv": 200_000},
                    "ops": [{"op": "request", "tokens": list(range(1, 100_001))}, {"op": "events"}]})
    readings = iter([300.0, 300.0])  # the watch's start and the set-up; then each reading 400 MB more
    monkeypatch.setattr(memory, "rss_mb", lambda: next(readings, None) or 700.0)
    with pytest.raises(TraceLimitError) as e:
        run_real(big, real, memory_limit_mb=100)
    assert str(e.value) == (
        "the real code's run outgrew the memory limit of 100 MB (it added 400 MB to the 300 MB the process held when "
        "it started) at operation 0; make the scenario's pools or its longest request smaller, or raise the limit "
        "with --memory-limit MB")
    assert "sglang" not in sys.modules  # the load's modules put aside again
    monkeypatch.setattr(memory, "rss_mb", lambda: 300.0)
    assert run_real(big, real, memory_limit_mb=100)["status"] == ".."


def test_explore_confirms_or_prints_a_disagreement_never_hides_it(real, capsys):
    assert main(["explore", "scenario_b", "--preset", "main_2026_06", "--bound", "0", "--confirm-real", "0.5.17",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["confirm_real"]
    assert doc["source"] == PINNED_LABEL and doc["disagreements"] == 0
    assert [r["verdict"] for r in doc["results"]] == ["confirmed", "confirmed"]
    assert doc["lines"] == [
        "  confirmed       first failure with AssertionError: not backuped, node.id=# @ _evict_to_host: the real code "
        "raises AssertionError: not backuped, node.id=7 in _evict_to_host at op 1",
        "  confirmed       first failure with AssertionError: parent does not have child key, 1 @ _evict_host_leaf: "
        "the real code raises AssertionError: parent does not have child key, 1 in _evict_host_leaf at op 5"]
    # main_2026_06 finds a failure 0.5.17 does not have (its prefetch reserves no host KV at issue): shown, not
    # hidden, and the exit status is 1 so that CI notices
    assert main(["explore", "scenario_c", "--preset", "main_2026_06", "--bound", "1", "--confirm-real",
                 "0.5.17"]) == 1
    out = capsys.readouterr().out.splitlines()
    at = out.index(f"  on the real code, {PINNED_LABEL}:")
    assert out[at + 1:] == [
        "  DISAGREEMENT    first failure with AssertionError: non-leaf, node.id=# @ _evict_regular (pf R6 pf mem): the "
        "model says AssertionError: non-leaf, node.id=# @ _evict_regular; the real code says clean (not reproduced)"]


@needs_preset
def test_explore_confirm_real_confirms_every_gallery_failure_the_release_preset_finds(real, capsys):
    confirmed = 0
    for name in gallery():
        assert main(["explore", name, "--preset", RELEASE, "--strategy", "random", "--budget", "40", "--seed", "3",
                     "--confirm-real", "0.5.17", "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)["confirm_real"]
        assert doc["disagreements"] == 0, (name, doc["lines"])
        confirmed += len(doc["results"])
    assert confirmed >= 3  # the seeded search finds failures in several scenarios, each replayed
