"""The player: step through a run in JupyterLab, side by side with another preset, or play the scheduler.

Vocabulary
- The *cursor* is a position: a micro-step of the run, or in compare mode one (operation, offset) pair of the
  longer of the two runs at that operation. *Stepping* moves it by one; *stepping by operation* moves it to the
  last micro-step of the next / previous operation (the state after that operation).
- A *jump* moves it to the next / previous moment of either run: went-stale, readmitted, cleaned-up, violation,
  assertion; when there is none, the note line says so.
- *Side by side*: a second run of the same schedule under another preset follows in lockstep (same operation,
  same offset inside it); the slider spans the longer run, so a run that ends cleanly is shown to its end; the
  *first divergence* is the first operation whose status or tree differs, and "go to divergence" lands on its
  first micro-step.
- *Be the scheduler*: the learner picks which actor moves next; each pick replays the prefix so far.

The logic lives in plain classes that tests drive directly (``PlayerModel`` here; ``SchedulerGame``, in
``game.py``, is re-exported here); the widgets are a thin layer. A short run's frames are precomputed and all
drawings rendered by one ``dot`` process, so a step only looks up cached strings. A long run's frames are built
on demand: the snapshot a frame needs is rebuilt from the trace's checkpoints (``trace.Timeline``), and frames are
cached as they are seen.
"""
from __future__ import annotations

import math
from html import escape
from itertools import count

from . import args
from .errors import ArgumentError, ConfigError, shown
from .render.codepane import CODE_CSS, codepane_html
from .render.display import page_css, svg_img
from .render.dot import SVG_CACHE, legend_dot, render_many, render_svg
from .render.frames import Frame, focus_svg, frame, op_frames, op_text
from .render.layout import stable
from .render.moments import MOMENT_KINDS, compare_positions, first_divergence, moments, next_moment
from .render.timeline import timeline_svg
from .render.words import op_number
from .transcript import outcome_words, run_label

PRECOMPUTE_LIMIT = 3000  # micro-steps; longer runs render frames on demand (still cached)
FRAME_KEEP = 512  # frames a long run's player keeps
_TOKENS = count()  # pairs each side's code pane with its own tree (render/codepane.py)
PAGE_CSS = page_css(CODE_CSS + ".sc-tree svg{max-height:430px}.sc-legend svg{max-height:none}"
                    ".sc-tl svg{max-width:100%;height:auto;max-height:130px}.sc-count{font-family:monospace}"
                    ".sc-run{display:inline-block;padding:1px 8px;border-radius:4px;background:#1e3a8a;color:#fff;"
                    "font-weight:bold}.sc-static{display:none}"  # live widgets hide the static snapshot
                    ".sc-cmp .sc-tree svg{max-height:320px}")


