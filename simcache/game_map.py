"""The game's levels as data: the reachable states of each level, precomputed, for a page that plays without Python.

Vocabulary
- A level's *map* is a graph: a *state* is a cache state after some turns, deduplicated by the explorer's
  canonical state key (positions included), so two orders that reach the same cache share one state. An *edge*
  is one move (an actor's next operation) with its consequence: the state it reaches, the reaction sentence
  (``game_levels.reaction``) and, in levels that allow it, the points inside write_backup / evict_host with a
  drawing each.
- The map is *bounded*: states are taken nearest the level's solution first (the solution's own states, then one
  move off it, two, ...) up to ``limit``; a move out of the map says so on the page (undo). Levels D, A and B are
  complete under the default limit; C and crash_pr hold their solution and its neighbourhood.
- Per state: ``win`` (the goal assertion fired), ``crash`` (any exception: the game is over), ``dist`` (moves to a
  win inside the map, or null) and ``dead`` (its whole future lies inside the map and none of it wins). The page's
  hint uses them: the next move towards a win, or "no order wins from here: undo".
- ``game_page`` writes the page: one HTML file, the data as gzip-compressed JSON, a small script
  (``render/game_page.js``) that walks the map; no network, works from a file.
"""
from __future__ import annotations

import base64
import gzip
import heapq
import json
from html import escape
from pathlib import Path

from .errors import ConfigError, ScenarioError, shown
from .explore.machine import Machine, plan_for, signature
from .game_levels import GOAL, LEVELS, points, reaction
from .game_levels import level as get_level
from .operations import describe_op
from .render.dot import snapshot_to_dot
from .render.frames import page_size, tree_dot
from .render.panels import PANEL_CSS
from .render.svg import render_many
from .scenario import load
from .scheduler import Schedule
from .simulate import resolve_flags, simulate

DEFAULT_LIMIT = 200  # states per level in a page
MAX_LIMIT = 5000
_ASSETS = Path(__file__).resolve().parent / "render"


def structure(lv, limit: int = DEFAULT_LIMIT) -> dict:
    """The map of level ``lv`` without drawings: ``{"actors", "states": [{turns, crash, win, edges}], ...}``."""
    sc = load(lv.scenario)
    _, flags = resolve_flags(sc, lv.preset, None)
    plan = plan_for(sc, flags)
    solution = list(sc.parse_schedule(lv.solution).turns)
    idx = {a: i for i, a in enumerate(plan.actors)}
    root = Machine(plan)
    states: list[dict] = [dict(turns=[], crash=None, win=False, edges={}, off=0)]
    keys = {root.key(): 0}
    machines = {0: root}
    heap = [(0, 0, 0)]  # (moves off the solution, depth, state)
    while heap:
        off, _, s = heapq.heappop(heap)
        m = machines.pop(s)
        st = states[s]
        if m.crash is not None:
            continue
        for a in plan.actors:
            i = idx[a]
            if m.pos[i] >= len(plan.ops[a]):
                continue
            c = m.clone()
            c.step(plan, i)
            k = c.key()
            on_path = off == 0 and len(st["turns"]) < len(solution) and solution[len(st["turns"])] == a
            t = keys.get(k)
            if t is None and len(states) < limit:
                t = keys[k] = len(states)
                sig = None if c.crash is None else signature(c.crash)
                states.append(dict(turns=st["turns"] + [a], crash=sig, win=bool(sig and GOAL in sig), edges={},
                                   off=off + (0 if on_path else 1)))
                machines[t] = c
                heapq.heappush(heap, (states[t]["off"], len(st["turns"]) + 1, t))
            st["edges"][a] = -1 if t is None else t
    _judge(states)
    return dict(actors=list(plan.actors), states=states, keys=keys, plan=plan,
                complete=all(-1 not in s["edges"].values() for s in states))


def state_of(m: dict, turns) -> dict | None:
    """The map's state for the schedule ``turns`` (actor names), or None when it lies outside the map."""
    plan = m["plan"]
    idx = {a: i for i, a in enumerate(plan.actors)}
    got = m["keys"].get(Machine.replay(plan, [idx[a] for a in turns]).key())
    return None if got is None else m["states"][got]


def _judge(states: list[dict]) -> None:
    """``dist`` (moves to a win inside the map) and ``dead`` for every state (later states first: the graph is a
    DAG, each move advances one actor)."""
    for s in sorted(states, key=lambda s: -len(s["turns"])):
        if s["crash"] is not None:
            s["dist"], s["dead"] = (0 if s["win"] else None), not s["win"]
            continue
        ds = [states[t]["dist"] for t in s["edges"].values() if t >= 0 and states[t]["dist"] is not None]
        s["dist"] = 1 + min(ds) if ds else None
        s["dead"] = s["dist"] is None and all(t >= 0 and states[t]["dead"] for t in s["edges"].values())


