"""``scheduler``'s checks, each pinned by an exact outcome: the actors' counts ``parse_schedule`` accepts and the
ones it names, the turn counts it reads at and just past its bounds, and what a ``Schedule`` refuses to hold.
Written from the survivors of ``benchmarks/mutation.py`` over the module (issue 19)."""
from __future__ import annotations

import pytest

from simcache.errors import ScheduleError
from simcache.scheduler import Schedule, parse_schedule


def refusal(text, lengths) -> str:
    with pytest.raises(ScheduleError) as e:
        parse_schedule(text, lengths)
    return str(e.value)


@pytest.mark.parametrize("lengths", ["R1", ["R1"], {"R1": -1}, {"R1": 2.0}, {"R1": True}, {1: 2}, {"R1": 1, 2: 1}])
def test_the_actors_counts_must_be_a_dict_of_names_to_whole_numbers(lengths):
    assert refusal("R1", lengths) == (f"parse_schedule needs the actors' operation counts, like {{'R1': 2, 'ctl': 1}}, "
                                      f"not {lengths!r}")


def test_an_actor_with_no_operations_is_allowed_and_takes_no_turns():
    assert parse_schedule("R1*", {"R1": 0, "R2": 1}).turns == ()
    assert parse_schedule("R2 R1*", {"R1": 0, "R2": 1}).turns == ("R2",)


def test_turns_already_taken_count_against_what_an_actor_has_left():
    assert parse_schedule("R1 R1*2", {"R1": 3}).turns == ("R1",) * 3
    assert refusal("R1 R1*2 R1", {"R1": 3}) == ("schedule asks actor 'R1' for 4 operations but it has 3; shorten the "
                                                "schedule or add operations")
    assert refusal("R1*2 R1*2", {"R1": 3}) == ("schedule asks actor 'R1' for 4 operations but it has 3; shorten the "
                                               "schedule or add operations")


@pytest.mark.parametrize("count, asked", [
    ("99999999", "100000000"),  # as many digits as MAX_TURNS: read as a number, counted with the turn before
    ("0099999999", "100000000"),  # leading zeros do not make a count long
    ("123456789", "123456789"),  # one digit more: too long to read, echoed as written
    ("9" * 30, "9" * 30),  # echoed whole up to 30 digits
    ("9" * 31, "99999999999999999999... (31 digits)"),
    ("1" + "0" * 99, "10000000000000000000... (100 digits)"),
])
def test_a_huge_turn_count_is_named_as_written_or_cut_and_never_built(count, asked):
    assert refusal(f"R1 R1*{count}", {"R1": 3}) == (f"schedule asks actor 'R1' for {asked} operations but it has 3; "
                                                    f"shorten the schedule or add operations")


@pytest.mark.parametrize("turns", [["R1"], ("R1", 2), "R1", ("R1", None)])
def test_a_schedule_holds_only_a_tuple_of_names(turns):
    with pytest.raises(ScheduleError) as e:
        Schedule(turns)
    assert str(e.value) == f"Schedule takes a tuple of actor names like ('R1', 'R2'), not {turns!r}"


def test_a_schedule_of_names_prints_as_its_short_form():
    s = Schedule(("R1", "R1", "ctl", "R1"))
    assert (str(s), len(s), s.switches) == ("R1*2 ctl R1", 4, 2)
