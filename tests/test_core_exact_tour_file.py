"""tour_file.py compared whole: a tour read from plain data field by field (texts stripped, defaults filled, node
numbers written as '#8'), and every refusal's sentence, each at its exact limit, so a teacher who writes a wrong
tour file is told where and how to fix it."""
from __future__ import annotations

import copy
import json
import os

import pytest

from simcache.invariants import INVARIANTS
from simcache.presets import ALL_PRESETS as PRESETS  # a tour may take a preset of either family
from simcache.render.moments import MOMENT_KINDS
from simcache.tour_file import (
    CLAIMS,
    DEFAULT_HINT,
    MAX_BYTES,
    MAX_CHOICES,
    MAX_STOPS,
    MAX_TEXT,
    STEP_KINDS,
    Choice,
    Stop,
    Tour,
    TourError,
    from_doc,
    load,
)


def base() -> dict:
    return {"title": " T ", "scenario": "crash_pr", "preset": "pre_fix", "intro": "hello\n",
            "stops": [{"at": {"kind": "attach", "parent": 8, "node": "1,2", "function": "insert"}, "ask": " Q? ",
                       "explain": "E", "title": "First",
                       "choices": [{"text": " a ", "claim": {"parent": {"node": 7, "is": 8}}, "correct": True},
                                   {"text": "b", "claim": {"violated": {"invariant": "attachment"}}}]},
                      {"at": {"moment": "readmitted", "nth": 3}, "ask": "Q2", "explain": "E2",
                       "choices": [{"text": "c", "claim": {"outcome": {"is": "clean", "raised_in": "f"}}},
                                   {"text": "d", "claim": {"exists": {"node": "#9", "is": False}}, "correct": True},
                                   {"text": "e", "claim": {"in_children": {"node": 9, "of": "1,2", "is": True}}},
                                   {"text": "f", "claim": {"holds": {"node": "#8", "holder": " nothing "}}}]},
                      {"at": {"op_end": 0}, "ask": "Q3", "explain": "E3",
                       "choices": [{"text": "g", "claim": {"attached": {"node": "#8", "is": True}}, "correct": True},
                                   {"text": "h", "claim": {"outcome": {"is": "assertion"}}}]}]}


def test_a_tour_read_field_by_field():
    assert from_doc(base(), "mine") == Tour(
        name="mine", title="T", scenario="crash_pr", preset="pre_fix", intro="hello", stops=(
            Stop(at={"kind": "attach", "parent": "#8", "node": "1,2", "function": "insert"}, title="First", ask="Q?",
                 explain="E", choices=(
                     Choice("a", {"parent": {"node": "#7", "is": "#8"}}, True),
                     Choice("b", {"violated": {"invariant": "attachment", "is": True}}, False))),
            Stop(at={"moment": "readmitted", "nth": 3}, title="Stop 2", ask="Q2", explain="E2", choices=(
                Choice("c", {"outcome": {"is": "clean", "raised_in": "f"}}, False),
                Choice("d", {"exists": {"node": "#9", "is": False}}, True),
                Choice("e", {"in_children": {"node": "#9", "of": "1,2", "is": True}}, False),
                Choice("f", {"holds": {"node": "#8", "holder": "nothing"}}, False))),
            Stop(at={"op_end": 0}, title="Stop 3", ask="Q3", explain="E3", choices=(
                Choice("g", {"attached": {"node": "#8", "is": True}}, True),
                Choice("h", {"outcome": {"is": "assertion"}}, False)))))
    assert from_doc(base()).stops[1].answer == 1
    one = base()
    one["stops"] = one["stops"][2:]
    assert [s.title for s in from_doc(one).stops] == ["Stop 1"]  # one stop is a tour
    no_intro = base()
    del no_intro["intro"]
    assert from_doc(no_intro).intro == "" and from_doc(no_intro).name == "tour"
    big = base()
    big["stops"] = [copy.deepcopy(big["stops"][2]) for _ in range(MAX_STOPS)]
    big["stops"][0]["choices"] = [dict(big["stops"][0]["choices"][1]) for _ in range(MAX_CHOICES - 1)] + [
        big["stops"][0]["choices"][0]]
    big["stops"][0]["at"] = {"op_end": 10**6 - 1}
    big["stops"][1]["at"] = {"moment": "assertion", "nth": 1}
    big["title"] = "t" * MAX_TEXT
    read = from_doc(big)
    assert len(read.stops) == MAX_STOPS and len(read.stops[0].choices) == MAX_CHOICES
    assert read.stops[0].at == {"op_end": 999_999} and len(read.title) == MAX_TEXT
    long_node = base()
    long_node["stops"][0]["at"]["node"] = "9" * 200
    assert from_doc(long_node).stops[0].at["node"] == "9" * 200


