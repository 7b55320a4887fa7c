"""Scenarios: a cache configuration, an optional injected initial state, named actors and a schedule.

A scenario file is YAML or JSON (docs/scenarios.md, schema in docs/scenario.schema.json)::

    name: crash_pr
    title: One line
    description: What happens and why.
    config: {policy: write_through, storage: true, host_kv: 4}   # the oracle's config keys
    preset: pre_fix                 # optional default preset
    flags: {stale_guards: true}     # optional flag overrides
    initial: [{key: [1, 2], host: true, hash: true, l3_backup: true}]   # optional injected nodes
    actors:
      R1: [prefetch 1 2 9 9]
      R2: ["request 1 2 3 4"]
      ctl: [events, l3_ack]
    schedule: R1 R2 ctl*        # optional; default round-robin
    expect: {pre_fix: {outcome: assertion, raised_in: _delete_tombstone_leaf, step: 9}}

An operation is an object (``{op: request, tokens: [1, 2]}``) or a short string: ``request 1 2 3``,
``start 1 2``, ``finish``, ``evict 2``, ``evict_mamba 1``, ``evict_host 2``, ``events``, ``l3_ack``,
``write_ack``, ``load_ack``, ``prefetch 1 2 9``, ``prefetch_done 4 hit`` (or ``miss``), ``finish_oldest``
(``operations.OPS`` lists them; ``operations.parse_op`` reads the strings).
An actor's ``start`` names its request after the actor; its ``finish`` finishes that actor's oldest request.
The oracle's own ``OPS.json`` (``config`` + ``ops``) is a scenario too: one actor ``main`` running ``ops`` in order.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from .config import check_settings
from .errors import ScenarioError, ScheduleError, SimcacheError, shown
from .operations import check_op, parse_op
from .scheduler import Schedule, parse_schedule, round_robin

GALLERY = "scenarios"  # the gallery: package data, read through importlib.resources (checkout or installed)
TOP_KEYS = {"name", "title", "description", "reference", "config", "preset", "flags", "initial", "actors", "ops",
            "schedule", "expect", "about", "notes", "minimal_schedule"}
_ACTOR = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")  # used with fullmatch: '$' would let a final newline in
MAX_NAME = 64  # actor names and request ids
MAX_TEXT = {"name": 200}  # other text fields: MAX_LONG_TEXT
MAX_LONG_TEXT = 100_000
_TEXT_KEYS = ("name", "title", "description", "reference", "about", "notes", "minimal_schedule")


@dataclass(frozen=True)
class Scenario:
    name: str
    config: dict
    actors: dict[str, list[dict]]
    title: str = ""
    description: str = ""
    reference: str = ""
    preset: str | None = None
    flags: dict = field(default_factory=dict)
    initial: list[dict] = field(default_factory=list)
    schedule: str | None = None
    expect: dict = field(default_factory=dict)
    minimal_schedule: str | None = None
    source: str | None = None

    @property
    def lengths(self) -> dict[str, int]:
        return {a: len(ops) for a, ops in self.actors.items()}

    def parse_schedule(self, text: str | None = None) -> Schedule:
        text = self.schedule if text is None else text
        return round_robin(self.lengths) if text is None else parse_schedule(text, self.lengths)

    def linearize(self, schedule: Schedule) -> list[tuple[str, dict]]:
        """(actor, op) in schedule order; actor-relative ops resolved (request ids named after actors)."""
        pos = {a: 0 for a in self.actors}
        started = {a: 0 for a in self.actors}
        open_ids: dict[str, list[str]] = {a: [] for a in self.actors}
        out: list[tuple[str, dict]] = []
        if self.initial:
            out.append(("init", {"op": "inject", "nodes": self.initial}))
        for actor in schedule.turns:
            op = dict(self.actors[actor][pos[actor]])
            pos[actor] += 1
            if op["op"] in ("start", "request") and "rid" not in op:
                op["rid"] = f"{actor}.{started[actor]}" if started[actor] else actor
                started[actor] += 1
                if op["op"] == "start":
                    open_ids[actor].append(op["rid"])
            elif op["op"] == "finish" and "rid" not in op:
                op["rid"] = open_ids[actor].pop(0) if open_ids[actor] else f"{actor}?"
            out.append((actor, op))
        return out

    def as_doc(self) -> dict:
        """The scenario as a file's plain data (for writing a shrunk scenario back)."""
        d: dict[str, Any] = {"name": self.name}
        for k in ("title", "description", "reference", "preset"):
            if getattr(self, k):
                d[k] = getattr(self, k)
        d["config"] = dict(self.config)
        if self.flags:
            d["flags"] = dict(self.flags)
        if self.initial:
            d["initial"] = list(self.initial)
        d["actors"] = {a: [dict(o) for o in ops] for a, ops in self.actors.items()}
        if self.schedule:
            d["schedule"] = self.schedule
        if self.expect:
            d["expect"] = self.expect
        return d


