"""``operations``' edges, each pinned by an exact outcome: the bounds a field may touch and the one just past it,
every sentence ``check_op`` / ``_node_problem`` / ``parse_op`` says (whole), and the short spellings an
operation with extra fields must not get. Written from the survivors of ``benchmarks/mutation.py`` over the
module (issue 19): each case below kills one or more of them."""
from __future__ import annotations

import pytest

from simcache.config import MAX_SLOTS
from simcache.errors import ScenarioError
from simcache.operations import MAX_NOTE, MAX_TOKENS, check_op, describe_op, format_op, parse_op

TOP = (1 << 62) - 1  # the largest token a key or a request may hold


def refusal(op, page_size: int = 1, allow_extra: bool = True) -> str:
    with pytest.raises(ScenarioError) as e:
        check_op(op, 5, page_size=page_size, allow_extra=allow_extra)
    return str(e.value)


# --- the bounds: the last value accepted and the first refused ---------------------------------------------------
@pytest.mark.parametrize("op", [
    {"op": "request", "tokens": [0]},
    {"op": "request", "tokens": [TOP, 0, 3]},
    {"op": "start", "tokens": [0] * MAX_TOKENS},
    {"op": "evict", "n": MAX_SLOTS},
    {"op": "evict", "n": 0},
    {"op": "events", "note": "x" * MAX_NOTE},
    {"op": "inject", "nodes": [{"key": [0, TOP]}, {"key": [5, 6], "parent": 0}, {"key": [7, 8], "parent": 1}]},
    {"op": "inject", "nodes": [{"key": [0] * MAX_TOKENS, "host": False, "device": True}]},
])
def test_the_last_value_each_field_accepts_passes(op):
    assert check_op(op, 5, page_size=1) is None


@pytest.mark.parametrize("op, message", [
    ({"op": "request", "tokens": [1, 1 << 62]},
     "op 5 (request): tokens must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2, 3]"),
    ({"op": "request", "tokens": [1 << 63]},
     "op 5 (request): tokens must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2, 3]"),
    ({"op": "request", "tokens": [2, -1]},
     "op 5 (request): tokens must be a non-empty list of whole numbers from 0 to 2**62 - 1, like [1, 2, 3]"),
    ({"op": "prefetch", "tokens": [1] * (MAX_TOKENS + 1)},
     f"op 5 (prefetch): {MAX_TOKENS + 1} tokens is too many; keep requests under {MAX_TOKENS}"),
    ({"op": "evict", "n": MAX_SLOTS + 1},
     f"op 5 (evict): n must be a whole number between 0 and {MAX_SLOTS}, not {MAX_SLOTS + 1}"),
    ({"op": "events", "note": "y" * (MAX_NOTE + 1)},
     f"op 5 (events): note must be a short text (at most {MAX_NOTE} characters), not "
     f"'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy... ({MAX_NOTE + 3:,} characters)"),
])
def test_the_first_value_past_each_bound_is_refused_with_its_sentence(op, message):
    assert refusal(op) == message


# --- every sentence, whole --------------------------------------------------------------------------------------
@pytest.mark.parametrize("op, message", [
    ("evict 2", "op 5: unknown op None; known ops: request, start, finish_oldest, evict, evict_mamba, evict_host, "
                "events, l3_ack, prefetch, prefetch_done, prefetch_hit, inject, finish, write_ack, load_ack"),
    ({}, "op 5: an operation object needs an 'op' field, like {op: evict, n: 2} or the string 'evict 2'; it has "
         "no fields"),
    ({7: 1, "b": 2}, "op 5: an operation object needs an 'op' field, like {op: evict, n: 2} or the string "
                     "'evict 2'; it has 7, b"),
    ({"op": "events", "n": 2}, "op 5 (events) needs exactly no fields; it has ['n']"),
    ({"op": "prefetch_done", "n": 2}, "op 5 (prefetch_done) needs exactly mamba_hit, n; it has ['n']"),
    ({"op": "finish", "n": 1}, "op 5 (finish) needs exactly no fields (optionally rid); it has ['n']"),
    ({"op": "start", "tokens": [1], "rid": "r" * 65},
     "op 5 (start): rid 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr... (67 characters) must be 1 to 64 ASCII letters, "
     "digits, '_', '.', '-', like 'chat'"),
    ({"op": "start", "tokens": [1], "rid": ""}, "op 5 (start): rid must be a non-empty string"),
    ({"op": "events", "note": 3}, "op 5 (events): note must be a short text (at most 1000 characters), not 3"),
    ({"op": "inject", "nodes": {"key": [1]}},
     "op 5 (inject): nodes must be a list of node objects like [{key: [1, 2], host: true}]"),
])
def test_check_op_says_each_problem_in_one_whole_sentence(op, message):
    assert refusal(op) == message