def edit(path: str, value=None, *, delete: bool = False) -> dict:
    """``base()`` with the field at ``path`` (dots and list indexes) set to ``value`` or deleted."""
    doc = base()
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    at = doc
    for p in parents:
        at = at[p]
    if delete:
        del at[last]
    else:
        at[last] = value
    return doc


S1, C11 = "tour stop 1", "tour stop 1 choice 1"
ALL_AT = "function, kind, moment, node, nth, op_end, parent, returns"
LONG = "z" * 50
SAID_LONG = f"'{'z' * 39}... (52 characters)"

CASES = [
    (lambda: [], "tour must be a mapping, not []"),
    (lambda: {**base(), "x" * 50: 1, "aa": 2},
     "tour has unknown field 'aa'; its fields are intro, preset, scenario, seed, stops, title"),
    (lambda: edit("title", delete=True),
     "tour is missing 'title'; its fields are intro, preset, scenario, seed, stops, title"),
    (lambda: edit("title", "   "), "tour.title must be non-empty text, not '   '"),
    (lambda: edit("title", 7), "tour.title must be non-empty text, not 7"),
    (lambda: edit("title", " " * 50), f"tour.title must be non-empty text, not '{' ' * 39}... (52 characters)"),
    (lambda: {**base(), "k" * 50: 1}, f"tour has unknown field '{'k' * 39}... (52 characters); its fields are intro, "
                                      "preset, scenario, seed, stops, title"),
    (lambda: edit("stops.0", "m" * 50), f"{S1} must be a mapping, not '{'m' * 39}... (52 characters)"),
    (lambda: edit("title", "t" * (MAX_TEXT + 1)), "tour.title is 2,001 characters long; keep it under 2,000"),
    (lambda: edit("intro", ""), "tour.intro must be non-empty text, not ''"),
    (lambda: edit("scenario", None), "tour.scenario must be non-empty text, not None"),
    (lambda: edit("preset", LONG), f"tour.preset is {SAID_LONG}; choose one of {', '.join(PRESETS)}"),
    (lambda: edit("stops", []), f"tour.stops must be a list of 1 to {MAX_STOPS} stops, not []"),
    (lambda: edit("stops", "s"), f"tour.stops must be a list of 1 to {MAX_STOPS} stops, not 's'"),
    (lambda: edit("stops", [base()["stops"][2]] * (MAX_STOPS + 1)),
     "tour.stops must be a list of 1 to 20 stops, not [{'at': {'op_end': 0}, 'ask': 'Q3', 'exp... (4,347 characters)"),
    (lambda: edit("stops.0", 5), f"{S1} must be a mapping, not 5"),
    (lambda: edit("stops.0.ask", delete=True),
     f"{S1} is missing 'ask'; its fields are ask, at, choices, explain, hint, title"),
    (lambda: edit("stops.0.explain", ""), f"{S1}.explain must be non-empty text, not ''"),
    (lambda: edit("stops.0.title", ""), f"{S1}.title must be non-empty text, not ''"),
    (lambda: edit("stops.0.ask", []), f"{S1}.ask must be non-empty text, not []"),
    (lambda: edit("stops.0.choices", [base()["stops"][0]["choices"][0]]),
     f"{S1}.choices must be a list of 2 to {MAX_CHOICES} choices, not "
     f"[{{'text': ' a ', 'claim': {{'parent': {{'n... (77 "
     "characters)"),
    (lambda: edit("stops.0.choices", {"a": 1}), f"{S1}.choices must be a list of 2 to 6 choices, not {{'a': 1}}"),
    (lambda: edit("stops.0.choices", [base()["stops"][0]["choices"][1]] * (MAX_CHOICES + 1)),
     f"{S1}.choices must be a list of 2 to 6 choices, not "
     f"[{{'text': 'b', 'claim': {{'violated': {{'i... (469 characters)"),
    (lambda: edit("stops.0.choices.0", "c"), f"{C11} must be a mapping, not 'c'"),
    (lambda: edit("stops.0.choices.0.claim", delete=True),
     f"{C11} is missing 'claim'; its fields are claim, correct, hint, text"),
    (lambda: edit("stops.0.choices.0.text", " "), f"{C11}.text must be non-empty text, not ' '"),
    (lambda: edit("stops.0.choices.0.correct", "yes"), f"{C11}.correct must be true or false, not 'yes'"),
    (lambda: edit("stops.0.choices.0.correct", LONG), f"{C11}.correct must be true or false, not {SAID_LONG}"),
    (lambda: edit("stops.0.choices.0.correct", False),
     f"{S1} must mark exactly one choice 'correct: true' (it marks 0)"),
    (lambda: edit("stops.0.choices.1.correct", True),
     f"{S1} must mark exactly one choice 'correct: true' (it marks 2)"),
    # where a stop is
    (lambda: edit("stops.0.at", "x"), f"{S1}.at must be a mapping, not 'x'"),
    (lambda: edit("stops.0.at", {"when": 1}), f"{S1}.at has unknown field 'when'; its fields are {ALL_AT}"),
    (lambda: edit("stops.0.at", {}),
     f"{S1}.at needs exactly one of moment, kind, op_end or returns, e.g. {{moment: went-stale}}"),
    (lambda: edit("stops.0.at", {"moment": "assertion", "op_end": 2}),
     f"{S1}.at needs exactly one of moment, kind, op_end or returns, e.g. {{moment: went-stale}}"),
    (lambda: edit("stops.0.at", {"moment": LONG}),
     f"{S1}.at.moment is {SAID_LONG}; choose one of {', '.join(MOMENT_KINDS)}"),
    (lambda: edit("stops.0.at", {"kind": LONG}), f"{S1}.at.kind is {SAID_LONG}; choose one of {', '.join(STEP_KINDS)}"),
    (lambda: edit("stops.0.at", {"moment": "assertion", "nth": 0}),
     f"{S1}.at.nth must be a whole number from 1, not 0"),
    (lambda: edit("stops.0.at", {"moment": "assertion", "nth": True}),
     f"{S1}.at.nth must be a whole number from 1, not True"),
    (lambda: edit("stops.0.at", {"moment": "assertion", "nth": 10**6}),
     f"{S1}.at.nth must be a whole number from 1, not 1000000"),
    (lambda: edit("stops.0.at", {"moment": "assertion", "nth": "2" * 50}),
     f"{S1}.at.nth must be a whole number from 1, not '{'2' * 39}... (52 characters)"),
    (lambda: edit("stops.0.at", {"op_end": -1}), f"{S1}.at.op_end must be a whole number, not -1"),
    (lambda: edit("stops.0.at", {"op_end": 2.0}), f"{S1}.at.op_end must be a whole number, not 2.0"),
    (lambda: edit("stops.0.at", {"kind": "attach", "nth": 2}),
     f"{S1}.at.nth counts moments; with kind it is the first one after the previous stop"),
    (lambda: edit("stops.0.at", {"moment": "assertion", "node": "#8"}),
     f"{S1}.at: node, parent and function narrow a kind, e.g. {{kind: attach, parent: '#8'}}"),
    (lambda: edit("stops.0.at", {"op_end": 1, "parent": "#8"}),
     f"{S1}.at: node, parent and function narrow a kind, e.g. {{kind: attach, parent: '#8'}}"),
    (lambda: edit("stops.0.at", {"op_end": 1, "function": "f"}),
     f"{S1}.at: node, parent and function narrow a kind, e.g. {{kind: attach, parent: '#8'}}"),
    (lambda: edit("stops.0.at", {"kind": "attach", "node": ""}),
     f"{S1}.at.node must name a node as '#8' or by its key text like '1,2', not ''"),
    (lambda: edit("stops.0.at", {"kind": "attach", "parent": True}),
     f"{S1}.at.parent must name a node as '#8' or by its key text like '1,2', not True"),
    (lambda: edit("stops.0.at", {"kind": "attach", "parent": "1" * 201}),
     f"{S1}.at.parent must name a node as '#8' or by its key text like '1,2', not '{'1' * 39}... (203 characters)"),
    (lambda: edit("stops.0.at", {"kind": "attach", "function": ""}),
     f"{S1}.at.function must be non-empty text, not ''"),
    # claims
    (lambda: edit("stops.0.choices.0.claim", {"holds": {}, "exists": {}}),
     f"{C11} must be one claim like {{holds: {{node: '#8', holder: write_backup}}}}; claims: {', '.join(CLAIMS)}"),
    (lambda: edit("stops.0.choices.0.claim", ["holds"]),
     f"{C11} must be one claim like {{holds: {{node: '#8', holder: write_backup}}}}; claims: {', '.join(CLAIMS)}"),
    (lambda: edit("stops.0.choices.0.claim", {LONG: {}}), f"{C11} names unknown claim {SAID_LONG}; claims: "
                                                          f"{', '.join(CLAIMS)}"),
    (lambda: edit("stops.0.choices.0.claim", {"holds": {"node": "#8"}}),
     f"{C11}.holds is missing 'holder'; its fields are holder, node"),
    (lambda: edit("stops.0.choices.0.claim", {"holds": {"node": "#8", "holder": ""}}),
     f"{C11}.holds.holder must be non-empty text, not ''"),
    (lambda: edit("stops.0.choices.0.claim", {"holds": {"node": [8], "holder": "x"}}),
     f"{C11}.holds.node must name a node as '#8' or by its key text like '1,2', not [8]"),
    (lambda: edit("stops.0.choices.0.claim", {"in_children": {"node": "#9", "of": None, "is": True}}),
     f"{C11}.in_children.of must name a node as '#8' or by its key text like '1,2', not None"),
    (lambda: edit("stops.0.choices.0.claim", {"in_children": {"node": "#9", "of": "#8", "is": "yes"}}),
     f"{C11}.in_children.is must be true or false, not 'yes'"),
    (lambda: edit("stops.0.choices.0.claim", {"parent": {"node": "#9", "is": 1.5}}),
     f"{C11}.parent.is must name a node as '#8' or by its key text like '1,2', not 1.5"),
    (lambda: edit("stops.0.choices.0.claim", {"outcome": {"is": LONG}}),
     f"{C11}.outcome.is must be assertion or clean, not {SAID_LONG}"),
    (lambda: edit("stops.0.choices.0.claim", {"outcome": {"raised_in": "f"}}),
     f"{C11}.outcome is missing 'is'; its fields are is, raised_in"),
    (lambda: edit("stops.0.choices.0.claim", {"violated": {"invariant": LONG}}),
     f"{C11}.violated.invariant is {SAID_LONG}; choose one of {', '.join(INVARIANTS)}"),
    (lambda: edit("stops.0.choices.0.claim", {"violated": {"invariant": "attachment", "is": 1}}),
     f"{C11}.violated.is must be true or false, not 1"),
    (lambda: edit("stops.0.choices.0.claim", {"exists": {"node": "#8", "is": None}}),
     f"{C11}.exists.is must be true or false, not None"),
    (lambda: edit("stops.0.choices.0.claim", {"attached": {"node": "#8", "is": 0}}),
     f"{C11}.attached.is must be true or false, not 0"),
    (lambda: edit("stops.0.choices.0.claim", {"attached": {"node": "#8", "is": True, "of": "#2"}}),
     f"{C11}.attached has unknown field 'of'; its fields are is, node"),
]


