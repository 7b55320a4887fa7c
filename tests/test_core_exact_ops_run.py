"""Exact outcomes of the replay entry points (``ops_run.py``): the operation file check and its sentences, the cheap
stale check's pieces (``_attached``, ``_held``, ``_no_stale``) on nodes placed by hand, whole ``run_ops`` reports of
small hand-written runs, ``apply_op``, when a progress bar is drawn, ``execute``'s options and errors, and the
lazy ``OpTrace``.

Every test compares whole values: reports without their three live objects, exact sentences, exact records.
"""
from __future__ import annotations

import json
import signal
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import make_cache, node_at

from simcache import ops_run
from simcache.crash import Crash
from simcache.driver import Driver
from simcache.errors import ScenarioError
from simcache.ops_run import OpTrace, _attached, _held, _no_stale, _progress, apply_op, check_doc, execute, run_ops
from simcache.state import stale_refs
from simcache.trace import Recorder
from simcache.versions import preset

FIXTURES = Path(__file__).parent / "fixtures"
DEFAULTS = dict(policy="write_through", storage=False, page_size=1, device_kv=32, device_mamba=8, host_kv=8,
                host_mamba=8, prefetch_threshold=1, load_back_threshold=10, prefetch_stop_policy="best_effort",
                driver="fuzz", write_through_threshold=1)
X = "AssertionError: parent does not have child key, 1"
TPU = "device must be one of cpu, cuda, cuda:N or auto (like cuda:0), not 'tpu'"
NO_ISSUES = dict(leaked=[], free_but_referenced=[], duplicated_in_free_list=[], shared=[])
QUIET = dict(write_through=0, load_back=0, backup=0, prefetch=0, pending_l3=0, write_acks=0)


def load(scenario: str) -> dict:
    return json.loads((FIXTURES / f"scenario_{scenario}.json").read_text())


def plain(report: dict) -> dict:
    """A report without its live objects (``_cache``, ``_driver``, ``_crash``) and its lazy trace."""
    return {k: v for k, v in report.items() if not k.startswith("_") and k != "trace"}


def said(fn, *args, **kwargs) -> str:
    with pytest.raises(ScenarioError) as e:
        fn(*args, **kwargs)
    return str(e.value)


# --- check_doc --------------------------------------------------------------------------------------------------

def test_check_doc_fills_every_default_and_returns_the_very_ops_list():
    ops = [{"op": "evict", "n": 2}]
    cfg, got = check_doc({"ops": ops})
    assert cfg == DEFAULTS and got is ops
    cfg, got = check_doc({"ops": [], "config": {"policy": "write_back", "page_size": 2, "driver": "scheduler"}})
    assert cfg == {**DEFAULTS, "policy": "write_back", "page_size": 2, "driver": "scheduler",
                   "write_through_threshold": 2} and got == []


@pytest.mark.parametrize("doc", [[], None, "ops", {}, {"ops": {}}, {"ops": "evict 2"}, {"config": {}},
                                 {"ops": None}])
def test_check_doc_names_a_document_that_is_not_an_object_with_an_ops_list(doc):
    assert said(check_doc, doc) == \
        'an operation file must be a JSON object with an "ops" list (and optionally "config")'


def test_check_doc_passes_on_the_configs_sentence():
    assert said(check_doc, {"ops": [], "config": {"page_size": 0}}) == "config.page_size must be at least 1"
    assert said(check_doc, {"ops": [], "config": []}) == \
        'config must be an object of settings, like {"policy": "write_through"}'


def test_check_doc_numbers_each_operation_and_checks_it_against_the_page_size():
    bad = {"ops": [{"op": "evict", "n": 1}, {"op": "nope"}]}
    assert said(check_doc, bad) == ("op 1: unknown op 'nope'; known ops: request, start, finish_oldest, evict, "
                                    "evict_mamba, evict_host, events, l3_ack, prefetch, prefetch_done, prefetch_hit, "
                                    "inject, finish, write_ack, load_ack")
    inject = {"op": "inject", "nodes": [{"key": [1, 2, 3]}]}
    assert check_doc({"ops": [inject]})[1] == [inject]  # 3 tokens are whole pages of 1
    assert said(check_doc, {"ops": [{"op": "events"}, inject], "config": {"page_size": 2}}) == \
        "op 1 node 0: key has 3 tokens; make it a multiple of page_size 2"


def test_the_old_names_of_the_settings_functions_are_kept():
    from simcache.config import check_settings, from_settings
    assert ops_run.check_config is check_settings and ops_run.build_config is from_settings
    assert ops_run.OP_FIELDS == dict(request={"tokens"}, start={"tokens"}, finish_oldest=set(), evict={"n"},
                                     evict_mamba={"n"}, evict_host={"n"}, events=set(), l3_ack=set(),
                                     prefetch={"tokens"}, prefetch_done={"n", "mamba_hit"}, prefetch_hit={"n"},
                                     inject={"nodes"})


