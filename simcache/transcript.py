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


def run_damage(run) -> list[str]:
    """What ``run`` left broken: ``["double free device_kv[0, 1]", "leaked host_kv[1, 2]"]``."""
    r = run.result
    return damage_lines([(d["pool"], d["slots"]) for d in r["double_frees"]],
                        {p: a["leaked"] for p, a in r["accounting"].items()})


def outcome_words(run) -> str:
    """The outcome as every view says it (the CLI's wording): ``AssertionError: … (in fn)``, ``no assertion;
    damage: double free device_kv[0, 1]``, ``no assertion; no damage``; a run narrowed by ``--ops`` says so first
    and never reads as the scenario's outcome (``narrowed to operations 6..8 …: no assertion in this window``)."""
    damage = run_damage(run)
    if run.crash is not None:
        text = run.crash.located + ("; damage: " + "; ".join(damage) if damage else "")
    else:
        text = "no assertion" + (" in this window" if getattr(run, "window", None) else "") + \
            ("; damage: " + "; ".join(damage) if damage else "; no damage")
    narrowed = getattr(run, "narrowed", None)
    return f"narrowed to {narrowed}: {text}" if narrowed else text


def transcript(run) -> str:
    """A human transcript: operations, went-stale and cleaned-up moments, first violation, outcome and damage
    (what the run left broken), then the raising call stack frame by frame, and a key to the symbols."""
    t, lines = run.trace, []
    sc = run.scenario
    lines.append(f"{sc.name} under {run.preset}  (schedule: {run.schedule})")
    if getattr(run, "narrowed", None):
        lines.append(f"NARROWED: {run.narrowed}; the outcome below is this window's, not the scenario's")
    events: dict[int, list[str]] = {}
    for e in t.went_stale:
        step = t.steps[e.step]
        cut = getattr(step, "node", None)  # the node the detach unlinked: this one, or an ancestor of it
        how = f" with its ancestor node {cut} ({step.text})" if cut is not None and cut != e.node else ""
        events.setdefault(step.op, []).append(
            f"   ! node {e.node} [{e.key}] went stale (step {e.step}){how}; still held by {', '.join(e.holders)}")
    for e in t.readmitted:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   ! detached node {e.node} [{e.key}] re-admitted to {', '.join(e.holders)} (step {e.step})")
    for e in t.cleaned_up:
        events.setdefault(t.steps[e.step].op, []).append(
            f"   + stale guard cleaned up node {e.node} [{e.key}] (step {e.step}): "
            + (f"removed from {', '.join(e.removed)}" if e.removed else "in no LRU list or leaf set; skipped"))
    if t.violations:
        v = t.violations[0]
        events.setdefault(v.op, []).append(
            f"   ~ first invariant violation: {v.invariant}: {v.message} (step {v.step})")
    for rec in t.ops:
        lines.append(f"{rec.index:3d} {rec.status} {describe_op(rec.op, rec.actor)}")
        lines.extend(events.get(rec.index, []))
    damage = run_damage(run)
    if run.crash is not None:
        lines.append(f"outcome: {run.crash.raised}")
        if damage:
            lines.append("damage: " + "; ".join(damage))
    else:  # "clean" read wrongly above a double free: say what did not happen, then what broke anyway
        lines.append("outcome: no assertion" + (" in this window (narrowed)" if getattr(run, "window", None) else "")
                     + "; " + ("damage: " + "; ".join(damage) if damage else "no damage"))
    if run.crash is not None and run.crash.stack:
        lines.append("traceback, outermost call first:")
        lines += [f"  {'  ' * i}{fn}()" for i, fn in enumerate(run.crash.stack)]
        lines.append(f"  {'  ' * len(run.crash.stack)}{run.crash.outcome}")
    used = set(t.ops and "".join(o.status for o in t.ops))
    key = [k for k in STATUS_KEY if k[0] in used]
    marks = [k for k in EVENT_KEY if any(line.startswith(f"   {k[0]} ") for line in lines)]
    lines.append("key: " + "; ".join(key + marks))
    return "\n".join(lines)


def flag_changes(run) -> dict:
    """The flags ``run`` set beyond its preset and its scenario's own flags (what ``--flag`` changed)."""
    from .simulate import resolve_flags

    _, base = resolve_flags(run.scenario, run.preset, None)
    mine, theirs = run.flags.as_dict(), base.as_dict()
    return {k: v for k, v in mine.items() if theirs.get(k) != v}


def _flag_text(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def run_label(run) -> str:
    """The preset as this run used it: ``pre_fix``, or ``pre_fix + stale_guards=true`` when ``--flag`` changed it."""
    changes = flag_changes(run)
    return run.preset + "".join(f" + {k}={_flag_text(v)}" for k, v in changes.items())


def scenario_arg(scenario) -> str | None:
    """How a command line names ``scenario``: its gallery name, else the path of the file it came from; None for a
    scenario made from data in Python (no file reproduces it)."""
    from pathlib import Path

    from .scenario import gallery, unified_gallery

    g = {**gallery(), **unified_gallery()}  # (``load`` finds a name of either)
    if scenario.name in g and scenario.source is not None:
        try:
            if Path(scenario.source).resolve() == Path(str(g[scenario.name])).resolve():
                return scenario.name
        except (OSError, ValueError):
            pass
    return scenario.source


def replay_command(run, command: str = "run", *, preset: str | None = None, ops: tuple[int, int] | None = None,
                   extra: tuple[str, ...] = ()) -> str | None:
    """The shell command that reproduces exactly ``run`` (each word quoted for a POSIX shell with ``shlex.quote``):
    its scenario (a gallery name or its file's path), preset, ``--flag`` changes, schedule and ``--ops`` window;
    ``ops`` replaces the window (the export page's "get these micro-steps" command). None when the scenario has no
    file to name."""
    import shlex

    where = scenario_arg(run.scenario)
    if where is None:
        return None
    words = ["python", "-m", "simcache", command, where, "--preset", preset or run.preset]
    for k, v in flag_changes(run).items():
        words += ["--flag", f"{k}={_flag_text(v)}"]
    if str(run.schedule) != str(run.scenario.parse_schedule(None)):
        words += ["--schedule", str(run.schedule)]
    window = ops if ops is not None else (run.window[:2] if getattr(run, "window", None) else None)
    if window is not None:
        words += ["--ops", f"{window[0]}:{window[1]}"]
    return " ".join(shlex.quote(w) for w in [*words, *extra])
