"""player.py compared whole on crash_pr (pre_fix, and beside described_fix): the model's refusals, bounds, jumps
and their notes, the divergence and its note, the toggles, the frame cache of a long run, what each view is made
of, each side's panels and tab titles, the static snapshot, and the widgets' wiring (every button, the slider,
the toggles, play and stop)."""
from __future__ import annotations

from html import escape

import pytest

from simcache import player_model as player_module  # the model reads these globals (player.py re-exports)
from simcache import simulate
from simcache.errors import ConfigError
from simcache.player import Player, PlayerModel, static_snapshot
from simcache.render.codepane import codepane_html
from simcache.render.display import svg_img
from simcache.render.dot import legend_dot, render_svg
from simcache.render.frames import focus_svg, frame, op_text
from simcache.render.layout import stable
from simcache.render.moments import moments
from simcache.render.timeline import timeline_svg
from simcache.transcript import outcome_words


@pytest.fixture(scope="module")
def runs():
    return simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix")


def test_what_cannot_be_played():
    with pytest.raises(ConfigError) as e:
        PlayerModel(simulate("scenario_b", schedule=""), precompute=False)  # no initial state, no operation
    assert str(e.value) == "this run has no micro-steps to play; give it at least one operation"
    bare = simulate("crash_pr", "pre_fix", snapshots=False)
    for args in ((bare,), (simulate("crash_pr", "pre_fix"), bare)):
        with pytest.raises(ConfigError) as e:
            PlayerModel(*args, precompute=False)
        assert str(e.value) == "this run was simulated without snapshots; simulate(..., snapshots=True) to play it"


def test_the_cursor_its_bounds_and_the_operations(runs):
    m = PlayerModel(runs[0], precompute=False)
    assert (m.num_steps, m.cursor, m.go(-5), m.go(10**9), m.go(12.7), m.step(), m.step(-3)) == (263, 0, 0, 262, 12,
                                                                                               13, 10)
    assert m.op_ends()[:4] == [12, 34, 54, 81] and m.op_start(1) == 13 and m.op_start(0) == 0
    assert (m.last(), m.step_op(), m.first(), m.step_op(-1)) == (262, 262, 0, 0)  # nothing further either way
    m.go(20)
    assert (m.step_op(), m.step_op(-1), m.step_op(-1)) == (34, 12, 12) and m.cursor == 12  # none ends before 12
    assert m.step_of() == 12 and m.trace is runs[0].trace


def test_jumps_and_their_notes(runs):
    m = PlayerModel(runs[0], precompute=False)
    assert (m.jump("went-stale"), m.cursor, m.message) == (True, 122, "")
    assert (m.jump("went-stale"), m.cursor, m.message) == (False, 122, "No later went stale moment in this run.")
    assert (m.jump("readmitted"), m.cursor, m.message) == (True, 124, "")
    assert (m.jump("violation", -1), m.cursor) == (True, 49)
    assert (m.jump("violation", -1), m.message) == (False, "No earlier violation moment in this run.")
    m.last()
    assert (m.jump("readmitted", -1), m.cursor) == (True, moments(runs[0].trace)["readmitted"][-1])
    both = PlayerModel(*runs, precompute=False)
    assert (both.jump("went-stale", -1), both.message) == (False, "No earlier went stale moment in either run.")
    assert both.jump("went-stale") and both.cursor == both.position_of(0, 122)


def test_the_divergence_and_its_note(runs):
    one = PlayerModel(runs[0], precompute=False)
    assert (one.divergence, one.jump_to_divergence(), one.divergence_note()) == (None, False, "")
    same = PlayerModel(runs[0], simulate("crash_pr", "pre_fix"), precompute=False)
    assert same.divergence_note() == "The two runs never diverge on this schedule." and not same.jump_to_divergence()
    m = PlayerModel(*runs, precompute=False)
    k = m.divergence
    text = f"First divergence: operation {k} ({op_text(runs[0].trace, k)})"
    assert (k, m.divergence_note()) == (11, f"{text} [ahead]")
    assert m.jump_to_divergence() and m.cursor == m.op_start(11) and m.divergence_note() == f"{text} [here]"
    m.go(m.op_start(11) - 1)
    assert m.divergence_note() == f"{text} [ahead]"
    m.divergence = 3
    assert m.divergence_note().endswith("[behind]") and m.jump_to_divergence() and m.cursor == m.op_start(3)


