"""Workload mode: realistic seeded request streams, and why the crash needs heavy host load.

A stream is drawn from ``(seed, index)`` alone, so every claim below is exact for its seed: with 30 streams, no
run of pre_fix crashes or leaks while the host holds the working set (pressure <= 1); under pressure the stale-node
race and leaked or double-freed slots appear; followup_fix never raises it.
"""
from __future__ import annotations

import json
import math

import pytest

from simcache.cli import main as cli_main
from simcache.errors import SimcacheError
from simcache.ops_run import OP_FIELDS, check_doc, run_ops
from simcache.workload import WorkloadSpec, crash_rates, generate, table, working_set

ORACLE_OPS = set(OP_FIELDS) - {"inject"}


def requests_of(doc: dict) -> list[list[int]]:
    return [op["tokens"] for op in doc["ops"] if op["op"] in ("request", "start")]


def test_a_stream_is_oracle_format_and_a_function_of_seed_and_index():
    doc = generate(0, 2.0, index=3)
    assert doc == generate(0, 2.0, index=3) and doc["ops"] != generate(0, 2.0, index=4)["ops"]
    assert doc["ops"] != generate(1, 2.0, index=3)["ops"]
    cfg, ops = check_doc({"config": doc["config"], "ops": doc["ops"]})  # the oracle's schema, its ops only
    assert {op["op"] for op in ops} <= ORACLE_OPS
    assert {"request", "prefetch", "prefetch_done", "events", "l3_ack"} <= {op["op"] for op in ops}
    assert run_ops({"config": doc["config"], "ops": doc["ops"]})["status"]  # it runs


def test_streams_share_system_prompts_and_chats_extend_their_earlier_prompts():
    spec = WorkloadSpec()
    doc = generate(0, 1.0, spec)
    reqs = requests_of(doc)
    assert len(reqs) == spec.requests
    prompts = {tuple(r[:1]) for r in reqs}  # every request starts with a system prompt's first token
    assert prompts <= {(100,), (200,)} and len(prompts) == 2
    extends = sum(any(len(e) < len(r) and r[: len(e)] == e for e in reqs[:i]) for i, r in enumerate(reqs))
    assert extends >= spec.requests // 2  # multi-turn: most turns extend an earlier turn of their chat
    assert len({len(r) for r in reqs}) > 3  # random lengths


@pytest.mark.parametrize("pressure", [0.5, 1, 3, 8])
def test_host_pools_are_sized_by_pressure_against_the_working_set(pressure):
    doc = generate(2, pressure)
    reqs = requests_of(doc)
    assert doc["working_set"] == working_set(reqs) == len({tuple(r[: i + 1]) for r in reqs for i in range(len(r))})
    assert doc["config"]["host_kv"] == math.ceil(doc["working_set"] / pressure)
    assert doc["config"]["host_mamba"] == math.ceil(len({tuple(r) for r in reqs}) / pressure)
    assert doc["config"]["device_kv"] == max(map(len, reqs)) + WorkloadSpec().device_slack


def test_the_crash_needs_heavy_host_load_and_followup_fix_never_reaches_it():
    rows = crash_rates(["pre_fix", "followup_fix"], [0.5, 1, 4, 8, 16], n_streams=30, seed=0)
    at = {(r["preset"], r["pressure"]): r for r in rows}
    for p in (0.5, 1.0):  # the host holds the working set: nothing goes wrong
        assert at["pre_fix", p]["crashes"] == at["pre_fix", p]["damaged"] == 0
    assert sum(at["pre_fix", p]["races"] for p in (4.0, 8.0, 16.0)) >= 1
    damaged = [at["pre_fix", p]["damaged"] for p in (0.5, 1.0, 4.0, 8.0, 16.0)]
    assert damaged == sorted(damaged) and damaged[-1] > 0  # leaks and double frees grow with the pressure
    assert all(at["followup_fix", p]["races"] == 0 for p in (0.5, 1.0, 4.0, 8.0, 16.0))
    row = at["pre_fix", 4.0]
    assert row["runs"] == 30 and row["crash_rate"] == row["crashes"] / 30
    assert set(row) >= {"preset", "pressure", "crash_rate", "race_rate", "damage_rate", "runs", "signatures"}


def test_parallel_crash_rates_equal_serial_ones():
    kw = dict(presets=["pre_fix"], pressures=[2, 8], n_streams=12, seed=5)
    assert crash_rates(jobs=2, **kw) == crash_rates(**kw)


def test_the_table_and_the_command_line(capsys):
    rows = crash_rates(["pre_fix"], [1, 4], n_streams=3, seed=0)
    assert table(rows).splitlines()[:2] == ["| preset | p=1 | p=4 |", "|---|---|---|"]
    assert cli_main(["workload", "--presets", "pre_fix", "--pressures", "1", "4", "--streams", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == rows


def test_both_workload_entry_points_are_one_command_with_one_default(capsys, monkeypatch):
    """``python -m simcache.workload`` and ``simcache workload`` share the parser: the same rows with no
    ``--requests`` (they defaulted to 32 and 64 turns), the same one-sentence refusal (exit 2) of a bad number."""
    import runpy
    import warnings

    args = ["--presets", "pre_fix", "--pressures", "2", "--streams", "2", "--json"]
    want = crash_rates(["pre_fix"], [2], n_streams=2, seed=0, spec=WorkloadSpec())
    assert WorkloadSpec.requests == 32
    for argv, expect_rc in ((args, 0), (["--requests", "1e3"], 2)):
        assert cli_main(["workload", *argv]) == expect_rc
        via_cli = capsys.readouterr()
        monkeypatch.setattr("sys.argv", ["simcache.workload", *argv])
        with pytest.raises(SystemExit) as done, warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the module is already imported here: runpy says so
            runpy.run_module("simcache.workload", run_name="__main__")
        assert done.value.code == expect_rc
        assert capsys.readouterr() == via_cli
        if expect_rc == 0:
            assert json.loads(via_cli.out) == want
        else:
            assert via_cli.out == "" and via_cli.err == (
                "simcache: --requests must be a whole number >= 1, not 1e3; write plain digits like --requests 1\n")


@pytest.mark.parametrize("kw, sentence", [
    (dict(presets=["newest_fix"]), "unknown preset(s) newest_fix"),
    (dict(pressures=[0]), "pressures must be numbers between 0.001 and 1000000"),
    (dict(pressures=[float("nan")]), "pressures must be numbers between 0.001 and 1000000"),
    (dict(n_streams=0), "n_streams must be a whole number >= 1, not 0"),
])
def test_bad_workload_arguments_raise_a_simcache_error(kw, sentence):
    with pytest.raises(SimcacheError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        crash_rates(**kw)
