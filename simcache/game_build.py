"""The levels page's data: every reachable state of a level, so the page plays anywhere without Python.

Vocabulary
- A level's *full map* holds every state its actors can reach: a state is a cache state after some moves, keyed
  by the explorer's canonical state key (positions included) together with the names it leaves out (node ids and
  slots, ``_names``: a learner sees them, so two states that differ only there are two states here; about 1.4 times
  the canonical count), found depth first from the start on the explorer's
  machines (``explore.machine``, here keeping KV data so every invariant is checked as in a traced run). An *edge*
  is one move and its consequence. Nothing is bounded: wherever a learner wanders, the page knows what happens.
- A state's *drawing* is the cache as the moves left it (``game_levels.state_view``), a pure function of the state,
  so a state reached by two orders is drawn once; a state where the simulated cache raised is drawn from the run of
  the first schedule found to reach it (``drawn_from``; the solution's own for the win: it is searched first), at
  the assertion: the node it raised on, with its holders. The points of a move are drawn from that schedule's run
  too (its step numbers are that run's; the page says so when the learner's schedule is another). Drawings are DOT
  text stored as *line diffs*: each distinct line once (``lines``), each state's lines as splices of the lines of
  the state it was found from. The page rebuilds a state's text and draws it with the bundled Graphviz engine
  (``@viz-js/viz``).
- A move's *reaction* is ``game_levels.reaction``'s sentence, computed from a trace of that one operation, and only
  where there can be one: a stale node appears only in a move that detached something, and a violation only where
  the set of failing invariants (checked on the state) grew; such a move is made again on a copy of the state it
  starts from with a recorder attached, as ``simulate(..., ops=(k, k + 1))`` records that operation alone (the
  invariants checked after each micro-step), and the violations counted are those not failing before it.
- *Points* (stepping inside write_backup / evict_host, levels 3 and up) are kept for the moves out of states that can
  still win, built from the full run exactly as the notebook's game builds them. Out of a state that can no longer
  win, a move runs whole, and the page says why.
- Per state: ``win``, ``over`` (the simulated cache raised), ``dist`` (moves to the nearest win, or none) and
  ``dead`` (no win is reachable).
- The *cache*: a level's data is kept in the cache folder (``$SIMCACHE_CACHE_DIR``, else the user cache folder),
  named by a fingerprint of simcache's own source, so a second export of an unchanged simcache is instant.
"""
from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path

from .crash import signature
from .explore.machine import Machine, plan_for
from .game_levels import GOAL, points, reaction, sentence, state_view
from .game_levels import level as get_level
from .invariants import failing
from .operations import describe_op
from .render.frames import tree_dot
from .scenario import load
from .scheduler import Schedule
from .simulate import resolve_flags, simulate

FORMAT = 2  # bump when the stored level data changes shape
WIN, OVER, DEAD = 1, 2, 4  # ``info`` flags
_PACKAGE = Path(__file__).resolve().parent


class Table:
    """Strings stored once: text -> index (index 0 is the empty string)."""

    def __init__(self, items=("",)) -> None:
        self.items: list[str] = list(items)
        self._index = {t: i for i, t in enumerate(self.items)}

    def add(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.items)
            self.items.append(text)
        return i


def _clone(m: Machine) -> Machine:
    """A machine's copy with its own KV data (``Machine.clone`` shares the data tensors)."""
    c = m.clone()
    for pool in c.cache.pools.all().values():
        pool.data = pool.data.clone()
        pool.rebind_view()
    return c


