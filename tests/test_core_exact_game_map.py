"""The levels page's data (game_build) compared whole against the live game: every state of levels 1 to 3, and a
sample of level 4's, holds what ``SchedulerGame`` shows after a schedule that reaches it (the drawing, rebuilt
from its line splices, the crash, the stale nodes), every move's target and sentence, and, out of the states that
can still win, every point inside write_backup / evict_host as ``step_inside`` / ``next_point`` walk them. The map
holds every reachable state (the explorer's count), judged from its ends; the cache folder returns what it stored
and rebuilds what it cannot read. The notebook game's bounded map (``structure``) keeps its own tests."""
from __future__ import annotations

import gzip
import json
import random
from collections import OrderedDict
from pathlib import Path

import pytest
from conftest import prebuilt

from simcache.game import SchedulerGame
from simcache.game_build import DEAD, OVER, WIN, Table, _judge, _splices, build_level, cached_level, merge
from simcache.game_levels import LEVELS, level
from simcache.game_map import state_of, structure
from simcache.operations import describe_op
from simcache.render.frames import tree_dot
from simcache.scenario import load

DEAD_SAID = "From here no order of the remaining moves reaches the assertion: undo, or ask for a hint."
_BUILT: dict[int, tuple[dict, Table, Table]] = {}


def built(number: int) -> tuple[dict, Table, Table]:
    """Level ``number``'s data: levels 1 to 3 built here, level 4 through the cache folder (the browser test of
    the levels page builds it too, and an unchanged simcache reuses it)."""
    if number not in _BUILT:
        if number >= 4:
            data = cached_level(number)
            _BUILT[number] = (data, Table(data["strings"]), Table(data["lines"]))
        else:
            strings, lines = Table(), Table()
            _BUILT[number] = (build_level(number, strings, lines), strings, lines)
    return _BUILT[number]


def lines_of(data: dict, s: int, memo: dict) -> list[int]:
    """A state's DOT line ids, rebuilt as the page does: its source state's, spliced."""
    if s not in memo:
        src, splices = data["draw"][s]
        out = [] if src < 0 else list(lines_of(data, src, memo))
        for pos, n, *ids in splices:
            out[pos : pos + n] = ids
        memo[s] = out
    return memo[s]


def paths(data: dict) -> dict[int, list[str]]:
    """A schedule reaching each state (breadth first over the moves)."""
    out, todo = {0: []}, [0]
    for s in todo:
        for i, t in enumerate(data["to"][s]):
            if t >= 0 and t not in out:
                out[t] = out[s] + [data["actors"][i]]
                todo.append(t)
    return out


@pytest.fixture(autouse=True, scope="module")
def shared_runs():
    """The live games of this module share their runs. A game after n moves is reached as a learner reaches it,
    picking each move in turn, and each pick simulates the whole schedule so far again, so checking every state
    and move this way would simulate every prefix once per state that extends it. A run is a function of the
    level and the schedule, and nothing a game does changes its run (drawings and points replay copies), so the
    games here take an identical schedule's run from a small memo: every pick still checks the move, says its
    reaction and looks for a dead end as it does in the notebook; only the repeated simulations are shared."""
    simulate_alone = SchedulerGame._simulate
    memo: OrderedDict = OrderedDict()

    def simulate_shared(game):
        if game.level is None or game.flags is not None:
            return simulate_alone(game)
        key = (game.level.number, tuple(game.turns))
        if key in memo:
            memo.move_to_end(key)
        else:
            memo[key] = simulate_alone(game)
            if len(memo) > 64:  # the states are checked depth first: their prefixes are the recent runs
                memo.popitem(last=False)
        return memo[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SchedulerGame, "_simulate", simulate_shared)
        yield


def game_after(number: int, turns) -> SchedulerGame:
    game = SchedulerGame.from_level(number, widgets=False)
    if number not in _MAPS:  # the level's bounded map, built once (``setdefault`` would build it every call)
        _MAPS[number] = structure(level(number))
    game._map = _MAPS[number]
    for a in turns:
        game.pick(a)
    return game


_MAPS: dict[int, dict] = {}


