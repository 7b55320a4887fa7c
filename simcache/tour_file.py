"""Tour files: the vocabulary of a tour and the strict reading of one (YAML or JSON, ``simcache/tours/``).

A tour is a title, the scenario and preset it runs, an optional intro and 1 to 20 *stops*; a stop is where
(``at``), a question (``ask``), 2 to 6 *choices* (each a text and a *claim* about the state, exactly one
``correct: true``) and the feedback (``explain``). ``tour.py`` places the stops on a run and checks the claims;
docs/tours.md is the teacher's guide. Anything else in a file is refused with one sentence naming where and how.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError, SimcacheError, shown
from .invariants import INVARIANTS
from .render.moments import MOMENT_KINDS

TOURS_DIR = Path(__file__).resolve().parent / "tours"
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
