"""Stable node positions (#40 §1, "the tree jumps"): an operation's drawings are pinned to one layout of their union.

Story: in crash_pr under pre_fix, step 122 detaches #8 while three frames still hold it. Laid out frame by frame,
Graphviz moved #8 across the page (and the root with it); pinned, every box keeps its centre from step 121 to 122,
and every frame of the operation has the same bounding box.
"""
from __future__ import annotations

import re

from views_helpers import overlaps

from simcache.render.frames import tree_dot
from simcache.render.layout import MAX_UNION, stable, union_dot
from simcache.render.svg import render_svg
from simcache.simulate import simulate

POS = re.compile(r'^\s*(\w+) \[.*pos="([\d.]+),([\d.]+)!"\];$', re.M)


def pos(dot: str) -> dict[str, tuple[float, float]]:
    return {m.group(1): (float(m.group(2)), float(m.group(3))) for m in POS.finditer(dot)}


def test_the_key_step_keeps_every_box_in_place():
    run = simulate("crash_pr", "pre_fix")
    op = run.trace.ops[5]
    steps = list(range(op.first_step, op.last_step + 1))
    assert 121 in steps and 122 in steps
    raw = [tree_dot(run, s, legend=False) for s in steps]
    pinned = stable(raw)
    a, b = pos(pinned[121 - op.first_step]), pos(pinned[122 - op.first_step])
    for name in ("n2", "n8", "n10", "n9"):  # the root, the node that goes stale, its sibling, its child
        assert a[name] == b[name], name
    assert "h8" in b and "h8" not in a  # the holders' box appears at its own place, moving nothing
    corners = {(p["_bb0"], p["_bb1"]) for p in map(pos, pinned)}
    assert len(corners) == 1  # one size for the whole operation
    assert all('layout="neato"' in d and "subgraph cluster_" not in d for d in pinned)
    assert render_svg(pinned[122 - op.first_step]).startswith("<svg")
    # unpinned, Graphviz laid the two frames out differently (the jump the issue saw)
    assert raw[121 - op.first_step] != raw[122 - op.first_step]


def test_a_union_too_large_keeps_each_frames_own_layout():
    nodes = "".join(f'  n{i} [id="n{i}" label="x"];\n' for i in range(MAX_UNION + 1))
    dot = f'digraph cache {{\n  graph [rankdir="TB"];\n{nodes}}}\n'
    assert union_dot([dot]) is None and stable([dot]) == [dot]
    assert union_dot(['digraph cache {\n  graph [rankdir="TB"];\n}\n']) is None


def test_one_drawing_alone_is_not_pinned_and_runs_no_graphviz(monkeypatch):
    import simcache.render.layout as layout

    monkeypatch.setattr(layout, "positions", lambda union: (_ for _ in ()).throw(AssertionError("dot ran")))
    run = simulate("crash_pr", "pre_fix")
    one = tree_dot(run, 5, legend=False)
    assert stable([one]) == [one] and stable([one, one]) == [one, one]  # a long page's lone frames: no dot run


def test_no_box_of_a_pinned_frame_overlaps_another():
    """Each union box is as large as its largest label in the window: laid out at the rows-largest label instead,
    these operations' frames had a box drawn over another (a holders' box over #8, #7 over #9 ...)."""
    from simcache.player_model import PlayerModel

    seen = 0
    for name, preset, op in (("scenario_b", "pre_fix", 2), ("scenario_c", "pre_fix", 5), ("scenario_c", "pre_fix", 9),
                             ("scenario_d", "pre_fix", 2)):
        m = PlayerModel(simulate(name, preset), precompute=False)
        t = m.runs[0].trace
        raw = [m.frame(0, s).dot for s in range(t.ops[op].first_step, t.ops[op].last_step + 1)]
        plain = stable(raw, measure=False)
        assert any(overlaps(d) for d in plain), (name, op)  # what the plain union did
        pinned = m.pinned(0, op)  # what the player and the export draw
        assert [overlaps(d) for d in pinned] == [[]] * len(pinned), (name, op)
        assert all('pos="' in d for d in pinned)
        seen += len(pinned)
    assert seen > 20
