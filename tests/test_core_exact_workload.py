"""workload.py compared whole: every generated stream is read back turn by turn and checked against what its spec
promises (system prompts, each chat's turns extending its last prompt and answer, the prefetched prompt being the
one later asked for, overlap, acks, evictions, the prefetch's delay and completion, the pools' sizes), every
spec's ends reached; the rates' rows, refusals, progress and table compared whole."""
from __future__ import annotations

import math
from collections import Counter

import pytest

from simcache.crash import signature
from simcache.errors import SimcacheError
from simcache.ops_run import run_ops
from simcache.workload import (
    RateRow,
    WorkloadError,
    WorkloadSpec,
    crash_rates,
    generate,
    run_stream,
    table,
    working_set,
)


def trie_size(requests) -> int:
    """Distinct prefixes counted as nodes of a token trie built one token at a time."""
    root: dict = {}
    nodes = 0
    for r in requests:
        at = root
        for t in r:
            if t not in at:
                at[t] = {}
                nodes += 1
            at = at[t]
    return nodes


def read_stream(doc: dict, spec: WorkloadSpec, pressure: float) -> dict:
    """Check ``doc`` against ``spec`` turn by turn; what was seen, to check that the ends of each range occur."""
    ops = doc["ops"]
    seen = Counter()
    seen_sets: dict[str, set] = {k: set() for k in ("prompt_len", "user_len", "new_len", "delay", "done_n_is_1",
                                                     "done_n_is_len", "hit", "evict_n", "turn_kinds")}
    prompts = {}  # system prompt k -> its tokens (all of one length range)
    last_prompt: dict[int, list[int]] = {}
    planned: dict[int, list[int]] = {}
    fresh = {c: 1000 * (c + 1) for c in range(spec.chats)}
    running, inflight, requests, i = 0, None, [], 0
    for turn in range(spec.requests):
        if ops[i]["op"] == "prefetch":
            assert inflight is None, "one prefetch at a time"
            tokens = ops[i]["tokens"]
            c = tokens[-1] // 1000 - 1
            planned[c] = tokens
            inflight = [turn, len(tokens)]
            seen["prefetch"] += 1
            i += 1
        op = ops[i]
        assert op["op"] in ("start", "request") and set(op) == {"op", "tokens"}
        seen_sets["turn_kinds"].add(op["op"])
        tokens = op["tokens"]
        c = tokens[-1] // 1000 - 1
        assert 0 <= c < spec.chats
        if c in planned:
            assert tokens == planned.pop(c)  # the prefetched prompt is the one asked for
        own = [t for t in tokens if t >= 1000]
        assert all(t // 1000 - 1 == c for t in own)
        if c in last_prompt:
            base = last_prompt[c]
            assert tokens[:len(base)] == base
            new = tokens[len(base):]
            # the answer to the last turn, then the user's new tokens: consecutive numbers of this chat's own
            assert new == list(range(fresh[c], fresh[c] + len(new)))
            assert spec.answer_len[0] + spec.user_len[0] <= len(new) <= spec.answer_len[1] + spec.user_len[1]
            seen_sets["new_len"].add(len(new))
        else:
            head = tokens[:len(tokens) - len(own)]
            k = head[0] // 100 - 1
            assert 0 <= k < spec.system_prompts and head == [100 * (k + 1) + j for j in range(len(head))]
            assert prompts.setdefault(k, head) == head
            seen_sets["prompt_len"].add(len(head))
            assert own == list(range(fresh[c], fresh[c] + len(own)))
            assert spec.user_len[0] <= len(own) <= spec.user_len[1]
            seen_sets["user_len"].add(len(own))
        fresh[c] = tokens[-1] + 1
        last_prompt[c] = tokens
        requests.append(tokens)
        running += op["op"] == "start"
        i += 1
        if ops[i]["op"] == "finish_oldest":
            assert running > 0
            running -= 1
            seen["finish"] += 1
            i += 1
        if ops[i]["op"] in ("events", "l3_ack") and not (turn == spec.requests - 1 and i >= len(ops) - 2):
            assert ops[i] == {"op": ops[i]["op"]}
            seen[ops[i]["op"]] += 1
            i += 1
        if ops[i]["op"] == "evict":
            assert set(ops[i]) == {"op", "n"} and 1 <= ops[i]["n"] <= spec.evict_max
            seen_sets["evict_n"].add(ops[i]["n"])
            seen["evict"] += 1
            i += 1
        if inflight is not None:
            if ops[i]["op"] == "prefetch_done":
                done = ops[i]
                assert set(done) == {"op", "n", "mamba_hit"} and 1 <= done["n"] <= inflight[1]
                assert type(done["mamba_hit"]) is bool
                seen_sets["done_n_is_1"].add(done["n"] == 1)
                seen_sets["done_n_is_len"].add(done["n"] == inflight[1])
                seen_sets["hit"].add(done["mamba_hit"])
                delay = turn - inflight[0]
                assert delay <= spec.prefetch_delay
                seen_sets["delay"].add(delay)
                inflight = None
                i += 1
            else:
                assert turn - inflight[0] < spec.prefetch_delay
    assert ops[i:] == [{"op": "finish_oldest"}] * running + [{"op": "events"}, {"op": "l3_ack"}]
    working, states = trie_size(requests), len({tuple(r) for r in requests})
    assert doc["working_set"] == working and doc["mamba_states"] == states
    assert doc["config"] == dict(policy=spec.policy, storage=True,
                                 device_kv=max(map(len, requests)) + spec.device_slack,
                                 device_mamba=spec.chats + 2, host_kv=max(1, math.ceil(working / pressure)),
                                 host_mamba=max(1, math.ceil(states / pressure)))
    assert set(doc) == {"config", "ops", "working_set", "mamba_states"}
    seen["turns"] += spec.requests
    seen["started"] += sum(op["op"] == "start" for op in ops)
    return {"counts": seen, **seen_sets}


def read_many(spec: WorkloadSpec, n: int, pressure: float = 2.0, seed: int = 0) -> dict:
    total: dict = {"counts": Counter()}
    for index in range(n):
        got = read_stream(generate(seed, pressure, spec, index), spec, pressure)
        total["counts"] += got.pop("counts")
        for k, v in got.items():
            total.setdefault(k, set()).update(v)
    return total


def test_the_default_spec():
    assert WorkloadSpec() == WorkloadSpec(requests=32, system_prompts=2, chats=4, prompt_len=(2, 4), user_len=(1, 3),
                                          answer_len=(1, 2), overlap=0.4, prefetch=0.5, prefetch_delay=3,
                                          prefetch_hit=0.7, acks=0.5, evict=0.0, evict_max=4, device_slack=4,
                                          policy="write_through")


def test_default_streams_keep_every_promise_and_reach_every_end_of_every_range():
    spec = WorkloadSpec()
    got = read_many(spec, 150)
    assert got["prompt_len"] == {2, 3, 4} and got["user_len"] == {1, 2, 3} and got["new_len"] == {2, 3, 4, 5}
    assert got["delay"] == {0, 1, 2, 3} and got["done_n_is_1"] == got["done_n_is_len"] == {True, False}
    assert got["hit"] == {True, False} and got["turn_kinds"] == {"start", "request"}
    c = got["counts"]
    assert c["evict"] == 0
    turns = c["turns"]
    assert 0.35 < c["started"] / turns < 0.45  # overlap 0.4
    assert 0.45 < (c["events"] + c["l3_ack"]) / turns < 0.55 and 0.4 < c["events"] / (c["events"] + c["l3_ack"]) < 0.6
    assert 0.3 < c["finish"] / c["started"] < 0.9  # a running turn is finished after half the turns


def test_every_chance_at_its_ends():
    never = WorkloadSpec(overlap=0.0, prefetch=0.0, acks=0.0, evict=0.0)
    got = read_many(never, 20)
    c = got["counts"]
    assert (c["started"], c["finish"], c["prefetch"], c["events"], c["l3_ack"], c["evict"]) == (0, 0, 0, 0, 0, 0)
    assert got["turn_kinds"] == {"request"}
    always = WorkloadSpec(overlap=1.0, prefetch=1.0, acks=1.0, evict=1.0, evict_max=3, prefetch_delay=0,
                          prefetch_hit=1.0)
    got = read_many(always, 20)
    c = got["counts"]
    assert c["started"] == c["turns"] == 640 and c["prefetch"] == 640 and c["evict"] == 640
    assert c["events"] + c["l3_ack"] == 640
    assert got["delay"] == {0} and got["hit"] == {True} and got["evict_n"] == {1, 2, 3}
    assert read_many(WorkloadSpec(prefetch_hit=0.0), 20)["hit"] == {False}


def test_other_shapes_keep_their_promises():
    spec = WorkloadSpec(requests=200, system_prompts=5, chats=9, prompt_len=(1, 6), user_len=(2, 2),
                        answer_len=(0, 3), prefetch_delay=6, evict=0.5, evict_max=2, device_slack=0,
                        policy="write_back")
    got = read_many(spec, 6, pressure=0.5, seed=3)
    assert got["user_len"] == {2} and got["prompt_len"] == set(range(1, 7)) and got["new_len"] == {2, 3, 4, 5}
    assert got["delay"] == set(range(7)) and got["evict_n"] == {1, 2}
    c = got["counts"]
    assert 0.4 < c["finish"] / c["started"] <= 1.0


def test_a_stream_is_a_function_of_seed_and_index_and_a_huge_pressure_keeps_one_slot():
    a = generate(4, 1e6, WorkloadSpec(), 2)
    assert a == generate(4, 1e6, WorkloadSpec(), 2) and a["ops"] != generate(4, 1e6, WorkloadSpec(), 3)["ops"]
    assert a["ops"] != generate(5, 1e6, WorkloadSpec(), 2)["ops"]
    assert (a["config"]["host_kv"], a["config"]["host_mamba"]) == (1, 1)
    assert generate(4, 1.0)["ops"] == generate(4, 8.0)["ops"]  # the pressure sizes the pools only
    read_stream(generate(4, 1e-3), WorkloadSpec(), 1e-3)


def test_working_set_counts_distinct_prefixes():
    assert working_set([]) == 0
    assert working_set([[1, 2, 3], [1, 2], [1, 4], [5]]) == 5
    assert working_set([[7], [7], [7, 7]]) == 2


def test_rate_rows_and_their_dict():
    row = RateRow("pre_fix", 2.0, 8, 4, 2, 1)
    assert (row.crash_rate, row.race_rate, row.damage_rate) == (0.5, 0.25, 0.125)
    assert row.as_dict() == {"preset": "pre_fix", "pressure": 2.0, "runs": 8, "crashes": 4, "races": 2, "damaged": 1,
                             "crash_rate": 0.5, "race_rate": 0.25, "damage_rate": 0.125}
    empty = RateRow("pre_fix", 1.0, 0, 0, 0, 0)
    assert (empty.crash_rate, empty.race_rate, empty.damage_rate) == (0.0, 0.0, 0.0)


def test_run_stream_is_the_replay_of_its_stream():
    spec = WorkloadSpec()
    seen = set()
    for index in range(60):
        doc = generate(0, 8.0, spec, index)
        r = run_ops({"config": doc["config"], "ops": doc["ops"]}, "pre_fix")
        damaged = bool(r["double_frees"]) or any(a["leaked"] for a in r["accounting"].values())
        got = run_stream(("pre_fix", 8.0, 0, index, spec))
        assert got == (None if r["_crash"] is None else signature(r["_crash"]), damaged)
        seen.add((got[0] is not None, got[1]))
    assert {(False, False), (False, True), (True, True)} <= seen  # clean, damaged, crashed


def test_crash_rates_rows_count_their_streams_in_order():
    calls = []
    rows = crash_rates(["pre_fix", "followup_fix"], [8, 0.5], n_streams=10, seed=2, progress=calls.append)
    assert calls == [dict(runs=i, total=40) for i in range(1, 41)]
    want = []
    for name in ("pre_fix", "followup_fix"):
        for p in (8.0, 0.5):
            outs = [run_stream((name, p, 2, i, WorkloadSpec())) for i in range(10)]
            sigs = Counter(s for s, _ in outs if s is not None)
            races = sum(n for s, n in sigs.items() if "parent does not have child key" in s)
            row = RateRow(name, p, 10, sum(sigs.values()), races, sum(d for _, d in outs)).as_dict()
            want.append({**row, "signatures": dict(sorted(sigs.items()))})
    assert rows == want
    assert [(r["preset"], r["pressure"]) for r in rows] == [("pre_fix", 8.0), ("pre_fix", 0.5),
                                                            ("followup_fix", 8.0), ("followup_fix", 0.5)]
    assert rows[0]["crashes"] > 0 and rows[0]["damaged"] > 0 and rows[0]["races"] > 0
    assert crash_rates(["pre_fix"], [8], n_streams=10, seed=2, jobs=2) == rows[:1]


def test_crash_rates_refusals_are_whole_sentences():
    def refused(**kw) -> str:
        with pytest.raises(WorkloadError) as e:
            crash_rates(**kw)
        return str(e.value)

    assert issubclass(WorkloadError, SimcacheError)
    from simcache.versions import PRESETS
    assert refused(presets=["pre_fix", "x", "y"]) == f"unknown preset(s) x, y; choose from {', '.join(PRESETS)}"
    pressure = ("pressures must be numbers between 0.001 and 1000000, like 0.5 1 2 4 (working set / host KV "
                "slots)")
    for bad in ([], [0.0009], [1e6 + 1], [float("nan")], ["2"], [None]):
        assert refused(pressures=bad) == pressure, bad
    for label in ("n_streams", "jobs"):
        for bad in (0, -1, 1.0, "2", True):
            assert refused(**{label: bad}) == f"{label} must be a whole number >= 1, not {bad!r}"
    ok = crash_rates(["pre_fix"], [1e-3, 1e6], n_streams=1)
    assert [r["pressure"] for r in ok] == [0.001, 1e6]


def test_the_table_is_one_row_per_preset_and_one_column_per_pressure_sorted():
    def row(preset, p, crash, race):
        return {"preset": preset, "pressure": p, "crash_rate": crash, "race_rate": race}

    rows = [row("b", 4.0, 0.5, 0.25), row("b", 0.5, 0.0, 0.0), row("a", 4.0, 1.0, 0.125), row("a", 0.5, 0.333, 0.0)]
    assert table(rows) == ("| preset | p=0.5 | p=4 |\n"
                           "|---|---|---|\n"
                           "| b | 0% (0% race) | 50% (25% race) |\n"
                           "| a | 33% (0% race) | 100% (12% race) |")
