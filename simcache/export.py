"""Export a run (or two runs side by side) as ONE self-contained HTML page: no network, no Jupyter.

Vocabulary
- The page holds *frames*: every micro-step when the run is short (``MICRO_LIMIT``), else the state after every
  operation plus every moment (went stale, cleaned up, violation, assertion) so no highlight is skipped.
- Drawings and panels are stored once each (*deduplicated*) in a JSON block; a frame names them by index.
- A short run's drawings are SVG, drawn here by Graphviz. A *long* run (more than ``DOT_LIMIT`` micro-steps)
  stores each drawing as DOT text instead, and the page draws the frame it shows with the Graphviz WebAssembly
  build ``@viz-js/viz`` (inlined once, ``render/vendor/viz-global.js``), keeping the last few drawings; its data
  block is *packed*: every text is cut into pieces (DOT lines and label rows, panel rows and chips) stored once,
  each text a list of piece indices (consecutive frames share almost every line: a 2,000-request run's 127 MB of
  text become 12 MB of JSON), then gzip-compressed (the page inflates it with the browser's ``DecompressionStream``
  and joins a text's pieces only when it shows it; ``export_data.py``). The block and the script sit in the page's
  head, so that work starts while the body is parsed. Both work offline and from a file. Snapshots are rebuilt from
  the trace's checkpoints a stretch at a time while the page is built.
  Plain JavaScript swaps them in: first / previous / next / last, previous / next operation, jump to the next
  went-stale / cleaned-up / violation / assertion (wrapping around), the slider, keyboard arrows (left / right:
  micro-step, up / down: operation, Home / End), and clicks on the timeline's operation blocks.
- With ``compare``, the two runs (same schedule, two presets) go in lockstep, operation by operation, to the end of
  the longer one (a run that stopped stays on its last step); "go to divergence" shows the first step of the
  first operation where they part.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

from .codepane import code_frames
from .errors import ConfigError
from .export_data import _data_block, _Store, json_in_html, pack  # noqa: F401  (json_in_html, pack: re-exported)
from .render.codepane import CODE_CSS, codepane_html
from .render.diverge import divergence_point
from .render.dot import legend_dot, render_many, render_svg
from .render.frames import FOCUS_CSS, frame, op_frames, op_text
from .render.layout import stable
from .render.moments import MOMENT_KINDS, compare_positions, first_divergence, moments, op_index_of
from .render.panels import PANEL_CSS
from .render.timeline import step_x, timeline_svg
from .render.words import op_number
from .transcript import outcome_words, replay_command, run_label

MICRO_LIMIT = 600
DOT_LIMIT = 3000  # micro-steps: a longer run's page draws DOT in the browser and compresses its data
BATCH = 256  # frames built per stretch of rebuilt snapshots (bounds the memory an export of a long run needs)
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


def is_long(trace) -> bool:
    """A long run's page draws its DOT in the browser (see the module doc)."""
    return len(trace.steps) > DOT_LIMIT


def _within_limit(run) -> None:
    """The page is built under the run's memory limit: what the run and its page add over the run's start."""
    watch = getattr(run.trace, "_watch", None)
    if watch is not None:
        watch.check("the page of this run", "export fewer operations with --ops A:B, or raise the limit with "
                                            "--memory-limit MB")


def _run_frames(run, steps: list[int], drawings: _Store, html: _Store, dot_only: bool, bar=None,
                which: int = 0, guard: tuple[int, tuple] | None = None) -> list[dict]:
    """The page's frames of ``run`` at ``steps``; ``guard``: (step, (function, line, flag)) of a comparison's
    divergent step, whose code pane highlights the guard line."""
    marks = moments(run.trace)
    out = []
    for chunk in _stretches(run.trace, steps):
        prefetch = getattr(run.trace.snapshots, "prefetch", None)
        if prefetch is not None:  # one replay per checkpoint stretch, not one per frame
            prefetch(chunk)
        code_frames(run.trace, chunk)  # one replay per checkpoint stretch: the code pane and the holders read it
        fs = [frame(run, s, legend=False) for s in chunk]  # the page shows the legend once
        # stable positions: each operation's frames pinned to one layout of their union (render/layout.py)
        pinned: dict[tuple[int, str], str] = {}  # (frame, "dot" / "dot_all") -> its pinned DOT
        for k in dict.fromkeys(f.op_index for f in fs):
            for kind in ("dot", "dot_all"):
                group = [i for i, f in enumerate(fs) if f.op_index == k and getattr(f, kind) is not None]
                for i, d in zip(group, stable([getattr(fs[i], kind) for i in group]), strict=True):
                    pinned[i, kind] = d
        texts = list(dict.fromkeys(pinned.values()))
        svgs = dict(zip(texts, texts if dot_only else render_many(texts), strict=True))
        _within_limit(run)
        for i, f in enumerate(fs):
            out.append(dict(step=f.step, op=f.op_index, num=op_number(run.trace, f.op_index), caption=f.caption,
                            svg=drawings.add(svgs[pinned[i, "dot"]]), focus=f.focus,
                            all=None if f.dot_all is None else drawings.add(svgs[pinned[i, "dot_all"]]),
                            panels=[html.add(p) for p in f.panels], inv=html.add(f.invariants),
                            stack=html.add(f.stack), expl=html.add(f.explanation),
                            code=html.add(codepane_html(run, f.step, f"sc-t{which}", run.preset if which else "",
                                                        guard[1] if guard and guard[0] == f.step else None)),
                            x=step_x(run.trace, f.step, TIMELINE_WIDTH),
                            marks=[k for k in MOMENT_KINDS if f.step in marks[k]]))
            _within_limit(run)
        if bar is not None:
            bar.update(len(chunk))
    return out


