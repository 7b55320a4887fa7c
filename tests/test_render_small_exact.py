"""Exact outcomes of the small views (issue #19's mutation scores): Graphviz's SVG cache and prolog stripping, the
frames' focus outline and operation frames, the timeline's geometry and markers, and the plots' data."""
from __future__ import annotations

from simcache.render.frames import focus_svg


def test_focus_svg_marks_only_the_first_box_of_that_node():
    svg = '<g id="n1" class="node"><g id="n12" class="node"><g id="n1" class="node">'
    assert focus_svg(svg, 1) == '<g id="n1" class="focus node"><g id="n12" class="node"><g id="n1" class="node">'
    assert focus_svg(svg, None) == svg
    assert focus_svg(svg, 3) == svg