class PlayerModel:
    """Cursor, toggles and cached frames over ``run`` (and ``compare_run``, in lockstep).

    The cursor indexes *positions*: one per micro-step of a single run; in compare mode one per (operation,
    offset) of the LONGER of the two runs at each operation, so every step of both runs can be shown (a run that
    stopped earlier, e.g. at its assertion, stays on its last step while the other one goes on to its end)."""

    def __init__(self, run, compare_run=None, *, precompute: bool = True) -> None:
        args.run(run, "PlayerModel")
        if compare_run is not None:
            args.run(compare_run, "PlayerModel", "compare_run")
        args.flag(precompute, "precompute")
        if not run.trace.steps:
            raise ConfigError("this run has no micro-steps to play; give it at least one operation")
        for r in (run, compare_run):
            if r is not None and len(r.trace.snapshots) != len(r.trace.steps):
                raise ConfigError("this run was simulated without snapshots; simulate(..., snapshots=True) to play it")
        self.runs = [run] + ([compare_run] if compare_run is not None else [])
        self.cursor = 0
        self.hide_host = self.hide_mamba = False
        self.message = ""  # what the last jump found (or did not), for the note line
        self.limit: int | None = None  # the last position the cursor may reach (a tour hides what follows)
        self.hide_outcome = False  # a tour keeps the run's outcome out of the timeline's title
        self.divergence = first_divergence(run.trace, compare_run.trace) if compare_run is not None else None
        self.positions, self.position_op = compare_positions([r.trace for r in self.runs])
        self._frames: dict[tuple, Frame] = {}
        self._pinned: dict[tuple, list[str]] = {}
        if precompute:
            self.precompute()

    # --- navigation ---
    @property
    def trace(self):
        return self.runs[0].trace

    @property
    def num_steps(self) -> int:
        """How many positions the slider has (the longer run's length in compare mode)."""
        return len(self.positions)

    def go(self, step: int) -> int:
        if isinstance(step, float) and math.isfinite(step):
            step = int(step)  # (a slider may hand in a float)
        args.whole(step if type(step) is not bool else int(step), "step", example="player.go(0)")
        hi = self.num_steps - 1 if self.limit is None else min(self.limit, self.num_steps - 1)
        self.cursor = max(0, min(int(step), hi))
        return self.cursor

    def step(self, delta: int = 1) -> int:
        return self.go(self.cursor + args.whole(delta, "delta", example="player.step(-1)"))

    def op_ends(self) -> list[int]:
        """The position of each operation's last micro-step (the state after the operation)."""
        ends: dict[int, int] = {}
        for i, k in enumerate(self.position_op):
            ends[k] = i
        return [ends[k] for k in sorted(ends)]

    def op_start(self, k: int) -> int:
        if type(k) is not int or k not in self.position_op:
            raise args.fail("k", f"an operation number from {self.position_op[0]} to {self.position_op[-1]}", k)
        return self.position_op.index(k)

    def step_op(self, delta: int = 1) -> int:
        args.whole(delta, "delta", example="player.step_op(-1)")
        ends = self.op_ends()
        later = [s for s in ends if s > self.cursor] if delta > 0 else [s for s in ends if s < self.cursor][::-1]
        return self.go(later[0]) if later else self.cursor

    def first(self) -> int:
        return self.go(0)

    def last(self) -> int:
        return self.go(self.num_steps - 1)

    def position_of(self, which: int, step: int) -> int:
        """The first position showing micro-step ``step`` of run ``which``."""
        self._which(which)
        args.whole(step, "step", 0, len(self.runs[which].trace.steps) - 1)
        return next(i for i, pos in enumerate(self.positions) if pos[which] >= step)

    def jump(self, kind: str, direction: int = 1) -> bool:
        """Move to the next (or previous) ``kind`` moment of either run; False, no move and a message if none."""
        if kind not in MOMENT_KINDS:
            raise ArgumentError(f"unknown moment {shown(kind, 40)}; choose one of {', '.join(MOMENT_KINDS)}")
        if direction not in (1, -1) or type(direction) is not int:
            raise args.fail("direction", "1 (forward) or -1 (back)", direction)
        # each run's nearest moment past its own shown step: its position lies past the cursor, since a run's shown
        # step moves by at most one from a position to the next (the recorder's operations are contiguous, and
        # compare_positions walks each one offset by offset: no run skips a step)
        targets = []
        for which, run in enumerate(self.runs):
            step = next_moment(run.trace, kind, self.step_of(which), direction)
            if step is not None:
                targets.append(self.position_of(which, step))
        if not targets:
            where = "either run" if len(self.runs) > 1 else "this run"
            self.message = f"No {'later' if direction > 0 else 'earlier'} {kind.replace('-', ' ')} moment in {where}."
            return False
        target = min(targets) if direction > 0 else max(targets)
        if self.limit is not None and target > self.limit:
            self.message = "The tour keeps what comes next hidden: answer its question first."
            return False
        self.message = ""
        self.go(target)
        return True

    def jump_to_divergence(self) -> bool:
        """Move to the first micro-step of the first operation where the two runs differ."""
        if self.divergence is None:
            return False
        k = min(self.divergence, max(self.position_op))
        self.go(self.op_start(k))
        return True

    def set_toggles(self, hide_host: bool | None = None, hide_mamba: bool | None = None) -> None:
        self.hide_host = self.hide_host if hide_host is None else bool(hide_host)
        self.hide_mamba = self.hide_mamba if hide_mamba is None else bool(hide_mamba)

    # --- views ---
    def step_of(self, which: int = 0) -> int:
        """The micro-step of run ``which`` shown at the cursor."""
        return self.positions[self.cursor][self._which(which)]

    def _which(self, which) -> int:
        if type(which) is not int or not 0 <= which < len(self.runs):
            raise args.fail("which", "0 (the run)" + (" or 1 (the compared run)" if len(self.runs) > 1 else ""), which)
        return which

    def frame(self, which: int = 0, step: int | None = None) -> Frame:
        if step is not None:
            self._which(which)
            args.whole(step, "step", 0, len(self.runs[which].trace.steps) - 1)
        step = self.step_of(which) if step is None else step
        key = (which, step, self.hide_host, self.hide_mamba)
        if key not in self._frames:
            self._frames[key] = frame(self.runs[which], step, hide_host=self.hide_host, hide_mamba=self.hide_mamba,
                                      legend=False)  # the player shows the legend once, beside the tree
            if len(self._frames) > FRAME_KEEP and len(self.trace.steps) > PRECOMPUTE_LIMIT:
                del self._frames[next(iter(self._frames))]  # a long run keeps its most recent frames only
        return self._frames[key]

    def pinned(self, which: int, op_index: int) -> list[str]:
        """The drawings of operation ``op_index`` of run ``which``, pinned to one layout (``render/layout.py``):
        nodes keep their places through the operation (cached per toggles)."""
        key = (which, op_index, self.hide_host, self.hide_mamba)
        if key not in self._pinned:
            t = self.runs[which].trace
            self._pinned[key] = stable([self.frame(which, s).dot for s in range(t.ops[op_index].first_step,
                                                                               op_frames(t)[op_index] + 1)])
            if len(self._pinned) > FRAME_KEEP:
                del self._pinned[next(iter(self._pinned))]
        return self._pinned[key]

    def svg(self, which: int = 0) -> str:
        f = self.frame(which)
        t = self.runs[which].trace
        drawings = self.pinned(which, f.op_index)
        dot = drawings[f.step - t.ops[f.op_index].first_step] if t.ops else f.dot
        if SVG_CACHE.get(dot) is None:  # e.g. after a toggle: draw this whole operation with one dot process
            render_many(drawings)
        return focus_svg(render_svg(dot), f.focus)

    def code(self, which: int = 0, token: str = "sc-t0") -> str:
        """The code pane at the cursor: the simulated frames, their source and the nodes their locals hold."""
        args.text(token, "token", "player.code(0, 'sc-t0')")
        self._which(which)
        return codepane_html(self.runs[which], self.step_of(which), token,
                             self.runs[which].preset if len(self.runs) > 1 else "")

    def timeline(self, which: int = 0) -> str:
        run = self.runs[self._which(which)]
        return timeline_svg(run.trace, self.step_of(which), hide_after=self.limit,
                            title=run.preset if self.hide_outcome else f"{run_label(run)}: {outcome_words(run)}")

    def divergence_note(self) -> str:
        if len(self.runs) < 2:
            return ""
        if self.divergence is None:
            return "The two runs never diverge on this schedule."
        k = min(self.divergence, max(self.position_op))
        here = self.position_op[self.cursor]
        where = "here" if here == k else "ahead" if here < k else "behind"
        t = self.trace if k < len(self.trace.ops) else self.runs[1].trace
        return f"First divergence: operation {op_number(t, k)} ({op_text(t, k)}) [{where}]"

    def precompute(self) -> None:
        """Build every frame of a short run (up to ``PRECOMPUTE_LIMIT`` steps) and render all drawings in one go;
        a longer run's frames are built when they are first shown (a seek rebuilds only the state it needs)."""
        dots = []
        for which, run in enumerate(self.runs):
            if len(run.trace.steps) > PRECOMPUTE_LIMIT:
                continue
            for s in range(len(run.trace.steps)):
                self.frame(which, s)
            for k in range(len(run.trace.ops)):
                dots += self.pinned(which, k)
        render_many(dots)