@pytest.mark.parametrize("make, sentence", CASES, ids=range(len(CASES)))
def test_each_refusal_is_one_sentence_naming_where_and_how(make, sentence):
    with pytest.raises(TourError) as e:
        from_doc(make())
    assert str(e.value) == sentence


def test_files_by_name_and_by_path(tmp_path):
    assert load("crash_pr").name == "crash_pr" and load("crash_pr").stops[0].title == "The first broken invariant"
    (tmp_path / "mine.json").write_text(json.dumps(base()))
    assert load(tmp_path / "mine.json") == from_doc(base(), "mine", str(tmp_path / "mine.json"))
    (tmp_path / "other.yaml").write_text("title: x\n")
    with pytest.raises(TourError) as e:
        load(str(tmp_path / "other.yaml"))
    assert str(e.value) == "other is missing 'preset'; its fields are intro, preset, scenario, seed, stops, title"
    (tmp_path / "bad.yml").write_bytes(b"\xff\xfe")
    with pytest.raises(TourError) as e:
        load(tmp_path / "bad.yml")
    assert str(e.value) == "cannot read tour file bad.yml: it is not UTF-8 text; give a UTF-8 text file"
    with pytest.raises(TourError) as e:
        load("n" * 70)
    assert str(e.value) == (f"no tour named '{'n' * 59}... (72 characters) and no such file; gallery tours: "
                            "crash_pr, scenario_a, unified_refill")
    (tmp_path / "broken.yaml").write_text("title: [\n")
    with pytest.raises(TourError) as e:
        load(tmp_path / "broken.yaml")
    assert str(e.value).startswith("broken.yaml is not valid YAML at line")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(TourError) as e:
        load(tmp_path / "broken.json")
    assert str(e.value).startswith("broken.json is not valid JSON")


