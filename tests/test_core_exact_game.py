"""game.py compared whole: how a game starts (from a name, a mapping or a Scenario; its minimal schedule), each
refused move's sentence, stepping inside and through the points, undo and reset, hints and where they point, the
status messages, the drawing at each moment, the widgets (each button's label, state and style, the panels'
HTML, a refused click) and the static snapshot shown without a kernel."""
from __future__ import annotations

from html import escape

import pytest

from simcache import game as game_module
from simcache.errors import ScenarioError, ScheduleError
from simcache.game import SchedulerGame
from simcache.game_levels import level, state_view
from simcache.game_map import structure
from simcache.operations import describe_op
from simcache.render.dot import render_svg
from simcache.render.frames import page_size, tree_dot
from simcache.render.timeline import timeline_svg
from simcache.scenario import load
from simcache.simulate import simulate

_MAPS: dict[int, dict] = {}


def at_level(number: int, *, widgets: bool = False) -> SchedulerGame:
    game = SchedulerGame.from_level(number, widgets=widgets)
    if number not in _MAPS:
        _MAPS[number] = structure(level(number))
    game._map = _MAPS[number]  # built once here instead of once per game
    return game


def test_a_game_starts_from_a_name_a_mapping_or_a_scenario():
    sc = load("scenario_a")
    doc = {"name": "mine", "config": sc.config, "actors": sc.actors, "schedule": "mem l3 mem",
           "expect": {"pre_fix": {"outcome": "assertion"}}}
    for made in (SchedulerGame("scenario_a", widgets=False), SchedulerGame(sc, widgets=False),
                 SchedulerGame(doc, widgets=False)):
        assert (made.preset, made.minimal, made.turns, made.revealed, made.hints_shown, made.inside, made.at,
                made.said, made.buttons, made.widget, made.level, made.flags) == (
            "pre_fix", "mem l3 mem", [], False, 0, None, 0, "", {}, None, None, None)
        assert (made.run.outcome, made.run.schedule.turns, made.run.preset) == ("clean", (), "pre_fix")
    assert SchedulerGame("scenario_a", "followup_fix", widgets=False).minimal is None  # expected clean: no answer
    assert SchedulerGame("scenario_a", "followup_fix", minimal="l3", widgets=False).minimal == "l3"
    with pytest.raises(ScenarioError) as e:
        SchedulerGame(3, widgets=False)
    assert str(e.value) == "SchedulerGame needs a scenario: a gallery name, a file path, a dict or a Scenario"
    flagged = SchedulerGame("scenario_a", flags={"stale_guards": True}, widgets=False)
    assert flagged.flags == {"stale_guards": True} and flagged.run.flags.stale_guards is True


def test_a_level_game():
    game = at_level(3)
    lv = level(3)
    assert (game.level, game.scenario.name, game.preset, game.minimal) == (lv, "scenario_b", "pre_fix", lv.solution)
    assert game.remaining() == {"A": 1, "B": 1, "mem": 2, "C": 1, "mem2": 1}
    assert game.next_ops() == {a: describe_op(ops[0]) for a, ops in game.scenario.actors.items()}
    game.pick("mem")
    assert game.schedule == "mem" and game.remaining()["mem"] == 1
    assert game.next_ops()["mem"] == describe_op(game.scenario.actors["mem"][1])


def test_each_refused_move():
    game = at_level(2)
    with pytest.raises(ScheduleError) as e:
        game.step_inside("mem")
    assert str(e.value) == ("level 2 moves whole operations; stepping inside write_backup and evict_host starts at "
                            "level 3")
    game.pick("l3")
    with pytest.raises(ScheduleError) as e:
        game.pick("l3")
    assert str(e.value) == "actor 'l3' has no operation left; choose one of mem"
    for a in ("mem", "mem"):
        game.pick(a)
    assert game.over
    with pytest.raises(ScheduleError) as e:
        game.pick("mem")
    assert str(e.value) == "the game is over: reset() to play again"
    inside = at_level(3)
    for a in ("A", "B", "mem"):
        inside.pick(a)
    inside.step_inside("mem")
    with pytest.raises(ScheduleError) as e:
        inside.pick("C")
    assert str(e.value) == ("C cannot move now: mem's operation is inside write_backup, which SGLang's scheduler "
                            "thread runs to the end (the copy and storage threads reach the tree only through acks); "
                            "use next_point() or pick mem to finish it")
    with pytest.raises(ScheduleError) as e:
        inside.step_inside("mem")
    assert str(e.value) == "already inside an operation: next_point() or finish it"
    with pytest.raises(ScheduleError) as e:
        at_level(3).next_point()
    assert str(e.value) == "not inside an operation: step_inside(actor) first"