# --- _attached ---------------------------------------------------------------------------------------------------

def chain():
    """[1,2] with the child [3] under it, and [4,5] beside it."""
    cache = make_cache("write_through")
    drv = Driver(cache)
    for tokens in ([1, 2], [1, 2, 3], [4, 5]):
        drv.finish(drv.start(tokens))
    return cache, drv


def test_attached_walks_up_through_agreeing_links():
    cache, _ = chain()
    top, child = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    assert [_attached(cache, n) for n in (cache.root_node, top, child, node_at(cache, [4, 5]))] == \
        [True, True, True, True]


def test_attached_is_false_for_each_broken_link():
    cache, _ = chain()
    top, child = node_at(cache, [1, 2]), node_at(cache, [1, 2], [3])
    loose = cache._new_node((9,))  # never attached: no parent
    assert _attached(cache, loose) is False
    loose.parent = top  # a parent pointer, but the parent's slot for 9 is empty
    assert _attached(cache, loose) is False
    del cache.root_node.children[cache.child_key(top.key)]  # the top's slot emptied: the child is cut off too
    assert (_attached(cache, top), _attached(cache, child)) == (False, False)
    cache.root_node.children[cache.child_key(top.key)] = top
    assert (_attached(cache, top), _attached(cache, child)) == (True, True)
    cache.root_node.children[cache.child_key(top.key)] = node_at(cache, [4, 5])  # the slot holds another node
    assert (_attached(cache, top), _attached(cache, child)) == (False, False)


def test_attached_is_false_for_an_empty_key_and_for_a_cycle():
    cache, _ = chain()
    top = node_at(cache, [1, 2])
    hollow = cache._new_node(())
    hollow.parent = top
    top.children[()] = hollow  # the slot agrees, but a node below the root needs a key
    assert _attached(cache, hollow) is False
    ring = cache._new_node((7,))
    ring.parent = ring
    ring.children[cache.child_key((7,))] = ring  # its own parent: the walk never reaches the root
    assert _attached(cache, ring) is False


# --- _held -------------------------------------------------------------------------------------------------------

HOLDS = {
    "device leaves": lambda c, n: c.evictable_full_device_leaves.add(n),
    "host leaves": lambda c, n: c.evictable_full_host_leaves.add(n),
    "full lru": lambda c, n: c.full_lru_list.insert_mru(n),
    "mamba lru": lambda c, n: c.mamba_lru_list.insert_mru(n),
    "host mamba lru": lambda c, n: c.mamba_host_lru_list.insert_mru(n),
    "write through": lambda c, n: c.ongoing_write_through.__setitem__(50, n),
    "load back": lambda c, n: c.ongoing_load_back.__setitem__(51, n),
    "backup": lambda c, n: c.ongoing_backup.__setitem__(52, (n, False)),
    "prefetch": lambda c, n: c.ongoing_prefetch.__setitem__("pf", SimpleNamespace(last_host_node=n)),
}


def loose(cache, key):
    """A node of ``cache`` attached nowhere, with (made-up) slots on every tier, so that every list takes it."""
    node = cache._new_node(key)
    node.value, node.host_value, node.mamba_value, node.mamba_host_value = [0], [0], [0], [0]
    return node


@pytest.mark.parametrize("holder", list(HOLDS))
def test_held_sees_a_node_in_each_kind_of_holder_alone(holder):
    cache = make_cache("write_through")
    node, other = loose(cache, (9,)), loose(cache, (8,))
    assert (_held(cache, node), _held(cache, other)) == (False, False)
    HOLDS[holder](cache, other)  # another node held there: not this one
    assert (_held(cache, node), _held(cache, other)) == (False, True)
    HOLDS[holder](cache, node)
    assert _held(cache, node) is True


@pytest.mark.parametrize("lru", ["full_lru_list", "mamba_lru_list", "mamba_host_lru_list"])
def test_held_wants_the_very_node_an_lru_list_links_not_one_with_its_id(lru):
    cache = make_cache("write_through")
    node = loose(cache, (9,))
    getattr(cache, lru).insert_mru(node)
    twin = loose(make_cache("write_through"), (9,))
    assert twin.id == node.id and twin is not node
    assert (_held(cache, node), _held(cache, twin)) == (True, False)


# --- _no_stale ---------------------------------------------------------------------------------------------------

