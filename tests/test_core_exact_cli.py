"""cli.py compared whole: every command's --help against docs/cli.md's reference, each small parser's values and
refusals, what each command hands the code under it (recorded on the way through to the real code), its output,
and ``main``'s exit statuses and sentences for bad input, Ctrl-C, a closed reader and a full disk."""
from __future__ import annotations

import errno
import importlib
import importlib.util
import io
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from spies import record_calls

from simcache import cli
from simcache.cli import (
    MAX_MEMORY_LIMIT_MB,
    _compare_names,
    _drop_stdout,
    _flags,
    _guard_signed,
    _ops,
    _preset,
    _say,
    _schedule,
    _trace_options,
    main,
    one_line,
)
from simcache.cli_numbers import MAX_WORKLOAD_TURNS, UsageError
from simcache.errors import ConfigError, ScenarioError, SimcacheError
from simcache.presets import ALL_PRESETS
from simcache.scenario import gallery, load, unified_gallery
from simcache.transcript import transcript
from simcache.versions import PRESET_DESCRIPTIONS, PRESETS

ROOT = Path(__file__).resolve().parent.parent
simulate_module = importlib.import_module("simcache.simulate")  # the package re-exports the function by this name


@pytest.fixture(autouse=True)
def _default_memory_limit(monkeypatch):
    """A developer's $SIMCACHE_MEMORY_LIMIT_MB must not change what these runs are handed."""
    monkeypatch.delenv("SIMCACHE_MEMORY_LIMIT_MB", raising=False)


