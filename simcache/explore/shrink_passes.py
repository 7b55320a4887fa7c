"""The shrinking passes (see ``shrink``): each proposes smaller cases in a fixed order and keeps the first that
is a valid scenario and still fails the same way, then goes on from it.

A *case* is a scenario document plus a schedule (one actor name per turn); ``Shrinker.fails`` replays it on the
fast path (``machine.Machine``) and compares signatures. After every accepted change ``truncate`` drops the
operations the run no longer reaches (it stops at the crash), so a case's schedule is always complete.
"""
from __future__ import annotations

import copy

from ..errors import ScenarioError, ScheduleError, SimcacheError
from ..scenario import Scenario, from_doc
from ..scheduler import format_turns
from .machine import Machine, plan_for, signature
from .results import count_preemptions, switches
from .search import exhaustive

POOLS = ("device_kv", "device_mamba", "host_kv", "host_mamba")
_NODE_FLAGS = ("device", "mamba", "host", "mamba_host", "hash", "l3_backup")


class Case:
    __slots__ = ("doc", "turns")

    def __init__(self, doc: dict, turns: tuple[str, ...]) -> None:
        self.doc, self.turns = doc, turns

    def with_(self, doc: dict | None = None, turns=None) -> Case:
        return Case(self.doc if doc is None else doc, self.turns if turns is None else tuple(turns))


class Shrinker:
    def __init__(self, preset: str, flags, target: str) -> None:
        self.preset, self.flags, self.target = preset, flags, target
        self.tried = 0

    def run(self, case: Case) -> tuple[Scenario, Machine] | None:
        """The scenario and the machine after the schedule, or None when invalid."""
        self.tried += 1
        try:
            sc = from_doc(case.doc, name=case.doc.get("name", "minimal"))
            plan = plan_for(sc, self.flags)
            where = {a: i for i, a in enumerate(plan.actors)}
            if any(a not in where for a in case.turns):
                return None
            sc.parse_schedule(format_turns(case.turns))
            return sc, Machine.replay(plan, [where[a] for a in case.turns])
        except (ScenarioError, ScheduleError, SimcacheError):
            return None

    def fails(self, case: Case) -> bool:
        got = self.run(case)
        return got is not None and got[1].crash is not None and signature(got[1].crash) == self.target

    def accept(self, cand: Case) -> Case | None:
        return truncate(self, cand) if self.fails(cand) else None


def _ops(doc: dict) -> dict[str, list]:
    return doc["actors"]


def truncate(sh: Shrinker, case: Case) -> Case:
    """Drop every operation the run did not reach (it stops at the crash), and actors left with none."""
    _, m = sh.run(case)
    turns = tuple(m.turns)
    doc = copy.deepcopy(case.doc)
    used = {a: turns.count(a) for a in _ops(doc)}
    doc["actors"] = {a: ops[: used[a]] for a, ops in _ops(doc).items() if used[a]}
    return case.with_(doc, turns)


def _drop_turn(turns, actor: str, k: int) -> tuple[str, ...]:
    """``turns`` without the ``k``-th turn of ``actor``."""
    out, seen = [], 0
    for a in turns:
        if a == actor:
            seen += 1
            if seen - 1 == k:
                continue
        out.append(a)
    return tuple(out)


def pass_actors(sh: Shrinker, case: Case) -> Case | None:
    changed = None
    for actor in list(_ops(case.doc)):
        if len(_ops(case.doc)) == 1:
            break
        if actor not in _ops(case.doc):  # an accepted drop made the crash come sooner: truncate dropped it
            continue
        doc = copy.deepcopy(case.doc)
        del doc["actors"][actor]
        got = sh.accept(case.with_(doc, [a for a in case.turns if a != actor]))
        if got is not None:
            case = changed = got
    return changed


def pass_ops(sh: Shrinker, case: Case) -> Case | None:
    changed = None
    for actor in list(_ops(case.doc)):
        k = len(_ops(case.doc).get(actor, ())) - 1
        while k >= 0:
            ops = _ops(case.doc).get(actor, [])
            if k < len(ops) and len(ops) > 1:
                doc = copy.deepcopy(case.doc)
                del doc["actors"][actor][k]
                got = sh.accept(case.with_(doc, _drop_turn(case.turns, actor, k)))
                if got is not None:
                    case = changed = got
            k -= 1
    return changed


