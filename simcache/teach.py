"""Teaching helpers: the one-line calls the notebooks make, so that the notebooks hold narrative and calls, never logic.

Vocabulary
- A ``Lab`` (``simcache.lab``) is a small live cache with its scheduler-side driver (notebooks 1 and 2).
  ``lab.do("request 1 2 3")`` applies scheduler operations and returns a *view* of the tree, the changed nodes
  marked; ``lab.calls()`` lists the simulated calls the last operation made, nested as they ran.
- ``show(run, at)`` draws one frame of a simulated run (notebooks 3 to 6); ``at`` is a micro-step or a *moment*
  (``went-stale``, ``readmitted``, ``cleaned-up``, ``violation``, ``assertion``; ``end`` for the last step).
  ``strip(run, a, b, c)`` draws several frames in a row; ``find(run, "attach", parent=8)`` finds a micro-step.
- ``outcome_table(scenarios, presets)`` simulates every pair and tabulates the outcomes, computed live.

Every helper returns plain data or a small object that Jupyter displays (``_repr_html_`` / ``_repr_png_``, the
adapters of ``simcache.render.display``); none of them mutates a run.
"""
from __future__ import annotations

from html import escape

from . import args
from .crash import STALE, cell, said
from .errors import ArgumentError, ConfigError
from .lab import Lab
from .render.display import CSS, HTML, PNG, Text
from .render.display import columns as _columns
from .render.dot import render_svg
from .render.frames import focus_svg, frame
from .render.moments import lockstep, moments
from .scenario import load
from .simulate import simulate
from .transcript import transcript as _transcript
from .versions import preset as preset_flags

# --- notebooks 1 and 2: a live cache: ``Lab``, in ``simcache.lab`` ----------------------------------------------

# --- notebooks 3 to 6: simulated runs ----------------------------------------------------------------------------

def moment(run, kind: str, nth: int = 0) -> int:
    """The micro-step of the ``nth`` moment ``kind`` (``went-stale`` ...; ``end``: the last step; ``start``: 0)."""
    args.run(run, "moment")
    args.text(kind, "kind", "moment(run, 'went-stale')")
    args.whole(nth, "nth", example="moment(run, 'went-stale', 0)")
    if kind == "end":
        return len(run.trace.steps) - 1
    if kind == "start":
        return 0
    found = moments(run.trace)
    if kind not in found:
        raise ConfigError(f"unknown moment {kind!r}; choose from start, end, {', '.join(found)}")
    if not -len(found[kind]) <= nth < len(found[kind]):
        have = [k for k, v in found.items() if v]
        raise ConfigError(f"this run has {len(found[kind])} {kind!r} moment(s), so there is no number {nth}; "
                          f"its moments are: {', '.join(have) or 'none'}")
    return found[kind][nth]


def _step(run, at, fn: str = "show") -> int:
    """``at`` (a micro-step, from the end when negative, or a moment's name) as a micro-step of ``run``."""
    args.run(run, fn)
    n = len(run.trace.steps)
    if type(at) is int:
        if not -n <= at < n:
            raise ArgumentError(f"{fn}: this run has {n} micro-steps (0 to {n - 1}), so there is no step {at}; give "
                                f"one of them or a moment like 'went-stale' or 'end'")
        return at % n
    if not isinstance(at, str):
        raise args.fail("at", "a micro-step number or a moment like 'went-stale' or 'end'", at, f"{fn}(run, 'end')")
    return moment(run, at)


def _tree(run, step: int, legend: bool = False) -> tuple[str, str]:
    f = frame(run, step, legend=legend)
    return f.caption, focus_svg(render_svg(f.dot), f.focus)


def show(run, at: int | str = "end", *, legend: bool = True, why: bool = False) -> HTML:
    """One frame of ``run``: caption, tree, call stack and holder ledger; ``why=True`` adds the plain-English "why
    is this node stale" (``explain(run)`` prints it once as text; repeating it under every frame buries the tree)."""
    args.traced_run(run, "show")
    args.flag(legend, "legend")
    args.flag(why, "why")
    step = _step(run, at)
    f = frame(run, step, legend=legend)
    tree = f'<div class="sc-tree">{focus_svg(render_svg(f.dot), f.focus)}</div>'
    side = f.stack + f.panels[3] + (f.explanation if why else "")
    return HTML(CSS + f"<p><b>{escape(f.caption)}</b></p>" + _columns(tree, side))


