"""The code pane's HTML, exactly (issue #19: every mutant of ``render/codepane.py`` must change a test's outcome).

Hand-built ``CodeFrame``s stand in for ``code_at`` so that each piece of the pane is pinned whole: the window of
nine lines either side of the current line and the "N line(s) above/below" rows at its edges (present only when
lines are cut), the current line's mark, the fix lines' classes and the head row naming the flag above each
block (also when the block starts above the window), the SGLang location or the note for a function SGLang never
had, the node links with each node's key (or only its id when the snapshot has no such node, or no snapshot
exists), the innermost fold open, and the hover rules scoped to the pane's own tree.
"""
from __future__ import annotations

from types import SimpleNamespace

import simcache.render.codepane as pane
from simcache.codepane import CodeFrame
from simcache.versions import preset


def _line(i: int) -> str:
    return f"    v{i} = a < b & 'c'"


def _esc(i: int) -> str:
    return f"    v{i} = a &lt; b &amp; &#x27;c&#x27;"


OUTER = CodeFrame(function="evict_host", path="simcache/evict_host.py", first_line=10,
                  lines=tuple(_line(i) for i in range(10, 41)), line=30,
                  locals=(("x", (9,)), ("nodes", (8, 99))),
                  fix_lines=((20, "stale_guards"), (21, "stale_guards"), (22, "stale_guards"),
                             (24, "cascade_respects_host_refs"), (25, "stale_guards"), (26, "stale_guards"),
                             (30, "stale_guards")))
INNER = CodeFrame(function="_cleanup_stale_node", path="simcache/evict_host.py", first_line=100,
                  lines=("def _cleanup_stale_node(self, node):", "    a = 1", "    return a"), line=101,
                  locals=(), fix_lines=())
SNAP = SimpleNamespace(nodes={8: SimpleNamespace(key_text="1,2"), 9: SimpleNamespace(key_text="9,9")})


def _plain(i: int) -> str:
    return f'<span class="sc-ln" data-line="{i}"><i>{i}</i>{_esc(i)}</span>'


def _head(flag: str, on: bool) -> str:
    return (f'<span class="sc-ln sc-fix{" sc-on" if on else ""} sc-fixhead"><i></i><span class="sc-fixtag">'
            f'fix: {flag} ({"on" if on else "off"} in described_fix)</span></span>')


def _link(n: int, label: str) -> str:
    return f'<a class="sc-node" data-node="{n}" tabindex="0" title="outline node #{n} in the tree">{label}</a>'


OUTER_ROWS = "".join([
    '<span class="sc-ln sc-more"><i>…</i>11 line(s) above</span>',
    _head("stale_guards", True),  # the block started at line 20, above the window: its first shown line heads it
    f'<span class="sc-ln sc-fix sc-on" data-line="21"><i>21</i>{_esc(21)}</span>',
    f'<span class="sc-ln sc-fix sc-on" data-line="22"><i>22</i>{_esc(22)}</span>',
    _plain(23),
    _head("cascade_respects_host_refs", False),
    f'<span class="sc-ln sc-fix" data-line="24"><i>24</i>{_esc(24)}</span>',
    _head("stale_guards", True),  # another flag just above: a new head
    f'<span class="sc-ln sc-fix sc-on" data-line="25"><i>25</i>{_esc(25)}</span>',
    f'<span class="sc-ln sc-fix sc-on" data-line="26"><i>26</i>{_esc(26)}</span>',  # same flag as the line above
    *[_plain(i) for i in range(27, 30)],
    _head("stale_guards", True),
    f'<span class="sc-ln sc-cur sc-fix sc-on" data-line="30"><i>▶30</i>{_esc(30)}</span>',
    *[_plain(i) for i in range(31, 40)],
    '<span class="sc-ln sc-more"><i>…</i>1 line(s) below</span>',
])


def _outer_html(labels: tuple[str, str, str]) -> str:
    held = (f'<span class="sc-held">x &rarr; {_link(9, labels[0])}</span> '
            f'<span class="sc-held">nodes &rarr; {_link(8, labels[1])}{_link(99, labels[2])}</span>')
    return ('<details class="sc-cframe" data-function="evict_host"><summary><b>evict_host()</b> '
            '<span class="sc-at">simcache/evict_host.py:30</span> · mirrors <span class="sc-sg">'
            f'hi_mamba_radix_cache.py:701 @ e9d6b9eb</span><br>{held}</summary><pre class="sc-src">{OUTER_ROWS}'
            "</pre></details>")


INNER_HTML = ('<details class="sc-cframe" data-function="_cleanup_stale_node" open><summary>'
              '<b>_cleanup_stale_node()</b> <span class="sc-at">simcache/evict_host.py:101</span> · '
              '<span class="sc-sg">not in SGLang\'s merged code (the described fix)</span></summary>'
              '<pre class="sc-src"><span class="sc-ln" data-line="100"><i>100</i>def _cleanup_stale_node(self, '
              'node):</span><span class="sc-ln sc-cur" data-line="101"><i>▶101</i>    a = 1</span>'
              '<span class="sc-ln" data-line="102"><i>102</i>    return a</span></pre></details>')
