"""Where two runs of one schedule part in code: the micro-step, and the line of the fix (the guard) that parts them.

Vocabulary
- The *divergent operation* is ``moments.first_divergence``: the first operation whose status or tree differs.
- The *divergent step* is the first lock-stepped position inside it where the two runs' micro-steps differ (their
  kind or their words); the runs did the same thing up to it.
- The *guard* is the line that decides it: a line of a fix (``codepane.CodeFrame.fix_lines``) that one run is on at
  the divergent step (or the step before it) with its flag turned on: the fix's ``if`` taking the other branch.
  Both runs' code panes mark that line, ``on`` in the run whose preset turns the flag on, ``off`` in the other.

Used by the export's compare page (its "first divergence" lands on the divergent step, and both code panes mark
the guard) and by the storyboard's first picture.
"""
from __future__ import annotations

from dataclasses import dataclass

from .moments import compare_positions, first_divergence

LOOK = 40  # positions either side of the divergent step searched for the guard (within the divergent operation)


@dataclass(frozen=True)
class Divergence:
    position: int  # index into ``compare_positions``
    op: int  # index into the runs' operations
    steps: tuple[int, int]  # each run's micro-step there
    function: str | None  # the function the guard line is in (None if no fix line decides it)
    line: int | None  # the guard line (absolute, in simcache's source)
    flag: str | None  # the flag the guard belongs to


def _guard(run, step: int):
    """``(function, line, flag)`` of the innermost frame at ``step`` standing on a fix line its flag turns on."""
    from ..codepane import code_at, flag_on
    from .codepane import INSTRUMENTATION

    for f in reversed(code_at(run.trace, step)):
        fixes = dict(f.fix_lines)
        flag = fixes.get(f.line)
        if flag is not None and flag_on(run.flags, flag):
            line = f.line  # the recorder's own line reports what the statement before it did: that one decides
            while INSTRUMENTATION.search(f.lines[line - f.first_line]) and fixes.get(line - 1) == flag:
                line -= 1
            return f.function, line, flag
    return None


def _differing_fix(run_a, run_b, steps):
    """A guard no micro-step stands on (a loop's ``break``): the first fix line, in the innermost frame that has
    one, whose flag the two runs set differently."""
    from ..codepane import code_at, flag_on

    for r, s in zip((run_b, run_a), reversed(steps), strict=True):
        for f in reversed(code_at(r.trace, s)):
            for line, flag in f.fix_lines:
                if flag_on(run_a.flags, flag) != flag_on(run_b.flags, flag):
                    return f.function, line, flag
    return None


def divergence_point(run_a, run_b) -> Divergence | None:
    """The divergent step of two runs of one schedule and the guard that decides it (see the module doc)."""
    k = first_divergence(run_a.trace, run_b.trace)
    if k is None:
        return None
    positions, ops = compare_positions([run_a.trace, run_b.trace])
    mine = [i for i, o in enumerate(ops) if o == k]
    at = mine[0]
    for i in mine:
        sa, sb = (r.trace.steps[s] for r, s in zip((run_a, run_b), positions[i], strict=True))
        if (sa.kind, sa.text) != (sb.kind, sb.text):
            at = i
            break
    guard = None
    near = sorted((i for i in mine if abs(i - at) <= LOOK), key=lambda i: (abs(i - at), i > at))
    for i in near:  # the guard decides at the step, or a little before or after it: the nearest one
        for r, s in zip((run_b, run_a), reversed(positions[i]), strict=True):
            guard = guard or _guard(r, s)
        if guard:
            break
    guard = guard or _differing_fix(run_a, run_b, positions[at])
    fn, line, flag = guard or (None, None, None)
    return Divergence(at, k, tuple(positions[at]), fn, line, flag)
