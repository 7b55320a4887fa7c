"""What Jupyter displays: small adapters (``HTML``, ``Text``, ``PNG``), side-by-side columns, an SVG as an image,
and the one CSS prelude every notebook view starts with (``page_css``; the panels' ``sc-`` classes, the focus glow,
trees scaled to the cell)."""
from __future__ import annotations

import base64
from html import escape

from .frames import FOCUS_CSS
from .panels import PANEL_CSS


def page_css(extra: str = "") -> str:
    """The ``<style>`` prelude of a notebook view; ``extra`` rules come last, so they refine the shared ones."""
    return "<style>" + PANEL_CSS + FOCUS_CSS + ".sc-tree svg{max-width:100%;height:auto}" + extra + "</style>"


CSS = page_css()


class HTML:
    """Displayable HTML (Jupyter calls ``_repr_html_``); ``str()`` gives the HTML text."""

    def __init__(self, html: str) -> None:
        if not isinstance(html, str):
            from ..errors import ArgumentError

            raise ArgumentError(f"HTML takes the page's text (a str), not {type(html).__name__}")
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html


class Text(str):
    """A string Jupyter shows as preformatted text."""

    def _repr_html_(self) -> str:
        return f"<pre>{escape(self)}</pre>"


class PNG:
    """PNG bytes Jupyter displays as an image."""

    def __init__(self, data: bytes) -> None:
        if not isinstance(data, bytes):
            from ..errors import ArgumentError

            raise ArgumentError(f"PNG takes the image's bytes, not {type(data).__name__}")
        self.data = data

    def _repr_png_(self) -> bytes:
        return self.data


def columns(*cells: str) -> str:
    """HTML cells side by side, sharing the width equally, tops aligned."""
    width = 100 // max(1, len(cells))
    tds = "".join(f'<td style="vertical-align:top;width:{width}%;text-align:left">{c}</td>' for c in cells)
    return f'<table style="width:100%;border:none"><tr>{tds}</tr></table>'


def svg_img(svg: str) -> str:
    """An SVG drawing as an ``<img>`` (a static page shows it without any script)."""
    data = base64.b64encode(svg.encode()).decode()
    return f'<img alt="tree drawing" style="max-width:100%;max-height:520px" src="data:image/svg+xml;base64,{data}"/>'
