"""The player and the be-the-scheduler game, driven headless: set values, click buttons, read ``HTML.value`` and
the model (never ``Output.outputs``).

Story: scenario C under pre_fix has node #8 go stale in operation 5 and asserts at its last micro-step; under
described_fix the same schedule is cleaned up instead, so the two runs first differ at operation 9. In the game,
the learner who plays C's actors in the order ``pf R1 pf R2 mem R3 ctl*3 mem`` makes the cache reach the assertion.
"""
from __future__ import annotations

import time
from html import escape

import pytest
from views_helpers import run_c, run_c_actors, scenario_doc, story

from simcache.errors import ScheduleError, SimcacheError
from simcache.player import Player, PlayerModel, SchedulerGame
from simcache.render.frames import caption, op_frames

S = story()
STALE_STEP, CRASH_STEP = S["stale"], S["crash"]


def test_model_steps_by_micro_step_and_by_operation():
    m = PlayerModel(run_c(), precompute=False)
    assert (m.cursor, m.step(), m.step(), m.step(-1)) == (0, 1, 2, 1)
    ends = op_frames(m.trace)
    assert m.step_op() == ends[0] and m.step_op() == ends[1] and m.step_op(-1) == ends[0]
    assert m.first() == 0 and m.last() == CRASH_STEP and m.step() == CRASH_STEP  # clamped at the end


def test_model_jumps_to_moments_and_says_when_there_is_none():
    m = PlayerModel(run_c(), precompute=False)
    assert m.jump("went-stale") and m.cursor == STALE_STEP
    assert m.frame().moments == ("went-stale",)
    assert m.jump("readmitted") and m.cursor == S["readmitted"]
    assert m.jump("assertion") and m.cursor == CRASH_STEP
    assert not m.jump("cleaned-up") and m.cursor == CRASH_STEP
    assert m.jump("went-stale", -1) and m.cursor == STALE_STEP
    fixed = PlayerModel(run_c("described_fix"), precompute=False)
    assert fixed.jump("cleaned-up") and fixed.cursor == fixed.trace.cleaned_up[0].step
    with pytest.raises(SimcacheError, match="unknown moment 'explosion'"):  # one sentence (#43)
        m.jump("explosion")


def test_widget_buttons_slider_and_jump_dropdown():
    p = Player(run_c())
    p.buttons["next"].click()
    assert p.slider.value == 1 and p.caption.value == f"<b>{escape(caption(run_c(), 1))}</b>"
    p.buttons["next_op"].click()
    assert p.model.cursor == op_frames(p.model.trace)[0] == p.slider.value
    p.slider.value = STALE_STEP
    assert "went&#45;stale" in p.tree.value and "WENT STALE" in p.tree.value
    assert "Why is this node stale?" in p.explanation.value
    assert f"went stale at step {STALE_STEP}" in p.explanation.value
    assert "write_backup()" in p.stack.value and "write_backup()" in p.panels.value
    assert 'class="focus node' in p.tree.value  # the micro-step's node is outlined
    p.buttons["first"].click()
    p.jump_kind.value = "assertion"
    p.buttons["jump_next"].click()
    assert p.model.cursor == CRASH_STEP and "ASSERTION FIRED HERE" in p.tree.value
    assert "First violation" in p.invariants.value and "tl-cursor" in p.timeline.value
    p.buttons["prev"].click()
    assert p.slider.value == CRASH_STEP - 1
    p.speed.value = 100
    assert p.play.interval == 100 and p.play.max == CRASH_STEP
    p.play.value = 10  # what the Play widget does on each tick
    assert p.model.cursor == 10


def test_widget_toggles_hide_host_and_mamba():
    p = Player(run_c())
    p.slider.value = S["late"]
    assert "KV: both" in p.tree.value and "M host" in p.tree.value
    p.hide_host.value = True
    assert p.model.hide_host and "KV: both" not in p.tree.value and "M host" not in p.tree.value
    p.hide_mamba.value = True
    assert "tombstone" not in p.tree.value and "M dev" not in p.tree.value
    p.hide_host.value = p.hide_mamba.value = False
    assert "M host" in p.tree.value


