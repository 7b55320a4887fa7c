"""Guided tours: predict, then reveal. A tour is data (one small YAML or JSON file per scenario, ``simcache/tours/``,
read strictly by ``tour_file.py``); this module places its stops on a run, checks its claims and takes it.

Vocabulary
- A *stop* is a micro-step of the run chosen by what happens there, never by its number: ``at: {moment:
  went-stale}`` (a moment kind of ``render.moments``, ``nth`` counting from 1), ``at: {kind: attach, parent: "#8"}``
  (the first micro-step of that kind after the previous stop, optionally touching ``node`` / under ``parent`` /
  calling ``function``), ``at: {returns: evict_host}`` (the first micro-step after a call of that function returns,
  after the previous stop) or ``at: {op_end: 3}`` (the state after operation 3).
- At each stop the learner sees the frame *before* it and answers a multiple-choice question whose choices come in
  the tour's shuffled order (``Tour.order``). A wrong pick gets its *hint* and the learner tries again; the right
  one (or giving up) reveals the stop's frame with the feedback (``explain``). The *score* counts the stops
  answered right at the first try. While a question is open the learner may look at every frame up to the one
  before it, never further (``TourModel.limit``): the outcome stays hidden until the tour reaches it.
- Every choice carries a *claim* about the state at the stop (``{holds: {node: "#8", holder: write_backup}}``);
  exactly one choice is ``correct: true``. ``check`` evaluates the claims against the run: the correct one must
  hold and every other must not, so a tour cannot teach something the run does not do.
- A node is named ``#8`` (its id) or by its key text ``"1,2"`` (which must name one node at that step).
- A tour is written for its scenario, under its preset, on the scenario's own schedule, every operation run. A run
  that differs (other flags, another schedule, a window of operations) may still bear the tour out; where it does
  not, the refusal names those differences, not the tour.

Claims: ``holds {node, holder}`` (a holder name contains ``holder``; ``holder: nothing`` = nobody holds it),
``attached {node, is}``, ``parent {node, is}``, ``in_children {node, of, is}``, ``exists {node, is}``,
``violated {invariant, is}`` (broken at or before the stop), ``outcome {is, raised_in}`` (the run's).
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError, SimcacheError, shown
from .render.moments import moments, op_end
from .tour_file import CLAIMS, STEP_KINDS, TOURS_DIR, Choice, Stop, Tour, TourError, from_doc, gallery, load  # noqa: F401


def _need(tour, run, fn: str, traced: bool = True) -> None:
    """``tour`` a ``Tour`` and ``run`` a ``Run`` (with its snapshots when ``traced``), or one sentence."""
    from . import args

    if not isinstance(tour, Tour):
        raise args.fail("tour", "a Tour (simcache.tour.load('crash_pr'))", tour, f"{fn}(load('crash_pr'), run)")
    if run is not None or traced:
        (args.traced_run if traced else args.run)(run, fn)


# --- placing stops on a run, and checking claims against it ---
def _node_id(ref: str, snap) -> int | None:
    if ref.startswith("#") and ref[1:].isdigit():
        return int(ref[1:])
    hits = [n.id for n in snap.nodes.values() if n.key_text == ref]
    if len(hits) > 1:
        raise TourError(f"node {ref!r} names {len(hits)} nodes here ({', '.join(f'#{h}' for h in hits)}); "
                        f"name it by id")
    return hits[0] if hits else None


def _matches(step, at: dict, snap_of) -> bool:
    if step.kind != at["kind"]:
        return False
    if "function" in at and step.detail.get("function") != at["function"]:
        return False
    if "node" not in at and "parent" not in at:
        return True
    snap = snap_of(step.index)  # only a key text needs the state (an id does not), and only for this kind
    if "node" in at and (step.node is None or step.node != _node_id(at["node"], snap)):
        return False
    return "parent" not in at or step.detail.get("parent") == _node_id(at["parent"], snap)


def _returns(t, name: str, after: int) -> int | None:
    """The first micro-step after ``after`` whose caller has just come back from a call of ``name``."""
    steps = t.steps
    for i in range(max(after + 1, 1), len(steps)):
        if name in steps[i - 1].stack and name not in steps[i].stack:
            return i
    return None


def _place(t, at: dict, found: dict, after: int) -> int | None:
    """The micro-step ``at`` names, searching after micro-step ``after`` where it counts from the previous stop."""
    if "moment" in at:
        steps = found[at["moment"]]
        n = at.get("nth", 1)
        return steps[n - 1] if n <= len(steps) else None
    if "op_end" in at:
        return op_end(t, at["op_end"]) if at["op_end"] < len(t.ops) else None
    if "returns" in at:
        return _returns(t, at["returns"], after)
    return next((s.index for s in t.steps[after + 1 :] if _matches(s, at, t.snapshots.__getitem__)), None)


def stop_steps(tour: Tour, run) -> list[int]:
    """The micro-step of each stop, in order. A stop the run never reaches, or reaches only before the previous
    stop, is an error naming it (and which of the two it is)."""
    _need(tour, run, "stop_steps")
    t = run.trace
    found, after, out = moments(t), -1, []
    for i, stop in enumerate(tour.stops, 1):
        at = stop.at
        step = _place(t, at, found, after)
        if step is None and after >= 0 and ("kind" in at or "returns" in at):
            earlier = _place(t, at, found, -1)  # searched from the start: is it only earlier than the last stop?
            if earlier is not None and earlier <= after:
                raise Unplaced(f"stop {i} ({stop.title}) is at {at}, which {_what(run)} reaches only before stop "
                               f"{i - 1} (first at step {earlier}, stop {i - 1} at step {after})",
                               "order the stops as the run goes")
        if step is None:
            raise Unplaced(f"stop {i} ({stop.title}) is at {at}, which {_what(run)} never reaches",
                           "point it at a moment the run has")
        if step < after:
            raise Unplaced(f"stop {i} ({stop.title}) is at step {step}, before stop {i - 1} (step {after})",
                           "order the stops as the run goes")
        out.append(step)
        after = step
    return out


def _what(run) -> str:
    return f"{run.scenario.name} under {run.preset}"


class Unplaced(TourError):
    """A stop the run does not reach where the tour puts it: ``problem``, then ``; fix``."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem, self.fix = problem, fix


