"""The shrinker, exactly: whole records, whole cases and whole scenario files, pass by pass (issue 19).

``test_explore.py`` and ``test_minimality.py`` check that a shrunk case still fails the same way and is minimal by
brute force. These tests pin what else the shrinker promises: the record it returns (``Shrunk.as_dict`` and
``Shrunk.case``, every field), the scenario file it writes (name, title, description, preset, schedule, expect;
the flags the caller gave and no others), how it chooses between its two strategies (``_size``), where
``max_rounds`` stops it, and what each pass returns for a hand-made case (and how many candidates it tried).
Every case here is small, so the file runs in seconds (mutation testing re-runs it per mutant).
"""
from __future__ import annotations

import importlib
from dataclasses import replace

import pytest

from simcache.explore import ExploreError, shrink
from simcache.explore import shrink_passes as sp
from simcache.explore.shrink import _size, shrink_again
from simcache.scenario import from_doc, load

# the package re-exports the function ``shrink`` under the module's name, so reach the module itself
SHRINK = importlib.import_module("simcache.explore.shrink")

X = "parent does not have child key, 1"
SIG_A = f"AssertionError: {X} @ _evict_host_leaf"
# scenario A's config as the shrinker leaves it: no device slots, three host slots (two nodes and one more)
CONFIG_A = dict(policy="write_through", storage=True, page_size=1, device_kv=0, device_mamba=0, host_kv=3,
                host_mamba=0, prefetch_threshold=1, load_back_threshold=10, prefetch_stop_policy="best_effort",
                driver="fuzz", write_through_threshold=1)
# ... and as the scenario file gives it
CONFIG_A_FULL = {**CONFIG_A, "device_kv": 32, "device_mamba": 8, "host_kv": 8, "host_mamba": 8}
# S = [1,2] with its L3 backup in flight and its host child [3]: the hashes and the child's mamba copy go
INITIAL_A = [dict(key=[1, 2], parent=None, host=True, l3_backup=True), dict(key=[3], parent=0, host=True)]
INITIAL_A_FULL = [dict(key=[1, 2], parent=None, host=True, hash=True, l3_backup=True),
                  dict(key=[3], parent=0, host=True, mamba_host=True, hash=True)]
# the second host eviction needs only one node: the detached S
ACTORS_A = dict(mem=[dict(op="evict_host", n=1), dict(op="evict_host", n=1)], l3=[dict(op="l3_ack")])
ACTORS_A_FULL = dict(mem=[dict(op="evict_host", n=1), dict(op="evict_host", n=2)], l3=[dict(op="l3_ack")])
RECORD_A = dict(schedule="mem l3 mem", steps=3, assertion=f"AssertionError: {X}", raised_in="_evict_host_leaf",
                signature=SIG_A, switches=2, preemptions=1, actors=dict(mem=2, l3=1), candidates=114)


def minimal_doc_a(preset: str, flags: dict | None = None, name: str = "scenario_a") -> dict:
    """The scenario file the shrinker writes for scenario A's failure under ``preset``."""
    doc = dict(name=f"{name}_minimal", title=f"Minimal failing case of {name} under {preset}",
               description=f"Shrunk by `simcache explore --shrink` from {name}: 3 operations, 2 switches; raises "
                           f"AssertionError: {X} in _evict_host_leaf.",
               preset=preset, config=CONFIG_A)
    if flags:
        doc["flags"] = flags
    doc.update(initial=INITIAL_A, actors=ACTORS_A, schedule="mem l3 mem",
               expect={preset: dict(outcome="assertion", raised_in="_evict_host_leaf", step=3, message=X)})
    return doc


def scenario(doc: dict, **changes):
    doc = {**doc, **changes}
    return from_doc(doc, name=doc["name"])


# --- shrink(): the record, the case and the file ----------------------------------------------------------------

def test_scenario_a_shrinks_to_this_record_case_and_file():
    small = shrink("scenario_a", "pre_fix")  # a name, the scenario's own schedule
    assert small.as_dict() == RECORD_A
    assert small.case() == dict(config=CONFIG_A, flags={}, initial=INITIAL_A, actors=ACTORS_A,
                                schedule="mem l3 mem")
    # no flags were given, so the file has none; the reference and the other presets' expectations go
    assert small.scenario.as_doc() == minimal_doc_a("pre_fix")
    assert (small.preset, small.schedule, small.signature, small.steps, small.switches, small.preemptions) == (
        "pre_fix", "mem l3 mem", SIG_A, 3, 2, 1)
    assert (small.crash.type, small.crash.message, small.crash.function) == ("AssertionError", X, "_evict_host_leaf")
    # strategy 1: a round that drops things, a round that does not; strategy 2: two stages, 2 + 1 rounds
    assert (small.rounds, small.candidates) == (5, 114)