def find(run, kind: str, *, node: int | None = None, after: int | str = "start", **detail) -> int:
    """The first micro-step of ``kind`` (``attach``, ``write_ack``, ``detach`` ...) after ``after``, touching
    ``node`` and matching ``detail`` (``find(run, "attach", parent=8)``: a child attached under node #8)."""
    args.text(kind, "kind", "find(run, 'attach')")
    if node is not None:
        args.whole(node, "node", 0, example="find(run, 'attach', node=8)")
    start = _step(run, after, "find")
    for s in run.trace.steps[start:]:
        if s.kind == kind and (node is None or s.node == node) and \
                all(s.detail.get(k) == v for k, v in detail.items()):
            return s.index
    want = ", ".join([f"node={node}"] * (node is not None) + [f"{k}={v}" for k, v in detail.items()])
    raise ConfigError(f"no {kind!r} micro-step{' with ' + want if want else ''} in this run after step {start}; "
                      f"check the kind against the trace's steps (run.trace.steps)")


def strip(run, *ats: int | str) -> HTML:
    """Several frames of ``run`` in a row (tree and caption only): a film strip of a stretch of the story."""
    args.traced_run(run, "strip")
    if not ats:
        raise ConfigError("strip(run, ...) needs at least one micro-step or moment to draw")
    cells = []
    for at in ats:
        caption, svg = _tree(run, _step(run, at, "strip"))
        cells.append(f"<p style='font-size:12px'><b>{escape(caption)}</b></p><div class='sc-tree'>{svg}</div>")
    return HTML(CSS + _columns(*cells))


def side_by_side(run, other, at: int | str = "end") -> HTML:
    """``run`` at ``at`` and ``other`` (same schedule, another preset) at the same operation and offset."""
    args.traced_run(run, "side_by_side")
    args.traced_run(other, "side_by_side", "other")
    a = _step(run, at, "side_by_side")
    b = lockstep(run.trace, other.trace, a)
    cells = []
    for r, s in ((run, a), (other, b)):
        caption, svg = _tree(r, s)
        cells.append(f"<p><b>{escape(caption)}</b></p><div class='sc-tree'>{svg}</div>")
    return HTML(CSS + _columns(*cells))


def explain(run, node: int | None = None) -> Text:
    """Plain English: how node ``node`` (default: the first that went stale) went stale, who held it, what came next."""
    from .render.explain import explain_stale

    args.traced_run(run, "explain")
    if node is not None:
        args.whole(node, "node", 0, example="explain(run, 8)")
    if node is None and not run.trace.went_stale:
        raise ConfigError("no node went stale in this run, so there is nothing to explain; pick a run that crashes")
    return Text(explain_stale(run.trace, run.trace.went_stale[0].node if node is None else node))


class Damage(dict):
    """``{pool: {"double_freed": [...], "leaked": [...]}}`` (compares like a dict), shown as a sentence per pool."""

    def _repr_html_(self) -> str:
        if not self:
            return "<p>No damage: no slot was freed twice and none leaked.</p>"
        items = "".join(f"<li><code>{escape(pool)}</code>: " + "; ".join(
            f"slots {v} {'freed twice' if k == 'double_freed' else 'leaked (allocated, referenced by nobody)'}"
            for k, v in d.items()) + "</li>" for pool, d in self.items())
        return f"<p><b>Damage left by the run</b></p><ul>{items}</ul>"


def damage(run) -> Damage:
    """The run's broken pools only: ``{pool: {"double_freed": [...], "leaked": [...]}}``."""
    out = Damage()
    for pool, d in args.run(run, "damage").to_json()["pools"].items():
        bad = {k: v for k, v in (("double_freed", d["double_freed"]), ("leaked", d["leaked"])) if v}
        if bad:
            out[pool] = bad
    return out


def flags(*presets: str) -> HTML:
    """The flags in which ``presets`` differ, one row per flag, one column per preset."""
    from dataclasses import fields

    if not presets:
        raise ArgumentError("flags needs at least one preset to show, like flags('pre_fix', 'followup_fix')")
    got = {p: preset_flags(p) for p in presets}
    names = [f.name for f in fields(next(iter(got.values())))]
    differ = [n for n in names if len({repr(getattr(f, n)) for f in got.values()}) > 1] or names
    head = "".join(f"<th>{escape(p)}</th>" for p in presets)
    rows = "".join(f"<tr><td><code>{escape(n)}</code></td>" + "".join(
        f"<td>{escape(str(getattr(got[p], n)))}</td>" for p in presets) + "</tr>" for n in differ)
    return HTML(CSS + f'<table class="sc-table"><tr><th>flag</th>{head}</tr>{rows}</table>')


