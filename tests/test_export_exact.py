"""The export's page, read as text and data (no browser): what each frame embeds, the data block, the page's parts.

Story: scenario C under pre_fix (and beside described_fix). Every frame of the page names, by index into the
deduplicated stores, exactly the views ``frame()`` builds for its micro-step: the drawing (DOT text on a page
drawn in the browser), the four state panels, the invariant panel, the call stack, the explanation, the code
pane, the timeline cursor's x and the moments that happen there. A side-by-side page pairs the two runs'
micro-steps as ``compare_positions`` does and names the first divergence. The data block decodes back to the
same data in both encodings. Written for issue 19: the mutants of ``export.py`` that survived the older tests.
"""
from __future__ import annotations

import base64
import gzip
import json
import re
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from html import escape

import pytest
from views_helpers import run_c, scenario_doc, story

import simcache.export as export
from simcache.errors import ConfigError
from simcache.render.codepane import CODE_CSS, codepane_html
from simcache.render.diverge import divergence_point
from simcache.render.dot import legend_dot, render_svg
from simcache.render.explain import op_text
from simcache.render.frames import FOCUS_CSS, frame
from simcache.render.layout import stable
from simcache.render.moments import MOMENT_KINDS, compare_positions, moments, op_index_of
from simcache.render.panels import PANEL_CSS
from simcache.render.timeline import step_x, timeline_svg
from simcache.simulate import simulate
from simcache.tour import load as load_tour
from simcache.transcript import outcome_words

S = story()


