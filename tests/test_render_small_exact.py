"""Exact outcomes of the small views (issue #19's mutation scores): Graphviz's SVG cache and prolog stripping, the
frames' focus outline, caption and operation frames, the timeline's geometry and markers, and the plots' data.
Graphviz is replaced by a recorder where the test is about what is sent to it, so these run without ``dot``."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import make_cache
from matplotlib.colors import to_rgba
from views_helpers import run_c, scenario_doc

import simcache.render.svg as svgmod
from simcache.driver import Driver
from simcache.errors import SimcacheError
from simcache.render.dot import snapshot_to_dot
from simcache.render.frames import caption, focus_svg, frame, op_frames, page_size, tree_dot
from simcache.render.ghosts import highlight_at
from simcache.render.moments import moments_at
from simcache.render.svg import _LRU, _strip
from simcache.render.timeline import step_x, timeline_svg
from simcache.simulate import simulate
from simcache.trace import Recorder


def test_focus_svg_marks_only_the_first_box_of_that_node():
    svg = '<g id="n1" class="node"><g id="n12" class="node"><g id="n1" class="node">'
    assert focus_svg(svg, 1) == '<g id="n1" class="focus node"><g id="n12" class="node"><g id="n1" class="node">'
    assert focus_svg(svg, None) == svg
    assert focus_svg(svg, 3) == svg


def test_the_lru_keeps_the_most_recently_used_entries_in_order():
    lru = _LRU(2)
    lru.put("a", "A")
    lru.put("b", "B")
    assert lru.get("a") == "A"  # a is now the most recent
    lru.put("c", "C")  # evicts b, the least recently used
    assert list(lru.data.items()) == [("a", "A"), ("c", "C")]
    assert lru.get("b") is None
    lru.put("a", "A2")  # an update is a use
    assert list(lru.data.items()) == [("c", "C"), ("a", "A2")]
    assert lru.size == 2


def test_strip_drops_the_prolog_and_every_comment():
    raw = ('<?xml version="1.0"?>\n<!-- Generated\n by dot -->\n<svg width="1">\n<!-- n1 -->\n<g/>\n'
           '<!-- n2 --></svg>\n')
    assert _strip(raw) == '<svg width="1">\n<g/>\n</svg>'
    assert _strip("<svg>x</svg>\n\n") == "<svg>x</svg>"  # already at the start: still trimmed
    assert _strip("no drawing <!-- a -->\nhere ") == "no drawing here "  # no <svg: comments only
    # a comment over several lines inside the drawing, and an <svg> nested in it (the first one starts it)
    assert _strip('<?xml?>\n<svg><!-- a\nb -->\n<svg/></svg>') == "<svg><svg/></svg>"


@pytest.fixture
def fake_dot(monkeypatch):
    """graphviz.pipe replaced by a recorder that draws each graph in its input as '<svg>NAME</svg>'."""
    calls = []

    def pipe(engine, fmt, data):
        calls.append((engine, fmt, data.decode("utf-8")))
        names = [g.split("{")[0].strip() for g in data.decode("utf-8").split("digraph ")[1:]]
        return "".join(f'<?xml?>\n<!-- c -->\n<svg>{n}é</svg>\n' for n in names).encode("utf-8")

    monkeypatch.setattr(svgmod.graphviz, "pipe", pipe)
    monkeypatch.setattr(svgmod, "SVG_CACHE", _LRU(8))
    return calls


def test_render_svg_runs_dot_once_per_source_and_caches_the_stripped_svg(fake_dot):
    assert svgmod.render_svg("digraph a {}") == "<svg>aé</svg>"
    assert svgmod.render_svg("digraph a {}") == "<svg>aé</svg>"
    assert fake_dot == [("dot", "svg", "digraph a {}")]
    assert list(svgmod.SVG_CACHE.data.items()) == [("digraph a {}", "<svg>aé</svg>")]


def test_render_many_feeds_the_new_sources_to_one_dot_in_order(fake_dot):
    svgmod.render_svg("digraph a {}")
    out = svgmod.render_many(["digraph b {}", "digraph a {}", "digraph c {}", "digraph b {}"])
    assert out == ["<svg>bé</svg>", "<svg>aé</svg>", "<svg>cé</svg>", "<svg>bé</svg>"]
    assert fake_dot == [("dot", "svg", "digraph a {}"), ("dot", "svg", "digraph b {}digraph c {}")]
    # the closing look-ups used them a, then c, then b last
    assert list(svgmod.SVG_CACHE.data.items()) == [("digraph a {}", "<svg>aé</svg>"), ("digraph c {}", "<svg>cé</svg>"),
                                                  ("digraph b {}", "<svg>bé</svg>")]
    assert svgmod.render_many(["digraph a {}"]) == ["<svg>aé</svg>"] and len(fake_dot) == 2  # all cached: no dot


def test_render_many_falls_back_to_one_dot_per_source_when_the_split_differs(fake_dot):
    # two sources but one graph in dot's output: each is rendered on its own instead
    out = svgmod.render_many(["digraph d {}", "// nothing\n"])
    assert out == ["<svg>dé</svg>", ""]
    assert [c[2] for c in fake_dot] == ["digraph d {}// nothing\n", "digraph d {}", "// nothing\n"]


def test_render_png_sets_the_dpi_in_the_first_graph_line_only(fake_dot, monkeypatch):
    seen = []
    monkeypatch.setattr(svgmod.graphviz, "pipe", lambda engine, fmt, data: seen.append((engine, fmt, data)) or b"PNG")
    assert svgmod.render_png("digraph a {\n  x;\n  subgraph s {\n  }\n}") == b"PNG"
    assert svgmod.render_png("digraph a {\n}", dpi=40) == b"PNG"
    assert seen == [("dot", "png", b'digraph a {\n  graph [dpi="110"];\n  x;\n  subgraph s {\n  }\n}'),
                    ("dot", "png", b'digraph a {\n  graph [dpi="40"];\n}')]


def test_page_size_is_the_scenarios_or_one():
    assert page_size(SimpleNamespace(scenario=SimpleNamespace(config={"page_size": "4"}))) == 4
    assert page_size(SimpleNamespace(scenario=SimpleNamespace(config={}))) == 1
    assert page_size(SimpleNamespace()) == 1
    assert page_size(run_c()) == 1


def test_caption_names_preset_step_operation_and_moments():
    run = run_c()
    t = run.trace
    last = len(t.steps) - 1
    k = len(t.ops) - 1
    from simcache.render.explain import op_text
    # one plain sentence under its operation; the step number is the view's one counter, not the caption's
    assert caption(run, last) == (f"Op {k} ({op_text(t, k)}): The simulated cache raises AssertionError in "
                                  "_delete_tombstone_leaf: parent does not have child key, 1.")
    assert caption(run, 0) == f"Op 0 ({op_text(t, 0)}): The operation begins."


def test_caption_lists_two_moments_at_one_step_comma_separated():
    # scenario A under pre_fix: the cascade's detach of [1,2] makes it go stale and breaks an invariant at once
    run = simulate("scenario_a", "pre_fix")
    t = run.trace
    step = t.went_stale[0].step
    assert moments_at(t, step) == ("went-stale", "violation")
    assert caption(run, step) == ("Op 1 (mem: evict_host n=1): #7 [1,2] is detached from the root (slot 1): the tree "
                                  "no longer reaches it. #7 goes stale here: detached while still held. An invariant "
                                  "breaks here: attachment, no_leak.")


def test_tree_dot_passes_every_option_and_compares_with_the_operations_first_state():
    run = run_c()
    t = run.trace
    step = t.ops[5].first_step + 2
    for hide_host, hide_mamba, legend in [(True, False, True), (False, True, False), (False, False, True)]:
        assert tree_dot(run, step, hide_host=hide_host, hide_mamba=hide_mamba, legend=legend) == snapshot_to_dot(
            t.snapshots[step], t.snapshots[t.ops[5].first_step], highlight=highlight_at(t, step),
            hide_host=hide_host, hide_mamba=hide_mamba, page_size=1, legend=legend)
    assert tree_dot(run, step) == tree_dot(run, step, hide_host=False, hide_mamba=False, legend=True)


def test_tree_dot_labels_the_edges_with_the_runs_page_size():
    # page size 2: each child is keyed by its first page, so the edges read "(1, 2)", not "1" (page size 1's)
    doc = {"config": {"page_size": 2}, "ops": [{"op": "request", "tokens": [1, 2, 3, 4]},
                                              {"op": "request", "tokens": [1, 2, 5, 6]}]}
    run = simulate(doc, "pre_fix")
    t = run.trace
    last = len(t.steps) - 1
    dot = tree_dot(run, last, legend=False)
    assert dot == snapshot_to_dot(t.snapshots[last], t.snapshots[t.ops[1].first_step],
                                  highlight=highlight_at(t, last), page_size=2, legend=False)
    assert [line for line in dot.splitlines() if " -> " in line] == [
        '  n2 -> n8 [label=" (1, 2) "];', '  n8 -> n7 [label=" (3, 4) "];', '  n8 -> n9 [label=" (5, 6) "];']


def test_tree_dot_of_a_run_with_no_operations_compares_with_nothing():
    # a Recorder driven by hand (no begin_op): micro-steps but no operations, so no operation's first state to
    # compare with, and nothing is marked new or changed
    cache = make_cache()
    rec = Recorder()
    drv = Driver(cache)
    rec.attach(cache, drv)
    drv.start([1, 2])
    assert (len(rec.steps), rec.ops) == (6, [])
    assert tree_dot(SimpleNamespace(trace=rec), 5, legend=False) == (
        'digraph cache {\n'
        '  graph [rankdir="TB" fontname="Helvetica" nodesep="0.35" ranksep="0.5" bgcolor="white" pad="0.2"];\n'
        '  node [shape="box" fontname="Helvetica" fontsize="12" margin="0.05"];\n'
        '  edge [fontname="Helvetica" fontsize="12" color="#374151"];\n'
        '  n2 [id="n2" fillcolor="#f3f4f6" color="#1d4ed8" penwidth="1.5" style="filled" class="node-box" '
        'label=<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2"><TR><TD ALIGN="LEFT" COLSPAN="2">'
        '<FONT POINT-SIZE="15"><B>root</B></FONT><FONT COLOR="#6b7280">  #2</FONT></TD></TR><TR><TD COLSPAN="1" '
        'BGCOLOR="#1e3a8a"><FONT COLOR="#ffffff"><B>lock 1</B></FONT></TD><TD></TD></TR></TABLE>>];\n'
        '}\n')


def test_frame_rejects_a_step_outside_the_run_and_passes_its_options():
    run = run_c()
    last = len(run.trace.steps) - 1
    for bad in (-1, last + 1):
        with pytest.raises(IndexError) as info:
            frame(run, bad)
        assert str(info.value) == f"step {bad} is outside this run's 0..{last}"
    # the check is frame's own: a run's lazy snapshots reject step len(steps) with the same sentence, so the run
    # must be one that keeps none (its snapshots are a plain list, which would say "list index out of range")
    bare = simulate(scenario_doc("scenario_C_ops"), "pre_fix", snapshots=False)
    assert bare.trace.snapshots == [] and len(bare.trace.steps) == last + 1
    with pytest.raises(IndexError) as info:
        frame(bare, last + 1)
    assert str(info.value) == f"step {last + 1} is outside this run's 0..{last}"
    # a step inside such a run is one sentence saying how to get frames, from frame and from tree_dot alike
    for draw in (frame, tree_dot):
        with pytest.raises(SimcacheError) as info:
            draw(bare, 0)
        assert str(info.value) == ("this run keeps no snapshots (it was simulated with snapshots=False); simulate it "
                                   "again with snapshots=True to draw its frames")
    f = frame(run, last, hide_host=True, hide_mamba=True, legend=False)
    assert f.step == last and f.op_index == len(run.trace.ops) - 1
    assert f.dot == tree_dot(run, last, hide_host=True, hide_mamba=True, legend=False)
    assert f.focus == run.trace.steps[last].node and f.moments == ("assertion",)
    assert frame(run, 0).dot == tree_dot(run, 0)


def test_op_frames_are_each_operations_last_step_or_the_runs_last():
    ops = [SimpleNamespace(last_step=0), SimpleNamespace(last_step=-1), SimpleNamespace(last_step=2)]
    assert op_frames(SimpleNamespace(ops=ops, steps=[0] * 5)) == [0, 4, 2]


def small_trace(crashed="AssertionError: boom"):
    """Two operations (R1's request, then main's evict, still running at the end), a write ack, a stale node, two
    violations and the assertion: every lane and marker of a timeline, small enough to spell out."""
    ev = SimpleNamespace
    ops = [ev(op={"op": "request", "tokens": [1, 2]}, actor="R1", status=".", first_step=0, last_step=1),
           ev(op={"op": "evict", "n": 2}, actor=None, status="", first_step=2, last_step=-1)]
    steps = [ev(index=0, kind="op", text="a"), ev(index=1, kind="write_ack", text="ack <w>"),
             ev(index=2, kind="x", text="c"), ev(index=3, kind="assertion", text="boom")]
    return ev(ops=ops, steps=steps, went_stale=[ev(step=2)], readmitted=[ev(step=1)], cleaned_up=[],
              violations=[ev(step=3), ev(step=2)], crashed=crashed)


def test_step_x_places_a_step_inside_its_operations_column():
    t = small_trace()  # columns of (300 - 118 - 8) / 2 = 87 from x = 118
    assert [step_x(t, s, 300) for s in range(4)] == [139.8, 183.2, 226.8, 270.2]
    assert step_x(t, 0) == round(118 + (960 - 126) / 2 * 0.25, 1) == 222.2  # default width 960
    assert step_x(SimpleNamespace(ops=[], steps=[]), 5, 300) == 118.0


def test_the_timeline_svg_of_a_small_run_is_exact():
    svg = timeline_svg(small_trace(), 1, width=300, title="T<1>")
    expected = [
        '<svg xmlns="http://www.w3.org/2000/svg" class="sc-timeline" width="300" height="166" '
        'viewBox="0 0 300 166" font-family="Helvetica,Arial,sans-serif" font-size="12">',
        '<text x="4" y="14" font-weight="bold">T&lt;1&gt;</text>',
        '<rect x="0" y="22" width="300" height="26" fill="#ffffff"/>',
        '<text x="4" y="39" fill="#374151">moments</text>',
        '<rect x="0" y="48" width="300" height="26" fill="#f9fafb"/>', '<text x="4" y="65" fill="#374151">R1</text>',
        '<rect x="0" y="74" width="300" height="26" fill="#ffffff"/>', '<text x="4" y="91" fill="#374151">main</text>',
        '<rect x="0" y="100" width="300" height="26" fill="#f9fafb"/>',
        '<text x="4" y="117" fill="#374151">write acks</text>',
        '<g class="tl-op" data-op="0" data-step="0"><title>op 0 · R1: request [1,2] · status .</title>'
        '<rect x="119.0" y="51" width="85.0" height="20" rx="3" fill="#bfdbfe" stroke="#6b7280" stroke-width="0.6"/>',
        '<text x="161.5" y="65" text-anchor="middle">request</text>', '</g>',
        '<g class="tl-op" data-op="1" data-step="2"><title>op 1 · main: evict n=2 · status ?</title>'
        '<rect x="206.0" y="77" width="85.0" height="20" rx="3" fill="#fde68a" stroke="#6b7280" stroke-width="0.6"/>',
        '<text x="248.5" y="91" text-anchor="middle">evict</text>', '</g>',
        '<circle class="tl-ack" cx="183.2" cy="113.0" r="4" fill="#0d9488">'
        '<title>step 1: ack &lt;w&gt;</title></circle>',
        '<g class="tl-moment tl-went-stale" data-step="2"><title>step 2: went-stale</title>'
        '<line x1="226.8" y1="22" x2="226.8" y2="126" stroke="#e5e7eb"/>'
        '<path d="M219.8,28.0 L233.8,28.0 L226.8,41.0 Z" fill="#dc2626"/></g>',
        '<g class="tl-moment tl-violation" data-step="2"><title>step 2: violation</title>'
        '<line x1="226.8" y1="22" x2="226.8" y2="126" stroke="#e5e7eb"/>'
        '<path d="M226.8,28.0 L233.8,35.0 L226.8,42.0 L219.8,35.0 Z" fill="#f59e0b" stroke="#92400e"/></g>',
        '<g class="tl-moment tl-violation" data-step="3"><title>step 3: violation</title>'
        '<line x1="270.2" y1="22" x2="270.2" y2="126" stroke="#e5e7eb"/>'
        '<path d="M270.2,31.0 L274.2,35.0 L270.2,39.0 L266.2,35.0 Z" fill="#f59e0b" stroke="#92400e"/></g>',
        '<g class="tl-moment tl-assertion" data-step="3"><title>step 3: assertion</title>'
        '<line x1="270.2" y1="22" x2="270.2" y2="126" stroke="#e5e7eb"/>'
        '<path d="M264.2,29.0 L276.2,41.0 M264.2,41.0 L276.2,29.0" stroke="#7f1d1d" stroke-width="4"/></g>',
        '<text x="161.5" y="140" text-anchor="middle" fill="#6b7280" font-size="11">0</text>',
        '<text x="248.5" y="140" text-anchor="middle" fill="#6b7280" font-size="11">1</text>',
        '<text x="4" y="140" fill="#6b7280" font-size="11">operation</text>',
        '<path d="M117,149 L131,149 L124,162 Z" fill="#dc2626"/><text x="134" y="160">went stale</text>',
        '<circle cx="234" cy="156" r="6" fill="#16a34a"/><text x="244" y="160">cleaned up</text>',
        '<path d="M344,152 L348,156 L344,160 L340,156 Z" fill="#f59e0b" stroke="#92400e"/>'
        '<text x="354" y="160">violation</text>',
        '<path d="M448,150 L460,162 M448,162 L460,150" stroke="#7f1d1d" stroke-width="4"/>'
        '<text x="464" y="160">assertion</text>',
        '<line class="tl-cursor" x1="183.2" y1="18" x2="183.2" y2="128" stroke="#2563eb" stroke-width="3"/>',
        "</svg>"]
    assert svg == "".join(expected)


def test_a_timeline_without_cursor_title_crash_or_room_for_labels():
    t = small_trace(crashed=None)
    svg = timeline_svg(t, width=200)  # columns of 37: no operation labels, a tick every 2 operations
    assert '<text x="4" y="14" font-weight="bold">timeline</text>' in svg
    assert 'class="tl-cursor" x1="-10" y1="18" x2="-10" y2="128"' in svg
    assert "tl-assertion" not in svg and 'text-anchor="middle">request<' not in svg
    assert '">0</text>' in svg and '">1</text>' not in svg
    assert svg.count("<title>") == 2 + 1 + 3  # two operations, one ack, stale + two violations


def pools_trace():
    """Three snapshots of a 4-slot pool filling up, with slot 2 leaked past operation 0's end (slot 3 only inside
    operation 1), an empty 0-slot pool, two stale moments and no crash."""
    ev = SimpleNamespace

    def snap(used, leaked):
        return ev(pools={"device_kv": ev(size=4, used=used, leaked=leaked), "other": ev(size=0, used=[], leaked=[])})

    return ev(snapshots=[snap([1], []), snap([1, 2], [2]), snap([1, 2, 3], [2, 3])],
              ops=[ev(first_step=0, last_step=1), ev(first_step=2, last_step=-1)],
              steps=[ev(index=i, kind="op", text="") for i in range(3)], went_stale=[ev(step=2), ev(step=1)],
              readmitted=[], cleaned_up=[], violations=[], crashed=None)


def line_facts(ax):
    # (matplotlib names an unlabelled artist "_childN")
    return [(None if line.get_label().startswith("_") else line.get_label(), list(line.get_xdata()),
             list(line.get_ydata()), line.get_color(), line.get_linestyle(), line.get_linewidth(),
             line.get_drawstyle(), line.get_zorder()) for line in ax.get_lines()]


def test_pool_occupancy_draws_used_fractions_leaks_moments_and_boundaries():
    from matplotlib.figure import Figure

    from simcache.render.plots import pool_occupancy
    fig = pool_occupancy(pools_trace(), title="P")
    assert list(fig.get_size_inches()) == [10, 3.8] and fig.dpi == 100
    ax = fig.axes[0]
    other = ax.get_lines()[1].get_color()  # the colour cycle's for a pool without its own colour
    assert line_facts(ax) == [
        ("device_kv (4 slots)", [0, 1, 2], [0.25, 0.5, 0.75], "#1d4ed8", "-", 2, "steps-post", 2),
        ("other (0 slots)", [0, 1, 2], [0, 0, 0], other, "-", 2, "steps-post", 2),
        ("went-stale", [1, 1], [0, 1], "#dc2626", "--", 1.5, "default", 2),
        (None, [2, 2], [0, 1], "#dc2626", "--", 1.5, "default", 2),
        (None, [0, 0], [0, 1], "#e5e7eb", "-", 0.8, "default", 0),
        (None, [2, 2], [0, 1], "#e5e7eb", "-", 0.8, "default", 0)]
    # the leak is counted once it outlives an operation: slot 2 from step 1 on, slot 3 never
    ref = Figure().add_subplot(1, 1, 1).fill_between([0, 1, 2], [0.25, 0.25, 0.5], [0.25, 0.5, 0.75], step="post")
    (band,) = ax.collections
    assert band.get_paths()[0].vertices.tolist() == ref.get_paths()[0].vertices.tolist()
    assert (band.get_label(), band.get_alpha(), band.get_hatch()) == ("device_kv leaked", 0.3, "//")
    assert (ax.get_xlim(), ax.get_ylim(), ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        (0.0, 2.0), (0.0, 1.05), "micro-step (grey lines: operation boundaries)", "used / size", "P")
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["device_kv (4 slots)", "device_kv leaked", "other (0 slots)",
                                                          "went-stale"]
    assert (legend._loc, legend.get_texts()[0].get_fontsize(), legend.get_frame().get_alpha()) == (2, 8, 0.9)
    assert list(legend.get_bbox_to_anchor().transformed(ax.transAxes.inverted()).bounds[:2]) == \
        pytest.approx([1.01, 1.0])
    assert pool_occupancy(run_c().trace).axes[0].get_title() == "Pool occupancy"
    assert ax.get_subplotspec().get_geometry() == (1, 1, 0, 0)
    assert band.get_facecolor().tolist() == [list(to_rgba("#1d4ed8", 0.3))]


def test_pool_occupancy_of_one_snapshot_and_of_none():
    from simcache.render.plots import pool_occupancy
    ev = SimpleNamespace
    # one micro-step, one operation ending there: its leak counts at once; a 1-slot pool is full at one slot
    one = ev(snapshots=[ev(pools={"a": ev(size=4, used=[1], leaked=[1]), "b": ev(size=1, used=[7], leaked=[])})],
             ops=[ev(first_step=0, last_step=0)], steps=[ev(index=0, kind="op", text="")], went_stale=[],
             readmitted=[], cleaned_up=[], violations=[], crashed=None)
    ax = pool_occupancy(one).axes[0]
    assert [(line.get_label(), list(line.get_ydata())) for line in ax.get_lines()[:2]] == [
        ("a (4 slots)", [0.25]), ("b (1 slots)", [1.0])]
    assert [c.get_label() for c in ax.collections] == ["a leaked"] and ax.get_xlim() == (0.0, 1.0)
    none = pool_occupancy(ev(snapshots=[], ops=[], steps=[], went_stale=[], readmitted=[], cleaned_up=[],
                             violations=[], crashed=None)).axes[0]
    assert none.get_lines() == [] and none.get_xlim() == (0.0, 1.0)


def test_crash_rate_lines_markers_limits_and_an_empty_plot():
    from simcache.render.plots import crash_rate_vs_pressure
    rows = [{"preset": f"p{i}", "pressure": "2", "crash_rate": "0.5"} for i in range(6)] + \
        [{"preset": "p0", "pressure": 1, "crash_rate": 0.25}]
    fig = crash_rate_vs_pressure(rows, title="R")
    assert list(fig.get_size_inches()) == [7, 4] and fig.dpi == 100
    ax = fig.axes[0]
    assert [(line.get_label(), list(line.get_xdata()), list(line.get_ydata()), line.get_marker(), line.get_linewidth())
            for line in ax.get_lines()] == [("p0", [1.0, 2.0], [0.25, 0.5], "o", 2)] + \
        [(f"p{i}", [2.0], [0.5], m, 2) for i, m in zip(range(1, 6), "s^Dvo", strict=True)]
    assert ax.get_ylim() == pytest.approx((-0.01, 0.575))
    assert (ax.get_xlabel(), ax.get_title()) == ("host pressure", "R")
    assert ax.get_subplotspec().get_geometry() == (1, 1, 0, 0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"p{i}" for i in range(6)]
    assert all(g.get_visible() and g.get_alpha() == 0.3 for g in ax.get_xgridlines() + ax.get_ygridlines())
    empty = crash_rate_vs_pressure([]).axes[0]
    assert empty.get_ylim() == pytest.approx((-0.001, 0.0575)) and empty.get_legend() is None
    assert (empty.get_title(), empty.get_ylabel()) == ("Crash rate vs host pressure",
                                                       "fraction of runs raising\nany assertion")
    damage = crash_rate_vs_pressure([{"preset": "a", "pressure": 1, "damage_rate": 0.1}], field="damage_rate")
    assert damage.axes[0].get_ylabel() == "fraction of runs leaving\na double free or a leak"
    with pytest.raises(ValueError) as info:
        crash_rate_vs_pressure(rows, field="x")
    assert str(info.value) == "unknown rate 'x'; choose one of crash_rate, race_rate, damage_rate"


def bar_facts(ax):
    return [(round(b.get_x(), 6), round(b.get_width(), 6), b.get_height(), b.get_label()) for b in ax.patches]


def test_exploration_stats_bars_flat_and_grouped():
    from matplotlib.colors import to_hex

    from simcache.render.plots import exploration_stats
    flat = exploration_stats({"runs": 10, "rate": 0.5, "note": "x"}, title="F")
    assert list(flat.get_size_inches()) == [7, 4] and flat.dpi == 100
    ax = flat.axes[0]
    assert bar_facts(ax) == [(-0.4, 0.8, 10, "_nolegend_"), (0.6, 0.8, 0.5, "_nolegend_")]
    assert {to_hex(b.get_facecolor()) for b in ax.patches} == {"#60a5fa"}
    assert [(t.get_text(), t.get_fontsize()) for t in ax.texts] == [("10", 9), ("0.5", 9)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["runs", "rate"]
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {20} and ax.get_title() == "F"
    assert ax.get_legend() is None and ax.get_subplotspec().get_geometry() == (1, 1, 0, 0)
    assert {t.get_rotation() for t in ax.get_yticklabels()} == {0}  # only the x labels turn
    one = exploration_stats({"a": {"runs": 4, "fail": 1}}).axes[0]  # one group: bars 0.8 wide, centred on ticks
    assert bar_facts(one) == [(-0.4, 0.8, 4, "_nolegend_"), (0.6, 0.8, 1, "_nolegend_")]
    assert list(one.get_xticks()) == [0, 1]
    grouped = exploration_stats({"a": {"runs": 4, "fail": 1}, "b": {"runs": 6, "new": 2}, "total": 3}).axes[0]
    w = 0.4
    assert bar_facts(grouped) == [(-w / 2, w, 4, "_nolegend_"), (1 - w / 2, w, 1, "_nolegend_"),
                                  (2 - w / 2, w, 0, "_nolegend_"), (w / 2, w, 6, "_nolegend_"),
                                  (1 + w / 2, w, 0, "_nolegend_"), (2 + w / 2, w, 2, "_nolegend_")]
    assert [(t.get_text(), t.get_fontsize()) for t in grouped.texts] == [(s, 8) for s in "410602"]
    assert list(grouped.get_xticks()) == pytest.approx([0.2, 1.2, 2.2])
    assert [t.get_text() for t in grouped.get_xticklabels()] == ["runs", "fail", "new"]
    assert [t.get_text() for t in grouped.get_legend().get_texts()] == ["a", "b"]
    assert grouped.get_title() == "Exploration"


def test_to_png_draws_at_the_asked_dpi():
    from simcache.render.plots import exploration_stats, to_png

    def size(png):
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")

    fig = exploration_stats({"runs": 1})
    assert size(to_png(fig, dpi=20)) == (140, 80) and size(to_png(fig)) == (700, 400)


def test_timeline_edges_one_step_operations_narrow_columns_and_no_operations():
    ev = SimpleNamespace
    t = small_trace()
    t.ops = [ev(op={"op": "request"}, actor="R1", status=".", first_step=0, last_step=0),
             ev(op={"op": "evict"}, actor="R1", status=".", first_step=2, last_step=3)]
    # a one-step operation fills its column's middle; a step between operations stays at its column's edge
    assert [step_x(t, s, 300) for s in range(4)] == [161.5, 205.0, 226.8, 270.2]
    svg = timeline_svg(t, width=214)  # columns of exactly 44: labels of int(44 / 7) = 6 letters
    assert 'text-anchor="middle">reques</text>' in svg and 'text-anchor="middle">evict</text>' in svg
    assert 'width="1.0" height="20"' in timeline_svg(t, width=132)  # columns of 3: boxes at least 1 wide
    t.ops.append(ev(op={"op": "evict"}, actor="R1", status=".", first_step=3, last_step=3))
    ticks = timeline_svg(t, width=198)  # columns of 24: a tick every round(60 / 24) = 2 operations
    assert [m for m in ("0", "1", "2") if f'font-size="11">{m}</text>' in ticks] == ["0", "2"]
    empty = timeline_svg(ev(ops=[], steps=[], went_stale=[], readmitted=[], cleaned_up=[], violations=[],
                            crashed=None), width=300)
    assert empty.count('font-size="11">') == 2  # one column, tick 0, and the axis name
    assert '<text x="205.0" y="62" text-anchor="middle" fill="#6b7280" font-size="11">0</text>' in empty


def test_a_frame_holds_every_view_of_its_step_named_after_its_run():
    from simcache.render.explain import explain_html, op_text
    from simcache.render.ghosts import ghosts_at
    from simcache.render.panels import (
        holders_panel,
        invariants_panel,
        lru_panel,
        pools_panel,
        sets_panel,
        stack_panel,
    )
    run = run_c()
    t = run.trace
    for step in (t.went_stale[0].step, len(t.steps) - 1):
        f = frame(run, step)
        k, snap = f.op_index, t.snapshots[step]
        assert f.panels == (lru_panel(snap), sets_panel(snap), pools_panel(snap),
                            holders_panel(snap, ghosts=ghosts_at(t, step)))
        assert (f.caption, f.invariants, f.stack, f.explanation, f.focus) == (
            caption(run, step), invariants_panel(t, step, "pre_fix"),
            stack_panel(t.steps[step], op_text(t, k), "pre_fix"), explain_html(t, step, "pre_fix"), t.steps[step].node)
    assert frame(run, t.went_stale[0].step).focus == 8  # the node that went stale
