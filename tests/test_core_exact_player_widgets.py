"""The player's widget tree compared whole, alone and side by side: every widget's place, kind, words, tooltip,
bounds and layout, the tab titles, the names the notebooks use, and the side's own pieces.

The tree is spelled as nested dicts by ``spec``: a widget the player names (``p.slider``, ``p.buttons["next"]``,
``p.sides[0].tree``) is spelled by that name, so the test also says where each named widget sits."""
from __future__ import annotations

from collections import OrderedDict

import ipywidgets as W
import pytest

from simcache import player as player_module
from simcache import player_model, simulate
from simcache.player import PAGE_CSS, Player, _Side
from simcache.render.dot import SVG_CACHE
from simcache.render.frames import op_frames

SIDE_PARTS = ("caption", "tree", "timeline", "stack", "code", "code_box", "explanation", "panels", "pools",
              "invariants", "legend", "tabs")
LAYOUT = ("width", "max_height", "overflow", "display", "flex_flow", "align_items")
FIELDS = ("description", "tooltip", "min", "max", "step", "interval", "indent", "disabled")


@pytest.fixture(scope="module")
def runs():
    return simulate("crash_pr", "pre_fix"), simulate("crash_pr", "described_fix")


def names(p: Player) -> dict[int, str]:
    out = {id(p.note): "note", id(p.slider): "slider", id(p.counter): "counter", id(p.play): "play",
           id(p.repeat): "repeat",
           id(p.speed): "speed", id(p.jump_kind): "jump_kind", id(p.hide_host): "hide_host",
           id(p.hide_mamba): "hide_mamba"}
    out.update({id(b): f"button:{k}" for k, b in p.buttons.items()})
    for i, side in enumerate(p.sides):
        out.update({id(getattr(side, a)): f"{i}.{a}" for a in SIDE_PARTS})
    return out


def spec(w, named: dict[int, str]) -> dict:
    """``w`` and its children as plain data (what the test compares)."""
    d = {"w": named.get(id(w), "PAGE_CSS" if isinstance(w, W.HTML) and w.value == PAGE_CSS else type(w).__name__)}
    if id(w) in named:
        d["type"] = type(w).__name__
    d.update({f: getattr(w, f) for f in FIELDS if f in w.keys and getattr(w, f) not in (None, "")})
    if isinstance(w, (W.IntSlider, W.Play, W.Checkbox, W.Dropdown)):
        d["value"] = w.value
    if isinstance(w, W.Dropdown):
        d["options"] = list(w.options)
    lay = {k: getattr(w.layout, k) for k in LAYOUT if getattr(w.layout, k, None)}
    if lay:
        d["layout"] = lay
    if w._dom_classes:
        d["classes"] = list(w._dom_classes)
    if isinstance(w, W.Tab):
        d["titles"] = [w.get_title(i) for i in range(len(w.children))]
    if hasattr(w, "children"):
        d["children"] = [spec(c, named) for c in w.children]
    return d


def button(name: str, words: str, tip: str, **layout) -> dict:
    return {"w": f"button:{name}", "type": "Button", "description": words, "tooltip": tip, "disabled": False,
            "layout": {"width": "auto", **layout}}


def checkbox(name: str, words: str, tip: str | None = None) -> dict:
    d = {"w": name, "type": "Checkbox", "description": words}
    if tip:
        d["tooltip"] = tip
    return d | {"indent": False, "disabled": False, "value": False, "layout": {"width": "auto"}}


def html(name: str) -> dict:
    return {"w": name, "type": "HTML"}


def scroll(height: str, inner: dict, name: str = "Box") -> dict:
    d = {"w": name} | ({"type": "Box"} if name != "Box" else {})
    return d | {"layout": {"max_height": height, "overflow": "auto"}, "children": [inner]}


def tabs(i: int, titles: list[str], height: str) -> dict:
    parts = [p for p in ("stack", "explanation", "panels", "pools", "invariants", "legend")
             if p != "stack" or titles[0] == "stack"]
    return {"w": f"{i}.tabs", "type": "Tab", "titles": titles,
            "children": [scroll(height, html(f"{i}.{p}")) for p in parts]}


