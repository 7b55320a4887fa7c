"""The views of scenario C under pre_fix: DOT goldens at the key moments, text panels, the timeline, the
explanation, plots, and one real ``dot`` render.

Story: node #8 = [1,2] goes stale at a micro-step inside operation 5, ``request [1,2,7]`` (write_backup ->
evict_host -> the tombstone cascade detaches the node the insert loop stands on); the run's last micro-step is
``AssertionError: parent does not have child key, 1`` in ``_delete_tombstone_leaf`` on that same node.
The whole DOT at the two key moments is a syrupy snapshot (``tests/__snapshots__/test_render.ambr``): after an
intended change, ``pytest tests/test_render.py --snapshot-update`` and review the diff.
"""
from __future__ import annotations

import pytest
from views_helpers import ARTIFACTS, run_c, scenario_doc, story

from simcache.render import (
    abbreviate_key,
    explain_stale,
    highlight_at,
    holders_panel,
    invariants_panel,
    lru_panel,
    moments,
    pools_panel,
    render_many,
    render_png,
    render_svg,
    sets_panel,
    snapshot_to_dot,
    stack_panel,
    step_x,
    timeline_svg,
)
from simcache.render.dot import child_key_text
from simcache.render.frames import frame, tree_dot
from simcache.simulate import simulate

S = story()
STALE_STEP, CRASH_STEP = S["stale"], S["crash"]


def test_the_story_is_where_the_goldens_expect_it():
    t = run_c().trace
    assert len(t.went_stale) == 1 and t.went_stale[0].node == 8
    assert t.ops[5].first_step < STALE_STEP < t.ops[5].last_step
    assert moments(t)["assertion"] == (CRASH_STEP,) == (S["last"],)


def test_went_stale_dot_marks_the_node_detached_with_ghost_edge_and_holders(snapshot):
    dot = tree_dot(run_c(), STALE_STEP)
    n8 = next(line for line in dot.splitlines() if line.strip().startswith("n8 "))
    assert 'class="node-box changed stale went-stale"' in n8
    assert 'color="#dc2626"' in n8 and "dashed" in n8 and "WENT STALE" in n8
    assert "subgraph cluster_stale" in dot and "still referenced: STALE" in dot
    assert 'n2 -> n8 [label=" was 1 " style="dotted"' in dot  # the ghost edge to where it hung
    holders = next(line for line in dot.splitlines() if line.strip().startswith("h8 "))
    for name in ("_inc_hit_count()", "write_backup()", "_insert_helper(): node"):
        assert name in holders
    assert "h8 -> n8 [style=\"dashed\"" in dot
    assert 'n2 -> n10 [label=" 5 "]' in dot  # attached nodes hang from their parent, labelled by child key
    assert dot == snapshot  # the whole DOT (syrupy: review an intended change with --snapshot-update)


def test_assertion_dot_marks_the_node_where_it_fired(snapshot):
    dot = tree_dot(run_c(), CRASH_STEP)
    n8 = next(line for line in dot.splitlines() if line.strip().startswith("n8 "))
    assert "assertion" in n8 and "ASSERTION FIRED HERE" in n8
    assert "still referenced: STALE" in dot  # the cascade's _delete_tombstone_leaf(node) held it as it raised
    assert "_delete_tombstone_leaf(): node (deleting it)" in dot
    assert dot == snapshot


def test_cleaned_up_node_is_drawn_green_double_under_described_fix():
    run = run_c("described_fix")
    ev = run.trace.cleaned_up[0]
    dot = tree_dot(run, ev.step)
    line = next(x for x in dot.splitlines() if x.strip().startswith(f"n{ev.node} "))
    assert "cleaned-up" in line and 'peripheries="2"' in line and "CLEANED UP" in line


def test_dot_is_deterministic_across_runs():
    other = simulate(scenario_doc("scenario_C_ops"), "pre_fix")
    for step in (0, 50, STALE_STEP, CRASH_STEP):
        assert tree_dot(other, step) == tree_dot(run_c(), step)