def test_no_stale_is_true_for_plain_cuts_that_leave_nothing_held():
    cache, _ = chain()
    top = node_at(cache, [1, 2])
    popped = cache._new_node((9,))  # a popped leaf nothing holds
    assert _no_stale(cache, [], []) is True
    assert _no_stale(cache, [(top, None, None)], []) is True  # displaced, but attached again
    assert _no_stale(cache, [(popped, popped, False), (top, None, None)], []) is True
    live = [SimpleNamespace(last_node=None), SimpleNamespace(last_node=top), SimpleNamespace(last_node=cache.root_node)]
    assert _no_stale(cache, [(popped, popped, False)], live) is True


def test_no_stale_is_false_for_each_kind_of_cut_that_is_not_plain():
    cache, _ = chain()
    top = node_at(cache, [1, 2])
    popped, other = cache._new_node((9,)), cache._new_node((8,))
    assert _no_stale(cache, [(popped, None, None)], []) is False  # displaced and not attached again
    assert _no_stale(cache, [(popped, other, False)], []) is False  # popped another node than asked for
    assert _no_stale(cache, [(popped, popped, True)], []) is False  # the popped leaf had children
    assert _no_stale(cache, [(top, None, None), (popped, popped, True)], []) is False
    assert _no_stale(cache, [], [SimpleNamespace(last_node=top), SimpleNamespace(last_node=popped)]) is False


def test_no_stale_is_false_when_a_popped_leaf_is_still_held():
    cache, _ = chain()
    popped, free = cache._new_node((9,)), cache._new_node((8,))
    cache.full_lru_list.insert_mru(popped)
    assert _no_stale(cache, [(free, free, False)], []) is True
    assert _no_stale(cache, [(free, free, False), (popped, popped, False)], []) is False
    assert _no_stale(cache, [(popped, popped, False), (free, free, False)], []) is False


# --- run_ops -----------------------------------------------------------------------------------------------------

D_PRE_FIX = dict(
    outcome=X, sig="AssertionError: parent does not have child key in _delete_tombstone_leaf",
    raised_in="_delete_tombstone_leaf",
    chain=["evict", "_evict_device_leaf", "_evict_regular", "_iteratively_delete_tombstone_leaf",
           "_delete_tombstone_leaf"],
    step=2, status="..x", first_stale=1, stale_final=[], tree=[], tree_slots=[],
    counters=dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0, tree_device_tokens=0,
                  live_requests=0),
    inflight=QUIET, double_frees=[], accounting={p: NO_ISSUES for p in ("device_kv", "device_mamba", "host_kv",
                                                                          "host_mamba")},
    free=dict(device_kv=[*range(1, 32), 0], device_mamba=[*range(1, 8), 0], host_kv=[*range(2, 8), 0, 1],
              host_mamba=list(range(8))),
    warnings=[])
D_MERGED = {**D_PRE_FIX, "outcome": "clean", "sig": None, "raised_in": None, "chain": [], "step": None,
            "status": "...", "first_stale": None}
D_TREE = ["1 1,2 v=0 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 3 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0"]


def test_run_ops_reports_scenario_D_on_pre_fix_field_for_field():
    report = run_ops(load("D"), "pre_fix")
    assert plain(report) == D_PRE_FIX and "trace" not in report
    assert report["_crash"] == Crash("AssertionError", "parent does not have child key, 1", "_delete_tombstone_leaf",
                                     tuple(D_PRE_FIX["chain"]))
    assert report["_cache"].crashed is report["_crash"] and report["_driver"].cache is report["_cache"]
    assert report["_cache"].cuts is None  # the cheap check's log is dropped at the end


def test_run_ops_takes_the_preset_by_name_and_flags_over_it():
    doc = load("D")
    assert plain(run_ops(doc, "merged_fix")) == D_MERGED
    assert plain(run_ops(doc)) == D_PRE_FIX  # pre_fix by default
    assert plain(run_ops(doc, "pre_fix", flags=preset("merged_fix"))) == D_MERGED
    assert plain(run_ops(doc, "merged_fix", flags=preset("pre_fix"))) == D_PRE_FIX
    assert plain(run_ops(doc, "merged_fix", flags=None)) == D_MERGED


def test_run_ops_names_flags_that_are_not_flags_and_a_device_it_cannot_use():
    assert said(run_ops, load("D"), flags={"pre_fix": True}) == \
        "flags must be a Flags (e.g. simcache.preset('pre_fix')), not dict"
    assert said(run_ops, {"ops": []}, flags="merged_fix") == \
        "flags must be a Flags (e.g. simcache.preset('pre_fix')), not str"
    assert said(run_ops, {"ops": []}, device="tpu") == TPU
    assert said(run_ops, {"ops": "evict"}) == \
        'an operation file must be a JSON object with an "ops" list (and optionally "config")'


