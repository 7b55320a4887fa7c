"""The export page's data block: its texts stored once, cut into shared pieces, made safe inside ``<script>``.

Vocabulary
- A ``_Store`` keeps each distinct text once; a frame names its drawings and panels by index.
- *Packing* (``pack``) cuts every text into pieces (after each line, and before each ``_CUTS`` match: a node's
  label and each label row in DOT, each panel row, chip, list item or fold in HTML), stores each piece once, and
  writes each text as a list of piece indices: consecutive frames share almost every line.
- The block (``_data_block``) is JSON escaped for HTML (``json_in_html``: no ``</script>`` or ``<!--`` can end it
  early); a long run's (DOT drawn in the browser) is gzip-compressed and base64-encoded, and the page inflates it.
"""
from __future__ import annotations

import base64
import gzip
import json
import re


class _Store:
    """Deduplicating string store: text -> index."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.items)
            self.items.append(text)
        return self._index[text]


# where a text is cut into pieces: after each line (in ``pack``), and before each match of ``_CUTS``: a node's label
# and each label row (DOT), each panel row, chip, list item or fold (HTML)
_CUTS = re.compile(r' label=<|<(?:TR>|(?:div|li|details)[ >]|span class="sc-chip">)')


def _pieces(line: str) -> list[str]:
    out, a = [], 0
    for m in _CUTS.finditer(line):
        if m.start() > a:
            out.append(line[a : m.start()])
            a = m.start()
    if a < len(line):
        out.append(line[a:])
    return out


def pack(data: dict) -> dict:
    """A long run's page data as its block holds it: ``svgs`` and ``html`` become lists of indices into ``parts``,
    the pieces of every text (cut after each line and before each ``_CUTS`` match) stored once; joining a text's
    pieces gives it back."""
    parts, lines = _Store(), {}  # lines: a line's piece indices (a long run's 127 MB of text is ~17k distinct lines)

    def cut(text: str) -> list[int]:
        out = []
        rows = text.split("\n")
        for k, row in enumerate(rows):
            line = row + "\n" if k < len(rows) - 1 else row
            ids = lines.get(line)
            if ids is None:
                ids = lines[line] = [parts.add(p) for p in _pieces(line)]
            out += ids
        return out

    return dict(data, svgs=[cut(t) for t in data["svgs"]], html=[cut(t) for t in data["html"]], parts=parts.items)


_HTML_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_in_html(data) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: ``<``, ``>``, ``&``, U+2028 and U+2029 written as JSON
    escapes (``\\u003c`` …), so no text in it (``</script>``, ``<!--``, ``<script``) can change how the HTML
    parser reads the page; ``JSON.parse`` gives the same data back."""
    text = json.dumps(data, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda m: _HTML_UNSAFE[m.group()], text)


def _data_block(data: dict) -> str:
    """The page's data block: ``pack``-ed JSON (``json_in_html``), or for a long run the same gzip-compressed, in
    base64."""
    if not data.get("dot"):  # plain JSON, its texts packed into shared pieces (html-escaped: a third of it is "<")
        return f'<script type="application/json" id="simcache-data">{json_in_html(pack(data))}</script>'
    text = json.dumps(pack(data), separators=(",", ":"))
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")
    return f'<script type="application/json" id="simcache-data" data-encoding="gzip-base64">{packed}</script>'
