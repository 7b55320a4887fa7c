"""The code pane as HTML: the frames of a micro-step (``codepane.code_at``), each a fold with its source.

Each frame is a ``<details>`` fold, outermost first and the innermost open: its summary names the function, the
simcache line it is at, the SGLang location it mirrors at the run's commit, and the locals that hold tree nodes as
links (``node → #8 [1,2]``); its body is a window of the source around the current line, the current line marked
``▶``, the lines that belong to a fix marked with the flag's name (green when this run's preset turns it on).
Pointing at (or focusing) a node link outlines that node in the tree drawing beside it: plain CSS (``:has``) that
works in JupyterLab's widgets and in the export alike, with no script. A *token* class pairs a pane (``token-code``)
with its tree (``token``), so two players on one page do not light up each other's trees.
"""
from __future__ import annotations

import re
from html import escape

from ..codepane import CodeFrame, code_at, flag_on
from ..versions import Flags
from .panels import _of
from .words import short

WINDOW = 6  # source lines shown either side of the current line (the open frame's; a pane fits one screen)
CODE_CSS = (
    ".sc-code .sc-cframe{border:1px solid #e5e7eb;border-radius:4px;margin:2px 0;padding:1px 4px}"
    ".sc-code .sc-cframe[open]{border-color:#2563eb}"
    ".sc-code summary{cursor:pointer;font-size:13px;line-height:1.6}"
    ".sc-code .sc-at,.sc-code .sc-sg{font-family:monospace;font-size:12px;color:#4b5563}"
    ".sc-code .sc-sg{color:#7c2d12}"
    ".sc-code a.sc-node{font-family:monospace;border:1px solid #f59e0b;border-radius:3px;padding:0 3px;"
    "background:#fffbeb;color:#111827;text-decoration:none;cursor:pointer;margin-right:3px}"
    ".sc-code a.sc-node:hover,.sc-code a.sc-node:focus{background:#f59e0b;color:#fff;outline:none}"
    ".sc-code pre.sc-src{margin:3px 0;font-size:12px;line-height:1.35;background:#f9fafb;padding:3px 0}"
    # long lines wrap under their own text (a hanging indent past the line number): never cut, never hidden
    ".sc-code .sc-ln{display:block;white-space:pre-wrap;overflow-wrap:break-word;padding-left:calc(3.2em + 9px);"
    "text-indent:calc(-3.2em - 6px);border-left:4px solid transparent}"
    ".sc-code .sc-ln i{display:inline-block;width:3.2em;color:#9ca3af;font-style:normal;text-align:right;"
    "margin-right:6px;text-indent:0}"
    ".sc-code .sc-cur{background:#fde68a;font-weight:bold}.sc-code .sc-wait{background:#fef9c3}"
    ".sc-code .sc-guard{outline:2px solid #16a34a;outline-offset:-2px}"
    ".sc-code .sc-guard:not(.sc-on){outline-color:#6b7280}"
    ".sc-code .sc-fix{border-left-color:#9ca3af}.sc-code .sc-fix.sc-on{border-left-color:#16a34a}"
    ".sc-code .sc-fixtag{font-size:11px;color:#6b7280;font-style:italic}.sc-code .sc-on .sc-fixtag{color:#15803d}"
    ".sc-code .sc-none{color:#6b7280;font-style:italic}"
)


def _node_label(snap, nid: int) -> str:
    v = snap.nodes.get(nid) if snap is not None else None
    return f"#{nid}" if v is None else f"#{nid} [{short(f'[{v.key_text}]')[1:-1]}]"


def hover_css(token: str, node_ids) -> str:
    """Rules that outline node ``n`` in the tree of class ``token`` while a link to ``n`` in the code pane of
    class ``token-code`` is pointed at or focused."""
    rules = []
    for n in sorted(set(node_ids)):
        link = f'.{token}-code a.sc-node[data-node="{n}"]:is(:hover,:focus)'
        rules.append(f'body:has({link}) .{token} g[id="n{n}"] > :is(polygon,path,ellipse)'
                     "{stroke:#f59e0b;stroke-width:6px}")
        rules.append(f'body:has({link}) .{token} g[id="n{n}"]{{filter:drop-shadow(0 0 6px #f59e0b)}}')
    return f"<style>{''.join(rules)}</style>" if rules else ""


# instrumentation: lines that record what happened; the ▶ never stands on one (it moves to the line that did it)
INSTRUMENTATION = re.compile(r"self\.recorder\.event\(|self\.observer\(|self\._lock_event\(|self\._event\(|"
                             r"^\s*if self\.(?:recorder|observer) is not None:")


def marked_line(frames, flags: Flags) -> tuple[int, int]:
    """``(frame index, line)`` the ▶ marks: the innermost frame's current line, unless that line is instrumentation
    (``self.recorder.event(...)``); then the line of a fix a caller stands on (at a clean-up, the guard that called
    it), else the statement before it in the same frame (what the recorded event reports)."""
    inner = len(frames) - 1
    f = frames[inner]
    if not INSTRUMENTATION.search(f.lines[f.line - f.first_line]):
        return inner, f.line
    for i in range(inner - 1, -1, -1):
        flag = dict(frames[i].fix_lines).get(frames[i].line)
        if flag is not None and flag_on(flags, flag):
            return i, frames[i].line
    for ln in range(f.line - 1, f.first_line - 1, -1):
        text = f.lines[ln - f.first_line].strip()
        if text and not text.startswith(("#", "def ", "@", '"""')) and not INSTRUMENTATION.search(text):
            return inner, ln
    return inner, f.line