def test_run_ops_reports_live_requests_double_frees_leaks_and_each_status_letter():
    """A live request, a refused start, nothing to acknowledge or prefetch, scenario C's double free and host
    leak."""
    doc = {"config": {"device_kv": 4, "device_mamba": 2}, "ops": [
        {"op": "start", "tokens": [1, 2, 3]}, {"op": "start", "tokens": [4, 5, 6]}, {"op": "l3_ack"},
        {"op": "prefetch", "tokens": [1]}]}
    report = run_ops(doc, "pre_fix")
    assert plain(report) == dict(
        outcome="clean", sig=None, raised_in=None, chain=[], step=None, status=".e--", first_stale=None,
        stale_final=[], tree=[], tree_slots=[],
        counters=dict(full_evictable=0, full_protected=0, mamba_evictable=0, mamba_protected=0, tree_device_tokens=0,
                      live_requests=1),
        inflight=QUIET, double_frees=[],
        accounting={p: NO_ISSUES for p in ("device_kv", "device_mamba", "host_kv", "host_mamba")},
        free=dict(device_kv=[3], device_mamba=[1], host_kv=list(range(8)), host_mamba=list(range(8))), warnings=[])
    assert list(report["_driver"].live) == ["r0"]
    doc = {"config": {"device_kv": 4, "device_mamba": 1, "storage": True}, "ops": [
        {"op": "start", "tokens": [1, 2]}, {"op": "start", "tokens": [4, 5, 6]}, {"op": "start", "tokens": [4]},
        {"op": "l3_ack"}, {"op": "finish_oldest"}, {"op": "prefetch", "tokens": [1, 2]},
        {"op": "prefetch", "tokens": [7, 8]}, {"op": "prefetch", "tokens": [9]}]}
    report = run_ops(doc, "pre_fix")
    assert {k: report[k] for k in ("status", "tree", "tree_slots", "counters", "inflight", "free")} == dict(
        status=".ee-.r.-", tree=["1 1,2 v=1 h=1 m=1 mh=1 fl=1 ml=1 hr=0 hmr=0"],
        tree_slots=["1 1,2 v=0,1 h=0,1 m=0 mh=0"],
        counters=dict(full_evictable=0, full_protected=2, mamba_evictable=0, mamba_protected=1, tree_device_tokens=2,
                      live_requests=0),
        inflight=dict(write_through=1, load_back=0, backup=0, prefetch=1, pending_l3=0, write_acks=1),
        free=dict(device_kv=[2, 3], device_mamba=[], host_kv=[4, 5, 6, 7], host_mamba=[2, 3, 4, 5, 6, 7]))
    c = run_ops(load("C"), "pre_fix")
    assert (c["status"], c["step"], c["first_stale"], c["stale_final"]) == ("........ .x".replace(" ", ""), 9, 5, [])
    assert c["double_frees"] == [dict(pool="device_kv", slots=[0, 1], chain=[
        "_iteratively_delete_tombstone_leaf", "_evict_regular", "_evict_device_leaf", "evict"])]
    assert {p: a["leaked"] for p, a in c["accounting"].items() if a["leaked"]} == {"host_kv": [2, 3]}


def test_run_ops_reports_the_stale_references_left_at_the_end():
    """Scenario D stopped after its host eviction (pre_fix): the detached C is still in three holders, its device
    slot leaks."""
    doc = load("D")
    report = run_ops({**doc, "ops": doc["ops"][:2]}, "pre_fix")
    assert plain(report) == {
        **D_MERGED, "status": "..", "first_stale": 1,
        "stale_final": ["3@evictable_full_device_leaves", "3@full_lru_list", "3@mamba_lru_list"],
        "counters": {**D_MERGED["counters"], "full_evictable": 1, "mamba_evictable": 1},
        "accounting": {**D_MERGED["accounting"], "device_kv": {**NO_ISSUES, "leaked": [0]},
                       "device_mamba": {**NO_ISSUES, "leaked": [0]}},
        "free": {**D_MERGED["free"], "device_kv": list(range(1, 32)), "device_mamba": list(range(1, 8))}}


def test_run_ops_reports_the_guards_warnings():
    report = run_ops(load("A"), "described_fix")
    assert (report["outcome"], report["status"], report["warnings"]) == (
        "clean", "....", ["Skip stale HiMamba eviction node_id=7 reason=stale node in _evict_host_leaf parent_id=2 "
                          "child_key=1"])


@pytest.mark.parametrize("version", ["pre_fix", "merged_fix", "followup_fix", "described_fix"])
@pytest.mark.parametrize("scenario", "ABCD")
def test_first_stale_is_the_first_operation_after_which_a_full_scan_finds_a_stale_reference(scenario, version):
    """The cheap check (``_no_stale``) with the full scan behind it dates the first stale reference as a full scan
    after every operation does (the crashing operation is not scanned)."""
    scans = []
    report = run_ops(load(scenario), version, on_step=lambda i, cache, drv: scans.append(bool(stale_refs(cache))))
    if report["step"] is not None:
        scans[report["step"]] = False
    assert report["first_stale"] == next((i for i, s in enumerate(scans) if s), None)


