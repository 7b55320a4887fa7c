"""Running Graphviz: DOT text -> SVG or PNG, with an LRU cache keyed by the DOT text.

``render_many`` feeds many graphs to one ``dot`` process (a player precomputes a whole run in a fraction of a
second that way); ``render_svg`` then finds them in the cache, each byte for byte what ``dot`` draws for it alone
(so nothing drawn depends on what was drawn before). Missing ``dot`` raises graphviz's
``ExecutableNotFound``, which names the program to install.
"""
from __future__ import annotations

import re
from collections import OrderedDict

import graphviz


class _LRU:
    """A small LRU map: DOT text -> SVG text."""

    def __init__(self, size: int) -> None:
        self.size, self.data = size, OrderedDict()

    def get(self, key: str) -> str | None:
        if key in self.data:
            self.data.move_to_end(key)
        return self.data.get(key)

    def put(self, key: str, value: str) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.size:
            self.data.popitem(last=False)


SVG_CACHE = _LRU(4096)


def render_svg(dot_source: str) -> str:
    """SVG text for ``dot_source`` (Graphviz ``dot``; LRU-cached by the DOT text), without the XML prolog."""
    svg = SVG_CACHE.get(dot_source)
    if svg is None:
        svg = _strip(graphviz.pipe("dot", "svg", dot_source.encode("utf-8")).decode("utf-8"))
        SVG_CACHE.put(dot_source, svg)
    return svg


def render_many(sources: list[str]) -> list[str]:
    """SVGs for many DOT sources with one ``dot`` process (fast precomputation); fills the cache."""
    todo = [s for s in dict.fromkeys(sources) if SVG_CACHE.get(s) is None]
    if todo:
        raw = graphviz.pipe("dot", "svg", "".join(todo).encode("utf-8")).decode("utf-8")
        parts = [p + "</svg>" for p in raw.split("</svg>")[:-1]]
        if len(parts) == len(todo):  # else dot split the input differently: render_svg does them one by one
            for src, svg in zip(todo, parts, strict=True):
                SVG_CACHE.put(src, _alone(_strip(svg)))
    return [render_svg(s) for s in sources]


def render_png(dot_source: str, dpi: int = 110) -> bytes:
    """PNG bytes for ``dot_source`` (for a projector, a notebook ``Image``, or a PR comment)."""
    src = dot_source.replace("{\n", f"{{\n  graph [dpi=\"{dpi}\"];\n", 1)
    return graphviz.pipe("dot", "png", src.encode("utf-8"))


_BATCH_ID = re.compile(r'<g id="page\d+,\d+_(graph\d+)"')


def _alone(svg: str) -> str:
    """A graph drawn in a batch as ``dot`` draws it alone: a batch names the second graph on ``<g
    id="page0,1_graph0">`` where alone it is ``graph0``; without this, a page's bytes would depend on what the
    process drew before it."""
    return _BATCH_ID.sub(r'<g id="\1"', svg, count=1)


def _strip(svg: str) -> str:
    """Drop the XML prolog and Graphviz's comments (an inline SVG needs neither)."""
    start = svg.find("<svg")
    svg = svg[start:].strip() if start >= 0 else svg
    return re.sub(r"<!--.*?-->\n?", "", svg, flags=re.DOTALL)