def _widgets():
    import ipywidgets

    return ipywidgets


class _Side:
    """The widgets that show one run: caption, tree, timeline, the code pane and the tabbed panels (the call stack
    first). Heights are capped so that the controls, the tree, the code and the tabs fit one 900-pixel screen;
    side by side, the timeline becomes the last tab."""

    TABS = ("why stale", "holders", "pools", "invariants", "legend")  # short: seven tabs share half a screen

    def __init__(self, W, label: str, stack_in_tabs: bool = False) -> None:
        self.caption, self.tree, self.timeline, self.stack = W.HTML(), W.HTML(), W.HTML(), W.HTML()
        self.code = W.HTML()
        self.token = f"sc-t{next(_TOKENS)}"
        compare = stack_in_tabs
        # anchored at its bottom (a reversed column), where the open frame and its ▶ line are: a widget runs no
        # script to scroll the pane, and the innermost frame comes last
        self.code_box = W.Box([self.code], layout=W.Layout(max_height="230px" if compare else "330px",
                                                           overflow="auto", flex_flow="column-reverse"))
        self.explanation, self.panels, self.pools, self.invariants, self.legend = (W.HTML() for _ in range(5))
        box = W.Layout(max_height="190px" if compare else "250px", overflow="auto")
        shown = (self.stack, self.explanation, self.panels, self.pools, self.invariants, self.legend) + \
            ((self.timeline,) if compare else ())
        self.tabs = W.Tab([W.Box([w], layout=box) for w in shown])
        self.titles = ("stack",) + self.TABS + (("timeline",) if compare else ())
        for i, title in enumerate(self.titles):
            self.tabs.set_title(i, title)
        self.label = label

    def fill(self, model: PlayerModel, which: int) -> None:
        f = model.frame(which)
        run = model.runs[which]
        # side by side, each run's own micro-step (alone, the slider is the one counter)
        who = (f'<span class="sc-run">{escape(self.label)}</span> <span class="sc-count">step {f.step} of '
               f"{len(run.trace.steps) - 1}</span> " if self.label else "")
        self.caption.value = f"{who}<b>{escape(f.caption)}</b>"
        self.tree.value = f'<div class="sc-tree {self.token}">{model.svg(which)}</div>'
        self.code.value = model.code(which, self.token)
        self.timeline.value = f'<div class="sc-tl">{model.timeline(which)}</div>'
        self.stack.value = f.stack
        self.explanation.value = f.explanation
        self.panels.value = f.panels[3] + f.panels[0] + f.panels[1]  # the ledger first: it names the ghosts
        self.pools.value = f.panels[2]
        self.invariants.value = f.invariants
        self.legend.value = (f'<div class="sc-tree sc-legend">'
                             f"{render_svg(legend_dot(model.hide_host, model.hide_mamba))}</div>")
        bad = [v for v in run.trace.violations if v.step <= model.step_of(which)]
        self.tabs.set_title(self.titles.index("invariants"),
                            f"invariants ✗{len({v.invariant for v in bad})}" if bad else "invariants")


