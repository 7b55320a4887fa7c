"""``explore/artefacts.py`` exactly: the scenario file, the expect block, the trace and the generated pytest module of
scenario A's minimal failure, compared whole; the generated test run in this process, passing as written and
failing when its expectation is wrong; the short config, identifiers and flags."""
from __future__ import annotations

import json

import pytest
import yaml

from simcache.explore import shrink, write_artefacts
from simcache.explore.artefacts import (
    _ident,
    _literal,
    artefact_texts,
    expect_block,
    pytest_source,
    scenario_doc,
    short_config,
)
from simcache.explore.artefacts import test_file_name as file_name_of
from simcache.scenario import from_doc, load
from simcache.simulate import simulate
from simcache.transcript import transcript

STALE = "parent does not have child key, 1"
DESCRIPTION = ("Shrunk by `simcache explore --shrink` from scenario_a: 3 operations, 2 switches; raises "
               f"AssertionError: {STALE} in _evict_host_leaf.")
DOC = dict(name="scenario_a_minimal", title="Minimal failing case of scenario_a under pre_fix",
           description=DESCRIPTION, preset="pre_fix",
           config=dict(storage=True, device_kv=0, device_mamba=0, host_kv=3, host_mamba=0),
           initial=[dict(key=[1, 2], parent=None, host=True, l3_backup=True), dict(key=[3], parent=0, host=True)],
           actors=dict(mem=["evict_host 1", "evict_host 1"], l3=["l3_ack"]), schedule="mem l3 mem",
           expect=dict(pre_fix=dict(outcome="assertion", raised_in="_evict_host_leaf", step=3, message=STALE,
                                    double_frees=[], leaked={}, went_stale=1, cleaned_up=0)))


@pytest.fixture(scope="module")
def small():
    return shrink("scenario_a", "pre_fix")


def test_the_four_artefacts_of_scenario_a_s_minimal_failure_whole(small):
    texts = artefact_texts(small.scenario, small.preset, small.schedule)
    assert {k: str(p) for k, (p, _) in texts.items()} == dict(
        schedule="schedule.txt", scenario="minimal.yaml", trace="trace.json", test="test_minimal_scenario_a.py")
    assert texts["schedule"][1] == "mem l3 mem\n"
    assert yaml.safe_load(texts["scenario"][1]) == DOC
    assert list(yaml.safe_load(texts["scenario"][1])) == list(DOC)  # the keys in reading order, not sorted
    run = simulate(small.scenario, "pre_fix", schedule="mem l3 mem")
    trace = json.loads(texts["trace"][1])
    assert trace == json.loads(json.dumps(dict(run.to_json(), micro_steps=[s.as_dict() for s in run.trace.steps]),
                                          default=str))
    assert len(trace["micro_steps"]) == trace["steps"] > 0 and texts["trace"][1].endswith("}\n")

    namespace: dict = {}
    exec(compile(texts["test"][1], "test_minimal_scenario_a.py", "exec"), namespace)
    assert namespace["SCENARIO"] == DOC and (namespace["PRESET"], namespace["SCHEDULE"]) == ("pre_fix", "mem l3 mem")
    assert namespace["EXPECT"] == dict(outcome="assertion", step=3, status="...x", tree=[], double_frees=[],
                                       leaked={}, type="AssertionError", message=STALE, raised_in="_evict_host_leaf",
                                       stack=["evict_host", "_evict_host_leaf"])
    assert namespace["TRANSCRIPT"] == transcript(run).splitlines()
    namespace["test_scenario_a_minimal_pre_fix_replays_exactly"]()  # passes as written
    for key, wrong in [("outcome", "clean"), ("stack", ["evict_host"]), ("status", "..x"), ("tree", ["x"]),
                       ("double_frees", [["host_kv", [1]]]), ("leaked", {"host_kv": [1]})]:
        namespace["EXPECT"] = dict(namespace["EXPECT"] if key == "outcome" else _expect(texts), **{key: wrong})
        with pytest.raises(AssertionError):
            namespace["test_scenario_a_minimal_pre_fix_replays_exactly"]()


def _expect(texts) -> dict:
    namespace: dict = {}
    exec(compile(texts["test"][1], "t.py", "exec"), namespace)
    return namespace["EXPECT"]