def test_stepping_through_the_points_of_a_move():
    game = at_level(3)
    for a in ("A", "B", "mem"):
        game.pick(a)
    pts = game.step_inside("mem")
    assert len(pts) == 12 and game.inside == pts and game.at == 0 and game.turns[-1] == "mem"
    run = game.run
    steps = run.trace.steps
    assert game.message() == (f"Inside mem's operation, point 1 of 12: {steps[pts[0]].text} (in "
                              f"{' > '.join(steps[pts[0]].stack[-3:])}). Next point, or pick mem to finish it.")
    assert game.tree_svg() == render_svg(tree_dot(simulate("scenario_b", "pre_fix", schedule="A B mem*2"), pts[0]))
    assert not game.reached_assertion and not game.over
    seen = [game.next_point() for _ in range(len(pts) - 1)]
    assert seen == pts[1:] and game.at == 11
    calls = {game._inside_call()}
    assert calls <= {"write_backup", "evict_host"}
    assert game.next_point() is None and game.inside is None and game._inside_call() == ""
    finished = at_level(3)
    for a in ("A", "B", "mem"):
        finished.pick(a)
    finished.step_inside("mem")
    finished.pick("mem")  # picking the actor finishes its operation
    assert finished.inside is None and finished.turns == ["A", "B", "mem", "mem"] and finished.said == game.said
    whole = at_level(3)
    assert whole.step_inside("A") == [] and whole.inside is None and whole.turns == ["A"]  # never enters them


def test_undo_and_reset():
    game = at_level(3)
    for a in ("A", "B", "mem"):
        game.pick(a)
    game.step_inside("mem")
    game.undo()  # out of the operation, and the move is taken back
    assert (game.inside, game.turns, game.said) == (None, ["A", "B", "mem"], "")
    game.undo()
    assert game.turns == ["A", "B"] and game.schedule == "A B"
    empty = at_level(1)
    empty.undo()
    assert empty.turns == []
    game.hint(), game.reveal()
    game.reset()
    assert (game.turns, game.revealed, game.inside, game.said, game.hints_shown) == ([], False, None, "", 0)
    assert game.run.trace.sha256() == at_level(3).run.trace.sha256()


def test_hints_then_the_path():
    game = at_level(2)
    hints = list(level(2).hints)
    assert [game.hint() for _ in hints] == hints and game.hints_shown == 2
    assert game.hint() == "From here the assertion is 3 moves away: try mem."
    game.pick("mem")
    game.pick("l3")
    assert game.hint() == "From here the assertion is 1 move away: try mem."
    dead = at_level(2)
    dead.pick("l3")
    assert dead.said.endswith("From here no order of the remaining moves reaches the assertion: undo, or ask for a "
                              "hint.")
    dead.hints_shown = 2
    assert dead.hint() == "No order of the remaining moves reaches the assertion from here: undo."
    free = SchedulerGame("scenario_a", widgets=False)  # no level: the path is read from the minimal schedule
    assert free.hint() == "You are on the solution's path: next, move mem."
    free.pick("l3")
    assert free.hint() == ("Your move 1 (l3) is where your schedule leaves the solution the hints follow, which moves "
                           "mem there: undo back to move 1 and try another actor.")
    done = SchedulerGame("scenario_a", widgets=False)
    for a in ("mem", "l3", "mem"):
        done.pick(a)
    assert done.hint() == "Your schedule already contains the whole solution."
    assert SchedulerGame("scenario_a", "followup_fix", widgets=False).hint() == (
        "No solution is recorded for this scenario; the explorer can find one.")
    assert (free.reveal(), free.revealed) == ("mem l3 mem", True)
    assert SchedulerGame("scenario_a", "followup_fix", widgets=False).reveal() == ""