def test_first_stale_pinned_for_the_four_scenarios():
    got = {s: [run_ops(load(s), v)["first_stale"] for v in ("pre_fix", "merged_fix", "followup_fix")]
           for s in "ABCD"}
    assert got == FIRST_STALE


FIRST_STALE = dict(A=[1, 1, None], B=[3, 3, 3], C=[5, 5, 5], D=[1, None, None])


def test_the_cheap_checks_log_holds_only_the_current_operations_cuts_and_is_dropped_at_the_end():
    """A split's displaced node, then two host evictions that each pop one plain leaf (merged_fix: nothing goes
    stale, so the log is kept to the end of the run and then dropped)."""
    doc = {"ops": [{"op": "request", "tokens": [1, 2]}, {"op": "request", "tokens": [3]}, {"op": "events"},
                   {"op": "request", "tokens": [1, 5]}, {"op": "events"}, {"op": "evict", "n": 2},
                   {"op": "evict_host", "n": 1}, {"op": "evict_host", "n": 1}]}
    seen = []
    report = run_ops(doc, "merged_fix", on_step=lambda i, c, d: seen.append(
        None if c.cuts is None else [(n.key, got is n, children) for n, got, children in c.cuts]))
    assert (report["status"], report["first_stale"], report["tree"]) == (
        "........", None, ["1 1 v=1 h=1 m=0 mh=0 fl=0 ml=0 hr=0 hmr=0", "2 5 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"])
    assert seen == [[], [], [], [((2,), False, None)], [], [], [((3,), True, False)], [((2,), True, False)]]
    assert report["_cache"].cuts is None


def test_run_ops_calls_on_step_after_each_operation_with_the_cache_and_driver():
    seen = []
    report = run_ops(load("D"), "pre_fix", on_step=lambda i, cache, drv: seen.append((i, cache, drv)))
    assert [i for i, _, _ in seen] == [0, 1, 2]
    assert all(c is report["_cache"] and d is report["_driver"] for _, c, d in seen)


def test_run_ops_trace_is_one_record_per_operation_with_the_tree_after_it():
    doc = load("D")
    report = run_ops(doc, "pre_fix", trace=True)
    assert plain(report) == D_PRE_FIX
    assert isinstance(report["trace"], OpTrace)
    assert list(report["trace"]) == [dict(step=0, op=doc["ops"][0], status=".", tree=D_TREE),
                                     dict(step=1, op=doc["ops"][1], status=".", tree=[]),
                                     dict(step=2, op=doc["ops"][2], status="x", tree=[])]
    merged = run_ops(doc, "merged_fix", trace=True)["trace"]
    assert [(r["status"], r["tree"]) for r in merged] == [(".", D_TREE), (".", D_TREE), (".", [])]


def test_run_ops_trace_uses_the_recorder_it_is_given():
    rec = Recorder(snapshots=True, invariants=False)
    report = run_ops(load("D"), "pre_fix", trace=True, recorder=rec)
    assert report["trace"]._rec is rec and rec.cache is report["_cache"] and rec.replayable is True
    assert [(o.index, o.status) for o in rec.ops] == [(0, "."), (1, "."), (2, "x")]
    assert rec.crashed == report["_crash"]


# --- apply_op ----------------------------------------------------------------------------------------------------

def test_apply_op_returns_each_status_and_the_crash_only_for_a_raise():
    doc = load("D")
    cache = make_cache("write_through", version="pre_fix")
    drv = Driver(cache)
    assert apply_op(drv, 0, doc["ops"][0]) == (".", None)
    assert apply_op(drv, 1, {"op": "finish_oldest"}) == ("-", None)
    assert apply_op(drv, 2, doc["ops"][1]) == (".", None)
    code, crash = apply_op(drv, 3, doc["ops"][2])
    assert (code, crash) == ("x", Crash("AssertionError", "parent does not have child key, 1",
                                        "_delete_tombstone_leaf", tuple(D_PRE_FIX["chain"])))
    assert crash is cache.crashed
    assert apply_op(drv, 4, {"op": "finish_oldest"}) == ("-", None)  # the earlier crash is not this op's


# --- _progress ---------------------------------------------------------------------------------------------------

def test_no_bar_when_asked_not_to_or_when_a_run_is_short():
    assert ops_run.PROGRESS_MIN_OPS == 2000
    assert [_progress(n, False) for n in (0, 1999, 2000, 10**6)] == [None] * 4
    assert [_progress(n, None) for n in (0, 1, 1999)] == [None] * 3


def test_a_bar_asked_for_is_drawn_whatever_the_length():
    bar = _progress(5, True)
    try:
        assert (bar.total, bar.unit, bar.desc, bar.disable, bar.leave, bar.mininterval) == \
            (5, "op", "simulating", False, False, 0.5)
    finally:
        bar.close()


