"""``scenario.py`` exactly: a scenario with every field built whole, the oracle's ``ops`` form, every refusal of
``from_doc`` as a whole sentence (long names cut the same way each time), the request-id rules between actors,
``linearize``'s request ids, ``as_doc`` and the loaders."""
from __future__ import annotations

import pytest

from simcache import scenario as scenario_module
from simcache.config import SETTINGS
from simcache.errors import ScenarioError, shown
from simcache.presets import ALL_PRESETS as PRESETS  # a scenario may name a preset of either family
from simcache.scenario import Scenario, actor_name_problem, from_doc, load, load_file
from simcache.versions import FLAG_NAMES

ACTORS = {"A": ["start 1 2", "finish"], "B": ["evict 2"]}
CONFIG = dict(SETTINGS, storage=True, host_kv=4, write_through_threshold=1)
PARSED = {"A": [{"op": "start", "tokens": [1, 2]}, {"op": "finish"}], "B": [{"op": "evict", "n": 2}]}
LONG = "k" * 41  # one past the 40 characters a refusal quotes whole


def refused(doc, name="s") -> str:
    with pytest.raises(ScenarioError) as e:
        from_doc(doc, name)
    return str(e.value)


def test_a_scenario_with_every_field_is_built_whole_and_written_back():
    doc = dict(name="full", title="T", description="D", reference="R", preset="followup_fix",
               flags={"stale_guards": True}, config={"storage": True, "host_kv": 4},
               initial=[{"key": [1, 2], "host": True}], actors=ACTORS, schedule="A B A",
               expect={"pre_fix": {"outcome": "clean"}}, minimal_schedule="A*2 B", notes="ignored")
    sc = from_doc(doc, "file_stem", source="/x/full.yaml")
    assert sc == Scenario(name="full", config=CONFIG, actors=PARSED, title="T", description="D", reference="R",
                          preset="followup_fix", flags={"stale_guards": True}, initial=[{"key": [1, 2], "host": True}],
                          schedule="A B A", expect={"pre_fix": {"outcome": "clean"}}, minimal_schedule="A*2 B",
                          source="/x/full.yaml")
    assert sc.as_doc() == dict(name="full", title="T", description="D", reference="R", preset="followup_fix",
                               config=CONFIG, flags={"stale_guards": True}, initial=[{"key": [1, 2], "host": True}],
                               actors=PARSED, schedule="A B A", expect={"pre_fix": {"outcome": "clean"}})
    bare = from_doc({"actors": ACTORS, "about": "one line"}, "stem")
    assert bare == Scenario(name="stem", config=dict(SETTINGS, write_through_threshold=1), actors=PARSED,
                            title="one line")
    assert bare.as_doc() == dict(name="stem", title="one line", config=bare.config, actors=PARSED)
    assert (from_doc({"actors": ACTORS}).title, from_doc({"actors": ACTORS}).as_doc().get("title")) == ("", None)


def test_the_oracle_s_ops_form_keeps_config_ops_and_its_text_and_ignores_the_rest():
    doc = {"config": {"storage": True}, "ops": ["request 1 2", {"op": "events"}], "name": "oracle case",
           "title": 5, "about": "from the fuzzer", "description": "d", "cfg_index": 3, "expect_oracle": {"x": 1},
           "anything": [1], "preset": "nope", "flags": "not even a mapping"}
    sc = from_doc(doc, "stem")
    assert sc == Scenario(name="oracle case", config=dict(SETTINGS, storage=True, write_through_threshold=1),
                          actors={"main": [{"op": "request", "tokens": [1, 2]}, {"op": "events"}]},
                          title="from the fuzzer", description="d")
    assert from_doc({"ops": [], "title": "t", "about": "a"}).title == "t"
    assert refused({"ops": "events"}) == "s: 'ops' must be a list of operations, like [{\"op\": \"events\"}]"
    assert from_doc({"actors": ACTORS, "expect_oracle": [1]}).actors == PARSED  # ignored beside actors too