def pass_initial(sh: Shrinker, case: Case) -> Case | None:
    changed = None
    j = len(case.doc.get("initial") or []) - 1
    while j >= 0:
        nodes = case.doc.get("initial") or []
        if j < len(nodes) and not any(n.get("parent") == j for n in nodes):
            doc = copy.deepcopy(case.doc)
            rest = [dict(n) for i, n in enumerate(nodes) if i != j]
            for n in rest:
                if n.get("parent") is not None and n["parent"] > j:
                    n["parent"] -= 1
            if rest:
                doc["initial"] = rest
            else:
                doc.pop("initial", None)
            got = sh.accept(case.with_(doc))
            if got is not None:
                case = changed = got
        j -= 1
    for j in range(len(case.doc.get("initial") or [])):
        for flag in _NODE_FLAGS:
            if case.doc["initial"][j].get(flag):
                doc = copy.deepcopy(case.doc)
                del doc["initial"][j][flag]
                got = sh.accept(case.with_(doc))
                if got is not None:
                    case = changed = got
    return changed


def pass_tokens(sh: Shrinker, case: Case) -> Case | None:
    changed = None
    for actor in list(_ops(case.doc)):
        k = 0
        # re-read the case each time: a shorter list can make the crash come sooner, and ``truncate`` then drops
        # this actor's later operations
        while k < len(_ops(case.doc).get(actor, ())):
            i = len(_ops(case.doc)[actor][k].get("tokens", ())) - 1
            while i >= 0:
                tokens = _ops(case.doc)[actor][k].get("tokens", [])
                if 1 < len(tokens) and i < len(tokens):
                    doc = copy.deepcopy(case.doc)
                    del doc["actors"][actor][k]["tokens"][i]
                    got = sh.accept(case.with_(doc))
                    if got is not None:
                        case = changed = got
                i -= 1
            k += 1
    return changed


def pass_numbers(sh: Shrinker, case: Case) -> Case | None:
    """Lower ``n`` of operations (evictions, prefetch completions) and the pool sizes, smallest first."""
    changed = None
    for actor in list(_ops(case.doc)):
        k = 0
        # re-read the case each time: an accepted change may drop later operations, or the actor (``truncate``)
        while k < len(_ops(case.doc).get(actor, ())):
            op = _ops(case.doc)[actor][k]
            k += 1
            for n in range(op.get("n", 0)):
                doc = copy.deepcopy(case.doc)
                doc["actors"][actor][k - 1]["n"] = n
                got = sh.accept(case.with_(doc))
                if got is not None:
                    case = changed = got
                    break
    for pool in POOLS:
        current = case.doc["config"].get(pool)
        for n in range(current or 0):
            doc = copy.deepcopy(case.doc)
            doc["config"][pool] = n
            got = sh.accept(case.with_(doc))
            if got is not None:
                case = changed = got
                break
    return changed


def _blocks(turns) -> list[tuple[str, int, int]]:
    """Maximal runs of one actor: (actor, start, end)."""
    out, i = [], 0
    while i < len(turns):
        j = i
        while j < len(turns) and turns[j] == turns[i]:
            j += 1
        out.append((turns[i], i, j))
        i = j
    return out


def pass_merge(sh: Shrinker, case: Case) -> Case | None:
    """Join two runs of one actor by moving the later one back, or the earlier one forward (cheap local moves
    before the exhaustive re-scheduling)."""
    changed = None
    k = 0
    while k < len(_blocks(case.turns)):
        blocks = _blocks(case.turns)
        actor, start, end = blocks[k]
        prev = [b for b in blocks[:k] if b[0] == actor]
        if prev:
            _, p_start, p_end = prev[-1]
            t = list(case.turns)
            back = t[:p_end] + t[start:end] + t[p_end:start] + t[end:]
            forward = t[:p_start] + t[p_end:start] + t[p_start:p_end] + t[start:]
            for cand in (back, forward):
                got = sh.accept(case.with_(turns=cand))
                if got is not None and switches(got.turns) < switches(case.turns):
                    case = changed = got
                    k = -1
                    break
        k += 1
    return changed


def pass_schedule(sh: Shrinker, case: Case) -> Case | None:
    """A schedule of the same operations with fewer preemptions that fails the same way: the first one in
    fewest-preemptions-first order. At the fixpoint no such schedule exists, so the schedule's switches are the
    fewest any failing order of these operations has (switches = preemptions + actors - 1)."""
    sc, _ = sh.run(case)
    plan = plan_for(sc, sh.flags)
    have = count_preemptions(case.turns, dict(zip(plan.actors, plan.lengths, strict=False)))
    if have == 0:
        return None
    res = exhaustive(plan, sh.preset, bound=have - 1, until=sh.target)
    if res.first_failure is None or res.first_failure.signature != sh.target:
        return None
    return sh.accept(case.with_(turns=sc.parse_schedule(res.first_failure.schedule).turns))


PASSES = (pass_actors, pass_ops, pass_initial, pass_tokens, pass_numbers, pass_merge, pass_schedule)
# the strategies ``shrink`` compares, each a sequence of stages run to a fixpoint: every pass; or operations first
# (token lists left whole until no other pass applies), then every pass
STRATEGIES = ((PASSES,), (tuple(p for p in PASSES if p is not pass_tokens), PASSES))