def test_the_status_messages():
    game = SchedulerGame("scenario_a", widgets=False)
    assert game.message() == "Schedule so far: '(none)'. Pick who moves next."
    game.pick("mem")
    stale = game.run.trace.went_stale
    assert game.message() == ("Schedule so far: 'mem'. Pick who moves next. A node has gone stale "
                              f"(#{stale[-1].node}): keep going.")
    for a in ("l3", "mem"):
        game.pick(a)
    c = game.run.crash
    assert game.message() == (f"You made the cache reach the assertion: {c.type}: {c.message} (in {c.function}) with "
                              "the schedule 'mem l3 mem'.")
    survived = SchedulerGame("scenario_a", "followup_fix", widgets=False)
    for a in ("mem", "l3", "mem"):
        survived.pick(a)
    assert survived.over and survived.message() == ("Every actor is done and the cache survived ('mem l3 mem'). Reset "
                                                    "and try another order.")


def test_the_drawing_before_any_move_and_after_the_last():
    """Between moves: the cache as the moves left it (``state_view``, the levels page's drawing); at the assertion:
    the run's last step, the node it raised on."""
    game = SchedulerGame("scenario_a", widgets=False)
    assert game.tree_svg() == render_svg(state_view(game.run.cache, game.run.driver, page_size(game.run))[0])
    game.pick("mem")
    drawn = simulate("scenario_a", schedule="mem")
    assert game.tree_dot() == state_view(drawn.cache, drawn.driver)[0] and game.stale_nodes() == (7,)
    assert game.tree_svg() == render_svg(game.tree_dot())
    for a in ("l3", "mem"):
        game.pick(a)
    drawn = simulate("scenario_a", schedule="mem l3 mem")
    assert game.run.crash is not None and game.tree_dot() == tree_dot(drawn, len(drawn.trace.steps) - 1)
    assert game.stale_nodes() == ()


def test_the_widgets_follow_the_game():
    game = at_level(3, widgets=True)
    assert [(a, b.description, b.disabled, b.button_style) for a, b in game.buttons.items()] == [
        ("A", "A: request [1,2,3]", False, ""), ("B", "B: request [1,2,4]", False, ""),
        ("mem", "mem: evict n=2", False, ""),
        ("C", "C: request [5,6]", False, ""), ("mem2", "mem2: evict n=2", False, "")]
    kids = game.widget.children
    assert len(kids) == 11 and kids[1].value == ("<h3>Level 3: B: write_backup deletes its own node</h3><p>Write-back "
                                                 "policy. From this level on you may step inside write_backup and "
                                                 "evict_host.</p>")
    assert list(kids[2].children) == list(game.buttons.values())
    assert list(kids[3].children) == [game.inside_box, game.point_button]
    assert list(kids[4].children) == [game.undo_button, game.reset_button, game.hint_button, game.reveal_button]
    assert kids[5:] == (game.status, game.reaction, game.hint_text, game.answer, game.tree, game.timeline)
    assert (game.inside_box.description, game.inside_box.value, game.point_button.description,
            game.reveal_button.description) == ("step inside write_backup / evict_host", False, "next point",
                                                "reveal the minimal schedule")
    assert game.status.value == ('<p class="sc-ok" style="font-size:16px;padding:6px;background:#f8fafc;border-left:'
                                 '4px solid #64748b">Schedule so far: &#x27;(none)&#x27;. Pick who moves next.</p>')
    assert (game.reaction.value, game.answer.value, game.point_button.disabled) == ("", "", True)
    assert game.tree.value == f'<div class="sc-tree">{game.tree_svg()}</div>'
    t = game.run.trace
    assert game.timeline.value == timeline_svg(t, len(t.steps) - 1 if t.steps else None, title="your schedule")
    for a in ("A", "B", "mem"):
        game.buttons[a].click()
    game.inside_box.value = True
    game.buttons["mem"].click()
    assert [(a, b.disabled) for a, b in game.buttons.items()] == [("A", True), ("B", True), ("mem", False),
                                                                   ("C", True), ("mem2", True)]
    assert game.point_button.disabled is False and game.buttons["A"].description == "A: done"
    assert game.buttons["A"].button_style == "info" and game.buttons["C"].button_style == ""
    assert game.timeline.value == timeline_svg(game.run.trace, game.inside[0], title="your schedule")
    game.buttons["C"].click()  # refused: shown, not raised
    assert game.said.startswith("C cannot move now: mem's operation is inside write_backup")
    assert game.reaction.value == f'<p class="sc-red" style="padding:6px"><b>{escape(game.said)}</b></p>'
    game.point_button.click()
    assert game.at == 1
    game.undo_button.click()
    assert game.inside is None and game.turns == ["A", "B", "mem"]
    game.hint_button.click()
    assert game.hint_text.value == f'<p class="sc-hint"><b>Hint:</b> {escape(level(3).hints[0])}</p>'
    game.reveal_button.click()
    assert game.answer.value == "<p>Minimal failing schedule: <code>A B mem*2 C mem2</code></p>"
    game.reset_button.click()
    assert game.turns == [] and game.answer.value == ""
    game.inside_box.value = False
    for a in ("A", "B", "mem", "mem", "C", "mem2"):
        game.buttons[a].click()
    assert game.reached_assertion and game.won and game.status.value.startswith(
        '<p class="sc-win" style="font-size:16px;padding:6px;background:#f0fdf4;border-left:6px solid #16a34a;'
        'color:#14532d;font-weight:bold">✔ You won. You made the cache reach the assertion')  # green, not red
    assert game.status.value.endswith(f"Why: {escape(level(3).why)}</p>")
    assert all(b.disabled for b in game.buttons.values())


