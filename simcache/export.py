"""Export a run (or two runs side by side) as ONE self-contained HTML page: no network, no Jupyter.

Vocabulary
- The page holds *frames*: every micro-step when the run is short (``MICRO_LIMIT``), else the state after every
  operation plus every moment (went stale, cleaned up, violation, assertion) so no highlight is skipped.
- Drawings and panels are stored once each (*deduplicated*) in a JSON block; a frame names them by index.
  Plain JavaScript swaps them in: first / previous / next / last, previous / next operation, jump to the next
  went-stale / cleaned-up / violation / assertion (wrapping around), the slider, keyboard arrows (left / right:
  micro-step, up / down: operation, Home / End), and clicks on the timeline's operation blocks.
- With ``compare``, the second run (same schedule, another preset) follows in lockstep and the first
  divergence is marked.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

from .errors import ConfigError
from .render.dot import legend_dot, render_many, render_svg
from .render.frames import FOCUS_CSS, frame, op_frames, op_text
from .render.moments import MOMENT_KINDS, first_divergence, lockstep, moments
from .render.panels import PANEL_CSS
from .render.timeline import step_x, timeline_svg

MICRO_LIMIT = 600
TIMELINE_WIDTH = 960
_ASSETS = Path(__file__).resolve().parent / "render"


def frame_steps(trace) -> list[int]:
    """The micro-steps the page shows: all of them for a short trace, else operation ends plus moments."""
    if len(trace.steps) <= MICRO_LIMIT:
        return list(range(len(trace.steps)))
    keep = set(op_frames(trace))
    for steps in moments(trace).values():
        keep.update(steps)
    return sorted(keep)


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


def _run_frames(run, steps: list[int], svgs: _Store, html: _Store) -> list[dict]:
    fs = [frame(run, s, legend=False) for s in steps]  # the page shows the legend once
    drawings = render_many([f.dot for f in fs])
    marks = moments(run.trace)
    out = []
    for f, svg in zip(fs, drawings, strict=True):
        out.append(dict(step=f.step, op=f.op_index, caption=f.caption, svg=svgs.add(svg), focus=f.focus,
                        panels=[html.add(p) for p in f.panels], inv=html.add(f.invariants), stack=html.add(f.stack),
                        expl=html.add(f.explanation), x=step_x(run.trace, f.step, TIMELINE_WIDTH),
                        marks=[k for k in MOMENT_KINDS if f.step in marks[k]]))
    return out


def page_data(run, compare=None) -> dict:
    """Everything the page's script needs, as plain data."""
    svgs, html = _Store(), _Store()
    steps = frame_steps(run.trace)
    runs = [dict(preset=run.preset, outcome=run.outcome, frames=_run_frames(run, steps, svgs, html))]
    divergence = None
    if compare is not None:
        other = [lockstep(run.trace, compare.trace, s) for s in steps]
        runs.append(dict(preset=compare.preset, outcome=compare.outcome,
                         frames=_run_frames(compare, other, svgs, html)))
        divergence = first_divergence(run.trace, compare.trace)
    div_text = None
    if divergence is not None:
        k = min(divergence, len(run.trace.ops) - 1)
        div_text = f"First divergence: operation {divergence} ({op_text(run.trace, k)})"
    return dict(svgs=svgs.items, html=html.items, runs=runs, divergence=divergence, divergence_text=div_text)


def _header(run, compare) -> str:
    sc = run.scenario
    who = f"{run.preset} vs {compare.preset}" if compare is not None else run.preset
    outcome = "; ".join(f"<b>{escape(r.preset)}</b>: {escape(_outcome(r))}" for r in (run, compare) if r is not None)
    about = f"<p>{escape(sc.title or sc.description)}</p>" if (sc.title or sc.description) else ""
    return (f"<h1>simcache · {escape(sc.name)} · {escape(who)}</h1>{about}"
            f"<p>schedule <code>{escape(str(run.schedule))}</code> · {outcome}</p>")


def _outcome(run) -> str:
    c = run.crash
    return "clean" if c is None else f"{c.type}: {c.message} (in {c.function})"


def render_page(run, compare=None) -> str:
    """The HTML text of the page."""
    data = page_data(run, compare)
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    runs = [run] + ([compare] if compare is not None else [])
    lanes = [timeline_svg(r.trace, 0, width=TIMELINE_WIDTH, title=f"{r.preset}: {r.outcome}") for r in runs]
    cols = "".join(f'<section class="run" id="run{i}"><h2>{escape(r.preset)}</h2><div class="caption"></div>'
                   f'<div class="tree sc-tree"></div><div class="timeline">{lane}</div></section>'
                   for i, (r, lane) in enumerate(zip(runs, lanes, strict=True)))
    buttons = "".join(f'<button id="btn-{k}" title="{t}">{label}</button>' for k, label, t in (
        ("first", "|&#9664; first", "Home"), ("prev-op", "&#9664;&#9664; op", "Up"), ("prev", "&#9664; step", "Left"),
        ("next", "step &#9654;", "Right"), ("next-op", "op &#9654;&#9654;", "Down"), ("last", "last &#9654;|", "End")))
    jumps = "".join(f'<button class="jump" data-kind="{k}" id="jump-{k}">{k.replace("-", " ")} &#8631;</button>'
                    for k in MOMENT_KINDS)
    div = '<button id="btn-divergence">first divergence</button>' if data["divergence"] is not None else ""
    css = PANEL_CSS + FOCUS_CSS + (_ASSETS / "export.css").read_text()
    script = (_ASSETS / "export.js").read_text()
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>simcache: {escape(run.scenario.name)}'
            f"</title><style>{css}</style></head><body>{_header(run, compare)}"
            f'<nav id="controls">{buttons}<input type="range" id="slider" min="0" value="0"><span id="pos"></span>'
            f'<div class="jumps">jump to: {jumps}{div}</div></nav>'
            f'<p id="divergence" class="sc-bad"></p><div id="layout" class="layout-{len(data["runs"])}">'
            f'<div id="cols" class="cols-{len(data["runs"])}">{cols}</div>'
            f'<div id="side"><details class="legend" open><summary>legend</summary>{render_svg(legend_dot())}</details>'
            f'<div id="explanation"></div><div id="stack"></div><div id="invariants"></div>'
            f'<div id="panels"></div></div></div>'
            f'<script type="application/json" id="simcache-data">{blob}</script><script>{script}</script>'
            f"</body></html>")


def export_html(run, path, compare=None) -> Path:
    """Write the self-contained page for ``run`` (and ``compare`` beside it) to ``path``; returns the path."""
    if not run.trace.steps:
        raise ConfigError("this run has no micro-steps to export; give it at least one operation")
    if len(run.trace.snapshots) != len(run.trace.steps):
        raise ConfigError("this run was simulated without snapshots; simulate(..., snapshots=True) to export it")
    from .errors import FileError
    from .safe_io import check_file, write_file

    try:
        check_file(path)  # before the (slow) rendering, so a bad path fails at once
        text = render_page(run, compare)
        return write_file(path, text)  # replaces only a regular file, atomically; streams to a device or a pipe
    except FileError as e:
        raise ConfigError(str(e)) from None