def test_a_clean_run_s_expect_block_and_generated_test_carry_its_damage_and_no_crash():
    sc = load("scenario_c")
    run = simulate(sc, "described_fix", snapshots=False)
    assert expect_block(run) == dict(outcome="clean", double_frees=[["device_kv", [0, 1]]],
                                     leaked={"host_kv": [2, 3]}, went_stale=1, cleaned_up=1)
    source = pytest_source(scenario_doc(sc, "x"), "described_fix", "x", run)
    namespace: dict = {}
    exec(compile(source, "t.py", "exec"), namespace)
    assert set(namespace["EXPECT"]) == {"outcome", "step", "status", "tree", "double_frees", "leaked"}
    assert (namespace["EXPECT"]["double_frees"], namespace["EXPECT"]["leaked"]) == (
        [["device_kv", [0, 1]]], {"host_kv": [2, 3]})
    assert "def test_scenario_c_described_fix_replays_exactly():" in source


def test_flags_given_are_written_on_top_of_the_scenario_s_own(small):
    texts = artefact_texts(small.scenario, "pre_fix", "mem l3 mem", flags={"stale_guards": True})
    doc = yaml.safe_load(texts["scenario"][1])
    assert doc["flags"] == {"stale_guards": True}
    assert doc["expect"]["pre_fix"]["outcome"] == "clean"  # replayed with the flag: the guard skips the stale node
    with_own = from_doc(dict(yaml.safe_load(texts["scenario"][1]), flags={"forward_chunked": True}))
    doc = yaml.safe_load(artefact_texts(with_own, "pre_fix", "mem l3 mem", {"stale_guards": True})["scenario"][1])
    assert doc["flags"] == {"forward_chunked": True, "stale_guards": True}


def test_the_scenario_doc_keeps_its_minimal_schedule_and_writes_long_text_as_a_block():
    doc = dict(name="s", description="line one\nline two", minimal_schedule="b a",
               actors=dict(a=["request 1 2"], b=["evict 1"]))
    sc = from_doc(doc)
    got = scenario_doc(sc)
    assert (got["minimal_schedule"], "schedule" in got) == ("b a", False)
    assert scenario_doc(sc, "a b")["schedule"] == "a b"
    text = artefact_texts(sc, "pre_fix", "a b")["scenario"][1]
    assert "description: |-\n  line one\n  line two\n" in text and yaml.safe_load(text)["description"] == doc[
        "description"]
    assert "minimal_schedule: b a\n" in text


@pytest.mark.parametrize("cfg, short", [
    (dict(policy="write_through", storage=True, page_size=1, device_kv=32, host_kv=4, write_through_threshold=1),
     dict(storage=True, host_kv=4)),
    (dict(policy="write_back", write_through_threshold=2, storage=False, page_size=4), dict(policy="write_back",
                                                                                         page_size=4)),
    (dict(policy="write_back", write_through_threshold=1), dict(policy="write_back", write_through_threshold=1)),
    (dict(policy="write_through", write_through_threshold=2), dict(write_through_threshold=2)),
    (dict(write_through_threshold=1, cfg_index=3), dict(cfg_index=3)),  # policy's default: write_through
])
def test_short_config_drops_exactly_the_settings_equal_to_their_defaults(cfg, short):
    assert short_config(cfg) == short


@pytest.mark.parametrize("text, ident", [
    ("scenario_a", "scenario_a"), ("a b-c.d", "a_b_c_d"), ("9lives", "s_9lives"), ("_x_", "x"), ("", "scenario"),
    ("!!!", "scenario"), ('x"""y', "x_y"), ("é中", "scenario"), ("a" * 70, "a" * 60), ("__9__", "s_9"),
    ("ABC def", "ABC_def"), ("Xray_X", "Xray_X"),
])
def test_identifiers_are_ascii_start_with_a_letter_and_are_at_most_60_characters_before_a_prefix(text, ident):
    assert _ident(text) == ident
    assert file_name_of(from_doc(dict(name=text, actors=dict(a=["request 1"])))) == f"test_minimal_{ident}.py"


def test_a_minimal_suffix_is_dropped_from_the_test_file_s_name():
    assert file_name_of(from_doc(dict(name="crash_pr_minimal", actors=dict(a=["request 1"])))) == \
        "test_minimal_crash_pr.py"
    assert _literal({"a": [1, "x'\""], "b": None}) == "{'a': [1, 'x\\'\"'], 'b': None}"


def test_write_artefacts_writes_the_four_files_and_returns_their_paths(tmp_path, small):
    paths = write_artefacts(tmp_path / "out", small.scenario, "pre_fix", "mem l3 mem")
    texts = artefact_texts(small.scenario, "pre_fix", "mem l3 mem")
    assert {k: p for k, p in paths.items()} == {k: tmp_path / "out" / n for k, (n, _) in texts.items()}
    assert {p.name: p.read_text() for p in (tmp_path / "out").iterdir()} == {
        str(n): t for n, t in texts.values()}


