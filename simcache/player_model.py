"""The player's model: a cursor over one run, or two in lockstep, with jumps, toggles and cached frames.

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

Plain classes that tests drive directly; the widgets (``player.py``) are a thin layer over ``PlayerModel``. A short
run's frames are precomputed and all drawings rendered by one ``dot`` process, so a step only looks up cached
strings. A long run's frames are built on demand: the snapshot a frame needs is rebuilt from the trace's
checkpoints (``trace.Timeline``), and frames are cached as they are seen. ``static_snapshot`` is the player without
a kernel (key frames as images).
"""
from __future__ import annotations

import math
from html import escape

from . import args
from .errors import ArgumentError, ConfigError, shown
from .render.codepane import codepane_html
from .render.display import svg_img
from .render.dot import SVG_CACHE, render_many, render_svg
from .render.frames import Frame, focus_svg, frame, op_frames, op_text
from .render.layout import stable
from .render.moments import MOMENT_KINDS, compare_positions, first_divergence, moments, next_moment
from .render.timeline import timeline_svg
from .render.words import op_number
from .transcript import outcome_words, run_label

PRECOMPUTE_LIMIT = 3000  # micro-steps; longer runs render frames on demand (still cached)
FRAME_KEEP = 512  # frames a long run's player keeps


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


__all__ = ["FRAME_KEEP", "MOMENT_KINDS", "PRECOMPUTE_LIMIT", "PlayerModel", "static_snapshot"]
