"""Traces that scale: events + checkpoints, snapshots rebuilt on demand, a memory ceiling, --ops windows, progress,
and the compact export of a long run (DOT drawn in the page by the inlined Graphviz WebAssembly build).

Story: ``run`` never builds a snapshot; a snapshot rebuilt for any micro-step, in any order, is the one a
front-to-back replay gives; one ledger says who holds a node; a run that outgrows its memory limit stops with one
sentence naming ``--ops``; ``--ops A:B`` traces only that window; a long run's page is small and steps in Chromium.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from simcache import snapshot, trace
from simcache.cli import main
from simcache.simulate import simulate
from simcache.state import held_by, holder_map, holders_of

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def small_workload(requests: int = 60) -> dict:
    from bench_cache import workload

    doc = workload(requests, seed=3, device_kv=96, host_kv=96)
    doc["config"].update(device_mamba=16, host_mamba=32)
    return doc


def test_run_builds_no_snapshot(monkeypatch, capsys):
    def refuse(*a, **k):
        raise AssertionError("a snapshot was built")

    monkeypatch.setattr(trace.ledger, "take", refuse)
    monkeypatch.setattr(snapshot, "take", refuse)
    assert main(["run", "scenario_c", "--preset", "pre_fix", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "assertion" and out["went_stale"] and out["first_violation"] is not None
    assert main(["run", "scenario_c", "--preset", "pre_fix"]) == 0
    assert "went stale" in capsys.readouterr().out


def test_snapshots_rebuilt_in_any_order_equal_one_front_to_back_replay(tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(small_workload()))
    run = simulate(str(path), "pre_fix")
    t = run.trace
    assert len(t.checkpoints) > 3 and len(t.snapshots) == len(t.steps) > 1000
    all_snaps = list(t.snapshots)
    order = list(range(len(t.steps)))
    random.Random(0).shuffle(order)
    for i in order[:60]:
        t.snapshots._lru.clear()
        assert t.snapshots[i] == all_snaps[i], i
    assert t.snapshots[-1].tree_text == tuple(run.result["tree"])
    assert t.snapshots[5:9] == all_snaps[5:9]


def test_one_ledger_of_holders_agrees_with_itself_on_every_boundary():
    from trace_cases import cases

    from simcache.ops_run import execute
    from simcache.versions import preset

    seen = 0

    def compare(i, cache, drv):
        nonlocal seen
        grouped = holder_map(cache)
        for _, n in held_by(cache):
            assert holders_of(cache, n) == grouped[n.id]
            seen += 1

    for case in [c for c in cases() if c[0].startswith("random/")][:80]:
        sc = case[1]
        execute(sc.config, sc.linearize(sc.parse_schedule(None)), preset(case[2]), on_step=compare)
    assert seen > 500


def test_a_run_over_the_memory_limit_stops_with_one_sentence(tmp_path, capsys, monkeypatch):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(small_workload()))
    calls = []  # the process holds 300 MB; the run adds 2 MB by its 64th operation (a stand-in for real growth)
    monkeypatch.setattr(trace.memory, "rss_mb", lambda: 300.0 + 2 * (len(calls.append(1) or calls) > 2))
    with pytest.raises(trace.TraceLimitError, match=r"--ops A:B"):
        simulate(str(path), "pre_fix", memory_limit_mb=1)
    calls.clear()
    assert main(["run", str(path), "--memory-limit", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("simcache: this run outgrew the memory limit of 1 MB (it added 2 MB to the 300 MB the process "
                   "held when it started) at operation 63; narrow it to fewer operations with --ops A:B (e.g. --ops "
                   "31:63), or raise the limit with --memory-limit MB")
    assert main(["run", str(path), "--memory-limit", "-5"]) == 2
    assert "--memory-limit takes megabytes" in capsys.readouterr().err


OPS_SAY = "simcache: --ops takes A:B (operation numbers from 0 in plain digits, B excluded), like --ops 0:500, not "
LIMIT_SAY = ("simcache: --memory-limit takes megabytes above 0 and at most 1,048,576 (plain digits like 2048, 0.5 or "
             "1e3), not ")


@pytest.mark.parametrize("option, value, said", [
    ("--ops", "\uff11:2", OPS_SAY + "'\uff11:2'"), ("--ops", "+1:3", OPS_SAY + "'+1:3'"),
    ("--ops", "1_0:20", OPS_SAY + "'1_0:20'"),
    ("--ops", "9" * 19 + ":", "simcache: --ops A has 19 digits, over the limit of 18 (999,999,999,999,999,999); give a "
                              "smaller number, or leave A out for the start"),
    ("--ops", "1:2:3", OPS_SAY + "'1:2:3'"),
    ("--memory-limit", "inf", LIMIT_SAY + "inf; e.g. --memory-limit 2048"),
    ("--memory-limit", "nan", LIMIT_SAY + "nan; e.g. --memory-limit 2048"),
    ("--memory-limit", "1e400", LIMIT_SAY + "1e400; e.g. --memory-limit 2048"),
    ("--memory-limit", "0", LIMIT_SAY + "0; e.g. --memory-limit 2048"),
])
def test_trace_options_take_plain_bounded_numbers(capsys, option, value, said):
    assert main(["run", "scenario_a", f"{option}={value}"]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", said + "\n")


@pytest.mark.parametrize("value", ["abc", "inf", "-5", "0", "", "1_0", "nan", "2000000"])
@pytest.mark.parametrize("command", [["run", "scenario_a"], ["explore", "crash_pr"], ["scenarios"],
                                     ["workload"], ["export", "scenario_a", "-o", "-"]])
def test_a_bad_memory_limit_in_the_environment_is_named_before_any_work(monkeypatch, capsys, value, command):
    monkeypatch.setenv("SIMCACHE_MEMORY_LIMIT_MB", value)
    assert main(command) == 2
    out, err = capsys.readouterr()
    said = value if value else "''"
    assert out == "" and err == (
        "simcache: the environment variable SIMCACHE_MEMORY_LIMIT_MB takes megabytes above 0 and at most 1,048,576 "
        f"(plain digits like 2048, 0.5 or 1e3), not {said}; e.g. export SIMCACHE_MEMORY_LIMIT_MB=4096, or unset "
        "it\n")


@pytest.mark.parametrize("value", ["1e3", "1000", " 1000.0 ", ".5e4"])
def test_the_flag_and_the_variable_read_a_limit_alike(monkeypatch, value):
    from simcache.cli import _trace_options
    from simcache.trace.memory import memory_limit

    monkeypatch.setenv("SIMCACHE_MEMORY_LIMIT_MB", value)
    assert memory_limit() == _trace_options(type("A", (), {"memory_limit": value})())["memory_limit_mb"] == \
        float(value)


def test_ops_window_traces_only_those_operations(capsys):
    full = simulate("scenario_c", "pre_fix")
    assert main(["run", "scenario_c", "--preset", "pre_fix", "--ops", "2:5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["operations"] == 3
    window = simulate("scenario_c", "pre_fix", ops=(2, 5))
    assert [o.index for o in window.trace.ops] == [2, 3, 4]
    assert [o.status for o in window.trace.ops] == [o.status for o in full.trace.ops[2:5]]
    assert window.trace.snapshots[-1].tree_text == full.trace.snapshots[full.trace.ops[4].last_step].tree_text
    for bad, words in (("5", "--ops takes A:B"), ("a:b", "--ops takes A:B"), ("-1:3", "from 0"),
                       ("999:", "starts past the end"), ("4:4", "is empty")):
        assert main(["run", "scenario_c", f"--ops={bad}"]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, (bad, err)


def test_progress_bar_on_request(capsys):
    assert main(["run", "scenario_c", "--progress"]) == 0
    assert "simulating" in capsys.readouterr().err


@pytest.mark.browser
def test_a_long_runs_export_is_compact_and_steps_in_chromium(monkeypatch, tmp_path):
    import simcache.export as export

    monkeypatch.setattr(export, "DOT_LIMIT", 200)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(small_workload(40)))
    run = simulate(str(path), "pre_fix")
    assert len(run.trace.steps) > 200
    page_path = export.export_html(run, tmp_path / "long.html")
    html = page_path.read_text()
    assert 'data-encoding="gzip-base64"' in html and "Viz.js 3.31.0" in html and html.count("<script") == 2
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium",
                              args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = b.new_page()
        errors, remote = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", lambda r: (remote.append(r.request.url), r.abort())
                   if not r.request.url.startswith("file:") else r.continue_())
        page.goto(page_path.as_uri())
        page.wait_for_selector("body[data-ready]", timeout=60_000)
        steps = export.frame_steps(run.trace)
        assert int(page.get_attribute("body", "data-step")) == steps[0]
        assert page.locator("#run0 .tree svg g.node").count() > 0
        page.click("#btn-next")
        assert int(page.get_attribute("body", "data-step")) == steps[1]
        page.click("#btn-last")
        assert int(page.get_attribute("body", "data-step")) == steps[-1]
        assert page.locator("#run0 .tree svg g.node").count() == len(run.result["tree"]) + 1  # + root
        b.close()
    assert errors == [] and remote == []


def test_the_streamed_trace_hash_is_the_hash_of_the_whole_json_text():
    import hashlib

    from bench_trace import doc_for

    from simcache.scenario import from_doc

    t = simulate(from_doc(dict(name="w", **doc_for(60))), "pre_fix", snapshots=False).trace
    assert len(t.steps) > 2048  # one chunk (4,096 steps); test_core_exact_trace.py hashes two
    whole = json.dumps([s.as_dict() for s in t.steps], sort_keys=True, default=str)
    assert t.sha256() == hashlib.sha256(whole.encode()).hexdigest()
    assert trace.Recorder().sha256() == hashlib.sha256(b"[]").hexdigest()


def test_the_incremental_boundary_check_agrees_with_the_one_pass_check_on_every_boundary(monkeypatch):
    """The recorder's ``BoundaryCheck`` (re-examining only what an operation touched) gives ``failing``'s answer
    at every operation boundary: random operation files (injected trees, shared slots, leaks, stale nodes) under
    every preset, the gallery under random schedules, and a workload where eviction and load-back run all along."""
    from trace_cases import cases

    from simcache import invariants
    from simcache.ops_run import check_doc, execute
    from simcache.versions import preset as flags_of

    real = invariants.BoundaryCheck.failing
    seen: set[str] = set()
    checked = 0

    def both(self, live=()):
        nonlocal checked
        got = real(self, live)
        assert got == invariants.failing(self.cache, live), f"boundary {checked}"
        seen.update(got)
        checked += 1
        return got

    monkeypatch.setattr(invariants.BoundaryCheck, "failing", both)
    picked = [c for c in cases() if c[0].startswith("random/") or c[0].endswith(("/1", "/5"))]
    for _, scenario, preset, schedule in picked:
        simulate(scenario, preset, schedule=schedule, snapshots=False)
    simulate(dict(name="workload", **small_workload(150)), "followup_fix", snapshots=False)

    def corrupt(i, cache, drv):  # KV that does not hold its prefix's fingerprints, then a slot owned twice
        node = next((n for n in cache.root_node.children.values() if n.value), None)
        if i % 40 == 20 and node is not None:
            cache.pools.device_kv.write(node.value[:1], [12345])
        if i % 40 == 30 and node is not None and len(node.value) > 1:
            node.value = node.value[:1] * 2 + node.value[2:]

    cfg, ops = check_doc(small_workload(100))
    execute(cfg, [(None, op) for op in ops], flags_of("followup_fix"), recorder=trace.Recorder(snapshots=False),
            on_step=corrupt)
    assert checked > 2000
    assert set(invariants.INVARIANTS) - {"size_counters"} - seen == set()


def test_run_ops_trace_rebuilds_each_operations_tree_instead_of_storing_it():
    """``run_ops(..., trace=True)`` used to keep the whole tree text after every operation; its records are now
    rebuilt on demand from checkpoints and equal what the live cache showed after each operation."""
    from simcache.ops_run import OpTrace, run_ops
    from simcache.state import tree_lines

    doc = small_workload(200)
    live: list[list[str]] = []
    res = run_ops(doc, "followup_fix", trace=True, on_step=lambda i, cache, drv: live.append(tree_lines(cache)))
    t = res["trace"]
    assert isinstance(t, OpTrace) and not t._kept and len(t) == len(doc["ops"]) == len(live) > 200
    assert len(t._rec.checkpoints) > 1  # the walk crosses checkpoints
    want = [dict(step=i, op=op, status=res["status"][i], tree=live[i]) for i, op in enumerate(doc["ops"])]
    assert list(t) == want
    rng = random.Random(5)
    for i in rng.sample(range(len(t)), 20) + [-1, 0]:
        assert t[i] == want[i]
    assert t[10:14] == want[10:14] and t == want
    assert len(t._kept) <= 64
    with pytest.raises(IndexError, match="outside this run"):
        t[len(t)]


def test_run_ops_trace_with_a_recorder_that_keeps_no_checkpoints_says_so():
    from simcache.errors import ScenarioError
    from simcache.ops_run import run_ops

    with pytest.raises(ScenarioError, match="keeps none; pass no recorder"):
        run_ops(small_workload(5), trace=True, recorder=trace.Recorder(snapshots=False, invariants=False))


def test_the_hash_writer_spells_odd_entries_as_json_dumps_does():
    # the writer escapes a step's text piece by piece and spells slots by the tuple's repr: check the pieces that
    # need escaping or a fallback (a key given as text with quotes and non-ASCII, a one-slot and an empty slot
    # tuple, a slot that is not a plain int, a node id that is not an int, a pool name that needs escaping)
    odd_key = 'a"b\\é\n'
    stack = trace._intern(("evict", "_evict_host_leaf"))
    log = [
        (0, "R1", "call", stack, 7, odd_key),
        (0, "R1", "call", stack, 7, (1, 2, 3)),
        (0, None, "call", stack, None, None),
        (0, "R1", "call", stack, "x", (4,)),
        (0, "R1", "alloc", stack, None, ("device_kv", (5,))),
        (0, "R1", "free", stack, None, ("device_kv", ())),
        (0, "R1", "free", stack, None, ("host_kv", (1, 2, 3))),
        (0, "R1", "alloc", stack, None, ("host_kv", (1, True))),
        (0, "R1", "double_free", stack, None, ('po"ol', (9, 10))),
        (1, "R\u00e92", "lock", stack, 7, ((7, odd_key), 1, 2)),
        (1, "R2", "lock", stack, 7, ((7, (1, 2)), -1, 0)),
        (1, "R2", "lru_insert", stack, 7, (odd_key, "full_lru_list")),
        (1, "R2", "set_discard", stack, 7, ((3, 4), 'le"af')),
        (1, "R2", "set_add", stack, True, ((3, 4), "leaves")),
    ]
    for lo in (0, 3):
        got = trace._json_lines(log, lo, len(log), trace._JsonMemo())
        want = [json.dumps(trace._step(i, log[i]).as_dict(), sort_keys=True, default=str) for i in range(lo, len(log))]
        assert got == want