def test_a_long_run_gets_a_bar_that_shows_only_on_a_terminal(capsys):
    bar = _progress(2000, None)
    try:
        assert (bar.total, bar.disable) == (2000, True)  # pytest's stderr is not a terminal: tqdm hides it
    finally:
        bar.close()
    bar = _progress(2001, None)
    try:
        assert bar.total == 2001
    finally:
        bar.close()


class FakeBar:
    def __init__(self, total, asked):
        self.args, self.updates, self.closed = (total, asked), [], False

    def update(self, n):
        self.updates.append(n)

    def close(self):
        self.closed = True


def test_execute_moves_its_bar_once_per_operation_and_closes_it(monkeypatch):
    bars = []
    monkeypatch.setattr(ops_run, "_progress", lambda total, asked: bars.append(FakeBar(total, asked)) or bars[-1])
    cfg, ops = check_doc(load("D"))
    execute(cfg, [(None, op) for op in ops], preset("pre_fix"), progress=True)
    execute(cfg, [(None, op) for op in ops], preset("merged_fix"), window=(1, 2))
    execute(cfg, [(None, op) for op in ops], preset("merged_fix"), progress=None)
    # a window reaching past the last operation: the bar's total is what runs (3), not the window's end (9)
    execute(cfg, [(None, op) for op in ops], preset("merged_fix"), window=(1, 9), progress=True)
    assert [(b.args, b.updates, b.closed) for b in bars] == [
        ((3, True), [1, 1, 1], True), ((2, False), [1, 1], True), ((3, None), [1, 1, 1], True),
        ((3, True), [1, 1, 1], True)]


def test_execute_without_a_bar_runs_the_same():
    cfg, ops = check_doc(load("D"))
    assert plain(execute(cfg, [(None, op) for op in ops], preset("pre_fix"), progress=False)) == D_PRE_FIX


# --- execute -----------------------------------------------------------------------------------------------------

def test_execute_with_a_window_runs_the_operations_before_it_fast_and_records_only_the_window():
    cfg, ops = check_doc(load("D"))
    pairs = [("R1", op) for op in ops]
    rec = Recorder(snapshots=False, invariants=False, states=True)
    out = execute(cfg, pairs, preset("merged_fix"), recorder=rec, window=(1, 2))
    assert (out["status"], out["tree"]) == ("..", D_TREE)
    assert [(o.index, o.actor, o.status) for o in rec.ops] == [(1, "R1", ".")]
    assert rec.cache is out["_cache"] and rec.replayable is True
    rec = Recorder(snapshots=False, invariants=False, states=True)
    out = execute(cfg, pairs, preset("pre_fix"), recorder=rec, window=(2, 3))
    assert (out["status"], out["step"], out["first_stale"]) == ("..x", 2, 1)
    assert [(o.index, o.status) for o in rec.ops] == [(2, "x")] and rec.crashed == out["_crash"]
    rec = Recorder(snapshots=False, invariants=False, states=True)
    out = execute(cfg, pairs, preset("pre_fix"), recorder=rec, window=(0, 1))
    assert (out["status"], [o.index for o in rec.ops], rec.cache is out["_cache"]) == (".", [0], True)


@pytest.mark.parametrize("window, attached, recorded", [
    (None, [(0, [])], [0, 1, 2]), ((0, 1), [(0, [])], [0]), ((1, 3), [(0, D_TREE)], [1, 2]),
    ((2, 3), [(0, D_TREE)], [2])])
def test_execute_attaches_the_recorder_once_where_its_window_starts(window, attached, recorded):
    """(ops recorded, the tree) at each attach: before anything runs, or after the operations before the window."""
    from simcache.state import tree_lines
    cfg, ops = check_doc(load("D"))
    attaches = []
    rec = Recorder(snapshots=False, invariants=False, states=True)
    real = rec.attach

    def attach(cache, drv=None):
        assert drv is not None and drv.cache is cache
        attaches.append((len(rec.ops), tree_lines(cache)))
        return real(cache, drv)

    rec.attach = attach
    execute(cfg, [(None, op) for op in ops], preset("merged_fix"), recorder=rec, window=window)
    assert (attaches, [o.index for o in rec.ops]) == (attached, recorded)


def test_execute_with_a_recorder_and_no_trace_records_every_operation():
    cfg, ops = check_doc(load("D"))
    rec = Recorder(snapshots=False, invariants=False)
    out = execute(cfg, [(None, op) for op in ops], preset("pre_fix"), recorder=rec)
    assert "trace" not in out and rec.replayable is True and rec.cache is out["_cache"]
    assert [(o.index, o.status) for o in rec.ops] == [(0, "."), (1, "."), (2, "x")]