def test_the_flags_of_the_scenario_and_the_call_are_kept_with_their_values_and_no_others():
    doc = {**load("scenario_a").as_doc(), "flags": dict(forward_chunked=True, prefetch_truncates_to_free_host=True)}
    sc = scenario(doc)
    small = shrink(sc, "merged_fix", flags=dict(forward_chunked=False, host_hit_counts_kv_only=True),
                   schedule=sc.parse_schedule("mem l3 mem"))  # a Schedule object, not text
    kept = dict(forward_chunked=False, prefetch_truncates_to_free_host=True, host_hit_counts_kv_only=True)
    assert small.case() == dict(config=CONFIG_A, flags=kept, initial=INITIAL_A, actors=ACTORS_A,
                                schedule="mem l3 mem")
    assert small.scenario.as_doc() == minimal_doc_a("merged_fix", kept)
    assert small.as_dict() == RECORD_A and small.preset == "merged_fix"


def test_flags_given_only_in_the_call_are_kept():
    small = shrink(load("scenario_a"), "pre_fix", flags=dict(host_hit_counts_kv_only=True))
    assert small.scenario.flags == dict(host_hit_counts_kv_only=True)
    assert small.scenario.as_doc() == minimal_doc_a("pre_fix", dict(host_hit_counts_kv_only=True))


def test_a_run_that_does_not_fail_is_one_sentence_naming_the_preset_and_the_schedule():
    with pytest.raises(ExploreError) as e:
        shrink("scenario_a", "followup_fix")
    assert str(e.value) == ("scenario_a does not fail under followup_fix with schedule 'mem l3 mem'; shrinking "
                            "needs a failing run (find one with `simcache explore scenario_a`)")
    with pytest.raises(ExploreError) as e:
        shrink("scenario_a", "pre_fix", schedule="l3 mem mem")
    assert str(e.value) == ("scenario_a does not fail under pre_fix with schedule 'l3 mem*2'; shrinking needs a "
                            "failing run (find one with `simcache explore scenario_a`)")


def test_a_minimal_case_shrinks_to_itself_and_keeps_its_name():
    small = shrink("scenario_a", "pre_fix")
    again = shrink_again(small)
    assert again.scenario.as_doc() == minimal_doc_a("pre_fix")  # not scenario_a_minimal_minimal
    assert again.as_dict() == {**RECORD_A, "candidates": 50}
    assert again.rounds == 3  # nothing moves: one round per stage


def test_shrink_again_uses_the_records_preset_and_schedule_not_the_scenarios():
    """A record whose scenario says another preset (none: pre_fix) and another schedule (one that does not fail):
    shrinking it again follows the record."""
    small = shrink("scenario_a", "merged_fix")
    doc = small.scenario.as_doc()
    del doc["preset"]
    doc["schedule"] = "l3 mem mem"
    again = shrink_again(replace(small, scenario=scenario(doc)))
    assert again.preset == "merged_fix" and again.schedule == "mem l3 mem"
    assert again.scenario.as_doc() == minimal_doc_a("merged_fix")


# --- choosing between the strategies ----------------------------------------------------------------------------

def test_size_counts_operations_switches_and_every_token_of_every_actor():
    doc = dict(actors=dict(A=[dict(op="request", tokens=[1, 2, 3]), dict(op="evict", n=2)],
                           B=[dict(op="request", tokens=[4])], C=[dict(op="events")]))
    assert _size(sp.Case(doc, ("A", "B", "A", "C"))) == (4, 3, 4)
    assert _size(sp.Case(doc, ("A", "A", "B"))) == (3, 1, 4)


def without(*passes):
    return tuple(p for p in sp.PASSES if p not in passes)


def test_max_rounds_counts_the_rounds_of_every_strategy_together():
    sc = load("scenario_a")
    # no round: the case as given, cut after the crash; the two runs are truncate's and the final one
    none = shrink(sc, "pre_fix", max_rounds=0)
    assert none.case() == dict(config=CONFIG_A_FULL, flags={}, initial=INITIAL_A_FULL, actors=ACTORS_A_FULL,
                               schedule="mem l3 mem")
    assert (none.rounds, none.candidates) == (0, 2)
    # one round of strategy 1 already reaches the minimal case; strategy 2 gets no round, and its result (the
    # case as given) is no smaller by _size, so the first stays
    one = shrink(sc, "pre_fix", max_rounds=1)
    assert one.case() == dict(config=CONFIG_A, flags={}, initial=INITIAL_A, actors=ACTORS_A, schedule="mem l3 mem")
    assert (one.rounds, one.candidates) == (1, 34)
