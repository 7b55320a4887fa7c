"""Guided tours: predict, then reveal. A tour is data (one small YAML or JSON file per scenario, ``simcache/tours/``,
read strictly by ``tour_file.py``); this module places its stops on a run, checks its claims and takes it.

Vocabulary
- A *stop* is a micro-step of the run chosen by what happens there, never by its number: ``at: {moment:
  went-stale}`` (a moment kind of ``render.moments``, ``nth`` counting from 1), ``at: {kind: attach, parent: "#8"}``
  (the first micro-step of that kind after the previous stop, optionally touching ``node`` / under ``parent`` /
  calling ``function``), or ``at: {op_end: 3}`` (the state after operation 3).
- At each stop the learner sees the frame *before* it, answers a multiple-choice question, then the stop's frame
  is revealed with the feedback (``explain``).
- Every choice carries a *claim* about the state at the stop (``{holds: {node: "#8", holder: write_backup}}``);
  exactly one choice is ``correct: true``. ``check`` evaluates the claims against the run: the correct one must
  hold and every other must not, so a tour cannot teach something the run does not do.
- A node is named ``#8`` (its id) or by its key text ``"1,2"`` (which must name one node at that step).

Claims: ``holds {node, holder}`` (a holder name contains ``holder``; ``holder: nothing`` = nobody holds it),
``attached {node, is}``, ``parent {node, is}``, ``in_children {node, of, is}``, ``exists {node, is}``,
``violated {invariant, is}`` (broken at or before the stop), ``outcome {is, raised_in}`` (the run's).
"""
from __future__ import annotations

from pathlib import Path

from .errors import ConfigError
from .render.moments import moments, op_end
from .tour_file import CLAIMS, STEP_KINDS, TOURS_DIR, Choice, Stop, Tour, TourError, from_doc, gallery, load  # noqa: F401


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


def stop_steps(tour: Tour, run) -> list[int]:
    """The micro-step of each stop, in order; a stop the run does not reach is an error naming it."""
    t = run.trace
    found, after, out = moments(t), -1, []
    for i, stop in enumerate(tour.stops, 1):
        at, step = stop.at, None
        if "moment" in at:
            steps = found[at["moment"]]
            n = at.get("nth", 1)
            step = steps[n - 1] if n <= len(steps) else None
        elif "op_end" in at:
            step = op_end(t, at["op_end"]) if at["op_end"] < len(t.ops) else None
        else:
            step = next((s.index for s in t.steps[after + 1 :] if _matches(s, at, t.snapshots.__getitem__)), None)
        if step is None:
            raise TourError(f"stop {i} ({stop.title}) is at {at}, which {run.scenario.name} under {run.preset} "
                            f"never reaches; point it at a moment the run has")
        if step < after:
            raise TourError(f"stop {i} ({stop.title}) is at step {step}, before stop {i - 1} (step {after}); "
                            f"order the stops as the run goes")
        out.append(step)
        after = step
    return out


def claim_holds(claim: dict, run, step: int) -> bool:
    """Whether ``claim`` is true of ``run``'s state after micro-step ``step``."""
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
    problems = []
    for i, (stop, step) in enumerate(zip(tour.stops, stop_steps(tour, run), strict=True), 1):
        for j, c in enumerate(stop.choices, 1):
            if claim_holds(c.claim, run, step) != c.correct:
                problems.append(f"stop {i} ({stop.title}), choice {j} ({c.text[:40]}): its claim {c.claim} is "
                                f"{'false' if c.correct else 'true'} at step {step}, but the choice is marked "
                                f"{'correct' if c.correct else 'wrong'}")
    return problems


def checked(tour: Tour | str | Path, run=None):
    """``(tour, run, stop steps)``: the tour (loaded if named), its run (simulated if not given), checked."""
    from .simulate import simulate

    tour = tour if isinstance(tour, Tour) else load(tour)
    run = simulate(tour.scenario, tour.preset) if run is None else run
    if (run.scenario.name, run.preset) != (tour.scenario, tour.preset):
        raise TourError(f"tour {tour.name} is for {tour.scenario} under {tour.preset}, not {run.scenario.name} "
                        f"under {run.preset}; take it on a run of {tour.scenario} under {tour.preset}")
    problems = check(tour, run)
    if problems:
        raise TourError(f"tour {tour.name} does not match the run: {problems[0]}")
    return tour, run, stop_steps(tour, run)


class TourModel:
    """A tour being taken: the stop, whether its answer is shown, what the learner chose (no widgets)."""

    def __init__(self, tour: Tour | str | Path, run=None) -> None:
        self.tour, self.run, self.steps = checked(tour, run)
        self.index, self.chosen = 0, None

    @property
    def stop(self) -> Stop:
        return self.tour.stops[self.index]

    @property
    def revealed(self) -> bool:
        return self.chosen is not None

    @property
    def step(self) -> int:
        """The micro-step to show: the one before the stop while the question is open, the stop's once answered."""
        s = self.steps[self.index]
        return s if self.revealed else max(0, s - 1)

    def answer(self, choice: int) -> tuple[bool, str]:
        """Choose ``choice`` (0-based): (right?, the feedback), and reveal the stop's frame."""
        if not 0 <= choice < len(self.stop.choices):
            raise ConfigError(f"choice {choice} is not one of 0..{len(self.stop.choices) - 1}")
        self.chosen = choice
        return self.feedback()

    def feedback(self) -> tuple[bool, str]:
        right = self.chosen == self.stop.answer
        lead = "Right." if right else f"Not quite: the answer is “{self.stop.choices[self.stop.answer].text}”."
        return right, f"{lead} {self.stop.explain}"

    def go(self, index: int) -> int:
        self.index, self.chosen = max(0, min(index, len(self.tour.stops) - 1)), None
        return self.index