def test_side_by_side_runs_in_lockstep_and_marks_the_first_divergence():
    p = Player(run_c("pre_fix"), compare=run_c("described_fix"))
    m = p.model
    assert m.divergence == 9
    assert "First divergence: operation 9 (main: evict n=3)" in p.note.value and "[ahead]" in p.note.value
    p.slider.value = STALE_STEP
    assert m.step_of(1) == STALE_STEP and "WENT STALE" in p.compare_tree.value
    assert "described_fix" in p.compare_caption.value
    p.buttons["divergence"].click()  # issue #13: the start of the divergent operation, not its last step
    assert m.step_of(0) == m.trace.ops[9].first_step and m.step_of(1) == m.runs[1].trace.ops[9].first_step
    assert "[here]" in p.note.value
    p.buttons["next_op"].click()
    assert "ASSERTION FIRED HERE" in p.tree.value and "ASSERTION FIRED HERE" not in p.compare_tree.value
    assert "CLEANED UP" in p.compare_tree.value


def crash_pr_compare():
    from simcache.simulate import simulate

    return Player(simulate("crash_pr", "pre_fix"), compare=simulate("crash_pr", "described_fix"))


def test_compare_spans_the_longer_run_so_the_clean_end_can_be_shown():
    p = crash_pr_compare()
    m = p.model
    left, right = (len(r.trace.steps) for r in m.runs)
    assert (left, right) == (263, 272)  # described_fix takes 9 more micro-steps than pre_fix's crash
    assert m.num_steps == p.slider.max + 1 >= right  # before #13 the slider stopped at the left run's 263
    p.buttons["last"].click()
    assert (m.step_of(0), m.step_of(1)) == (left - 1, right - 1)
    assert "ASSERTION FIRED HERE" in p.tree.value and f"step {right - 1} of {right - 1}" in p.compare_caption.value
    steps = [m.positions[i][1] for i in range(m.num_steps)]
    assert sorted(set(steps)) == list(range(right))  # every micro-step of the right run has a position


def test_compare_jump_to_cleaned_up_finds_the_right_runs_moment_and_says_so_when_none():
    p = crash_pr_compare()
    m = p.model
    p.jump_kind.value = "cleaned-up"
    p.buttons["jump_next"].click()  # before #13 it silently did nothing: the left run has no cleanup
    cleanup = m.runs[1].trace.cleaned_up[0].step
    assert m.step_of(1) == cleanup and "CLEANED UP" in p.compare_tree.value
    p.buttons["jump_next"].click()
    assert m.step_of(1) == cleanup and "No later cleaned up moment in either run." in p.note.value


def test_compare_panels_are_labelled_with_their_run():
    p = crash_pr_compare()
    assert "left: pre_fix" in p.caption.value and "right: described_fix" in p.compare_caption.value
    p.model.jump("assertion")
    p.refresh()
    assert "_delete_tombstone_leaf()" in p.stack.value and "Why is this node stale?" in p.compare_explanation.value


def test_play_controls_are_labelled_buttons_driving_a_hidden_timer():
    p = Player(run_c())
    for key, word in (("play", "▶ play"), ("pause", "‖ pause"), ("stop", "■ stop")):
        assert word in p.buttons[key].description and p.buttons[key].tooltip
    assert p.play.layout.display == "none" and p.repeat.description == "repeat"
    p.buttons["play"].click()
    assert p.play.playing
    p.play.value = 5  # a tick of the timer
    assert p.model.cursor == 5
    p.buttons["pause"].click()
    assert not p.play.playing and p.model.cursor == 5
    p.repeat.value = True
    assert p.play.repeat
    p.buttons["stop"].click()
    assert not p.play.playing and p.model.cursor == 0 == p.slider.value


def test_the_call_stack_at_the_assertion_lists_the_prs_frames():
    from simcache.simulate import simulate

    p = Player(simulate("crash_pr", "pre_fix"))
    p.jump_kind.value = "assertion"
    p.buttons["jump_next"].click()
    for fn in ("cache_finished_req", "insert", "_insert_helper", "_inc_hit_count", "write_backup", "evict_host",
               "_evict_host_leaf", "_iteratively_delete_tombstone_leaf", "_delete_tombstone_leaf"):
        assert f"{fn}()</li>" in p.stack.value
    assert p.stack.value.count("<li") == 10  # nine frames, then the assertion itself