def check_state(number, data, strings, lines, s, turns, memo) -> None:
    game = game_after(number, turns)
    f, dist, crash, *stale = data["info"][s]
    c = game.run.crash
    assert bool(f & OVER) == (c is not None) and bool(f & WIN) == game.won
    assert strings.items[crash] == ("" if c is None else f"{c.type}: {c.message} (in {c.function})")
    assert tuple(stale) == game.stale_nodes()
    dot = "\n".join(lines.items[k] for k in lines_of(data, s, memo))
    if c is None:
        assert dot == game.tree_dot(legend=False), turns  # the state alone: the same by any schedule
        return
    # a crash is drawn from the run of the first schedule found to reach it (the page says so when it is not yours)
    own = data["drawn_from"][str(s)].split()
    assert dot == game_after(number, own).tree_dot(legend=False)
    assert game_after(number, own).run.crash == c and sorted(own) == sorted(turns)


def check_move(number, data, strings, lines, s, i, turns) -> None:
    a = data["actors"][i]
    moved = game_after(number, turns)
    moved.pick(a)
    assert strings.items[data["said"][s][i]] == moved.said.removesuffix(DEAD_SAID).rstrip(), (turns, a)
    pts = data["points"].get(f"{s}.{i}", [])
    if data["info"][s][1] < 0 or not level(number).inside:
        assert pts == []
        return
    own = data["drawn_from"][str(s)].split() if pts else turns  # the points are drawn from this run
    assert sorted(own) == sorted(turns)
    inside = game_after(number, own)
    at = inside.step_inside(a)
    assert len(pts) == len(at)
    for j, ((text, said, k), p) in enumerate(zip(pts, at, strict=True)):
        if j:
            assert inside.next_point() == p
        step = inside.run.trace.steps[p]
        assert strings.items[text] == f"{step.text} (in {' > '.join(step.stack[-3:])})"
        assert strings.items[said] == inside.said
        assert "\n".join(lines.items[x] for x in data["pdraw"][k]) == tree_dot(inside.run, p, legend=False)


@pytest.mark.parametrize("number", [1, 2, 3])
def test_every_state_and_move_of_a_small_level_is_what_the_live_game_shows(number):
    data, strings, lines = built(number)
    lv, sc, m = level(number), load(level(number).scenario), structure(level(number), 10_000)
    assert {k: data[k] for k in ("number", "title", "goal", "why", "hints", "solution", "inside", "scenario",
                                 "preset", "actors")} == dict(
        number=number, title=lv.title, goal=lv.goal, why=lv.why, hints=list(lv.hints), solution=lv.solution,
        inside=lv.inside, scenario=lv.scenario, preset=lv.preset, actors=m["actors"])
    assert data["ops"] == {a: [describe_op(op) for op in sc.actors[a]] for a in m["actors"]}
    assert m["complete"] and len(data["to"]) == {1: 3, 2: 9, 3: 225}[number]
    where = paths(data)
    assert len(where) == len(data["to"])  # every state can be reached from the start
    # every reachable cache state (the explorer's count), some of them twice: the same state under other names
    assert len({id(state_of(m, turns)) for turns in where.values()}) == len(m["states"])
    memo: dict = {}
    for s, turns in sorted(where.items()):
        check_state(number, data, strings, lines, s, turns, memo)
        ms = state_of(m, turns)
        assert (data["info"][s][1], bool(data["info"][s][0] & DEAD)) == (
            -1 if ms["dist"] is None else ms["dist"], ms["dead"] and not ms["win"])
        for i, t in enumerate(data["to"][s]):
            a = data["actors"][i]
            if t < 0:
                assert ms["crash"] is not None or turns.count(a) == len(sc.actors[a])
                continue
            assert state_of(m, turns + [a]) is m["states"][ms["edges"][a]]  # the same cache state as the map's
            check_move(number, data, strings, lines, s, i, turns)
    assert sum(len(v) for v in data["points"].values()) > 0 if lv.inside else data["points"] == {}


@pytest.fixture
def level_4(request):
    """Level 4's data, read once its background build (conftest.py) has stored it."""
    prebuilt(request.config, 4)
    return built(4)