# --- issue #40 §5 (seed, hints, returns) and #43 item 6 (read through safe_io; every type checked before use) ---
NEW_CASES = [
    (lambda: edit("preset", ["pre_fix"]), f"tour.preset is ['pre_fix']; choose one of {', '.join(PRESETS)}"),
    (lambda: edit("preset", {"a": 1}), f"tour.preset is {{'a': 1}}; choose one of {', '.join(PRESETS)}"),
    (lambda: edit("seed", -1), "tour.seed must be a whole number from 0 to 4,294,967,295, not -1"),
    (lambda: edit("seed", True), "tour.seed must be a whole number from 0 to 4,294,967,295, not True"),
    (lambda: edit("seed", 2**32), "tour.seed must be a whole number from 0 to 4,294,967,295, not 4294967296"),
    (lambda: edit("seed", "7"), "tour.seed must be a whole number from 0 to 4,294,967,295, not '7'"),
    (lambda: edit("stops.0.at", {"moment": ["assertion"]}),
     f"{S1}.at.moment is ['assertion']; choose one of {', '.join(MOMENT_KINDS)}"),
    (lambda: edit("stops.0.at", {"kind": {"x": 1}}),
     f"{S1}.at.kind is {{'x': 1}}; choose one of {', '.join(STEP_KINDS)}"),
    (lambda: edit("stops.0.at", {"returns": ""}), f"{S1}.at.returns must be non-empty text, not ''"),
    (lambda: edit("stops.0.at", {"returns": "evict_host", "kind": "call"}),
     f"{S1}.at needs exactly one of moment, kind, op_end or returns, e.g. {{moment: went-stale}}"),
    (lambda: edit("stops.0.hint", 3), f"{S1}.hint must be non-empty text, not 3"),
    (lambda: edit("stops.0.choices.1.hint", ""), f"{S1} choice 2.hint must be non-empty text, not ''"),
    (lambda: edit("stops.0.choices.0.hint", "x"),
     f"{C11} is the correct one: a hint is for a wrong choice (the feedback for the right one is the stop's explain)"),
    (lambda: edit("stops.0.choices.0.claim", {"violated": {"invariant": ["attachment"]}}),
     f"{C11}.violated.invariant is ['attachment']; choose one of {', '.join(INVARIANTS)}"),
    (lambda: edit("stops.0.choices.0.claim", {"outcome": {"is": ["clean"]}}),
     f"{C11}.outcome.is must be assertion or clean, not ['clean']"),
    (lambda: edit("stops.0.choices.0.claim", {"outcome": {"is": "clean", "raised_in": 5}}),
     f"{C11}.outcome.raised_in must be non-empty text, not 5"),
]


