"""The widgets of *be the scheduler* (``game.SchedulerGame``): a thin layer over the game's state.

One button per actor (its next operation on it; "done" when it has none; locked while the learner is inside another
actor's operation), "step inside" with "next point" (levels 3 and up), undo / reset / hint / reveal, then the status
(a win green, never styled as an error), the reaction to the last move, the hint, the answer, the tree and the
timeline. ``static_html`` is the game without a kernel (GitHub, nbviewer, nbconvert): no script, no widget.

``GameWidgets`` is a mixin: it reads the game's state (``scenario``, ``level``, ``turns``, ``inside``, ``said`` ...)
and calls its moves (``pick``, ``step_inside``, ``next_point``, ``undo``, ``reset``, ``hint``, ``reveal``).
"""
from __future__ import annotations

from html import escape

from .errors import ScheduleError
from .operations import describe_op
from .render.display import page_css, svg_img
from .render.timeline import timeline_svg


class GameWidgets:
    """The widget layer of ``SchedulerGame`` (see the module doc)."""

    def _build(self):
        import ipywidgets as W

        self.buttons = {a: W.Button(layout=W.Layout(width="auto")) for a in self.scenario.actors}
        for actor, button in self.buttons.items():
            button.on_click(lambda _b, actor=actor: self._click(actor))
        self.inside_box = W.Checkbox(description="step inside write_backup / evict_host", indent=False,
                                     value=False, layout=W.Layout(width="auto"))
        self.point_button = W.Button(description="next point")
        self.undo_button = W.Button(description="undo")
        self.reset_button = W.Button(description="reset")
        self.hint_button = W.Button(description="hint")
        self.reveal_button = W.Button(description="reveal the minimal schedule")
        self.point_button.on_click(lambda _b: self.next_point())
        self.undo_button.on_click(lambda _b: self.undo())
        self.reset_button.on_click(lambda _b: self.reset())
        self.hint_button.on_click(lambda _b: self._show_hint())
        self.reveal_button.on_click(lambda _b: self.reveal())
        self.status, self.tree, self.timeline, self.answer = W.HTML(), W.HTML(), W.HTML(), W.HTML()
        self.reaction, self.hint_text = W.HTML(), W.HTML()
        inside = [self.inside_box, self.point_button] if self.level is None or self.level.inside else []
        title = [] if self.level is None else [W.HTML(
            f"<h3>Level {self.level.number}: {escape(self.level.title)}</h3><p>{escape(self.level.goal)}</p>")]
        return W.VBox([W.HTML(page_css(".sc-static{display:none}")),  # a live widget hides the static snapshot
                       *title, W.HBox(list(self.buttons.values())), W.HBox(inside),
                       W.HBox([self.undo_button, self.reset_button, self.hint_button, self.reveal_button]),
                       self.status, self.reaction, self.hint_text, self.answer, self.tree, self.timeline])

    def _click(self, actor: str) -> None:
        try:
            if self.inside is None and self.inside_box.value:
                self.step_inside(actor)
            else:
                self.pick(actor)
        except ScheduleError as e:  # a refused move is shown, not raised into the notebook
            self.said = str(e)
            self.refresh()

    def _show_hint(self) -> None:
        text = self.hint()
        self.hint_text.value = f'<p class="sc-hint"><b>Hint:</b> {escape(text)}</p>'

    def refresh(self) -> None:
        if self.widget is None:
            return
        nxt = self.next_ops()
        for actor, button in self.buttons.items():
            button.description = f"{actor}: {nxt[actor]}" if actor in nxt else f"{actor}: done"
            locked = self.inside is not None and actor != self.turns[-1]
            button.disabled = (actor not in nxt or self.over) and not (self.inside and actor == self.turns[-1]) \
                or locked
            button.button_style = "" if actor in nxt else "info"
        self.point_button.disabled = self.inside is None
        win = self.won
        style = ("background:#f0fdf4;border-left:6px solid #16a34a;color:#14532d;font-weight:bold" if win
                 else "background:#f8fafc;border-left:4px solid #64748b")  # a win is a success, not an error
        self.status.value = (f'<p class="sc-{"win" if win else "ok"}" style="font-size:16px;padding:6px;{style}">'
                             f"{'✔ You won. ' if win else ''}{escape(self.message())}</p>")
        self.reaction.value = (f'<p class="sc-red" style="padding:6px"><b>{escape(self.said)}</b></p>'
                               if self.said else "")
        self.answer.value = "" if not self.revealed else (
            f"<p>Minimal failing schedule: <code>{escape(self.minimal)}</code></p>" if self.minimal
            else "<p>No minimal schedule is recorded for this scenario; the explorer can find one.</p>")
        self.tree.value = f'<div class="sc-tree">{self.tree_svg()}</div>'
        t = self.run.trace
        at = self.inside[self.at] if self.inside is not None else (len(t.steps) - 1 if t.steps else None)
        self.timeline.value = timeline_svg(t, at, title="your schedule")

    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)

    def static_html(self) -> str:
        """What the game looks like without a kernel (GitHub, nbviewer, nbconvert): the actors and their
        operations, the schedule so far and the tree it reached, as an image; no script, no widget."""
        ops = "".join(f"<li><b>{escape(a)}</b>: " + " ; ".join(escape(describe_op(op)) for op in ops) + "</li>"
                      for a, ops in self.scenario.actors.items())
        lv = "" if self.level is None else (f"<p><b>Level {self.level.number}: {escape(self.level.title)}</b>. "
                                            f"{escape(self.level.goal)}</p>")
        return (f'<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif">{lv}<p><b>Be the scheduler</b> '
                f"(the buttons need a running kernel: run the notebook to play). The actors and their operations:"
                f"</p><ul>{ops}</ul><p>{escape(self.message())}</p>{svg_img(self.tree_svg())}</div>")

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if self.widget is not None:
            display(self.widget)
        display(HTML(self.static_html()))