def _names(m: Machine) -> tuple:
    """What the canonical state key leaves out and a learner sees: every node's id and slots (the tree's, then the
    detached nodes a structure holds, with their children), the next id and each pool's free list. Two machines
    with equal keys and equal names draw and say everything alike (the key alone would merge states that differ
    only in names, and a sentence could then name a node the drawing calls otherwise)."""
    from .state import held_by

    cache = m.cache
    out: list = [cache._next_id, tuple(tuple(p.free_slots) for p in cache.pools.all().values())]
    seen: set[int] = set()
    todo = [cache.root_node] + [n for _, n in held_by(cache)]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append((n.id, *(None if v is None else tuple(v)
                             for v in (n.value, n.host_value, n.mamba_value, n.mamba_host_value))))
        todo += [n.children[k] for k in sorted(n.children, reverse=True)]
    return tuple(out)


def _splices(old: list[int], new: list[int]) -> list[list[int]]:
    """``[[position, how many to delete, ids to insert...], ...]`` turning ``old`` into ``new``, last first (so each
    position still counts in ``old`` when the page applies them in order)."""
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return [[i1, i2 - i1, *new[j1:j2]] for tag, i1, i2, j1, j2 in reversed(ops) if tag != "equal"]


def _crash_text(c) -> str:
    return f"{c.type}: {c.message} (in {c.function})"