def test_toggles(runs):
    m = PlayerModel(runs[0], precompute=False)
    m.set_toggles(hide_host=1)
    assert (m.hide_host, m.hide_mamba) == (True, False)
    m.set_toggles(hide_mamba="yes")
    assert (m.hide_host, m.hide_mamba) == (True, True)
    m.set_toggles(hide_host=0)
    assert (m.hide_host, m.hide_mamba) == (False, True)
    m.set_toggles()
    assert (m.hide_host, m.hide_mamba) == (False, True)
    assert m.frame().dot == frame(runs[0], 0, hide_mamba=True, legend=False).dot


def test_a_long_runs_frame_cache_keeps_the_latest(runs, monkeypatch):
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 5)
    monkeypatch.setattr(player_module, "FRAME_KEEP", 3)
    at_limit = PlayerModel(simulate("scenario_a", "followup_fix"), precompute=False)
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 37)  # exactly its length: a short run keeps every frame
    for s in range(5):
        at_limit.frame(0, s)
    assert len(at_limit._frames) == 5
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 5)
    m = PlayerModel(runs[0])  # longer than the limit: nothing precomputed
    assert m._frames == {}
    for s in range(5):
        m.frame(0, s)
    assert list(m._frames) == [(0, s, False, False) for s in (2, 3, 4)]
    short = PlayerModel(simulate("scenario_a", "followup_fix"))  # 37 steps: the patched limit is 5
    assert short._frames == {}
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 3000)
    full = PlayerModel(simulate("scenario_a", "followup_fix"))
    assert sorted(s for _, s, _, _ in full._frames) == list(range(37))
    for s in range(37):
        full.frame(0, s)
    assert len(full._frames) == 37  # a short run keeps every frame


def test_each_view_is_its_pieces(runs, monkeypatch):
    from simcache.render import svg as svg_module

    fresh = svg_module._LRU(100_000)  # nothing drawn yet: svg() must draw the operation itself
    monkeypatch.setattr(svg_module, "SVG_CACHE", fresh)
    monkeypatch.setattr(player_module, "SVG_CACHE", fresh)
    m = PlayerModel(*runs, precompute=False)
    m.go(130)
    for which, run in enumerate(runs):
        step = m.step_of(which)
        f = frame(run, step, legend=False)
        assert m.frame(which).dot == f.dot
        assert m.code(which, "sc-t9") == codepane_html(run, step, "sc-t9", run.preset)
        assert m.timeline(which) == timeline_svg(run.trace, step, title=f"{run.preset}: {outcome_words(run)}")
    single = PlayerModel(runs[0], precompute=False)
    assert single.code() == codepane_html(runs[0], 0, "sc-t0", "")
    single.set_toggles(hide_host=True)
    single.go(40)
    svg = single.svg()
    f = single.frame()
    op = runs[0].trace.ops[f.op_index]
    pinned = single.pinned(0, f.op_index)  # the operation's drawings pinned to one layout (render/layout.py)
    assert pinned == stable([single.frame(0, s).dot for s in range(op.first_step, op.last_step + 1)])
    assert svg == focus_svg(render_svg(pinned[40 - op.first_step]), f.focus)
    assert all(fresh.get(d) is not None for d in pinned)


def test_each_side_fills_its_panels_and_tab_titles(runs):
    p = Player(*runs, precompute=False)
    left, right = p.sides
    assert (left.label, right.label) == ("left: pre_fix", "right: described_fix")
    assert left.titles == ("stack", "why stale", "holders", "pools", "invariants", "legend", "timeline")
    assert [left.tabs.get_title(i) for i in range(6)][:4] == ["stack", "why stale", "holders", "pools"]
    one = Player(runs[0], precompute=False)
    side = one.sides[0]
    assert side.titles == ("stack", "why stale", "holders", "pools", "invariants", "legend") and side.label == ""
    m = one.model
    m.go(130)
    side.fill(m, 0)
    f = m.frame()
    assert side.caption.value == f"<b>{escape(f.caption)}</b>"
    assert side.tree.value == f'<div class="sc-tree {side.token}">{m.svg()}</div>'
    assert side.code.value == m.code(0, side.token)
    assert side.timeline.value == f'<div class="sc-tl">{m.timeline()}</div>'
    assert (side.stack.value, side.explanation.value, side.pools.value, side.invariants.value) == (
        f.stack, f.explanation, f.panels[2], f.invariants)
    assert side.panels.value == f.panels[3] + f.panels[0] + f.panels[1]
    assert side.legend.value == f'<div class="sc-tree sc-legend">{render_svg(legend_dot(False, False))}</div>'
    bad = {v.invariant for v in runs[0].trace.violations if v.step <= 130}
    assert side.tabs.get_title(4) == f"invariants ✗{len(bad)}" and len(bad) >= 2
    m.go(0)
    side.fill(m, 0)
    assert side.tabs.get_title(4) == "invariants"
    left.fill(p.model, 0)
    assert left.caption.value.startswith('<span class="sc-run">left: pre_fix</span> <span class="sc-count">step 0 of '
                                         '262</span> <b>')