NOTE = ('<div class="sc-at">simcache\'s code, outermost call first; the open fold runs now. ▶ the current line; a '
        "bar on the left: a line that belongs to a fix (green: on in this run). Point at a node to outline it in the "
        "tree.</div>")


def _hover(token: str, n: int) -> str:
    link = f'.{token}-code a.sc-node[data-node="{n}"]:is(:hover,:focus)'
    return (f'body:has({link}) .{token} g[id="n{n}"] > :is(polygon,path,ellipse){{stroke:#f59e0b;stroke-width:6px}}'
            f'body:has({link}) .{token} g[id="n{n}"]{{filter:drop-shadow(0 0 6px #f59e0b)}}')


def _run(snapshots):
    return SimpleNamespace(trace=SimpleNamespace(snapshots=snapshots), preset="described_fix",
                           flags=preset("described_fix"))


def test_the_whole_pane_of_two_frames_with_window_edges_fix_heads_links_and_hover_rules(monkeypatch):
    seen = []
    monkeypatch.setattr(pane, "code_at", lambda trace, step: seen.append(step) or (OUTER, INNER))
    html = pane.codepane_html(_run([None, SNAP]), 1, token="sc-t3", label="described_fix")
    assert seen == [1]
    assert html == ('<div class="sc-panel sc-code sc-t3-code"><h4>Code <span class="sc-of">· described_fix</span>'
                    f'</h4>{NOTE}{_outer_html(("#9 [9,9]", "#8 [1,2]", "#99"))}{INNER_HTML}'
                    f'<style>{_hover("sc-t3", 8)}{_hover("sc-t3", 9)}{_hover("sc-t3", 99)}</style></div>')


def test_without_snapshots_a_node_link_names_only_the_id_and_the_defaults_apply(monkeypatch):
    monkeypatch.setattr(pane, "code_at", lambda trace, step: (OUTER, INNER))
    html = pane.codepane_html(_run([]), 0)
    assert html == (f'<div class="sc-panel sc-code sc-t0-code"><h4>Code</h4>{NOTE}{_outer_html(("#9", "#8", "#99"))}'
                    f'{INNER_HTML}<style>{_hover("sc-t0", 8)}{_hover("sc-t0", 9)}{_hover("sc-t0", 99)}</style></div>')


def test_a_single_frame_is_open_and_a_pane_without_node_locals_has_no_hover_rules(monkeypatch):
    monkeypatch.setattr(pane, "code_at", lambda trace, step: (INNER,))
    assert pane.codepane_html(_run([SNAP]), 0, token="sc-t1") == (
        f'<div class="sc-panel sc-code sc-t1-code"><h4>Code</h4>{NOTE}{INNER_HTML}</div>')


def test_a_step_where_no_simulated_function_runs_says_so(monkeypatch):
    monkeypatch.setattr(pane, "code_at", lambda trace, step: ())
    assert pane.codepane_html(_run([SNAP]), 0, label="pre_fix") == (
        '<div class="sc-panel sc-code sc-t0-code"><h4>Code <span class="sc-of">· pre_fix</span></h4>'
        '<p class="sc-none">No simulated function runs at this micro-step (it starts or ends an operation, or this '
        "run cannot be replayed).</p></div>")


def test_hover_css_sorts_and_dedupes_the_nodes_and_is_empty_without_any():
    assert pane.hover_css("sc-t2", [5, 3, 5]) == f'<style>{_hover("sc-t2", 3)}{_hover("sc-t2", 5)}</style>'
    assert pane.hover_css("sc-t2", []) == ""


def test_a_current_line_at_the_very_first_and_last_lines_cuts_nothing_on_that_side():
    short = CodeFrame(function="evict_host", path="p.py", first_line=1, lines=tuple(_line(i) for i in range(1, 12)),
                      line=1, locals=(), fix_lines=((1, "stale_guards"),))
    html = pane._frame_html(short, "pre_fix", preset("pre_fix"), None, False)
    rows = html.split('<pre class="sc-src">')[1]
    assert rows.startswith('<span class="sc-ln sc-fix sc-fixhead"><i></i><span class="sc-fixtag">fix: stale_guards '
                           '(off in pre_fix)</span></span><span class="sc-ln sc-cur sc-fix" data-line="1"><i>▶1</i>')
    assert rows.endswith(f'{_plain(10)}<span class="sc-ln sc-more"><i>…</i>1 line(s) below</span></pre></details>')
    last = CodeFrame(function="evict_host", path="p.py", first_line=1, lines=tuple(_line(i) for i in range(1, 12)),
                     line=11, locals=(), fix_lines=())
    rows = pane._frame_html(last, "pre_fix", preset("pre_fix"), None, True).split('<pre class="sc-src">')[1]
    assert rows == ('<span class="sc-ln sc-more"><i>…</i>1 line(s) above</span>'
                    + "".join(_plain(i) for i in range(2, 11))
                    + f'<span class="sc-ln sc-cur" data-line="11"><i>▶11</i>{_esc(11)}</span></pre></details>')