def build_level(number: int, strings: Table | None = None, lines: Table | None = None, say=None) -> dict:
    """Every reachable state of level ``number`` with its drawing, every move with its reaction, and the points of
    the moves out of states that can still win (see the module doc). Texts go to ``strings`` and DOT lines to
    ``lines`` (shared between levels)."""
    lv = get_level(number)
    strings = Table() if strings is None else strings
    lines = Table() if lines is None else lines
    sc = load(lv.scenario)
    _, flags = resolve_flags(sc, lv.preset, None)
    plan = plan_for(sc, flags)
    actors = list(plan.actors)
    size = int(sc.config.get("page_size", 1))
    base = 1 if sc.initial else 0  # an ``initial`` injection is operation 0

    to: list[list[int]] = []  # per state, per actor: the state a move leads to (-1: the actor is done)
    said: list[list[int]] = []  # per state, per actor: the reaction's string
    draw: list[list] = []  # per state: [the state its lines are spliced from (-1: none), splices]
    info: list[list[int]] = []  # per state: [flags, dist (-1: none), crash string, stale node ids...]
    parent: list[tuple[int, int]] = []  # per state: (the state it was found from, the actor that moved)
    depth: list[int] = []
    fails: list[frozenset] = []
    own_lines: dict[int, list[int]] = {}  # the line ids of the states still on the search stack
    keys: dict = {}
    drawn_from: dict[str, str] = {}  # a crashed state, or one with points -> the schedule its drawings are runs of
    solution = list(sc.parse_schedule(lv.solution).turns)

    def add_state(m: Machine, key, src: int, actor: int, path: list[str]) -> int:
        s = len(to)
        keys[key] = s
        crash = m.crash
        if crash is None:
            dot, stale = state_view(m.cache, m.driver, size, legend=False)
        else:  # the assertion: drawn from its run, with the node it raised on and who held it
            run = simulate(sc, lv.preset, schedule=Schedule(tuple(path)))
            dot, stale = tree_dot(run, len(run.trace.steps) - 1, legend=False), ()
            drawn_from[str(s)] = " ".join(path)
        ids = [lines.add(x) for x in dot.split("\n")]
        own_lines[s] = ids
        draw.append([src, _splices(own_lines[src], ids)] if src >= 0 else [-1, [[0, 0, *ids]]])
        win = crash is not None and GOAL in signature(crash)
        info.append([(WIN if win else 0) | (OVER if crash is not None else 0), -1,
                     strings.add(_crash_text(crash)) if crash is not None else 0, *stale])
        to.append([-1] * len(actors))
        said.append([0] * len(actors))
        parent.append((src, actor))
        depth.append(len(path))
        fails.append(frozenset(failing(m.cache, list(m.driver.live.values()))))
        return s

    def fast_said(m: Machine, i: int, before: frozenset, after: frozenset) -> str:
        if not after - before:  # only a stale node can be said: a recorder over this one move, on a copy
            return sentence(_recorded(m, plan, i).went_stale, [])
        rec = _recorded(m, plan, i, invariants=True)  # the invariants checked after each of its micro-steps too
        return sentence(list(rec.went_stale), [v for v in rec.violations if v.invariant not in before])

    root = Machine(plan, data=True)
    add_state(root, (root.key(), _names(root)), -1, -1, [])
    stack: list[tuple[int, Machine, list[str]]] = [(0, root, [])]
    told = 0
    while stack:
        s, m, path = stack.pop()
        if m.crash is None:
            # the solution's next move is searched first, so its states (the win among them) are found through it
            nxt = solution[len(path)] if path == solution[: len(path)] and len(path) < len(solution) else None
            for i, a in sorted(enumerate(actors), key=lambda p: p[1] == nxt):
                if m.pos[i] >= len(plan.ops[a]):
                    continue
                c = _clone(m)
                detaches = c.cache.detach_count
                c.step(plan, i)
                key = (c.key(), _names(c))
                t = keys.get(key)
                if t is None:
                    t = add_state(c, key, s, i, path + [a])
                    stack.append((t, c, path + [a]))
                to[s][i] = t
                if c.cache.detach_count != detaches or fails[t] - fails[s]:
                    said[s][i] = strings.add(fast_said(m, i, fails[s], fails[t]))
        own_lines.pop(s, None)  # its moves are made: no later state is spliced from it
        if say is not None and len(to) >= told + 10_000:
            told = len(to) // 10_000 * 10_000
            say(f"level {number}: {told:,} states so far")
    _judge(to, info, depth)

    # the moves out of states that can still win: as the notebook's game shows them, points included
    pts: dict[str, list] = {}
    pdraw: list[list[int]] = []
    for s in range(len(to)):
        if info[s][1] < 0 or info[s][0] & OVER:
            continue
        path = _path(parent, actors, s)
        for i, a in enumerate(actors):
            if to[s][i] < 0:
                continue
            run = simulate(sc, lv.preset, schedule=Schedule(tuple(path + [a])))
            k = base + len(path)
            said[s][i] = strings.add(reaction(run, k) if k < len(run.trace.ops) else "")
            if lv.inside and k < len(run.trace.ops):
                here = []
                for p in points(run, k):
                    step = run.trace.steps[p]
                    pdraw.append([lines.add(x) for x in tree_dot(run, p, legend=False).split("\n")])
                    here.append([strings.add(f"{step.text} (in {' > '.join(step.stack[-3:])})"),
                                 strings.add(reaction(run, k, upto=p)), len(pdraw) - 1])
                if here:
                    pts[f"{s}.{i}"] = here
                    drawn_from[str(s)] = " ".join(path)
    return dict(number=lv.number, title=lv.title, goal=lv.goal, why=lv.why, hints=list(lv.hints),
                solution=lv.solution, inside=lv.inside, scenario=lv.scenario, preset=lv.preset, actors=actors,
                ops={a: [describe_op(op) for op in sc.actors[a]] for a in actors}, to=to, said=said, draw=draw,
                info=info, points=pts, pdraw=pdraw, drawn_from=drawn_from)


def _recorded(m: Machine, plan, i: int, invariants: bool = False):
    """The recorder of actor ``i``'s next move from machine ``m``: the move made on a copy with a recorder attached
    (no snapshots; with ``invariants``, every invariant is checked after each of its micro-steps), as
    ``ops_run.execute`` records the one operation of ``simulate(..., ops=(k, k + 1))`` on the state the earlier
    moves left (its ``went_stale`` events and ``violations`` are that run's trace's)."""
    from .operations import RAISED
    from .trace import Recorder

    c = _clone(m)
    rec = Recorder(snapshots=False, invariants=invariants)
    rec.replayable = True
    rec.attach(c.cache, c.driver)
    k = c.index
    rec.begin_op(k, plan.ops[plan.actors[i]][c.pos[i]], plan.actors[i])
    status = c.step(plan, i)
    if status == RAISED:
        rec.crash(c.cache.crashed)
    rec.end_op(k, status)
    return rec


