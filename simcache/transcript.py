"""The transcript of a run: what a person reads (and a test asserts) after ``python -m simcache run``.

One line per operation (its index, status letter, actor and operation), the went-stale, re-admitted and cleaned-up
moments and the first invariant violation under the operation they happened in, the outcome and the damage (what
the run left broken), then the raising call stack frame by frame, and a key to the symbols used.
"""
from __future__ import annotations

from .operations import STATUS_KEY, describe_op

EVENT_KEY = ("! a node went stale or a detached node was re-admitted", "+ a stale guard cleaned a node up",
             "~ the first invariant violation")


def damage_lines(double_frees, leaked: dict) -> list[str]:
    """``["double free device_kv[3]", "leaked host_kv[1, 2]"]`` from (pool, slots) pairs and pool -> slots."""
    return [f"double free {pool}{list(slots)}" for pool, slots in double_frees] + \
        [f"leaked {pool}{list(slots)}" for pool, slots in leaked.items() if slots]


def transcript(run) -> str:
    """A human transcript: operations, went-stale and cleaned-up moments, first violation, outcome and damage
    (what the run left broken), then the raising call stack frame by frame, and a key to the symbols."""
    t, lines = run.trace, []
    sc = run.scenario
    lines.append(f"{sc.name} under {run.preset}  (schedule: {run.schedule})")
    events: dict[int, list[str]] = {}
    for e in t.went_stale:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   ! node {e.node} [{e.key}] went stale (step {e.step}); still held by {', '.join(e.holders)}")
    for e in t.readmitted:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   ! detached node {e.node} [{e.key}] re-admitted to {', '.join(e.holders)} (step {e.step})")
    for e in t.cleaned_up:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   + stale guard cleaned up node {e.node} [{e.key}] (step {e.step}): removed from "
            f"{', '.join(e.removed) or 'nothing'}")
    if t.violations:
        v = t.violations[0]
        events.setdefault(v.op, []).append(
            f"   ~ first invariant violation: {v.invariant}: {v.message} (step {v.step})")
    for rec in t.ops:
        lines.append(f"{rec.index:3d} {rec.status} {describe_op(rec.op, rec.actor)}")
        lines.extend(events.get(rec.index, []))
    r = run.result
    damage = damage_lines([(d["pool"], d["slots"]) for d in r["double_frees"]],
                          {p: a["leaked"] for p, a in r["accounting"].items()})
    if run.crash is not None:
        lines.append(f"outcome: {run.crash.raised}")
        if damage:
            lines.append("damage: " + "; ".join(damage))
    else:  # "clean" read wrongly above a double free: say what did not happen, then what broke anyway
        lines.append("outcome: no assertion; " + ("damage: " + "; ".join(damage) if damage else "no damage"))
    if run.crash is not None and run.crash.stack:
        lines.append("traceback, outermost call first:")
        lines += [f"  {'  ' * i}{fn}()" for i, fn in enumerate(run.crash.stack)]
        lines.append(f"  {'  ' * len(run.crash.stack)}{run.crash.outcome}")
    used = set(t.ops and "".join(o.status for o in t.ops))
    key = [k for k in STATUS_KEY if k[0] in used]
    marks = [k for k in EVENT_KEY if any(line.startswith(f"   {k[0]} ") for line in lines)]
    lines.append("key: " + "; ".join(key + marks))
    return "\n".join(lines)