@pytest.mark.parametrize("nodes, message", [
    ([[1, 2]], "op 5 node 0: a node must be an object like {key: [1, 2], host: true}"),
    ([{"key": [1], "color": "red", 3: 1}],
     "op 5 node 0: unknown field(s) 3, color; node fields are device, hash, host, key, l3_backup, mamba, "
     "mamba_host, parent"),
    ([{"key": [1, 0, -1]}], "op 5 node 0: key must be a non-empty list of whole numbers from 0 to 2**62 - 1, like "
                            "[1, 2]"),
    ([{"key": [1 << 62]}], "op 5 node 0: key must be a non-empty list of whole numbers from 0 to 2**62 - 1, like "
                           "[1, 2]"),
    ([{"key": [1 << 63]}], "op 5 node 0: key must be a non-empty list of whole numbers from 0 to 2**62 - 1, like "
                           "[1, 2]"),
    ([{"key": [0] * (MAX_TOKENS + 1)}],
     f"op 5 node 0: key has {MAX_TOKENS + 1} tokens; keep keys under {MAX_TOKENS}"),
    ([{"key": [1]}, {"key": [2]}, {"key": [3], "parent": 2}],
     "op 5 node 2: parent must be null (the root) or the index of an earlier node (0 to 1), not 2"),
    ([{"key": [1]}, {"key": [2], "parent": 1}],
     "op 5 node 1: parent must be null (the root) or the index of an earlier node (0 to 0), not 1"),
    ([{"key": [1], "parent": 0}], "op 5 node 0: parent must be null (the root) or the index of an earlier node, "
                                  "not 0"),
    ([{"key": [1], "mamba_host": 1}], "op 5 node 0: mamba_host must be true or false, not 1"),
])
def test_each_inject_node_problem_is_named_whole(nodes, message):
    assert refusal({"op": "inject", "nodes": nodes}) == message


def test_a_key_of_exactly_max_tokens_is_still_checked_against_the_page_size():
    assert refusal({"op": "inject", "nodes": [{"key": [0] * MAX_TOKENS}]}, page_size=3) == \
        f"op 5 node 0: key has {MAX_TOKENS} tokens; make it a multiple of page_size 3"


# --- short strings ---------------------------------------------------------------------------------------------
def test_a_token_of_thirty_digits_is_read_and_one_of_thirty_one_is_not():
    assert parse_op("request 1 " + "9" * 30, "x") == {"op": "request", "tokens": [1, int("9" * 30)]}
    assert parse_op("evict -3", "x") == {"op": "evict", "n": -3}  # read as written; check_op names the sign
    with pytest.raises(ScenarioError) as e:
        parse_op("request " + "9" * 31, "x")
    assert str(e.value) == (f"x: cannot read operation 'request {'9' * 31}'; write e.g. 'request 1 2 3', "
                            f"'evict 2', 'prefetch_done 4 hit', 'events'")


def test_a_long_unknown_operation_name_is_cut_at_forty_characters():
    with pytest.raises(ScenarioError) as e:
        parse_op("z" * 50 + " 1", "op 0")
    assert str(e.value) == ("op 0: unknown operation 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz... (52 characters); "
                            "use one of request, start, finish, finish_oldest, evict, evict_mamba, evict_host, "
                            "events, l3_ack, write_ack, load_ack, prefetch, prefetch_done, prefetch_hit")


@pytest.mark.parametrize("op", [
    {"op": "prefetch_done", "n": 2},  # not every field of its short form
    {"op": "prefetch_done", "n": 2, "mamba_hit": True, "note": "why"},  # a note has no short spelling
    {"op": "evict", "n": 2, "note": "why"},
    {"op": "write_ack", "n": 1, "note": "why"},
    {"op": "events", "n": 1},
    {"op": "finish", "rid": "chat"},
])
def test_an_operation_with_fields_its_short_form_lacks_stays_an_object(op):
    out = format_op(op)
    assert out == op and out is not op


def test_describe_leaves_out_only_the_note():
    assert describe_op({"op": "evict", "n": 2, "note": "why"}) == "evict n=2"
    assert describe_op({"op": "finish", "rid": "chat", "note": "x"}, "R1") == "R1: finish rid=chat"
    assert describe_op({"op": "events", "note": "x"}) == "events"