def test_the_static_snapshot(runs):
    m = PlayerModel(runs[0], precompute=False)
    m.go(5)
    cells = []
    for what, step in (("at the cursor", 5), ("violation", 49), ("went stale", 122), ("assertion", 262)):
        f = m.frame(0, step)
        cells.append(f'<div style="display:inline-block;vertical-align:top;width:48%;margin:0 1% 12px 0">'
                     f"<p><b>{what}</b>: {escape(f.caption)}</p>{svg_img(focus_svg(render_svg(f.dot), f.focus))}"
                     "</div>")
    assert static_snapshot(m) == ('<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif">'
                                  "<p><b>Static snapshot of the player</b> (its buttons need a running kernel; run the "
                                  "notebook to step through every micro-step).</p>"
                                  f"<h4>pre_fix: {escape(outcome_words(m.runs[0]))}</h4>"
                                  + "".join(cells) + "</div>")  # the last step is the assertion: shown once
    import re

    clean = static_snapshot(PlayerModel(runs[1], precompute=False))
    assert re.findall(r"<h4>[^<]*</h4>", clean) == [
        "<h4>described_fix: no assertion; damage: double free device_kv[0, 1]; leaked host_kv[1, 2]</h4>"]
    assert re.findall(r"<p><b>([^<]*)</b>", clean) == ["Static snapshot of the player", "at the cursor", "violation",
                                                       "went stale", "cleaned up", "last step"]


def test_the_widgets_wiring(runs):
    p = Player(*runs, precompute=False)
    m = p.model
    assert (p.slider.max, p.play.max, p.play.interval, p.speed.value, p.jump_kind.value) == (
        m.num_steps - 1, m.num_steps - 1, 400, 400, "went-stale")
    p.buttons["next"].click()
    assert m.cursor == 1 and p.slider.value == 1
    p.buttons["next_op"].click()
    assert m.cursor == m.op_ends()[0]
    p.buttons["prev"].click()
    assert m.cursor == m.op_ends()[0] - 1
    p.buttons["prev_op"].click()  # no operation ended before: the cursor stays
    assert m.cursor == m.op_ends()[0] - 1
    p.buttons["jump_next"].click()
    assert m.cursor == m.position_of(0, 122)
    p.buttons["jump_prev"].click()
    assert m.cursor == m.position_of(0, 122) and m.message == "No earlier went stale moment in either run."
    assert p.note.value == f"<b>{escape(m.divergence_note())}</b><br><b>{escape(m.message)}</b>"
    p.buttons["divergence"].click()
    assert m.cursor == m.op_start(11)
    p.buttons["last"].click()
    assert m.cursor == m.num_steps - 1
    p.buttons["first"].click()
    assert m.cursor == 0
    p.slider.value = 7
    assert m.cursor == 7 and p.play.value == 7
    p.speed.value = 100
    assert p.play.interval == 100
    p.repeat.value = True
    assert p.play.repeat is True
    p.hide_host.value = True
    assert (m.hide_host, m.hide_mamba) == (True, False)
    p.hide_mamba.value = True
    assert (m.hide_host, m.hide_mamba) == (True, True)
    m.last()
    p.refresh()
    p.buttons["play"].click()  # at the end: play from the start
    assert m.cursor == 0 and p.play.playing is True
    p.buttons["pause"].click()
    assert p.play.playing is False
    m.go(9)
    p.refresh()
    p.buttons["stop"].click()
    assert (p.play.playing, m.cursor) == (False, 0)
    assert p.buttons["divergence"].layout.display is None
    assert "sc-cmp" in p.widget.children[-1]._dom_classes
    one = Player(runs[0], precompute=False)
    assert one.buttons["divergence"].layout.display == "none" and one.note.value == ""
    assert "sc-cmp" not in one.widget.children[-1]._dom_classes


def test_stepping_back_by_operation_takes_the_latest_end(runs):
    m = PlayerModel(runs[0], precompute=False)
    m.go(60)
    assert m.step_op(-1) == 54 and m.step_op(-1) == 34  # the latest operation end before the cursor, each time


