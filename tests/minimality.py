"""Brute-force checks that a shrunk case is minimal, written apart from the shrinker (no code of it is used).

A case is a scenario (config, injected nodes, actors) and a schedule (one actor a turn). It *fails the same way*
as another when its run raises the same exception with the same message, node ids blanked, in the same function.
Runs go through ``run_ops`` (the public oracle-format entry point): the scenario's operations in schedule order.

Two checks, each by enumeration:
- ``smaller_cases``: no case with one operation fewer fails the same way, where
  - the remaining operations may each take any form the *original* scenario gave that actor's operations of that
    kind (its token lists, and every ``n`` from 0 to the largest it used), in the same order, and the config may
    have one pool one slot larger or back at its original size. This catches a shrinker that stops in a local
    minimum: one that shortened tokens or lowered an ``n`` and so needed an operation that the original forms do
    without;
  - or the remaining operations, as they are, run in *any* interleaving (each actor's own order kept): at most
    120 orders for five operations. This catches a shrinker that kept an operation only because it never
    reordered the others.
- ``fewer_preemption_orders``: no schedule of the case's own operations with fewer preemptions (a switch away
  from an actor that still has operations left) fails the same way: every interleaving is enumerated.
"""
from __future__ import annotations

import itertools
import re

from simcache.ops_run import run_ops
from simcache.scenario import from_doc

_IDS = re.compile(r"\b((?:node|x)\.id)=\d+|(?<=evicted node )\d+")


def signature(result: dict) -> str | None:
    if result["outcome"] == "clean":
        return None
    return f"{_IDS.sub(lambda m: (m.group(1) + '=#') if m.group(1) else '#', result['outcome'])} @ " \
           f"{result['raised_in']}"


def run_case(config: dict, initial, actors: dict[str, list[dict]], turns, preset: str) -> str | None:
    """The signature of the case's run (None when clean or not a valid case)."""
    doc = dict(name="probe", config=config, actors=actors, schedule=" ".join(turns))
    if initial:
        doc["initial"] = initial
    try:
        sc = from_doc(doc, name="probe")
        ops = [op for _, op in sc.linearize(sc.parse_schedule())]
        return signature(run_ops(dict(config=config, ops=ops), preset))
    except Exception:  # noqa: BLE001 - an invalid candidate is simply not a smaller failing case
        return None


def preemptions(turns, lengths: dict[str, int]) -> int:
    left, n = dict(lengths), 0
    for i, a in enumerate(turns):
        left[a] -= 1
        if i + 1 < len(turns) and turns[i + 1] != a and left[a]:
            n += 1
    return n


def interleavings(lengths: dict[str, int]):
    """Every schedule of actors with these operation counts (each actor's own order kept)."""
    names = sorted(lengths)

    def rec(left, prefix):
        if not any(left.values()):
            yield tuple(prefix)
            return
        for a in names:
            if left[a]:
                left[a] -= 1
                prefix.append(a)
                yield from rec(left, prefix)
                prefix.pop()
                left[a] += 1

    yield from rec(dict(lengths), [])


def _forms(op: dict, originals: list[dict]) -> list[dict]:
    """The forms an operation may take: its own, and those the original actor gave operations of its kind."""
    same = [o for o in originals if o["op"] == op["op"]]
    out = [op] + [dict(o) for o in same]
    top = max([o.get("n", 0) for o in same] + [op.get("n", 0)])
    if "n" in op:
        out += [dict(op, n=n) for n in range(top + 1)]
    seen, uniq = set(), []
    for o in out:
        key = repr(sorted(o.items()))
        if key not in seen:
            seen.add(key)
            uniq.append(o)
    return uniq


POOLS = ("device_kv", "device_mamba", "host_kv", "host_mamba")


def _configs(config: dict, original: dict) -> list[dict]:
    out = [config]
    for pool in POOLS:
        if config.get(pool) != original.get(pool):
            out += [dict(config, **{pool: config[pool] + 1}), dict(config, **{pool: original[pool]})]
    return out


def smaller_cases(case: dict, original: dict, preset: str, target: str, limit: int = 20_000) -> list[tuple]:
    """Cases with one operation fewer that fail with ``target`` (see the module's docstring); [] when minimal."""
    actors, turns = case["actors"], list(case["turns"])
    configs = _configs(case["config"], {**case["config"], **original.get("config", {})})
    found, tried = [], 0
    for actor in sorted(actors):
        for k in range(len(actors[actor])):
            rest = {a: [op for j, op in enumerate(ops) if not (a == actor and j == k)] for a, ops in actors.items()}
            rest = {a: ops for a, ops in rest.items() if ops}
            idx = [i for i, a in enumerate(turns) if a == actor][k]
            rest_turns = turns[:idx] + turns[idx + 1:]
            slots = [(a, j) for a in sorted(rest) for j in range(len(rest[a]))]
            choices = [_forms(rest[a][j], original["actors"].get(a, [])) for a, j in slots]
            hit = None
            for config, combo in itertools.product(configs, itertools.product(*choices)):
                tried += 1
                assert tried <= limit, f"more than {limit} candidates: the check would not be brute force in CI"
                cand = {a: [None] * len(ops) for a, ops in rest.items()}
                for (a, j), op in zip(slots, combo, strict=True):
                    cand[a][j] = op
                if run_case(config, case.get("initial"), cand, rest_turns, preset) == target:
                    hit = (actor, k, cand, " ".join(rest_turns), config)
                    break
            for order in interleavings({a: len(ops) for a, ops in rest.items()}) if hit is None else ():
                tried += 1
                assert tried <= limit, f"more than {limit} candidates: the check would not be brute force in CI"
                if run_case(case["config"], case.get("initial"), rest, order, preset) == target:
                    hit = (actor, k, rest, " ".join(order), case["config"])
                    break
            if hit is not None:
                found.append(hit)
    return found


def fewer_preemption_orders(case: dict, preset: str, target: str) -> list[str]:
    """Schedules of the case's operations with fewer preemptions that fail with ``target``; [] when minimal."""
    lengths = {a: len(ops) for a, ops in case["actors"].items()}
    have = preemptions(case["turns"], lengths)
    out = []
    for turns in interleavings(lengths):
        if preemptions(turns, lengths) < have and \
                run_case(case["config"], case.get("initial"), case["actors"], turns, preset) == target:
            out.append(" ".join(turns))
    return out
