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
- *Levels* (``LEVELS``, ``SchedulerGame.from_level(n)``) rise in difficulty: D, A, B, C, then ``crash_pr``. Each
  has a goal, hints given one at a time before the answer, and a *solution* (a schedule that wins it).
- A *reaction* is the sentence the game says when a move breaks an invariant, built from the trace's own event
  (the node that went stale, the cause, and who still holds it), never canned.
- *Stepping inside* (levels 3 and up): the learner may stop inside ``write_backup`` / ``evict_host`` at their
  *points*: the call, the failed host allocation, each host-leaf eviction and cascade step, each detach, the retry
  that backs the node up. This is where the real code re-enters eviction synchronously (sglang_reference.md, 0.3
  and e.1): SGLang runs these on the scheduler thread to the end, and its copy and storage threads reach the tree
  only through acks consumed at ``check_hicache_events`` (operations of their own here). So while inside, no other
  actor may move, and the game says why when the learner tries; what the learner controls is where to stop and
  look, not a thread switch the real system cannot make.
"""
from __future__ import annotations

from .crash import signature
from .errors import ScenarioError, ScheduleError, shown
from .game_levels import (  # noqa: F401  (re-exported: the level table lives there)
    GOAL,
    INSIDE,
    LEVELS,
    MAX_POINTS,
    POINT_CALLS,
    POINT_KINDS,
    Level,
    level,
    points,
    reaction,
    state_view,
)
from .game_widgets import GameWidgets
from .operations import describe_op
from .render.dot import render_svg
from .render.frames import page_size, tree_dot
from .scenario import Scenario, from_doc, load
from .scheduler import Schedule, format_turns
from .simulate import simulate


class SchedulerGame(GameWidgets):
    """State of the be-the-scheduler mode (its widgets: ``game_widgets.GameWidgets``); tests call ``pick`` or
    click ``buttons[actor]``."""

    def __init__(self, scenario, preset: str = "pre_fix", *, minimal: str | None = None,
                 flags: dict | None = None, widgets: bool = True, level: Level | None = None) -> None:
        if isinstance(scenario, str):
            scenario = load(scenario)
        elif isinstance(scenario, dict):
            scenario = from_doc(scenario)
        if not isinstance(scenario, Scenario):
            raise ScenarioError("SchedulerGame needs a scenario: a gallery name, a file path, a dict or a Scenario")
        from . import args
        from .versions import preset as preset_flags

        preset_flags(preset)  # an unknown preset is one sentence here, before any state is built
        args.optional_text(minimal, "minimal", "SchedulerGame('scenario_a', minimal='mem l3 mem')")
        args.flag(widgets, "widgets")
        if flags is not None:
            args.mapping(flags, "flags", "flags={'stale_guards': True}")
        if level is not None and not isinstance(level, Level):
            raise args.fail("level", "a Level (SchedulerGame.from_level(1) builds one)", level)
        self.scenario, self.preset, self.flags, self.level = scenario, preset, flags, level
        fails = (scenario.expect.get(preset) or {}).get("outcome") == "assertion"
        self.minimal = minimal or scenario.minimal_schedule or (scenario.schedule if fails else None)
        self.turns: list[str] = []
        self.run = self._simulate()
        self.revealed = False
        self.hints_shown = 0
        self.inside: list[int] | None = None  # the points of the operation being stepped through
        self.at = 0  # index into ``inside``
        self.said = ""  # the reaction to the last move
        self.buttons: dict = {}
        self.widget = self._build() if widgets else None
        self.refresh()

    @classmethod
    def from_level(cls, number: int, *, widgets: bool = True) -> SchedulerGame:
        """The game of level ``number`` (see ``LEVELS``)."""
        lv = level(number)
        return cls(lv.scenario, lv.preset, minimal=lv.solution, widgets=widgets, level=lv)

    # --- state ---
    @property
    def schedule(self) -> str:
        return format_turns(self.turns)

    @property
    def reached_assertion(self) -> bool:
        return self.run.outcome == "assertion" and self.inside is None

    @property
    def won(self) -> bool:
        """The goal reached: in a level, the stale-node assertion (GOAL); without a level, any assertion."""
        if not self.reached_assertion:
            return False
        return self.level is None or GOAL in signature(self.run.crash)

    def remaining(self) -> dict[str, int]:
        return {a: n - self.turns.count(a) for a, n in self.scenario.lengths.items()}

    @property
    def over(self) -> bool:
        return self.inside is None and (self.run.outcome == "assertion" or not any(self.remaining().values()))

    def next_ops(self) -> dict[str, str]:
        """Actor -> its next operation, for every actor that still has one."""
        done = {a: self.turns.count(a) for a in self.scenario.actors}
        return {a: describe_op(ops[done[a]]) for a, ops in self.scenario.actors.items() if done[a] < len(ops)}

    def _check_move(self, actor: str) -> None:
        if self.inside is not None:
            current = self.turns[-1]
            if actor != current:
                raise ScheduleError(f"{actor} cannot move now: {current}'s operation is inside "
                                    f"{self._inside_call()}, which SGLang's scheduler thread runs to the end (the "
                                    f"copy and storage threads reach the tree only through acks); use next_point() "
                                    f"or pick {current} to finish it")
            return
        if self.over:
            raise ScheduleError("the game is over: reset() to play again")
        if not isinstance(actor, str) or actor not in self.next_ops():
            raise ScheduleError(f"actor {shown(actor, 40)} has no operation left; choose one of "
                                f"{', '.join(self.next_ops())}")

    def pick(self, actor: str):
        """Let ``actor`` take the next turn and replay; returns the new ``Run``. Inside an operation, picking its
        actor finishes the operation."""
        self._check_move(actor)
        if self.inside is not None:
            self.inside = None
        else:
            self.turns.append(actor)
            self.run = self._simulate()
        self.said = reaction(self.run, len(self.turns) - 1 + self._init_ops())
        self._dead_end()
        self.refresh()
        return self.run

    def _dead_end(self) -> None:
        """Add to the reaction when the move left no way to the goal (known from the level's map)."""
        if self.level is None or self.reached_assertion:
            return
        from .game_map import state_of, structure

        if getattr(self, "_map", None) is None:
            self._map = structure(self.level)
        st = state_of(self._map, self.turns)
        before = state_of(self._map, self.turns[:-1])
        if st is not None and st["dead"] and not (before is not None and before["dead"]):
            self.said = (self.said + " " if self.said else "") + ("From here no order of the remaining moves "
                                                                 "reaches the assertion: undo, or ask for a hint.")

    def step_inside(self, actor: str) -> list[int]:
        """Start ``actor``'s next operation and stop at its first point inside write_backup / evict_host (levels
        that allow it); returns the points (micro-steps). An operation that never enters them simply runs."""
        if self.level is not None and not self.level.inside:
            raise ScheduleError(f"level {self.level.number} moves whole operations; stepping inside write_backup "
                                f"and evict_host starts at level 3")
        self._check_move(actor)
        if self.inside is not None:
            raise ScheduleError("already inside an operation: next_point() or finish it")
        self.turns.append(actor)
        self.run = self._simulate()
        k = len(self.turns) - 1 + self._init_ops()
        pts = points(self.run, k) if k < len(self.run.trace.ops) else []
        self.inside, self.at = (pts, 0) if pts else (None, 0)
        self.said = reaction(self.run, k, upto=pts[0] if pts else None)
        self.refresh()
        return pts

    def next_point(self) -> int | None:
        """Go to the next point inside the operation; past the last one the operation finishes. Returns the
        micro-step shown, or None when the operation has finished."""
        if self.inside is None:
            raise ScheduleError("not inside an operation: step_inside(actor) first")
        k = len(self.turns) - 1 + self._init_ops()
        self.at += 1
        if self.at >= len(self.inside):
            self.inside = None
            self.said = reaction(self.run, k)
            self._dead_end()
            self.refresh()
            return None
        self.said = reaction(self.run, k, upto=self.inside[self.at])
        self.refresh()
        return self.inside[self.at]

    def _inside_call(self) -> str:
        if self.inside is None:
            return ""
        stack = self.run.trace.steps[self.inside[self.at]].stack
        return next((c for c in reversed(stack) if c in INSIDE), INSIDE[0])

    def _init_ops(self) -> int:
        """Operations the trace runs before the first turn (an ``initial`` injection is operation 0)."""
        t = self.run.trace
        return 1 if t.ops and t.ops[0].actor == "init" else 0

    def undo(self) -> None:
        if self.inside is not None:
            self.inside = None
            self.turns.pop()
            self.run = self._simulate()
        elif self.turns:
            self.turns.pop()
            self.run = self._simulate()
        self.said = ""
        self.refresh()

    def reset(self) -> None:
        self.turns.clear()
        self.run, self.revealed, self.inside, self.said, self.hints_shown = self._simulate(), False, None, "", 0
        self.refresh()

    def reveal(self) -> str:
        """The minimal failing schedule, also shown in the widget."""
        self.revealed = True
        self.refresh()
        return self.minimal or ""

    def hint(self) -> str:
        """The next hint: the level's hints one at a time, then where the schedule so far leaves the solution
        (or the solution's next move); the answer itself stays behind ``reveal``."""
        texts = list(self.level.hints) if self.level is not None else []
        if self.hints_shown < len(texts):
            self.hints_shown += 1
            out = texts[self.hints_shown - 1]
        else:
            out = self._path_hint()
        self.refresh()
        return out

    def _path_hint(self) -> str:
        if self.level is not None:
            from .game_map import state_of, structure

            if getattr(self, "_map", None) is None:
                self._map = structure(self.level)
            st = state_of(self._map, self.turns)
            if st is not None and st["dist"] is not None and st["dist"] > 0:
                best = next(a for a, t in st["edges"].items()
                            if t >= 0 and self._map["states"][t]["dist"] == st["dist"] - 1)
                n = st["dist"]
                return f"From here the assertion is {n} move{'s' if n > 1 else ''} away: try {best}."
            if st is not None and st["dead"]:
                return "No order of the remaining moves reaches the assertion from here: undo."
        if not self.minimal:
            return "No solution is recorded for this scenario; the explorer can find one."
        sol = list(Schedule(tuple(self.scenario.parse_schedule(self.minimal).turns)).turns)
        for i, (mine, good) in enumerate(zip(self.turns, sol, strict=False)):
            if mine != good:
                return (f"Your move {i + 1} ({mine}) is where your schedule leaves the solution the hints follow, "
                        f"which moves {good} there: undo back to move {i + 1} and try another actor.")
        if len(self.turns) < len(sol):
            return f"You are on the solution's path: next, move {sol[len(self.turns)]}."
        return "Your schedule already contains the whole solution."

    def message(self) -> str:
        if self.inside is not None:
            s = self.run.trace.steps[self.inside[self.at]]
            return (f"Inside {self.turns[-1]}'s operation, point {self.at + 1} of {len(self.inside)}: {s.text} "
                    f"(in {' > '.join(s.stack[-3:])}). Next point, or pick {self.turns[-1]} to finish it.")
        if self.reached_assertion and not self.won:
            c = self.run.crash
            return (f"The cache raised something else: {c.type}: {c.message} (in {c.function}) "
                    f"('{self.schedule}'). Undo and try another order.")
        if self.reached_assertion:
            c = self.run.crash
            why = f" Why: {self.level.why}" if self.level is not None and self.level.why else ""
            return (f"You made the cache reach the assertion: {c.type}: {c.message} (in {c.function}) "
                    f"with the schedule '{self.schedule}'.{why}")
        if self.over:
            return f"Every actor is done and the cache survived ('{self.schedule}'). Reset and try another order."
        stale = self.stale_nodes()
        hint = f" A node has gone stale (#{stale[-1]}): keep going." if stale else ""
        return f"Schedule so far: '{self.schedule or '(none)'}'. Pick who moves next.{hint}"

    def stale_nodes(self) -> tuple[int, ...]:
        """The detached nodes something still holds, in the state the schedule so far has reached."""
        return () if self.run.crash is not None else state_view(self.run.cache, self.run.driver)[1]

    def _simulate(self):
        return simulate(self.scenario, self.preset, self.flags, schedule=Schedule(tuple(self.turns)))

    # --- views ---
    def tree_dot(self, legend: bool = True) -> str:
        """The DOT shown: inside an operation, its point (from the run); at the assertion, the run's last step (the
        node it raised on and who held it); else the cache as the moves left it (``state_view``: the same
        drawing whatever order reached the state, as on the levels page)."""
        t = self.run.trace
        if self.inside is not None:
            return tree_dot(self.run, self.inside[self.at], legend=legend)
        if self.run.crash is not None and t.steps:
            return tree_dot(self.run, len(t.steps) - 1, legend=legend)
        return state_view(self.run.cache, self.run.driver, page_size(self.run), legend=legend)[0]

    def tree_svg(self) -> str:
        return render_svg(self.tree_dot())


class LevelPicker:
    """The levels with a menu: ``LevelPicker(start=4)`` shows a level menu above the game of level ``start``;
    choosing another level (``pick(n)``, or the menu in JupyterLab or the app) swaps in a fresh game of it, with no
    cell to edit or run again. ``game`` is the ``SchedulerGame`` shown."""

    def __init__(self, start: int = 1) -> None:
        import ipywidgets as W

        self.game = SchedulerGame.from_level(level(start).number)
        self.menu = W.Dropdown(options=[(f"Level {lv.number}: {lv.title}", lv.number) for lv in LEVELS],
                               value=self.game.level.number, description="level", layout=W.Layout(width="auto"))
        self.menu.observe(lambda ch: self.pick(ch["new"]), names="value")
        self.widget = W.VBox([self.menu, self.game.widget])

    def pick(self, number: int) -> SchedulerGame:
        """Show a fresh game of level ``number`` (the menu follows)."""
        lv = level(number)
        if lv.number != self.game.level.number:
            self.game = SchedulerGame.from_level(lv.number)
            self.widget.children = (self.menu, self.game.widget)
        if self.menu.value != lv.number:
            self.menu.value = lv.number  # its observer calls pick again, which finds the game already there
        return self.game

    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget)
        display(HTML(self.game.static_html()))