def _stretches(trace, steps: list[int]):
    """``steps`` in stretches of about ``BATCH``, cut only between operations (an operation's frames are pinned to
    one layout together, ``render/layout.py``; one longer than ``BATCH`` is a stretch of its own)."""
    chunk: list[int] = []
    for s in steps:
        if len(chunk) >= BATCH and op_index_of(trace, s) != op_index_of(trace, chunk[-1]):
            yield chunk
            chunk = []
        chunk.append(s)
    if chunk:
        yield chunk


def _bar(total: int, progress: bool | None):
    if progress is False or (progress is None and total < 2 * BATCH):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="frame", desc="exporting", disable=None if progress is None else False,
                leave=False)


def _tour_stops(tour, run) -> tuple[list[dict], set[int]]:
    """The tour's stops as page data (frame indices filled in later) and the micro-steps the page must hold: each
    stop's choices in the tour's shuffled order, where the right one is, and each wrong one's hint."""
    from .tour import checked

    t, _, steps = checked(tour, run)
    stops = []
    for i, (s, step) in enumerate(zip(t.stops, steps, strict=True)):
        order = t.order(i)
        stops.append(dict(step=step, title=s.title, ask=s.ask, choices=[s.choices[k].text for k in order],
                          answer=order.index(s.answer), hints=["" if k == s.answer else s.hint_for(k) for k in order],
                          explain=s.explain))
    return stops, {x for step in steps for x in (step, max(0, step - 1))}


def page_data(run, compare=None, progress: bool | None = None, tour=None) -> dict:
    """Everything the page's script needs, as plain data (``svgs`` holds DOT text when ``dot`` is true); with
    ``tour`` (a ``tour.Tour``, checked against ``run``), its stops, each naming the frame before it and its own."""
    drawings, html = _Store(), _Store()
    steps, other, ops = frame_steps(run.trace), [], None
    stops, need = _tour_stops(tour, run) if tour is not None else ([], set())
    steps = sorted(set(steps) | need)
    dot_only = is_long(run.trace) or (compare is not None and is_long(compare.trace))
    point = guards = None
    if compare is not None:  # lock-stepped to the end of the LONGER run, so both endings can be shown
        point = divergence_point(run, compare)  # where the code parts, and the guard line that parts it
        keep_a, keep_b = set(steps), set(frame_steps(compare.trace))
        positions = compare_positions([run.trace, compare.trace])
        pairs = [(p, k) for i, (p, k) in enumerate(zip(*positions, strict=True))
                 if p[0] in keep_a or p[1] in keep_b or (point is not None and i == point.position)]
        steps, other, ops = [p[0] for p, _ in pairs], [p[1] for p, _ in pairs], [k for _, k in pairs]
        if point is not None and point.function is not None:
            guards = [(s, (point.function, point.line, point.flag)) for s in point.steps]
    bar = _bar(len(steps) + len(other), progress)
    try:
        runs = [dict(preset=run.preset, outcome=run.outcome,
                     frames=_run_frames(run, steps, drawings, html, dot_only, bar,
                                        guard=guards[0] if guards else None))]
        divergence = None
        if compare is not None:
            runs.append(dict(preset=compare.preset, outcome=compare.outcome,
                             frames=_run_frames(compare, other, drawings, html, dot_only, bar, which=1,
                                                guard=guards[1] if guards else None)))
            divergence = first_divergence(run.trace, compare.trace)
            for r in runs:  # a position belongs to one operation, even where a run that stopped stays on its end
                for f, k in zip(r["frames"], ops, strict=True):
                    f["op"] = k
    finally:
        if bar is not None:
            bar.close()
    div_text = None
    if divergence is not None:
        t = run.trace if divergence < len(run.trace.ops) else compare.trace
        div_text = f"First divergence: operation {op_number(t, divergence)} ({op_text(t, divergence)})"
        if point is not None and point.function is not None:
            div_text += (f"; at steps {point.steps[0]} / {point.steps[1]} the runs part at {point.function} line "
                         f"{point.line}, the {point.flag} guard (highlighted in both code panes)")
    at = {f["step"]: i for i, f in enumerate(runs[0]["frames"])}
    for stop in stops:
        stop["frame"], stop["before"] = at[stop["step"]], at[max(0, stop["step"] - 1)]
    for r, frames in zip((run, compare), runs, strict=False):
        frames["last"] = len(r.trace.steps) - 1
        frames["dropped"] = _dropped(r, len({f["step"] for f in frames["frames"]}))
        frames["label"] = run_label(r)
    # the frame "first divergence" lands on: the divergent step itself (not only its operation's start)
    div_frame = None if point is None else next(
        (i for i, (a, b) in enumerate(zip(runs[0]["frames"], runs[1]["frames"], strict=True))
         if (a["step"], b["step"]) == point.steps), None)
    return dict(svgs=drawings.items, html=html.items, runs=runs, divergence=divergence, divergence_text=div_text,
                divergence_frame=div_frame, dot=dot_only, tour=stops,
                tour_title=tour.title if tour is not None else None)


