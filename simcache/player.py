"""The player: step through a run in JupyterLab, side by side with another preset, or play the scheduler.

Vocabulary
- The *cursor* is a micro-step index of the run. *Stepping* moves it by one micro-step; *stepping by operation*
  moves it to the last micro-step of the next / previous operation (the state after that operation).
- A *jump* moves it to the next / previous moment: went-stale, readmitted, cleaned-up, violation, assertion.
- *Side by side*: a second run of the same schedule under another preset follows in lockstep (same operation,
  same offset inside it); the *first divergence* is the first operation whose status or tree differs.
- *Be the scheduler*: the learner picks which actor moves next; each pick replays the prefix so far.

The logic lives in plain classes that tests drive directly (``PlayerModel`` here; ``SchedulerGame``, in
``game.py``, is re-exported here); the widgets are a thin layer. A short run's frames are precomputed and all
drawings rendered by one ``dot`` process, so a step only looks up cached strings. A long run's frames are built
on demand: the snapshot a frame needs is rebuilt from the trace's checkpoints (``trace.Timeline``), and frames are
cached as they are seen.
"""
from __future__ import annotations

from .errors import ConfigError
from .render.dot import SVG_CACHE, legend_dot, render_many, render_svg
from .render.frames import FOCUS_CSS, Frame, focus_svg, frame, op_frames, op_text
from .render.moments import MOMENT_KINDS, first_divergence, lockstep, next_moment
from .render.panels import PANEL_CSS
from .render.timeline import timeline_svg

PRECOMPUTE_LIMIT = 3000  # micro-steps; longer runs render frames on demand (still cached)
FRAME_KEEP = 512  # frames a long run's player keeps
PAGE_CSS = "<style>" + PANEL_CSS + FOCUS_CSS + ".sc-tree svg{max-width:100%;height:auto}</style>"


