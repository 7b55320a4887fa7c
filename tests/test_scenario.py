"""Scenarios and schedules: the file format, the op string forms, actor-relative requests, the schedule grammar.

The story: a scenario is named actors, each a list of scheduler-level operations; a schedule says whose turn it is;
``linearize`` turns the two into the one list of operations the driver runs. The oracle's ``OPS.json`` is a
scenario too (one actor, ``main``). Every gallery file and every oracle example validates against the JSON Schema
in ``docs/scenario.schema.json`` (docs/scenarios.md describes the same format in prose).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest
import yaml

from simcache.errors import ScenarioError, ScheduleError
from simcache.ops_run import run_ops
from simcache.scenario import from_doc, gallery, load, load_file, parse_op
from simcache.scheduler import Schedule, complete, format_turns, parse_schedule, round_robin
from simcache.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = json.loads((ROOT / "docs" / "scenario.schema.json").read_text())
ORACLE_FILES = sorted(FIXTURES.glob("oracle_*.json"))


# --- operations: every string form ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, op", [
    ("request 1 2 3", {"op": "request", "tokens": [1, 2, 3]}),
    ("request [1, 2, 3]", {"op": "request", "tokens": [1, 2, 3]}),
    ("request 1,2,3", {"op": "request", "tokens": [1, 2, 3]}),
    ("  start   5 6  ", {"op": "start", "tokens": [5, 6]}),
    ("prefetch 1 2 9 9", {"op": "prefetch", "tokens": [1, 2, 9, 9]}),
    ("finish", {"op": "finish"}),
    ("finish_oldest", {"op": "finish_oldest"}),
    ("events", {"op": "events"}),
    ("l3_ack", {"op": "l3_ack"}),
    ("evict 2", {"op": "evict", "n": 2}),
    ("evict_mamba 1", {"op": "evict_mamba", "n": 1}),
    ("evict_host 3", {"op": "evict_host", "n": 3}),
    ("write_ack", {"op": "write_ack"}),
    ("write_ack 2", {"op": "write_ack", "n": 2}),
    ("load_ack", {"op": "load_ack"}),
    ("load_ack 4", {"op": "load_ack", "n": 4}),
    ("prefetch_done 4 hit", {"op": "prefetch_done", "n": 4, "mamba_hit": True}),
    ("prefetch_done 4 miss", {"op": "prefetch_done", "n": 4, "mamba_hit": False}),
    ("prefetch_done 2 true", {"op": "prefetch_done", "n": 2, "mamba_hit": True}),
    ("prefetch_done 0 false", {"op": "prefetch_done", "n": 0, "mamba_hit": False}),
])
def test_every_string_form_parses_to_the_oracles_object(text, op):
    assert parse_op(text, "here") == op
    # and the schema accepts the same string
    jsonschema.validate({"actors": {"R1": [text]}}, SCHEMA)


def test_an_object_passes_through_unchanged_note_included():
    raw = {"op": "evict", "n": 2, "note": "why"}
    assert parse_op(raw, "here") == raw and parse_op(raw, "here") is not raw


@pytest.mark.parametrize("text, message", [
    ("evict", "here: cannot read operation 'evict'; write e.g. 'request 1 2 3', 'evict 2', "
              "'prefetch_done 4 hit', 'events'"),
    ("evict two", "here: cannot read operation 'evict two'; write e.g. 'request 1 2 3', 'evict 2', "
                  "'prefetch_done 4 hit', 'events'"),
    ("events 3", "here: cannot read operation 'events 3'; write e.g. 'request 1 2 3', 'evict 2', "
                 "'prefetch_done 4 hit', 'events'"),
    ("prefetch_done 4 maybe", "here: cannot read operation 'prefetch_done 4 maybe'; write e.g. 'request 1 2 3', "
                              "'evict 2', 'prefetch_done 4 hit', 'events'"),
    ("fly 1 2", "here: unknown operation 'fly'; use one of request, start, finish, finish_oldest, evict, "
                "evict_mamba, evict_host, events, l3_ack, write_ack, load_ack, prefetch, prefetch_done, prefetch_hit"),
    ("", "here: '' is not an operation; write an object like {op: request, tokens: [1, 2]} or a string like "
         "'request 1 2'"),
    (7, "here: 7 is not an operation; write an object like {op: request, tokens: [1, 2]} or a string like "
        "'request 1 2'"),
])
def test_a_bad_op_string_says_what_to_write(text, message):
    with pytest.raises(ScenarioError) as e:
        parse_op(text, "here")
    assert str(e.value) == message


# --- actor-relative request ids and linearize -------------------------------------------------------------------

def test_requests_are_named_after_their_actor_and_finish_takes_the_actors_oldest():
    sc = from_doc({"actors": {"R1": ["start 1 2", "request 3", "start 4", "finish", "finish", "finish"],
                              "R2": ["start 7", {"op": "start", "tokens": [8], "rid": "mine"}, "finish"]}})
    lin = sc.linearize(sc.parse_schedule("R1*3 R2*2 R1 R2 R1*2"))
    assert [(a, op["op"], op.get("rid")) for a, op in lin] == [
        ("R1", "start", "R1"), ("R1", "request", "R1.1"), ("R1", "start", "R1.2"),
        ("R2", "start", "R2"), ("R2", "start", "mine"),
        ("R1", "finish", "R1"),
        ("R2", "finish", "R2"),  # an explicit rid is not an actor-named request: R2's oldest open one is R2
        ("R1", "finish", "R1.2"), ("R1", "finish", "R1?"),  # nothing left open: a name no request has
    ]
    run = simulate(sc, schedule="R1*3 R2*2 R1 R2 R1*2")
    assert run.result["status"] == "........-"  # the last finish has nothing to do
    assert list(run.driver.live) == ["mine"]


def test_linearize_follows_the_schedule_and_leaves_the_scenario_untouched():
    sc = from_doc({"actors": {"A": ["evict 1", "evict 2"], "B": ["events"], "C": ["l3_ack", "evict_host 1"]}})
    lin = sc.linearize(sc.parse_schedule("C B A* C"))
    assert [(a, op) for a, op in lin] == [
        ("C", {"op": "l3_ack"}), ("B", {"op": "events"}), ("A", {"op": "evict", "n": 1}),
        ("A", {"op": "evict", "n": 2}), ("C", {"op": "evict_host", "n": 1})]
    assert sc.actors["A"] == [{"op": "evict", "n": 1}, {"op": "evict", "n": 2}]


def test_the_initial_state_is_injected_as_operation_0_of_actor_init():
    sc = load("scenario_a")
    lin = sc.linearize(sc.parse_schedule())
    assert lin[0] == ("init", {"op": "inject", "nodes": sc.initial})
    assert [a for a, _ in lin] == ["init", "mem", "l3", "mem"]
    run = simulate(sc, "pre_fix")
    assert run.result["step"] == 3  # indices count the injection, as the oracle's op 0
    assert run.trace.ops[0].actor == "init"


def test_finish_without_rid_in_a_plain_ops_list_finishes_the_oldest_live_request():
    report = run_ops({"ops": [{"op": "start", "tokens": [1, 2]}, {"op": "start", "tokens": [3]},
                              {"op": "finish"}, {"op": "finish"}, {"op": "finish"}, {"op": "events"}]})
    assert report["status"] == "....-."  # the write-through locks hold until the acks are consumed
    assert report["tree"] == ["1 1,2 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0",
                              "1 3 v=1 h=1 m=1 mh=1 fl=0 ml=0 hr=0 hmr=0"]


# --- the schedule grammar -----------------------------------------------------------------------------------------

LENGTHS = {"R1": 3, "R2": 2, "ctl": 4}


@pytest.mark.parametrize("text, turns", [
    ("R1", ("R1",)),                                   # ACTOR: one turn = one operation
    ("R1 R2*2 ctl*", ("R1", "R2", "R2", "ctl", "ctl", "ctl", "ctl")),  # ACTOR*N, ACTOR* (all that is left)
    ("ctl*2 R1 ctl* R1*", ("ctl", "ctl", "R1", "ctl", "ctl", "R1", "R1")),
    ("R1*0 R2", ("R2",)),
    ("  R1\tR2\n", ("R1", "R2")),                       # any whitespace separates turns
    ("", ()),                                           # a partial schedule may be empty
    ("R1*", ("R1", "R1", "R1")),
])
def test_schedule_grammar(text, turns):
    assert parse_schedule(text, LENGTHS).turns == turns


def test_a_partial_schedule_runs_only_its_turns():
    sched = parse_schedule("R1 R2", LENGTHS)
    assert len(sched) == 2 and not complete(sched, LENGTHS)
    assert complete(parse_schedule("R1* R2* ctl*", LENGTHS), LENGTHS)
    run = simulate("scenario_c", "pre_fix", schedule="pf R2")
    assert run.result["status"] == ".." and run.outcome == "clean" and str(run.schedule) == "pf R2"


@pytest.mark.parametrize("text, message", [
    ("R1 R9", "schedule names unknown actor 'R9'; the actors are R1, R2, ctl"),
    ("R1*4", "schedule asks actor 'R1' for 4 operations but it has 3; shorten the schedule or add operations"),
    ("R1* R1", "schedule asks actor 'R1' for 4 operations but it has 3; shorten the schedule or add operations"),
    ("R1*x", "schedule turn 'R1*x' is not ACTOR, ACTOR*N or ACTOR*; write e.g. 'R1 R2*2 ctl*'"),
    ("R1,R2", "schedule turn 'R1,R2' is not ACTOR, ACTOR*N or ACTOR*; write e.g. 'R1 R2*2 ctl*'"),
    ("*2", "schedule turn '*2' is not ACTOR, ACTOR*N or ACTOR*; write e.g. 'R1 R2*2 ctl*'"),
])
def test_a_bad_schedule_says_how_to_fix_it(text, message):
    with pytest.raises(ScheduleError) as e:
        parse_schedule(text, LENGTHS)
    assert str(e.value) == message


def test_round_robin_is_the_default_and_skips_finished_actors():
    assert round_robin(LENGTHS).turns == ("R1", "R2", "ctl", "R1", "R2", "ctl", "R1", "ctl", "ctl")
    assert str(round_robin(LENGTHS)) == "R1 R2 ctl R1 R2 ctl R1 ctl*2"
    sc = from_doc({"actors": {"a": ["evict 1", "evict 1"], "b": ["events"]}})
    assert sc.parse_schedule().turns == ("a", "b", "a")
    assert str(simulate(sc).schedule) == "a b a"


def test_switches_count_actor_changes():
    assert Schedule(()).switches == 0
    assert Schedule(("R1", "R1", "R1")).switches == 0
    assert Schedule(("R1", "R2", "R2", "ctl", "R1")).switches == 3
    assert parse_schedule("R1 R2*2 ctl* R1*", LENGTHS).switches == 3


def test_format_turns_round_trips():
    assert format_turns(("R1", "R2", "R2", "ctl", "ctl", "ctl", "ctl")) == "R1 R2*2 ctl*4"
    assert format_turns(()) == ""
    rng = random.Random(7)
    for _ in range(200):
        left = dict(LENGTHS)
        turns = []
        while any(left.values()) and rng.random() > 0.05:
            a = rng.choice([k for k, v in left.items() if v])
            left[a] -= 1
            turns.append(a)
        text = format_turns(turns)
        assert parse_schedule(text, LENGTHS).turns == tuple(turns)
        assert format_turns(parse_schedule(text, LENGTHS).turns) == text
        assert str(Schedule(tuple(turns))) == text


def test_gallery_schedules_are_canonical_and_complete():
    for name in gallery():
        sc = load(name)
        sched = sc.parse_schedule()
        assert complete(sched, sc.lengths), name
        assert str(sched) == sc.parse_schedule(str(sched)).__str__()


# --- the oracle's OPS.json is a scenario -----------------------------------------------------------------------

@pytest.mark.parametrize("path", ORACLE_FILES, ids=lambda p: p.stem)
def test_the_oracle_format_is_a_one_actor_scenario(path):
    doc = json.loads(path.read_text())
    sc = load_file(path)
    assert sc.name == path.stem and sc.title == doc["about"]
    assert list(sc.actors) == ["main"]
    assert sc.actors["main"] == doc["ops"]
    lin = sc.linearize(sc.parse_schedule())
    assert [a for a, _ in lin] == ["main"] * len(doc["ops"])
    # the oracle's ops in order; requests get actor-relative ids (main, main.1, ...), which change nothing else
    assert [{k: v for k, v in op.items() if k != "rid"} for _, op in lin] == doc["ops"]
    assert [op["rid"] for _, op in lin if "rid" in op] == [
        "main" if i == 0 else f"main.{i}" for i in range(sum(op["op"] in ("request", "start") for op in doc["ops"]))]
    for preset in doc["expect"]:
        run, report = simulate(sc, preset), run_ops(doc, preset)
        for key in ("outcome", "raised_in", "step", "status", "tree", "tree_slots", "accounting", "free"):
            assert run.result[key] == report[key], (preset, key)


def test_actors_and_ops_together_are_refused():
    with pytest.raises(ScenarioError, match="give either 'actors' or 'ops'"):
        from_doc({"actors": {"a": ["events"]}, "ops": [{"op": "events"}]}, name="both")


def test_defaults_of_a_minimal_scenario():
    sc = from_doc({"actors": {"R1": ["request 1 2"]}}, name="tiny")
    assert (sc.name, sc.preset, sc.flags, sc.initial, sc.schedule, sc.expect) == ("tiny", None, {}, [], None, {})
    assert sc.config == dict(policy="write_through", storage=False, page_size=1, device_kv=32, device_mamba=8,
                             host_kv=8, host_mamba=8, prefetch_threshold=1, load_back_threshold=10,
                             prefetch_stop_policy="best_effort", driver="fuzz", write_through_threshold=1)
    assert from_doc({"config": {"policy": "write_back"}, "actors": {"a": []}}).config["write_through_threshold"] == 2


def test_as_doc_round_trips_through_from_doc():
    for name in gallery():
        sc = load(name)
        again = from_doc(sc.as_doc(), name=name)
        assert (again.config, again.actors, again.initial, again.schedule, again.expect, again.flags) == \
               (sc.config, sc.actors, sc.initial, sc.schedule, sc.expect, sc.flags)


# --- the JSON Schema -------------------------------------------------------------------------------------------

def test_the_schema_is_a_valid_draft_2020_12_schema():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", [*gallery().values(), *ORACLE_FILES], ids=lambda p: p.name)
def test_every_gallery_file_and_oracle_example_validates(path):
    doc = yaml.safe_load(path.read_text())  # YAML is a superset of JSON
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)


@pytest.mark.parametrize("doc", [
    {},                                                     # no actors
    {"actors": {"R1": ["evict"]}},                          # a string form without its number
    {"actors": {"R1": [{"op": "evict"}]}},                  # an object without its field
    {"actors": {"R1": [{"op": "evict", "n": -1}]}},
    {"actors": {"1x": ["events"]}},                         # actor names start with a letter
    {"actors": {"R1": ["events"]}, "config": {"device_kv": "32"}},
    {"actors": {"R1": ["events"]}, "config": {"colour": "red"}},
    {"actors": {"R1": ["events"]}, "preset": "nope"},
    {"actors": {"R1": ["events"]}, "flags": {"stale_guards": 1}},
    {"actors": {"R1": ["events"]}, "schedule": "R1 R2*x"},
    {"actors": {"R1": ["events"]}, "expect": {"nope": {}}},
    {"actors": {"R1": ["events"]}, "initial": [{"key": [1], "device": "yes"}]},
    {"actors": {"R1": ["events"]}, "surprise": 1},
])
def test_the_schema_and_the_loader_both_refuse(doc):
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(doc)
    with pytest.raises(ScenarioError):
        sc = from_doc(doc)
        sc.parse_schedule()
