"""The be-the-scheduler levels (issue 17, part 3), played headless, and their offline page.

Story: every level's solution wins it (the cache reaches ``parent does not have child key``); the move that
detaches a still-held node gets the sentence built from the trace's own stale event; a move that leaves no way
to the goal says so, and the hints come one at a time before the answer. From level 3 the learner may stop inside
write_backup / evict_host at its points (the other actors wait there, as on SGLang's scheduler thread). The page
(``export --game``) holds the same map: walking the solution's moves through its data wins, the wrong move is
marked dead, and a bad --game value is one sentence with exit status 2.
"""
from __future__ import annotations

import pytest

from simcache.cli import main
from simcache.errors import ScenarioError, ScheduleError
from simcache.game import GOAL, LEVELS, SchedulerGame, level
from simcache.game_map import read_page_data, render_game, structure

DEAD = "From here no order of the remaining moves reaches the assertion: undo, or ask for a hint."


def play(game: SchedulerGame, schedule: str) -> list[tuple[str, str]]:
    said = []
    for actor in game.scenario.parse_schedule(schedule).turns:
        game.pick(actor)
        said.append((actor, game.said))
    return said


@pytest.mark.parametrize("number", [lv.number for lv in LEVELS])
def test_every_level_is_won_by_its_solution(number):
    lv = level(number)
    game = SchedulerGame.from_level(number, widgets=False)
    play(game, lv.solution)
    assert game.reached_assertion and game.over
    assert GOAL in game.run.crash.message
    assert game.message().startswith("You made the cache reach the assertion: AssertionError: parent does not have "
                                     "child key, 1")


def test_levels_rise_from_d_to_crash_pr_and_stepping_inside_starts_at_level_3():
    assert [lv.scenario for lv in LEVELS] == ["scenario_d", "scenario_a", "scenario_b", "scenario_c", "crash_pr"]
    assert [lv.inside for lv in LEVELS] == [False, False, True, True, True]
    with pytest.raises(ScenarioError, match="there is no level 6; the levels are 1 to 5"):
        level(6)


def test_the_reaction_names_the_detached_node_and_who_still_holds_it():
    game = SchedulerGame.from_level(4, widgets=False)
    said = dict(play(game, "pf R2 pf R4 mem R6"))
    assert said["pf"] == "That move broke the backup continuity invariant: node 9 [9,9] is backed up but its parent " \
                         "node 8 [1,2] is not."
    assert said["R6"] == (
        "You just detached node #8 [1,2] (by _delete_tombstone_leaf, called from _iteratively_delete_tombstone_leaf "
        "<- _evict_host_leaf <- evict_host <- write_backup <- _inc_hit_count <- ...) while _inc_hit_count(), which "
        "resumes after evict_host, write_backup(), which resumes after evict_host, and the insert loop "
        "(_insert_helper's `node`) still hold it.")
    assert said["R4"] == "" and said["mem"] == ""
    game = SchedulerGame.from_level(1, widgets=False)
    play(game, "mem")
    assert game.said == ("You just detached node #8 [3] (by _evict_host_leaf, called from evict_host) while "
                         "evictable_full_device_leaves, full_lru_list and mamba_lru_list still hold it.")


def test_a_wrong_move_says_so_and_the_hints_come_before_the_answer():
    game = SchedulerGame.from_level(2, widgets=False)
    assert game.hint() == "The first host eviction's cascade deletes [1,2] although an L3 backup still holds it."
    assert game.hint().startswith("The L3 ack releases that reference")
    assert game.hint() == "From here the assertion is 3 moves away: try mem."
    assert not game.revealed
    game.pick("l3")  # the ack first: nothing is detached yet, and the only reference is gone
    assert game.said == DEAD
    assert game.hint() == "No order of the remaining moves reaches the assertion from here: undo."
    assert game.reveal() == "mem l3 mem" and game.revealed
    game.undo()
    assert game.turns == [] and game.said == ""
    play(game, "mem l3 mem")
    assert game.reached_assertion


def test_stepping_inside_write_backup_stops_at_its_points_and_keeps_the_others_waiting():
    game = SchedulerGame.from_level(4, widgets=False)
    play(game, "pf R2 pf R4 mem")
    pts = game.step_inside("R6")
    texts = [game.run.trace.steps[p].text for p in pts]
    assert texts == ["write_backup([1,2]#8)", "alloc fail host_kv [2]", "evict_host()", "_evict_host_leaf([9,9]#9)",
                     "detach [9,9]#9 from [1,2]#8 slot 9", "_iteratively_delete_tombstone_leaf([9,9]#9)",
                     "_delete_tombstone_leaf([1,2]#8)", "detach [1,2]#8 from []#2 slot 1",
                     "[1,2]#8 backed up to host [2, 3]", "attach [7]#11 under [1,2]#8 at slot 7",
                     "write_backup([7]#11)", "alloc fail host_kv [1]"]
    assert game.message().startswith("Inside R6's operation, point 1 of 12: write_backup([1,2]#8)")
    assert game.said == "" and not game.over
    with pytest.raises(ScheduleError, match="ctl cannot move now: R6's operation is inside write_backup, which "
                                            "SGLang's scheduler thread runs to the end"):
        game.pick("ctl")
    shown = [game.next_point() for _ in range(7)]
    assert shown == pts[1:8]
    assert game.said.startswith("You just detached node #8 [1,2] (by _delete_tombstone_leaf")  # at the detach
    game.pick("R6")  # its own actor finishes the operation
    assert game.inside is None and game.schedule == "pf R2 pf R4 mem R6"
    play(game, "ctl*3 mem")
    assert game.reached_assertion
    with pytest.raises(ScheduleError, match="starts at level 3"):
        SchedulerGame.from_level(2, widgets=False).step_inside("mem")


