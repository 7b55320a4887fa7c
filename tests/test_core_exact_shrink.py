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


NO_TOKENS, NO_NUMBERS = without(sp.pass_tokens), without(sp.pass_numbers)
# scenario B, shrunk without shortening token lists (``NO_TOKENS`` alone) and then with (``NO_TOKENS, PASSES``):
# the same six operations and four switches either way; the second shortens C's tokens to [5] (7 tokens, not 8)
CONFIG_B = dict(policy="write_back", storage=False, page_size=1, device_kv=6, device_mamba=2, host_kv=2,
                host_mamba=1, prefetch_threshold=1, load_back_threshold=10, prefetch_stop_policy="best_effort",
                driver="fuzz", write_through_threshold=2)
ACTORS_B6 = dict(A=[dict(op="request", tokens=[1, 2, 3])], B=[dict(op="request", tokens=[1, 2, 4])],
                 mem=[dict(op="evict", n=1), dict(op="evict", n=2)], C=[dict(op="request", tokens=[5])],
                 mem2=[dict(op="evict", n=1)])


@pytest.mark.parametrize("strategies", [((NO_TOKENS,), (NO_TOKENS, sp.PASSES)),
                                        ((NO_TOKENS, sp.PASSES), (NO_TOKENS,))],
                         ids=["fewer_tokens_second", "fewer_tokens_first"])
def test_of_two_results_with_the_same_operations_and_switches_fewer_tokens_wins(monkeypatch, strategies):
    monkeypatch.setattr(SHRINK, "STRATEGIES", strategies)
    small = shrink("scenario_b", "pre_fix")
    assert small.case() == dict(config=CONFIG_B, flags={}, initial=[], actors=ACTORS_B6, schedule="A B mem*2 C mem2")
    assert (small.rounds, small.candidates) == (6, 174)


@pytest.mark.parametrize("strategies, pools", [
    (((sp.PASSES,), (NO_NUMBERS,)), dict(device_kv=0, device_mamba=0, host_kv=3, host_mamba=0)),
    (((NO_NUMBERS,), (sp.PASSES,)), dict(device_kv=32, device_mamba=8, host_kv=8, host_mamba=8))],
    ids=["pools_shrunk_first", "pools_whole_first"])
def test_of_two_results_of_the_same_size_the_first_strategys_stays(monkeypatch, strategies, pools):
    """Without ``pass_numbers`` scenario A shrinks to the same three operations, but keeps its pools and its
    evictions' ``n``; _size does not count those, so the tie keeps whichever came first."""
    monkeypatch.setattr(SHRINK, "STRATEGIES", strategies)
    small = shrink("scenario_a", "pre_fix")
    actors = ACTORS_A if pools["host_kv"] == 3 else ACTORS_A_FULL
    assert small.case() == dict(config={**CONFIG_A, **pools}, flags={}, initial=INITIAL_A, actors=actors,
                                schedule="mem l3 mem")
    assert (small.rounds, small.candidates) == (4, 78)


def test_scenario_b_keeps_the_first_strategys_five_operations_over_the_seconds_six():
    small = shrink("scenario_b", "pre_fix")
    assert small.case() == dict(
        config={**CONFIG_B, "device_kv": 5}, flags={}, initial=[],
        actors=dict(A=[dict(op="request", tokens=[1, 3])], B=[dict(op="request", tokens=[1, 2, 4])],
                    mem=[dict(op="evict", n=2)], C=[dict(op="request", tokens=[5, 6])], mem2=[dict(op="evict", n=2)]),
        schedule="A B mem C mem2")
    assert (small.steps, small.switches, small.preemptions, small.rounds, small.candidates) == (5, 4, 0, 7, 214)


# --- a failure that comes earlier once something is dropped -------------------------------------------------------

CONFIG_B_FULL = {**CONFIG_B, "device_kv": 32, "device_mamba": 8, "host_mamba": 8}
ACTORS_B_FULL = dict(A=[dict(op="request", tokens=[1, 2, 3])], B=[dict(op="request", tokens=[1, 2, 4])],
                     mem=[dict(op="evict", n=2), dict(op="evict", n=2)], C=[dict(op="request", tokens=[5, 6])],
                     mem2=[dict(op="evict", n=2)])
NOT_BACKUPED = "AssertionError: not backuped, node.id=# @ _evict_to_host"


def test_dropping_an_actor_that_makes_the_crash_come_sooner_drops_the_actors_after_it_too():
    """Under described_fix scenario B's last eviction (mem2's) raises "not backuped". Without A the first eviction
    already raises it, so the run stops there and mem's second eviction, C and mem2 go with the operations it no
    longer reaches; the actor pass then goes on without them (it used to look C up again: KeyError 'C')."""
    small = shrink("scenario_b", "described_fix")
    assert small.case() == dict(
        config={**CONFIG_B, "device_kv": 1, "device_mamba": 1, "host_kv": 0, "host_mamba": 0}, flags={}, initial=[],
        actors=dict(B=[dict(op="request", tokens=[1])], mem=[dict(op="evict", n=1)]), schedule="B mem")
    assert small.as_dict() == dict(schedule="B mem", steps=2, assertion="AssertionError: not backuped, node.id=7",
                                   raised_in="_evict_to_host", signature=NOT_BACKUPED, switches=1, preemptions=0,
                                   actors=dict(B=1, mem=1), candidates=89)


def test_the_minimal_cases_outcome_is_its_run_under_the_preset_it_was_shrunk_under():
    """Scenario B as given (no round) fails under described_fix with "not backuped" at its sixth operation, where
    pre_fix raises the race: the file's expect block and the record are described_fix's."""
    small = shrink("scenario_b", "described_fix", max_rounds=0)
    assert small.case() == dict(config=CONFIG_B_FULL, flags={}, initial=[], actors=ACTORS_B_FULL,
                                schedule="A B mem*2 C mem2")
    assert small.as_dict() == dict(schedule="A B mem*2 C mem2", steps=6,
                                   assertion="AssertionError: not backuped, node.id=10", raised_in="_evict_to_host",
                                   signature=NOT_BACKUPED, switches=4, preemptions=0,
                                   actors=dict(A=1, B=1, mem=2, C=1, mem2=1), candidates=2)
    assert small.scenario.expect == dict(described_fix=dict(outcome="assertion", raised_in="_evict_to_host", step=5,
                                                            message="not backuped, node.id=10"))