def test_a_free_games_widgets():
    game = SchedulerGame("scenario_a", "followup_fix")
    assert [type(c).__name__ for c in game.widget.children] == ["HTML", "HBox", "HBox", "HBox", "HTML", "HTML",
                                                                 "HTML", "HTML", "HTML", "HTML"]
    assert list(game.widget.children[2].children) == [game.inside_box, game.point_button]
    game.reveal()
    assert game.answer.value == "<p>No minimal schedule is recorded for this scenario; the explorer can find one.</p>"
    two = at_level(2, widgets=True)
    assert list(two.widget.children[3].children) == []  # levels 1 and 2 move whole operations


def test_without_a_kernel_a_static_snapshot(monkeypatch):
    game = at_level(2, widgets=True)
    game.pick("mem")
    ops = "".join(f"<li><b>{a}</b>: " + " ; ".join(escape(describe_op(op)) for op in o) + "</li>"
                  for a, o in game.scenario.actors.items())
    from simcache.render.display import svg_img

    assert game.static_html() == (
        '<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif"><p><b>Level 2: A: a tombstone kept '
        "alive by a host reference</b>. Two actors: memory pressure (mem) and the storage ack (l3). Find the order "
        "that crashes.</p><p><b>Be the scheduler</b> (the buttons need a running kernel: run the notebook to play). "
        f"The actors and their operations:</p><ul>{ops}</ul><p>{escape(game.message())}</p>"
        f"{svg_img(game.tree_svg())}</div>")
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", shown.append)
    game._ipython_display_()
    assert shown[0] is game.widget and shown[1].data == game.static_html()
    shown.clear()
    plain = SchedulerGame("scenario_a", widgets=False)
    plain._ipython_display_()
    assert len(shown) == 1 and shown[0].data == plain.static_html() and "<p><b>Level" not in shown[0].data
    assert game._repr_mimebundle_() == game.widget._repr_mimebundle_()
    assert game_module.SchedulerGame is SchedulerGame


DEAD = "From here no order of the remaining moves reaches the assertion: undo, or ask for a hint."


def test_the_dead_end_is_said_once_where_it_begins(monkeypatch):
    game = at_level(2)
    game.pick("l3")
    assert game.said == DEAD
    game.pick("mem")  # still no way to the goal, but that began a move earlier
    assert game.said == ""
    monkeypatch.setattr(game_module, "reaction", lambda run, k, upto=None: "Broke it.")
    again = at_level(2)
    again.pick("l3")
    assert again.said == "Broke it. " + DEAD
    assert SchedulerGame.from_level(2, widgets=False).widget is None


def test_hints_after_a_win_and_from_a_given_answer():
    won = at_level(1)
    won.pick("mem"), won.pick("mem")
    won.hints_shown = len(level(1).hints)
    assert won.reached_assertion and won.hint() == "Your schedule already contains the whole solution."
    two = at_level(3)
    two.hints_shown = 3
    for a in ("A", "B", "mem", "mem"):
        two.pick(a)
    assert two.hint() == "From here the assertion is 2 moves away: try C."
    past = at_level(2)
    past.hints_shown = 2
    past.pick("mem")  # the first move left, mem, is not on a shortest way: l3 is
    assert past.hint() == "From here the assertion is 2 moves away: try l3."
    given = SchedulerGame("scenario_a", minimal="l3 mem*2", widgets=False)
    assert given.hint() == "You are on the solution's path: next, move l3."
    with pytest.raises(ScheduleError) as e:
        SchedulerGame("crash_pr", widgets=False).pick("nobody")
    assert str(e.value) == "actor 'nobody' has no operation left; choose one of pf, R2, R4, R6, mem, ctl, R7"