class Player:
    """The ipywidgets player; ``Player(run, compare=other_run)`` then display it (or its ``.widget``).

    Layout (one 1440x900 screen, no scrolling): the controls (every button says what it does in words), the slider
    and the one counter (``step 5 of 262``); alone, the caption (one sentence), the tree and its timeline on the
    left, the code pane (``render/codepane.py``: each frame's source, current line and node locals) and tabs on the
    right: the call stack (first, shown by default), the explanation, the holder ledger with the lists and sets,
    the pools, the invariants and the legend. In compare mode the two runs' columns stand side by side, each
    labelled with its own step, each with its tree, its code and its tabs (the timeline the last tab).
    Displayed in a notebook, the player also leaves a static HTML snapshot (``static_html``) that shows where
    widgets cannot run (GitHub, nbviewer, ``nbconvert --to html``) and hides itself where they can."""

    JUMPS = [("went stale", "went-stale"), ("re-admitted", "readmitted"), ("cleaned up", "cleaned-up"),
             ("violation", "violation"), ("assertion", "assertion")]

    def __init__(self, run, compare=None, *, precompute: bool = True) -> None:
        W = _widgets()
        self.model = m = PlayerModel(run, compare, precompute=precompute)
        b = dict(first="|◀ first", prev_op="◀◀ op", prev="◀ step", next="step ▶", next_op="op ▶▶", last="last ▶|",
                 play="▶ play", pause="‖ pause", stop="■ stop", jump_prev="◀ jump", jump_next="jump ▶",
                 divergence="go to divergence")
        tips = dict(first="go to the first micro-step", prev_op="back to the end of the previous operation",
                    prev="one micro-step back", next="one micro-step forward",
                    next_op="forward to the end of the next operation", last="go to the last micro-step",
                    play="play the run, one micro-step per tick", pause="pause playing here",
                    stop="stop playing and go back to the first micro-step",
                    jump_prev="back to the previous moment of the kind chosen in 'jump to'",
                    jump_next="forward to the next moment of the kind chosen in 'jump to'",
                    divergence="go to the first micro-step of the first operation where the two runs differ")
        self.buttons = {k: W.Button(description=v, tooltip=tips[k], layout=W.Layout(width="auto"))
                        for k, v in b.items()}
        # the one counter is ``self.counter`` ("step 5 of 262"; side by side, each run's own above its tree)
        self.slider = W.IntSlider(value=0, min=0, max=m.num_steps - 1, description="step", readout=False,
                                  layout=W.Layout(width="80%"))
        self.counter = W.HTML()
        # the timer: a Play widget with its icon buttons hidden; the labelled buttons above drive it
        self.play = W.Play(value=0, min=0, max=m.num_steps - 1, interval=400, description="play",
                           layout=W.Layout(display="none"))
        self.repeat = W.Checkbox(value=False, description="repeat", tooltip="start again at the end",
                                 indent=False, layout=W.Layout(width="auto"))
        self.speed = W.IntSlider(value=400, min=50, max=2000, step=50, description="ms / step",
                                 tooltip="milliseconds per micro-step while playing")
        W.link((self.play, "value"), (self.slider, "value"))
        W.link((self.speed, "value"), (self.play, "interval"))
        W.link((self.repeat, "value"), (self.play, "repeat"))
        self.jump_kind = W.Dropdown(options=self.JUMPS, value="went-stale", description="jump to",
                                    layout=W.Layout(width="auto"))
        self.hide_host = W.Checkbox(value=False, description="hide host tier", indent=False,
                                    layout=W.Layout(width="auto"))
        self.hide_mamba = W.Checkbox(value=False, description="hide Mamba detail", indent=False,
                                     layout=W.Layout(width="auto"))
        self.note = W.HTML()
        self.sides = [_Side(W, f"left: {run.preset}" if compare is not None else "", compare is not None)]
        if compare is not None:
            self.sides.append(_Side(W, f"right: {compare.preset}", True))
        left = self.sides[0]
        # the names the tests and notebooks use
        self.caption, self.tree, self.timeline, self.stack = left.caption, left.tree, left.timeline, left.stack
        self.code = left.code
        self.explanation, self.panels, self.invariants, self.legend = (left.explanation, left.panels,
                                                                       left.invariants, left.legend)
        right = self.sides[1] if compare is not None else _Side(W, "")
        self.compare_caption, self.compare_tree, self.compare_timeline = right.caption, right.tree, right.timeline
        self.compare_stack, self.compare_explanation = right.stack, right.explanation
        actions = dict(first=m.first, prev_op=lambda: m.step_op(-1), prev=lambda: m.step(-1), next=m.step,
                       next_op=m.step_op, last=m.last, jump_prev=lambda: m.jump(self.jump_kind.value, -1),
                       jump_next=lambda: m.jump(self.jump_kind.value, 1), divergence=m.jump_to_divergence)
        for name, act in actions.items():
            self.buttons[name].on_click(lambda _b, act=act: self._after(act))
        self.buttons["play"].on_click(lambda _b: self._set_playing(True))
        self.buttons["pause"].on_click(lambda _b: self._set_playing(False))
        self.buttons["stop"].on_click(lambda _b: self._stop())
        self.slider.observe(lambda ch: self._after(lambda: m.go(ch["new"])), names="value")
        for box in (self.hide_host, self.hide_mamba):
            box.observe(lambda _ch: self._after(lambda: m.set_toggles(self.hide_host.value, self.hide_mamba.value)),
                        names="value")
        self.buttons["divergence"].layout.display = None if compare is not None else "none"
        wrap = W.Layout(flex_flow="row wrap", align_items="center")
        row = W.HBox([self.buttons[k] for k in ("first", "prev_op", "prev", "next", "next_op", "last", "play",
                                                "pause", "stop")] + [self.repeat, self.speed, self.play],
                     layout=wrap)
        jumps = W.HBox([self.jump_kind, self.buttons["jump_prev"], self.buttons["jump_next"],
                        self.buttons["divergence"], self.hide_host, self.hide_mamba], layout=wrap)
        if compare is None:
            body = W.HBox([W.VBox([left.caption, left.tree, left.timeline], layout=W.Layout(width="58%")),
                           W.VBox([left.code_box, left.tabs], layout=W.Layout(width="42%"))])
        else:
            body = W.HBox([W.VBox([s.caption, s.tree, s.code_box, s.tabs], layout=W.Layout(width="50%"))
                           for s in self.sides])
        self.widget = W.VBox([W.HTML(PAGE_CSS), row, W.HBox([self.slider, self.counter]), jumps, self.note, body])
        if compare is not None:
            body.add_class("sc-cmp")  # smaller caps on the two drawings side by side (PAGE_CSS)
        self.refresh()

    def _set_playing(self, on: bool) -> None:
        if on and self.model.cursor >= self.model.num_steps - 1:
            self.model.first()  # play from the start when at the end
            self.refresh()
        self.play.playing = on

    def _stop(self) -> None:
        self.play.playing = False
        self._after(self.model.first)

    def _after(self, action) -> None:
        action()
        self.refresh()

    def refresh(self) -> None:
        """Copy the model's state into the widgets (no callback loops: the slider only moves if it differs)."""
        m = self.model
        if self.slider.value != m.cursor:
            self.slider.value = m.cursor  # its observer calls refresh() again; the second call finds it equal
            return
        for which, side in enumerate(self.sides):
            side.fill(m, which)
        self.counter.value = (f'<span class="sc-count">step {m.step_of(0)} of {len(m.trace.steps) - 1}</span>'
                              if len(m.runs) == 1 else f'<span class="sc-count">position {m.cursor} of '
                                                       f"{m.num_steps - 1}</span>")
        notes = [m.divergence_note()] if len(m.runs) > 1 else []
        notes += [m.message] if m.message else []
        self.note.value = "<br>".join(f"<b>{escape(n)}</b>" for n in notes)

    def static_html(self) -> str:
        """A static snapshot for viewers without a kernel: the current frame and the key moments, as images."""
        return static_snapshot(self.model)

    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget)
        display(HTML(self.static_html()))


