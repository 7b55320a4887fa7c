"""game_map.level_data compared whole against the live game: every state of a level's precomputed map says what
``SchedulerGame`` shows after the same moves (the crash, the stale nodes, the drawing), every move's reaction and
target, and for levels that step inside, every point's text, reaction and drawing as ``step_inside`` /
``next_point`` walk them; the drawings are shared between levels, each DOT text once."""
from __future__ import annotations

from pathlib import Path

import pytest

from simcache.game import SchedulerGame
from simcache.game_levels import level
from simcache.game_map import level_data, state_of, structure
from simcache.operations import describe_op
from simcache.render.dot import snapshot_to_dot
from simcache.render.frames import page_size, tree_dot
from simcache.scenario import load
from simcache.scheduler import Schedule
from simcache.simulate import simulate

DEAD = "From here no order of the remaining moves reaches the assertion: undo, or ask for a hint."


_MAPS: dict[int, dict] = {}


def game_after(number: int, turns) -> SchedulerGame:
    game = SchedulerGame.from_level(number, widgets=False)
    if number not in _MAPS:
        _MAPS[number] = structure(level(number))
    game._map = _MAPS[number]  # the level's whole map, which each game would otherwise build for itself
    for a in turns:
        game.pick(a)
    return game


def said_without_dead_end(said: str) -> str:
    return said.removesuffix(DEAD).rstrip()


@pytest.mark.parametrize("number, limit", [(1, 200), (2, 200), (3, 40), (4, 12)])
def test_each_state_and_move_of_the_map_is_what_the_live_game_shows(number, limit):
    svgs: list[str] = ["a drawing of an earlier level"]
    data = level_data(number, limit, svgs)
    lv, sc, m = level(number), load(level(number).scenario), structure(level(number), limit)
    assert {k: data[k] for k in ("number", "title", "goal", "hints", "solution", "inside", "scenario", "preset",
                                 "actors", "complete")} == dict(
        number=number, title=lv.title, goal=lv.goal, hints=list(lv.hints), solution=lv.solution, inside=lv.inside,
        scenario=lv.scenario, preset=lv.preset, actors=m["actors"], complete=m["complete"])
    assert data["ops"] == {a: [describe_op(op) for op in sc.actors[a]] for a in m["actors"]}
    assert svgs[0] == "a drawing of an earlier level" and len(set(svgs)) == len(svgs)
    assert len(data["states"]) == len(m["states"])
    seen_points = 0
    for st, ms in zip(data["states"], m["states"], strict=True):
        game = game_after(number, st["turns"])
        run, c = game.run, game.run.crash
        assert {k: st[k] for k in ("turns", "win", "dist", "dead")} == {k: ms[k] for k in ("turns", "win", "dist",
                                                                                          "dead")}
        assert st["over"] == (ms["crash"] is not None) == (c is not None)
        assert st["crash"] == (None if c is None else f"{c.type}: {c.message} (in {c.function})")
        assert st["stale"] == [e.node for e in run.trace.went_stale]
        drawn = simulate(sc, lv.preset, schedule=Schedule(tuple(st["turns"])))  # with snapshots, to draw
        t = drawn.trace
        assert svgs[st["svg"]] == (tree_dot(drawn, len(t.steps) - 1) if t.steps else
                                   snapshot_to_dot(t.initial, page_size=page_size(drawn)))
        assert set(st["edges"]) == set(ms["edges"])
        for a, e in st["edges"].items():
            moved = game_after(number, st["turns"])
            moved.pick(a)
            assert e["said"] == said_without_dead_end(moved.said), (st["turns"], a)
            assert e["to"] == ms["edges"][a]  # the state the move reaches (one per cache state), or -1 past the limit
            if e["to"] >= 0:  # the map's state for those moves, whatever order first reached it
                assert state_of(m, st["turns"] + [a]) is m["states"][e["to"]]
            if not lv.inside:
                assert e["points"] == []
                continue
            inside = game_after(number, st["turns"])
            pts = inside.step_inside(a)
            drawn = simulate(sc, lv.preset, schedule=Schedule(tuple(st["turns"] + [a])))  # with snapshots
            assert len(e["points"]) == len(pts)
            for i, (pt, p) in enumerate(zip(e["points"], pts, strict=True)):
                if i:
                    assert inside.next_point() == p
                step = inside.run.trace.steps[p]
                assert pt["text"] == f"{step.text} (in {' > '.join(step.stack[-3:])})"
                assert pt["said"] == inside.said
                assert svgs[pt["svg"]] == tree_dot(drawn, p)
                seen_points += 1
    assert (seen_points > 0) == lv.inside