def test_stepping_inside_a_move_whose_actor_is_not_the_last_one():
    game = at_level(4, widgets=True)
    for a in ("pf", "R2", "pf", "R4", "mem"):
        game.pick(a)
    pts = game.step_inside("R6")
    run, k = game.run, len(game.turns) - 1
    from simcache.game_levels import reaction

    said = [game.said]
    for _ in pts[1:]:
        game.next_point()
        said.append(game.said)
    assert said == [reaction(run, k, upto=p) for p in pts] and len(set(said)) > 1
    game.undo()
    game.step_inside("R6")
    deep = next(i for i, p in enumerate(pts) if len(run.trace.steps[p].stack) > 3)
    for _ in range(deep):
        game.next_point()
    s = run.trace.steps[pts[deep]]
    assert game.message() == (f"Inside R6's operation, point {deep + 1} of {len(pts)}: {s.text} (in "
                              f"{' > '.join(s.stack[-3:])}). Next point, or pick R6 to finish it.")
    assert [(a, b.disabled) for a, b in game.buttons.items()] == [(a, a != "R6") for a in game.buttons]
    assert game.timeline.value == timeline_svg(run.trace, pts[deep], title="your schedule")


def test_stepping_inside_after_an_initial_injection():
    from simcache.game_levels import points, reaction

    game = SchedulerGame("scenario_a", widgets=False)  # its initial state is operation 0 of every run
    pts = game.step_inside("mem")
    assert game._init_ops() == 1 and pts == points(game.run, 1) and pts
    assert game.said == reaction(game.run, 1, upto=pts[0])
    while game.next_point() is not None:
        pass
    assert game.said == reaction(game.run, 1) and game.said.startswith("You just detached node #7 [1,2]")
    game.pick("l3")
    pts = game.step_inside("mem")
    assert pts == points(game.run, 3) and game.said == reaction(game.run, 3, upto=pts[0])


def test_a_point_outside_the_two_calls_still_names_the_call_it_belongs_to():
    from simcache.game_levels import INSIDE

    game = at_level(4)
    for a in ("pf", "R2", "pf", "R4", "mem"):
        game.pick(a)
    pts = game.step_inside("R6")
    at = next(i for i, p in enumerate(pts) if not set(game.run.trace.steps[p].stack) & set(INSIDE))
    for _ in range(at):  # the insert loop attaching its child once the re-entry has run
        game.next_point()
    with pytest.raises(ScheduleError) as e:
        game.pick("ctl")
    assert str(e.value).startswith("ctl cannot move now: R6's operation is inside write_backup, which SGLang's")


def test_the_widgets_own_settings_and_the_timeline_after_a_move():
    from simcache.render.display import page_css

    game = at_level(3, widgets=True)
    assert game.widget.children[0].value == page_css(".sc-static{display:none}")
    assert all(b.layout.width == "auto" for b in game.buttons.values())
    box = game.inside_box
    assert (box.indent, box.value, box.layout.width) == (False, False, "auto")
    assert [b.description for b in (game.undo_button, game.reset_button, game.hint_button)] == ["undo", "reset",
                                                                                                 "hint"]
    game.pick("A")
    t = game.run.trace
    assert game.timeline.value == timeline_svg(t, len(t.steps) - 1, title="your schedule")
    assert game.buttons["A"].disabled is True and game.buttons["A"].button_style == "info"
    assert game.buttons["B"].disabled is False


def test_a_free_games_static_snapshot():
    from simcache.render.display import svg_img

    game = SchedulerGame("scenario_a", widgets=False)
    assert game.static_html().startswith('<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif">'
                                         "<p><b>Be the scheduler</b> (the buttons need a running kernel")
    assert game.static_html().endswith(f"<p>{escape(game.message())}</p>{svg_img(game.tree_svg())}</div>")