def test_unknown_top_level_keys_are_named_five_at_most_long_ones_cut():
    keys = ["a1", "a2", "a3", "a4", "k" * 40, LONG, "z9"]
    doc = dict(actors=ACTORS, **{k: 1 for k in keys})
    known = ", ".join(sorted(scenario_module.TOP_KEYS))
    assert refused(doc) == (f"s: unknown top-level key(s) a1, a2, a3, a4, {'k' * 40}, ...; known keys: {known}")
    doc = dict(actors=ACTORS, **{LONG: 1, "b": 2})
    assert refused(doc) == f"s: unknown top-level key(s) b, {shown(LONG, 40)}; known keys: {known}"
    doc = dict(actors=ACTORS, **{k: 1 for k in keys[:6]})  # six: five named, then "..."
    assert refused(doc) == (f"s: unknown top-level key(s) a1, a2, a3, a4, {'k' * 40}, ...; known keys: {known}")
    doc = dict(actors=ACTORS, **{k: 1 for k in keys[:5]})
    assert refused(doc).startswith(f"s: unknown top-level key(s) a1, a2, a3, a4, {'k' * 40}; known keys")


def test_text_fields_are_checked_for_type_lines_and_length():
    assert refused({"actors": ACTORS, "title": 5}) == "s: 'title' must be text, not int; quote it"
    name = "line one\n" + "x" * 50
    assert refused({"actors": ACTORS, "name": name}) == \
        f"s: 'name' must be one line of printable text, not {shown(name, 40)}"
    assert from_doc({"actors": ACTORS, "name": "n" * 200}).name == "n" * 200
    assert refused({"actors": ACTORS, "name": "n" * 201}) == "s: 'name' is 201 characters long; keep it under 200"
    assert from_doc({"actors": ACTORS, "title": "t" * 100_000}).title == "t" * 100_000
    assert refused({"actors": ACTORS, "title": "t" * 100_001}) == \
        "s: 'title' is 100,001 characters long; keep it under 100,000"


def test_every_other_refusal_of_from_doc_is_one_whole_sentence():
    cases = [
        (None, "s: the scenario is empty; give it 'actors' (or the oracle's 'ops') and a 'config'"),
        ([1], "s: a scenario must be a mapping with 'actors' (or the oracle's 'ops') and a 'config', not a list"),
        ({"actors": ACTORS, "ops": []}, "s: give either 'actors' or 'ops' (the oracle's format), not both"),
        ({"config": {}}, "s: the scenario has no 'actors' (or 'ops'); add e.g. actors: {R1: ['request 1 2']}"),
        ({"actors": {}}, "s: 'actors' must map actor names to lists of operations, like {R1: ['request 1 2']}"),
        ({"actors": ["R1"]}, "s: 'actors' must map actor names to lists of operations, like {R1: ['request 1 2']}"),
        ({"actors": {"A": "evict 2"}}, "s: actor A must have a list of operations, like A: ['request 1 2', 'evict 2']"),
        ({"actors": {"A": [{"op": "evict", "n": -1}]}},
         "s: actor A: op 0 (evict): n must be a whole number between 0 and 1048576, not -1"),
        ({"actors": ACTORS, "initial": {"key": [1]}},
         "s: 'initial' must be a list of node objects like [{key: [1, 2], host: true}]"),
        ({"actors": ACTORS, "flags": ["stale_guards"]},
         "s: 'flags' must map flag names to values, like {stale_guards: true}"),
        ({"actors": ACTORS, "preset": 5}, f"s: unknown preset 5; choose one of {', '.join(PRESETS)}"),
        ({"actors": ACTORS, "preset": "post_fix"}, f"s: unknown preset 'post_fix'; choose one of {', '.join(PRESETS)}"),
        ({"actors": ACTORS, "expect": [1]},
         "s: 'expect' must map preset names to expected results, like {pre_fix: {outcome: assertion}}"),
        ({"actors": ACTORS, "expect": {"pre_fix": 1}},
         "s: 'expect' must map preset names to expected results, like {pre_fix: {outcome: assertion}}"),
        ({"actors": ACTORS, "schedule": "  "},
         "s: 'schedule' is empty; give actor turns like 'R1 R2*2 ctl*', or leave it out for round-robin"),
    ]
    for doc, sentence in cases:
        assert refused(doc) == sentence, doc
    assert from_doc({"actors": ACTORS, "preset": "followup_fix"}).preset == "followup_fix"
    assert refused({"actors": ACTORS, "schedule": "A C"}).startswith("s: ")