def _cli_help():
    spec = importlib.util.spec_from_file_location("cli_help", ROOT / "scripts" / "cli_help.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_main(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --- the help: every option explained, and the docs' reference the parser's own text ----------------------------

def test_every_option_of_every_command_has_help():
    parser = cli.build_parser()
    sub = next(a for a in parser._subparsers._group_actions if a.dest == "command")
    assert list(sub.choices) == ["run", "scenarios", "export", "explore", "workload", "real"]
    missing = [(name, act.dest) for name, p in sub.choices.items() for act in p._actions if not act.help]
    assert missing == []


def test_the_docs_reference_is_each_commands_help():
    helper = _cli_help()
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    written = doc[doc.index(helper.BEGIN):doc.index(helper.END) + len(helper.END)]
    if helper.python_line() not in written:  # another Python lays the same parser out differently
        pytest.skip(f"docs/cli.md's help was written with another Python than {sys.version.split()[0]}")
    assert written == helper.section(), "docs/cli.md is out of date: run .venv/bin/python scripts/cli_help.py"
    assert "usage: simcache run [-h] [--preset PRESET]" in written and helper.COMMANDS == (
        "run", "scenarios", "export", "explore", "workload", "real")


def test_a_parser_mistake_is_one_sentence_pointing_at_the_right_help(capsys):
    assert run_main(capsys, "run") == (2, "", "simcache: the following arguments are required: scenario; see "
                                              "`python -m simcache run --help`\n")
    assert run_main(capsys, "--verbose") == (2, "", "simcache: unrecognized arguments: --verbose; see "
                                                    "`python -m simcache --help`\n")
    said = run_main(capsys, "explore", "scenario_a", "--strategy", "dfs")[2]  # argparse's own words vary by version
    assert said.startswith("simcache: argument --strategy: invalid choice: 'dfs' (choose from ")
    assert said.endswith("pct'); see `python -m simcache explore --help`\n") or said.endswith(
        "pct); see `python -m simcache explore --help`\n")
    assert run_main(capsys) == (2, "", "simcache: give a command: run, scenarios, explore, export or workload "
                                       "(see --help)\n")


# --- the small parsers -------------------------------------------------------------------------------------------

def test_flags_presets_and_schedules():
    assert _flags(None) == {} and _flags([]) == {}
    assert _flags(["stale_guards=true", "forward_chunked=0"]) == {"stale_guards": True, "forward_chunked": False}
    assert [_preset(p) for p in (None, *ALL_PRESETS)] == [None, *ALL_PRESETS]  # --preset: either family
    with pytest.raises(UsageError) as e:
        _preset("newest")
    assert str(e.value) == f"unknown preset 'newest'; choose one of {', '.join(ALL_PRESETS)}"
    with pytest.raises(UsageError) as e:
        _preset("p" * 70)
    assert str(e.value) == (f"unknown preset '{'p' * 59}... (72 characters); choose one of {', '.join(ALL_PRESETS)}")
    assert [_schedule(t) for t in (None, "R1", " R1 ")] == [None, "R1", " R1 "]
    for empty in ("", " \t"):
        with pytest.raises(UsageError) as e:
            _schedule(empty)
        assert str(e.value) == ("--schedule is empty; give actor turns like 'R1 R2*2 ctl*', or leave it out for the "
                                "scenario's own schedule")


def test_ops_windows():
    assert [_ops(t) for t in (None, "3:", ":5", "1:2", " 10:20\n", ":", "0:0", "9" * 18 + ":", ":" + "0" * 18)] == [
        None, (3, None), (None, 5), (1, 2), (10, 20), (None, None), (0, 0), (10**18 - 1, None), (None, 0)]
    for text, message in (("9" * 19 + ":", "--ops A has 19 digits, over the limit of 18 (999,999,999,999,999,999); "
                                           "give a smaller number, or leave A out for the start"),
                          (":" + "9" * 40, "--ops B has 40 digits, over the limit of 18 (999,999,999,999,999,999); "
                                           "give a smaller number, or leave B out for the end"),
                          ("-1:2", "--ops -1:2 starts below 0: operations are numbered from 0, like --ops 0:2"),
                          (" -1:", "--ops -1: starts below 0: operations are numbered from 0, like --ops 0:500"),
                          ("-" + "1" * 40 + ":", "--ops '-1111111111111111111111111111... (44 characters) starts "
                                                 "below 0: operations are numbered from 0, like --ops 0:500")):
        with pytest.raises(UsageError) as e:
            _ops(text)
        assert str(e.value) == message, text
    for bad in ("a:b", "1-2", "1", "１:2", "1:2:3", "", "x" * 40, "1:-2", "--1:2"):
        with pytest.raises(UsageError) as e:
            _ops(bad)
        said = repr(bad) if len(repr(bad)) <= 30 else f"{repr(bad)[:30]}... ({len(repr(bad))} characters)"
        assert str(e.value) == ("--ops takes A:B (operation numbers from 0 in plain digits, B excluded), like "
                                f"--ops 0:500, not {said}"), bad


def test_trace_options():
    assert _trace_options(NS()) == dict(ops=None, memory_limit_mb=None, progress=None)
    assert _trace_options(NS(ops="2:", memory_limit="2048", progress=True)) == dict(
        ops=(2, None), memory_limit_mb=2048.0, progress=True)
    assert _trace_options(NS(ops=None, memory_limit="0.5", progress=False)) == dict(
        ops=None, memory_limit_mb=0.5, progress=None)
    assert _trace_options(NS(memory_limit=str(MAX_MEMORY_LIMIT_MB)))["memory_limit_mb"] == 1_048_576.0
    assert MAX_MEMORY_LIMIT_MB == 1 << 20
    for bad in ("lots", "0", "-1", str(MAX_MEMORY_LIMIT_MB + 1), "1e9", "-0", "nan", "inf", "1_0", "+5", "",
                "9" * 12 + "." + "9" * 12 + "e+99"):
        with pytest.raises(SimcacheError) as e:
            _trace_options(NS(memory_limit=bad))
        said = bad if bad and len(bad) <= 30 else repr(bad) if len(repr(bad)) <= 30 else \
            f"{repr(bad)[:30]}... ({len(repr(bad))} characters)"
        assert str(e.value) == ("--memory-limit takes megabytes above 0 and at most 1,048,576 (plain digits like "
                                f"2048, 0.5 or 1e3), not {said}; e.g. --memory-limit 2048"), bad


def test_compare_names():
    assert _compare_names("pre_fix,followup_fix") == ["pre_fix", "followup_fix"]
    assert _compare_names(" merged_fix , pre_fix ") == ["merged_fix", "pre_fix"]
    for bad in ("pre_fix", "pre_fix,", ",pre_fix", "a,b,c", "", " , "):
        with pytest.raises(UsageError) as e:
            _compare_names(bad)
        assert str(e.value) == "--compare takes two presets separated by a comma, like pre_fix,followup_fix", bad
    with pytest.raises(UsageError) as e:
        _compare_names("pre_fix,newest")
    assert str(e.value).startswith("unknown preset 'newest'; choose one of pre_fix")


def test_signed_numbers_are_kept_as_values():
    argv = ["-inf", "-Infinity", "-NaN", "-1e3", "-1.5E+2", "-.5e-1", "-5", "-1.5", "--x", "-e3", "inf", "-1e", 7]
    assert _guard_signed(argv) == [" -inf", " -Infinity", " -NaN", " -1e3", " -1.5E+2", " -.5e-1", "-5", "-1.5",
                                   "--x", "-e3", "inf", "-1e", 7]
    assert _guard_signed(["-1:3", "-:", "-12:", "-1:2:3", "-a:1"]) == [" -1:3", " -:", " -12:", "-1:2:3", "-a:1"]


def test_one_line():
    assert one_line("a\nb\tc\x00d\x1be") == "a\\nb\\tc\\x00d\\x1be"
    assert one_line("ok é ü 'q' \\") == "ok é ü 'q' \\"  # printable: kept as it is, a backslash too
    word = "w" * 201
    assert one_line(f"x {word} y") == f"x {'w' * 40}... (201 characters) y"
    assert one_line("v" * 200) == "v" * 200
    assert one_line("z" * 2_000) == f"{'z' * 40}... (2,000 characters)"
    assert one_line("abcdef ab", word=5) == "abcdef... (6 characters) ab"
    assert one_line("abcde", word=5) == "abcde"


# --- what each command hands the code under it -------------------------------------------------------------------

@pytest.fixture
def simulations(monkeypatch):
    return record_calls(monkeypatch, simulate_module, "simulate")


def test_run_prints_the_transcript_or_the_json_of_the_run_it_asked_for(capsys, simulations):
    rc, out, err = run_main(capsys, "run", "scenario_a", "--preset", "merged_fix", "--flag", "stale_guards=true",
                            "--schedule", "l3 mem*2", "--ops", "1:", "--memory-limit", "3000", "--progress")
    assert rc == 0 and err.startswith("\rsimulating:")  # --progress: tqdm's bar, forced on
    assert simulations[-1] == (("scenario_a", "merged_fix", {"stale_guards": True}, "l3 mem*2"), dict(
        snapshots=False, device="cpu", ops=(1, None), memory_limit_mb=3000.0, progress=True))
    run = simulate_module.simulate("scenario_a", "merged_fix", {"stale_guards": True}, "l3 mem*2", snapshots=False,
                                   ops=(1, None))
    assert out == transcript(run) + "\n"
    rc, out, err = run_main(capsys, "run", "scenario_a", "--json")
    assert (rc, err) == (0, "")
    assert simulations[-1] == (("scenario_a", None, {}, None), dict(snapshots=False, device="cpu", ops=None,
                                                                    memory_limit_mb=None, progress=None))
    assert json.loads(out) == simulate_module.simulate("scenario_a", snapshots=False).to_json()
    assert out == json.dumps(json.loads(out), indent=1) + "\n"


def test_scenarios_as_json_and_as_text(capsys):
    rc, out, err = run_main(capsys, "scenarios", "--json")
    items = json.loads(out)
    assert (rc, err, out) == (0, "", json.dumps(items, indent=1) + "\n")
    assert [i["name"] for i in items] == [*gallery(), *unified_gallery()]  # HiMamba's gallery, then the unified one
    assert items[-2]["expect"] == {"unified_0_5_16": "assertion", "unified_0_5_17": "clean"}  # unified_refill
    for item in items:
        sc = load(item["name"])
        assert (item["title"], item["reference"], item["schedule"]) == (sc.title, sc.reference, sc.schedule)
        assert set(item) == {"name", "title", "reference", "schedule", "expect", "damage"}
    a = next(i for i in items if i["name"] == "scenario_a")  # the recorded outcomes and damage, one preset each
    assert a["expect"] == {"pre_fix": "assertion", "described_fix": "clean", "reviewed_fix": "clean",
                           "merged_fix": "assertion", "followup_fix": "clean", "main_2026_06": "clean",
                           "release_0_5_17": "clean"}
    assert a["damage"] == {"pre_fix": [], "described_fix": ["leaked host_kv[0, 1]"],
                           "reviewed_fix": ["leaked host_kv[0, 1]"], "merged_fix": [], "followup_fix": [],
                           "main_2026_06": [], "release_0_5_17": []}
    b = next(i for i in items if i["name"] == "scenario_b")
    assert b["damage"]["described_fix"] == ["double free device_kv[0, 1]", "leaked host_kv[0, 1]"]
    expected = items
    rc, out, err = run_main(capsys, "scenarios")
    width = max(len(n) for n in [*gallery(), *unified_gallery()]) + 2
    lines = out.splitlines()
    first = expected[0]
    assert lines[0] == f"{first['name']:<{width}} {first['title']}"
    hurt = first["damage"]["pre_fix"]
    assert lines[1] == " " * width + f" {'pre_fix':<13} assertion" + (f"; damage: {'; '.join(hurt)}" if hurt else "")
    assert first["expect"]["described_fix"] != "assertion"  # crash_pr: the described fix hides the crash
    at = 1 + list(first["expect"]).index("described_fix")
    assert lines[at].startswith(" " * width + f" {'described_fix':<13} no assertion; damage: ")
    assert len(lines) == sum(1 + len(i["expect"]) for i in expected) + 3 and lines[-3] == ""
    assert lines[-2] == "presets: " + "; ".join(f"{p} = {d}" for p, d in PRESET_DESCRIPTIONS.items())
    assert lines[-1] == ("unified presets (SGLang's UnifiedRadixCache): unified_0_5_16 = release 0.5.16, before "
                         "#31902; unified_0_5_17 = release 0.5.17, #31902 drops a refill under a node never backed up")
    quiet = [i for i in expected if any(not d for d in i["damage"].values())]
    assert quiet, "some preset of some scenario leaves no damage: its line has no damage part"
    i = quiet[0]
    p = next(p for p, d in i["damage"].items() if not d)
    row = lines[lines.index(f"{i['name']:<{width}} {i['title']}") + 1 + list(i["expect"]).index(p)]
    assert row == " " * width + f" {p:<13} {'assertion' if i['expect'][p] == 'assertion' else 'no assertion'}"


@pytest.mark.parametrize("argv, sentence", [
    (["export"], "export needs a SCENARIO (a gallery name or a file), or --game for the levels page"),
    (["export", "scenario_a", "-o", "x.html", "--storyboard", "d"],
     "give either -o PAGE or --storyboard DIR, not both"),
    (["export", "scenario_a", "--preset", "pre_fix", "--compare", "pre_fix,merged_fix"],
     "give either --preset or --compare A,B, not both"),
    (["export", "scenario_a", "--tour", "crash_pr", "--compare", "pre_fix,merged_fix"],
     "a tour steps through one run's page; give --tour without --compare or --storyboard"),
    (["export", "scenario_a", "--tour", "crash_pr", "--storyboard", "d"],
     "a tour steps through one run's page; give --tour without --compare or --storyboard"),
    (["export", "scenario_a", "--schedule", " "],
     "--schedule is empty; give actor turns like 'R1 R2*2 ctl*', or leave it out for the scenario's own schedule"),
    (["export", "--game", "--preset", "pre_fix", "--flag", "stale_guards=true", "scenario_a"],
     "--game writes the levels page from the gallery; drop SCENARIO, --preset, --flag"),
    (["export", "--game", "--compare", "a,b", "--schedule", "R1", "--storyboard", "d", "--tour", "t"],
     "--game writes the levels page from the gallery; drop --compare, --schedule, --storyboard, --tour"),
])
def test_export_refusals(capsys, argv, sentence, simulations, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_main(capsys, *argv)
    assert (rc, out, err) == (2, "", f"simcache: {sentence}\n")
    assert simulations == [] and list(tmp_path.iterdir()) == []


def test_export_refuses_a_bad_tour_a_bad_page_and_a_bad_folder_before_any_run(capsys, simulations, tmp_path):
    rc, _, err = run_main(capsys, "export", "scenario_a", "--tour", "no_such_tour", "-o", str(tmp_path / "p.html"))
    assert rc == 2 and err.startswith("simcache: ") and "no_such_tour" in err
    (tmp_path / "page").mkdir()
    rc, _, err = run_main(capsys, "export", "scenario_a", "-o", str(tmp_path / "page"))
    assert (rc, err) == (2, f"simcache: -o must name a file, not the folder '{tmp_path / 'page'}'; e.g. -o run.html\n")
    (tmp_path / "board").mkdir()
    (tmp_path / "board" / "comment.md").mkdir()
    rc, _, err = run_main(capsys, "export", "scenario_a", "--storyboard", str(tmp_path / "board"))
    assert (rc, err) == (2, f"simcache: {tmp_path / 'board'} holds a folder named comment.md where a file goes; "
                            "choose another --storyboard\n")
    assert simulations == []


@pytest.fixture
def pages(monkeypatch):
    from simcache import export

    return record_calls(monkeypatch, export, "export_html", lambda a, kw: (*a, kw))


def test_export_one_run_and_a_comparison(capsys, simulations, pages, tmp_path, monkeypatch):
    page = tmp_path / "one.html"
    rc, out, err = run_main(capsys, "export", "scenario_a", "--preset", "merged_fix", "--flag", "stale_guards=true",
                            "--schedule", "l3 mem*2", "-o", str(page), "--ops", "0:2")
    assert (rc, out, err) == (0, f"{page}\n", "")
    assert simulations == [(("scenario_a", "merged_fix", {"stale_guards": True}, "l3 mem*2"), dict(
        device="cpu", ops=(0, 2), memory_limit_mb=None, progress=None))]
    (run, path, kw), = pages
    assert (path, kw) == (str(page), {"tour": None}) and run.preset == "merged_fix" and page.stat().st_size > 0
    pair = tmp_path / "two.html"
    rc, out, err = run_main(capsys, "export", "scenario_a", "--compare", "pre_fix, followup_fix", "-o", str(pair))
    assert (rc, out, err) == (0, f"{pair}\n", "")
    assert [a[1] for a, _ in simulations[1:]] == ["pre_fix", "followup_fix"]
    run, path, kw = pages[1]
    assert (run.preset, path, kw["compare"].preset) == ("pre_fix", str(pair), "followup_fix")


def test_export_with_a_tour_takes_its_preset_unless_one_is_given(capsys, simulations, pages, tmp_path):
    from simcache.tour import load as load_tour

    tour = load_tour("crash_pr")
    page = tmp_path / "t.html"
    assert run_main(capsys, "export", "crash_pr", "--tour", "crash_pr", "-o", str(page))[0] == 0
    assert simulations[0][0][1] == tour.preset and pages[0][2]["tour"].preset == tour.preset
    other = next(p for p in PRESETS if p != tour.preset)  # a preset given is used, and the tour refuses the run
    assert run_main(capsys, "export", "crash_pr", "--tour", "crash_pr", "--preset", other, "-o", str(page)) == (
        2, "", f"simcache: tour crash_pr is for crash_pr under {tour.preset}, not crash_pr under {other}; take it on a "
               f"run of crash_pr under {tour.preset}\n")
    assert simulations[1][0][1] == other


def test_export_to_stdout_prints_no_path(capsys, pages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a page named "-" would land here, not in the checkout
    rc, out, err = run_main(capsys, "export", "scenario_a", "-o", "-")
    assert rc == 0 and out.startswith("<!doctype html>") and out.endswith("</html>") and err == ""
    assert list(tmp_path.iterdir()) == []


def test_export_default_page_name(capsys, pages, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, "export", "scenario_a") == (0, "run.html\n", "")
    assert [p.name for p in tmp_path.iterdir()] == ["run.html"] and pages[0][1] == "run.html"


def test_export_a_storyboard(capsys, simulations, tmp_path, monkeypatch):
    from simcache import storyboard

    boards = []

    def board(run, folder, compare=None):
        boards.append((run.preset, folder, None if compare is None else compare.preset))
        return {"comment": Path(folder) / "comment.md", "gif": Path(folder) / "stale.gif"}

    monkeypatch.setattr(storyboard, "write_storyboard", board)
    folder = str(tmp_path / "b")
    assert run_main(capsys, "export", "scenario_a", "--storyboard", folder, "--preset", "merged_fix") == (
        0, f"{folder}/comment.md\n{folder}/stale.gif\n", "")
    assert run_main(capsys, "export", "scenario_a", "--storyboard", folder, "--compare", "pre_fix,merged_fix")[0] == 0
    assert boards == [("merged_fix", folder, None), ("pre_fix", folder, "merged_fix")]
    assert [a[1] for a, _ in simulations] == ["merged_fix", "pre_fix", "merged_fix"]


def test_export_the_game(capsys, monkeypatch, tmp_path):
    from simcache import game_map

    made = []

    def page(path, numbers, say=None):
        made.append((path, numbers))
        say("level 2 ready")
        return Path(path)

    monkeypatch.setattr(game_map, "game_page", page)
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, "export", "--game") == (0, "game.html\n", "[export] precomputing level(s) 1, 2, 3, 4, 5\n"
                                                                        "[export] level 2 ready\n")
    assert run_main(capsys, "export", "--game", "2,4", "-o", "g.html") == (
        0, "g.html\n", "[export] precomputing level(s) 2, 4\n[export] level 2 ready\n")
    assert run_main(capsys, "export", "--game", "3", "-o", "-") == (
        0, "", "[export] precomputing level(s) 3\n[export] level 2 ready\n")
    assert made == [("game.html", [1, 2, 3, 4, 5]), ("g.html", [2, 4]), ("-", [3])]
    rc, out, err = run_main(capsys, "export", "--game", "9")
    assert (rc, out, err) == (2, "", "simcache: there is no level 9; the levels are 1 to 5\n")


@pytest.fixture
def rates(monkeypatch):
    from simcache import workload

    return record_calls(monkeypatch, workload, "crash_rates", lambda a, kw: a)


def test_workload_hands_its_numbers_to_the_rates_and_prints_the_table(capsys, rates):
    from simcache.workload import table

    argv = ["workload", "--presets", "pre_fix", "followup_fix", "--pressures", "16", "0.5", "--streams", "10",
            "--requests", "32", "--seed", "4", "--jobs", "1"]
    rc, out, err = run_main(capsys, *argv, "--progress")
    (a,) = rates
    assert a[:5] == (["pre_fix", "followup_fix"], [16.0, 0.5], 10, 4, 1) and a[5].requests == 32 and a[6] is not None
    assert err.startswith("\rworkload: [") and err.endswith("\033[K\n")
    rows = json.loads(run_main(capsys, *argv, "--json")[1])
    assert rates[1][6] is None  # no bar asked for and stderr is not a terminal
    assert (rc, out) == (0, table(rows) + "\n")
    rc, out, _ = run_main(capsys, *argv, "--signatures")
    extra = [f"{r['preset']:>14} p={r['pressure']:<5g} {n:4d}  {sig}" for r in rows for sig, n in
             r["signatures"].items()]
    assert extra == ["       pre_fix p=16       1  AssertionError: parent does not have child key, 100 @ "
                     "_delete_tombstone_leaf"]
    assert out == table(rows) + "\n" + "".join(line + "\n" for line in extra)
    assert run_main(capsys, *argv, "--signatures", "--json")[1] == json.dumps(rows, indent=1) + "\n"


@pytest.mark.parametrize("argv, sentence", [
    (["--presets", "newest", "pre_fix", "x" * 50],
     f"unknown preset(s) 'newest', '{'x' * 39}... (52 characters); choose from {', '.join(PRESETS)}"),
    (["--presets", *[f"p{i}" for i in range(7)]],
     f"unknown preset(s) 'p0', 'p1', 'p2', 'p3', 'p4'; choose from {', '.join(PRESETS)}"),
    (["--presets", "pre_fix", "merged_fix", "pre_fix"], "--presets names a preset twice; name each once"),
    (["--pressures", *["1"] * 101], "--pressures takes at most 100 values"),
    (["--pressures", "1", "two"], "--pressures takes plain numbers like 0.5 1 2, not 'two'"),
    (["--streams", "100000", "--requests", "10000", "--presets", "pre_fix", "--pressures", "1"],
     f"this workload has 1,000,000,000 chat turns (streams x requests x presets x pressures); keep it under "
     f"{MAX_WORKLOAD_TURNS:,}"),
])
def test_workload_refusals(capsys, rates, argv, sentence):
    assert run_main(capsys, "workload", *argv) == (2, "", f"simcache: {sentence}\n")
    assert rates == []


def test_workload_at_its_turn_limit_runs(capsys, monkeypatch):
    from simcache import workload

    calls = []
    monkeypatch.setattr(workload, "crash_rates", lambda *a: calls.append(a) or [])
    monkeypatch.setattr(workload, "table", lambda rows: "TABLE")
    streams = MAX_WORKLOAD_TURNS // 10_000
    assert run_main(capsys, "workload", "--streams", str(streams), "--requests", "10000", "--presets", "pre_fix",
                    "--pressures", "1", "--progress") == (0, "TABLE\n", "")
    assert calls[0][2] == streams and calls[0][6] is not None
    assert run_main(capsys, "workload", "--streams", str(streams + 1), "--requests", "10000", "--presets",
                    "pre_fix", "--pressures", "1")[0] == 2
    assert run_main(capsys, "workload", "--streams", "1", "--requests", "1", "--presets", "pre_fix", "--pressures",
                    *[str(p) for p in range(1, 101)]) == (0, "TABLE\n", "")  # 100 pressures: the most allowed
    assert calls[1][1] == [float(p) for p in range(1, 101)] and calls[1][6] is None


# --- main's exits --------------------------------------------------------------------------------------------------

def test_a_mistake_is_said_with_a_lower_case_first_letter(capsys, monkeypatch):
    def refuse(message):
        def fn(a):
            raise ConfigError(message)
        return fn

    for message, said in (("Unknown thing; fix it", "unknown thing; fix it"), ("", "bad input"),
                          ("A\nB", "a\\nB"), ("x", "x")):
        monkeypatch.setattr(cli, "cmd_scenarios", refuse(message))
        assert run_main(capsys, "scenarios") == (2, "", f"simcache: {said}\n")
    monkeypatch.setattr(cli, "cmd_scenarios", lambda a: (_ for _ in ()).throw(ScenarioError("S" + "y" * 300)))
    assert run_main(capsys, "scenarios")[2] == f"simcache: s{'y' * 39}... (301 characters)\n"


def test_ctrl_c_a_closed_reader_and_a_full_disk(capsys, monkeypatch):
    dropped = []
    monkeypatch.setattr(cli, "_drop_stdout", lambda: dropped.append(True))

    def raising(exc):
        def fn(a):
            raise exc
        return fn

    monkeypatch.setattr(cli, "cmd_scenarios", raising(KeyboardInterrupt()))
    assert run_main(capsys, "scenarios") == (130, "", "simcache: interrupted (Ctrl-C); nothing was written\n")
    monkeypatch.setattr(cli, "cmd_scenarios", raising(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert run_main(capsys, "scenarios") == (0, "", "") and dropped == [True]
    for code in (errno.ENOSPC, errno.EBADF, errno.EIO, errno.EFBIG, errno.EDQUOT, errno.EINVAL):
        monkeypatch.setattr(cli, "cmd_scenarios", raising(OSError(code, os.strerror(code))))
        assert run_main(capsys, "scenarios") == (1, "", f"simcache: cannot write the output: {os.strerror(code)}; "
                                                        "free some space or write it elsewhere\n")
    assert len(dropped) == 7
    monkeypatch.setattr(cli, "cmd_scenarios", raising(OSError(errno.ENOSPC, None)))
    assert run_main(capsys, "scenarios")[2] == (f"simcache: cannot write the output: {OSError(errno.ENOSPC, None)}; "
                                                "free some space or write it elsewhere\n")
    for other in (OSError(errno.ENOSPC, "No space left on device", "/some/file"), OSError(errno.EACCES, "denied")):
        monkeypatch.setattr(cli, "cmd_scenarios", raising(other))
        with pytest.raises(OSError) as e:
            main(["scenarios"])
        assert e.value is other
    assert len(dropped) == 8


def test_the_result_goes_through_stdout_flush(capsys, monkeypatch):
    flushed = []

    class Out(io.StringIO):
        def flush(self):
            flushed.append(self.getvalue())
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli, "_drop_stdout", lambda: None)
    monkeypatch.setattr(sys, "stdout", Out())
    monkeypatch.setattr(cli, "cmd_scenarios", lambda a: print("done") or 0)
    assert main(["scenarios"]) == 1
    assert flushed == ["done\n"]
    assert capsys.readouterr().err == ("simcache: cannot write the output: No space left on device; free some space "
                                       "or write it elsewhere\n")


def test_a_closed_or_missing_stdout_is_said_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(cli, "build_parser", lambda: pytest.fail("parsed with no stdout"))
    closed = io.StringIO()
    closed.close()
    for out in (None, closed):
        monkeypatch.setattr(sys, "stdout", out)
        assert main(["scenarios"]) == 1
        assert capsys.readouterr().err == ("simcache: standard output is closed, so the result cannot be shown; run "
                                           "it with stdout open (or redirect it to a file)\n")


def test_main_reads_sys_argv_when_given_nothing(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["simcache", "scenarios", "--json"])
    assert main() == 0 and json.loads(capsys.readouterr().out)[0]["name"] == next(iter(gallery()))
    monkeypatch.setattr(sys, "argv", ["simcache", "workload", "--pressures", "-inf", "--streams", "0"])
    assert main() == 2  # -inf is read as a value, not an option: the first mistake said is the streams
    assert capsys.readouterr().err == ("simcache: --streams must be a whole number >= 1, not 0; write plain digits "
                                       "like --streams 1\n")


def test_say_never_raises(capsys, monkeypatch):
    _say("a sentence")
    assert capsys.readouterr().err == "simcache: a sentence\n"
    for err in (None, io.StringIO()):
        if err is not None:
            err.close()
        monkeypatch.setattr(sys, "stderr", err)
        _say("lost")

    class Full(io.StringIO):
        def write(self, s):
            raise OSError(errno.ENOSPC, "full")

    monkeypatch.setattr(sys, "stderr", Full())
    _say("lost")


def test_drop_stdout_points_the_descriptor_at_devnull(monkeypatch):
    read, write = os.pipe()
    try:
        monkeypatch.setattr(sys, "stdout", NS(fileno=lambda: write))
        _drop_stdout()
        null = os.stat(os.devnull)
        assert (os.fstat(write).st_rdev, os.fstat(write).st_ino) == (null.st_rdev, null.st_ino)
        os.write(write, b"gone")
        assert os.read(read, 10) == b""  # the pipe has no writer left, and nothing reached it
        if os.path.isdir("/proc/self/fd"):  # Linux: the /dev/null descriptor it opened is closed again
            before = len(os.listdir("/proc/self/fd"))
            _drop_stdout()
            assert len(os.listdir("/proc/self/fd")) == before
    finally:
        os.close(read)
        os.close(write)
    closed = io.StringIO()
    closed.close()
    for out in (closed, None, NS(fileno=lambda: -1)):  # -1: dup2 fails with EBADF on every machine
        monkeypatch.setattr(sys, "stdout", out)
        _drop_stdout()


def test_each_commands_defaults():
    parser = cli.build_parser()
    common = dict(preset=None, flag=None, schedule=None, device="cpu", ops=None, memory_limit=None, progress=False)
    assert vars(parser.parse_args(["run", "s"])) == dict(command="run", scenario="s", json=False, fn=cli.cmd_run,
                                                         against_real=None, **common)
    assert vars(parser.parse_args(["scenarios"])) == dict(command="scenarios", json=False, fn=cli.cmd_scenarios)
    assert vars(parser.parse_args(["export"])) == dict(command="export", scenario=None, compare=None, output=None,
                                                       storyboard=None, game=None, tour=None, fn=cli.cmd_export,
                                                       against_real=None, **common)
    assert vars(parser.parse_args(["explore", "s"])) == dict(
        command="explore", scenario="s", preset=None, flag=None, strategy="exhaustive", bound=None, reduce="state",
        seed="0", budget=None, shrink=False, out=None, jobs="auto", progress=False, json=False, fn=cli.cmd_explore,
        confirm_real=None)
    assert vars(parser.parse_args(["workload"])) == dict(
        command="workload", presets=["pre_fix", "merged_fix", "followup_fix"], pressures=["0.5", "1", "2", "4", "8"],
        streams="50", requests="32", seed="0", jobs="1", signatures=False, progress=False, json=False,
        fn=cli.cmd_workload)
    assert parser.parse_args(["explore", "s", "--flag", "a=1", "--flag", "b=2"]).flag == ["a=1", "b=2"]
    assert parser.parse_args(["export", "--game"]).game == "all"
    from simcache.real.cli import cmd_real

    assert vars(parser.parse_args(["real"])) == dict(
        command="real", scenario=None, sglang=None, sglang_version=None, preset=None, schedule=None, gallery=False,
        json=False, list_stubs=False, clear_cache=False, memory_limit=None, fn=cmd_real)


def test_explore_through_main(capsys):
    rc, out, err = run_main(capsys, "explore", "scenario_a", "--json")
    assert (rc, err) == (0, "") and json.loads(out)["scenario"] == "scenario_a"
    assert json.loads(out)["bound"] == 2 and json.loads(out)["strategy"] == "exhaustive"


@pytest.mark.parametrize("module, argv, what", [("simcache.export", ["export", "scenario_a"], "export view"),
                                                ("simcache.explore", ["explore", "scenario_a"], "explore command")])
def test_a_missing_part_of_a_partial_install_is_one_sentence(capsys, monkeypatch, module, argv, what):
    monkeypatch.setitem(sys.modules, module, None)
    assert run_main(capsys, *argv) == (2, "", f"simcache: the {what} is not available (import of {module} halted; "
                                              "None in sys.modules)\n")


def test_export_a_comparison_or_storyboard_hands_every_setting_to_each_run(capsys, simulations, monkeypatch, tmp_path):
    from simcache import export, storyboard

    monkeypatch.setattr(export, "export_html", lambda run, path, **kw: Path(path))
    monkeypatch.setattr(storyboard, "write_storyboard", lambda run, folder, compare=None: {})
    settings = ["--flag", "stale_guards=true", "--schedule", "l3 mem*2", "--ops", "1:", "--memory-limit", "5000"]
    want = dict(device="cpu", ops=(1, None), memory_limit_mb=5000.0, progress=None)
    for extra in (["-o", str(tmp_path / "p.html")], ["--storyboard", str(tmp_path / "b")]):
        simulations.clear()
        assert run_main(capsys, "export", "scenario_a", "--compare", "pre_fix,merged_fix", *settings, *extra)[0] == 0
        assert simulations == [(("scenario_a", p, {"stale_guards": True}, "l3 mem*2"), want)
                               for p in ("pre_fix", "merged_fix")]
    simulations.clear()
    assert run_main(capsys, "export", "scenario_a", "--preset", "merged_fix", *settings, "--storyboard",
                    str(tmp_path / "c"))[0] == 0
    assert simulations == [(("scenario_a", "merged_fix", {"stale_guards": True}, "l3 mem*2"), want)]


def test_a_stdout_without_a_closed_attribute_is_written_to(monkeypatch):
    class Plain:
        def __init__(self):
            self.text = []

        def write(self, s):
            self.text.append(s)

        def flush(self):
            pass

    out = Plain()
    monkeypatch.setattr(sys, "stdout", out)
    assert main(["scenarios", "--json"]) == 0
    assert json.loads("".join(out.text))[0]["name"] == next(iter(gallery()))