def test_level_4_holds_every_state_and_a_sample_is_what_the_live_game_shows(level_4):
    data, strings, lines = level_4
    assert len(data["to"]) == 11545  # 8,109 cache states (the explorer's count), some under several names
    where = paths(data)
    assert len(where) == 11545  # every state can be reached from the start
    rng = random.Random(4)
    memo: dict = {}
    for s in [0] + rng.sample(sorted(where), 40):
        check_state(4, data, strings, lines, s, where[s], memo)
        for i, t in enumerate(data["to"][s]):
            if t >= 0 and rng.random() < 0.5:
                check_move(4, data, strings, lines, s, i, where[s])
    win = [s for s in where if data["info"][s][0] & WIN]
    assert len(win) == 3 and all(data["info"][s][1] == 0 for s in win)
    assert sum(data["info"][s][1] >= 0 for s in where) == 20  # the states that can still win
    solution = load("scenario_c").parse_schedule(level(4).solution).turns
    s = 0
    assert data["info"][0][1] == 8 < len(solution)  # a win two moves shorter than the hints' solution
    for a in solution:  # the solution never leaves the states that can win
        nxt = data["to"][s][data["actors"].index(a)]
        assert data["info"][nxt][1] >= data["info"][s][1] - 1 >= 0
        s = nxt
    assert data["info"][s][0] & WIN and data["drawn_from"][str(s)] == " ".join(solution)


def test_a_map_judged_from_its_ends():
    to = [[1, 2, -1], [-1, -1, -1], [-1, -1, -1], [2, -1, -1], [4, -1, -1]]
    info = [[0, -1, 0], [WIN | OVER, -1, 0], [OVER, -1, 0], [0, -1, 0], [0, -1, 0]]
    _judge(to, info, [0, 1, 1, 1, 2])
    assert [(i[1], i[0] & DEAD) for i in info] == [(1, 0), (0, 0), (-1, DEAD), (-1, DEAD), (-1, DEAD)]


def test_splices_turn_one_line_list_into_the_next():
    rng = random.Random(0)
    for _ in range(300):
        old = [rng.randrange(8) for _ in range(rng.randrange(12))]
        new = [rng.randrange(8) for _ in range(rng.randrange(12))]
        out = list(old)
        for pos, n, *ids in _splices(old, new):
            out[pos : pos + n] = ids
        assert out == new
    assert _splices([1, 2, 3], [1, 2, 3]) == [] and _splices([], [4, 5]) == [[0, 0, 4, 5]]


def test_levels_merged_into_one_pages_tables():
    a = dict(strings=["", "x", "y"], lines=["p", "q"], said=[[1, 2]], info=[[OVER, 0, 2, 7]],
             draw=[[-1, [[0, 0, 0, 1]]]], points={"0.1": [[1, 2, 0]]}, pdraw=[[1, 0]], to=[[-1, -1]])
    b = dict(strings=["", "y"], lines=["q"], said=[[0, 1]], info=[[0, -1, 0]], draw=[[-1, [[0, 0, 0]]]], points={},
             pdraw=[], to=[[-1, -1]])
    got = merge([a, b])
    assert got["strings"] == ["", "x", "y"] and got["lines"] == ["", "p", "q"]
    assert got["levels"][1] == dict(said=[[0, 2]], info=[[0, -1, 0]], draw=[[-1, [[0, 0, 2]]]], points={}, pdraw=[],
                                    to=[[-1, -1]])
    assert got["levels"][0]["points"] == {"0.1": [[1, 2, 0]]} and got["levels"][0]["info"] == [[OVER, 0, 2, 7]]
    assert got["levels"][0]["draw"] == [[-1, [[0, 0, 1, 2]]]] and got["levels"][0]["pdraw"] == [[2, 1]]


