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


# --- the passes, one at a time, on hand-made cases ----------------------------------------------------------------
# Each pass returns the last case it accepted (None: none), and ``sh.tried`` counts the runs it made: a candidate
# that does not fail the same way is one run, an accepted one two (the check and ``truncate``'s replay).

SIG_D = f"AssertionError: {X} @ _delete_tombstone_leaf"
SIG_N = "AssertionError: non-leaf, node.id=# @ _evict_regular"
DOC_A = dict(config=CONFIG_A, initial=INITIAL_A, actors=ACTORS_A)  # scenario A's minimal case, "mem l3 mem"
DOC_B = dict(config={**CONFIG_B, "device_kv": 5},  # scenario B's, "A B mem C mem2"
             actors=dict(A=[dict(op="request", tokens=[1, 3])], B=[dict(op="request", tokens=[1, 2, 4])],
                         mem=[dict(op="evict", n=2)], C=[dict(op="request", tokens=[5, 6])],
                         mem2=[dict(op="evict", n=2)]))
DOC_D = dict(config={**CONFIG_A, "storage": False, "device_kv": 1, "host_kv": 2},  # scenario D's, "mem*2"
             initial=[dict(key=[1, 2], parent=None, host=True), dict(key=[3], parent=0, device=True)],
             actors=dict(mem=[dict(op="evict_host", n=1), dict(op="evict", n=1)]))
DOC_N = dict(config={**CONFIG_A, "device_kv": 1, "device_mamba": 1, "host_kv": 2, "host_mamba": 1},  # "pf R6 pf mem"
             actors=dict(pf=[dict(op="prefetch", tokens=[1, 2]), dict(op="prefetch_done", n=2, mamba_hit=True)],
                         R6=[dict(op="request", tokens=[1])], mem=[dict(op="evict", n=1)]))
EVENTS = dict(op="events")