def test_an_initial_node_s_refusal_is_named_as_an_initial_node():
    got = refused({"actors": ACTORS, "initial": [{"key": [1, 2]}, {"key": []}]})
    assert got.startswith("s: initial node 1: ") and "op 0" not in got


def test_unknown_flags_and_expected_presets_are_named_five_at_most_long_ones_cut():
    flags = {f"f{i}": True for i in range(6)} | {LONG: True}
    assert refused({"actors": ACTORS, "flags": flags}) == \
        f"s: unknown flag(s) f0, f1, f2, f3, f4; known flags: {', '.join(FLAG_NAMES)}"
    assert refused({"actors": ACTORS, "flags": {LONG: True, "k" * 40: 1}}) == \
        f"s: unknown flag(s) {'k' * 40}, {shown(LONG, 40)}; known flags: {', '.join(FLAG_NAMES)}"
    expect = {f"p{i}": {} for i in range(6)}
    assert refused({"actors": ACTORS, "expect": expect}) == \
        f"s: 'expect' names unknown preset(s) p0, p1, p2, p3, p4; choose from {', '.join(PRESETS)}"
    assert refused({"actors": ACTORS, "expect": {LONG: {}, "k" * 40: {}}}) == \
        f"s: 'expect' names unknown preset(s) {'k' * 40}, {shown(LONG, 40)}; choose from {', '.join(PRESETS)}"
    assert refused({"actors": ACTORS, "flags": {"stale_guards": "yes"}}).startswith("s: flag stale_guards")


def test_actor_names_problems_in_words():
    assert [actor_name_problem(a) for a in (5, "", "a" * 64, "a" * 65, "a b", "é", "1abc", "R1", "x-y.z_1", "_a")] == [
        "must be text, not int; quote it", "is empty; name actors like R1, mem, ctl", None,
        "is 65 characters long; keep actor names under 64 characters",
        "holds ' '; actor names hold only ASCII letters, digits, '_', '.', '-' (like R1, mem, ctl)",
        "holds 'é'; actor names hold only ASCII letters, digits, '_', '.', '-' (like R1, mem, ctl)",
        "must start with a letter and hold only letters, digits, '_', '.', '-'", None, None, None]
    assert refused({"actors": {"k" * 70: []}}) == \
        f"s: actor name {shown('k' * 70, 40)} is 70 characters long; keep actor names under 64 characters"


