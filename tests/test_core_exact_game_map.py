"""game_map.level_data compared whole against the live game: every state of a level's precomputed map says what
``SchedulerGame`` shows after the same moves (the crash, the stale nodes, the drawing), every move's reaction and
target, and for levels that step inside, every point's text, reaction and drawing as ``step_inside`` /
``next_point`` walk them; the drawings are shared between levels, each DOT text once."""
from __future__ import annotations

import pytest

from simcache.game import SchedulerGame
from simcache.game_levels import level
from simcache.game_map import level_data, structure
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
    index = {tuple(s["turns"]): i for i, s in enumerate(data["states"])}
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
            assert e["to"] in (-1, index.get(tuple(st["turns"] + [a]), e["to"]))
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