class PlayerModel:
    """Cursor, toggles and cached frames over ``run`` (and ``compare_run``, in lockstep)."""

    def __init__(self, run, compare_run=None, *, precompute: bool = True) -> None:
        if not run.trace.steps:
            raise ConfigError("this run has no micro-steps to play; give it at least one operation")
        for r in (run, compare_run):
            if r is not None and len(r.trace.snapshots) != len(r.trace.steps):
                raise ConfigError("this run was simulated without snapshots; simulate(..., snapshots=True) to play it")
        self.runs = [run] + ([compare_run] if compare_run is not None else [])
        self.cursor = 0
        self.hide_host = self.hide_mamba = False
        self.divergence = first_divergence(run.trace, compare_run.trace) if compare_run is not None else None
        self._frames: dict[tuple, Frame] = {}
        if precompute:
            self.precompute()

    # --- navigation ---
    @property
    def trace(self):
        return self.runs[0].trace

    @property
    def num_steps(self) -> int:
        return len(self.trace.steps)

    def go(self, step: int) -> int:
        self.cursor = max(0, min(int(step), self.num_steps - 1))
        return self.cursor

    def step(self, delta: int = 1) -> int:
        return self.go(self.cursor + delta)

    def step_op(self, delta: int = 1) -> int:
        ends = op_frames(self.trace)
        later = [s for s in ends if s > self.cursor] if delta > 0 else [s for s in ends if s < self.cursor][::-1]
        return self.go(later[0]) if later else self.cursor

    def first(self) -> int:
        return self.go(0)

    def last(self) -> int:
        return self.go(self.num_steps - 1)

    def jump(self, kind: str, direction: int = 1) -> bool:
        """Move to the next (or previous) ``kind`` moment; False, and no move, if there is none."""
        target = next_moment(self.trace, kind, self.cursor, direction)
        if target is None:
            return False
        self.go(target)
        return True

    def jump_to_divergence(self) -> bool:
        if self.divergence is None:
            return False
        self.go(op_frames(self.trace)[min(self.divergence, len(self.trace.ops) - 1)])
        return True

    def set_toggles(self, hide_host: bool | None = None, hide_mamba: bool | None = None) -> None:
        self.hide_host = self.hide_host if hide_host is None else bool(hide_host)
        self.hide_mamba = self.hide_mamba if hide_mamba is None else bool(hide_mamba)

    # --- views ---
    def step_of(self, which: int = 0) -> int:
        """The micro-step shown for run ``which`` (the compare run follows in lockstep)."""
        return self.cursor if which == 0 else lockstep(self.trace, self.runs[which].trace, self.cursor)

    def frame(self, which: int = 0, step: int | None = None) -> Frame:
        step = self.step_of(which) if step is None else step
        key = (which, step, self.hide_host, self.hide_mamba)
        if key not in self._frames:
            self._frames[key] = frame(self.runs[which], step, hide_host=self.hide_host, hide_mamba=self.hide_mamba,
                                      legend=False)  # the player shows the legend once, beside the tree
            if len(self._frames) > FRAME_KEEP and len(self.trace.steps) > PRECOMPUTE_LIMIT:
                del self._frames[next(iter(self._frames))]  # a long run keeps its most recent frames only
        return self._frames[key]

    def svg(self, which: int = 0) -> str:
        f = self.frame(which)
        if SVG_CACHE.get(f.dot) is None:  # e.g. after a toggle: draw this whole operation with one dot process
            t = self.runs[which].trace
            render_many([self.frame(which, s).dot for s in range(t.ops[f.op_index].first_step,
                                                                 op_frames(t)[f.op_index] + 1)])
        return focus_svg(render_svg(f.dot), f.focus)

    def timeline(self, which: int = 0) -> str:
        run = self.runs[which]
        return timeline_svg(run.trace, self.step_of(which), title=f"{run.preset}: {run.outcome}")

    def divergence_note(self) -> str:
        if len(self.runs) < 2:
            return ""
        if self.divergence is None:
            return "The two runs never diverge on this schedule."
        k = self.divergence
        here = self.trace.ops[min(k, len(self.trace.ops) - 1)]
        where = "here" if here.first_step <= self.cursor <= op_frames(self.trace)[min(k, len(self.trace.ops) - 1)] \
            else "ahead" if self.cursor < here.first_step else "behind"
        return (f"First divergence: operation {k} ({op_text(self.trace, min(k, len(self.trace.ops) - 1))}) "
                f"[{where}]")

    def precompute(self) -> None:
        """Build every frame of a short run (up to ``PRECOMPUTE_LIMIT`` steps) and render all drawings in one go;
        a longer run's frames are built when they are first shown (a seek rebuilds only the state it needs)."""
        dots = []
        for which, run in enumerate(self.runs):
            if len(run.trace.steps) > PRECOMPUTE_LIMIT:
                continue
            dots += [self.frame(which, s).dot for s in range(len(run.trace.steps))]
        render_many(dots)


def _widgets():
    import ipywidgets

    return ipywidgets


