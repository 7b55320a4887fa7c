"""The player: step through a run in JupyterLab, side by side with another preset, or play the scheduler.

The widgets are a thin layer over plain classes that tests drive directly: ``PlayerModel`` (``player_model.py``:
the cursor, jumps, toggles, cached frames, side by side in lockstep, and ``static_snapshot``, the player without a
kernel) and ``SchedulerGame`` (``game.py``: *be the scheduler*, the learner picks which actor moves next); both are
re-exported here. One screen: the controls, the tree and the running frame's code beside the caption, the tabs
below (the call stack first); side by side, two such columns.
"""
from __future__ import annotations

from html import escape
from itertools import count

from .player_model import FRAME_KEEP, PRECOMPUTE_LIMIT, PlayerModel, static_snapshot  # noqa: F401  (re-exported)
from .render.codepane import CODE_CSS
from .render.display import page_css
from .render.dot import legend_dot, render_svg
from .render.moments import MOMENT_KINDS

_TOKENS = count()  # pairs each side's code pane with its own tree (render/codepane.py)
PAGE_CSS = page_css(CODE_CSS + ".sc-tree svg{max-height:430px}.sc-legend svg{max-height:none}"
                    ".sc-tl svg{max-width:100%;height:auto;max-height:130px}.sc-count{font-family:monospace}"
                    ".sc-run{display:inline-block;padding:1px 8px;border-radius:4px;background:#1e3a8a;color:#fff;"
                    "font-weight:bold}.sc-static{display:none}"  # live widgets hide the static snapshot
                    ".sc-cmp .sc-tree svg{max-height:320px}")


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


__all__ = ["MOMENT_KINDS", "Player", "PlayerModel", "SchedulerGame"]

from .game import SchedulerGame  # noqa: E402  (re-exported: the be-the-scheduler mode)