MINIMAL_YAML = """name: scenario_a_minimal
title: Minimal failing case of scenario_a under pre_fix
description: 'Shrunk by `simcache explore --shrink` from scenario_a: 3 operations, 2 switches; raises AssertionError:
  parent does not have child key, 1 in _evict_host_leaf.'
preset: pre_fix
config:
  storage: true
  device_kv: 0
  device_mamba: 0
  host_kv: 3
  host_mamba: 0
initial:
- key:
  - 1
  - 2
  parent: null
  host: true
  l3_backup: true
- key:
  - 3
  parent: 0
  host: true
actors:
  mem:
  - evict_host 1
  - evict_host 1
  l3:
  - l3_ack
schedule: mem l3 mem
expect:
  pre_fix:
    outcome: assertion
    raised_in: _evict_host_leaf
    step: 3
    message: parent does not have child key, 1
    double_frees: []
    leaked: {}
    went_stale: 1
    cleaned_up: 0
"""


def test_the_files_as_text_keys_in_reading_order_lines_up_to_110_characters(small):
    texts = artefact_texts(small.scenario, small.preset, small.schedule)
    assert texts["scenario"][1] == MINIMAL_YAML
    assert texts["trace"][1].startswith('{\n "scenario": "scenario_a_minimal",\n "preset": "pre_fix",\n "flags": {\n'
                                        '  "host_leaf_predicate": "loop_old",\n')
    source = texts["test"][1]
    literal = source[source.index("SCENARIO = "):source.index("\ndef test_")]
    assert 80 < max(map(len, literal.splitlines())) <= 110
    assert "'description': 'Shrunk by `simcache explore --shrink` from scenario_a: 3 operations, 2 switches; raises '" \
        in literal  # wrapped at 110, not pprint's 80
    namespace: dict = {}
    exec(compile(source, "t.py", "exec"), namespace)
    assert list(namespace["SCENARIO"]) == list(DOC) and list(namespace["EXPECT"]) == [
        "outcome", "step", "status", "tree", "double_frees", "leaked", "type", "message", "raised_in", "stack"]


def test_the_artefacts_replay_the_preset_and_schedule_asked_for_not_the_scenario_s_own(small):
    # the minimal scenario says pre_fix and mem l3 mem; asked for followup_fix and l3 mem mem
    texts = artefact_texts(small.scenario, "followup_fix", "l3 mem mem")
    doc = yaml.safe_load(texts["scenario"][1])
    assert texts["schedule"][1] == "l3 mem mem\n"
    assert (doc["preset"], doc["schedule"], list(doc["expect"])) == ("followup_fix", "l3 mem mem", ["followup_fix"])
    trace = json.loads(texts["trace"][1])
    assert (trace["preset"], trace["schedule"]) == ("followup_fix", "l3 mem*2")  # the trace spells it short
    assert trace == json.loads(json.dumps(simulate(small.scenario, "followup_fix", schedule="l3 mem mem").to_json()
                                          | {"micro_steps": trace["micro_steps"]}))


def test_write_artefacts_passes_its_flags_on(tmp_path, small):
    paths = write_artefacts(tmp_path / "out", small.scenario, "pre_fix", "mem l3 mem", flags={"stale_guards": True})
    doc = yaml.safe_load(paths["scenario"].read_text())
    assert doc["flags"] == {"stale_guards": True} and doc["expect"]["pre_fix"]["outcome"] == "clean"


@pytest.mark.parametrize("name", ["schedule.txt", "minimal.yaml", "trace.json"])
def test_a_folder_where_an_artefact_goes_is_refused_before_the_replay(tmp_path, small, name, monkeypatch):
    from simcache.errors import SimcacheError
    from simcache.explore import artefacts

    (tmp_path / "out" / name).mkdir(parents=True)
    monkeypatch.setattr(artefacts, "artefact_texts", lambda *a, **k: pytest.fail("replayed before the folder check"))
    with pytest.raises(SimcacheError) as e:
        write_artefacts(tmp_path / "out", small.scenario, "pre_fix", "mem l3 mem")
    assert str(e.value) == f"{tmp_path / 'out'} holds a folder named {name} where a file goes; choose another --out"
    assert [p.name for p in (tmp_path / "out").iterdir()] == [name]


def test_a_doc_without_a_name_gets_a_test_named_for_a_scenario():
    run = simulate(load("scenario_a"), "pre_fix", snapshots=False)
    doc = scenario_doc(load("scenario_a"))
    del doc["name"]
    assert "\ndef test_scenario_pre_fix_replays_exactly():\n" in pytest_source(doc, "pre_fix", "x", run)