def test_static_snapshot_shows_the_current_frame_and_key_moments_without_widgets():
    p = crash_pr_compare()
    html = p.static_html()
    assert "<script" not in html and html.count("<img") >= 6
    assert 'class="sc-static"' in html and ".sc-static{display:none}" in p.widget.children[0].value
    for text in ("at the cursor", "went stale", "assertion", "last step", "pre_fix: AssertionError",
                 "described_fix: no assertion; damage: ", "cleaned up"):
        assert text in html


def test_scheduler_game_reaches_the_assertion_on_c_actors():
    game = SchedulerGame(scenario_doc("scenario_C_actors"))
    assert set(game.next_ops()) == {"pf", "R1", "R2", "R3", "mem", "ctl"}
    assert game.buttons["pf"].description == "pf: prefetch [1,2,9,9]"
    for actor in "pf R1 pf R2 mem R3 ctl ctl ctl".split():
        game.buttons[actor].click()
        assert not game.reached_assertion
    # The hint names what is stale in the state reached (game_levels.state_view), not the trace's history: #8 went
    # stale in the tombstone cascade, and the node still held now is #11 ([7]), attached under detached #8.
    assert "A node has gone stale (#11): keep going." in game.status.value
    assert game.stale_nodes() == (11,)
    assert game.buttons["pf"].disabled and game.buttons["pf"].description == "pf: done"
    game.buttons["mem"].click()
    assert game.reached_assertion and game.over
    assert "reach the assertion: AssertionError: parent does not have child key, 1" in game.status.value
    assert game.schedule == "pf R1 pf R2 mem R3 ctl*3 mem"
    assert all(b.disabled for b in game.buttons.values())
    assert "ASSERTION FIRED HERE" in game.tree.value
    with pytest.raises(ScheduleError, match="game is over"):
        game.pick("mem")
    assert game.answer.value == ""
    game.reveal_button.click()
    assert game.revealed and "pf R1 pf R2 mem R3 ctl*3 mem" in game.answer.value
    game.undo_button.click()
    assert not game.reached_assertion and not game.buttons["mem"].disabled
    game.reset_button.click()
    assert game.turns == [] and "root" in game.tree.value


def test_scheduler_game_clean_order_and_bad_picks():
    game = SchedulerGame(scenario_doc("scenario_C_actors"), widgets=False)
    with pytest.raises(ScheduleError, match="no operation left"):
        game.pick("nobody")
    for actor in "R1 R2 R3 mem mem ctl ctl ctl pf pf".split():  # no prefetch before the inserts: no crash
        game.pick(actor)
    assert game.over and not game.reached_assertion and "survived" in game.message()
    assert game.reveal() == "pf R1 pf R2 mem R3 ctl*3 mem"


def test_stepping_is_fast_once_precomputed():
    """Loose, informative only: the timing belongs in benchmarks, so nothing is asserted about it."""
    p = Player(run_c_actors())
    times = []
    for _ in range(60):
        t0 = time.perf_counter()
        p.buttons["next"].click()
        times.append(time.perf_counter() - t0)
    print(f"player step: max {max(times) * 1000:.1f} ms, mean {sum(times) / len(times) * 1000:.1f} ms")
    assert p.model.cursor == 60


def test_gallery_scenario_c_in_the_player_and_the_game():
    from simcache.simulate import simulate

    p = Player(simulate("scenario_c", "pre_fix"), compare=simulate("scenario_c", "described_fix"))
    assert p.model.jump("went-stale") and "WENT STALE" in p.tree.value + p.model.svg()
    game = SchedulerGame("scenario_c", widgets=False)
    schedule = game.reveal()
    assert schedule  # the scenario's own schedule reaches the assertion under pre_fix
    for actor in game.scenario.parse_schedule(schedule).turns:
        game.pick(actor)
    assert game.reached_assertion


def test_every_panel_names_the_run_it_belongs_to_for_compare_pages():
    from simcache.render.frames import frame
    from simcache.simulate import simulate

    f = frame(simulate("crash_pr", "described_fix"), 10)  # what a compare export stores for its right run
    for html in (f.stack, f.invariants, f.explanation):
        assert '<span class="sc-of">· described_fix</span>' in html