def _path(parent: list[tuple[int, int]], actors: list[str], s: int) -> list[str]:
    out = []
    while parent[s][0] >= 0:
        s, i = parent[s]
        out.append(actors[i])
    return out[::-1]


def _judge(to: list[list[int]], info: list[list[int]], depth: list[int]) -> None:
    """``dist`` (moves to the nearest win, -1 for none) and the ``DEAD`` flag of every state (deepest first: every
    move advances one actor, so the map has no cycle and a move always goes one level deeper)."""
    for s in sorted(range(len(to)), key=lambda s: -depth[s]):
        flags = info[s][0]
        if flags & OVER:
            info[s][1] = 0 if flags & WIN else -1
            if not flags & WIN:
                info[s][0] |= DEAD
            continue
        ds = [info[t][1] for t in to[s] if t >= 0 and info[t][1] >= 0]
        info[s][1] = 1 + min(ds) if ds else -1
        if not ds:
            info[s][0] |= DEAD  # every move leads to a dead state, or none is left: no win from here


# --- the cache folder ---
def fingerprint() -> str:
    """A digest of simcache's own source (and this data's format): a level built by another simcache is rebuilt."""
    h = hashlib.sha256(f"format {FORMAT}".encode())
    for p in sorted(_PACKAGE.rglob("*.py")) + sorted(_PACKAGE.rglob("*.yaml")):
        h.update(str(p.relative_to(_PACKAGE)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


def cache_dir() -> Path:
    env = os.environ.get("SIMCACHE_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("simcache"))


def cached_level(number: int, say=None) -> dict:
    """``build_level``'s data with its own string and line tables, from the cache folder when an identical
    simcache built it before (else built and stored there; a cache folder that cannot be written is skipped)."""
    path = cache_dir() / "game" / f"level{number}-{fingerprint()}.json.gz"
    try:
        from .safe_io import read_bytes

        data = json.loads(gzip.decompress(read_bytes(path, 500_000_000, "cached level")))
        if say is not None:
            say(f"level {number}: {len(data['to']):,} states (from the cache, {path.parent})")
        return data
    except Exception:  # noqa: BLE001 -- missing, unreadable or damaged: build it again
        pass
    strings, lines = Table(), Table()
    data = build_level(number, strings, lines, say)
    data.update(strings=strings.items, lines=lines.items)
    if say is not None:
        say(f"level {number}: {len(data['to']):,} states")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".level", suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=6, mtime=0))
        os.replace(tmp, path)
        for old in path.parent.glob(f"level{number}-*.json.gz"):  # built by another simcache: never read again
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only or full cache folder costs only the time to build it next time
    return data


def merge(levels: list[dict]) -> dict:
    """Levels built with their own tables, as one page's data: shared ``strings`` and ``lines``, ids renumbered."""
    strings, lines = Table(), Table()
    out = []
    for lv in levels:
        sid = [strings.add(t) for t in lv["strings"]]
        lid = [lines.add(t) for t in lv["lines"]]
        d = {k: v for k, v in lv.items() if k not in ("strings", "lines")}
        d["said"] = [[sid[x] for x in row] for row in lv["said"]]
        d["info"] = [[f, dist, sid[c], *stale] for f, dist, c, *stale in lv["info"]]
        d["draw"] = [[src, [[pos, n, *(lid[x] for x in ids)] for pos, n, *ids in sp]] for src, sp in lv["draw"]]
        d["points"] = {k: [[sid[t], sid[r], j] for t, r, j in v] for k, v in lv["points"].items()}
        d["pdraw"] = [[lid[x] for x in ids] for ids in lv["pdraw"]]
        out.append(d)
    return dict(levels=out, strings=strings.items, lines=lines.items)
