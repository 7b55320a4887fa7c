"""Issue #39 on SGLang's own ``UnifiedRadixCache``: the prefetch-refill race fails on 0.5.16 and is gone in 0.5.17.

The releases' files come from their wheels, fetched once into simcache's cache folder and checked against the
pinned sha256; without the package index the tests are skipped with one sentence.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from simcache.real.source import SourceError
from simcache.real.unified import TARGETS, load_unified, target_for
from simcache.real.unified.race import run_race

_LOADED: dict = {}
DOC = Path(__file__).resolve().parent.parent / "docs" / "unified.md"


def loaded(version: str):
    if version not in _LOADED:
        try:
            _LOADED[version] = load_unified(version)
        except SourceError as e:
            if "cannot reach" in str(e) or "HTTP" in str(e):
                pytest.skip(f"the package index cannot be reached, so the {version} wheel cannot be fetched: {e}")
            raise
    return _LOADED[version]


def test_targets_name_each_versions_files_and_layout():
    t16, t17 = target_for("0.5.16"), target_for("0.5.17")
    assert (t16.layout, t16.late_host_alloc, t17.layout, t17.late_host_alloc) == (
        "components", True, "tree_core", True)
    assert "sglang/srt/mem_cache/unified_cache_components/__init__.py" in t16.files
    assert "sglang/srt/mem_cache/unified_cache/unified_tree_core.py" in t17.files
    assert "sglang/srt/mem_cache/unified_cache/components/__init__.py" in t17.files
    assert target_for("7f67965b") is TARGETS["7f67965b4"]
    assert not target_for("0.5.15").late_host_alloc
    with pytest.raises(KeyError, match="no unified target for '0.5.12'; covered: 7f67965b4, 0.5.13"):
        target_for("0.5.12")


def test_the_race_fails_on_0_5_16_with_a_double_free_and_assert_v_eq_node():
    r = run_race(loaded("0.5.16"), "write_through")
    assert [o.ok for o in r.outcomes] == [True] * 6 + [False]
    bad = r.failed
    assert (bad.step, bad.error, bad.message) == ("6 evict(2)", "AssertionError", "")
    assert [(f.file.rsplit("/", 1)[-1], f.line, f.function) for f in bad.chain] == [
        ("unified_radix_cache.py", 622, "evict"), ("full_component.py", 146, "drive_eviction"),
        ("unified_radix_cache.py", 1517, "_evict_device_leaf"),
        ("unified_radix_cache.py", 1315, "_remove_leaf_from_parent")]
    assert bad.chain[-1].text == "assert v == node"
    assert r.refill == "hung under [1,2], which is not backed up"
    assert r.stale == ("after step 4: the host leaf set holds detached [9,9]",
                       "after step 5: the device leaf set holds detached [1,2]")
    assert r.double_frees == ("device_kv slots [0, 1] via evict_component <- _evict_component_and_detach_lru <- "
                              "_evict_device_leaf <- drive_eviction <- evict",)
    assert r.verdict == "FAILS: AssertionError in _remove_leaf_from_parent"
    row = next(ln for ln in DOC.read_text().split("\n") if ln.startswith("| 0.5.16 |"))
    assert "same, at `unified_radix_cache.py:1315`" in row and row.endswith("| clean |")  # docs/unified.md's table


def test_0_5_17_drops_the_refill_under_write_through_and_runs_clean():
    r = run_race(loaded("0.5.17"), "write_through")
    assert r.verdict == "clean" and r.refill == "dropped"
    assert [o.step.split()[0] for o in r.outcomes] == ["1", "1b", "2", "3", "4", "5", "6"]
    assert r.stale == () and r.double_frees == ()
    assert r.outcomes[5].returned == "0"  # evict_host(2) finds nothing to evict: no [9,9] was ever hung
    row = next(ln for ln in DOC.read_text().split("\n") if ln.startswith("| 0.5.17 |"))
    assert "| clean: the refill is dropped (#31902) | clean |" in row  # docs/unified.md's table


@pytest.mark.parametrize("version", ["0.5.16", "0.5.17"])
def test_under_write_back_the_refill_is_hung_but_the_unbacked_parent_is_backed_up_before_it_leaves(version):
    r = run_race(loaded(version), "write_back")
    assert r.verdict == "clean" and r.refill == "hung under [1,2], which is not backed up"
    assert r.stale == () and r.double_frees == ()
    # the evictions backed [1,2] and [3,4] up and demoted them to the host; their L3 backups hold host locks
    assert r.snapshot[:2] == (
        "[1,2] kv=- host=2,3 mamba=- mamba_host=- lock=0 host_lock=1",
        "  [3,4] kv=- host=0,1 mamba=- mamba_host=1 lock=0 host_lock=1")


def _race_ops():
    from simcache.operations import parse_op

    return [(None, parse_op(s, "t")) for s in ("prefetch 1 2 9 9", "request 1 2 3 4", "prefetch_done 4 hit",
                                                  "evict 3", "evict_host 2", "evict 2")]


def _race_scenario(policy: str):
    from simcache.scenario import from_doc

    return from_doc(dict(
        name="t", config=dict(policy=policy, storage=True, prefetch_threshold=1, device_kv=16, device_mamba=8,
                              host_kv=4, host_mamba=4), ops=["evict 0"]), "t")


def test_run_unified_gives_run_ops_fields_for_any_operation_list():
    """The operation vocabulary on the real unified class (the prefetch's L3 hit count arrives before the request,
    so its host KV is reserved when the request's backup runs)."""
    from simcache.real.unified.run import run_unified

    ops = _race_ops()
    ops.insert(1, (None, {"op": "prefetch_hit", "n": 4}))
    r = run_unified(_race_scenario("write_through"), loaded("0.5.16"), ops=ops)
    assert (r["outcome"], r["status"], r["step"], r["first_stale"]) == ("AssertionError: ", "......x", 6, 4)
    assert r["chain"] == ["evict", "drive_eviction", "_evict_device_leaf", "_remove_leaf_from_parent"]
    assert r["counters"]["full_evictable"] == -2 and r["tree"] == []
    assert r["double_frees"] == [dict(pool="device_kv", slots=[0, 1], chain=[
        "evict_component", "_evict_component_and_detach_lru", "_evict_device_leaf", "drive_eviction", "evict"])]
    assert r["accounting"]["device_kv"]["duplicated_in_free_list"] == [0, 1]
    clean = run_unified(_race_scenario("write_through"), loaded("0.5.17"), ops=ops)
    assert (clean["outcome"], clean["status"], clean["double_frees"], clean["tree"]) == ("clean", ".......", [], [])


def test_simcache_real_runs_the_unified_class_for_a_unified_preset(tmp_path, capsys):
    from simcache.cli import main

    loaded("0.5.16")
    scn = tmp_path / "race.yaml"
    scn.write_text("name: unified_race\nconfig: {policy: write_through, storage: true, prefetch_threshold: 1, "
                   "device_kv: 16, device_mamba: 8, host_kv: 4, host_mamba: 4}\nops: ['prefetch 1 2 9 9', "
                   "'prefetch_hit 4', 'request 1 2 3 4', 'prefetch_done 4 hit', 'evict 3', 'evict_host 2', "
                   "'evict 2']\n")
    assert main(["real", str(scn), "--sglang-version", "0.5.16", "--preset", "unified_0_5_16", "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert (doc["preset"], doc["differ"], doc["real"]["outcome"], doc["real"]["step"]) == (
        "unified_0_5_16", [], "AssertionError: ", 6)
    assert doc["model"]["chain"] == ["evict", "drive_eviction", "_evict_device_leaf", "_remove_leaf_from_parent"]
    assert main(["real", str(scn), "--sglang-version", "0.5.16", "--preset", "unified_9"]) == 2
    assert capsys.readouterr().err.strip() == ("simcache: --preset 'unified_9' is not a unified preset; choose one "
                                               "of unified_0_5_16, unified_0_5_17")


@pytest.mark.parametrize("version, preset, outcome", [("0.5.16", "unified_0_5_16", "AssertionError: "),
                                                      ("0.5.17", "unified_0_5_17", "clean")])
def test_a_unified_gallery_scenario_without_preset_runs_the_unified_class_of_that_release(version, preset, outcome,
                                                                                        capsys):
    from simcache.cli import main

    loaded(version)
    assert main(["real", "unified_refill", "--sglang-version", version, "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)  # never HiMamba's dead class, never a refusal to pick a preset
    assert (doc["scenario"], doc["preset"], doc["differ"], doc["real"]["outcome"]) == (
        "unified_refill", preset, [], outcome)


@pytest.mark.parametrize("argv", [[], ["--all", "--git", "x"]])
def test_the_race_command_says_which_sglang_to_run_instead_of_fetching_every_wheel(argv, capsys):
    """review1 #15: with no version it fetched all seven release wheels; now it asks, and ``--all`` runs them all."""
    from simcache.real.unified.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().split("\n")[-1] == (
        "python -m simcache.real.unified: error: say which code to run, one of: --sglang-version X.Y.Z (repeatable), "
        "--all (every covered release, about 110 MB of wheels on a first run), --sglang PATH --as VERSION, or --git "
        "MIRROR")


def test_the_write_back_failure_the_docs_show_is_the_real_codes_on_0_5_16_and_clean_on_0_5_17():
    """docs/unified.md's YAML (under write-back, 0.5.16): the model and the real code agree on it, field for field;
    it fails in ``_iteratively_delete_tombstone_leaf`` on 0.5.16 and runs clean on 0.5.17."""
    from simcache.config import check_settings
    from simcache.real.run import FIELDS
    from simcache.real.unified.run import run_unified
    from simcache.unified import run_model

    doc, scenario, ops = _doc_scenario("write_back_unguarded_anchor")
    got = {}
    for preset, release in (("unified_0_5_16", "0.5.16"), ("unified_0_5_17", "0.5.17")):
        real = run_unified(scenario, loaded(release), ops=ops)
        model = run_model(check_settings(doc["config"]), ops, preset)
        assert {k: model[k] for k in FIELDS} == {k: real[k] for k in FIELDS}
        got[release] = real
    assert (got["0.5.16"]["status"], got["0.5.16"]["first_stale"], got["0.5.16"]["chain"]) == (
        "......x", 4, ["evict_host", "drive_host_eviction", "_evict_host_leaf", "_iteratively_delete_tombstone_leaf",
                      "_remove_leaf_from_parent"])
    assert (got["0.5.17"]["outcome"], got["0.5.17"]["status"]) == ("clean", ".......")


def _doc_scenario(name: str):
    from simcache.real.run import linear_ops
    from simcache.safe_yaml import load_yaml
    from simcache.scenario import from_doc

    text = DOC.read_text()
    block = text[text.index(f"```yaml\nname: {name}"):]
    doc = load_yaml(block[len("```yaml\n"): block.index("\n```")], "docs/unified.md")
    scenario = from_doc(doc, name)
    return doc, scenario, linear_ops(scenario)


def test_a_prefetch_the_scheduler_would_issue_still_reaches_the_race_on_0_5_16():
    """docs/unified.md's "Does a live scheduler get there?": the prefetch anchors on a backed-up node, a request
    that finishes meanwhile hangs the never-backed-up parent under it, and 0.5.16 fails as in issue #39 (0.5.17:
    clean), on the real code and the model alike."""
    from simcache.config import check_settings
    from simcache.real.run import FIELDS
    from simcache.real.unified.run import run_unified
    from simcache.unified import run_model

    doc, scenario, ops = _doc_scenario("refill_under_a_later_request")
    cfg = check_settings(doc["config"])
    issued = run_model(cfg, ops[:2], "unified_0_5_16")
    assert issued["inflight"]["prefetch"] == 1 and issued["tree"][0].startswith("1 2 v=1 h=1 ")  # anchor [2]: backed up
    got = {}
    for preset, release in (("unified_0_5_16", "0.5.16"), ("unified_0_5_17", "0.5.17")):
        real = run_unified(scenario, loaded(release), ops=ops)
        assert {k: run_model(cfg, ops, preset)[k] for k in FIELDS} == {k: real[k] for k in FIELDS}
        got[release] = real
    assert (got["0.5.16"]["status"], got["0.5.16"]["first_stale"], got["0.5.16"]["chain"]) == (
        "......x", 5, ["evict", "drive_eviction", "_evict_device_leaf", "_remove_leaf_from_parent"])
    assert (got["0.5.17"]["outcome"], got["0.5.17"]["status"]) == ("clean", ".......")