def turns(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def case(doc: dict, schedule: str, **changes) -> sp.Case:
    import copy

    return sp.Case(copy.deepcopy({**doc, **changes}), turns(schedule))


def run_pass(p, c: sp.Case, target: str = SIG_A):
    sh = sp.Shrinker("pre_fix", SHRINK_FLAGS, target)
    got = p(sh, c)
    return (None if got is None else (got.doc, " ".join(got.turns))), sh.tried


def _flags():
    from simcache.versions import preset

    return preset("pre_fix")


SHRINK_FLAGS = _flags()


def test_the_minimal_cases_here_fail_the_same_way_and_no_pass_shrinks_them():
    for doc, schedule, target in ((DOC_A, "mem l3 mem", SIG_A), (DOC_B, "A B mem C mem2", SIG_A),
                                  (DOC_D, "mem mem", SIG_D), (DOC_N, "pf R6 pf mem", SIG_N)):
        sh = sp.Shrinker("pre_fix", SHRINK_FLAGS, target)
        assert sh.fails(case(doc, schedule))
        assert [p(sh, case(doc, schedule)) for p in sp.PASSES] == [None] * len(sp.PASSES)


def test_blocks_are_the_maximal_runs_of_one_actor_and_drop_turn_drops_the_kth_turn_of_one_actor():
    assert sp._blocks(turns("A A B A C C")) == [("A", 0, 2), ("B", 2, 3), ("A", 3, 4), ("C", 4, 6)]
    assert sp._blocks(()) == []
    assert sp._drop_turn(turns("A B A A"), "A", 1) == turns("A B A")
    assert sp._drop_turn(turns("A B A A"), "A", 0) == turns("B A A")
    assert sp._drop_turn(turns("A B A A"), "B", 0) == turns("A A A")


def test_truncate_drops_the_operations_after_the_crash_and_the_actors_left_without_any():
    c = case(DOC_A, "mem l3 mem mem late",
             actors={"mem": [*ACTORS_A["mem"], dict(op="evict_host", n=1)], "l3": [dict(op="l3_ack")] * 2,
                     "late": [EVENTS]})
    sh = sp.Shrinker("pre_fix", SHRINK_FLAGS, SIG_A)
    got = sp.truncate(sh, c)
    assert (got.doc, got.turns, sh.tried) == (DOC_A, turns("mem l3 mem"), 1)
    assert len(c.doc["actors"]["mem"]) == 3  # the case given is left as it was


def test_the_actor_pass_drops_an_actor_and_stops_at_the_last_one():
    got = run_pass(sp.pass_actors, case(DOC_D, "ctl mem mem", actors=dict(ctl=[EVENTS], **DOC_D["actors"])), SIG_D)
    assert got == ((DOC_D, "mem mem"), 2)  # mem, the last actor, is never tried


def test_the_operation_pass_drops_an_actors_last_operation_first_and_never_an_actors_only_one():
    c = case(DOC_A, "ctl mem l3 ctl mem", actors=dict(**ACTORS_A, ctl=[EVENTS, EVENTS]))
    # mem's two evictions are tried (neither goes), l3's only operation is not, ctl's second goes
    assert run_pass(sp.pass_ops, c) == (({**DOC_A, "actors": dict(**ACTORS_A, ctl=[EVENTS])}, "ctl mem l3 mem"), 4)


def test_the_initial_pass_drops_leaves_renumbers_parents_then_drops_node_flags():
    """An extra host node [7] comes first, so S's child now names parent 1; [3] is tried first (the race needs
    it), S is not (it has a child), [7] goes and the child's parent becomes 0. Then each node flag is tried:
    the hashes and the child's mamba copy go, the host copies and S's L3 backup stay."""
    initial = [dict(key=[7], parent=None, host=True), dict(key=[1, 2], parent=None, host=True, hash=True,
                                                           l3_backup=True),
               dict(key=[3], parent=1, host=True, mamba_host=True, hash=True)]
    config = {**CONFIG_A, "host_kv": 4, "host_mamba": 1}  # a host slot for [7], a host mamba slot for [3]
    got = run_pass(sp.pass_initial, case(DOC_A, "mem l3 mem", initial=initial, config=config))
    assert got == (({**DOC_A, "config": config}, "mem l3 mem"), 12)


def test_the_initial_pass_removes_the_key_when_the_last_node_goes():
    c = case(DOC_N, "pf R6 pf mem", initial=[dict(key=[9], parent=None, host=True)])
    assert run_pass(sp.pass_initial, c, SIG_N) == ((DOC_N, "pf R6 pf mem"), 2)


def test_the_token_pass_drops_tokens_from_the_end_of_each_list_keeping_one():
    c = case(DOC_B, "A B mem C mem2", actors={**DOC_B["actors"], "A": [dict(op="request", tokens=[1, 2, 3])],
                                              "C": [dict(op="request", tokens=[5, 6, 7])]})
    # A: 3 goes? no; 2 goes; then [1,3]: 1 goes? no. B: 4, 2, 1 no. C: 7 goes, then 6, 5 no
    assert run_pass(sp.pass_tokens, c) == ((DOC_B, "A B mem C mem2"), 11)


def test_the_number_pass_lowers_each_n_and_each_pool_to_the_smallest_that_still_fails():
    c = case(DOC_A, "mem l3 mem", actors={**ACTORS_A, "mem": [dict(op="evict_host", n=1), dict(op="evict_host", n=3)]},
             config={**CONFIG_A, "device_kv": 2, "host_kv": 5, "host_mamba": 1})
    assert run_pass(sp.pass_numbers, c) == ((DOC_A, "mem l3 mem"), 13)


def test_the_merge_pass_moves_a_later_run_back():
    """Y's second turn joins its first (its events change nothing); mem's two runs cannot join (the L3 ack must
    come between the evictions)."""
    actors = dict(Y=[EVENTS, EVENTS], mem=ACTORS_A["mem"], Z=[EVENTS], l3=ACTORS_A["l3"])
    got = run_pass(sp.pass_merge, case(DOC_A, "Y mem Z Y l3 mem", actors=actors))
    assert got == (({**DOC_A, "actors": actors}, "Y Y mem Z l3 mem"), 4)


def test_the_merge_pass_moves_an_earlier_run_forward():
    """Scenario B's two evictions as one actor M, "X A B M C M": moving the second M back fails another way,
    moving the first forward (after C) fails the same way."""
    a = DOC_B["actors"]
    actors = dict(X=[EVENTS], A=a["A"], B=a["B"], C=a["C"], M=a["mem"] + a["mem2"])
    got = run_pass(sp.pass_merge, case(DOC_B, "X A B M C M", actors=actors))
    assert got == (({**DOC_B, "actors": actors}, "X A B C M M"), 3)


def test_the_schedule_pass_finds_the_order_with_fewer_preemptions_or_returns_none():
    a = DOC_B["actors"]
    actors = dict(A=a["A"], B=a["B"], C=a["C"], M=a["mem"] + a["mem2"])
    got = run_pass(sp.pass_schedule, case(DOC_B, "A B M C M", actors=actors))
    assert got == (({**DOC_B, "actors": actors}, "A B C M M"), 3)
    assert run_pass(sp.pass_schedule, case(DOC_D, "mem mem"), SIG_D) == (None, 1)  # no preemption to save
    assert run_pass(sp.pass_schedule, case(DOC_A, "mem l3 mem")) == (None, 1)  # one, and no order has none


def test_the_token_pass_goes_on_when_a_shorter_list_makes_the_crash_come_sooner():
    """Scenario B's three requests as one actor R, under described_fix ("not backuped"): with R's first request
    shortened to [1,3] the first eviction already raises, so the run stops there and truncate drops R's third
    request (and mem's second eviction, mem2). The pass then stops at R's second request (it used to index the
    third: IndexError)."""
    from simcache.versions import preset

    full = load("scenario_b").as_doc()
    a = full["actors"]
    doc = dict(config=full["config"], actors=dict(R=a["A"] + a["B"] + a["C"], mem=a["mem"], mem2=a["mem2"]))
    sh = sp.Shrinker("described_fix", preset("described_fix"), NOT_BACKUPED)
    got = sp.pass_tokens(sh, sp.Case(doc, turns("R R mem mem R mem2")))
    # R's first list: 3 cannot go, 2 can, then 1 can; its second list: 4, 2, 1 cannot
    assert (got.doc, got.turns, sh.tried) == (
        dict(config=full["config"], actors=dict(R=[dict(op="request", tokens=[3]), a["B"][0]], mem=[a["mem"][0]])),
        turns("R R mem"), 8)


def test_a_case_the_scenario_rules_reject_is_no_run_and_still_counts_as_tried():
    sh = sp.Shrinker("pre_fix", SHRINK_FLAGS, SIG_A)
    assert sh.run(case(DOC_A, "l3 l3")) is None  # l3 has one operation
    assert sh.run(case(DOC_A, "zz mem")) is None  # no actor zz
    assert sh.run(case(DOC_A, "mem", config={**CONFIG_A, "host_kv": -1})) is None  # the scenario is invalid
    assert not sh.fails(case(DOC_A, "mem l3"))  # a valid run that does not crash
    assert sh.accept(case(DOC_A, "mem mem l3")) is None  # one that crashes another way, or not at all
    assert sh.tried == 5
    sc, m = sh.run(case(DOC_A, "mem l3 mem"))
    assert (sc.name, m.turns, sh.tried) == ("minimal", ["mem", "l3", "mem"], 6)


def test_a_pass_that_never_settles_is_stopped_after_fifty_rounds_by_default(monkeypatch):
    """A pass that always reports a change (it hands the case back) would loop for ever: the rounds stop at 50,
    and the case is the one given, cut after its crash (two runs: truncate's and the final one)."""
    monkeypatch.setattr(SHRINK, "STRATEGIES", (((lambda sh, c: c,),),))
    small = shrink("scenario_a", "pre_fix")
    assert (small.rounds, small.candidates) == (50, 2)
    assert small.case() == dict(config=CONFIG_A_FULL, flags={}, initial=INITIAL_A_FULL, actors=ACTORS_A_FULL,
                                schedule="mem l3 mem")
    assert shrink("scenario_a", "pre_fix", max_rounds=7).rounds == 7


def test_the_actor_pass_goes_past_an_actor_truncate_dropped_to_the_actors_after_it():
    """Scenario B under described_fix with an extra actor Z (one events turn, first) listed between C and mem2.
    Dropping A makes the first eviction raise, so truncate drops mem's second eviction, C and mem2; the pass skips
    C (gone) and still drops Z after it (it must not stop at C)."""
    from simcache.versions import preset

    full = load("scenario_b").as_doc()
    a = full["actors"]
    doc = dict(config=full["config"], actors=dict(A=a["A"], B=a["B"], mem=a["mem"], C=a["C"], Z=[EVENTS],
                                                  mem2=a["mem2"]))
    sh = sp.Shrinker("described_fix", preset("described_fix"), NOT_BACKUPED)
    got = sp.pass_actors(sh, sp.Case(doc, turns("Z A B mem mem C mem2")))
    # A goes (two runs), B and mem cannot (one each), C is skipped, Z goes (two runs), mem2 is skipped
    assert (got.doc, got.turns, sh.tried) == (
        dict(config=full["config"], actors=dict(B=a["B"], mem=[a["mem"][0]])), turns("B mem"), 6)


def test_the_initial_pass_tries_every_node_from_the_last_back_to_the_first():
    """Two extra host nodes, [9] and [8], that the crash does not need: [8] (the last) goes, then [9] (one before
    it), and the key goes with them; then no node is left to try a flag of."""
    initial = [dict(key=[9], parent=None, host=True), dict(key=[8], parent=None, host=True)]
    config = {**DOC_N["config"], "host_kv": 4}  # a host slot for each
    got = run_pass(sp.pass_initial, case(DOC_N, "pf R6 pf mem", initial=initial, config=config), SIG_N)
    assert got == (({**DOC_N, "config": config}, "pf R6 pf mem"), 4)


def test_the_schedule_pass_takes_the_failing_order_it_found_not_the_round_robin_one():
    """Scenario B's evictions as one actor M listed before C: round robin would be "A B M C M" (the case as given,
    one preemption), the order the search finds is "A B C M M" (none)."""
    a = DOC_B["actors"]
    actors = dict(A=a["A"], B=a["B"], M=a["mem"] + a["mem2"], C=a["C"])
    assert scenario({**DOC_B, "name": "rr", "actors": actors}).parse_schedule(None).turns == turns("A B M C M")
    got = run_pass(sp.pass_schedule, case(DOC_B, "A B M C M", actors=actors))
    assert got == (({**DOC_B, "actors": actors}, "A B C M M"), 3)