def controls(last: int, divergence_shown: bool) -> list[dict]:
    wrap = {"flex_flow": "row wrap", "align_items": "center"}
    return [
        {"w": "PAGE_CSS"},
        {"w": "HBox", "layout": wrap, "children": [
            button("first", "|◀ first", "go to the first micro-step"),
            button("prev_op", "◀◀ op", "back to the end of the previous operation"),
            button("prev", "◀ step", "one micro-step back"),
            button("next", "step ▶", "one micro-step forward"),
            button("next_op", "op ▶▶", "forward to the end of the next operation"),
            button("last", "last ▶|", "go to the last micro-step"),
            button("play", "▶ play", "play the run, one micro-step per tick"),
            button("pause", "‖ pause", "pause playing here"),
            button("stop", "■ stop", "stop playing and go back to the first micro-step"),
            checkbox("repeat", "repeat", "start again at the end"),
            {"w": "speed", "type": "IntSlider", "description": "ms / step",
             "tooltip": "milliseconds per micro-step while playing", "min": 50, "max": 2000, "step": 50,
             "disabled": False, "value": 400},
            {"w": "play", "type": "Play", "description": "play", "min": 0, "max": last, "step": 1, "interval": 400,
             "disabled": False, "value": 0, "layout": {"display": "none"}}]},
        {"w": "slider", "type": "IntSlider", "description": "step", "min": 0, "max": last, "step": 1,
         "disabled": False, "value": 0, "layout": {"width": "98%"}},
        {"w": "HBox", "layout": wrap, "children": [
            {"w": "jump_kind", "type": "Dropdown", "description": "jump to", "disabled": False, "value": "went-stale",
             "options": [("went stale", "went-stale"), ("re-admitted", "readmitted"), ("cleaned up", "cleaned-up"),
                         ("violation", "violation"), ("assertion", "assertion")], "layout": {"width": "auto"}},
            button("jump_prev", "◀ jump", "back to the previous moment of the kind chosen in 'jump to'"),
            button("jump_next", "jump ▶", "forward to the next moment of the kind chosen in 'jump to'"),
            button("divergence", "go to divergence",
                   "go to the first micro-step of the first operation where the two runs differ",
                   **({} if divergence_shown else {"display": "none"})),
            checkbox("hide_host", "hide host tier"),
            checkbox("hide_mamba", "hide Mamba detail")]},
        html("note"),
    ]


ONE_TABS = ["why stale", "holders", "pools", "invariants", "legend"]


def test_one_runs_widget_tree(runs, snapshot):
    p = Player(runs[0], precompute=False)
    tree = spec(p.widget, names(p))
    assert tree == snapshot  # the whole widget tree (syrupy; review an intended change with --snapshot-update)
    assert tree["children"][:4] == controls(262, False)[:2] + [
        {"w": "HBox", "children": [
            {"w": "slider", "type": "IntSlider", "description": "step", "min": 0, "max": 262, "step": 1,
             "disabled": False, "value": 0, "layout": {"width": "80%"}}, html("counter")]},
        controls(262, False)[3]]
    assert p.counter.value == '<span class="sc-count">step 0 of 262</span>'  # the one counter
    left, right = tree["children"][-1]["children"]
    assert [c["w"] for c in left["children"]] == ["0.caption", "0.tree", "0.timeline"]
    assert [c["w"] for c in right["children"]] == ["0.code_box", "0.tabs"]
    assert right["children"][1]["titles"] == ["stack"] + ONE_TABS


def test_two_runs_widget_tree(runs, snapshot):
    p = Player(*runs, precompute=False)
    tree = spec(p.widget, names(p))
    assert tree == snapshot
    cols = tree["children"][-1]
    assert cols["classes"] == ["sc-cmp"]
    for i, col in enumerate(cols["children"]):  # each run: its tree, its own code, its tabs (the timeline last)
        assert [c["w"] for c in col["children"]] == [f"{i}.caption", f"{i}.tree", f"{i}.code_box", f"{i}.tabs"]
        assert col["children"][3]["titles"] == ["stack"] + ONE_TABS + ["timeline"]
    assert p.model.num_steps == 272  # the longer run at each operation: more positions than one run's 263 steps