@pytest.mark.parametrize("keeps", [dict(snapshots=True, invariants=False), dict(snapshots=False, invariants=True),
                                   dict(snapshots=False, invariants=False, states=True)])
def test_a_trace_takes_a_recorder_that_keeps_any_kind_of_checkpoint(keeps):
    cfg, ops = check_doc(load("D"))
    out = execute(cfg, [(None, op) for op in ops], preset("pre_fix"), trace=True, recorder=Recorder(**keeps))
    assert [r["tree"] for r in out["trace"]] == [D_TREE, [], []]


def test_a_trace_refuses_a_recorder_that_keeps_no_checkpoints():
    cfg, ops = check_doc(load("D"))
    rec = Recorder(snapshots=False, invariants=False)
    assert said(execute, cfg, [(None, op) for op in ops], preset("pre_fix"), trace=True, recorder=rec) == (
        "trace=True rebuilds each operation's tree from the recorder's checkpoints, and a "
        "Recorder(snapshots=False, invariants=False) keeps none; pass no recorder, or one with snapshots or "
        "invariants on")
    assert rec.cache is None and rec.ops == []


def test_execute_passes_the_device_and_the_scheduler_driver_on():
    cfg, ops = check_doc({"ops": [], "config": {"driver": "scheduler"}})
    out = execute(cfg, [], preset("pre_fix"), device="cpu")
    assert (out["_driver"].retry_mamba_alloc, out["_cache"].config.device, out["status"]) == (True, "cpu", "")
    cfg, _ = check_doc({"ops": []})
    assert execute(cfg, [], preset("pre_fix"))["_driver"].retry_mamba_alloc is False
    assert said(execute, cfg, [], preset("pre_fix"), device="tpu") == TPU


# --- OpTrace -----------------------------------------------------------------------------------------------------

def d_trace(version="pre_fix"):
    doc = load("D")
    return doc, run_ops(doc, version, trace=True)["trace"]


def test_op_trace_length_indexing_and_slices():
    doc, tr = d_trace()
    recs = [dict(step=0, op=doc["ops"][0], status=".", tree=D_TREE), dict(step=1, op=doc["ops"][1], status=".",
                                                                           tree=[]),
            dict(step=2, op=doc["ops"][2], status="x", tree=[])]
    assert len(tr) == 3
    assert [tr[0], tr[1], tr[2]] == recs
    assert [tr[-1], tr[-2], tr[-3]] == [recs[2], recs[1], recs[0]]
    assert (tr[0:2], tr[1:], tr[::2], tr[::-1], tr[5:9], tr[-2:]) == (
        recs[0:2], recs[1:], recs[::2], recs[::-1], [], recs[-2:])
    assert tr[1:3:1] == recs[1:3]