def test_what_precompute_draws(runs, monkeypatch):
    pre, fixed = runs  # 263 and 272 micro-steps
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 265)
    m = PlayerModel(fixed, pre)  # the first run is over the limit and skipped; the second is still drawn
    assert {(w, s) for w, s, _, _ in m._frames} == {(1, s) for s in range(263)}
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 263)
    exact = PlayerModel(pre)  # exactly at the limit: drawn
    assert len(exact._frames) == 263
    from simcache.render import svg as svg_module

    fresh = svg_module._LRU(100_000)  # an empty cache: what is in it afterwards, precompute drew
    monkeypatch.setattr(svg_module, "SVG_CACHE", fresh)
    monkeypatch.setattr(player_module, "PRECOMPUTE_LIMIT", 3000)
    both = PlayerModel(pre, fixed)  # every drawing of both runs rendered in the one pass
    assert all(fresh.get(d) is not None for w, r in enumerate((pre, fixed)) for k in range(len(r.trace.ops))
               for d in both.pinned(w, k))


def test_playing_rewinds_only_at_the_end_and_pausing_never(runs):
    p = Player(runs[0], precompute=False)
    m = p.model
    m.go(m.num_steps - 2)
    p.refresh()
    p.buttons["play"].click()
    assert m.cursor == m.num_steps - 2 and p.play.playing is True
    p.buttons["pause"].click()
    m.last()
    p.refresh()
    p.buttons["pause"].click()
    assert m.cursor == m.num_steps - 1 and p.play.playing is False


def test_a_side_at_a_violations_own_step_and_with_the_tiers_hidden(runs):
    one = Player(runs[0], precompute=False)
    side, m = one.sides[0], one.model
    m.go(49)
    m.set_toggles(hide_host=True)
    side.fill(m, 0)
    assert side.tabs.get_title(4) == "invariants ✗1"  # the violation at this very step counts
    assert side.legend.value == f'<div class="sc-tree sc-legend">{render_svg(legend_dot(True, False))}</div>'
    assert legend_dot(True, False) != legend_dot(False, False)
    m.set_toggles(hide_host=False, hide_mamba=True)
    side.fill(m, 0)
    assert side.legend.value == f'<div class="sc-tree sc-legend">{render_svg(legend_dot(False, True))}</div>'
    assert legend_dot(False, True) != legend_dot(False, False)


def test_a_static_snapshot_at_a_moment_shows_it_once_and_the_rest(runs, monkeypatch):
    import re

    m = PlayerModel(runs[0], precompute=False)
    m.go(49)  # the cursor is on the first violation
    assert re.findall(r"<p><b>([^<]*)</b>", static_snapshot(m)) == ["Static snapshot of the player", "at the cursor",
                                                                   "went stale", "assertion"]
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", shown.append)
    p = Player(runs[0], precompute=False)
    p._ipython_display_()
    assert shown[0] is p.widget and shown[1].data == p.static_html()


def test_no_run_skips_a_step_side_by_side():
    """What ``jump`` rests on: from one position to the next, each run's shown step moves by zero or one, from its
    first step to its last, for every gallery scenario and every pair of presets."""
    from simcache.render.moments import compare_positions
    from simcache.scenario import gallery

    presets = ("pre_fix", "merged_fix", "described_fix", "followup_fix")
    for name in gallery():
        traces = {p: simulate(name, p).trace for p in presets}
        for i, a in enumerate(presets):
            for b in presets[i + 1:]:
                positions, _ = compare_positions([traces[a], traces[b]])
                for which, t in enumerate((traces[a], traces[b])):
                    shown = [p[which] for p in positions]
                    assert shown[0] == 0 and shown[-1] == len(t.steps) - 1, (name, a, b)
                    assert {y - x for x, y in zip(shown, shown[1:], strict=False)} <= {0, 1}, (name, a, b)


def test_a_jump_goes_to_the_nearer_of_the_two_runs_moments():
    # scenario D: pre_fix violates at steps 5, 8, 15, 16; merged_fix only at 5 (the same positions side by side)
    m = PlayerModel(simulate("scenario_d", "pre_fix"), simulate("scenario_d", "merged_fix"), precompute=False)
    m.go(12)
    assert (m.jump("violation", -1), m.cursor) == (True, 8)  # back: pre_fix's 8 before merged_fix's 5
    assert (m.jump("violation", -1), m.cursor, m.message) == (True, 5, "")
    assert (m.jump("violation", -1), m.cursor, m.message) == (False, 5, "No earlier violation moment in either run.")
    # scenario B: pre_fix raises at position 148, described_fix at 151
    m = PlayerModel(simulate("scenario_b", "pre_fix"), simulate("scenario_b", "described_fix"), precompute=False)
    assert [(m.jump("assertion"), m.cursor) for _ in range(3)] == [(True, 148), (True, 151), (False, 151)]
    assert m.message == "No later assertion moment in either run."