def test_the_cache_folder_returns_what_it_stored_and_rebuilds_what_it_cannot_read(tmp_path, monkeypatch):
    from simcache import game_build

    monkeypatch.setenv("SIMCACHE_CACHE_DIR", str(tmp_path))
    heard: list[str] = []
    first = cached_level(2, heard.append)
    stored = list((tmp_path / "game").iterdir())
    assert [p.name for p in stored] == [f"level2-{game_build.fingerprint()}.json.gz"]
    assert json.loads(gzip.decompress(stored[0].read_bytes())) == first
    assert first["to"] == built(2)[0]["to"] and first["strings"] == built(2)[1].items
    assert cached_level(2, heard.append) == first
    assert heard == ["level 2: 9 states", f"level 2: 9 states (from the cache, {tmp_path / 'game'})"]
    stored[0].write_bytes(b"not gzip")
    assert cached_level(2) == first and json.loads(gzip.decompress(stored[0].read_bytes())) == first
    (tmp_path / "ro").write_text("a file where the folder should be")
    monkeypatch.setenv("SIMCACHE_CACHE_DIR", str(tmp_path / "ro"))
    assert cached_level(1)["to"] == built(1)[0]["to"]  # a cache folder that cannot be made: built, not stored


def test_the_levels_asked_for():
    from simcache.errors import ConfigError
    from simcache.game_map import parse_levels

    assert parse_levels(None) == [1, 2, 3, 4, 5]
    assert parse_levels("5") == [5] and parse_levels(" 2, 4,2 ") == [2, 4] and parse_levels("05") == [5]
    for bad in ("10", "99", "0"):
        with pytest.raises(ConfigError) as e:
            parse_levels(bad)
        assert str(e.value) == f"there is no level {int(bad)}; the levels are 1 to 5"
    for bad in ("100", "x", "", "1,,2", "２", "-1", "1.5", "7" * 40):
        with pytest.raises(ConfigError) as e:
            parse_levels(bad)
        said = repr(bad) if len(repr(bad)) <= 30 else f"{repr(bad)[:30]}... ({len(repr(bad))} characters)"
        assert str(e.value) == f"--game takes a level number from 1 to 5 or a list like 2,4, not {said}", bad


def test_the_pages_data_block_is_reproducible_and_read_back():
    import base64

    from simcache.game_map import page_data_block, read_page_data

    data = {"levels": [{"number": 2}], "strings": ["", "é"], "lines": ["digraph {"]}
    block = page_data_block(data)
    raw = gzip.compress(json.dumps(data, separators=(",", ":")).encode("utf-8"), compresslevel=9, mtime=0)
    assert block == base64.b64encode(raw).decode("ascii") and base64.b64decode(block)[4:8] == b"\0\0\0\0"
    page = (f'<script>var a = 1;</script><script type="application/json" id="game-data">{block}</script>'
            '<script>document.getElementById("game-data")</script><div id="game-data"></div>')
    assert read_page_data(page) == data


def test_the_page_and_its_refusals(tmp_path):
    from simcache.errors import ConfigError
    from simcache.game_map import game_page, read_page_data, render_game
    from simcache.render.panels import PANEL_CSS

    assets = Path(game_module_file()).parent / "render"
    assert read_page_data(render_game([], cache=False)) == {"levels": [], "strings": [""], "lines": [""]}
    heard: list[str] = []
    page = render_game([1, 2], say=heard.append, cache=False)
    assert heard == ["level 1: 3 states", "level 2: 9 states"]
    script = (assets / "vendor" / "viz-global.js").read_text() + "\n" + (assets / "game_page.js").read_text()
    assert f"<script>{script}</script>" in page  # the Graphviz engine, once, then the game
    assert f"<style>{PANEL_CSS + (assets / 'game_page.css').read_text()}</style>" in page
    assert ('<nav><label>Level <select id="level"><option value="0">Level 1: D: a host leaf that is not a leaf'
            '</option><option value="1">Level 2: A: a tombstone kept alive by a host reference</option></select>'
            '</label></nav>') in page
    data = read_page_data(page)
    assert [lv["number"] for lv in data["levels"]] == [1, 2]
    with pytest.raises(ConfigError) as e:
        render_game([9])
    assert str(e.value) == "there is no level 9; the levels are 1 to 5" and e.value.__suppress_context__
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError) as e:
        game_page(tmp_path / "folder", [1])
    assert str(e.value) == f"-o must name a file, not the folder '{tmp_path / 'folder'}'; e.g. -o run.html"


def test_every_level_has_its_two_sentence_why():
    for lv in LEVELS:
        assert lv.why.count(". ") == 1 and lv.why.endswith(".") and len(lv.why) < 400, lv.number


def game_module_file() -> str:
    from simcache import game_map

    return game_map.__file__
