"""Key moments of a trace, and how two traces line up: the shared vocabulary of every view.

Vocabulary
- A *moment* is a micro-step where something worth stopping at happened: ``went-stale`` (a node was detached
  while something still held it), ``readmitted`` (a detached node entered a set, a list or an in-flight map
  again), ``cleaned-up`` (a stale guard removed a stale node from its holders), ``violation`` (the first step of
  an invariant violation) and ``assertion`` (the simulated cache raised).
- The *highlight* of a step says which nodes to mark in the tree drawing: the WENT STALE badge only at the
  micro-step where it happened (later frames show the node's state: ``STALE since step N``); a cleaned-up node
  stays marked until its operation ends; every *ghost* (``ghosts.py``: a detached node still worth drawing, with
  all its holders) and every node an invariant violation names. ``ghosts.highlight_at`` computes it (it needs
  the ghosts, which build on this module).
- *Lockstep*: two runs of the same schedule under two presets are shown at the same operation index and the same
  offset inside it (clamped, since one run may take more micro-steps than the other or stop earlier).
- The *first divergence* is the first operation whose status letter or resulting tree text differs.

Everything here is a pure function of a ``Recorder`` (``run.trace``).
"""
from __future__ import annotations

from bisect import bisect_right

MOMENT_KINDS = ("went-stale", "readmitted", "cleaned-up", "violation", "assertion")


def assertion_step(trace) -> int | None:
    """The micro-step where the simulated cache raised, if it did."""
    if trace.crashed is None:
        return None
    return next((s.index for s in reversed(trace.steps) if s.kind == "assertion"), None)


def _trace(trace, fn: str):
    """``trace`` when it reads as a run's trace (its steps and events; tests hand in light stand-ins)."""
    if not all(hasattr(trace, a) for a in ("steps", "went_stale")):
        from ..args import fail

        raise fail("trace", "a run's trace (run.trace)", trace, f"{fn}(simulate('crash_pr').trace)")
    return trace


def moments(trace) -> dict[str, tuple[int, ...]]:
    """Moment kind -> sorted micro-step indices where it happens."""
    crash = assertion_step(_trace(trace, "moments"))
    return {
        "went-stale": tuple(sorted({e.step for e in trace.went_stale})),
        "readmitted": tuple(sorted({e.step for e in trace.readmitted})),
        "cleaned-up": tuple(sorted({e.step for e in trace.cleaned_up})),
        "violation": tuple(sorted({v.step for v in trace.violations})),
        "assertion": () if crash is None else (crash,),
    }


def moments_at(trace, step: int) -> tuple[str, ...]:
    """The moment kinds that happen exactly at ``step``."""
    return tuple(k for k, steps in moments(trace).items() if step in steps)


def next_moment(trace, kind: str, step: int, direction: int = 1) -> int | None:
    """The next (``direction=1``) or previous (``-1``) step after / before ``step`` with moment ``kind``."""
    if kind not in MOMENT_KINDS:
        raise ValueError(f"unknown moment {kind!r}; choose one of {', '.join(MOMENT_KINDS)}")
    steps = moments(trace)[kind]
    later = [s for s in steps if s > step] if direction > 0 else [s for s in steps if s < step][::-1]
    return later[0] if later else None


def op_index_of(trace, step: int) -> int:
    """Index into ``trace.ops`` of the operation that micro-step ``step`` belongs to."""
    firsts = [o.first_step for o in trace.ops]
    return max(0, bisect_right(firsts, step) - 1)


def op_end(trace, op_index: int) -> int:
    ops = _trace(trace, "op_end").ops
    if type(op_index) is not int or not -len(ops) <= op_index < len(ops):
        from ..args import fail

        raise fail("op_index", f"an operation number from 0 to {len(ops) - 1}", op_index)
    op = ops[op_index]
    return op.last_step if op.last_step >= 0 else len(trace.steps) - 1


def assertion_node(trace) -> int | None:
    """The node the simulated cache was working on when its assertion fired (last node touched before it)."""
    crash = assertion_step(trace)
    if crash is None:
        return None
    for s in reversed(trace.steps[:crash]):
        if s.node is not None:
            return s.node
    return None


def lockstep(trace_a, trace_b, step_a: int) -> int:
    """The step of ``trace_b`` shown beside ``step_a`` of ``trace_a``: same operation, same offset, clamped."""
    if not trace_b.steps:
        return 0
    k = op_index_of(trace_a, step_a)
    if k >= len(trace_b.ops):
        return len(trace_b.steps) - 1
    offset = step_a - trace_a.ops[k].first_step
    b = trace_b.ops[k]
    return min(b.first_step + offset, op_end(trace_b, k))


def first_divergence(trace_a, trace_b) -> int | None:
    """Index of the first operation whose status or resulting tree differs between the two runs, else None."""
    for k in range(max(len(trace_a.ops), len(trace_b.ops))):
        if k >= len(trace_a.ops) or k >= len(trace_b.ops):
            return k
        a, b = trace_a.ops[k], trace_b.ops[k]
        if a.status != b.status:
            return k
        sa, sb = trace_a.snapshots, trace_b.snapshots
        if sa and sb and sa[op_end(trace_a, k)].tree_text != sb[op_end(trace_b, k)].tree_text:
            return k
    return None


def compare_positions(traces) -> tuple[list[tuple[int, ...]], list[int]]:
    """Side by side (the player and the export): (micro-step of each run, operation) per position, operation by
    operation, as many offsets as the longer run takes in that operation; a run clamps to the operation's last
    step, or its own last step once it has no operation ``k`` (it stopped earlier)."""
    if len(traces) == 1:
        t = traces[0]
        return [(s,) for s in range(len(t.steps))], [op_index_of(t, s) for s in range(len(t.steps))]
    positions, ops = [], []
    for k in range(max(len(t.ops) for t in traces)):
        spans = []
        for t in traces:
            if k < len(t.ops):
                spans.append((t.ops[k].first_step, op_end(t, k)))
            else:
                spans.append((len(t.steps) - 1, len(t.steps) - 1))
        width = max(b - a + 1 if k < len(t.ops) else 1 for (a, b), t in zip(spans, traces, strict=True))
        for off in range(width):
            positions.append(tuple(min(a + off, b) for a, b in spans))
            ops.append(k)
    return positions, ops