def actors(scenario) -> Text:
    """A scenario's actors and their operations, one actor a line."""
    from .scenario import Scenario
    from .trace import describe_op

    sc = load(scenario) if isinstance(scenario, str) else scenario
    if not isinstance(sc, Scenario):
        raise args.fail("scenario", "a gallery name, a file path or a Scenario", scenario, "actors('crash_pr')")
    width = max(len(a) for a in sc.actors)
    return Text("\n".join(f"{a:<{width}}  " + "  ;  ".join(describe_op(op) for op in ops)
                          for a, ops in sc.actors.items()))


def outcome_counts(results: dict) -> HTML:
    """``{label: ExploreResult}`` -> how many runs ended each way, one column per label."""
    args.results(results, "outcome_counts")
    sigs = sorted({sig for r in results.values() for sig, _ in r.outcomes}, key=lambda x: (x != "clean", x))
    head = "".join(f"<th>{escape(label)}</th>" for label in results)
    rows = "".join(f"<tr><td>{escape(sig)}</td>" + "".join(
        f"<td>{dict(r.outcomes).get(sig, 0)}</td>" for r in results.values()) + "</tr>" for sig in sigs)
    return HTML(CSS + f'<table class="sc-table"><tr><th>how the run ended</th>{head}</tr>{rows}</table>')


def summary(found) -> Text:
    """An explorer's failure or a shrink result, in words."""
    d = found.as_dict() if callable(getattr(found, "as_dict", None)) else dict(getattr(found, "__dict__", {}))
    if not isinstance(d, dict) or not {"schedule", "steps", "preemptions", "assertion", "raised_in"} <= set(d):
        raise ArgumentError(f"summary takes an explorer's Failure or a shrink's result (with a schedule, steps, "
                            f"preemptions, assertion and raised_in), not {args.said(found)}; e.g. "
                            f"summary(explore('crash_pr').first_failure)")
    lines = [f"schedule: {d['schedule']}  ({d['steps']} operations, {d['preemptions']} preemption(s))",
             f"raised:   {said(d['assertion']) if isinstance(d['assertion'], str) else d['assertion']} in "
             f"{d['raised_in']}"]
    if d.get("actors"):
        lines.append("actors:   " + ", ".join(f"{a} ({n} op{'s' if n > 1 else ''})" for a, n in d["actors"].items()))
    if d.get("candidates"):
        lines.append(f"shrinking tried {d['candidates']} smaller candidates")
    return Text("\n".join(lines))


def transcript(run) -> Text:
    """The CLI's transcript of a run: operations, went-stale / cleaned-up moments, outcome, damage."""
    return Text(_transcript(args.run(run, "transcript")))


def figure(fig) -> PNG:
    """A matplotlib ``Figure`` (from ``simcache.render.plots``) as a displayable PNG."""
    from .render.plots import to_png

    if not callable(getattr(fig, "savefig", None)):
        raise args.fail("fig", "a matplotlib Figure (from simcache.render.plots)", fig)
    return PNG(to_png(fig))


def play(game, schedule: str):
    """Let a ``SchedulerGame`` pick the actors of ``schedule`` (``"pf R2 pf"``, ``"ctl*3"``) in turn; the last run."""
    from .scheduler import parse_schedule

    if not callable(getattr(game, "pick", None)) or not hasattr(getattr(game, "scenario", None), "lengths"):
        raise args.fail("game", "a SchedulerGame", game, "play(SchedulerGame('scenario_a'), 'mem l3 mem')")
    args.text(schedule, "schedule", "play(game, 'mem l3 mem')")
    for actor in parse_schedule(schedule, game.scenario.lengths).turns:
        game.pick(actor)
    return game.run


def stats(results: dict) -> dict[str, dict[str, int]]:
    """``{label: ExploreResult}`` -> the counts ``render.plots.exploration_stats`` draws, one group per label."""
    args.results(results, "stats")
    return {label: {"schedules run": r.schedules_run, "distinct end states": r.distinct_states,
                    "failing": r.failing, "stale-node race": races(r)} for label, r in results.items()}


def races(result) -> int:
    """How many of an exploration's runs ended in the stale-node assertion (``parent does not have child key``)."""
    args.explore_result(result, "races")
    return sum(n for sig, n in result.outcomes if STALE in sig)


# --- notebook 5: the outcome table -------------------------------------------------------------------------------

def _cell(run) -> str:
    text = cell(run.crash)
    hurt = damage(run)
    notes = [f"{k.replace('_', '-')} {p}" for p, d in hurt.items() for k in d]
    return text + (f" ({', '.join(notes)})" if notes else "")


