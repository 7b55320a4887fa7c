"""``explore --jobs auto``, the default (#41): processes where they shorten the wait for a verdict, one process
elsewhere, and always the results of a serial run."""
from __future__ import annotations

import json

import pytest

from simcache import cli_numbers
from simcache.cli import main
from simcache.explore import cli as explore_cli
from simcache.explore.cli import AUTO_MIN_SCHEDULES, auto_jobs


@pytest.mark.parametrize("cores, strategy, budget, want", [
    (2, "random", AUTO_MIN_SCHEDULES, 2), (2, "pct", 50_000, 2), (16, "random", 10_000, 16), (99, "random", 10**6, 64),
    (1, "random", 50_000, 1),  # one usable core
    (2, "random", AUTO_MIN_SCHEDULES - 1, 1), (2, "random", None, 1),  # short: the default budget is 1,000
    (2, "exhaustive", 10**6, 1), (2, "exhaustive", None, 1),  # its workers would replay every prefix
])
def test_auto_runs_processes_only_for_long_sampled_searches_on_several_cores(monkeypatch, cores, strategy, budget,
                                                                            want):
    monkeypatch.setattr(cli_numbers, "usable_cores", lambda: cores)
    assert auto_jobs(strategy, budget) == want


def _explore(capsys, monkeypatch, args: list[str]) -> tuple[dict, list[int]]:
    """The JSON report (less its timings) and the job counts the search was asked for."""
    from simcache.explore import search

    asked = []
    real = search.explore

    def spy(*a, **kw):
        asked.append(a[7] if len(a) > 7 else kw.get("jobs", 1))
        return real(*a, **kw)

    monkeypatch.setattr(explore_cli, "explore", spy)
    assert main(["explore", *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("time_s",):
        out.pop(k)
    return out, asked


def test_the_default_searches_in_processes_and_reports_what_one_process_reports(capsys, monkeypatch):
    monkeypatch.setattr(cli_numbers, "usable_cores", lambda: 2)
    args = ["crash_pr", "--preset", "pre_fix", "--strategy", "random", "--budget", str(AUTO_MIN_SCHEDULES), "--seed",
            "7"]
    auto, asked_auto = _explore(capsys, monkeypatch, args)
    serial, asked_serial = _explore(capsys, monkeypatch, [*args, "--jobs", "1"])
    assert (asked_auto, asked_serial) == ([2], [1])
    assert auto == serial and auto["schedules_run"] == AUTO_MIN_SCHEDULES and auto["failing"] > 0


def test_the_default_keeps_exhaustive_and_dpor_searches_in_one_process(capsys, monkeypatch):
    monkeypatch.setattr(cli_numbers, "usable_cores", lambda: 4)
    _, asked = _explore(capsys, monkeypatch, ["scenario_a", "--preset", "pre_fix"])
    _, asked_dpor = _explore(capsys, monkeypatch, ["scenario_a", "--preset", "pre_fix", "--reduce", "dpor"])
    _, asked_given = _explore(capsys, monkeypatch, ["scenario_a", "--preset", "pre_fix", "--jobs", "AUTO"])
    assert (asked, asked_dpor, asked_given) == ([1], [1], [1])