@contextmanager
def patched(**values):
    """Module constants of ``export`` changed for the block (a cached helper cannot take pytest's monkeypatch)."""
    old = {k: getattr(export, k) for k in values}
    for k, v in values.items():
        setattr(export, k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            setattr(export, k, v)


@pytest.fixture(scope="module", autouse=True)
def fresh_pages():
    """Each test session builds its pages anew: mutmut forks every mutant's session from a process that already ran
    these tests, and a page cached there was built by the code without the mutant."""
    dot_page.cache_clear()
    page.cache_clear()


@cache
def dot_page(compare: bool = False) -> dict:
    """The page data of scenario C as a long run's page holds it: DOT text, no Graphviz here."""
    with patched(DOT_LIMIT=0):
        return export.page_data(run_c(), compare=run_c("described_fix") if compare else None)


def pinned(run, step: int, data: dict, which: int) -> str:
    """The drawing a page holds for ``step``: its operation's frames on the page pinned to one layout."""
    steps = list(dict.fromkeys(f["step"] for f in data["runs"][which]["frames"]))
    k = op_index_of(run.trace, step)
    group = [s for s in steps if op_index_of(run.trace, s) == k]
    return stable([frame(run, s, legend=False).dot for s in group])[group.index(step)]


def expected_frame(run, step: int, data: dict, which: int = 0, guard=None) -> dict:
    """What a page's frame for ``step`` must say, from ``frame()`` and the other public renderers (``guard``: the
    comparison's divergent step highlights its guard line in the code pane; the drawing is pinned, see
    ``render/layout.py``)."""
    f = frame(run, step, legend=False)
    marks = moments(run.trace)
    return dict(step=step, op=op_index_of(run.trace, step), num=run.trace.ops[op_index_of(run.trace, step)].index,
                caption=f.caption, svg=pinned(run, step, data, which), focus=f.focus, all=None,
                panels=list(f.panels), inv=f.invariants, stack=f.stack, expl=f.explanation,
                code=codepane_html(run, step, f"sc-t{which}", run.preset if which else "", guard),
                x=step_x(run.trace, step, 960), marks=[k for k in MOMENT_KINDS if step in marks[k]])


def resolved(fr: dict, data: dict) -> dict:
    """A page frame with its store indices replaced by the texts they name."""
    html = data["html"]
    return dict(fr, svg=data["svgs"][fr["svg"]], panels=[html[i] for i in fr["panels"]], inv=html[fr["inv"]],
                stack=html[fr["stack"]], expl=html[fr["expl"]], code=html[fr["code"]])


def test_every_frame_embeds_exactly_the_views_of_its_micro_step():
    run, data = run_c(), dot_page()
    assert set(data) == {"svgs", "html", "runs", "divergence", "divergence_text", "divergence_frame", "dot", "tour",
                         "tour_title"}
    assert (data["dot"], data["divergence"], data["divergence_text"], data["tour"], data["tour_title"]) == \
        (True, None, None, [], None)
    assert [(r["preset"], r["outcome"]) for r in data["runs"]] == [("pre_fix", "assertion")]
    frames = data["runs"][0]["frames"]
    assert [f["step"] for f in frames] == list(range(S["last"] + 1))  # a short run: every micro-step
    for fr in frames:
        assert resolved(fr, data) == expected_frame(run, fr["step"], data), fr["step"]
    # the stores hold each text once, and every frame's drawing leaves the legend to the page
    assert len(set(data["svgs"])) == len(data["svgs"]) and len(set(data["html"])) == len(data["html"])
    assert not any("legend" in d for d in data["svgs"])
    assert frames[S["stale"]]["marks"] == ["went-stale"] and frames[S["crash"]]["marks"] == ["assertion"]
    assert frames[S["first_violation"]]["marks"] == ["violation"]
    assert 'class="node-box changed stale went-stale"' in data["svgs"][frames[S["stale"]]["svg"]]


def test_a_short_runs_page_holds_the_svg_graphviz_drew():
    run = run_c()
    data = export.page_data(run)
    assert data["dot"] is False
    frames = data["runs"][0]["frames"]
    for step in (0, S["stale"], S["crash"]):
        assert data["svgs"][frames[step]["svg"]] == render_svg(pinned(run, step, data, 0))
    assert [data["html"][i] for i in frames[S["stale"]]["panels"]] == list(frame(run, S["stale"]).panels)


def test_frames_are_the_same_whatever_the_batch_size():
    with patched(DOT_LIMIT=0, BATCH=7):  # 205 frames in stretches of 7, the last one short
        small = export.page_data(run_c())
    assert small == dot_page()


def test_the_page_is_drawn_in_the_browser_only_past_dot_limit():
    n = len(run_c().trace.steps)
    with patched(DOT_LIMIT=n):
        assert export.is_long(run_c().trace) is False and export.page_data(run_c())["dot"] is False
    with patched(DOT_LIMIT=n - 1):
        assert export.is_long(run_c().trace) is True
    doc = scenario_doc("scenario_C_ops")
    short = simulate(dict(doc, ops=doc["ops"][:5]), "pre_fix")
    with patched(DOT_LIMIT=len(short.trace.steps)):  # the compared run alone is long: both are drawn in the browser
        assert export.page_data(short)["dot"] is False
        assert export.page_data(short, compare=run_c())["dot"] is True


def test_every_micro_step_is_a_frame_up_to_micro_limit():
    t = run_c().trace
    n = len(t.steps)
    with patched(MICRO_LIMIT=n):
        assert export.frame_steps(t) == list(range(n))
    with patched(MICRO_LIMIT=n - 1):
        steps = export.frame_steps(t)
        assert steps == sorted({o.last_step for o in t.ops} | {x for v in moments(t).values() for x in v})
        assert len(steps) < n


def test_side_by_side_frames_pair_the_runs_positions_and_name_the_divergence():
    ra, rb = run_c(), run_c("described_fix")
    data = dot_page(compare=True)
    assert [(r["preset"], r["outcome"]) for r in data["runs"]] == [("pre_fix", "assertion"), ("described_fix", "clean")]
    positions, ops = compare_positions([ra.trace, rb.trace])  # short runs: every position is a frame
    a, b = data["runs"][0]["frames"], data["runs"][1]["frames"]
    assert [(fa["step"], fb["step"]) for fa, fb in zip(a, b, strict=True)] == positions
    assert [f["op"] for f in a] == ops == [f["op"] for f in b]
    point = divergence_point(ra, rb)
    guard = (point.function, point.line, point.flag)
    assert guard == ("_delete_tombstone_leaf", 98, "stale_guards") and point.steps == (203, 203)
    for fa, fb in zip(a, b, strict=True):
        ea = expected_frame(ra, fa["step"], data, guard=guard if fa["step"] == 203 else None)
        eb = expected_frame(rb, fb["step"], data, which=1, guard=guard if fb["step"] == 203 else None)
        ea["op"] = eb["op"] = fa["op"]  # a position belongs to one operation, in both runs
        assert resolved(fa, data) == ea and resolved(fb, data) == eb
    assert data["divergence"] == 9
    assert data["divergence_text"] == (f"First divergence: operation 9 ({op_text(ra.trace, 9)}); at steps 203 / 203 "
                                       "the runs part at _delete_tombstone_leaf line 98, the stale_guards guard "
                                       "(highlighted in both code panes)")
    assert data["divergence_frame"] == next(i for i, f in enumerate(a) if f["step"] == 203 and b[i]["step"] == 203)
    assert 'class="sc-panel sc-code sc-t1-code"><h4>Code <span class="sc-of">· described_fix</span>' in \
        data["html"][b[S["stale"]]["code"]]


def test_a_divergence_past_the_first_runs_end_is_described_by_the_run_that_reached_it():
    doc = scenario_doc("scenario_C_ops")
    short = simulate(dict(doc, ops=doc["ops"][:4]), "described_fix")  # the same first four operations
    full = simulate(doc, "described_fix")
    with patched(DOT_LIMIT=0):
        data = export.page_data(short, compare=full)
    assert data["divergence"] == 4
    # operation 4 is one only the longer run reached: it is named from that run (not by the shorter run's last)
    assert data["divergence_text"] == f"First divergence: operation 4 ({op_text(full.trace, 4)})"
    assert data["divergence_text"] == "First divergence: operation 4 (main: evict n=2)"


def test_the_data_block_decodes_to_the_page_data_in_both_encodings():
    data = dict(dot_page(), dot=False)
    block = export._data_block(data)
    head = '<script type="application/json" id="simcache-data">'
    assert block.startswith(head) and block.endswith("</script>")
    body = block[len(head):-len("</script>")]
    # #43 item 3: no markup character left; the texts packed into shared pieces, as a long run's are
    assert not re.search("[<>&]", body) and unpacked(json.loads(body)) == json.loads(json.dumps(data))
    packed_data = dot_page()
    packed = export._data_block(packed_data)
    head = '<script type="application/json" id="simcache-data" data-encoding="gzip-base64">'
    assert packed.startswith(head) and packed.endswith("</script>")
    raw = base64.b64decode(packed[len(head):-len("</script>")])
    assert raw[4:8] == b"\0\0\0\0"  # no time stamp: the same run exports to the same bytes
    assert unpacked(json.loads(gzip.decompress(raw))) == packed_data
    assert gzip.decompress(raw).decode() == json.dumps(export.pack(packed_data), separators=(",", ":"))
    assert packed == export._data_block(packed_data) and len(packed) < len(json.dumps(packed_data)) / 4


def unpacked(data: dict) -> dict:
    """A packed block's data with each text's pieces joined (what the page's script does when it shows one)."""
    parts = data["parts"]
    join = lambda texts: ["".join(parts[i] for i in t) for t in texts]  # noqa: E731
    return {**{k: v for k, v in data.items() if k != "parts"}, "svgs": join(data["svgs"]), "html": join(data["html"])}


def test_a_packed_block_cuts_each_text_into_pieces_stored_once():
    dot = ('digraph {\n  n1 [id="n1" label=<<TABLE><TR><TD>a</TD></TR><TR><TD>b</TD></TR></TABLE>>];\n'
           '  n2 [id="n2" label=<<TABLE><TR><TD>a</TD></TR></TABLE>>];\n}\n')
    panel = ('<div class="sc-panel"><h4>x</h4><div class="sc-row"><span class="sc-chip">1</span> '
             '<span class="sc-chip">2</span></div><ul><li>a</li><li class="h">b</li></ul>'
             '<details open>c</details></div>')
    data = dict(svgs=[dot], html=[panel, '<div class="sc-row"><span class="sc-chip">2</span></div>'], dot=True)
    assert export.pack(data) == dict(dot=True, parts=[
        'digraph {\n', '  n1 [id="n1"', ' label=<<TABLE>', '<TR><TD>a</TD></TR>', '<TR><TD>b</TD></TR></TABLE>>];\n',
        '  n2 [id="n2"', '<TR><TD>a</TD></TR></TABLE>>];\n', '}\n',
        '<div class="sc-panel"><h4>x</h4>', '<div class="sc-row">', '<span class="sc-chip">1</span> ',
        '<span class="sc-chip">2</span></div><ul>', '<li>a</li>', '<li class="h">b</li></ul>',
        '<details open>c</details></div>', '<span class="sc-chip">2</span></div>'],
        svgs=[[0, 1, 2, 3, 4, 5, 2, 6, 7]], html=[[8, 9, 10, 11, 12, 13, 14], [9, 15]])
    assert unpacked(export.pack(data)) == data
    page = dot_page()  # scenario C: its 205 frames' texts are ~1.8 MB, their pieces a few hundred KB
    packed = export.pack(page)
    assert unpacked(packed) == page and len(set(packed["parts"])) == len(packed["parts"])
    assert len(json.dumps(packed)) < len(json.dumps(page)) / 2


@cache
def page(compare: bool = False) -> str:
    with patched(DOT_LIMIT=0):
        return export.render_page(run_c(), compare=run_c("described_fix") if compare else None)


def body(html: str) -> str:
    """The page's body (its markup: header, controls, layout, timeline and legend drawings)."""
    return html.rsplit("</script></head>", 1)[1]


def test_the_page_names_the_run_its_outcome_and_holds_every_control(snapshot):
    html = page()
    crash = "AssertionError: parent does not have child key, 1 (in _delete_tombstone_leaf)"
    assert html.startswith('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>simcache: scenario'
                           "</title><style>" + PANEL_CSS + FOCUS_CSS + CODE_CSS)
    js = (export._ASSETS / "export.js").read_text()
    viz = (export._ASSETS / "vendor" / "viz-global.js").read_text()
    # the data block and the script (a page drawn in the browser carries Graphviz) in the head, then the body
    assert "</style>" + export._data_block(dot_page()) + "<script>" + viz + "\n" + js + "</script></head><body>" \
        in html
    b = body(html)
    assert b == snapshot  # the whole body (syrupy; review an intended change with --snapshot-update)
    # what a learner must see, by hand: the run, its outcome in the CLI's words, every control, one legend
    assert "<h1>simcache · scenario · pre_fix</h1>" in b and crash in b
    outcome = b.split('<p id="outcome">', 1)[1].split("</p>", 1)[0]
    assert "damage: double free device_kv[0, 1]; leaked host_kv[2, 3]" in outcome and "clean" not in outcome
    for control in ("btn-first", "btn-prev-op", "btn-prev", "btn-next", "btn-next-op", "btn-last", "slider", "pos",
                    "jump-went-stale", "jump-readmitted", "jump-cleaned-up", "jump-violation", "jump-assertion"):
        assert f'id="{control}"' in b, control
    assert timeline_svg(run_c().trace, 0, width=960, title=f"pre_fix: {crash}; damage: double free "
                                                              "device_kv[0, 1]; leaked host_kv[2, 3]") in b
    assert render_svg(legend_dot()) in b
    assert html.count("<script") == 2 and html.endswith("</body></html>")
    assert (export._ASSETS / "export.css").read_text() + "</style>" in html
    assert "btn-divergence" not in b and 'id="run1"' not in b


def test_a_page_drawn_here_carries_no_graphviz_build():
    html = export.render_page(run_c())
    js = (export._ASSETS / "export.js").read_text()
    assert "</style>" + export._data_block(export.page_data(run_c())) + "<script>" + js + "</script></head><body>" \
        in html
    assert "viz-global" not in html and html.count("<script") == 2
    assert '<script type="application/json" id="simcache-data">' in html


def test_a_side_by_side_page_has_two_columns_and_a_divergence_button(snapshot):
    html = page(compare=True)
    crash = "AssertionError: parent does not have child key, 1 (in _delete_tombstone_leaf)"
    b = body(html)
    assert b == snapshot
    assert "<h1>simcache · scenario · pre_fix vs described_fix</h1>" in b
    # the CLI's words for a run that did not raise but did damage: never "clean"
    assert f"<b>pre_fix</b>: {crash}" in b and "<b>described_fix</b>: no assertion; damage: " in b
    assert "clean" not in b.split('<p id="outcome">', 1)[1].split("</p>", 1)[0]
    assert 'id="btn-divergence"' in b and 'id="run0"' in b and 'id="run1"' in b
    assert export._data_block(dot_page(compare=True)) in html


def test_a_scenario_without_title_or_description_gets_no_about_line():
    doc = dict(scenario_doc("scenario_C_ops"))
    doc.pop("about", None)
    run = simulate(doc, "pre_fix")
    assert not (run.scenario.title or run.scenario.description)
    assert export._header(run, None).startswith('<h1>simcache · scenario · pre_fix</h1><p id="outcome">schedule <code>')
    described = simulate("crash_pr", "pre_fix")
    assert export._header(described, None).startswith(
        f'<h1>simcache · crash_pr · pre_fix</h1><p>{escape(described.scenario.title)}</p><p id="outcome">schedule')


def test_a_tour_page_has_its_section_and_stops_name_their_frames():
    run = simulate("crash_pr", "pre_fix")
    with patched(DOT_LIMIT=0):
        html = export.render_page(run, tour="crash_pr")
    data = json.loads(gzip.decompress(base64.b64decode(
        html.split('data-encoding="gzip-base64">')[1].split("</script>")[0])))
    from simcache.tour import load

    t = load("crash_pr")
    assert data["tour_title"] == t.title and len(data["tour"]) == len(t.stops)
    frames = data["runs"][0]["frames"]
    for i, (stop, s) in enumerate(zip(data["tour"], t.stops, strict=True)):  # choices in the tour's order
        order = t.order(i)
        assert (stop["title"], stop["ask"], stop["choices"], stop["answer"], stop["hints"], stop["explain"]) == \
            (s.title, s.ask, [s.choices[k].text for k in order], order.index(s.answer),
             ["" if k == s.answer else s.hint_for(k) for k in order], s.explain)
        assert frames[stop["frame"]]["step"] == stop["step"]
        assert frames[stop["before"]]["step"] == max(0, stop["step"] - 1)
    intro = f"<p>{t.intro}</p>" if t.intro else ""
    section = (f'<section id="tour"><h2>Tour: {t.title}</h2>{intro}<div id="tour-q"></div><div id="tour-choices">'
               '</div><div id="tour-feedback"></div><button id="tour-prev">&#9664; previous stop</button>'
               '<button id="tour-giveup">show the answer</button><button id="tour-next">next stop &#9654;</button>'
               '<p id="tour-score"></p></section><div id="layout" class="layout-1">')
    assert section in html
    # the outcome is the tour's to reveal: not in the header, not in the timeline's title
    assert "the outcome is for the tour to reveal</p>" in html and "pre_fix: assertion" not in html
    assert "AssertionError" not in html.split("<body>")[1].split('<section id="tour">')[0]
    assert export._tour_section(dict(data, tour=[]), t) == ""
    assert t.intro and export._tour_section(data, replace(t, intro="")).startswith(
        f'<section id="tour"><h2>Tour: {t.title}</h2><div id="tour-q"></div>')
    with pytest.raises(ConfigError, match="^a tour steps through one run; export it without a second preset "
                                          "to compare$"):
        export.render_page(run, compare=simulate("crash_pr", "described_fix"), tour="crash_pr")


def test_export_refuses_a_run_it_cannot_draw(tmp_path):
    doc = dict(scenario_doc("scenario_C_ops"), ops=[])
    with pytest.raises(ConfigError, match="^this run has no micro-steps to export; give it at least one operation$"):
        export.export_html(simulate(doc, "pre_fix"), tmp_path / "empty.html")
    bare = simulate(scenario_doc("scenario_C_ops"), "pre_fix", snapshots=False)
    message = "^this run was simulated without snapshots; simulate\\(..., snapshots=True\\) to export it$"
    with pytest.raises(ConfigError, match=message):
        export.export_html(bare, tmp_path / "bare.html")
    with pytest.raises(ConfigError, match=message):
        export.export_html(run_c(), tmp_path / "bare.html", compare=bare)
    assert list(tmp_path.iterdir()) == []


def test_export_writes_the_page_it_renders(tmp_path):
    with patched(DOT_LIMIT=0):
        path = export.export_html(run_c(), tmp_path / "c.html")
    assert path == tmp_path / "c.html" and path.read_text() == page()


class Bar:
    def __init__(self):
        self.updates, self.closed = [], False

    def update(self, n):
        self.updates.append(n)

    def close(self):
        self.closed = True


def test_progress_counts_every_frame_of_both_runs_and_closes(monkeypatch):
    bars = []
    monkeypatch.setattr(export, "_bar", lambda total, progress: bars.append((total, progress, Bar())) or bars[-1][2])
    monkeypatch.setattr(export, "DOT_LIMIT", 0)
    monkeypatch.setattr(export, "BATCH", 100)
    data = export.page_data(run_c(), compare=run_c("described_fix"), progress=True)
    n = len(data["runs"][0]["frames"])
    (total, progress, bar), = bars
    assert (total, progress, bar.closed) == (2 * n, True, True)
    monkeypatch.setattr(export, "BATCH", 100)
    sizes = [len(c) for c in export._stretches(run_c().trace, [f["step"] for f in data["runs"][0]["frames"]])]
    assert bar.updates == sizes * 2 and sum(sizes) == n > 200 and all(s >= 100 for s in sizes[:-1])


def test_the_progress_bar_shows_for_long_exports_or_when_asked():
    assert export._bar(10 ** 6, False) is None
    assert export._bar(2 * export.BATCH - 1, None) is None
    bar = export._bar(2 * export.BATCH, None)
    try:
        assert (bar.total, bar.disable) == (2 * export.BATCH, True)  # not a terminal here: tqdm's own choice
    finally:
        bar.close()
    bar = export._bar(3, True)
    try:
        assert (bar.total, bar.disable, bar.unit, bar.desc, bar.leave) == (3, False, "frame", "exporting", False)
    finally:
        bar.close()


def test_the_store_keeps_each_text_once_in_first_seen_order():
    store = export._Store()
    assert [store.add(x) for x in ("a", "b", "a", "c", "b")] == [0, 1, 0, 2, 1]
    assert store.items == ["a", "b", "c"]


def test_no_page_text_escapes_its_element():
    html = page(compare=True)
    assert re.findall(r"<script[^>]*>", html) == [
        '<script type="application/json" id="simcache-data" data-encoding="gzip-base64">', "<script>"]


def test_export_passes_the_compare_run_the_progress_choice_and_the_tour_on(monkeypatch, tmp_path):
    expected = page(compare=True)
    bars = []
    monkeypatch.setattr(export, "_bar", lambda total, progress: bars.append(progress) or Bar())
    with patched(DOT_LIMIT=0):
        path = export.export_html(run_c(), tmp_path / "cmp.html", compare=run_c("described_fix"), progress=True)
    assert path.read_text() == expected and bars == [True]
    run = simulate("crash_pr", "pre_fix")
    toured = export.export_html(run, tmp_path / "tour.html", tour="crash_pr", progress=False).read_text()
    assert bars == [True, False] and '<section id="tour"><h2>Tour: ' in toured


def test_a_tour_on_a_long_run_adds_each_stop_and_the_step_before_it_as_frames():
    run = simulate("crash_pr", "pre_fix")
    with patched(MICRO_LIMIT=5):  # only operation ends and moments would be frames
        data = export.page_data(run, tour=load_tour("crash_pr"))
        plain = export.frame_steps(run.trace)
    shown = [f["step"] for f in data["runs"][0]["frames"]]
    wanted = {x for stop in data["tour"] for x in (stop["step"], stop["step"] - 1)}
    assert shown == sorted(set(plain) | wanted) and not wanted <= set(plain)
    for stop in data["tour"]:
        assert (shown[stop["frame"]], shown[stop["before"]]) == (stop["step"], stop["step"] - 1)


def test_a_loaded_tour_and_a_tour_name_give_the_same_page():
    run = simulate("crash_pr", "pre_fix")
    with patched(DOT_LIMIT=0):
        assert export.render_page(run, tour=load_tour("crash_pr")) == export.render_page(run, tour="crash_pr")


def test_a_tour_stop_at_the_first_step_of_a_long_run_adds_only_that_frame():
    from dataclasses import replace

    run = simulate("crash_pr", "pre_fix")
    tour = load_tour("crash_pr")
    first = replace(tour, stops=(replace(tour.stops[-1], at={"kind": "op"}),))  # the run's step 0: nothing before it
    with patched(MICRO_LIMIT=5):
        data = export.page_data(run, tour=first)
        plain = export.frame_steps(run.trace)
    assert 0 not in plain and 1 not in plain
    assert [f["step"] for f in data["runs"][0]["frames"]] == [0, *plain]
    assert [(s["step"], s["frame"], s["before"]) for s in data["tour"]] == [(0, 0, 0)]


def test_a_tour_is_checked_against_the_run_being_exported_not_the_run_it_was_written_for():
    from simcache.tour import TourError

    with pytest.raises(TourError, match=r"^tour crash_pr is for crash_pr under pre_fix, not crash_pr under "
                                        r"described_fix; take it on a run of crash_pr under pre_fix$"):
        export.page_data(simulate("crash_pr", "described_fix"), tour=load_tour("crash_pr"))


def test_a_long_runs_data_block_is_gzip_at_level_6():
    """The page's bytes are a choice too: level 6 (zlib's default trade-off), not gzip's 9 nor anything else."""
    data = dot_page()
    text = json.dumps(export.pack(data), separators=(",", ":")).encode()
    levels = {n: gzip.compress(text, compresslevel=n, mtime=0) for n in (6, 7, 9)}
    assert len(set(levels.values())) == 3  # this page tells the levels apart
    head = '<script type="application/json" id="simcache-data" data-encoding="gzip-base64">'
    assert export._data_block(data) == f'{head}{base64.b64encode(levels[6]).decode()}</script>'


def test_the_timeline_lane_is_drawn_at_the_width_the_frames_positions_use():
    run = simulate("crash_pr", "pre_fix")
    with patched(TIMELINE_WIDTH=480, MICRO_LIMIT=5):
        html = export.render_page(run)
        frames = export.page_data(run)["runs"][0]["frames"]
    title = f"pre_fix: {outcome_words(run)}"
    lane = timeline_svg(run.trace, 0, width=480, title=title)
    assert lane != timeline_svg(run.trace, 0, width=960, title=title)
    assert f'<div class="timeline">{lane}</div>' in html
    assert [f["x"] for f in frames] == [step_x(run.trace, f["step"], 480) for f in frames]


def test_each_batch_rebuilds_its_snapshots_and_code_frames_once_before_its_frames(monkeypatch):
    """The page is built a stretch (``BATCH`` frames) at a time: each stretch's snapshots and code-pane frames are
    rebuilt in one replay each, before its frames are drawn (the memory bound and the speed of a long export)."""
    run = simulate("crash_pr", "pre_fix")
    calls = []
    snaps, real_code = run.trace.snapshots, export.code_frames
    real_prefetch = snaps.prefetch
    monkeypatch.setattr(snaps, "prefetch", lambda steps: (calls.append(("snapshots", list(steps))),
                                                          real_prefetch(steps))[1], raising=False)
    monkeypatch.setattr(export, "code_frames", lambda trace, steps: (
        calls.append(("code", trace is run.trace, list(steps))), real_code(trace, steps))[1])
    real_frame = export.frame
    monkeypatch.setattr(export, "frame", lambda r, s, legend: (calls.append(("frame", s, legend)),
                                                               real_frame(r, s, legend=legend))[1])
    n = len(run.trace.steps)
    with patched(BATCH=100, DOT_LIMIT=0):
        export.page_data(run)
        chunks = list(export._stretches(run.trace, list(range(n))))
    # stretches of at least 100 frames, cut between operations (each operation's drawings pinned together)
    assert [len(c) for c in chunks[:-1]] and all(len(c) >= 100 for c in chunks[:-1]) and sum(chunks, []) == \
        list(range(n))
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert op_index_of(run.trace, a[-1]) != op_index_of(run.trace, b[0])
    assert n > 200 and calls == [c for chunk in chunks for c in (
        ("snapshots", chunk), ("code", True, chunk), *[("frame", s, False) for s in chunk])]


def test_a_long_compare_keeps_the_lockstep_positions_where_either_run_has_a_frame():
    a, b = simulate("scenario_d", "pre_fix"), simulate("scenario_d", "described_fix")
    with patched(MICRO_LIMIT=5, DOT_LIMIT=0):  # only operation ends and moments are frames of each run
        data = export.page_data(a, compare=b)
        fa, fb = set(export.frame_steps(a.trace)), set(export.frame_steps(b.trace))
    positions, ops = compare_positions([a.trace, b.trace])
    want = [(p, k) for p, k in zip(positions, ops, strict=True) if p[0] in fa or p[1] in fb]
    got = list(zip([f["step"] for f in data["runs"][0]["frames"]], [f["step"] for f in data["runs"][1]["frames"]],
                   strict=True))
    assert got == [p for p, _ in want] and len(got) < len(positions)
    assert [f["op"] for f in data["runs"][0]["frames"]] == [f["op"] for f in data["runs"][1]["frames"]] == [
        k for _, k in want]
    assert any(p[0] not in fa for p in got) and any(p[1] not in fb for p in got)  # each run brings its own frames
