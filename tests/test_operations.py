"""The single homes of issue 11: the operation (``operations``), the settings (``config``), one step of the driver
(``Driver.step``), the crash summaries (``crash``) and the transcript (``transcript``), pinned with exact outcomes."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from simcache.cache import HiMambaRadixCache
from simcache.config import CacheConfig, check_settings, from_settings
from simcache.crash import STALE, Crash, InternalError, cell, raise_if_internal, short_sig, signature
from simcache.driver import Driver
from simcache.errors import ConfigError, ScenarioError
from simcache.operations import (
    APPLIED,
    NO_ROOM,
    NO_SLOTS,
    NOTHING_TO_DO,
    NOTHING_TO_FETCH,
    OPS,
    RAISED,
    STATUS_KEY,
    check_op,
    describe_op,
    format_op,
    parse_op,
)
from simcache.scenario import gallery, load
from simcache.simulate import simulate
from simcache.versions import preset

# one operation of every kind, its short string (None: it has none) and its description
EVERY_KIND = [
    ({"op": "request", "tokens": [1, 2, 3]}, "request 1 2 3", "request [1,2,3]"),
    ({"op": "start", "tokens": [7]}, "start 7", "start [7]"),
    ({"op": "finish"}, "finish", "finish"),
    ({"op": "finish_oldest"}, "finish_oldest", "finish_oldest"),
    ({"op": "evict", "n": 2}, "evict 2", "evict n=2"),
    ({"op": "evict_mamba", "n": 1}, "evict_mamba 1", "evict_mamba n=1"),
    ({"op": "evict_host", "n": 0}, "evict_host 0", "evict_host n=0"),
    ({"op": "events"}, "events", "events"),
    ({"op": "l3_ack"}, "l3_ack", "l3_ack"),
    ({"op": "write_ack"}, "write_ack", "write_ack"),
    ({"op": "write_ack", "n": 3}, "write_ack 3", "write_ack n=3"),
    ({"op": "load_ack"}, "load_ack", "load_ack"),
    ({"op": "load_ack", "n": 2}, "load_ack 2", "load_ack n=2"),
    ({"op": "prefetch", "tokens": [1, 2, 9]}, "prefetch 1 2 9", "prefetch [1,2,9]"),
    ({"op": "prefetch_done", "n": 4, "mamba_hit": True}, "prefetch_done 4 hit", "prefetch_done n=4 mamba_hit=True"),
    ({"op": "prefetch_done", "n": 0, "mamba_hit": False}, "prefetch_done 0 miss",
     "prefetch_done n=0 mamba_hit=False"),
    ({"op": "prefetch_hit", "n": 4}, "prefetch_hit 4", "prefetch_hit n=4"),
    ({"op": "inject", "nodes": [{"key": [1, 2], "host": True}]}, None, "inject 1 node(s)"),
]


def test_the_table_lists_every_operation_once_oracle_first_and_the_driver_runs_each():
    assert list(OPS) == ["request", "start", "finish", "finish_oldest", "evict", "evict_mamba", "evict_host",
                         "events", "l3_ack", "write_ack", "load_ack", "prefetch", "prefetch_done", "prefetch_hit",
                         "inject"]
    assert [k for k, v in OPS.items() if not v.oracle] == ["finish", "write_ack", "load_ack"]
    assert list(Driver.RUN) == list(OPS)
    assert {k.name for op, _, _ in EVERY_KIND for k in [OPS[op["op"]]]} == set(OPS)


@pytest.mark.parametrize("op, text, about", EVERY_KIND, ids=lambda x: str(x)[:30])
def test_format_parse_and_describe_every_kind(op, text, about):
    assert format_op(op) == (dict(op) if text is None else text)
    if text is not None:
        assert parse_op(text, "here") == op
    assert describe_op(op) == about
    assert describe_op(op, "R1") == f"R1: {about}"
    check_op(op, 0, page_size=1)  # every sample is a valid operation


@pytest.mark.parametrize("op", [{"op": "request", "tokens": [1], "rid": "chat"}, {"op": "finish", "rid": "R1"},
                                {"op": "evict", "n": 1, "note": "why"}, {"op": "match", "tokens": [1]}])
def test_operations_without_a_short_spelling_stay_objects(op):
    assert format_op(op) == op and format_op(op) is not op


def test_every_gallery_operation_formats_back_to_its_file_spelling():
    count = 0
    for name, path in gallery().items():
        raw = yaml.safe_load(path.read_text())["actors"]
        parsed = load(name).actors
        assert {a: [format_op(o) for o in ops] for a, ops in parsed.items()} == raw, name
        assert {a: [parse_op(format_op(o), name) for o in ops] for a, ops in parsed.items()} == parsed, name
        count += sum(map(len, raw.values()))
    assert count == 47


@pytest.mark.parametrize("op, allow_extra, message", [
    ({"op": "evict"}, True, "op 3 (evict) needs exactly n; it has []"),
    ({"op": "request", "tokens": [1], "n": 2}, True, "op 3 (request) needs exactly tokens (optionally rid); it has "
                                                    "['n', 'tokens']"),
    ({"op": "request", "tokens": []}, True, "op 3 (request): tokens must be a non-empty list of whole numbers from 0 "
                                            "to 2**62 - 1, like [1, 2, 3]"),
    ({"op": "evict", "n": -1}, True, "op 3 (evict): n must be a whole number between 0 and 1048576, not -1"),
    ({"op": "prefetch_done", "n": 1, "mamba_hit": 1}, True, "op 3 (prefetch_done): mamba_hit must be true or false"),
    ({"op": "start", "tokens": [1], "rid": "a b"}, True, "op 3 (start): rid 'a b' must be 1 to 64 ASCII letters, "
                                                         "digits, '_', '.', '-', like 'chat'"),
    ({"op": "finish"}, False, "op 3: unknown op 'finish'; known ops: request, start, finish_oldest, evict, "
                              "evict_mamba, evict_host, events, l3_ack, prefetch, prefetch_done, prefetch_hit, inject"),
    ({"evict": 2}, True, "op 3: an operation object needs an 'op' field, like {op: evict, n: 2} or the string "
                         "'evict 2'; it has evict"),
    ({"op": "inject", "nodes": [{"key": [1, 2, 3]}]}, True,
     "op 3 node 0: key has 3 tokens; make it a multiple of page_size 2"),
])
def test_check_op_says_exactly_what_is_wrong(op, allow_extra, message):
    with pytest.raises(ScenarioError) as e:
        check_op(op, 3, page_size=2, allow_extra=allow_extra)
    assert str(e.value) == message


@pytest.mark.parametrize("text, message", [
    ("evict", "here: cannot read operation 'evict'; write e.g. 'request 1 2 3', 'evict 2', 'prefetch_done 4 hit', "
              "'events'"),
    ("events 1", "here: cannot read operation 'events 1'; write e.g. 'request 1 2 3', 'evict 2', "
                 "'prefetch_done 4 hit', 'events'"),
    ("prefetch_done 4 maybe", "here: cannot read operation 'prefetch_done 4 maybe'; write e.g. 'request 1 2 3', "
                              "'evict 2', 'prefetch_done 4 hit', 'events'"),
    ("inject 1", "here: unknown operation 'inject'; use one of request, start, finish, finish_oldest, evict, "
                 "evict_mamba, evict_host, events, l3_ack, write_ack, load_ack, prefetch, prefetch_done, prefetch_hit"),
])
def test_parse_op_refuses_with_one_sentence(text, message):
    with pytest.raises(ScenarioError) as e:
        parse_op(text, "here")
    assert str(e.value) == message


# --- Driver.step: the one place a skip or an exception becomes a status letter --------------------------------
def _driver(**config) -> Driver:
    return Driver(HiMambaRadixCache(CacheConfig(flags=preset("pre_fix"), **config)))


def test_step_returns_the_status_of_an_applied_a_skipped_and_a_refused_operation():
    d = _driver(device_kv=4, device_mamba=1)
    assert d.step({"op": "finish_oldest"}, 0) == NOTHING_TO_DO
    assert d.step({"op": "start", "tokens": [1, 2]}, 1) == APPLIED
    assert d.step({"op": "start", "tokens": [3, 4, 5]}, 2) == NO_ROOM  # the only Mamba slot is held, nothing evicts
    assert d.step({"op": "finish_oldest"}, 3) == APPLIED
    assert d.step({"op": "prefetch", "tokens": [1]}, 4) == NOTHING_TO_DO  # storage is off
    assert d.cache.crashed is None and list(d.live) == []
    with pytest.raises(ScenarioError, match=r"^op 5: unknown op 'fly'$"):
        d.step({"op": "fly"}, 5)


def test_step_says_u_when_the_request_cannot_get_its_slots_and_r_when_nothing_is_left_to_prefetch():
    d = _driver(device_kv=3, device_mamba=1, storage=True)
    assert d.step({"op": "request", "tokens": [1]}, 0) == APPLIED
    assert d.step({"op": "events"}, 1) == APPLIED
    # eviction makes room, but the device hit [1] is locked for the request and 3 more KV slots do not fit
    assert d.step({"op": "request", "tokens": [1, 2, 3]}, 2) == NO_SLOTS
    assert d.step({"op": "prefetch", "tokens": [1]}, 3) == NOTHING_TO_FETCH  # all of it is cached
    assert d.step({"op": "finish", "rid": "nobody"}, 4) == NOTHING_TO_DO
    assert d.cache.crashed is None and list(d.live) == []


def test_step_turns_the_simulated_assertion_into_x_and_leaves_the_crash_on_the_cache():
    sc = load("crash_pr")
    run = simulate(sc, "pre_fix", snapshots=False)
    d = Driver(HiMambaRadixCache(from_settings(sc.config, preset("pre_fix"))))
    statuses = "".join(d.step(op, i) for i, (_, op) in enumerate(sc.linearize(sc.parse_schedule())))
    assert statuses == run.result["status"] == "...........x"
    assert d.cache.crashed == run.crash == Crash("AssertionError", f"{STALE}, 1", "_delete_tombstone_leaf", (
        "cache_finished_req", "insert", "_insert_helper", "_inc_hit_count", "write_backup", "evict_host",
        "_evict_host_leaf", "_iteratively_delete_tombstone_leaf", "_delete_tombstone_leaf"))


def test_step_raises_a_users_mistake_instead_of_reporting_it():
    d = _driver()
    assert d.step({"op": "start", "tokens": [1], "rid": "a"}, 0) == APPLIED
    with pytest.raises(ScenarioError, match="^op 1: request id 'a' is still live; give each started request its own "
                                            "rid$"):
        d.step({"op": "start", "tokens": [2], "rid": "a"}, 1)


def test_the_driver_retries_the_mamba_allocation_only_when_asked():
    cache = HiMambaRadixCache(CacheConfig())
    assert Driver(cache, retry_mamba_alloc=True).retry_mamba_alloc is True
    assert Driver(cache).retry_mamba_alloc is False
    with pytest.raises(TypeError):
        Driver(cache, scheduler=True)  # the old name is gone
    assert set(vars(Driver(cache, retry_mamba_alloc=True))) == {"cache", "retry_mamba_alloc", "live", "nreq"}


def test_status_key_names_every_letter_once():
    assert [k[0] for k in STATUS_KEY] == [".", "x", "-", "e", "u", "r", "f"]
    assert RAISED == "x"


# --- exceptions: classified by the module that raised them ---------------------------------------------------
def test_an_exception_raised_in_an_observer_module_is_a_simcache_bug_and_one_in_the_cache_is_a_result():
    from simcache.state import tree_lines

    with pytest.raises(AttributeError) as observed:
        tree_lines(None)  # raised inside simcache.state
    with pytest.raises(InternalError, match=r"^simcache bug while observing op 7: AttributeError: .* "
                                            r"\(in state\.py:\d+\)$"):
        raise_if_internal(observed.value, "op 7")
    d = _driver(device_kv=4)
    with pytest.raises(TypeError) as simulated:
        d._start(5)  # raised in the driver's own code (``len(5)``): a result, not a bug of an observer
    assert raise_if_internal(simulated.value, "op 0") is None


# --- crash summaries, one home ---------------------------------------------------------------------------------
def test_every_summary_of_a_crash_comes_from_crash_py():
    c = Crash("AssertionError", "parent does not have child key, 1", "_delete_tombstone_leaf", ("evict_host",))
    other = Crash("AssertionError", "evict host: host_ref_counter != 0 with x.id=7 x.host_ref_counter=1", "evict_host",
                  ())
    assert c.outcome == "AssertionError: parent does not have child key, 1"
    assert c.located == "AssertionError: parent does not have child key, 1 (in _delete_tombstone_leaf)"
    assert c.raised == "AssertionError: parent does not have child key, 1  (raised in _delete_tombstone_leaf)"
    assert short_sig(c) == "AssertionError: parent does not have child key in _delete_tombstone_leaf"
    assert short_sig(other) == "AssertionError: evict host: host_ref_counter != 0 in evict_host"
    assert signature(c) == "AssertionError: parent does not have child key, 1 @ _delete_tombstone_leaf"
    assert signature(other) == ("AssertionError: evict host: host_ref_counter != 0 with x.id=# x.host_ref_counter=1 "
                                "@ evict_host")
    assert signature(None) == cell(None) == "clean"
    assert cell(c) == "X in _delete_tombstone_leaf"
    assert cell(other) == "evict host: host_ref_counter != 0 with x.id=7 x.host_ref_counter=1 in evict_host"


def test_run_keeps_its_crash_cache_and_driver_as_attributes_not_private_keys():
    run = simulate("crash_pr", "pre_fix", snapshots=False)
    assert not [k for k in run.result if k.startswith("_")]
    assert run.crash.function == "_delete_tombstone_leaf" and run.cache.crashed is run.crash
    assert list(run.driver.live) == [] and run.driver.cache is run.cache


# --- settings: one way from a dict to CacheConfig -------------------------------------------------------------
def test_settings_become_a_cache_config_one_way():
    cfg = check_settings({"policy": "write_back", "page_size": 2})
    assert cfg == dict(policy="write_back", storage=False, page_size=2, device_kv=32, device_mamba=8, host_kv=8,
                       host_mamba=8, prefetch_threshold=1, load_back_threshold=10,
                       prefetch_stop_policy="best_effort", driver="fuzz", write_through_threshold=2)
    made = from_settings(cfg, preset("followup_fix"))
    assert made == CacheConfig(page_size=2, policy="write_back", write_through_threshold=2,
                               flags=preset("followup_fix"))


@pytest.mark.parametrize("settings, in_a_file, in_python", [
    ({"policy": "lru"}, "config.policy must be one of write_through, write_through_selective, write_back, not 'lru'",
     "policy must be one of write_through, write_through_selective, write_back, not 'lru'"),
    ({"page_size": 0}, "config.page_size must be at least 1", "page_size must be a whole number >= 1, not 0"),
    ({"host_kv": -4}, "config.host_kv must be a whole number between 0 and 1048576, not -4",
     "host_kv must be a whole number >= 0, not -4"),
    ({"storage": "yes"}, "config.storage must be true or false, not 'yes'", "storage must be true or false, not 'yes'"),
    ({"prefetch_stop_policy": "never"}, "config.prefetch_stop_policy must be best_effort, wait_complete or timeout, "
     "not 'never'", "prefetch_stop_policy must be best_effort, wait_complete or timeout"),
    ({"device_kv": 1 << 21}, "config.device_kv must be a whole number between 0 and 1048576, not 2097152",
     "device_kv = 2097152 is too large; keep pools at most 1048576 slots"),
])
def test_one_validator_speaks_for_a_file_and_for_python(settings, in_a_file, in_python):
    with pytest.raises(ScenarioError) as file_error:
        check_settings(settings)
    with pytest.raises(ConfigError) as api_error:
        CacheConfig(**settings)
    assert (str(file_error.value), str(api_error.value)) == (in_a_file, in_python)


# --- layering: the views and the explorer's artefacts do not import the command line ---------------------------
def test_teach_and_the_explorers_artefacts_do_not_import_the_cli():
    code = ("import sys, simcache.teach, simcache.explore.artefacts, simcache.workload, simcache.transcript; "
            "print(sorted(m for m in sys.modules if m in ('simcache.cli', 'simcache.explore.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['simcache.explore.cli']"  # simcache.explore's package imports its own command


def test_an_operation_turned_away_returns_its_letter_and_apply_raises_it_as_a_skip():
    """``Driver.RUN``'s methods return the letter of a skip decided at once (no exception per turned-away operation,
    the explorer's machine reads it); ``apply`` still raises it as a ``Skip`` and ``step`` still returns it."""
    from simcache.operations import NOTHING_TO_DO, Skip

    d = Driver(HiMambaRadixCache(CacheConfig(storage=True)))
    for op in ({"op": "l3_ack"}, {"op": "finish_oldest"}, {"op": "prefetch_done", "n": 1, "mamba_hit": False},
               {"op": "prefetch_hit", "n": 1}, {"op": "write_ack"}, {"op": "load_ack"}):
        assert Driver.RUN[op["op"]](d, op, 0) == NOTHING_TO_DO
        with pytest.raises(Skip) as got:
            d.apply(op, 0)
        assert got.value.code == NOTHING_TO_DO and d.step(op, 0) == NOTHING_TO_DO
    assert Driver.RUN["request"](d, {"op": "request", "tokens": [1, 2]}, 0) is None and d.nreq == 1
