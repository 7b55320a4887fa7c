"""What Jupyter displays, exactly: the CSS prelude, the HTML / text / PNG adapters, columns, an SVG as an image.
Written for issue 19: ``render/display.py`` had no test of its own (its mutants were reached only through the
notebooks' kernels, which never import a mutant)."""
from __future__ import annotations

import base64

from simcache.render.display import CSS, HTML, PNG, Text, columns, page_css, svg_img
from simcache.render.frames import FOCUS_CSS
from simcache.render.panels import PANEL_CSS


def test_page_css_is_the_shared_rules_then_the_extra_ones():
    shared = PANEL_CSS + FOCUS_CSS + ".sc-tree svg{max-width:100%;height:auto}"
    assert page_css() == "<style>" + shared + "</style>" == CSS
    assert page_css(".x{color:red}") == "<style>" + shared + ".x{color:red}</style>"


def test_adapters_show_what_they_hold():
    h = HTML("<b>x</b>")
    assert (h._repr_html_(), str(h), h.html) == ("<b>x</b>", "<b>x</b>", "<b>x</b>")
    t = Text("a < b & c")
    assert t == "a < b & c" and t._repr_html_() == "<pre>a &lt; b &amp; c</pre>"
    assert PNG(b"\x89PNG").data == b"\x89PNG" and PNG(b"\x89PNG")._repr_png_() == b"\x89PNG"


def test_columns_share_the_width_equally():
    assert columns("a", "b", "c") == (
        '<table style="width:100%;border:none"><tr>'
        '<td style="vertical-align:top;width:33%;text-align:left">a</td>'
        '<td style="vertical-align:top;width:33%;text-align:left">b</td>'
        '<td style="vertical-align:top;width:33%;text-align:left">c</td></tr></table>')
    assert columns("only") == ('<table style="width:100%;border:none"><tr>'
                               '<td style="vertical-align:top;width:100%;text-align:left">only</td></tr></table>')
    assert columns() == '<table style="width:100%;border:none"><tr></tr></table>'


def test_an_svg_becomes_an_image_a_static_page_shows():
    svg = '<svg xmlns="http://www.w3.org/2000/svg">é</svg>'
    img = svg_img(svg)
    head = '<img alt="tree drawing" style="max-width:100%;max-height:520px" src="data:image/svg+xml;base64,'
    assert img.startswith(head) and img.endswith('"/>')
    assert base64.b64decode(img[len(head):-2]).decode() == svg
