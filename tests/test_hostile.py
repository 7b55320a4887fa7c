"""Hostile input beyond the corpus: a fuzz over the CLI's arguments, scenario names that try to become code in the
generated pytest file, and the public API's voice on wrong types.

The fuzz draws argument lists from every command's options and a vocabulary of hostile values (odd numbers, huge
text, control characters, paths to devices and folders); each call must end with status 0, 1 or 2 and, when not 0,
exactly one ``simcache: ...`` line on stderr, never a traceback.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simcache
from simcache.cli import main
from simcache.errors import ConfigError, ScenarioError, ScheduleError, SimcacheError
from simcache.explore import write_artefacts
from simcache.scenario import from_doc, parse_op

ROOT = Path(__file__).resolve().parent.parent
GALLERY = ROOT / "simcache" / "scenarios"

HOSTILE = ["", " ", "0", "1", "2", "-1", "+5", "1_000", "１２", "1e20", "9" * 5000, "nan", "-inf", "inf", "x",
           "\x00", '"""', "\\", "a\nb", "R1*" + "9" * 400, "pf*2", "pre_fix", "pre_fix,", ",", "stale_guards=true",
           "stale_guards", "q" * 20_000, "/dev/zero", "/dev/null", "/", "-", "--", "-h"]
COMMANDS = {
    "run": ["--preset", "--flag", "--schedule", "--json"],
    "export": ["--preset", "--compare", "--flag", "--schedule", "-o"],
    "explore": ["--preset", "--flag", "--strategy", "--bound", "--seed", "--budget", "--shrink", "--out", "--jobs",
                "--json"],
    "workload": ["--presets", "--pressures", "--streams", "--requests", "--seed", "--jobs", "--json"],
    "scenarios": ["--json"],
}
SCENARIOS = ["scenario_a", "scenario_d", "nope", "", str(ROOT / "tests" / "bad_inputs" / "alias_bomb.yaml"),
             "/dev/zero", str(ROOT)]

