"""cli_numbers.py compared whole: every option's limits at their exact ends, the words a refusal uses (span, the
value said back, the example), ``--jobs auto`` on every kind of machine, and plain decimals."""
from __future__ import annotations

import math
import os

import pytest

from simcache import cli_numbers
from simcache.cli_numbers import LIMITS, MAX_JOBS, MAX_WORKLOAD_TURNS, UsageError, decimal, jobs, usable_cores, whole
from simcache.errors import SimcacheError


def refused(fn, *args) -> str:
    with pytest.raises(UsageError) as e:
        fn(*args)
    assert e.value.__cause__ is None and (e.value.__context__ is None or e.value.__suppress_context__)
    return str(e.value)


def test_the_limits():
    assert LIMITS == {"budget": (1, 10_000_000), "bound": (0, 10_000), "seed": (-(2**63), 2**63 - 1),
                      "jobs": (1, 64), "streams": (1, 100_000), "requests": (1, 10_000)}
    assert (MAX_JOBS, MAX_WORKLOAD_TURNS) == (64, 20_000_000)
    assert issubclass(UsageError, SimcacheError)


@pytest.mark.parametrize("option", sorted(LIMITS))
def test_each_option_takes_its_ends_and_refuses_one_past_them(option):
    low, high = LIMITS[option]
    for value in (low, high, (low + high) // 2):
        assert whole(option, str(value)) == value
        assert whole(option, value) == value
    below = (f"--{option} must be a whole number >= {low}, not {low - 1}; write plain digits like "
             f"--{option} {max(low, 1)}") if low > -1000 else (
        f"--{option} {low - 1} is under the minimum of {low:,}; give a whole number from {low:,} to {high:,}")
    assert refused(whole, option, str(low - 1)) == below
    assert refused(whole, option, low - 1) == below
    over = f"--{option} {high + 1} is over the limit of {high:,}; give a smaller number"
    assert refused(whole, option, str(high + 1)) == over
    assert refused(whole, option, high + 1) == over
    assert whole(option, None) is None


def test_digits_beyond_twenty_are_too_big_or_too_small_by_their_sign():
    assert whole("seed", "1" * 19) == int("1" * 19) and whole("seed", "-" + "1" * 18) == -int("1" * 18)
    assert whole("bound", "0" * 20) == 0  # twenty digits still read
    assert refused(whole, "bound", "0" * 21) == ("--bound 000000000000000000000 is over the limit of 10,000; "
                                                 "give a smaller number")
    assert refused(whole, "seed", "-" + "1" * 21) == ("--seed -111111111111111111111 is under the minimum of "
                                                      "-9,223,372,036,854,775,808; give a whole number from "
                                                      "-9,223,372,036,854,775,808 to 9,223,372,036,854,775,807")
    assert refused(whole, "budget", "9" * 31) == ("--budget '99999999999999999999999999999... (33 characters) is "
                                                  "over the limit of 10,000,000; give a smaller number")
    assert refused(whole, "budget", "-" + "9" * 40) == (
        f"--budget must be a whole number >= 1, not '-{'9' * 28}... (43 characters); write plain digits like "
        f"--budget 1")


def test_what_is_not_plain_digits_is_said_back_and_refused():
    for text in ("+5", "1_000", "1e3", "1.0", " 5", "5 ", "", "-", "--5", "0x10", "five", "１２", "٣"):
        said = text if text.isprintable() else repr(text)
        assert refused(whole, "budget", text) == (
            f"--budget must be a whole number >= 1, not {said}; write plain digits like --budget 1"), text
    assert refused(whole, "bound", "a\tb") == ("--bound must be a whole number >= 0, not 'a\\tb'; write plain digits "
                                               "like --bound 1")
    assert refused(whole, "bound", "x" * 30) == (f"--bound must be a whole number >= 0, not {'x' * 30}; write plain "
                                                 f"digits like --bound 1")
    assert refused(whole, "bound", "x" * 31) == (f"--bound must be a whole number >= 0, not '{'x' * 29}... "
                                                 f"(33 characters); write plain digits like --bound 1")
    for value in (True, False, 2.0, [3]):
        assert refused(whole, "bound", value) == (f"--bound must be a whole number >= 0, not {value}; write plain "
                                                  f"digits like --bound 1")


def test_usable_cores_follow_the_affinity_then_the_machine(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {pid, 4, 9}, raising=False)
    assert usable_cores() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(), raising=False)
    assert usable_cores() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 6)

    def no_affinity(pid):
        raise OSError("not here")

    monkeypatch.setattr(os, "sched_getaffinity", no_affinity, raising=False)
    assert usable_cores() == 6
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert usable_cores() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cores() == 1