@pytest.mark.parametrize("make, sentence", NEW_CASES, ids=range(len(NEW_CASES)))
def test_new_fields_and_types_refused_in_one_sentence(make, sentence):
    with pytest.raises(TourError) as e:
        from_doc(make())
    assert str(e.value) == sentence


def test_seed_hints_and_returns_read_field_by_field():
    doc = base()
    doc["seed"] = 41
    doc["stops"][0]["hint"] = " look again "
    doc["stops"][0]["choices"][1]["hint"] = " not this one "
    doc["stops"][2]["at"] = {"returns": " evict_host "}
    t = from_doc(doc, "mine", "/x/mine.yaml")
    assert (t.seed, t.source) == (41, "/x/mine.yaml")
    assert t.stops[0].hint == "look again" and t.stops[0].choices[1].hint == "not this one"
    assert t.stops[0].hint_for(1) == "not this one" and t.stops[1].hint_for(0) == DEFAULT_HINT
    assert t.stops[2].at == {"returns": "evict_host"}
    doc["stops"][0]["choices"][1].pop("hint")
    assert from_doc(doc).stops[0].hint_for(1) == "look again"  # the stop's hint for a choice without its own
    assert from_doc(base()).seed == 0 and from_doc(base()).source == ""


def test_the_order_is_a_permutation_drawn_from_the_seed():
    doc = base()
    doc["stops"][1]["choices"] += [{"text": t, "claim": {"exists": {"node": "#9", "is": True}}} for t in "xy"]
    orders = {seed: [from_doc({**doc, "seed": seed}).order(i) for i in range(3)] for seed in range(20)}
    assert all(sorted(o[1]) == list(range(6)) and sorted(o[0]) == [0, 1] for o in orders.values())
    assert orders[3] == [from_doc({**doc, "seed": 3}).order(i) for i in range(3)]  # the same seed, the same order
    assert len({tuple(o[1]) for o in orders.values()}) >= 15  # 20 seeds: (nearly) as many orders of six choices


