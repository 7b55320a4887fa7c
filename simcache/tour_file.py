"""Tour files: the vocabulary of a tour and the strict reading of one (YAML or JSON, ``simcache/tours/``).

A tour is a title, the scenario and preset it runs, an optional intro, a *seed* (the choices of each stop are
shown in an order drawn from it, the same every time) and 1 to 20 *stops*; a stop is where (``at``), a question
(``ask``), 2 to 6 *choices* (each a text and a *claim* about the state, exactly one ``correct: true``; a wrong one
may carry the ``hint`` a learner who picks it gets before trying again), an optional ``hint`` for wrong picks
without their own, and the feedback (``explain``). ``tour.py`` places the stops on a run and checks the claims;
docs/tours.md is the teacher's guide. A file is read through ``safe_io`` (a regular file, at most ``MAX_BYTES``)
and every field's type is checked before it is used: anything else is refused with one sentence naming where and
how.
"""
from __future__ import annotations

import os
import random
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
MAX_BYTES = 1_000_000  # a tour file is a few KB; 20 stops of 6 choices at MAX_TEXT each stay far under this
MAX_SEED = 2**32 - 1
AT_MODES = ("moment", "kind", "op_end", "returns")
DEFAULT_HINT = "Not quite. Look at the frame again (the code pane shows what each call holds) and try another answer."


class TourError(ConfigError):
    """A tour file that is not a valid tour, or whose answers the run does not bear out."""


@dataclass(frozen=True)
class Choice:
    text: str
    claim: dict
    correct: bool
    hint: str = ""  # what a learner who picks this (wrong) choice is told before trying again


@dataclass(frozen=True)
class Stop:
    at: dict
    title: str
    ask: str
    choices: tuple[Choice, ...]
    explain: str
    hint: str = ""  # for a wrong pick whose choice has no hint of its own

    @property
    def answer(self) -> int:
        return next(i for i, c in enumerate(self.choices) if c.correct)

    def hint_for(self, choice: int) -> str:
        """What a learner who picked the wrong choice ``choice`` (an index into ``choices``) is told."""
        return self.choices[choice].hint or self.hint or DEFAULT_HINT


@dataclass(frozen=True)
class Tour:
    name: str
    title: str
    scenario: str
    preset: str
    intro: str
    stops: tuple[Stop, ...]
    seed: int = 0
    source: str = ""  # the file it was read from ("" for a tour built from data): a scenario path is relative to it

    def order(self, index: int) -> list[int]:
        """Stop ``index``'s choices in the order a learner sees them (indices into its ``choices``): a shuffle
        drawn from the tour's seed and the stop's number, so the same tour always shows the same order."""
        ids = list(range(len(self.stops[index].choices)))
        random.Random(f"simcache-tour:{self.seed}:{index}").shuffle(ids)
        return ids


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


def _one_of(v, where: str, names) -> str:
    if not isinstance(v, str) or v not in names:
        raise TourError(f"{where} is {shown(v, 40)}; choose one of {', '.join(names)}")
    return v


def _at(d, where: str) -> dict:
    d = _keys(d, where, set(), {"moment", "nth", "kind", "node", "parent", "function", "op_end", "returns"})
    modes = [k for k in AT_MODES if k in d]
    if len(modes) != 1:
        raise TourError(f"{where} needs exactly one of moment, kind, op_end or returns, e.g. {{moment: went-stale}}")
    if "moment" in d:
        _one_of(d["moment"], f"{where}.moment", MOMENT_KINDS)
    if "kind" in d:
        _one_of(d["kind"], f"{where}.kind", STEP_KINDS)
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
        d["function"] = _text(d["function"], f"{where}.function")
    if "returns" in d:
        d["returns"] = _text(d["returns"], f"{where}.returns")
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
        if not isinstance(args["is"], str) or args["is"] not in ("assertion", "clean"):
            raise TourError(f"{where}.outcome.is must be assertion or clean, not {shown(args['is'], 40)}")
        if "raised_in" in args:
            args["raised_in"] = _text(args["raised_in"], f"{where}.outcome.raised_in")
    elif name == "holds":
        args["holder"] = _text(args["holder"], f"{where}.holds.holder")
    elif name == "violated":
        _one_of(args["invariant"], f"{where}.violated.invariant", tuple(INVARIANTS))
        args["is"] = _bool(args.get("is", True), f"{where}.violated.is")
    elif "is" in args:
        args["is"] = _bool(args["is"], f"{where}.{name}.is")
    return {name: args}