def static_snapshot(model: PlayerModel) -> str:
    """HTML with no script and no widget: for each run, the frame at the cursor and at each key moment (first
    went-stale, cleaned-up, violation, assertion, and the last step), each a caption and an image."""
    parts = ['<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif">',
             "<p><b>Static snapshot of the player</b> (its buttons need a running kernel; run the notebook to "
             "step through every micro-step).</p>"]
    for which, run in enumerate(model.runs):
        t = run.trace
        found = moments(t)
        picks = [("at the cursor", model.step_of(which))]
        picks += sorted(((kind.replace("-", " "), found[kind][0]) for kind in ("went-stale", "cleaned-up", "violation",
                                                                               "assertion") if found[kind]),
                        key=lambda p: p[1])  # in the order they happen
        picks.append(("last step", len(t.steps) - 1))
        seen, cells = set(), []
        for what, step in picks:
            if step in seen:
                continue
            seen.add(step)
            f = model.frame(which, step)
            svg = focus_svg(render_svg(f.dot), f.focus)
            cells.append(f'<div style="display:inline-block;vertical-align:top;width:48%;margin:0 1% 12px 0">'
                         f"<p><b>{escape(what)}</b>: {escape(f.caption)}</p>{svg_img(svg)}</div>")
        parts.append(f"<h4>{escape(run_label(run))}: {escape(outcome_words(run))}</h4>" + "".join(cells))
    parts.append("</div>")
    return "".join(parts)


__all__ = ["MOMENT_KINDS", "Player", "PlayerModel", "SchedulerGame"]

from .game import SchedulerGame  # noqa: E402  (re-exported: the be-the-scheduler mode)