def test_new_changed_and_toggles():
    t = run_c().trace
    step = S["first_attach"]  # attaches [1,2,3,4] (#7) under the root in operation 1
    snap, before = t.snapshots[step], t.snapshots[t.ops[1].first_step]
    dot = snapshot_to_dot(snap, before)
    assert "node-box new" in dot and "NEW" in dot
    assert "node-box new" not in snapshot_to_dot(snap, snap)
    full = tree_dot(run_c(), S["late"])
    assert "KV: both" in full and "M host" in full and "tombstone" in full
    no_host = tree_dot(run_c(), S["late"], hide_host=True)
    assert "KV: both" not in no_host and "M host" not in no_host and "host ref" not in no_host
    no_mamba = tree_dot(run_c(), S["late"], hide_mamba=True)
    assert "tombstone" not in no_mamba and "M dev" not in no_mamba


def test_keys_and_child_keys_read_like_sglang():
    assert abbreviate_key(tuple(range(1, 65))) == "1,2,3,…,64 (64)"
    assert abbreviate_key((1, 2, 3)) == "1,2,3"
    assert child_key_text((1, 2, 3), 1) == "1"
    assert child_key_text((1, 2, 3, 4), 2) == "(1, 2)"


def test_went_stale_badge_at_the_moment_then_the_node_stays_a_ghost():
    t = run_c().trace
    assert highlight_at(t, STALE_STEP - 1)["went_stale"] == []
    assert highlight_at(t, STALE_STEP)["went_stale"] == [8]
    assert highlight_at(t, t.ops[5].last_step)["went_stale"] == []  # issue #13: the badge belongs to the moment
    assert highlight_at(t, t.ops[5].last_step)["ghosts"][8].badge == f"STALE since step {STALE_STEP}"
    assert 8 in highlight_at(t, t.ops[6].first_step)["ghosts"]
    assert highlight_at(t, CRASH_STEP)["assertion"] == [8]


def test_text_panels():
    t = run_c().trace
    assert "sc-chip sc-stale" in lru_panel(t.snapshots[S["child"]])  # [7]#11 in the LRU, under a detached parent
    assert "evictable_full_host_leaves" in sets_panel(t.snapshots[0])
    end = pools_panel(t.snapshots[CRASH_STEP])
    assert "double-freed [0, 1]" in end and "size counters" in end
    ledger = holders_panel(t.snapshots[STALE_STEP])
    assert "write_backup()" in ledger and "a simulated call that will keep using it" in ledger
    assert "no stale node" in holders_panel(t.snapshots[0])
    assert "sc-red" not in invariants_panel(t, 0)
    inv = invariants_panel(t, STALE_STEP)
    assert 'sc-red" data-invariant="backup_continuity"' in inv
    assert f"First violation: step {S['first_violation']}" in inv
    stack = stack_panel(t.steps[STALE_STEP], "main: request [1,2,7]")
    assert "write_backup()" in stack and "_delete_tombstone_leaf()" in stack and "detach [1,2]#8" in stack


def test_explanation_tells_the_whole_story():
    text = explain_stale(run_c().trace, 8)
    assert f"went stale at step {STALE_STEP}, during operation 5 (main: request [1,2,7])" in text
    assert "write_backup -> evict_host" in text and "re-entrancy" in text
    assert "write_backup(), which will carry on using it when evict_host returns" in text
    assert f"step {S['child']}: a new child is attached under it" in text
    assert f"step {CRASH_STEP}: the simulated cache raises AssertionError: parent does not have child key, 1" in text
    assert "cleans it up" in explain_stale(run_c("described_fix").trace, 8)
    assert "never went stale" in explain_stale(run_c().trace, 10)
    assert "No node is stale yet" in frame(run_c(), 0).explanation


def test_timeline_has_lanes_markers_and_cursor():
    t = run_c().trace
    svg = timeline_svg(t, STALE_STEP, title="C")
    assert svg.count('class="tl-op"') == len(t.ops) == 10
    assert f'class="tl-moment tl-went-stale" data-step="{STALE_STEP}"' in svg
    assert f'tl-assertion" data-step="{CRASH_STEP}"' in svg and "tl-violation" in svg
    assert ">write acks<" in svg and ">storage acks<" in svg
    assert f'class="tl-cursor" x1="{step_x(t, STALE_STEP)}"' in svg
    assert step_x(t, 0) < step_x(t, STALE_STEP) < step_x(t, CRASH_STEP)


def test_real_dot_renders_svg_and_png():
    dot = tree_dot(run_c(), STALE_STEP)
    svg = render_svg(dot)
    assert svg.startswith("<svg") and 'class="node node&#45;box changed stale went&#45;stale"' in svg
    assert render_many([dot, tree_dot(run_c(), 0)])[0] == svg
    png = render_png(dot)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "scenario_c_went_stale.png").write_bytes(png)