@pytest.mark.parametrize("actors, sentence", [
    # an automatic id (the actor's name) met by another actor's rid, both live
    ({"A": ["start 1"], "B": [{"op": "start", "tokens": [2], "rid": "A"}]},
     "s: actors A and B both start a request with rid 'A', so some schedules would have two live requests with one "
     "id; give each actor's requests their own rids"),
    # a request that finishes at once, then a start with its id: the start stays live
    ({"A": [{"op": "request", "tokens": [1], "rid": "x"}], "B": [{"op": "start", "tokens": [2], "rid": "x"}]},
     "s: actors A and B both start a request with rid 'x', so some schedules would have two live requests with one "
     "id; give each actor's requests their own rids"),
    # a live start, then another actor's request with the same id
    ({"A": [{"op": "start", "tokens": [1], "rid": "x"}], "B": [{"op": "request", "tokens": [2], "rid": "x"}]},
     "s: actors A and B both start a request with rid 'x', so some schedules would have two live requests with one "
     "id; give each actor's requests their own rids"),
    # the start comes after an operation that starts nothing, and after two requests that never overlap
    ({"A": ["evict 1", {"op": "request", "tokens": [1], "rid": "x"}], "B": [{"op": "request", "tokens": [1],
                                                                              "rid": "x"}],
      "C": ["events", {"op": "start", "tokens": [1], "rid": "x"}]},
     "s: actors A and C both start a request with rid 'x', so some schedules would have two live requests with one "
     "id; give each actor's requests their own rids"),
    # automatic ids: A, A.1, A.2 ...; an actor named A.1 starts A.1 too
    ({"A": ["start 1", "start 2"], "A.1": ["start 3"]},
     "s: actors A and A.1 can both start a request with id 'A.1' (an actor's automatic ids are its name, then NAME.1, "
     "NAME.2, ...); rename an actor or give the requests their own rids"),
    # the third automatic id is A.2
    ({"A": ["start 1", "start 2", "start 3"], "A.2": ["start 4"]},
     "s: actors A and A.2 can both start a request with id 'A.2' (an actor's automatic ids are its name, then NAME.1, "
     "NAME.2, ...); rename an actor or give the requests their own rids"),
    ({"a" * 45: ["start 1", "start 2"], "a" * 45 + ".1": ["start 3"]},
     f"s: actors {'a' * 45} and {'a' * 45}.1 can both start a request with id {shown('a' * 45 + '.1', 40)} (an "
     f"actor's automatic ids are its name, then NAME.1, NAME.2, ...); rename an actor or give the requests their own "
     f"rids"),
    ({"A": [{"op": "start", "tokens": [1], "rid": LONG}], "B": [{"op": "start", "tokens": [2], "rid": LONG}]},
     f"s: actors A and B both start a request with rid {shown(LONG, 40)}, so some schedules would have two live "
     f"requests with one id; give each actor's requests their own rids"),
])
def test_two_actors_that_can_hold_one_request_id_at_once_are_refused(actors, sentence):
    assert refused({"actors": actors}) == sentence


def test_request_ids_that_never_overlap_are_accepted():
    for actors in ({"A": [{"op": "request", "tokens": [1], "rid": "x"}],
                    "B": [{"op": "request", "tokens": [2], "rid": "x"}]},  # each finishes at once
                   {"A": ["start 1", {"op": "start", "tokens": [2], "rid": "A"}]},  # one actor: its own order
                   {"A": ["start 1"], "B": ["start 2"], "A.2": ["start 3"]}):  # A's second id would be A.1
        assert from_doc({"actors": actors}).actors


def test_linearize_names_requests_after_their_actor_and_finishes_the_oldest_or_the_one_named():
    sc = from_doc({"actors": {"A": ["start 1", "request 2", "start 3", "finish", {"op": "finish", "rid": "B"},
                                    "finish", "finish"],
                              "B": ["start 4"]}, "initial": [{"key": [9]}]})
    got = sc.linearize(sc.parse_schedule("B A*7"))
    assert got == [("init", {"op": "inject", "nodes": [{"key": [9]}]}),
                   ("B", {"op": "start", "tokens": [4], "rid": "B"}),
                   ("A", {"op": "start", "tokens": [1], "rid": "A"}),
                   ("A", {"op": "request", "tokens": [2], "rid": "A.1"}),
                   ("A", {"op": "start", "tokens": [3], "rid": "A.2"}),
                   ("A", {"op": "finish", "rid": "A"}),
                   ("A", {"op": "finish", "rid": "B"}),
                   ("A", {"op": "finish", "rid": "A.2"}),
                   ("A", {"op": "finish", "rid": "A?"})]
    assert sc.actors["A"][0] == {"op": "start", "tokens": [1]}  # the scenario's own operations are left as they were


def test_loading_names_the_problem_and_remembers_the_file(tmp_path, monkeypatch):
    f = tmp_path / "mine.yaml"
    f.write_text("actors: {A: ['request 1']}\n")
    assert load_file(f).source == str(f) and load(str(f)).name == "mine"
    with pytest.raises(ScenarioError) as e:
        load(5)
    assert str(e.value) == "a scenario is a gallery name or a file path, not int; e.g. load('crash_pr')"
    monkeypatch.setattr(scenario_module, "gallery", lambda: {})
    monkeypatch.setattr(scenario_module, "unified_gallery", lambda: {})
    with pytest.raises(ScenarioError) as e:
        load("nothing_here")
    assert str(e.value) == "no scenario named 'nothing_here' and no such file; gallery scenarios: (none)"