def _header(run, compare, note: str | None = None, touring: bool = False) -> str:
    sc = run.scenario
    who = f"{run_label(run)} vs {run_label(compare)}" if compare is not None else run_label(run)
    outcome = "; ".join(f"<b>{escape(run_label(r))}</b>: {escape(outcome_words(r))}" for r in (run, compare)
                        if r is not None)
    if touring:  # the tour asks how the run ends: the header must not say it (nor a note on the real code's)
        outcome, note = "the outcome is for the tour to reveal", None
    about = f"<p>{escape(sc.title or sc.description)}</p>" if (sc.title or sc.description) else ""
    extra = f'<p class="header-note">{escape(note)}</p>' if note else ""  # e.g. the real code's outcome
    return (f"<h1>simcache · {escape(sc.name)} · {escape(who)}</h1>{about}"
            f'<p id="outcome">schedule <code>{escape(str(run.schedule))}</code> · {outcome}</p>{extra}')


OPS_SENTINEL = (999999991, 999999992)  # stands for the window in the page's command; the script fills it in


def _windows(trace) -> list[int]:
    """Per operation k, the end B of the window ``--ops k:B`` the page offers: as many operations from k as fit in
    ``MICRO_LIMIT`` micro-steps (at least one), so that window's page holds every micro-step."""
    ops, out = trace.ops, []
    for k, o in enumerate(ops):
        j, steps = k, 0
        while j < len(ops):
            last = ops[j].last_step if ops[j].last_step >= 0 else len(trace.steps) - 1
            steps += last - ops[j].first_step + 1
            if steps > MICRO_LIMIT and j > k:
                break
            j += 1
        out.append(ops[j - 1].index + 1 if j > k else o.index + 1)
    return out


def _dropped(run, shown: int) -> dict | None:
    """What a long run's page left out, and the command that gets it: None when the page holds every step."""
    total = len(run.trace.steps)
    if shown >= total:
        return None
    cmd = replay_command(run, "export", ops=OPS_SENTINEL, extra=("-o", "window.html"))
    return dict(total=total, shown=shown, cmd=cmd, sentinel=f"{OPS_SENTINEL[0]}:{OPS_SENTINEL[1]}",
                windows=_windows(run.trace), first=[o.index for o in run.trace.ops])


def _tour_section(data: dict, tour) -> str:
    if not data["tour"]:
        return ""
    intro = f"<p>{escape(tour.intro)}</p>" if tour.intro else ""
    return (f'<section id="tour"><h2>Tour: {escape(data["tour_title"])}</h2>{intro}<div id="tour-q"></div>'
            f'<div id="tour-choices"></div><div id="tour-feedback"></div>'
            f'<button id="tour-prev">&#9664; previous stop</button><button id="tour-giveup">show the answer</button>'
            f'<button id="tour-next">next stop &#9654;</button><p id="tour-score"></p>'
            f"</section>")