def test_the_names_the_notebooks_use(runs):
    p = Player(*runs, precompute=False)
    left, right = p.sides
    for alias, side, part in (("caption", left, "caption"), ("tree", left, "tree"), ("timeline", left, "timeline"),
                              ("stack", left, "stack"), ("code", left, "code"), ("explanation", left, "explanation"),
                              ("panels", left, "panels"), ("invariants", left, "invariants"),
                              ("legend", left, "legend"), ("compare_caption", right, "caption"),
                              ("compare_tree", right, "tree"), ("compare_timeline", right, "timeline"),
                              ("compare_stack", right, "stack"), ("compare_explanation", right, "explanation")):
        assert getattr(p, alias) is getattr(side, part), alias
    one = Player(runs[0], precompute=False)
    (only,) = one.sides
    assert one.caption is only.caption and one.legend is only.legend
    # alone, the compare_* names exist (notebooks may read them) but belong to no side and are empty
    extra = {id(getattr(one, a)) for a in ("compare_caption", "compare_tree", "compare_timeline", "compare_stack",
                                           "compare_explanation")}
    assert len(extra) == 5 and not extra & set(names(one))
    assert [getattr(one, a).value for a in ("compare_caption", "compare_tree", "compare_timeline", "compare_stack",
                                            "compare_explanation")] == [""] * 5


def test_a_side_alone(monkeypatch):
    monkeypatch.setattr(player_module, "_TOKENS", iter(range(40, 50)))
    a, b = _Side(W, "left: x"), _Side(W, "", stack_in_tabs=True)
    assert (a.token, b.token, a.label, b.label) == ("sc-t40", "sc-t41", "left: x", "")
    assert a.titles == ("stack", *ONE_TABS) and b.titles == ("stack", *ONE_TABS, "timeline")
    assert a.code_box.children == (a.code,) and b.code_box.children == (b.code,)
    parts = [a.caption, a.tree, a.timeline, a.stack, a.code, a.explanation, a.panels, a.pools, a.invariants,
             a.legend]
    assert all(type(w) is W.HTML and w.value == "" for w in parts) and len({id(w) for w in parts}) == 10
    assert [box.children[0] for box in a.tabs.children] == [a.stack, a.explanation, a.panels, a.pools, a.invariants,
                                                            a.legend]
    assert [box.children[0] for box in b.tabs.children] == [b.stack, b.explanation, b.panels, b.pools, b.invariants,
                                                            b.legend, b.timeline]
    assert (a.code_box.layout.max_height, b.code_box.layout.max_height) == ("330px", "230px")


def test_a_player_draws_every_frame_up_front_unless_told_not_to(runs, monkeypatch):
    drawn: list[list[str]] = []
    monkeypatch.setattr(player_model, "render_many", lambda dots: drawn.append(list(dots)))
    monkeypatch.setattr(SVG_CACHE, "data", OrderedDict())  # nothing drawn before this test counts
    p = Player(runs[0])
    m = p.model
    every = [d for k in range(len(runs[0].trace.ops)) for d in m.pinned(0, k)]  # each operation pinned
    op0 = m.pinned(0, 0)
    assert len(every) == 263 and len(op0) == op_frames(runs[0].trace)[0] + 1
    # up front: every frame in one batch; then the frame on show finds no drawing (the stand-in drew nothing),
    # so its whole operation is drawn as one batch
    assert len(m._frames) == 263 and drawn == [every, op0] and len(op0) < 263
    drawn.clear()
    monkeypatch.setattr(SVG_CACHE, "data", OrderedDict())  # (p's frame on show was drawn for real)
    q = Player(runs[0], precompute=False)
    assert len(q.model._frames) == len(op0) and drawn == [op0]  # only the operation on show
    drawn.clear()
    q.model.go(130)
    k = q.model.frame().op_index
    first, last = runs[0].trace.ops[k].first_step, op_frames(runs[0].trace)[k]
    q.model.svg()  # later in the run: from that operation's first step to its last, not from step 0
    assert k == 5 and 0 < first <= 130 <= last and drawn == [q.model.pinned(0, 5)]
    assert len(drawn[0]) == last - first + 1


def test_back_by_operation_lands_on_each_earlier_operations_end(runs):
    p = Player(runs[0], precompute=False)
    m = p.model
    ends = m.op_ends()
    m.go(ends[3] + 2)
    p.refresh()
    p.buttons["prev_op"].click()
    assert (m.cursor, p.slider.value) == (ends[3], ends[3])
    p.buttons["prev_op"].click()
    assert (m.cursor, p.slider.value) == (ends[2], ends[2])


def test_relabelling_the_slider_leaves_the_player_where_it_is(runs):
    p = Player(runs[0], precompute=False)
    p.model.go(40)
    p.refresh()
    p.slider.description = "micro-step"  # a notebook may restyle the widgets: only a new value moves the cursor
    p.slider.layout.width = "50%"
    assert (p.model.cursor, p.slider.value, p.slider.description) == (40, 40, "micro-step")
