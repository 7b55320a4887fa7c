"""The game's map of each level, and the levels page.

Vocabulary
- A level's *map* is a graph: a *state* is a cache state after some turns, deduplicated by the explorer's
  canonical state key (positions included), so two orders that reach the same cache share one state. An *edge*
  is one move (an actor's next operation) and the state it reaches.
- ``structure`` builds a *bounded* map for the notebook's game (its hints and its "no order wins from here"):
  states nearest the level's solution first (the solution's own states, then one move off it, two, ...) up to
  ``limit``; levels D, A and B are complete under the default limit. Per state: ``win`` (the goal assertion
  fired), ``crash`` (any exception: the game is over), ``dist`` (moves to a win inside the map, or null) and
  ``dead`` (its whole future lies inside the map and none of it wins).
- The *levels page* (``render_game``, ``game_page``) holds every state of each level, not a bounded map: its data
  comes from ``game_build``. One HTML file, the data as gzip-compressed JSON, the bundled Graphviz engine and a
  small script (``render/game_page.js``) that walks the states; no network, works from a file.
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
from .game_levels import GOAL, LEVELS
from .game_levels import level as get_level
from .render.panels import PANEL_CSS
from .scenario import load
from .simulate import resolve_flags

DEFAULT_LIMIT = 200  # states in the notebook game's map of a level
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
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def read_page_data(html: str) -> dict:
    """The data a game page holds (for tests and tools)."""
    start = html.index('id="game-data"')
    block = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return json.loads(gzip.decompress(base64.b64decode(block)))


def render_game(numbers: list[int], say=None, cache: bool = True) -> str:
    """The HTML text of the game page for levels ``numbers`` (every state of each: ``game_build``); ``say(text)``
    hears of each level as it is done; ``cache``: keep and reuse each level's data in the cache folder."""
    from .game_build import Table, build_level, cached_level, merge
    from .render.dot import legend_dot, render_svg

    levels = []
    try:
        for n in numbers:
            if cache:
                levels.append(cached_level(n, say))
            else:
                strings, lines = Table(), Table()
                lv = build_level(n, strings, lines, say)
                levels.append(dict(lv, strings=strings.items, lines=lines.items))
                if say is not None:
                    say(f"level {n}: {len(lv['to']):,} states")
    except ScenarioError as e:
        raise ConfigError(str(e)) from None
    data = page_data_block(merge(levels))
    script = (_ASSETS / "vendor" / "viz-global.js").read_text() + "\n" + (_ASSETS / "game_page.js").read_text()
    css = PANEL_CSS + (_ASSETS / "game_page.css").read_text()
    opts = "".join(f'<option value="{i}">Level {n}: {escape(get_level(n).title)}</option>'
                   for i, n in enumerate(numbers))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>simcache: be the scheduler</title>'
            f"<style>{css}</style></head><body><h1>Be the scheduler</h1>"
            f'<p class="intro">Each button runs the next operation of one actor of SGLang\'s HiMambaRadixCache '
            f"(simulated by simcache). Every state each level can reach, in any order of moves, was computed "
            f"beforehand and is stored in this page, so it plays anywhere, offline. Make the cache reach "
            f"<code>parent does not have child key</code>.</p>"
            f'<nav><label>Level <select id="level">{opts}</select></label></nav><h2 id="title"></h2><p id="goal"></p>'
            f'<details id="legend"><summary>legend</summary>{render_svg(legend_dot())}</details>'
            f'<div id="actors"></div><div id="inside-controls"><label><input type="checkbox" id="inside"> step '
            f'inside write_backup / evict_host</label> <button id="next-point">next point</button></div>'
            f'<div id="controls"><button id="undo">undo</button><button id="reset">reset</button>'
            f'<button id="hint">hint</button><button id="reveal">reveal the answer</button></div>'
            f'<p id="status"></p><p id="why"></p><p id="said"></p><p id="hint-text"></p><p id="answer"></p>'
            f'<p id="tree-note"></p><div id="tree" class="sc-tree"></div>'
            f'<script type="application/json" id="game-data" data-encoding="gzip-base64">{data}</script>'
            f"<script>{script}</script>"
            f"</body></html>")


def game_page(path, numbers: list[int], say=None) -> Path:
    """Write the game page for levels ``numbers`` to ``path`` (safe_io's rules); returns the path."""
    from .errors import FileError, OutputError
    from .safe_io import check_file, write_file

    try:
        check_file(path)
        return write_file(path, render_game(numbers, say))
    except OutputError:  # stdout (-o -) full or closed: the command line exits 1 for it
        raise
    except FileError as e:
        raise ConfigError(str(e)) from None