def test_jobs_auto_and_its_own_sentence(monkeypatch):
    monkeypatch.setattr(cli_numbers, "usable_cores", lambda: 5)
    assert [jobs(t) for t in ("auto", " Auto\t", "AUTO", "1", "64", 7, None)] == [5, 5, 5, 1, 64, 7, None]
    monkeypatch.setattr(cli_numbers, "usable_cores", lambda: 65)
    assert jobs("auto") == 64
    monkeypatch.setattr(cli_numbers, "usable_cores", lambda: 64)
    assert jobs("auto") == 64
    for text in ("autox", "two", "1.5", "+2", "", "a" * 40, "X2", "-X2"):
        said = repr(text) if len(repr(text)) <= 30 else f"{repr(text)[:30]}... ({len(repr(text))} characters)"
        assert refused(jobs, text) == (f"--jobs must be a whole number >= 1 or auto, not {said}"
                                       + "; write plain digits like --jobs 2, or --jobs auto for every core"), text
    # digits, a number or non-ASCII keep whole's sentence
    assert refused(jobs, "0") == "--jobs must be a whole number >= 1, not 0; write plain digits like --jobs 1"
    assert refused(jobs, "-3") == "--jobs must be a whole number >= 1, not -3; write plain digits like --jobs 1"
    assert refused(jobs, "65") == "--jobs 65 is over the limit of 64; give a smaller number"
    assert refused(jobs, 0) == "--jobs must be a whole number >= 1, not 0; write plain digits like --jobs 1"
    assert refused(jobs, "２") == "--jobs must be a whole number >= 1, not ２; write plain digits like --jobs 1"


def test_plain_decimals_read_as_floats():
    cases = {"0.5": 0.5, "1": 1.0, "1.": 1.0, ".5": 0.5, "-2": -2.0, "-.25": -0.25, "1e3": 1000.0, "1E-3": 0.001,
             "2e+2": 200.0, " 2 ": 2.0, "\t3\n": 3.0, "9" * 12: 999_999_999_999.0, "1." + "5" * 12: 1.555555555555,
             "." + "5" * 12: 0.555555555555, "1e999": math.inf, "1e-999": 0.0, "0": 0.0}
    for text, value in cases.items():
        assert decimal("pressures", text) == value, text
    for text in ("inf", "-Infinity", "+inf", "INF", " nan "):
        got = decimal("pressures", text)
        assert math.isnan(got) if "nan" in text.lower() else got == float(text.strip()), text


def test_anything_else_is_one_sentence_quoting_what_was_given():
    for text in ("x", "1_0", "+5", "1e", "1e1000", "1e+", ".", "-", "", "1.2.3", "9" * 13, "1." + "5" * 13,
                 "." + "5" * 13, "0x1p3", "１", "1 2", "infinite", "nan1", "y" * 28, "y" * 29, "7" * 40):
        msg = refused(decimal, "pressures", text)
        said = repr(text) if len(repr(text)) <= 30 else f"{repr(text)[:30]}... ({len(repr(text))} characters)"
        assert msg == f"--pressures takes plain numbers like 0.5 1 2, not {said}", text
    assert refused(decimal, "scale", " y ") == "--scale takes plain numbers like 0.5 1 2, not ' y '"