def claim_holds(claim: dict, run, step: int) -> bool:
    """Whether ``claim`` is true of ``run``'s state after micro-step ``step``."""
    from . import args

    args.traced_run(run, "claim_holds")
    args.whole(step, "step", 0, len(run.trace.steps) - 1)
    if not isinstance(claim, dict) or len(claim) != 1 or next(iter(claim)) not in CLAIMS or \
            not isinstance(next(iter(claim.values())), dict):
        raise args.fail("claim", f"one claim, like {{'attached': {{'node': '#8', 'is': True}}}} (kinds: "
                                 f"{', '.join(CLAIMS)})", claim)
    (name, a), = claim.items()
    t = run.trace
    if name == "outcome":
        crash = run.crash
        return run.outcome == a["is"] and ("raised_in" not in a or (crash is not None
                                                                      and crash.function == a["raised_in"]))
    if name == "violated":
        return any(v.invariant == a["invariant"] and v.step <= step for v in t.violations) == a["is"]
    snap = t.snapshots[step]
    nid = _node_id(a["node"], snap)
    view = snap.nodes.get(nid) if nid is not None else None
    if name == "exists":
        return (view is not None) == a["is"]
    if view is None:
        return False
    if name == "holds":
        held = snap.holders.get(nid, ())
        return not held if a["holder"] == "nothing" else any(a["holder"] in h for h in held)
    if name == "attached":
        return view.attached == a["is"]
    if name == "parent":
        return view.parent is not None and view.parent == _node_id(a["is"], snap)
    of = snap.nodes.get(_node_id(a["of"], snap))
    return of is not None and (nid in of.children) == a["is"]


def check(tour: Tour, run) -> list[str]:
    """Every way the tour's answers disagree with ``run`` (empty when the tour is true of the run)."""
    _need(tour, run, "check")
    problems = []
    for i, (stop, step) in enumerate(zip(tour.stops, stop_steps(tour, run), strict=True), 1):
        for j, c in enumerate(stop.choices, 1):
            if claim_holds(c.claim, run, step) != c.correct:
                problems.append(f"stop {i} ({stop.title}), choice {j} ({c.text[:40]}): its claim {c.claim} is "
                                f"{'false' if c.correct else 'true'} at step {step}, but the choice is marked "
                                f"{'correct' if c.correct else 'wrong'}")
    return problems