def test_a_map_judged_from_its_ends():
    from simcache.game_map import _judge

    states = [dict(turns=[], crash=None, win=False, edges={"a": 1, "b": 2, "c": -1}),
              dict(turns=["a"], crash="AssertionError: goal", win=True, edges={}),
              dict(turns=["b"], crash="AssertionError: other", win=False, edges={}),
              dict(turns=["c"], crash=None, win=False, edges={"a": 2}),
              dict(turns=["d"], crash=None, win=False, edges={"a": 2, "b": -1})]
    _judge(states)
    assert [(s["dist"], s["dead"]) for s in states] == [(1, False), (0, False), (None, True), (None, True),
                                                        (None, False)]  # a move past the map's limit may still win


def test_a_maps_first_state_and_a_schedule_outside_a_bounded_map():
    from simcache.game_map import state_of

    m = structure(level(1))
    assert {k: m["states"][0][k] for k in ("turns", "crash", "win", "off")} == dict(turns=[], crash=None, win=False,
                                                                                    off=0)
    assert all(s["win"] is (s["crash"] is not None and "parent does not have child key" in s["crash"])
               for s in m["states"])
    small = structure(level(5), limit=3)
    assert [s["turns"] for s in small["states"]] == [[], ["pf"], ["R2"]]
    assert state_of(small, ["pf", "R2", "pf", "R4"]) is None and state_of(small, ["pf"]) is small["states"][1]
    turns = load("crash_pr").parse_schedule(level(5).solution).turns
    path = structure(level(5), limit=60)  # the solution's path is expanded first: 60 states of more than 5,000
    assert all(state_of(path, turns[:i]) is not None for i in range(len(turns) + 1))


def test_level_data_without_a_shared_drawing_list():
    alone = level_data(1)
    shared: list[str] = []
    assert alone == level_data(1, svgs=shared) and len(shared) == 1 + max(
        s["svg"] for s in alone["states"])


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
    import gzip
    import json

    from simcache.game_map import page_data_block, read_page_data

    data = {"levels": [level_data(2, 50), level_data(3, 50)], "svgs": ["<svg/>", "é"]}  # ~55 KB: levels 6 and 7
    # of gzip give different bytes
    block = page_data_block(data)
    raw = gzip.compress(json.dumps(data, separators=(",", ":")).encode("utf-8"), compresslevel=6, mtime=0)
    assert block == base64.b64encode(raw).decode("ascii") and base64.b64decode(block)[4:8] == b"\0\0\0\0"
    page = (f'<script>var a = 1;</script><script type="application/json" id="game-data">{block}</script>'
            '<script>document.getElementById("game-data")</script><div id="game-data"></div>')
    assert read_page_data(page) == data


def test_the_page_and_its_refusals(tmp_path):
    from simcache.errors import ConfigError
    from simcache.game_map import MAX_LIMIT, game_page, read_page_data, render_game
    from simcache.render.panels import PANEL_CSS

    assets = Path(game_module_file()).parent / "render"
    for bad, said in ((0, "0"), (MAX_LIMIT + 1, "5001"), ("9", "'9'"), (True, "True"), (2.0, "2.0"),
                      ("x" * 30, f"'{'x' * 19}... (32 characters)")):
        with pytest.raises(ConfigError) as e:
            render_game([1], bad)
        assert str(e.value) == f"the states per level must be a whole number from 1 to 5000, not {said}"
    assert read_page_data(render_game([], 1)) == {"levels": [], "svgs": []}
    assert read_page_data(render_game([], MAX_LIMIT)) == {"levels": [], "svgs": []}
    heard = []
    page = render_game([1, 5], 3, say=heard.append)
    assert heard == ["level 1: 3 states", "level 5: 3 states (bounded)"]
    assert f"<script>{(assets / 'game_page.js').read_text()}</script>" in page
    assert f"<style>{PANEL_CSS + (assets / 'game_page.css').read_text()}</style>" in page
    assert ('<nav><select id="level"><option value="0">Level 1: D: a host leaf that is not a leaf</option>'
            '<option value="1">Level 5: crash_pr: the crash reported in the PR</option></select></nav>') in page
    with pytest.raises(ConfigError) as e:
        render_game([9])
    assert str(e.value) == "there is no level 9; the levels are 1 to 5" and e.value.__suppress_context__
    (tmp_path / "folder").mkdir()
    with pytest.raises(ConfigError) as e:
        game_page(tmp_path / "folder", [1])
    assert str(e.value) == f"-o must name a file, not the folder '{tmp_path / 'folder'}'; e.g. -o run.html"


def game_module_file() -> str:
    from simcache import game_map

    return game_map.__file__
