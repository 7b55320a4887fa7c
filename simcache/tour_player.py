"""The tour in JupyterLab: a question above the player; answering reveals the stop's frame and the feedback.

``TourPlayer("crash_pr")`` (a gallery tour, a tour file, or a ``Tour``) simulates the tour's scenario under its
preset, checks every answer against the run (``tour.checked``) and shows stop 1's question with the player parked
on the frame just before it. A choice is a button; after a click the buttons are locked, the right one turns
green (a wrong pick red), the feedback explains, and the player moves to the stop's frame, where the learner can
step around freely. "next stop" / "previous stop" move on. Where widgets cannot run (GitHub, nbconvert) the
tour leaves a static page: every stop's question, its choices and, folded, the answer.
"""
from __future__ import annotations

from html import escape

from .player import Player
from .tour import TourModel


class TourPlayer:
    """The ipywidgets tour; display it (or its ``.widget``). ``model`` is the headless ``TourModel``."""

    def __init__(self, tour, run=None, *, precompute: bool = True) -> None:
        import ipywidgets as W

        self.model = TourModel(tour, run)
        self.player = Player(self.model.run, precompute=precompute)
        self.header = W.HTML(f"<h3 style='margin:4px 0'>{escape(self.model.tour.title)}</h3>"
                             + (f"<p>{escape(self.model.tour.intro)}</p>" if self.model.tour.intro else ""))
        self.question, self.feedback = W.HTML(), W.HTML()
        self.choices = W.VBox()
        self.buttons: list = []
        self.prev = W.Button(description="◀ previous stop", tooltip="back to the previous stop's question",
                             layout=W.Layout(width="auto"))
        self.next = W.Button(description="next stop ▶", tooltip="on to the next stop's question",
                             layout=W.Layout(width="auto"))
        self.prev.on_click(lambda _b: self.go(self.model.index - 1))
        self.next.on_click(lambda _b: self.go(self.model.index + 1))
        box = W.Layout(border="2px solid #2563eb", padding="6px 10px", margin="0 0 8px 0")
        self.panel = W.VBox([self.header, self.question, self.choices, self.feedback, W.HBox([self.prev, self.next])],
                            layout=box)
        self.panel.add_class("sc-tour")
        self.widget = W.VBox([self.panel, self.player.widget])
        self.go(0)

    def go(self, index: int) -> None:
        """Show stop ``index``'s question, the player on the frame before it."""
        import ipywidgets as W

        m = self.model
        m.go(index)
        stop = m.stop
        self.question.value = (f"<b>Stop {m.index + 1} of {len(m.tour.stops)}: {escape(stop.title)}</b>"
                               f"<p style='font-size:15px'>{escape(stop.ask)}</p>")
        self.buttons = []
        for i, c in enumerate(stop.choices):
            b = W.Button(description=f"{'ABCDEF'[i]}. {c.text}", tooltip=c.text,
                         layout=W.Layout(width="auto", max_width="100%"))
            b.on_click(lambda _b, i=i: self.choose(i))
            self.buttons.append(b)
        self.choices.children = tuple(self.buttons)
        self.feedback.value = "<i>Choose an answer to reveal the frame.</i>"
        self.prev.disabled, self.next.disabled = m.index == 0, m.index == len(m.tour.stops) - 1
        self._show()

    def choose(self, choice: int) -> bool:
        """Answer the current stop with ``choice`` (0-based): lock the choices, explain, reveal the frame."""
        right, text = self.model.answer(choice)
        for i, b in enumerate(self.buttons):
            b.disabled = True
            b.button_style = "success" if i == self.model.stop.answer else "danger" if i == choice else ""
        colour = "#15803d" if right else "#b91c1c"
        self.feedback.value = f"<p style='color:{colour};font-size:15px'>{escape(text)}</p>"
        self._show()
        return right

    def _show(self) -> None:
        self.player.model.go(self.model.step)
        self.player.refresh()

    def static_html(self) -> str:
        return static_tour(self.model)

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget)
        display(HTML(self.static_html()))


def static_tour(model: TourModel) -> str:
    """The tour without a kernel: each stop's question and choices, the answer folded under it."""
    parts = ['<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif">',
             f"<p><b>Static copy of the tour “{escape(model.tour.title)}”</b> (run the notebook to answer and see "
             "each frame).</p><ol>"]
    for stop, step in zip(model.tour.stops, model.steps, strict=True):
        items = "".join(f"<li>{escape(c.text)}</li>" for c in stop.choices)
        parts.append(f"<li><b>{escape(stop.title)}</b> (step {step}): {escape(stop.ask)}<ol type='A'>{items}</ol>"
                     f"<details><summary>answer</summary>{escape(stop.choices[stop.answer].text)}: "
                     f"{escape(stop.explain)}</details></li>")
    parts.append("</ol></div>")
    return "".join(parts)