def test_plots_return_figures_and_png():
    from matplotlib.figure import Figure

    from simcache.render.plots import crash_rate_vs_pressure, exploration_stats, pool_occupancy, to_png

    figs = [pool_occupancy(run_c().trace),
            crash_rate_vs_pressure([{"preset": p, "pressure": x, "crash_rate": r} for p, x, r in
                                    [("pre_fix", 0.5, 0.1), ("pre_fix", 1.0, 0.4), ("followup_fix", 1.0, 0.0)]]),
            exploration_stats({"schedules": 10, "failing": 3}),
            exploration_stats({"pre_fix": {"schedules": 10, "failing": 3}, "followup_fix": {"schedules": 10}})]
    for fig in figs:
        assert isinstance(fig, Figure)
        assert to_png(fig)[:4] == b"\x89PNG"
    ax = figs[0].axes[0]
    assert {line.get_label() for line in ax.get_lines()} >= {"device_kv (32 slots)", "went-stale", "assertion"}


def test_gallery_scenario_c_draws_the_same_stale_node():
    run = simulate("scenario_c", "pre_fix")
    step = run.trace.went_stale[0].step
    assert "went-stale" in tree_dot(run, step) and "ASSERTION FIRED HERE" in tree_dot(run, len(run.trace.steps) - 1)


def test_export_dedupes_drawings_and_shows_operations_plus_moments_for_long_runs(monkeypatch, tmp_path):
    import simcache.export as export

    data = export.page_data(run_c())
    frames = data["runs"][0]["frames"]
    assert len(frames) == S["last"] + 1 and len(data["svgs"]) < len(frames) / 2  # identical drawings stored once
    monkeypatch.setattr(export, "MICRO_LIMIT", 50)
    t = run_c().trace
    steps = export.frame_steps(t)
    assert set(steps) == {o.last_step for o in t.ops} | {STALE_STEP, CRASH_STEP} | {v.step for v in t.violations} \
        | {e.step for e in t.readmitted}
    page = export.export_html(run_c(), tmp_path / "ops.html").read_text()
    assert page.count('"step":') == len(steps)


def test_export_to_a_missing_folder_says_how_to_fix(tmp_path):
    from simcache.errors import ConfigError
    from simcache.export import export_html

    with pytest.raises(ConfigError, match="check that its folder exists"):
        export_html(run_c(), tmp_path / "nope" / "c.html")
    assert not (tmp_path / "nope").exists()


def test_crash_rate_plot_labels_what_it_counts_and_fits_the_data():
    from simcache.render.plots import crash_rate_vs_pressure

    rows = [{"preset": "pre_fix", "pressure": x, "crash_rate": c, "race_rate": r}
            for x, c, r in [(1, 0.0, 0.0), (4, 0.1, 0.05), (16, 0.25, 0.2)]]
    ax = crash_rate_vs_pressure(rows, field="race_rate").axes[0]
    assert ax.get_ylabel() == "fraction of runs reaching\nparent does not have child key"  # issue #13, defect 6
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[0.0, 0.05, 0.2]]
    assert ax.get_ylim()[1] < 0.3  # data stopping at 0.25 is not squashed onto a 0-1 axis
    assert crash_rate_vs_pressure(rows).axes[0].get_ylabel() == "fraction of runs raising\nany assertion"
    with pytest.raises(ValueError, match="unknown rate"):
        crash_rate_vs_pressure(rows, field="nope")


def test_a_batch_draws_each_graph_as_dot_draws_it_alone():
    """An export's bytes never depend on what the process drew before: ``render_many`` (one ``dot`` for many graphs,
    which names the second graph ``page0,1_graph0``) leaves each SVG exactly as ``dot`` draws that graph alone."""
    import graphviz

    from simcache.render import svg as svgmod
    from simcache.render.frames import tree_dot
    from simcache.simulate import simulate

    run = simulate("crash_pr", "pre_fix")
    dots = [tree_dot(run, s) for s in (120, 121, 122)]
    alone = [svgmod._strip(graphviz.pipe("dot", "svg", d.encode()).decode()) for d in dots]
    raw = graphviz.pipe("dot", "svg", "".join(dots).encode()).decode()
    assert raw.count('<g id="page0,1_graph0"') == 2  # what dot does in a batch
    svgmod.SVG_CACHE.data.clear()
    assert svgmod.render_many(dots) == alone
    assert all('id="graph0"' in s and "page0" not in s for s in alone)