def render_page(run, compare=None, progress: bool | None = None, tour=None, header_note: str | None = None) -> str:
    """The HTML text of the page (with ``tour``, a tour section above the run: question, choices, feedback;
    ``header_note``: one more line under the header, like the real code's outcome)."""
    if tour is not None and compare is not None:
        raise ConfigError("a tour steps through one run; export it without a second preset to compare")
    if tour is not None and not hasattr(tour, "stops"):
        from .tour import load

        tour = load(tour)
    data = page_data(run, compare, progress, tour)
    block = _data_block(data)
    _within_limit(run)
    runs = [run] + ([compare] if compare is not None else [])
    lanes = [timeline_svg(r.trace, 0, width=TIMELINE_WIDTH, title=run_label(r) if data["tour"] else
                          f"{run_label(r)}: {outcome_words(r)}") for r in runs]  # a tour keeps it to reveal
    # one screen per moment: each run's tree (with its caption and timeline) beside its code pane and its holders;
    # run 0's parts keep the ids the page has always had (#code, #holders, #explanation, ...)
    def ids(i: int, name: str) -> str:
        return f' id="{name}"' if i == 0 else ""

    cols = "".join(f'<section class="run" id="run{i}"><div class="view"><h2>{escape(run_label(r))}</h2>'
                   f'<div class="caption"></div><div class="tree sc-tree sc-t{i}"></div>'
                   f'<div class="timeline">{lane}</div></div>'
                   f'<div class="work"><div class="code"{ids(i, "code")}></div>'
                   f'<div class="holders"{ids(i, "holders")}></div></div></section>'
                   for i, (r, lane) in enumerate(zip(runs, lanes, strict=True)))
    more = "".join(f'<div class="more-run" id="more{i}"><div class="explanation"{ids(i, "explanation")}></div>'
                   f'<div class="stack"{ids(i, "stack")}></div><div class="invariants"{ids(i, "invariants")}></div>'
                   f'<div class="panels"{ids(i, "panels")}></div></div>' for i in range(len(runs)))
    buttons = "".join(f'<button id="btn-{k}" title="{t}">{label}</button>' for k, label, t in (
        ("first", "|&#9664; first", "Home"), ("prev-op", "&#9664;&#9664; op", "Up"), ("prev", "&#9664; step", "Left"),
        ("next", "step &#9654;", "Right"), ("next-op", "op &#9654;&#9654;", "Down"), ("last", "last &#9654;|", "End")))
    jumps = "".join(f'<button class="jump" data-kind="{k}" id="jump-{k}">{k.replace("-", " ")} &#8631;</button>'
                    for k in MOMENT_KINDS)
    div = '<button id="btn-divergence">first divergence</button>' if data["divergence"] is not None else ""
    if any(f["all"] is not None for r in data["runs"] for f in r["frames"]):  # a tree larger than a screen
        div += ('<label id="show-all-box" title="the focus view draws the stale nodes, their ancestors and siblings, '
                'and folds every other subtree into one box"><input type="checkbox" id="show-all"> show all nodes'
                "</label>")
    css = PANEL_CSS + FOCUS_CSS + CODE_CSS + (_ASSETS / "export.css").read_text()
    script = (_ASSETS / "export.js").read_text()
    if data["dot"]:  # the Graphviz WebAssembly build, once, in the same script element
        script = (_ASSETS / "vendor" / "viz-global.js").read_text() + "\n" + script
    # the data block and the script go in the head: the Graphviz build compiles and the block inflates while the
    # body (a long run's timeline: thousands of blocks) is parsed; the script starts the page once the body is there
    head = _header(run, compare, header_note, bool(data["tour"]))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>simcache: {escape(run.scenario.name)}'
            f"</title><style>{css}</style>{block}<script>{script}</script></head><body>{head}"
            f'<nav id="controls">{buttons}<input type="range" id="slider" min="0" value="0"><span id="pos"></span>'
            f'<div class="jumps">jump to: {jumps}{div}</div></nav>'
            f'<p id="divergence" class="sc-bad"></p><div id="dropped"></div>{_tour_section(data, tour)}'
            f'<div id="layout" class="layout-{len(data["runs"])}">{cols}</div>'
            f'<svg id="arrows" aria-hidden="true"></svg>'
            f'<div id="more" class="more-{len(data["runs"])}">{more}'
            f'<details class="legend"><summary>legend: what the boxes, colours and badges mean</summary>'
            f"{render_svg(legend_dot())}</details></div>"
            f"</body></html>")


def export_html(run, path, compare=None, progress: bool | None = None, tour=None,
                header_note: str | None = None) -> Path:
    """Write the self-contained page for ``run`` (and ``compare`` beside it) to ``path``; returns the path.
    ``tour``: a gallery tour name, a tour file or a ``tour.Tour`` to take on the page (predict, then reveal)."""
    if not run.trace.steps:
        raise ConfigError("this run has no micro-steps to export; give it at least one operation")
    if any(not r.trace.snapshots for r in (run, compare) if r is not None):
        raise ConfigError("this run was simulated without snapshots; simulate(..., snapshots=True) to export it")
    from .errors import FileError, OutputError
    from .safe_io import check_file, write_file

    try:
        check_file(path)  # before the (slow) rendering, so a bad path fails at once
        text = render_page(run, compare, progress, tour, header_note)
        return write_file(path, text)  # replaces only a regular file, atomically; streams to a device or a pipe
    except OutputError:  # stdout (-o -) full or closed: the command line exits 1 for it
        raise
    except FileError as e:
        raise ConfigError(str(e)) from None