def tour_scenario(tour: Tour):
    """The scenario the tour names: a gallery name, or a scenario file (a relative path is read beside the tour
    file first, then from the working folder)."""
    from .scenario import gallery as scenarios
    from .scenario import load as load_scenario

    _need(tour, None, "tour_scenario", traced=False)
    ref = tour.scenario
    if ref not in scenarios() and tour.source and not os.path.isabs(ref):
        beside = Path(tour.source).parent / ref
        if os.path.lexists(beside):
            ref = str(beside)
    try:
        return load_scenario(ref)
    except SimcacheError as e:
        raise TourError(f"tour {tour.name} names scenario {shown(tour.scenario, 60)}, which cannot be loaded: "
                        f"{e}") from None


def _same_scenario(a, b) -> bool:
    """Whether two loaded scenarios are the same one: the same file, or the same name and content."""
    if a.source and b.source and os.path.realpath(a.source) == os.path.realpath(b.source):
        return True
    return a.name == b.name and (a.config, a.actors, a.initial, a.flags) == (b.config, b.actors, b.initial, b.flags)


def changes(tour: Tour, run) -> list[str]:
    """How ``run`` differs from the run the tour was written for (its scenario under its preset, on the scenario's
    own schedule, every operation run): one phrase per difference, naming the option that makes it."""
    from .simulate import resolve_flags

    _need(tour, run, "changes", traced=False)
    out = []
    _, base = resolve_flags(run.scenario, tour.preset, None)
    mine, theirs = run.flags.as_dict(), base.as_dict()
    flipped = [f"{k}={mine[k]}" for k in mine if mine[k] != theirs.get(k)]
    if flipped:
        out.append(f"--flag {' '.join(flipped)}")
    own = run.scenario.parse_schedule(None)
    if tuple(run.schedule.turns) != tuple(own.turns):
        out.append(f"--schedule '{run.schedule}' (not the scenario's own)")
    window = getattr(run, "window", None)
    ops = run.trace.ops
    total = len(run.scenario.linearize(run.schedule))
    if window is None and ops and ops[0].index > 0:
        window = (ops[0].index, ops[-1].index + 1)
    elif window is None and ops and run.crash is None and ops[-1].index + 1 < total:
        window = (ops[0].index, ops[-1].index + 1)
    if window is not None and tuple(window) != (0, total):
        out.append(f"--ops {window[0]}:{window[1]} (operations {window[0]}..{window[1] - 1} of {total} only)")
    return out


def checked(tour: Tour | str | Path, run=None):
    """``(tour, run, stop steps)``: the tour (loaded if named), its run (simulated if not given), checked. A refusal
    blames the tour only where the tour is wrong: a run of another scenario or preset is named as such, and a run
    changed from the tour's own (flags, schedule, a window of operations) that does not bear the tour out is
    named with its changes."""
    from .simulate import simulate

    tour = tour if isinstance(tour, Tour) else load(tour)
    if run is not None:
        _need(tour, run, "TourModel")
    if run is None:
        run = simulate(tour_scenario(tour), tour.preset)
    elif not _same_scenario(run.scenario, tour_scenario(tour)) or run.preset != tour.preset:
        raise TourError(f"tour {tour.name} is for {tour.scenario} under {tour.preset}, not {_what(run)}; take it "
                        f"on a run of {tour.scenario} under {tour.preset}")
    made, fix = changes(tour, run), ""
    try:
        steps = stop_steps(tour, run)
        problems = check(tour, run)
    except Unplaced as e:
        problems, fix = [e.problem.replace(f"which {_what(run)} ", "which this run ")], f"; {e.fix}"
    if problems:
        if made and _holds_unchanged(tour):
            options = sorted({m.split()[0] for m in made})
            raise TourError(f"tour {tour.name} holds on {tour.scenario} under {tour.preset}, but not on this run, "
                            f"which {' and '.join(made)} changed: {problems[0]}; take the tour without "
                            f"{' and '.join(options)}")
        raise TourError(f"tour {tour.name} does not match the run: {problems[0]}{fix}")
    return tour, run, steps


def _holds_unchanged(tour: Tour) -> bool:
    """Whether the tour is true of its own run (its scenario under its preset, nothing changed)."""
    from .simulate import simulate

    own = simulate(tour_scenario(tour), tour.preset)
    try:
        stop_steps(tour, own)
    except TourError:
        return False
    return not check(tour, own)