class Player:
    """The ipywidgets player; ``Player(run, compare=other_run)`` then display it (or its ``.widget``)."""

    JUMPS = [("went stale", "went-stale"), ("re-admitted", "readmitted"), ("cleaned up", "cleaned-up"),
             ("violation", "violation"), ("assertion", "assertion")]

    def __init__(self, run, compare=None, *, precompute: bool = True) -> None:
        W = _widgets()
        self.model = m = PlayerModel(run, compare, precompute=precompute)
        b = dict(first="|◀ first", prev_op="◀◀ op", prev="◀ step", next="step ▶", next_op="op ▶▶", last="last ▶|",
                 jump_prev="◀ jump", jump_next="jump ▶", divergence="go to divergence")
        self.buttons = {k: W.Button(description=v, layout=W.Layout(width="auto")) for k, v in b.items()}
        self.slider = W.IntSlider(value=0, min=0, max=m.num_steps - 1, description="step",
                                  layout=W.Layout(width="95%"))
        self.play = W.Play(value=0, min=0, max=m.num_steps - 1, interval=400, description="play")
        self.speed = W.IntSlider(value=400, min=50, max=2000, step=50, description="ms / step")
        W.link((self.play, "value"), (self.slider, "value"))
        W.link((self.speed, "value"), (self.play, "interval"))
        self.jump_kind = W.Dropdown(options=self.JUMPS, value="went-stale", description="jump to")
        self.hide_host = W.Checkbox(value=False, description="hide host tier")
        self.hide_mamba = W.Checkbox(value=False, description="hide Mamba detail")
        self.caption, self.tree, self.panels, self.invariants = W.HTML(), W.HTML(), W.HTML(), W.HTML()
        self.stack, self.explanation, self.timeline, self.note = W.HTML(), W.HTML(), W.HTML(), W.HTML()
        self.compare_tree, self.compare_caption, self.compare_timeline = W.HTML(), W.HTML(), W.HTML()
        actions = dict(first=m.first, prev_op=lambda: m.step_op(-1), prev=lambda: m.step(-1), next=m.step,
                       next_op=m.step_op, last=m.last, jump_prev=lambda: m.jump(self.jump_kind.value, -1),
                       jump_next=lambda: m.jump(self.jump_kind.value, 1), divergence=m.jump_to_divergence)
        for name, act in actions.items():
            self.buttons[name].on_click(lambda _b, act=act: self._after(act))
        self.slider.observe(lambda ch: self._after(lambda: m.go(ch["new"])), names="value")
        for box in (self.hide_host, self.hide_mamba):
            box.observe(lambda _ch: self._after(lambda: m.set_toggles(self.hide_host.value, self.hide_mamba.value)),
                        names="value")
        self.buttons["divergence"].layout.display = None if compare is not None else "none"
        row = W.HBox([self.buttons[k] for k in ("first", "prev_op", "prev", "next", "next_op", "last")]
                     + [self.play, self.speed])
        jumps = W.HBox([self.jump_kind, self.buttons["jump_prev"], self.buttons["jump_next"],
                        self.buttons["divergence"], self.hide_host, self.hide_mamba])
        self.legend = legend = W.HTML()
        half, wide, narrow = W.Layout(width="50%"), W.Layout(width="62%"), W.Layout(width="38%")
        if compare is None:
            body = W.HBox([W.VBox([self.tree], layout=wide), W.VBox([legend, self.explanation, self.stack],
                                                                    layout=narrow)])
            below = [self.timeline]
        else:
            body = W.HBox([W.VBox([self.tree], layout=half),
                           W.VBox([self.compare_caption, self.compare_tree], layout=half)])
            below = [self.timeline, self.compare_timeline,
                     W.HBox([W.VBox([legend, self.explanation], layout=half), W.VBox([self.stack], layout=half)])]
        state = W.HBox([W.VBox([self.panels], layout=wide), W.VBox([self.invariants], layout=narrow)])
        self.widget = W.VBox([W.HTML(PAGE_CSS), row, self.slider, jumps, self.caption, self.note, body, *below,
                              state])
        self.refresh()

    def _after(self, action) -> None:
        action()
        self.refresh()

    def refresh(self) -> None:
        """Copy the model's state into the widgets (no callback loops: the slider only moves if it differs)."""
        m = self.model
        if self.slider.value != m.cursor:
            self.slider.value = m.cursor  # its observer calls refresh() again; the second call finds it equal
            return
        f = m.frame()
        self.caption.value = f"<b>{f.caption}</b>"
        self.tree.value = f'<div class="sc-tree">{m.svg()}</div>'
        self.legend.value = (f'<details open><summary>legend</summary><div class="sc-tree">'
                             f"{render_svg(legend_dot(m.hide_host, m.hide_mamba))}</div></details>")
        self.panels.value, self.invariants.value = "".join(f.panels), f.invariants
        self.stack.value, self.explanation.value = f.stack, f.explanation
        self.timeline.value = m.timeline()
        self.note.value = f"<b>{m.divergence_note()}</b>" if len(m.runs) > 1 else ""
        if len(m.runs) > 1:
            self.compare_caption.value = f"<b>{m.frame(1).caption}</b>"
            self.compare_tree.value = f'<div class="sc-tree">{m.svg(1)}</div>'
            self.compare_timeline.value = m.timeline(1)

    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)


__all__ = ["MOMENT_KINDS", "Player", "PlayerModel", "SchedulerGame"]

from .game import SchedulerGame  # noqa: E402  (re-exported: the be-the-scheduler mode)