def actor_name_problem(actor: Any) -> str | None:
    """What is wrong with an actor name, as the end of a sentence (None: nothing)."""
    if not isinstance(actor, str):
        return f"must be text, not {type(actor).__name__}; quote it"
    if not actor:
        return "is empty; name actors like R1, mem, ctl"
    if len(actor) > MAX_NAME:
        return f"is {len(actor):,} characters long; keep actor names under {MAX_NAME} characters"
    odd = next((c for c in actor if not (c.isascii() and (c.isalnum() or c in "_.-"))), None)
    if odd is not None:
        return (f"holds {odd!r}; actor names hold only ASCII letters, digits, '_', '.', '-' (like R1, mem, ctl)")
    if not _ACTOR.fullmatch(actor):
        return "must start with a letter and hold only letters, digits, '_', '.', '-'"
    return None


def _check_request_ids(actors: dict[str, list[dict]], name: str) -> None:
    """Refuse two actors that can start requests with the same id (automatic ids included), which only some
    interleavings would reach: an actor's automatic ids are its name, then NAME.1, NAME.2, ..."""
    owner: dict[str, tuple[str, bool]] = {}  # rid -> (actor, started with 'start' so it stays live)
    for actor, ops in actors.items():
        auto = 0
        for op in ops:
            if op["op"] not in ("start", "request"):
                continue
            if "rid" in op:
                rid = op["rid"]
            else:
                rid = f"{actor}.{auto}" if auto else actor
                auto += 1
            stays = op["op"] == "start"
            first = owner.get(rid)
            if first is not None and first[0] != actor and (stays or first[1]):
                if "rid" in op:
                    raise ScenarioError(f"{name}: actors {first[0]} and {actor} both start a request with rid "
                                        f"{shown(rid, 40)}, so some schedules would have two live requests with one "
                                        f"id; give each actor's requests their own rids")
                raise ScenarioError(f"{name}: actors {first[0]} and {actor} can both start a request with id "
                                    f"{shown(rid, 40)} (an actor's automatic ids are its name, then NAME.1, "
                                    f"NAME.2, ...); rename an actor or give the requests their own rids")
            if first is None or stays:
                owner[rid] = (actor, stays or (first is not None and first[1]))


