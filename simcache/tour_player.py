"""The tour in JupyterLab: a question above the player; a wrong pick gets a hint and another try, the right one
reveals the stop's frame and the feedback.

``TourPlayer("crash_pr")`` (a gallery tour, a tour file, or a ``Tour``) simulates the tour's scenario under its
preset, checks every answer against the run (``tour.checked``) and shows stop 1's question with the player parked
on the frame just before it. The choices are buttons in the tour's shuffled order. A wrong pick turns red and is
locked, and its hint is shown; the right one turns green, locks the rest, explains, and moves the player to the
stop's frame. "show the answer" gives up on a stop (it scores nothing); the score counts the stops right at the
first try. The player never goes past the frame before the first unanswered stop (its slider, steps and jumps
stop there, and its timeline hides the moments and statuses beyond it), so the outcome is not given away.
"next stop" opens once the stop is answered. Where widgets cannot run (GitHub, nbconvert) the tour leaves a
static page: every stop's question, its choices and, folded, the answer.
"""
from __future__ import annotations

from html import escape

from .player import Player
from .tour import TourModel

LETTERS = "ABCDEF"


class TourPlayer:
    """The ipywidgets tour; display it (or its ``.widget``). ``model`` is the headless ``TourModel``."""

    def __init__(self, tour, run=None, *, precompute: bool = True) -> None:
        import ipywidgets as W

        from . import args

        args.flag(precompute, "precompute")
        self.model = TourModel(tour, run)
        self.player = Player(self.model.run, precompute=precompute)
        self.player.model.hide_outcome = True
        self.header = W.HTML(f"<h3 style='margin:4px 0'>{escape(self.model.tour.title)}</h3>"
                             + (f"<p>{escape(self.model.tour.intro)}</p>" if self.model.tour.intro else ""))
        self.question, self.feedback, self.score = W.HTML(), W.HTML(), W.HTML()
        self.choices = W.VBox()
        self.buttons: list = []
        self.prev = W.Button(description="◀ previous stop", tooltip="back to the previous stop",
                             layout=W.Layout(width="auto"))
        self.next = W.Button(description="next stop ▶", layout=W.Layout(width="auto"),
                             tooltip="on to the next stop's question (answer this one first)")
        self.give_up = W.Button(description="show the answer", tooltip="reveal this stop's answer (it scores nothing)",
                                layout=W.Layout(width="auto"))
        self.prev.on_click(lambda _b: self.go(self.model.index - 1))
        self.next.on_click(lambda _b: self.go(self.model.index + 1))
        self.give_up.on_click(lambda _b: self.reveal())
        box = W.Layout(border="2px solid #2563eb", padding="6px 10px", margin="0 0 8px 0")
        self.panel = W.VBox([self.header, self.question, self.choices, self.feedback,
                             W.HBox([self.prev, self.give_up, self.next]), self.score], layout=box)
        self.panel.add_class("sc-tour")
        self.widget = W.VBox([self.panel, self.player.widget])
        self.go(0)

    def go(self, index: int) -> None:
        """Show stop ``index``'s question (or, for a stop already answered, its answer), the player on its frame."""
        import ipywidgets as W

        m = self.model
        m.go(index)
        stop = m.stop
        self.question.value = (f"<b>Stop {m.index + 1} of {len(m.tour.stops)}: {escape(stop.title)}</b>"
                               f"<p style='font-size:15px'>{escape(stop.ask)}</p>")
        self.buttons = []
        for i, c in enumerate(m.choices):
            b = W.Button(description=f"{LETTERS[i]}. {c.text}", tooltip=c.text,
                         layout=W.Layout(width="auto", max_width="100%"))
            b.on_click(lambda _b, i=i: self.choose(i))
            self.buttons.append(b)
        self.choices.children = tuple(self.buttons)
        if m.revealed:
            self._solved()
        else:
            for i in m.wrong[m.index]:
                self.buttons[i].disabled, self.buttons[i].button_style = True, "danger"
            self.feedback.value = "<i>Choose an answer to reveal the frame.</i>"
        self._show()

    def choose(self, choice: int) -> bool:
        """Pick the choice shown at position ``choice`` (0-based): a wrong one is locked and its hint shown; the
        right one locks the rest, explains and reveals the frame."""
        right, text = self.model.answer(choice)
        if right:
            self._solved()
        else:
            self.buttons[choice].disabled, self.buttons[choice].button_style = True, "danger"
            self.feedback.value = (f"<p style='color:#9a3412;font-size:15px'><b>Not quite.</b> Hint: {escape(text)} "
                                   f"Try again.</p>")
        self._show()
        return right

    def reveal(self) -> None:
        """Give up on the current stop: its answer and frame are shown."""
        self.model.give_up()
        self._solved()
        self._show()

    def _solved(self) -> None:
        m = self.model
        for i, b in enumerate(self.buttons):
            b.disabled = True
            b.button_style = "success" if i == m.answer_position else "danger" if i in m.wrong[m.index] else ""
        colour = "#15803d" if not m.gave_up[m.index] and not m.wrong[m.index] else "#1e3a8a"
        self.feedback.value = f"<p style='color:{colour};font-size:15px'>{escape(m.feedback())}</p>"

    def _show(self) -> None:
        m = self.model
        self.prev.disabled = m.index == 0
        self.next.disabled = m.index == len(m.tour.stops) - 1 or not m.revealed
        self.give_up.disabled = m.revealed
        done = " The tour is over: the whole run is open." if m.done else ""
        self.score.value = f"<p><b>{escape(m.score_text())}</b>{done}</p>"
        self.player.model.limit = m.limit
        self.player.model.go(m.step)
        self.player.refresh()

    def static_html(self) -> str:
        return static_tour(self.model)

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget)
        display(HTML(self.static_html()))


def static_tour(model: TourModel) -> str:
    """The tour without a kernel: each stop's question and choices (in the tour's order), the answer folded."""
    if not isinstance(model, TourModel):
        from . import args

        raise args.fail("model", "a TourModel (simcache.tour.TourModel('crash_pr'))", model)
    parts = ['<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif">',
             f"<p><b>Static copy of the tour “{escape(model.tour.title)}”</b> (run the notebook to answer and see "
             "each frame).</p><ol>"]
    for i, (stop, step) in enumerate(zip(model.tour.stops, model.steps, strict=True)):
        items = "".join(f"<li>{escape(stop.choices[k].text)}</li>" for k in model.orders[i])
        parts.append(f"<li><b>{escape(stop.title)}</b> (step {step}): {escape(stop.ask)}<ol type='A'>{items}</ol>"
                     f"<details><summary>answer</summary>{escape(stop.choices[stop.answer].text)}: "
                     f"{escape(stop.explain)}</details></li>")
    parts.append("</ol></div>")
    return "".join(parts)
