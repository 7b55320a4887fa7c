"""Tracebacks and exits on hostile input (issue 43, items 7-11): each case asserts the exit status, the one
sentence, and what was (not) written.

- a path over the system's name limit (``ENAMETOOLONG``) in any path option is one sentence, exit status 2;
- a worker process that dies (as under the out-of-memory killer) is named, and nothing is written;
- a count of interleavings past Python's 4,300-digit limit prints in scientific form;
- ``--progress`` with a closed or full stderr never costs the result;
- ``-o -`` onto a full device exits 1, with a sentence that says how to fix it (``docs/cli.md``).
"""
from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import simcache.explore.cli as explore_cli
from simcache.cli import main
from simcache.explore import explore
from simcache.explore.cli import summary
from simcache.pool import WorkerDied
from simcache.scenario import from_doc
from simcache.workload import WorkloadSpec, crash_rates

ROOT = Path(__file__).resolve().parent.parent
LONG = "a" * 300  # one path component over the usual 255-byte limit
LONG_SAID = f"{'a' * 40}...{'a' * 20} (300 characters)"


def cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --- item 7: a name too long for the file system ------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["explore", "scenario_a", "--out", LONG],
     f"cannot use --out {LONG_SAID}: File name too long; give a shorter name"),
    (["explore", "scenario_a", "--out", f"{LONG}/sub"],
     f"cannot use --out {'a' * 40}...{'a' * 16}/sub (304 characters): File name too long; give a shorter name"),
    (["export", "scenario_a", "--storyboard", LONG],
     f"cannot use --storyboard {LONG_SAID}: File name too long; give a shorter name"),
    (["export", "scenario_a", "-o", LONG], f"cannot write {LONG_SAID}: File name too long; give a shorter name"),
    (["export", "scenario_a", "-o", f"{LONG}/page.html"],
     f"cannot write {'a' * 40}...{'a' * 10}/page.html (310 characters): File name too long; give a shorter name"),
])
def test_a_name_over_the_limit_is_one_sentence_and_nothing_is_written(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(capsys, *argv) == (2, "", f"simcache: {message}\n")
    assert list(tmp_path.iterdir()) == []


# --- item 8: a worker that dies --------------------------------------------------------------------------------------

def _kill_a_worker_once():
    """A progress callback that SIGKILLs one worker process (as the out-of-memory killer would) on its first call."""
    killed: list[int] = []
    before = {p.pid for p in multiprocessing.active_children()}  # another test's leftovers are never the victim

    class Progress:
        def __call__(self, info: dict) -> None:
            if not killed:
                victim = min((p for p in multiprocessing.active_children() if p.pid not in before),
                             key=lambda p: p.pid)
                killed.append(victim.pid)
                os.kill(victim.pid, signal.SIGKILL)
                victim.join(30)

        def close(self) -> None:  # as the command line's bar
            pass

    return Progress(), killed


def _said(pid: int, what: str) -> str:
    return (rf"worker process [12] of 2 \(pid {pid}\) died \(killed by SIGKILL, as the out-of-memory killer does\), "
            rf"so {what} stopped and nothing was written; run it again with fewer --jobs or on a machine with more "
            rf"free memory")


needs_two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two worker processes need two cores")


@needs_two_cores
@pytest.mark.parametrize("strategy", ["random", "exhaustive"])
def test_a_dead_worker_in_a_search_is_named_in_one_sentence(strategy):
    progress, killed = _kill_a_worker_once()
    with pytest.raises(WorkerDied) as e:
        explore("crash_pr", "followup_fix", strategy=strategy, budget=20_000, jobs=2, progress=progress)
    assert re.fullmatch(_said(killed[0], "the search"), str(e.value)), str(e.value)


@needs_two_cores
def test_a_dead_worker_under_explore_out_writes_nothing(capsys, tmp_path, monkeypatch):
    progress, killed = _kill_a_worker_once()
    monkeypatch.setattr(explore_cli, "progress_for", lambda label, asked: progress)
    rc, out, err = cli(capsys, "explore", "crash_pr", "--strategy", "random", "--budget", "20000", "--jobs", "2",
                       "--out", str(tmp_path / "o"))
    assert (rc, out) == (2, "") and re.fullmatch(f"simcache: {_said(killed[0], 'the search')}\n", err), err
    assert list(tmp_path.iterdir()) == []


@needs_two_cores
def test_a_dead_worker_in_a_workload_is_named_in_one_sentence(capsys, monkeypatch):
    progress, killed = _kill_a_worker_once()
    with pytest.raises(WorkerDied) as e:
        crash_rates(["pre_fix"], [1.0, 2.0], n_streams=200, jobs=2, spec=WorkloadSpec(requests=8), progress=progress)
    assert re.fullmatch(_said(killed[0], "the workload"), str(e.value)), str(e.value)


# --- item 9: counts past 4,300 digits ---------------------------------------------------------------------------------

def test_a_count_of_interleavings_past_4300_digits_prints_in_scientific_form():
    many = from_doc({"name": "many", "actors": {f"A{i}": ["events"] for i in range(1700)}})
    res = explore(many, "pre_fix", strategy="random", budget=2)
    assert res.total_schedules.bit_length() > 15_000  # 1700! has 4,755 digits: str() of it raises ValueError
    assert summary(res, None).splitlines()[1] == "  schedules run     2 of 3.00e+4755 interleavings"
    assert json.loads(json.dumps(res.as_dict()))["total_schedules"] == "3.00e+4755"
    small = explore("scenario_b", "pre_fix", strategy="random", budget=2)  # below 10**18: an exact number
    assert json.loads(json.dumps(small.as_dict()))["total_schedules"] == small.total_schedules == 360


# --- item 10: the progress bar never costs the result -----------------------------------------------------------------

class _Broken(io.StringIO):
    """A stderr that refuses every write: full (``ENOSPC``) or closed (``ValueError``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def write(self, text):
        raise self.error

    def isatty(self) -> bool:
        return True  # a terminal: the bar is drawn unasked


@pytest.mark.parametrize("stderr", [_Broken(OSError(28, "No space left on device")),
                                    _Broken(ValueError("I/O operation on closed file.")), None],
                         ids=["full", "closed", "gone"])
@pytest.mark.parametrize("argv", [
    ["run", "scenario_c", "--progress", "--json"],
    ["explore", "scenario_a", "--progress", "--json"],
    ["workload", "--streams", "3", "--requests", "4", "--pressures", "1", "--progress", "--json"],
], ids=["run", "explore", "workload"])
def test_progress_onto_a_broken_stderr_keeps_the_result(argv, stderr, monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    assert rc == 0 and json.loads(out.getvalue())  # the whole result, parsed


def test_progress_onto_a_full_stderr_in_a_real_process_keeps_the_result():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "simcache", "explore", "scenario_a", "--progress", "--json"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=full, text=True, timeout=180,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0 and json.loads(p.stdout)["scenario"] == "scenario_a"


# --- item 11: the page onto a full standard output -----------------------------------------------------------------

def test_a_page_onto_a_full_stdout_exits_1_with_a_fix():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "simcache", "export", "scenario_a", "-o", "-"], cwd=ROOT,
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=180,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert (p.returncode, p.stderr) == (1, "simcache: cannot write to standard output: No space left on device; free "
                                           "some space, or write to a file with -o FILE\n")


class _FullStdout(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.buffer = self

    def write(self, data):
        raise OSError(28, "No space left on device")


def test_the_game_page_onto_a_full_stdout_exits_1_and_a_closed_reader_exits_0(monkeypatch, capsys):
    monkeypatch.setattr("simcache.game_map.render_game", lambda numbers, say=None, cache=True: "<!doctype html>")
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    assert main(["export", "--game", "1", "-o", "-"]) == 1
    assert capsys.readouterr().err.endswith("simcache: cannot write to standard output: No space left on device; "
                                            "free some space, or write to a file with -o FILE\n")