class OutcomeTable:
    """``outcome_table(scenarios, presets)``: ``table[scenario, preset]`` is the ``Run``; ``table.cell(s, p)`` its
    text (X = ``AssertionError: parent does not have child key``); ``table.unexpected()`` lists the pairs whose
    outcome or raising function differs from the scenario file's ``expect`` (the gallery's recorded outcomes; for
    ``pre_fix``, ``merged_fix``, ``followup_fix``, ``main_2026_06`` and ``release_0_5_17`` those of SGLang's real
    code)."""

    def __init__(self, scenarios, presets, schedule: str | None = None) -> None:
        from .versions import PRESETS

        args.names(scenarios, "scenarios", "outcome_table(['scenario_a', 'crash_pr'], ['pre_fix'])")
        args.names(presets, "presets", "outcome_table(['scenario_a'], ['pre_fix', 'followup_fix'])", known=PRESETS)
        args.optional_text(schedule, "schedule", "outcome_table(['scenario_a'], ['pre_fix'], 'mem l3 mem')")
        self.scenarios, self.presets = list(scenarios), list(presets)
        self.runs = {(s, p): simulate(s, p, schedule=schedule) for s in self.scenarios for p in self.presets}

    def __getitem__(self, key):
        try:
            return self.runs[key]
        except (KeyError, TypeError):
            raise ArgumentError(f"this table has no cell {args.said(key)}; index it by (scenario, preset), one of "
                                f"{', '.join(self.scenarios)} and one of {', '.join(self.presets)}") from None

    def cell(self, scenario: str, preset: str) -> str:
        return _cell(self[scenario, preset])

    def row(self, scenario: str) -> list[str]:
        """The cells of ``scenario``, one per preset."""
        if scenario not in self.scenarios:
            raise ArgumentError(f"this table has no scenario {args.said(scenario)}; its scenarios: "
                                f"{', '.join(self.scenarios)}")
        return [self.cell(scenario, p) for p in self.presets]

    def outcomes(self, preset: str) -> dict[str, str]:
        """Scenario -> ``clean`` / ``assertion`` under ``preset``."""
        return {s: self[s, preset].outcome for s in self.scenarios}

    def unexpected(self) -> list[tuple[str, str, str]]:
        out = []
        for (s, p), run in self.runs.items():
            want = load(s).expect.get(p)
            if want is None:
                continue
            got = dict(outcome=run.outcome, raised_in=run.crash.function if run.crash else None)
            for k in ("outcome", "raised_in"):
                if k in want and want[k] != got[k]:
                    out.append((s, p, f"{k}: expected {want[k]}, got {got[k]}"))
        return out

    def _repr_html_(self) -> str:
        def td(s, p):
            run = self.runs[s, p]
            bg = "#fee2e2" if run.outcome == "assertion" else "#fef3c7" if damage(run) else "#dcfce7"
            return f'<td style="background:{bg}">{escape(self.cell(s, p))}</td>'

        head = "".join(f"<th>{escape(p)}</th>" for p in self.presets)
        rows = "".join(f"<tr><th>{escape(s)}</th>" + "".join(td(s, p) for p in self.presets) + "</tr>"
                       for s in self.scenarios)
        return (CSS + f'<table class="sc-table"><tr><th>scenario</th>{head}</tr>{rows}</table>'
                "<p>red: the simulated cache raised (X = <code>parent does not have child key</code>); "
                "amber: clean, but slots leaked or were freed twice; green: clean.</p>")


def outcome_table(scenarios, presets, schedule: str | None = None) -> OutcomeTable:
    """Simulate every scenario under every preset (live; ``schedule`` instead of each scenario's own) and tabulate."""
    return OutcomeTable(scenarios, presets, schedule)


# --- notebook 6: workload rows -------------------------------------------------------------------------------------

def rates(rows, field: str = "race_rate") -> dict[tuple[str, float], float]:
    """``simcache.workload.crash_rates`` rows -> ``{(preset, pressure): rate}`` (``race_rate``, ``crash_rate`` ...)."""
    args.rows(rows, "rates")
    fields = ("race_rate", "crash_rate", "damage_rate", "runs", "crashes", "races", "damaged")
    if field not in fields:
        raise args.fail("field", f"one of {', '.join(fields)}", field, "rates(rows, 'crash_rate')")
    return {(r["preset"], r["pressure"]): r[field] for r in rows}


def signatures(rows, preset: str) -> set[str]:
    """What raised in the workload rows of ``preset``, over all pressures."""
    args.rows(rows, "signatures")
    args.text(preset, "preset", "signatures(rows, 'pre_fix')")
    return {sig for r in rows if r["preset"] == preset for sig in r["signatures"]}


__all__ = ["HTML", "Lab", "OutcomeTable", "PNG", "Text", "actors", "damage", "explain", "figure", "find", "flags",
           "moment", "outcome_counts", "summary",
           "outcome_table", "play", "races", "rates", "show", "side_by_side", "signatures", "stats", "strip",
           "transcript"]