class TourModel:
    """A tour being taken (no widgets): the stop shown, each stop's choices in the learner's order, the wrong picks
    so far, which stops are solved, the score and the furthest micro-step the learner may look at.

    Choices are named by their *position* in the shuffled order (``choices``: the stop's ``Choice``s as shown)."""

    def __init__(self, tour: Tour | str | Path, run=None) -> None:
        self.tour, self.run, self.steps = checked(tour, run)
        n = len(self.tour.stops)
        self.orders = [self.tour.order(i) for i in range(n)]
        self.index = 0
        self.wrong: list[list[int]] = [[] for _ in range(n)]  # positions picked wrong, per stop, in order
        self.solved: list[bool] = [False] * n  # answered right (at any try) or given up
        self.gave_up: list[bool] = [False] * n

    # --- the stop shown ---
    @property
    def stop(self) -> Stop:
        return self.tour.stops[self.index]

    @property
    def choices(self) -> list[Choice]:
        """The current stop's choices in the order the learner sees them."""
        return [self.stop.choices[k] for k in self.orders[self.index]]

    @property
    def answer_position(self) -> int:
        """Where the right choice is shown (0-based) at the current stop."""
        return self.orders[self.index].index(self.stop.answer)

    @property
    def revealed(self) -> bool:
        return self.solved[self.index]

    @property
    def chosen(self) -> int | None:
        """The position that solved the current stop (the right one once revealed), else None."""
        return self.answer_position if self.revealed else None

    @property
    def step(self) -> int:
        """The micro-step to show: the one before the stop while the question is open, the stop's once answered."""
        s = self.steps[self.index]
        return s if self.revealed else max(0, s - 1)

    @property
    def limit(self) -> int | None:
        """The last micro-step the learner may look at: the one before the first unsolved stop, or the last solved
        stop's own frame where two stops share a frame (None when every stop is solved: the whole run is open)."""
        k = next((i for i, done in enumerate(self.solved) if not done), None)
        if k is None:
            return None
        return max(0, self.steps[k] - 1, self.steps[k - 1] if k else 0)

    @property
    def done(self) -> bool:
        return all(self.solved)

    # --- answering ---
    def answer(self, choice: int) -> tuple[bool, str]:
        """Pick the choice shown at position ``choice`` (0-based): ``(right?, what to show)``. A right pick reveals
        the stop's frame with the feedback; a wrong one gives its hint, and the learner tries again."""
        n = len(self.stop.choices)
        if type(choice) is not int or not 0 <= choice < n:
            raise ConfigError(f"choice {shown(choice, 20)} is not one of 0..{n - 1}")
        if self.revealed:
            raise ConfigError(f"stop {self.index + 1} is already answered; go to another stop")
        if choice in self.wrong[self.index]:
            raise ConfigError(f"choice {choice} was already tried at this stop; pick another")
        if choice != self.answer_position:
            self.wrong[self.index].append(choice)
            return False, self.stop.hint_for(self.orders[self.index][choice])
        self.solved[self.index] = True
        return True, self.feedback()

    def give_up(self) -> str:
        """Reveal the current stop's answer without a pick (it scores nothing)."""
        if not self.revealed:
            self.solved[self.index] = self.gave_up[self.index] = True
        return self.feedback()

    def feedback(self) -> str:
        """The feedback of a solved stop: "Right." (or the answer, when it took the learner more than one try or
        they gave up) and the stop's explanation."""
        right = self.stop.choices[self.stop.answer].text
        if self.gave_up[self.index]:
            lead = f"The answer is “{right}”."
        elif self.wrong[self.index]:
            lead = f"Right, at try {len(self.wrong[self.index]) + 1}: “{right}”."
        else:
            lead = "Right."
        return f"{lead} {self.stop.explain}"

    @property
    def score(self) -> int:
        """Stops answered right at the first try."""
        return sum(s and not w and not g for s, w, g in zip(self.solved, self.wrong, self.gave_up, strict=True))

    def score_text(self) -> str:
        n = len(self.tour.stops)
        answered = sum(self.solved)
        return f"Score: {self.score} of {answered} answered right at the first try ({n} stops in all)."

    def go(self, index: int) -> int:
        """Show stop ``index`` (clamped); a stop past the first unsolved one waits for it (the tour goes in
        order, so no later frame is ever shown before its question)."""
        if type(index) is not int:
            raise ConfigError(f"a stop is a whole number, not {shown(index, 20)}")
        first_open = next((i for i, done in enumerate(self.solved) if not done), len(self.solved) - 1)
        self.index = max(0, min(index, first_open, len(self.tour.stops) - 1))
        return self.index