def test_files_are_read_through_safe_io(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    with pytest.raises(TourError) as e:
        load(fifo)
    assert str(e.value) == f"tour file {fifo} is a named pipe (FIFO), not a file; give a YAML or JSON tour file"
    with pytest.raises(TourError) as e:
        load(tmp_path)
    assert str(e.value) == f"tour file {tmp_path} is a folder, not a file; give a YAML or JSON tour file"
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_BYTES + 1))
    with pytest.raises(TourError) as e:
        load(big)
    assert str(e.value) == "big.yaml is larger than 1 MB; keep a tour file under 1 MB"
    listed = tmp_path / "listed.yaml"
    listed.write_text("title: t\nscenario: crash_pr\npreset: [pre_fix]\nstops: []\n")
    with pytest.raises(TourError) as e:
        load(listed)
    assert str(e.value) == "listed.stops must be a list of 1 to 20 stops, not []"
    listed.write_text(json.dumps({**base(), "preset": ["pre_fix"]}))
    with pytest.raises(TourError) as e:
        load(listed)
    assert str(e.value) == f"listed.preset is ['pre_fix']; choose one of {', '.join(PRESETS)}"
    for bad in (None, 42, b"crash_pr", ""):
        with pytest.raises(TourError) as e:
            load(bad)
        assert str(e.value) == (f"a tour is a gallery name or a tour file, not {bad!r}; e.g. load('crash_pr'); "
                                "gallery tours: crash_pr, scenario_a, unified_refill")
    with pytest.raises(TourError) as e:
        load("x" * 300)  # a name too long for the file system is no file
    assert str(e.value).startswith("no tour named 'xxxx")
    assert str(e.value).endswith("crash_pr, scenario_a, unified_refill")