@st.composite
def argv(draw):
    cmd = draw(st.sampled_from(sorted(COMMANDS)))
    out = [cmd]
    if cmd in ("run", "export", "explore"):
        out.append(draw(st.sampled_from(SCENARIOS + HOSTILE[:12])))
    for _ in range(draw(st.integers(0, 4))):
        opt = draw(st.sampled_from(COMMANDS[cmd] + ["--verbose"]))
        out.append(opt)
        if opt not in ("--json", "--shrink") or draw(st.booleans()):
            out.append(draw(st.sampled_from(HOSTILE)))
    # keep the work small: explore and workload get tight limits unless the fuzz overrides them with a hostile value
    if cmd == "explore":
        out[2:2] = ["--budget", "3", "--bound", "1"]
    if cmd == "workload":
        out[1:1] = ["--streams", "1", "--requests", "2", "--pressures", "1"]
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(args=argv())
def test_no_cli_argument_list_ends_in_a_traceback(args, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("fuzz")
    old = os.getcwd()
    os.chdir(cwd)  # any file the call writes lands here
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as e:  # --help
                rc = e.code
    finally:
        os.chdir(old)
    text = err.getvalue()
    assert "Traceback" not in text
    assert rc in (0, 1, 2), (args, rc, text)
    if rc != 0:
        assert text.count("\n") == 1 and text.startswith("simcache: "), (args, text)
        assert len(text) < 2000  # nothing hostile echoed back whole


# --- generated code never runs a scenario's text --------------------------------------------------------------------

HOSTILE_NAMES = [
    'x"""\nimport os; open("PWNED", "w").write("1")\n"""',
    "back\\slash",
    "a'''b",
    "trailing\\",
    "é ünïcode ☃",
    "\"); import os  #",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_title_or_note_never_becomes_code(name, tmp_path):
    doc = yaml.safe_load((GALLERY / "scenario_a.yaml").read_text())
    doc.pop("expect", None)
    doc["name"] = "hostile"
    doc["title"] = name
    doc["description"] = name
    first = next(iter(doc["actors"]))
    op = parse_op(doc["actors"][first][0], "test")
    doc["actors"][first][0] = dict(op, note=name)  # an op's note travels into the generated file as data
    sc = from_doc(doc)
    small = simcache.simulate(sc, "pre_fix", snapshots=False)
    paths = write_artefacts(tmp_path / "out", sc, "pre_fix", str(small.schedule))
    source = paths["test"].read_text()
    compile(source, str(paths["test"]), "exec")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(paths["test"])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("name", ['x"""y', "back\\slash", "a\nb"])
def test_a_hostile_scenario_name_is_refused_or_made_an_identifier(name):
    doc = {"name": name, "actors": {"R1": ["request 1 2"]}}
    if name.isprintable():
        sc = from_doc(doc)
        from simcache.explore.artefacts import test_file_name

        assert test_file_name(sc).isascii() and test_file_name(sc)[:-3].isidentifier()
    else:
        with pytest.raises(ScenarioError, match="'name' must be one line of printable text"):
            from_doc(doc)


# --- the public API: a SimcacheError sentence for wrong types and values ------------------------------------------

@pytest.mark.parametrize("call, error, message", [
    (lambda: simcache.simulate(None), ScenarioError, "simulate needs a Scenario, a gallery name, a file path or a "
                                                     "scenario mapping, not NoneType; e.g. simulate('crash_pr')"),
    (lambda: simcache.simulate("scenario_a", flags=["x"]), ConfigError,
     "flags must map flag names to values, like {'stale_guards': True}, not ['x']"),
    (lambda: simcache.simulate("scenario_a", schedule=simcache.Schedule(("zz",))), ScheduleError,
     "schedule names unknown actor 'zz'; the actors are mem, l3"),
    (lambda: simcache.simulate("scenario_a", schedule=simcache.Schedule(("mem",) * 9)), ScheduleError,
     "schedule asks actor 'mem' for 3 operations but it has 2; shorten the schedule or add operations"),
    (lambda: simcache.simulate("scenario_a", schedule=3), ScheduleError,
     "a schedule is a string like 'R1 R2*2 ctl*' or a Schedule, not int"),
    (lambda: simcache.simulate("scenario_a", 3), ConfigError, "a preset is a name like 'pre_fix', not int"),
    (lambda: simcache.preset([]), ConfigError,
     "unknown preset []; choose one of pre_fix, described_fix, reviewed_fix, merged_fix, followup_fix, "
     "main_2026_06, release_0_5_17"),
    (lambda: simcache.parse_schedule("R1", None), ScheduleError,
     "parse_schedule needs the actors' operation counts, like {'R1': 2, 'ctl': 1}, not None"),
    (lambda: simcache.Schedule("R1"), ScheduleError, "Schedule takes a tuple of actor names like ('R1', 'R2'), not "
                                                      "'R1'"),
    (lambda: simcache.load_scenario(None), ScenarioError,
     "a scenario is a gallery name or a file path, not NoneType; e.g. load('crash_pr')"),
    (lambda: simcache.CacheConfig(page_size=-1), ConfigError, "page_size must be a whole number >= 1, not -1"),
    (lambda: simcache.CacheConfig(page_size=0), ConfigError, "page_size must be a whole number >= 1, not 0"),
    (lambda: simcache.CacheConfig(flags={}), ConfigError,
     "flags must be a Flags (e.g. simcache.preset('pre_fix')), not dict"),
    (lambda: simcache.run_ops({"ops": []}, flags={}), ScenarioError,
     "flags must be a Flags (e.g. simcache.preset('pre_fix')), not dict"),
    (lambda: simcache.run_ops({"ops": []}, preset=None), ConfigError,
     "unknown preset None; choose one of pre_fix, described_fix, reviewed_fix, merged_fix, followup_fix, "
     "main_2026_06, release_0_5_17, unified_0_5_16, unified_0_5_17"),
])
def test_the_api_refuses_wrong_types_with_a_sentence(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert isinstance(e.value, SimcacheError) and str(e.value) == message


def test_two_actors_starting_one_rid_are_refused_at_load():
    doc = {"actors": {"R1": [{"op": "start", "tokens": [1], "rid": "chat"}],
                      "R2": [{"op": "start", "tokens": [2], "rid": "chat"}]}}
    with pytest.raises(ScenarioError) as e:
        from_doc(doc, name="conflict")
    assert str(e.value) == ("conflict: actors R1 and R2 both start a request with rid 'chat', so some schedules "
                            "would have two live requests with one id; give each actor's requests their own rids")


def test_explore_names_the_scenario_and_the_schedule_of_a_conflict(capsys, tmp_path):
    # R2's finish frees 'chat' in some interleavings only: the conflict is a property of a schedule
    (tmp_path / "conf.yaml").write_text("actors:\n  R1: [{op: start, tokens: [1], rid: chat}, {op: start, tokens: [2], "
                                        "rid: chat}]\n  R2: [{op: finish, rid: chat}]\n")
    assert main(["explore", str(tmp_path / "conf.yaml")]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "simcache: conf: op 1: request id 'chat' is still live; give each started request its "
                              "own rid (schedule: R1*2)\n")
