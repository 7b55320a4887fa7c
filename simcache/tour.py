"""Guided tours: predict, then reveal. A tour is data (one small YAML or JSON file per scenario, ``assets/tours/``).

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

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError, SimcacheError, shown
from .invariants import INVARIANTS
from .render.moments import MOMENT_KINDS, moments, op_end

TOURS_DIR = Path(__file__).resolve().parent.parent / "assets" / "tours"
STEP_KINDS = ("call", "split", "attach", "detach", "alloc", "free", "double_free", "alloc_fail", "set_add",
              "set_discard", "lru_insert", "lru_remove", "lock", "host_ref", "backup", "write_ack", "load_ack",
              "storage_ack", "cleaned_up", "assertion")
CLAIMS = {"holds": ("node", "holder"), "attached": ("node", "is"), "parent": ("node", "is"),
          "in_children": ("node", "of", "is"), "exists": ("node", "is"), "violated": ("invariant", "is"),
          "outcome": ("is", "raised_in")}
_OPTIONAL = {"violated": {"is"}, "outcome": {"raised_in"}}
MAX_STOPS, MAX_CHOICES, MAX_TEXT = 20, 6, 2000


class TourError(ConfigError):
    """A tour file that is not a valid tour, or whose answers the run does not bear out."""


@dataclass(frozen=True)
class Choice:
    text: str
    claim: dict
    correct: bool


@dataclass(frozen=True)
class Stop:
    at: dict
    title: str
    ask: str
    choices: tuple[Choice, ...]
    explain: str

    @property
    def answer(self) -> int:
        return next(i for i, c in enumerate(self.choices) if c.correct)


@dataclass(frozen=True)
class Tour:
    name: str
    title: str
    scenario: str
    preset: str
    intro: str
    stops: tuple[Stop, ...]


# --- reading a tour file, strictly ---
def _text(v, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise TourError(f"{where} must be non-empty text, not {shown(v, 40)}")
    if len(v) > MAX_TEXT:
        raise TourError(f"{where} is {len(v):,} characters long; keep it under {MAX_TEXT:,}")
    return v.strip()


def _keys(d, where: str, required: set[str], optional: set[str] = frozenset()) -> dict:
    if not isinstance(d, dict):
        raise TourError(f"{where} must be a mapping, not {shown(d, 40)}")
    unknown = sorted(str(k) for k in d if k not in required | optional)
    if unknown:
        raise TourError(f"{where} has unknown field {shown(unknown[0], 40)}; its fields are "
                        f"{', '.join(sorted(required | optional))}")
    missing = sorted(required - set(d))
    if missing:
        raise TourError(f"{where} is missing {missing[0]!r}; its fields are {', '.join(sorted(required | optional))}")
    return d


def _node_ref(v, where: str) -> str:
    if isinstance(v, int) and not isinstance(v, bool):
        v = f"#{v}"
    if not isinstance(v, str) or not v or len(v) > 200:
        raise TourError(f"{where} must name a node as '#8' or by its key text like '1,2', not {shown(v, 40)}")
    return v


def _bool(v, where: str) -> bool:
    if not isinstance(v, bool):
        raise TourError(f"{where} must be true or false, not {shown(v, 40)}")
    return v


def _at(d, where: str) -> dict:
    d = _keys(d, where, set(), {"moment", "nth", "kind", "node", "parent", "function", "op_end"})
    modes = [k for k in ("moment", "kind", "op_end") if k in d]
    if len(modes) != 1:
        raise TourError(f"{where} needs exactly one of moment, kind or op_end, e.g. {{moment: went-stale}}")
    if "moment" in d and d["moment"] not in MOMENT_KINDS:
        raise TourError(f"{where}.moment is {shown(d['moment'], 40)}; choose one of {', '.join(MOMENT_KINDS)}")
    if "kind" in d and d["kind"] not in STEP_KINDS:
        raise TourError(f"{where}.kind is {shown(d['kind'], 40)}; choose one of {', '.join(STEP_KINDS)}")
    for k in ("nth", "op_end"):
        if k in d and (not isinstance(d[k], int) or isinstance(d[k], bool) or not (k == "nth") <= d[k] < 10**6):
            raise TourError(f"{where}.{k} must be a whole number{' from 1' if k == 'nth' else ''}, not "
                            f"{shown(d[k], 40)}")
    if "nth" in d and "moment" not in d:
        raise TourError(f"{where}.nth counts moments; with kind it is the first one after the previous stop")
    if any(k in d for k in ("node", "parent", "function")) and "kind" not in d:
        raise TourError(f"{where}: node, parent and function narrow a kind, e.g. {{kind: attach, parent: '#8'}}")
    for k in ("node", "parent"):
        if k in d:
            d[k] = _node_ref(d[k], f"{where}.{k}")
    if "function" in d:
        _text(d["function"], f"{where}.function")
    return dict(d)


def _claim(d, where: str) -> dict:
    if not isinstance(d, dict) or len(d) != 1:
        raise TourError(f"{where} must be one claim like {{holds: {{node: '#8', holder: write_backup}}}}; claims: "
                        f"{', '.join(CLAIMS)}")
    (name, args), = d.items()
    if name not in CLAIMS:
        raise TourError(f"{where} names unknown claim {shown(name, 40)}; claims: {', '.join(CLAIMS)}")
    opt = _OPTIONAL.get(name, set())
    args = dict(_keys(args, f"{where}.{name}", set(CLAIMS[name]) - opt, opt))
    for k in ("node", "of"):
        if k in args:
            args[k] = _node_ref(args[k], f"{where}.{name}.{k}")
    if name == "parent":
        args["is"] = _node_ref(args["is"], f"{where}.parent.is")
    elif name == "outcome":
        if args["is"] not in ("assertion", "clean"):
            raise TourError(f"{where}.outcome.is must be assertion or clean, not {shown(args['is'], 40)}")
    elif name == "holds":
        _text(args["holder"], f"{where}.holds.holder")
    elif name == "violated":
        if args["invariant"] not in INVARIANTS:
            raise TourError(f"{where}.violated.invariant is {shown(args['invariant'], 40)}; choose one of "
                            f"{', '.join(INVARIANTS)}")
        args["is"] = _bool(args.get("is", True), f"{where}.violated.is")
    elif "is" in args:
        args["is"] = _bool(args["is"], f"{where}.{name}.is")
    return {name: args}


def from_doc(doc: Any, name: str = "tour") -> Tour:
    """A ``Tour`` from plain data (a parsed tour file), validated strictly."""
    d = _keys(doc, name, {"title", "scenario", "preset", "stops"}, {"intro"})
    stops_doc = d["stops"]
    if not isinstance(stops_doc, list) or not 1 <= len(stops_doc) <= MAX_STOPS:
        raise TourError(f"{name}.stops must be a list of 1 to {MAX_STOPS} stops, not {shown(stops_doc, 40)}")
    stops = []
    for i, s in enumerate(stops_doc, 1):
        w = f"{name} stop {i}"
        s = _keys(s, w, {"at", "ask", "choices", "explain"}, {"title"})
        ch = s["choices"]
        if not isinstance(ch, list) or not 2 <= len(ch) <= MAX_CHOICES:
            raise TourError(f"{w}.choices must be a list of 2 to {MAX_CHOICES} choices, not {shown(ch, 40)}")
        choices = []
        for j, c in enumerate(ch, 1):
            c = _keys(c, f"{w} choice {j}", {"text", "claim"}, {"correct"})
            choices.append(Choice(_text(c["text"], f"{w} choice {j}.text"), _claim(c["claim"], f"{w} choice {j}"),
                                  _bool(c.get("correct", False), f"{w} choice {j}.correct")))
        if sum(c.correct for c in choices) != 1:
            raise TourError(f"{w} must mark exactly one choice 'correct: true' (it marks "
                            f"{sum(c.correct for c in choices)})")
        stops.append(Stop(_at(s["at"], f"{w}.at"), _text(s.get("title", f"Stop {i}"), f"{w}.title"),
                          _text(s["ask"], f"{w}.ask"), tuple(choices), _text(s["explain"], f"{w}.explain")))
    from .versions import PRESETS

    if d["preset"] not in PRESETS:
        raise TourError(f"{name}.preset is {shown(d['preset'], 40)}; choose one of {', '.join(PRESETS)}")
    return Tour(name, _text(d["title"], f"{name}.title"), _text(d["scenario"], f"{name}.scenario"), d["preset"],
                _text(d["intro"], f"{name}.intro") if "intro" in d else "", tuple(stops))


def gallery() -> dict[str, Path]:
    return {p.stem: p for p in sorted(TOURS_DIR.glob("*.yaml"))}


def load(name_or_path: str | Path) -> Tour:
    """A gallery tour by name (``crash_pr``) or a tour file (``.yaml``, ``.yml`` or ``.json``)."""
    from .safe_yaml import load_json, load_yaml

    path = gallery().get(str(name_or_path)) or Path(name_or_path)
    if not path.is_file():
        raise TourError(f"no tour named {shown(str(name_or_path), 60)} and no such file; gallery tours: "
                        f"{', '.join(gallery())}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TourError(f"cannot read tour file {path.name}: {e.__class__.__name__}; give a UTF-8 text file") from None
    try:
        doc = load_json(text, path.name) if path.suffix == ".json" else load_yaml(text, path.name)
    except SimcacheError as e:
        raise TourError(str(e)) from None
    return from_doc(doc, path.stem)


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
