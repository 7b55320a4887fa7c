"""The command line: ``simcache scenarios`` and ``simcache run`` (docs/cli.md), exit status 0 for any outcome.

Bad calls (status 2) are in test_bad_input.py; the gallery's outcomes in test_gallery.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcache.cli import main
from simcache.scenario import gallery, load, unified_gallery
from simcache.versions import PRESETS


def cli(capsys, *argv) -> tuple[int, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert err == ""
    return rc, out


def test_scenarios_lists_the_gallery_with_its_expected_outcomes(capsys):
    rc, out = cli(capsys, "scenarios", "--json")
    items = json.loads(out)
    assert rc == 0 and [i["name"] for i in items] == [*gallery(), *unified_gallery()]  # HiMamba's, then unified
    for item in items:
        sc = load(item["name"])
        assert {k: v for k, v in item.items() if k != "damage"} == {
            "name": sc.name, "title": sc.title, "reference": sc.reference, "schedule": sc.schedule,
            "expect": {p: e["outcome"] for p, e in sc.expect.items()}}
    assert items[0]["damage"]["described_fix"] == ["double free device_kv[0, 1]", "leaked host_kv[1, 2]"]
    rc, text = cli(capsys, "scenarios")
    assert rc == 0
    lines = text.splitlines()
    # issue #13: the damage a clean-looking run leaves is shown, one preset a line
    assert lines[0].split()[0] == "crash_pr" and [x.strip() for x in lines[1:7]] == [
        "pre_fix       assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]",
        "described_fix no assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]",
        "reviewed_fix  no assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]",
        "merged_fix    assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]",
        "followup_fix  assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]",
        "main_2026_06  assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]"]
    assert lines[-2].startswith("presets: pre_fix = the code before the fix")
    assert all(f"{p} = " in lines[-2] for p in PRESETS)
    assert lines[-1].startswith("unified presets (SGLang's UnifiedRadixCache): unified_0_5_16 = release 0.5.16")


def test_run_prints_a_transcript_and_exits_0_whether_or_not_the_cache_crashed(capsys):
    rc, out = cli(capsys, "run", "scenario_d", "--preset", "merged_fix")
    assert rc == 0
    assert out.splitlines()[0] == "scenario_d under merged_fix  (schedule: mem*2)"
    assert out.splitlines()[-2:] == ["outcome: no assertion; no damage",
                                     "key: . applied; ~ the first invariant violation"]
    rc, out = cli(capsys, "run", "scenario_d")  # no --preset, no preset in the file: pre_fix
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "scenario_d under pre_fix  (schedule: mem*2)"
    at = lines.index("outcome: AssertionError: parent does not have child key, 1  (raised in _delete_tombstone_leaf)")
    assert lines[at + 1:] == [  # the raising stack, frame by frame, then the key to the symbols
        "traceback, outermost call first:", "  evict()", "    _evict_device_leaf()", "      _evict_regular()",
        "        _iteratively_delete_tombstone_leaf()", "          _delete_tombstone_leaf()",
        "            AssertionError: parent does not have child key, 1",
        "key: . applied; x raised (the simulated cache's assertion); ! a node went stale or a detached node was "
        "re-admitted; ~ the first invariant violation"]


def test_a_flag_overrides_the_preset_and_the_json_shows_the_effective_flags(capsys):
    _, out = cli(capsys, "run", "scenario_d", "--preset", "merged_fix", "--flag", "host_leaf_predicate=loop_old",
                 "--json")
    j = json.loads(out)
    assert (j["preset"], j["flags"]["host_leaf_predicate"], j["outcome"], j["raised_in"]) == \
           ("merged_fix", "loop_old", "assertion", "_delete_tombstone_leaf")
    _, out = cli(capsys, "run", "scenario_c", "--preset", "merged_fix", "--flag", "stale_guards=true",
                 "--flag", "guard_before_asserts=on", "--json")
    j = json.loads(out)
    assert j["flags"]["stale_guards"] is True and j["flags"]["guard_before_asserts"] is True
    assert j["outcome"] == "clean" and len(j["cleaned_up"]) == 1


def test_a_schedule_on_the_command_line_replaces_the_scenarios(capsys):
    _, out = cli(capsys, "run", "scenario_a", "--schedule", "mem*2 l3", "--json")
    j = json.loads(out)
    assert (j["schedule"], j["status"], j["outcome"]) == ("mem*2 l3", "....", "clean")
    _, out = cli(capsys, "run", "scenario_a", "--schedule", "mem", "--json")  # a partial schedule
    assert json.loads(out)["status"] == ".."  # the injection, then one operation


def test_run_accepts_a_file_path(capsys, tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("config: {host_kv: 2}\nactors:\n  R1: [request 1 2 3]\n  mem: [evict 3]\n")
    rc, out = cli(capsys, "run", str(f))
    assert rc == 0 and out.splitlines() == [
        "mine under pre_fix  (schedule: R1 mem)",
        "  0 . R1: request [1,2,3]",
        "  1 . mem: evict n=3",
        "outcome: no assertion; no damage",
        "key: . applied",
    ]


def test_help_exits_0(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    assert e.value.code == 0
    assert "--schedule" in capsys.readouterr().out


def test_every_run_json_field_and_exit_status_is_documented(capsys):
    docs = Path(__file__).resolve().parent.parent / "docs"
    _, out = cli(capsys, "run", "scenario_a", "--json")
    scenarios_md = (docs / "scenarios.md").read_text()
    for key in json.loads(out):
        assert f"| `{key}` |" in scenarios_md, key
    cli_md = (docs / "cli.md").read_text()
    for status in ("| 0 |", "| 2 |", "| 130 |"):
        assert status in cli_md