def from_doc(doc: Any, name: str = "scenario", source: str | None = None) -> Scenario:
    """Validate plain data (already parsed from YAML/JSON) and build a ``Scenario``; errors say how to fix."""
    if not isinstance(doc, dict):
        if doc is None:
            raise ScenarioError(f"{name}: the scenario is empty; give it 'actors' (or the oracle's 'ops') and a "
                                f"'config'")
        raise ScenarioError(f"{name}: a scenario must be a mapping with 'actors' (or the oracle's 'ops') and a "
                            f"'config', not a {type(doc).__name__}")
    if "ops" in doc and "actors" not in doc:
        # the oracle's OPS.json as it is: like the oracle, use config and ops and ignore every other key
        doc = {k: v for k, v in doc.items() if k in ("config", "ops")
               or (k in ("name", "title", "about", "description") and isinstance(v, str))}
    unknown = sorted(map(str, set(doc) - TOP_KEYS - {"expect_oracle"}))
    if unknown:
        unknown = [u if len(u) <= 40 else shown(u, 40) for u in unknown[:5]] + (["..."] if len(unknown) > 5 else [])
        raise ScenarioError(f"{name}: unknown top-level key(s) {', '.join(unknown)}; known keys: "
                            f"{', '.join(sorted(TOP_KEYS))}")
    for k in _TEXT_KEYS:
        if k in doc and doc[k] is not None and not isinstance(doc[k], str):
            raise ScenarioError(f"{name}: '{k}' must be text, not {type(doc[k]).__name__}; quote it")
        if k == "name" and isinstance(doc.get(k), str) and not doc[k].isprintable():
            raise ScenarioError(f"{name}: 'name' must be one line of printable text, not {shown(doc[k], 40)}")
        limit = MAX_TEXT.get(k, MAX_LONG_TEXT)
        if isinstance(doc.get(k), str) and len(doc[k]) > limit:
            raise ScenarioError(f"{name}: '{k}' is {len(doc[k]):,} characters long; keep it under {limit:,}")
    try:
        cfg = check_settings(doc.get("config"))
    except ScenarioError as e:
        raise ScenarioError(f"{name}: {e}") from None
    if "actors" in doc and "ops" in doc:
        raise ScenarioError(f"{name}: give either 'actors' or 'ops' (the oracle's format), not both")
    if "ops" in doc:
        if not isinstance(doc["ops"], list):
            raise ScenarioError(f"{name}: 'ops' must be a list of operations, like [{{\"op\": \"events\"}}]")
        actors_raw: Any = {"main": doc["ops"]}
    else:
        actors_raw = doc.get("actors")
    if actors_raw is None:
        raise ScenarioError(f"{name}: the scenario has no 'actors' (or 'ops'); add e.g. "
                            f"actors: {{R1: ['request 1 2']}}")
    if not isinstance(actors_raw, dict) or not actors_raw:
        raise ScenarioError(f"{name}: 'actors' must map actor names to lists of operations, "
                            f"like {{R1: ['request 1 2']}}")
    actors: dict[str, list[dict]] = {}
    for actor, ops in actors_raw.items():
        problem = actor_name_problem(actor)
        if problem:
            raise ScenarioError(f"{name}: actor name {shown(actor, 40)} {problem}")
        if not isinstance(ops, list):
            raise ScenarioError(f"{name}: actor {actor} must have a list of operations, like "
                                f"{actor}: ['request 1 2', 'evict 2']")
        parsed = []
        for i, raw in enumerate(ops):
            op = parse_op(raw, f"{name}: actor {actor} op {i}")
            try:
                check_op(op, i, cfg["page_size"])
            except ScenarioError as e:
                raise ScenarioError(f"{name}: actor {actor}: {e}") from None
            parsed.append(op)
        actors[actor] = parsed
    _check_request_ids(actors, name)
    initial = doc.get("initial") or []
    if not isinstance(initial, list):
        raise ScenarioError(f"{name}: 'initial' must be a list of node objects like [{{key: [1, 2], host: true}}]")
    if initial:
        try:
            check_op({"op": "inject", "nodes": initial}, 0, cfg["page_size"])
        except ScenarioError as e:  # "op 0 node 1: ..." -> "initial node 1: ..."
            raise ScenarioError(f"{name}: initial {str(e).removeprefix('op 0 ')}") from None
    flags = doc.get("flags") or {}
    if not isinstance(flags, dict):
        raise ScenarioError(f"{name}: 'flags' must map flag names to values, like {{stale_guards: true}}")
    from .presets import ALL_PRESETS as PRESETS
    from .presets import UNIFIED, family_of, flag_names, preset_flags, with_flags

    preset = doc.get("preset")
    if preset is not None and (not isinstance(preset, str) or preset not in PRESETS):
        raise ScenarioError(f"{name}: unknown preset {shown(preset, 40)}; choose one of {', '.join(PRESETS)}")
    base = preset_flags(preset if preset is not None else "pre_fix")  # a scenario's flags are its family's
    known_flags = flag_names(base)
    bad = sorted(map(str, set(flags) - set(known_flags)))
    if bad:
        bad = [b if len(b) <= 40 else shown(b, 40) for b in bad[:5]]
        raise ScenarioError(f"{name}: unknown flag(s) {', '.join(bad)}; known flags: {', '.join(known_flags)}")
    try:
        with_flags(base, flags)
    except SimcacheError as e:
        msg = str(e)
        raise ScenarioError(f"{name}: {msg if msg.startswith('flag ') else 'flag ' + msg}") from None
    if preset is not None and family_of(preset) == UNIFIED and cfg["page_size"] != 1:
        raise ScenarioError(f"{name}: the unified cache's Mamba component needs page_size 1, not "
                            f"{cfg['page_size']}; set page_size: 1 in the config")
    expect = doc.get("expect") or {}
    if not isinstance(expect, dict) or not all(isinstance(v, dict) for v in expect.values()):
        raise ScenarioError(f"{name}: 'expect' must map preset names to expected results, like "
                            f"{{pre_fix: {{outcome: assertion}}}}")
    bad = sorted(map(str, set(expect) - set(PRESETS)))
    if bad:
        bad = [b if len(b) <= 40 else shown(b, 40) for b in bad[:5]]
        raise ScenarioError(f"{name}: 'expect' names unknown preset(s) {', '.join(bad)}; choose from "
                            f"{', '.join(PRESETS)}")
    schedule = doc.get("schedule")
    if isinstance(schedule, str) and not schedule.strip():
        raise ScenarioError(f"{name}: 'schedule' is empty; give actor turns like 'R1 R2*2 ctl*', or leave it out "
                            f"for round-robin")
    sc = Scenario(name=str(doc.get("name") or name), config={k: v for k, v in cfg.items()}, actors=actors,
                  title=str(doc.get("title") or doc.get("about") or ""),
                  description=str(doc.get("description") or ""), reference=str(doc.get("reference") or ""),
                  preset=preset, flags=dict(flags), initial=list(initial), schedule=schedule,
                  expect=expect, minimal_schedule=doc.get("minimal_schedule"), source=source)
    if schedule is not None:
        try:
            sc.parse_schedule(schedule)
        except ScheduleError as e:
            raise ScenarioError(f"{name}: {e}") from None
    return sc