def test_the_maps_are_complete_for_the_small_levels_and_bounded_for_the_large():
    sizes = {lv.number: structure(lv) for lv in LEVELS[:3]}
    assert {n: len(m["states"]) for n, m in sizes.items()} == {1: 3, 2: 9, 3: 179}
    assert all(m["complete"] for m in sizes.values())
    assert [m["states"][0]["dist"] for m in sizes.values()] == [2, 3, 6]
    big = structure(level(5), limit=50)
    assert len(big["states"]) == 50 and not big["complete"]
    assert big["states"][0]["dist"] is not None  # the solution's states come first


def test_the_page_holds_the_levels_and_the_solution_walks_to_a_win():
    html = render_game([1, 2], cache=False)
    assert html.count("<script") == 2 and "src=" not in html and 'href="http' not in html
    data = read_page_data(html)
    assert [lv["number"] for lv in data["levels"]] == [1, 2]
    two = data["levels"][1]
    assert two["hints"] == list(level(2).hints) and two["solution"] == "mem l3 mem" and two["why"] == level(2).why
    s = 0
    for actor in ["mem", "l3", "mem"]:
        s = two["to"][s][two["actors"].index(actor)]
    flags, dist, crash, *stale = two["info"][s]
    assert flags & 1 and dist == 0 and data["strings"][crash].startswith("AssertionError: parent does not have child")
    wrong = two["to"][0][two["actors"].index("l3")]
    assert two["info"][wrong][0] & 4 and two["info"][wrong][1] == -1  # dead: no win from there
    assert len(html) < 1_500_000  # the Graphviz engine (1.33 MB) and two small levels


def test_export_game_writes_the_page_and_refuses_bad_levels(capsys, tmp_path):
    out = tmp_path / "g.html"
    assert main(["export", "--game", "1", "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.strip() == str(out)
    assert printed.err.startswith("[export] precomputing level(s) 1\n[export] level 1: 3 states")  # progress
    assert [lv["number"] for lv in read_page_data(out.read_text())["levels"]] == [1]
    for argv, msg in ((["--game", "9"], "there is no level 9; the levels are 1 to 5"),
                      (["--game", "x"], "--game takes a level number from 1 to 5 or a list like 2,4, not 'x'"),
                      (["--game", ""], "--game takes a level number from 1 to 5 or a list like 2,4, not ''"),
                      (["--game", "１"], "--game takes a level number from 1 to 5 or a list like 2,4, not '１'"),
                      (["--game", "9" * 400], "--game takes a level number from 1 to 5 or a list like 2,4, not "),
                      (["--game", "1,0"], "there is no level 0; the levels are 1 to 5"),
                      (["--game", "1", "--storyboard", str(tmp_path / "sb")], "drop --storyboard"),
                      (["crash_pr", "--game", "1"], "--game writes the levels page from the gallery; drop SCENARIO"),
                      ([], "export needs a SCENARIO")):
        assert main(["export", *argv, "-o", str(tmp_path / "x.html")]) == 2
        err = capsys.readouterr().err
        assert msg in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "x.html").exists()


def test_the_level_widget_steps_inside_and_shows_refusals_and_hints():
    game = SchedulerGame.from_level(3)
    for actor in ("A", "B", "mem"):
        game.buttons[actor].click()
    game.inside_box.value = True
    game.buttons["mem"].click()
    assert "Inside mem&#x27;s operation, point 1 of" in game.status.value
    assert game.buttons["C"].disabled and not game.buttons["mem"].disabled and not game.point_button.disabled
    game._click("C")  # a locked actor, as a click would try it: shown, not raised
    assert "C cannot move now: mem&#x27;s operation is inside" in game.reaction.value
    while game.inside is not None:
        game.point_button.click()
    assert game.schedule == "A B mem*2" and game.point_button.disabled
    assert "You just detached node #8 [1,2]" in game.reaction.value
    game.hint_button.click()
    assert game.hint_text.value == ('<p class="sc-hint"><b>Hint:</b> Both requests must insert before memory '
                                    "pressure: the split leaves a tombstone [1,2] over two leaves.</p>")
    game.inside_box.value = False
    game.buttons["C"].click()
    game.buttons["mem2"].click()
    assert game.reached_assertion and "reach the assertion" in game.status.value
