"""Bad input: every malformed scenario file and CLI call gives one sentence on stderr and exit status 2.

The corpus in ``bad_inputs/`` has one file per mistake (its name says which). Each run through
``simcache.cli.main(["run", FILE])`` must print exactly one line, ``simcache: <what is wrong>; <how to fix it>``,
never a traceback, and exit 2; nothing on stdout, nothing written to disk. A few calls go through a real
``python -m simcache`` process too, and the public API raises a ``SimcacheError`` subclass for the same mistakes.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from simcache.cli import main
from simcache.errors import ConfigError, ScenarioError, ScheduleError, SimcacheError
from simcache.scenario import gallery, load_file, unified_gallery
from simcache.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).parent / "bad_inputs"

# file -> the sentence after "simcache: " (the scenario's name comes first once the file could be read)
FILES = {
    "a_directory.yaml": "scenario file {path} is a folder, not a file; give a YAML or JSON file",
    "actor_bad_name.yaml": "actor_bad_name: actor name '1st' must start with a letter and hold only letters, digits, "
        "'_', '.', '-'",
    "actor_ops_not_a_list.yaml": "actor_ops_not_a_list: actor R1 must have a list of operations, like R1: ['request 1 "
        "2', 'evict 2']",
    "actors_and_ops.json": "actors_and_ops: give either 'actors' or 'ops' (the oracle's format), not both",
    "actors_not_a_mapping.yaml": "actors_not_a_mapping: 'actors' must map actor names to lists of operations, like "
        "{R1: ['request 1 2']}",
    "bad_op_string.yaml": "bad_op_string: actor mem op 0: cannot read operation 'evict two'; write e.g. 'request 1 2 "
        "3', 'evict 2', 'prefetch_done 4 hit', 'events'",
    "bad_prefetch_done.yaml": "bad_prefetch_done: actor pf op 1: cannot read operation 'prefetch_done 2 maybe'; write "
        "e.g. 'request 1 2 3', 'evict 2', 'prefetch_done 4 hit', 'events'",
    "comments_only.yaml": "comments_only: the scenario is empty; give it 'actors' (or the oracle's 'ops') and a "
        "'config'",
    "duplicate_rid.yaml": "duplicate_rid: op 1: request id 'chat' is still live; give each started request its own "
        "rid",
    "empty.yaml": "empty: the scenario is empty; give it 'actors' (or the oracle's 'ops') and a 'config'",
    "empty_rid.yaml": "empty_rid: actor R1: op 1 (finish): rid must be a non-empty string",
    "empty_tokens.yaml": "empty_tokens: actor R1: op 0 (request): tokens must be a non-empty list of whole numbers "
        "from 0 to 2**62 - 1, like [1, 2, 3]",
    "expect_not_mapping.yaml": "expect_not_mapping: 'expect' must map preset names to expected results, like "
        "{pre_fix: {outcome: assertion}}",
    "expect_unknown_preset.yaml": "expect_unknown_preset: 'expect' names unknown preset(s) newest_fix; choose from "
        "pre_fix, described_fix, reviewed_fix, merged_fix, followup_fix, main_2026_06, release_0_5_17, "
        "unified_0_5_16, unified_0_5_17",
    "extra_buffer_mismatch.yaml": "extra_buffer_mismatch: config.mamba_extra_buffer must be true exactly when "
        "page_size > 1",
    "flag_bad_value.yaml": "flag_bad_value: flag host_leaf_predicate must be one of loop_old, no_children, not "
        "'newest'",
    "flag_not_bool.yaml": "flag_not_bool: flag stale_guards must be true or false, not 1",
    "float_pool.json": "float_pool: config.device_kv must be a whole number between 0 and 1048576, not 3.5",
    "float_tokens.json": "float_tokens: actor main: op 0 (request): tokens must be a non-empty list of whole numbers "
        "from 0 to 2**62 - 1, like [1, 2, 3]",
    "huge_evict.json": "huge_evict: actor mem: op 0 (evict): n must be a whole number between 0 and 1048576, not "
        "100000000000000000000",
    "huge_pool.yaml": "huge_pool: config.device_kv must be a whole number between 0 and 1048576, not "
        "100000000000000000000",
    "huge_token.yaml": "huge_token: actor R1: op 0 (request): tokens must be a non-empty list of whole numbers from 0 "
        "to 2**62 - 1, like [1, 2, 3]",
    "infinite_pool.yaml": "infinite_pool: config.device_kv must be a whole number between 0 and 1048576, not inf",
    "initial_bad_node.yaml": "initial_bad_node: initial node 0: key must be a non-empty list of whole numbers from 0 "
        "to 2**62 - 1, like [1, 2]",
    "initial_forward_parent.yaml": "initial_forward_parent: initial node 0: parent must be null (the root) or the "
        "index of an earlier node, not 1",
    "initial_misaligned_key.yaml": "initial_misaligned_key: initial node 0: key has 3 tokens; make it a multiple of "
        "page_size 2",
    "initial_pool_too_small.yaml": "initial_pool_too_small: inject node 0: pool device_kv has fewer than 3 free "
        "slots; make the pool larger in the config",
    "initial_same_first_token.yaml": "initial_same_first_token: inject node 1: its parent already has a child "
        "starting with [1]; give it another first page",
    "invalid_json.json": "invalid_json.json is not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 36 (char 35)); fix the syntax at that line",
    "invalid_yaml.yaml": "invalid_yaml.yaml is not valid YAML at line 3; fix the syntax there",
    "list_not_mapping.json": "list_not_mapping: a scenario must be a mapping with 'actors' (or the oracle's 'ops') "
        "and a 'config', not a list",
    "missing_actors.yaml": "missing_actors: the scenario has no 'actors' (or 'ops'); add e.g. actors: {R1: ['request "
        "1 2']}",
    "name_not_text.yaml": "name_not_text: 'name' must be text, not list; quote it",
    "negative_evict.yaml": "negative_evict: actor mem: op 0 (evict): n must be a whole number between 0 and 1048576, "
        "not -1",
    "negative_pool.yaml": "negative_pool: config.host_kv must be a whole number between 0 and 1048576, not -4",
    "non_utf8.yaml": "non_utf8.yaml is not UTF-8 text; save it as UTF-8 YAML or JSON",
    "op_object_without_op.yaml": "op_object_without_op: actor mem: op 0: an operation object needs an 'op' field, "
        "like {op: evict, n: 2} or the string 'evict 2'; it has evict",
    "op_extra_field.json": "op_extra_field: actor main: op 0 (evict) needs exactly n; it has ['n', 'tokens']",
    "op_missing_field.json": "op_missing_field: actor main: op 0 (request) needs exactly tokens (optionally rid); it "
        "has []",
    "op_not_text_or_object.yaml": "op_not_text_or_object: actor R1 op 0: 42 is not an operation; write an object like "
        "{op: request, tokens: [1, 2]} or a string like 'request 1 2'",
    "ops_not_a_list.json": "ops_not_a_list: 'ops' must be a list of operations, like [{\"op\": \"events\"}]",
    "oracle_bad_config.json": "oracle_bad_config: config.policy must be one of write_through, "
        "write_through_selective, write_back, not 'lru'",
    "pool_size_as_text.yaml": "pool_size_as_text: config.device_kv must be a whole number between 0 and 1048576, not "
        "'32'",
    "schedule_bad_turn.yaml": "schedule_bad_turn: schedule turn 'R2*two' is not ACTOR, ACTOR*N or ACTOR*; write e.g. "
        "'R1 R2*2 ctl*'",
    "schedule_huge_count.yaml": "schedule_huge_count: schedule asks actor 'R1' for 100000000000000000000 operations "
        "but it has 1; shorten the schedule or add operations",
    "schedule_not_text.yaml": "schedule_not_text: a schedule must be a string of actor names like 'R1 R2*2 ctl'",
    "schedule_too_many_turns.yaml": "schedule_too_many_turns: schedule asks actor 'R1' for 2 operations but it has 1; "
        "shorten the schedule or add operations",
    "schedule_unknown_actor.yaml": "schedule_unknown_actor: schedule names unknown actor 'R3'; the actors are R1, R2",
    "storage_as_text.json": "storage_as_text: config.storage must be true or false, not 'yes'",
    "unknown_config_key.yaml": "unknown_config_key: config has unknown key(s) device_kv_size; known keys: "
        "auto_complete, cfg_index, device_kv, device_mamba, driver, host_kv, host_mamba, load_back_threshold, "
        "mamba_extra_buffer, page_size, policy, prefetch_stop_policy, prefetch_threshold, storage, "
        "write_through_threshold",
    "unknown_flag.yaml": "unknown_flag: unknown flag(s) stale_guard; known flags: host_leaf_predicate, stale_guards, "
        "guard_before_asserts, unconditional_lru_cleanup, cascade_respects_host_refs, forward_chunked, "
        "write_backup_parent_check, prefetch_truncates_to_free_host, host_hit_counts_kv_only, "
        "prefetch_reserves_host_at_hit, prefetch_terminate_revokes_unreserved, split_keeps_child_mamba_lru",
    "unknown_op_object.json": "unknown_op_object: actor main: op 0: unknown op 'frobnicate'; known ops: request, "
        "start, finish_oldest, evict, evict_mamba, evict_host, events, l3_ack, prefetch, prefetch_done, prefetch_hit, "
        "inject, "
        "finish, write_ack, load_ack",
    "unknown_op_string.yaml": "unknown_op_string: actor R1 op 0: unknown operation 'frobnicate'; use one of request, "
        "start, finish, finish_oldest, evict, evict_mamba, evict_host, events, l3_ack, write_ack, load_ack, prefetch, "
        "prefetch_done, prefetch_hit",
    "unknown_policy.yaml": "unknown_policy: config.policy must be one of write_through, write_through_selective, "
        "write_back, not 'lru'",
    "unknown_preset.yaml": "unknown_preset: unknown preset 'newest_fix'; choose one of pre_fix, described_fix, "
        "reviewed_fix, merged_fix, followup_fix, main_2026_06, release_0_5_17, unified_0_5_16, unified_0_5_17",
    "unknown_top_key.yaml": "unknown_top_key: unknown top-level key(s) actor; known keys: about, actors, config, "
        "description, expect, flags, initial, minimal_schedule, name, notes, ops, preset, reference, schedule, title",
    "yaml_named_json.json": "yaml_named_json.json is not valid JSON (Expecting value: line 1 column 1 (char 0)); fix "
        "the syntax at that line",
    "zero_page_size.yaml": "zero_page_size: config.page_size must be at least 1",
    # issue 14: hostile files, wrong input once accepted silently, messages that misled
    "alias_bomb.yaml": "alias_bomb.yaml expands (through its aliases) to more than 1,000,000 values or 20,000,000 "
        "characters; write the data out or use fewer aliases",
    "bad_yaml_tag.yaml": "bad_yaml_tag.yaml uses the tag '!include' at line 3; scenario files hold plain data only "
        "(text, numbers, lists, mappings), so remove the tag",
    "colliding_automatic_ids.yaml": "colliding_automatic_ids: actors R1 and R1.1 can both start a request with id "
        "'R1.1' (an actor's automatic ids are its name, then NAME.1, NAME.2, ...); rename an actor or give the "
        "requests their own rids",
    "duplicate_key.json": "duplicate_key.json: duplicate key 'host_kv'; give each key once",
    "duplicate_top_key.yaml": "duplicate_top_key.yaml: duplicate key 'actors' at line 5 (first at line 2); give each "
        "key once",
    "empty_schedule.yaml": "empty_schedule: 'schedule' is empty; give actor turns like 'R1 R2*2 ctl*', or leave it "
        "out for round-robin",
    "full_width_digits.yaml": "full_width_digits: actor R1 op 0: cannot read operation 'request １ ２'; write e.g. "
        "'request 1 2 3', 'evict 2', 'prefetch_done 4 hit', 'events'",
    "huge_integer.json": "huge_integer.json holds a number over 4300 digits long; keep numbers short",
    "huge_integer.yaml": "huge_integer.yaml holds a number over 4300 digits long; keep numbers short",
    "huge_unknown_preset.yaml": "huge_unknown_preset: unknown preset 'pppppppppppppppppppppppppppppppppppppp"
        "p... (100,002 characters); choose one of pre_fix, described_fix, reviewed_fix, merged_fix, followup_fix, "
        "main_2026_06, release_0_5_17, unified_0_5_16, unified_0_5_17",
    "inject_key_out_of_range.yaml": "inject_key_out_of_range: initial node 0: key must be a non-empty list of whole "
        "numbers from 0 to 2**62 - 1, like [1, 2]",
    "long_actor_name.yaml": "long_actor_name: actor name 'RRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRRR... (102 "
        "characters) is 100 characters long; keep actor names under 64 characters",
    "name_two_lines.yaml": "name_two_lines: 'name' must be one line of printable text, not 'two\\nlines'",
    "non_ascii_actor.yaml": "non_ascii_actor: actor name 'Ré' holds 'é'; actor names hold only ASCII letters, "
        "digits, '_', '.', '-' (like R1, mem, ctl)",
    "note_not_text.yaml": "note_not_text: actor R1: op 0 (events): note must be a short text (at most 1000 "
        "characters), not [1, 2, 3]",
    "nul_byte.yaml": "nul_byte.yaml holds a NUL byte at line 3, column 17; remove it (a scenario file is plain text)",
    "placeholder_rid.yaml": "placeholder_rid: actor R2: op 0 (start): rid 'R1?' must be 1 to 64 ASCII letters, "
        "digits, '_', '.', '-', like 'chat'",
    "plus_number.yaml": "plus_number: actor mem op 0: cannot read operation 'evict +5'; write e.g. 'request 1 2 3', "
        "'evict 2', 'prefetch_done 4 hit', 'events'",
    "python_object_tag.yaml": "python_object_tag.yaml uses the tag '!!python/object/apply:os.system' at line 3; "
        "scenario files hold plain data only (text, numbers, lists, mappings), so remove the tag",
    "schedule_huge_repeat.yaml": "schedule_huge_repeat: schedule asks actor 'R1' for 99999999999999999999... (5,000 "
        "digits) operations but it has 1; shorten the schedule or add operations",
    "self_alias.yaml": "self_alias.yaml has an alias that refers to itself at line 2; remove the alias",
    "shared_rid.yaml": "shared_rid: actors R1 and R2 both start a request with rid 'chat', so some schedules would "
        "have two live requests with one id; give each actor's requests their own rids",
    # issue 43: a complex key is valid YAML that plain data cannot hold
    "yaml_complex_key.yaml": "yaml_complex_key.yaml: a list is used as a mapping key at line 2 (a YAML complex key, "
        "'? ...'); keys are plain text, so write the key as text",
    "underscore_number.yaml": "underscore_number: actor mem op 0: cannot read operation 'evict 1_000'; write e.g. "
        "'request 1 2 3', 'evict 2', 'prefetch_done 4 hit', 'events'",
}


def fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def run_cli(capsys, argv) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_sentence(rc: int, out: str, err: str, message: str) -> None:
    assert (rc, out) == (2, "")
    assert "Traceback" not in err
    assert err == f"simcache: {message}\n"


def test_the_corpus_is_complete():
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(FILES)


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_bad_file_gives_one_sentence_and_status_2(name, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a failed run writes nothing where it runs
    path = CORPUS / name
    before = fingerprint(CORPUS)
    assert_one_sentence(*run_cli(capsys, ["run", str(path), "--json"]), FILES[name].replace("{path}", str(path)))
    assert fingerprint(CORPUS) == before and list(tmp_path.iterdir()) == []


# files the JSON Schema cannot see through (the schema's description lists these loader-only checks)
SCHEMA_BLIND = {"duplicate_rid.yaml", "extra_buffer_mismatch.yaml", "huge_token.yaml", "initial_forward_parent.yaml",
                "initial_misaligned_key.yaml", "initial_pool_too_small.yaml", "initial_same_first_token.yaml",
                "schedule_huge_count.yaml", "schedule_too_many_turns.yaml", "schedule_unknown_actor.yaml",
                # issue 14: duplicate keys vanish in a plain parse; ids, lengths and one-line names are loader checks
                "duplicate_top_key.yaml", "duplicate_key.json", "long_actor_name.yaml", "colliding_automatic_ids.yaml",
                "shared_rid.yaml", "placeholder_rid.yaml", "inject_key_out_of_range.yaml", "empty_schedule.yaml",
                "schedule_huge_repeat.yaml", "name_two_lines.yaml"}
UNREADABLE = {"a_directory.yaml", "invalid_json.json", "invalid_yaml.yaml", "non_utf8.yaml", "yaml_named_json.json",
              "alias_bomb.yaml", "bad_yaml_tag.yaml", "huge_integer.json", "huge_integer.yaml", "nul_byte.yaml",
              "python_object_tag.yaml", "yaml_complex_key.yaml"}


@pytest.mark.parametrize("name", sorted(set(FILES) - UNREADABLE))
def test_the_json_schema_refuses_what_it_can_express(name):
    schema = json.loads((ROOT / "docs" / "scenario.schema.json").read_text())
    text = (CORPUS / name).read_text()
    doc = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
    assert jsonschema.Draft202012Validator(schema).is_valid(doc) == (name in SCHEMA_BLIND)


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_api_raises_a_simcache_error_for_the_same_file(name):
    with pytest.raises(SimcacheError) as e:
        simulate(load_file(CORPUS / name), snapshots=False)
    assert isinstance(e.value, (ScenarioError, ScheduleError, ConfigError))


def test_a_file_over_10_mb_is_refused_unread(capsys, tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * 10_000_000 + b"\n")
    assert_one_sentence(*run_cli(capsys, ["run", str(big)]), "big.yaml is larger than 10 MB; keep a scenario file "
                                                              "under 10 MB")


@pytest.mark.parametrize("name, text, message", [
    ("deep.json", "[" * 5_000, "deep.json nests too deeply to read; flatten its lists and objects"),
    ("deep.yaml", "a: " + "[" * 5_000, "deep.yaml nests too deeply to read; flatten its lists and mappings"),
])
def test_absurd_nesting_is_refused(name, text, message, capsys, tmp_path):
    (tmp_path / name).write_text(text)
    assert_one_sentence(*run_cli(capsys, ["run", str(tmp_path / name)]), message)


FLAG_NAMES = ("host_leaf_predicate, stale_guards, guard_before_asserts, unconditional_lru_cleanup, "
              "cascade_respects_host_refs, forward_chunked, write_backup_parent_check, "
              "prefetch_truncates_to_free_host, host_hit_counts_kv_only, prefetch_reserves_host_at_hit, "
              "prefetch_terminate_revokes_unreserved, split_keeps_child_mamba_lru")
PRESET_NAMES = ("pre_fix, described_fix, reviewed_fix, merged_fix, followup_fix, main_2026_06, release_0_5_17, "
                "unified_0_5_16, unified_0_5_17")  # both families (simcache.presets)
GALLERY = ", ".join({**gallery(), **unified_gallery()})  # load() finds the unified gallery's too

CALLS = [
    ([], "give a command: run, scenarios, explore, export or workload (see --help)"),
    (["frobnicate"], "argument command: invalid choice: 'frobnicate' (choose from 'run', 'scenarios', 'export', "
                     "'explore', 'workload', 'real'); see `python -m simcache --help`"),
    (["run"], "the following arguments are required: scenario; see `python -m simcache run --help`"),
    (["workload", "--presets", "nope"], "unknown preset(s) 'nope'; choose from pre_fix, described_fix, reviewed_fix, "
                                        "merged_fix, followup_fix, main_2026_06, release_0_5_17"),
    (["workload", "--streams", "0"], "--streams must be a whole number >= 1, not 0; write plain digits like "
                                   "--streams 1"),
    (["workload", "--pressures", "nan"], "pressures must be numbers between 0.001 and 1000000, like 0.5 1 2 4 "
                                         "(working set / host KV slots)"),
    (["export", "scenario_a", "-o", ""], "-o must name a file, not ''; e.g. -o run.html"),
    (["explore", "scenario_a", "--out", ""], "--out needs a folder name, like --out build/explore"),
    (["workload", "--pressures", "x"], "--pressures takes plain numbers like 0.5 1 2, not 'x'"),
    (["run", "scenario_c", "--verbose"], "unrecognized arguments: --verbose; see `python -m simcache --help`"),
    (["scenarios", "--all"], "unrecognized arguments: --all; see `python -m simcache --help`"),
    (["run", "scenario_c", "--preset"], "argument --preset: expected one argument; see `python -m simcache run "
                                        "--help`"),
    (["run", "scenario_c", "--preset", "newest_fix"], f"unknown preset 'newest_fix'; choose one of {PRESET_NAMES}"),
    (["run", "scenario_c", "--flag", "stale_guard=true"],
     f"--flag expects NAME=VALUE with NAME one of {FLAG_NAMES}; got 'stale_guard=true'"),
    (["run", "scenario_c", "--flag", "stale_guards"],
     f"--flag expects NAME=VALUE with NAME one of {FLAG_NAMES}; got 'stale_guards'"),
    (["run", "scenario_c", "--flag", "stale_guards=maybe"], "flag stale_guards must be true or false, not 'maybe'"),
    (["run", "scenario_c", "--flag", "host_leaf_predicate=newest"],
     "host_leaf_predicate must be one of loop_old, no_children, not 'newest'"),
    (["run", "scenario_c", "--schedule", "pf R9"],
     "schedule names unknown actor 'R9'; the actors are pf, R2, R4, R6, mem, ctl"),
    (["run", "scenario_c", "--schedule", "pf*3"],
     "schedule asks actor 'pf' for 3 operations but it has 2; shorten the schedule or add operations"),
    (["run", "scenario_c", "--schedule", "pf*99999999999999999999999"],
     "schedule asks actor 'pf' for 99999999999999999999999 operations but it has 2; shorten the schedule or add "
     "operations"),
    (["run", "scenario_c", "--schedule", "pf;R2"],
     "schedule turn 'pf;R2' is not ACTOR, ACTOR*N or ACTOR*; write e.g. 'R1 R2*2 ctl*'"),
    # issue 14: empty values that used to run nothing or be ignored, numbers that were not plain or had no cap
    (["run", "scenario_c", "--schedule", ""], "--schedule is empty; give actor turns like 'R1 R2*2 ctl*', or leave it "
                                              "out for the scenario's own schedule"),
    (["export", "scenario_a", "--compare", ""], "--compare takes two presets separated by a comma, like "
                                                "pre_fix,followup_fix"),
    (["explore", "scenario_a", "--budget", "1e20"], "--budget must be a whole number >= 1, not 1e20; write plain "
                                                    "digits like --budget 1"),
    (["explore", "scenario_a", "--budget", "100000000000"], "--budget 100000000000 is over the limit of 10,000,000; "
                                                            "give a smaller number"),
    (["explore", "scenario_a", "--budget", "+5"], "--budget must be a whole number >= 1, not +5; write plain digits "
                                                  "like --budget 1"),
    (["explore", "scenario_a", "--budget", "1_000"], "--budget must be a whole number >= 1, not 1_000; write plain "
                                                     "digits like --budget 1"),
    (["explore", "scenario_a", "--bound", "１２"], "--bound must be a whole number >= 0, not １２; write plain digits "
                                                 "like --bound 1"),
    (["explore", "scenario_a", "--jobs", "65"], "--jobs 65 is over the limit of 64; give a smaller number"),
    (["explore", "scenario_a", "--jobs", "autox"], "--jobs must be a whole number >= 1 or auto, not 'autox'; write "
                                                   "plain digits like --jobs 2, or --jobs auto for every core"),
    (["workload", "--jobs", "0"], "--jobs must be a whole number >= 1, not 0; write plain digits like --jobs 1"),
    (["explore", "scenario_a", "--seed", "9" * 5000], "--seed '" + "9" * 29 + "... (5,002 characters) is over the "
                                                      "limit of 9,223,372,036,854,775,807; give a smaller number"),
    (["workload", "--streams", "1e9"], "--streams must be a whole number >= 1, not 1e9; write plain digits like "
                                       "--streams 1"),
    (["workload", "--requests", "10001"], "--requests 10001 is over the limit of 10,000; give a smaller number"),
    (["workload", "--streams", "100000", "--requests", "10000"], "this workload has 15,000,000,000 chat turns "
     "(streams x requests x presets x pressures); keep it under 20,000,000"),
    (["workload", "--pressures", "-inf"], "pressures must be numbers between 0.001 and 1000000, like 0.5 1 2 4 "
                                          "(working set / host KV slots)"),
    (["workload", "--pressures", "1_0"], "--pressures takes plain numbers like 0.5 1 2, not '1_0'"),
    (["workload", "--presets", "pre_fix", "pre_fix"], "--presets names a preset twice; name each once"),
    (["run", "scenario_c", "--schedule", "pf*" + "9" * 5000], "schedule asks actor 'pf' for 99999999999999999999... "
                                                              "(5,000 digits) operations but it has 2; shorten the "
                                                              "schedule or add operations"),
    (["run", "x" * 100_000], "no scenario named '" + "x" * 59 + f"... (100,002 characters) and no such file; gallery "
                             f"scenarios: {GALLERY}"),
    (["explore", "scenario_a", "--out", "/dev/null"], "--out /dev/null is a character device, not a folder; choose "
                                                      "another folder"),
    (["export", "scenario_a", "-o", "/tmp"], "-o must name a file, not the folder '/tmp'; e.g. -o run.html"),
    (["run", "scenario_e"], f"no scenario named 'scenario_e' and no such file; gallery scenarios: {GALLERY}"),
    (["run", ""], f"no scenario named '' and no such file; gallery scenarios: {GALLERY}"),
    # issue 43: messages that misled
    (["run", "scenario_a", "--ops", "-1:3"], "--ops -1:3 starts below 0: operations are numbered from 0, like "
                                             "--ops 0:3"),
    (["run", "scenario_a", "--ops=-2:"], "--ops -2: starts below 0: operations are numbered from 0, like --ops 0:500"),
    (["run", "scenario_a", "--ops", "0:" + "1" * 19], "--ops B has 19 digits, over the limit of 18 "
     "(999,999,999,999,999,999); give a smaller number, or leave B out for the end"),
    (["explore", "scenario_a", "--seed", "-9" + "0" * 21], "--seed -9000000000000000000000 is under the minimum of "
     "-9,223,372,036,854,775,808; give a whole number from -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807"),
    (["workload", "--seed", "-9223372036854775809"], "--seed -9223372036854775809 is under the minimum of "
     "-9,223,372,036,854,775,808; give a whole number from -9,223,372,036,854,775,808 to 9,223,372,036,854,775,807"),
]


@pytest.mark.parametrize("argv, message", CALLS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_cli_call_gives_one_sentence_and_status_2(argv, message, capsys):
    assert_one_sentence(*run_cli(capsys, argv), message)


def test_jobs_auto_is_one_per_usable_core(monkeypatch):
    import os

    from simcache import cli_numbers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert [cli_numbers.jobs(t) for t in ("auto", " AUTO ", "2", 4, None)] == [3, 3, 2, 4, None]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(100)), raising=False)
    assert cli_numbers.jobs("auto") == 64  # the limit still holds


def test_a_failed_export_writes_no_file(capsys, tmp_path):
    out = tmp_path / "run.html"
    for argv in (["export", str(CORPUS / "negative_pool.yaml"), "-o", str(out)],
                 ["export", "scenario_a", "--preset", "newest_fix", "-o", str(out)]):
        rc, stdout, err = run_cli(capsys, argv)
        assert (rc, stdout) == (2, "") and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["run", str(CORPUS / "non_utf8.yaml")], "non_utf8.yaml is not UTF-8 text; save it as UTF-8 YAML or JSON"),
    (["run", str(CORPUS / "schedule_unknown_actor.yaml"), "--verbose"],
     "unrecognized arguments: --verbose; see `python -m simcache --help`"),
])
def test_a_real_process_exits_2_with_one_sentence(argv, message):
    p = subprocess.run([sys.executable, "-m", "simcache", *argv], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert (p.returncode, p.stdout, p.stderr) == (2, "", f"simcache: {message}\n")


# --- the API's voice: a SimcacheError subclass, never anything else -----------------------------------------------

@pytest.mark.parametrize("call, error, message", [
    (lambda: simulate("scenario_c", "newest_fix"), ConfigError,
     f"unknown preset 'newest_fix'; choose one of {PRESET_NAMES}"),
    (lambda: simulate("scenario_c", flags={"stale_guard": True}), ConfigError,
     f"unknown flag(s) stale_guard; known flags: {FLAG_NAMES}"),
    (lambda: simulate("scenario_c", schedule="R9"), ScheduleError,
     "schedule names unknown actor 'R9'; the actors are pf, R2, R4, R6, mem, ctl"),
    (lambda: simulate({"actors": {"R1": ["evict -1"]}}), ScenarioError,
     "scenario: actor R1: op 0 (evict): n must be a whole number between 0 and 1048576, not -1"),
    (lambda: simulate("no/such/file.yaml"), ScenarioError,
     f"no scenario named 'no/such/file.yaml' and no such file; gallery scenarios: {GALLERY}"),
])
def test_the_api_raises_a_named_error_with_the_same_sentence(call, error, message):
    with pytest.raises(error) as e:
        call()
    assert str(e.value) == message
