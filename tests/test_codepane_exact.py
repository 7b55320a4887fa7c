"""The code pane's HTML, exactly (issue #19: every mutant of ``render/codepane.py`` must change a test's outcome).

Hand-built ``CodeFrame``s stand in for ``code_at``; the whole pane is a syrupy snapshot, and by hand: the window
of six lines either side of the marked line and the "N line(s) above/below" rows at its edges (present only when
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


def _link(n: int, label: str) -> str:
    return f'<a class="sc-node" data-node="{n}" tabindex="0" title="outline node #{n} in the tree">{label}</a>'


def _rows(html: str, function: str) -> str:
    return html.split(f'data-function="{function}"', 1)[1].split('<pre class="sc-src">', 1)[1].split("</pre>", 1)[0]


def _hover(token: str, n: int) -> str:
    link = f'.{token}-code a.sc-node[data-node="{n}"]:is(:hover,:focus)'
    return (f'body:has({link}) .{token} g[id="n{n}"] > :is(polygon,path,ellipse){{stroke:#f59e0b;stroke-width:6px}}'
            f'body:has({link}) .{token} g[id="n{n}"]{{filter:drop-shadow(0 0 6px #f59e0b)}}')


def _run(snapshots):
    return SimpleNamespace(trace=SimpleNamespace(snapshots=snapshots), preset="described_fix",
                           flags=preset("described_fix"))


def test_the_whole_pane_of_two_frames_with_window_edges_fix_heads_links_and_hover_rules(monkeypatch, snapshot):
    seen = []
    monkeypatch.setattr(pane, "code_at", lambda trace, step: seen.append(step) or (OUTER, INNER))
    html = pane.codepane_html(_run([None, SNAP]), 1, token="sc-t3", label="described_fix")
    assert seen == [1]
    assert html == snapshot  # the whole pane (syrupy; review an intended change with --snapshot-update)
    # by hand, what a learner must find: one ▶, on the innermost frame's line, its fold the open one; the caller
    # waits on its own line (marked lightly); six lines either side; the flags' heads; the links with their keys
    assert html.count("<i>▶") == 1 and '<span class="sc-ln sc-cur" data-line="101"><i>▶101</i>    a = 1</span>' in html
    assert '<details class="sc-cframe" data-function="_cleanup_stale_node" open>' in html
    assert '<details class="sc-cframe" data-function="evict_host">' in html
    outer = _rows(html, "evict_host")
    assert outer.startswith('<span class="sc-ln sc-more"><i>…</i>14 line(s) above</span>')
    assert outer.endswith('<span class="sc-ln sc-more"><i>…</i>4 line(s) below</span>')
    assert f'<span class="sc-ln sc-wait sc-fix sc-on" data-line="30"><i>30</i>{_esc(30)}</span>' in outer
    assert outer.count("sc-fixhead") == 3  # stale_guards (from above the window), cascade..., stale_guards again
    assert _link(9, "#9 [9,9]") in html and _link(8, "#8 [1,2]") in html and _link(99, "#99") in html
    assert html.endswith(f'<style>{_hover("sc-t3", 8)}{_hover("sc-t3", 9)}{_hover("sc-t3", 99)}</style></div>')


def test_without_snapshots_a_node_link_names_only_the_id_and_the_defaults_apply(monkeypatch):
    monkeypatch.setattr(pane, "code_at", lambda trace, step: (OUTER, INNER))
    html = pane.codepane_html(_run([]), 0)
    assert html.startswith('<div class="sc-panel sc-code sc-t0-code"><h4>Code</h4>')
    assert _link(9, "#9") in html and _link(8, "#8") in html and _link(99, "#99") in html


def test_a_single_frame_is_open_and_a_pane_without_node_locals_has_no_hover_rules(monkeypatch):
    monkeypatch.setattr(pane, "code_at", lambda trace, step: (INNER,))
    html = pane.codepane_html(_run([SNAP]), 0, token="sc-t1")
    assert '<details class="sc-cframe" data-function="_cleanup_stale_node" open>' in html
    assert "<style>" not in html and html.endswith("</details></div>")


def test_an_instrumentation_line_is_never_the_marked_one():
    """#40 §2: at the clean-up moment the recorder's line (``self.recorder.event(...)``) ran last; the ▶ goes to
    the line of the fix a caller stands on (the guard that called the clean-up), else to the statement before."""
    rec = CodeFrame(function="_cleanup_stale_node", path="p.py", first_line=100,
                    lines=("def _cleanup_stale_node(self, node):", "    removed = []", "", "    # say so",
                           "    if self.recorder is not None:",
                           '        self.recorder.event("cleaned_up", node=node)'), line=105, locals=(), fix_lines=())
    guard = CodeFrame(function="_delete_tombstone_leaf", path="p.py", first_line=10,
                      lines=tuple(_line(i) for i in range(10, 20)), line=14, locals=(),
                      fix_lines=((14, "stale_guards"), (15, "stale_guards")))
    assert pane.marked_line((guard, rec), preset("described_fix")) == (0, 14)  # the guard, on in described_fix
    assert pane.marked_line((guard, rec), preset("pre_fix")) == (1, 101)  # off: the statement before the record
    assert pane.marked_line((rec,), preset("described_fix")) == (0, 101)
    plain = CodeFrame(function="f", path="p.py", first_line=1, lines=("def f():", "    x = 1"), line=2, locals=(),
                      fix_lines=())
    assert pane.marked_line((guard, plain), preset("described_fix")) == (1, 2)  # a real line stays marked


def test_the_guard_of_a_comparison_is_highlighted_and_its_frame_opened(monkeypatch):
    monkeypatch.setattr(pane, "code_at", lambda trace, step: (OUTER, INNER))
    html = pane.codepane_html(_run([SNAP]), 0, guard=("evict_host", 25, "stale_guards"))
    assert '<details class="sc-cframe" data-function="evict_host" open>' in html
    assert f'<span class="sc-ln sc-fix sc-on sc-guard" data-line="25"><i>25</i>{_esc(25)}</span>' in html
    assert html.count("sc-guard") == 1


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
    html = pane._frame_html(short, "pre_fix", preset("pre_fix"), None, False, mark=1)
    rows = html.split('<pre class="sc-src">')[1]
    assert rows.startswith('<span class="sc-ln sc-fix sc-fixhead"><i></i><span class="sc-fixtag">fix: stale_guards '
                           '(off in pre_fix)</span></span><span class="sc-ln sc-cur sc-fix" data-line="1"><i>▶1</i>')
    assert rows.endswith(f'{_plain(7)}<span class="sc-ln sc-more"><i>…</i>4 line(s) below</span></pre></details>')
    last = CodeFrame(function="evict_host", path="p.py", first_line=1, lines=tuple(_line(i) for i in range(1, 12)),
                     line=11, locals=(), fix_lines=())
    rows = pane._frame_html(last, "pre_fix", preset("pre_fix"), None, True, mark=11).split('<pre class="sc-src">')[1]
    assert rows == ('<span class="sc-ln sc-more"><i>…</i>4 line(s) above</span>'
                    + "".join(_plain(i) for i in range(5, 11))
                    + f'<span class="sc-ln sc-cur" data-line="11"><i>▶11</i>{_esc(11)}</span></pre></details>')
