"""Exact outcomes of ``simcache/keys.py``: child keys, page-rounded matches, the oracle's key spelling, and the
chained L3 page hashes against published FNV-1a 64 vectors (mutation testing, issue 19)."""
from __future__ import annotations

from collections import namedtuple

import pytest

from simcache.keys import child_key, format_key, match_len, page_floor, page_hashes


def test_child_key_is_the_first_token_at_page_size_1_and_the_first_page_as_a_tuple_otherwise():
    assert child_key((7, 8, 9), 1) == 7 and type(child_key((7, 8, 9), 1)) is int
    assert child_key([7, 8, 9, 10], 2) == (7, 8) and type(child_key([7, 8, 9, 10], 2)) is tuple
    assert child_key((7, 8, 9), 3) == (7, 8, 9)
    assert child_key((7, 8, 9, 10, 11, 12), 3) == (7, 8, 9)


@pytest.mark.parametrize("a, b, page_size, expected", [
    ((1, 2, 3), (1, 2, 4), 1, 2),
    ((1, 2, 3), (1, 2, 3), 1, 3),
    ((1, 2, 3), (1, 2, 3, 4, 5), 1, 3),  # the shorter key ends the match
    ((1, 2, 3, 4, 5), (1, 2, 3), 1, 3),
    ((5, 2), (1, 2), 1, 0),  # a later equal token does not count
    ((), (1,), 1, 0),
    ((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 7), 2, 4),  # whole pages only
    ((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 6), 2, 6),
    ((1, 2, 3, 4, 5, 6), (1, 2, 3, 4), 2, 4),
    ((1, 2, 3, 4), (1, 2, 3, 4, 5, 6), 2, 4),
    ((1, 2, 3, 4), (1, 2, 3, 5), 2, 2),  # a page that differs in its last token does not count
    ((9, 2, 3, 4), (1, 2, 3, 4), 2, 0),
    ((1, 9, 3, 4), (1, 2, 3, 4), 2, 0),
    ((1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 5, 6, 7, 8, 0), 3, 6),
])
def test_match_len_is_the_common_prefix_in_whole_pages(a, b, page_size, expected):
    # (above page size 1 both keys are whole pages, as in the tree: callers cut a query to whole pages first)
    assert match_len(a, b, page_size) == expected
    assert match_len(b, a, page_size) == expected


@pytest.mark.parametrize("n, page_size, expected", [(0, 4, 0), (3, 4, 0), (4, 4, 4), (7, 4, 4), (9, 4, 8),
                                                    (5, 1, 5), (5, 2, 4)])
def test_page_floor_rounds_down_to_whole_pages(n, page_size, expected):
    assert page_floor(n, page_size) == expected


Pair = namedtuple("Pair", "a b")


def test_format_key_spells_every_kind_of_key_as_comma_separated_tokens():
    assert format_key((1, 2, 3)) == "1,2,3"
    assert format_key([1, 2, 3]) == "1,2,3"
    assert format_key((-1, 20, 300)) == "-1,20,300"
    assert format_key((7,)) == "7" and format_key([7]) == "7"
    assert format_key(()) == "" and format_key([]) == ""
    assert format_key((7, 8)) == "7,8"
    # not a tuple or list of plain ints: token by token (a repr would spell the class or the items differently)
    assert format_key(range(1, 4)) == "1,2,3"
    assert format_key(Pair(4, 5)) == "4,5"
    assert format_key((True, 2)) == "True,2"
    assert format_key([1, "a b", 3]) == "1,a b,3"
    assert format_key(("x", "y")) == "x,y"
    assert format_key((1.5, 2)) == "1.5,2"
    assert format_key(iter([1, 2])) == "1,2"


def test_page_hashes_are_fnv1a_64_chained_page_to_page():
    # published FNV-1a 64 vectors ("a", and each prefix of "foobar"); the chain carries the hash on, so each page's
    # hash is that of the whole prefix up to its end
    assert page_hashes(tuple(b"a"), 1, None) == ["af63dc4c8601ec8c"]
    assert page_hashes(tuple(b"foobar"), 6, None) == ["85944171f73967e8"]
    assert page_hashes(tuple(b"foobar"), 2, None) == [
        "08985907b541d342", "dd120e790c2512af", "85944171f73967e8"]
    per_token = page_hashes(tuple(b"foobar"), 1, None)
    assert per_token == ["af63db4c8601ead9", "08985907b541d342", "dcb27518fed9d577", "dd120e790c2512af",
                         "cac165afa2fef40a", "85944171f73967e8"]  # "f", "fo", "foo", "foob", "fooba", "foobar"
    # a prior hash starts the chain instead of the offset basis, at either page size
    foo = page_hashes(tuple(b"foo"), 3, None)
    assert foo == [per_token[2]] and page_hashes(tuple(b"bar"), 3, foo[0]) == ["85944171f73967e8"]
    assert page_hashes(tuple(b"obar"), 1, "08985907b541d342") == per_token[2:]
    assert page_hashes(tuple(b"obar"), 2, "08985907b541d342") == ["dd120e790c2512af", "85944171f73967e8"]
    assert page_hashes((), 1, None) == [] and page_hashes((), 4, "00000000000000ff") == []


def test_page_hashes_take_each_token_modulo_2_to_the_64():
    # a token is folded in as its low 64 bits: 2**64 + 97 and -(2**64) + 97 hash as 97 ("a"); -1 as all ones
    for page_size in (1, 2):
        assert page_hashes((2**64 + 97, 2**64 + 97), page_size, None) == page_hashes((97, 97), page_size, None)
        assert page_hashes((97 - 2**64, 97), page_size, None) == page_hashes((97, 97), page_size, None)
    ones = (0xCBF29CE484222325 ^ 0xFFFFFFFFFFFFFFFF) * 0x100000001B3 & 0xFFFFFFFFFFFFFFFF
    assert page_hashes((-1,), 1, None) == [f"{ones:016x}"] == page_hashes((-1,), 1, None)
    assert page_hashes((-1, 0), 2, None) == [f"{ones * 0x100000001B3 & 0xFFFFFFFFFFFFFFFF:016x}"]
    # a small hash is written with its leading zeros (16 hex digits)
    assert page_hashes((0, 0), 1, "0000000000000000") == ["0000000000000000", "0000000000000000"]
    assert page_hashes((1,), 1, "0000000000000000") == ["00000100000001b3"]


def test_format_key_spells_a_tuple_or_list_of_plain_ints_with_one_str_call(monkeypatch):
    # the fast path the trace hash relies on: one ``str`` of the whole key (its repr), not one per token; the
    # text is the same either way, so only the calls tell the two paths apart
    from simcache import keys

    calls = []

    def counting_str(x):
        calls.append(x)
        return str(x)

    monkeypatch.setattr(keys, "str", counting_str, raising=False)
    for key, text, expected_calls in [((1, 2), "1,2", [(1, 2)]), ([3, 4, 5], "3,4,5", [[3, 4, 5]]),
                                      ((7,), "7", [7]),  # one token: its own str ("(7,)" would need trimming)
                                      ((True, 2), "True,2", [True, 2]),  # a bool is not a plain int
                                      (range(1, 3), "1,2", [1, 2])]:
        calls.clear()
        assert format_key(key) == text
        assert calls == expected_calls