def _seed(v, where: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_SEED:
        raise TourError(f"{where} must be a whole number from 0 to {MAX_SEED:,}, not {shown(v, 40)}")
    return v


def from_doc(doc: Any, name: str = "tour", source: str = "") -> Tour:
    """A ``Tour`` from plain data (a parsed tour file), validated strictly; ``source``: the file it came from."""
    if not isinstance(name, str):
        raise TourError(f"a tour's name is text, not {shown(name, 40)}")
    d = _keys(doc, name, {"title", "scenario", "preset", "stops"}, {"intro", "seed"})
    stops_doc = d["stops"]
    if not isinstance(stops_doc, list) or not 1 <= len(stops_doc) <= MAX_STOPS:
        raise TourError(f"{name}.stops must be a list of 1 to {MAX_STOPS} stops, not {shown(stops_doc, 40)}")
    stops = []
    for i, s in enumerate(stops_doc, 1):
        w = f"{name} stop {i}"
        s = _keys(s, w, {"at", "ask", "choices", "explain"}, {"title", "hint"})
        ch = s["choices"]
        if not isinstance(ch, list) or not 2 <= len(ch) <= MAX_CHOICES:
            raise TourError(f"{w}.choices must be a list of 2 to {MAX_CHOICES} choices, not {shown(ch, 40)}")
        choices = []
        for j, c in enumerate(ch, 1):
            c = _keys(c, f"{w} choice {j}", {"text", "claim"}, {"correct", "hint"})
            correct = _bool(c.get("correct", False), f"{w} choice {j}.correct")
            if correct and "hint" in c:
                raise TourError(f"{w} choice {j} is the correct one: a hint is for a wrong choice (the feedback for "
                                f"the right one is the stop's explain)")
            choices.append(Choice(_text(c["text"], f"{w} choice {j}.text"), _claim(c["claim"], f"{w} choice {j}"),
                                  correct, _text(c["hint"], f"{w} choice {j}.hint") if "hint" in c else ""))
        if sum(c.correct for c in choices) != 1:
            raise TourError(f"{w} must mark exactly one choice 'correct: true' (it marks "
                            f"{sum(c.correct for c in choices)})")
        stops.append(Stop(_at(s["at"], f"{w}.at"), _text(s.get("title", f"Stop {i}"), f"{w}.title"),
                          _text(s["ask"], f"{w}.ask"), tuple(choices), _text(s["explain"], f"{w}.explain"),
                          _text(s["hint"], f"{w}.hint") if "hint" in s else ""))
    from .presets import ALL_PRESETS as PRESETS  # a tour may take a unified preset

    preset = _one_of(d["preset"], f"{name}.preset", tuple(PRESETS))
    return Tour(name, _text(d["title"], f"{name}.title"), _text(d["scenario"], f"{name}.scenario"), preset,
                _text(d["intro"], f"{name}.intro") if "intro" in d else "", tuple(stops),
                _seed(d.get("seed", 0), f"{name}.seed"), source)


def gallery() -> dict[str, Path]:
    return {p.stem: p for p in sorted(TOURS_DIR.glob("*.yaml"))}


def load(name_or_path: str | os.PathLike) -> Tour:
    """A gallery tour by name (``crash_pr``) or a tour file (``.yaml``, ``.yml`` or ``.json``), read through
    ``safe_io`` (a regular file of at most ``MAX_BYTES``; a folder, a FIFO or a device is refused as such)."""
    from .errors import FileError
    from .safe_io import read_bytes
    from .safe_yaml import load_json, load_yaml

    if isinstance(name_or_path, Tour):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)) or not str(name_or_path):
        raise TourError(f"a tour is a gallery name or a tour file, not {shown(name_or_path, 40)}; e.g. "
                        f"load('crash_pr'); gallery tours: {', '.join(gallery())}")
    path = gallery().get(str(name_or_path)) or Path(name_or_path)
    if not os.path.lexists(path):  # a FIFO or a folder exists: safe_io says what it is
        raise TourError(f"no tour named {shown(str(name_or_path), 60)} and no such file; gallery tours: "
                        f"{', '.join(gallery())}")
    try:
        raw = read_bytes(path, MAX_BYTES, "tour file")
    except FileError as e:
        raise TourError(str(e).replace("give a YAML or JSON file", "give a YAML or JSON tour file")) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TourError(f"cannot read tour file {path.name}: it is not UTF-8 text; give a UTF-8 text file") from None
    try:
        doc = load_json(text, path.name) if path.suffix.lower() == ".json" else load_yaml(text, path.name)
    except SimcacheError as e:
        raise TourError(str(e)) from None
    return from_doc(doc, path.stem, str(path))