def _frame_html(f: CodeFrame, preset: str, flags: Flags, snap, is_open: bool, mark: int | None = None,
                guard: tuple[int, str] | None = None) -> str:
    """One frame's fold: ``mark`` the line the ▶ stands on (None: the frame waits on its current line, marked
    lightly), ``guard`` (line, flag) a fix line to highlight (the divergence of a comparison)."""
    held = " ".join(
        f'<span class="sc-held">{escape(name)} &rarr; '
        + "".join(f'<a class="sc-node" data-node="{n}" tabindex="0" title="outline node #{n} in the tree">'
                  f"{escape(_node_label(snap, n))}</a>" for n in ids) + "</span>"
        for name, ids in f.locals)
    where = f.sglang(preset)
    said = f"mirrors {where}" if where else "not in SGLang's merged code (the described fix)"
    # a closed fold is one line (its function, file line and node locals: the stack at a glance); the open one
    # names the SGLang line it mirrors too
    mirrors = f' · <span class="sc-sg">{escape(said)}</span>' if is_open else ""
    fixes = dict(f.fix_lines)
    last = f.first_line + len(f.lines) - 1
    centre = mark if mark is not None else f.line
    lo, hi = max(f.first_line, centre - WINDOW), min(last, centre + WINDOW)
    if guard is not None:
        lo, hi = min(lo, max(f.first_line, guard[0] - 2)), max(hi, min(last, guard[0] + 2))
    rows = []
    if lo > f.first_line:
        rows.append(f'<span class="sc-ln sc-more"><i>…</i>{lo - f.first_line} line(s) above</span>')
    for ln in range(lo, hi + 1):
        cls = ["sc-ln"]
        if ln == mark:
            cls.append("sc-cur")
        elif ln == f.line:
            cls.append("sc-wait")  # a caller's line (it waits on the call), or the recording line the ▶ left
        if ln in fixes:
            on = flag_on(flags, fixes[ln])
            cls += ["sc-fix"] + (["sc-on"] if on else [])
            if ln == lo or fixes.get(ln - 1) != fixes[ln]:  # a head row names the flag above its block
                rows.append(f'<span class="sc-ln sc-fix{" sc-on" if on else ""} sc-fixhead"><i></i>'
                            f'<span class="sc-fixtag">fix: {escape(fixes[ln])} ({"on" if on else "off"} in '
                            f"{escape(preset)})</span></span>")
        if guard is not None and ln == guard[0]:
            cls.append("sc-guard")
        sign = "▶" if ln == mark else ""
        rows.append(f'<span class="{" ".join(cls)}" data-line="{ln}"><i>{sign}{ln}</i>'
                    f"{escape(f.lines[ln - f.first_line])}</span>")
    if hi < last:
        rows.append(f'<span class="sc-ln sc-more"><i>…</i>{last - hi} line(s) below</span>')
    at = mark if mark is not None else f.line
    return (f'<details class="sc-cframe" data-function="{escape(f.function)}"{" open" if is_open else ""}>'
            f'<summary title="{escape(said)}"><b>{escape(f.function)}()</b> '
            f'<span class="sc-at">{escape(f.path)}:{at}</span>{mirrors}'
            f"{' · ' + held if held else ''}</summary>"
            f'<pre class="sc-src">{"".join(rows)}</pre></details>')


def codepane_html(run, step: int, token: str = "sc-t0", label: str = "", guard=None) -> str:
    """The code pane of ``run`` at micro-step ``step`` (its links outline nodes in the tree of class ``token``).
    ``guard``: ``(function, line, flag)`` of a fix line to highlight (a comparison's divergent step): that frame
    is opened too."""
    t = run.trace
    frames = code_at(t, step)
    if not frames:
        body = ('<p class="sc-none">No simulated function runs at this micro-step (it starts or ends an '
                "operation, or this run cannot be replayed).</p>")
        return f'<div class="sc-panel sc-code {token}-code"><h4>Code{_of(label)}</h4>{body}</div>'
    snap = t.snapshots[step] if len(t.snapshots) else None
    at, line = marked_line(frames, run.flags)
    g = next((i for i in range(len(frames) - 1, -1, -1) if guard and frames[i].function == guard[0]), None)
    parts = [_frame_html(f, run.preset, run.flags, snap, i in (at, g), line if i == at else None,
                         (guard[1], guard[2]) if i == g else None) for i, f in enumerate(frames)]
    ids = {n for f in frames for _, ns in f.locals for n in ns}
    note = ('<div class="sc-at">simcache\'s code, outermost call first; the open fold runs now. ▶ the line that '
            "runs; a bar on the left: a line of a fix (green: on in this run). Point at a node to outline it in "
            "the tree.</div>")
    return (f'<div class="sc-panel sc-code {token}-code"><h4>Code{_of(label)}</h4>{note}{"".join(parts)}'
            f"{hover_css(token, ids)}</div>")