@contextmanager
def deadline(seconds: float):
    """Fail after ``seconds`` instead of hanging (rebuilding a record past the run's end would never return)."""
    def expired(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("i", [3, 4, -4, -10])
def test_op_trace_names_an_index_outside_the_run_as_it_was_asked(i):
    _, tr = d_trace()
    with deadline(5), pytest.raises(IndexError) as e:
        tr[i]
    assert str(e.value) == f"operation {i} is outside this run's 0..2 (or -3..-1 from the end)"


def test_op_trace_of_a_run_that_traced_no_operations_says_so():
    tr = run_ops({"ops": [{"op": "request", "tokens": [1]}]}, "pre_fix", trace=True)["trace"]
    tr._rec.ops.clear()
    for i in (0, -1):
        with deadline(5), pytest.raises(IndexError) as e:
            tr[i]
        assert str(e.value) == f"operation {i}: this run traced no operations"
    assert list(tr) == [] and tr[0:5] == []


def test_replaying_operation_ends_past_the_last_operation_yields_nothing():
    """``iter_op_ends`` clamps ``stop`` to the run (it used to loop forever when ``start`` was past the end)."""
    _, tr = d_trace()
    rec = tr._rec
    with deadline(5):
        assert list(rec.iter_op_ends(3, 4, id)) == [] and list(rec.iter_op_ends(7, 9, id)) == []
        assert [p for p, _ in rec.iter_op_ends(1, 10, id)] == [1, 2]


def test_op_trace_keeps_each_tree_it_rebuilt_and_hands_out_copies():
    _, tr = d_trace()
    first = tr[0]
    first["tree"].append("changed")
    assert tr[0]["tree"] == D_TREE and tr._kept == {0: D_TREE}
    tr._kept[1] = ["kept"]  # a kept tree is not rebuilt
    assert tr[1]["tree"] == ["kept"]


def test_op_trace_forgets_its_kept_trees_past_64():
    doc = {"ops": [{"op": "request", "tokens": [i]} for i in range(70)], "config": {"device_kv": 200,
                                                                                     "device_mamba": 100}}
    tr = run_ops(doc, "pre_fix", trace=True)["trace"]
    for i in range(64):
        tr[i]
    assert sorted(tr._kept) == list(range(64))
    assert tr[64]["step"] == 64 and sorted(tr._kept) == [64]
    assert tr[69]["tree"][-1] == "1 69 v=1 h=0 m=1 mh=0 fl=0 ml=0 hr=0 hmr=0" and len(tr[69]["tree"]) == 70


def test_op_trace_iterates_compares_and_prints():
    doc, tr = d_trace()
    recs = list(tr)
    assert [r["step"] for r in tr] == [0, 1, 2]
    assert tr == recs and tr == tuple(recs) and recs == tr
    assert not (tr == recs[:2]) and not (tr == [*recs, recs[0]])
    assert not (tr == [recs[0], recs[1], {**recs[2], "status": "."}])
    assert tr != [recs[1], recs[0], recs[2]]
    assert tr == d_trace()[1]  # another run of the same operations
    assert tr != d_trace("merged_fix")[1]  # another version: the trees differ after operation 1
    assert tr.__eq__(3) is NotImplemented and tr.__eq__("abc") is NotImplemented and tr != 3
    with pytest.raises(TypeError):
        hash(tr)
    assert repr(tr) == "<OpTrace of 3 operations, trees rebuilt on demand>"
    empty = run_ops({"ops": []}, trace=True)["trace"]
    assert (len(empty), list(empty), empty == [], repr(empty)) == (
        0, [], True, "<OpTrace of 0 operations, trees rebuilt on demand>")


# --- what the mutation run of ops_run.py left ----------------------------------------------------------------------

def test_first_stale_stays_the_first_operation_when_a_later_one_detaches_again():
    """Two host-only parents, each over a live device child (scenario D's shape twice): pre_fix's first host
    eviction detaches P1 with C1 (stale), the second P2 with C2. The first stale operation stays 1, though the
    second also detaches and stale references are still there."""
    doc = {"config": {**load("D")["config"]},
           "ops": [{"op": "inject", "nodes": [{"key": [1, 2], "parent": None, "host": True},
                                              {"key": [3], "parent": 0, "device": True, "mamba": True},
                                              {"key": [5, 6], "parent": None, "host": True},
                                              {"key": [7], "parent": 2, "device": True, "mamba": True}]},
                   {"op": "evict_host", "n": 2}, {"op": "evict_host", "n": 2}]}
    report = run_ops(doc, "pre_fix")
    assert (report["status"], report["first_stale"], report["stale_final"]) == (
        "...", 1, [f"{n}@{holder}" for n in (3, 7)
                   for holder in ("evictable_full_device_leaves", "full_lru_list", "mamba_lru_list")])


def test_a_traced_run_records_per_operation_states_only():
    """``trace=True`` with no recorder of the caller's: a recorder that keeps the states it rebuilds each operation's
    tree from, and neither snapshots nor invariants (the memory and time a long run would spend on them)."""
    rec = run_ops(load("D"), "pre_fix", trace=True)["trace"]._rec
    assert (rec.want_snapshots, rec.want_invariants, rec.want_states) == (False, False, True)


def test_an_unknown_operation_is_named_by_its_index():
    cfg, ops = check_doc(load("D"))
    drv = Driver(make_cache())
    with pytest.raises(ScenarioError) as e:
        apply_op(drv, 2, {"op": "bogus"})
    assert str(e.value) == "op 2: unknown op 'bogus'"
    assert said(execute, cfg, [(None, ops[0]), (None, {"op": "bogus"})], preset("pre_fix")) == \
        "op 1: unknown op 'bogus'"


def test_no_first_stale_when_the_cheap_check_hands_over_and_the_full_scan_finds_nothing():
    """A run (found among random oracle-style documents) whose fifth operation the cheap check cannot vouch for, so
    the full scan runs from there on, and finds no stale reference: no operation is the first stale one."""
    doc = {"config": {"policy": "write_through", "storage": True, "page_size": 1, "device_kv": 12, "device_mamba": 6,
                      "host_kv": 8, "host_mamba": 8, "driver": "fuzz", "load_back_threshold": 10,
                      "prefetch_stop_policy": "best_effort"},
           "ops": [{"op": "start", "tokens": [2, 5, 1]}, {"op": "request", "tokens": [1, 2, 3, 4, 4, 1]},
                   {"op": "events"}, {"op": "l3_ack"}, {"op": "request", "tokens": [1, 2, 1, 2, 2]}]}
    for version in ("pre_fix", "followup_fix"):
        report = run_ops(doc, version)
        assert (report["outcome"], report["status"], report["first_stale"], report["stale_final"]) == (
            "clean", ".....", None, [])
