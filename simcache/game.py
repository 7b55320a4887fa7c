"""Be the scheduler: the learner picks which actor moves next, and sees whether the cache reaches the assertion.

Vocabulary
- A *turn* is one operation of one actor; the *schedule so far* is the learner's turns, written as a schedule
  string (``pf R1 pf R2 mem R3 ctl*3 mem``).
- After every pick the scenario is replayed from the start with the schedule so far (a *partial* schedule:
  actors may have operations left), so what is shown is exactly what ``simulate`` gives for that prefix.
- The game is *won* when the simulated cache raises (the assertion being taught); it is *over* then, or when
  every actor has run all its operations.
- ``reveal()`` shows the minimal failing schedule: given, or the scenario's ``minimal_schedule``, or its own
  ``schedule`` when the scenario expects the assertion under this preset.
"""
from __future__ import annotations

from html import escape

from .errors import ScenarioError, ScheduleError
from .operations import describe_op
from .render.display import page_css, svg_img
from .render.dot import render_svg, snapshot_to_dot
from .render.frames import page_size, tree_dot
from .render.timeline import timeline_svg
from .scenario import Scenario, from_doc, load
from .scheduler import Schedule, format_turns
from .simulate import simulate


class SchedulerGame:
    """State and widgets of the be-the-scheduler mode; tests call ``pick`` or click ``buttons[actor]``."""

    def __init__(self, scenario, preset: str = "pre_fix", *, minimal: str | None = None,
                 flags: dict | None = None, widgets: bool = True) -> None:
        if isinstance(scenario, str):
            scenario = load(scenario)
        elif isinstance(scenario, dict):
            scenario = from_doc(scenario)
        if not isinstance(scenario, Scenario):
            raise ScenarioError("SchedulerGame needs a scenario: a gallery name, a file path, a dict or a Scenario")
        self.scenario, self.preset, self.flags = scenario, preset, flags
        fails = (scenario.expect.get(preset) or {}).get("outcome") == "assertion"
        self.minimal = minimal or scenario.minimal_schedule or (scenario.schedule if fails else None)
        self.turns: list[str] = []
        self.run = self._simulate()
        self.revealed = False
        self.buttons: dict = {}
        self.widget = self._build() if widgets else None
        self.refresh()

    # --- state ---
    @property
    def schedule(self) -> str:
        return format_turns(self.turns)

    @property
    def reached_assertion(self) -> bool:
        return self.run.outcome == "assertion"

    def remaining(self) -> dict[str, int]:
        return {a: n - self.turns.count(a) for a, n in self.scenario.lengths.items()}

    @property
    def over(self) -> bool:
        return self.reached_assertion or not any(self.remaining().values())

    def next_ops(self) -> dict[str, str]:
        """Actor -> its next operation, for every actor that still has one."""
        done = {a: self.turns.count(a) for a in self.scenario.actors}
        return {a: describe_op(ops[done[a]]) for a, ops in self.scenario.actors.items() if done[a] < len(ops)}

    def pick(self, actor: str):
        """Let ``actor`` take the next turn and replay; returns the new ``Run``."""
        if self.over:
            raise ScheduleError("the game is over: reset() to play again")
        if actor not in self.next_ops():
            raise ScheduleError(f"actor {actor!r} has no operation left; choose one of {', '.join(self.next_ops())}")
        self.turns.append(actor)
        self.run = self._simulate()
        self.refresh()
        return self.run

    def undo(self) -> None:
        if self.turns:
            self.turns.pop()
            self.run = self._simulate()
        self.refresh()

    def reset(self) -> None:
        self.turns.clear()
        self.run, self.revealed = self._simulate(), False
        self.refresh()

    def reveal(self) -> str:
        """The minimal failing schedule, also shown in the widget."""
        self.revealed = True
        self.refresh()
        return self.minimal or ""

    def message(self) -> str:
        if self.reached_assertion:
            c = self.run.crash
            return (f"You made the cache reach the assertion: {c.type}: {c.message} (in {c.function}) "
                    f"with the schedule '{self.schedule}'.")
        if self.over:
            return f"Every actor is done and the cache survived ('{self.schedule}'). Reset and try another order."
        stale = self.run.trace.went_stale
        hint = f" A node has gone stale (#{stale[-1].node}): keep going." if stale else ""
        return f"Schedule so far: '{self.schedule or '(none)'}'. Pick who moves next.{hint}"

    def _simulate(self):
        return simulate(self.scenario, self.preset, self.flags, schedule=Schedule(tuple(self.turns)))

    # --- views ---
    def tree_svg(self) -> str:
        t = self.run.trace
        if t.steps:
            return render_svg(tree_dot(self.run, len(t.steps) - 1))
        return render_svg(snapshot_to_dot(t.initial, page_size=page_size(self.run)))

    def _build(self):
        import ipywidgets as W

        self.buttons = {a: W.Button(layout=W.Layout(width="auto")) for a in self.scenario.actors}
        for actor, button in self.buttons.items():
            button.on_click(lambda _b, actor=actor: self.pick(actor))
        self.undo_button = W.Button(description="undo")
        self.reset_button = W.Button(description="reset")
        self.reveal_button = W.Button(description="reveal the minimal schedule")
        self.undo_button.on_click(lambda _b: self.undo())
        self.reset_button.on_click(lambda _b: self.reset())
        self.reveal_button.on_click(lambda _b: self.reveal())
        self.status, self.tree, self.timeline, self.answer = W.HTML(), W.HTML(), W.HTML(), W.HTML()
        return W.VBox([W.HTML(page_css(".sc-static{display:none}")),  # a live widget hides the static snapshot
                       W.HBox(list(self.buttons.values())),
                       W.HBox([self.undo_button, self.reset_button, self.reveal_button]),
                       self.status, self.answer, self.tree, self.timeline])

    def refresh(self) -> None:
        if self.widget is None:
            return
        nxt = self.next_ops()
        for actor, button in self.buttons.items():
            button.description = f"{actor}: {nxt[actor]}" if actor in nxt else f"{actor}: done"
            button.disabled = actor not in nxt or self.over
            button.button_style = "" if actor in nxt else "info"
        win = self.reached_assertion
        self.status.value = (f'<p class="sc-{"red" if win else "ok"}" style="font-size:16px;padding:6px">'
                             f"{escape(self.message())}</p>")
        self.answer.value = "" if not self.revealed else (
            f"<p>Minimal failing schedule: <code>{escape(self.minimal)}</code></p>" if self.minimal
            else "<p>No minimal schedule is recorded for this scenario; the explorer can find one.</p>")
        self.tree.value = f'<div class="sc-tree">{self.tree_svg()}</div>'
        t = self.run.trace
        self.timeline.value = timeline_svg(t, len(t.steps) - 1 if t.steps else None, title="your schedule")

    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)

    def static_html(self) -> str:
        """What the game looks like without a kernel (GitHub, nbviewer, nbconvert): the actors and their
        operations, the schedule so far and the tree it reached, as an image; no script, no widget."""
        ops = "".join(f"<li><b>{escape(a)}</b>: " + " ; ".join(escape(describe_op(op)) for op in ops) + "</li>"
                      for a, ops in self.scenario.actors.items())
        return (f'<div class="sc-static" style="font-family:Helvetica,Arial,sans-serif"><p><b>Be the scheduler</b> '
                f"(the buttons need a running kernel: run the notebook to play). The actors and their operations:"
                f"</p><ul>{ops}</ul><p>{escape(self.message())}</p>{svg_img(self.tree_svg())}</div>")

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if self.widget is not None:
            display(self.widget)
        display(HTML(self.static_html()))