def level_data(number: int, limit: int = DEFAULT_LIMIT, svgs: list | None = None) -> dict:
    """Everything the page needs for level ``number``: the map, each state's drawing and message, each move's
    reaction and inside-points. Drawings go to ``svgs`` as DOT text (shared between levels, deduplicated)."""
    lv = get_level(number)
    svgs = [] if svgs is None else svgs
    where: dict[str, int] = {s: i for i, s in enumerate(svgs)}
    m = structure(lv, limit)
    sc = load(lv.scenario)
    runs: dict[tuple, object] = {}

    def run_of(turns):
        key = tuple(turns)
        if key not in runs:
            runs[key] = simulate(sc, lv.preset, schedule=Schedule(key))
        return runs[key]

    pending: list[tuple[dict, str, str]] = []  # (object, field, dot) filled with an svg index after rendering

    def draw(obj: dict, field: str, dot: str) -> None:
        pending.append((obj, field, dot))

    def end_dot(run) -> str:
        t = run.trace
        return tree_dot(run, len(t.steps) - 1) if t.steps else snapshot_to_dot(t.initial, page_size=page_size(run))

    out_states = []
    for s in m["states"]:
        run = run_of(s["turns"])
        c = run.crash
        st = dict(turns=s["turns"], win=s["win"], over=s["crash"] is not None, dist=s["dist"], dead=s["dead"],
                  crash=None if c is None else f"{c.type}: {c.message} (in {c.function})",
                  stale=[e.node for e in run.trace.went_stale], edges={})
        draw(st, "svg", end_dot(run))
        base = 1 if run.trace.ops and run.trace.ops[0].actor == "init" else 0
        for a, t in s["edges"].items():
            move = run_of(s["turns"] + [a])
            k = base + len(s["turns"])
            e = dict(to=t, said=reaction(move, k) if k < len(move.trace.ops) else "", points=[])
            if lv.inside and k < len(move.trace.ops):
                for p in points(move, k):
                    step = move.trace.steps[p]
                    pt = dict(text=f"{step.text} (in {' > '.join(step.stack[-3:])})", said=reaction(move, k, upto=p))
                    draw(pt, "svg", tree_dot(move, p))
                    e["points"].append(pt)
            st["edges"][a] = e
        out_states.append(st)
    for obj, field, dot in pending:  # DOT text now; render_game draws them all with one dot process
        if dot not in where:
            where[dot] = len(svgs)
            svgs.append(dot)
        obj[field] = where[dot]
    return dict(number=lv.number, title=lv.title, goal=lv.goal, hints=list(lv.hints), solution=lv.solution,
                inside=lv.inside, scenario=lv.scenario, preset=lv.preset, actors=m["actors"],
                ops={a: [describe_op(op) for op in sc.actors[a]] for a in m["actors"]},
                complete=m["complete"], states=out_states)


def parse_levels(text: str | None) -> list[int]:
    """``None`` (every level), ``"3"`` or ``"2,4"`` -> level numbers; one sentence for anything else."""
    if text is None:
        return [lv.number for lv in LEVELS]
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 2 for p in parts):
        raise ConfigError(f"--game takes a level number from 1 to {len(LEVELS)} or a list like 2,4, not "
                          f"{shown(text, 30)}")
    out = []
    for p in parts:
        n = int(p)
        if not 1 <= n <= len(LEVELS):
            raise ConfigError(f"there is no level {n}; the levels are 1 to {len(LEVELS)}")
        if n not in out:
            out.append(n)
    return out


def page_data_block(data: dict) -> str:
    """The page's data: JSON, gzip-compressed, in base64 (``read_page_data`` reverses it)."""
    text = json.dumps(data, separators=(",", ":"))
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def read_page_data(html: str) -> dict:
    """The data a game page holds (for tests and tools)."""
    start = html.index('id="game-data"')
    block = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(gzip.decompress(base64.b64decode(block)))


def render_game(numbers: list[int], limit: int = DEFAULT_LIMIT, say=None) -> str:
    """The HTML text of the game page for levels ``numbers``; ``say(text)`` hears of each level as it is done."""
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ConfigError(f"the states per level must be a whole number from 1 to {MAX_LIMIT}, not "
                          f"{shown(limit, 20)}")
    svgs_dot: list[str] = []
    levels = []
    try:
        for n in numbers:
            levels.append(level_data(n, limit, svgs_dot))
            if say is not None:
                lv = levels[-1]
                say(f"level {n}: {len(lv['states'])} states{'' if lv['complete'] else ' (bounded)'}")
    except ScenarioError as e:
        raise ConfigError(str(e)) from None
    svgs = render_many(svgs_dot)
    data = page_data_block(dict(levels=levels, svgs=svgs))
    script = (_ASSETS / "game_page.js").read_text()
    css = (PANEL_CSS + (_ASSETS / "game_page.css").read_text())
    opts = "".join(f'<option value="{i}">Level {lv["number"]}: {escape(lv["title"])}</option>'
                   for i, lv in enumerate(levels))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>simcache: be the scheduler</title>'
            f"<style>{css}</style></head><body><h1>Be the scheduler</h1>"
            f'<p class="intro">Each button runs the next operation of one actor of SGLang\'s HiMambaRadixCache '
            f"(simulated by simcache; every move's outcome was computed beforehand and is stored in this page). "
            f"Make the cache reach <code>parent does not have child key</code>.</p>"
            f'<nav><select id="level">{opts}</select></nav><h2 id="title"></h2><p id="goal"></p>'
            f'<div id="actors"></div><div id="inside-controls"><label><input type="checkbox" id="inside"> step '
            f'inside write_backup / evict_host</label> <button id="next-point">next point</button></div>'
            f'<div id="controls"><button id="undo">undo</button><button id="reset">reset</button>'
            f'<button id="hint">hint</button><button id="reveal">reveal the answer</button></div>'
            f'<p id="status"></p><p id="said"></p><p id="hint-text"></p><p id="answer"></p>'
            f'<div id="tree" class="sc-tree"></div>'
            f'<script type="application/json" id="game-data" data-encoding="gzip-base64">{data}</script>'
            f"<script>{script}</script>"
            f"</body></html>")


def game_page(path, numbers: list[int], limit: int = DEFAULT_LIMIT, say=None) -> Path:
    """Write the game page for levels ``numbers`` to ``path`` (safe_io's rules); returns the path."""
    from .errors import FileError, OutputError
    from .safe_io import check_file, write_file

    try:
        check_file(path)
        return write_file(path, render_game(numbers, limit, say))
    except OutputError:  # stdout (-o -) full or closed: the command line exits 1 for it
        raise
    except FileError as e:
        raise ConfigError(str(e)) from None