def load_text(text: str, name: str, suffix: str) -> Any:
    from .safe_yaml import load_json, load_yaml

    return load_json(text, name) if suffix == ".json" else load_yaml(text, name)


def load_file(path: str | os.PathLike) -> Scenario:
    from .safe_io import read_bytes

    p = Path(path)
    raw = read_bytes(p)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{p.name} is not UTF-8 text; save it as UTF-8 YAML or JSON") from None
    return from_doc(load_text(text, p.name, p.suffix.lower()), name=p.stem, source=str(p))


def gallery() -> dict[str, Traversable]:
    """Gallery scenario name -> its file (a ``Path`` wherever the package is a folder, as pip installs it)."""
    folder = resources.files(__package__).joinpath(GALLERY)
    return {f.name.removesuffix(".yaml"): f for f in sorted(folder.iterdir(), key=lambda f: f.name)
            if f.name.endswith(".yaml")}


UNIFIED_GALLERY = "scenarios/unified"  # the unified cache's scenarios (presets unified_*), beside the HiMamba gallery


def unified_gallery() -> dict[str, Traversable]:
    """The unified family's gallery (``simcache/scenarios/unified/``): name -> its file. ``load`` finds these by
    name too; ``gallery()`` keeps HiMamba's, which every HiMamba preset runs."""
    folder = resources.files(__package__).joinpath(UNIFIED_GALLERY)
    return {f.name.removesuffix(".yaml"): f for f in sorted(folder.iterdir(), key=lambda f: f.name)
            if f.name.endswith(".yaml")}


def load(name_or_path: str) -> Scenario:
    """A gallery name (``crash_pr``) or a path to a YAML/JSON file."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ScenarioError(f"a scenario is a gallery name or a file path, not {type(name_or_path).__name__}; "
                            f"e.g. load('crash_pr')")
    g = {**gallery(), **unified_gallery()}
    if name_or_path in g:
        with resources.as_file(g[name_or_path]) as path:  # the file itself unless the package is zipped
            return load_file(path)
    if os.path.lexists(name_or_path):  # a dangling symlink is reported as such, not as "no such file"
        return load_file(name_or_path)
    raise ScenarioError(f"no scenario named {shown(name_or_path)} and no such file; gallery scenarios: "
                        f"{', '.join(g) or '(none)'}")
