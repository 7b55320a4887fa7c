"""Frames: everything one view shows at one micro-step of a run, assembled from the pure renderers.

Vocabulary
- A *frame* is the picture of a run at micro-step ``step``: the tree (DOT, compared with the state before the
  step's operation, so nodes created or changed by the operation stay marked while it runs), the state panels,
  the invariant panel, the call stack, the stale-node explanation, a one-line caption, and the *focus*: the node
  the micro-step touched, outlined in the drawing by ``focus_svg`` rather than in the DOT (so the many micro-steps
  that do not change the tree share one drawing, one ``dot`` run and, in an export, one copy of the SVG).
- *Operation frames* are the last micro-step of each operation: the state after it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SimcacheError
from .dot import snapshot_to_dot
from .explain import explain_html, op_text
from .ghosts import ghosts_at, highlight_at
from .moments import moments_at, op_index_of
from .panels import holders_panel, invariants_panel, lru_panel, pools_panel, sets_panel, stack_panel

FOCUS_CSS = "svg g.focus{filter:drop-shadow(0 0 5px #2563eb) drop-shadow(0 0 3px #2563eb)}"


@dataclass(frozen=True)
class Frame:
    step: int
    op_index: int
    caption: str
    dot: str
    panels: tuple[str, ...]  # LRU lists, leaf sets, pools, holder ledger
    invariants: str
    stack: str
    explanation: str
    focus: int | None
    moments: tuple[str, ...]


def page_size(run) -> int:
    return int(run.scenario.config.get("page_size", 1)) if hasattr(run, "scenario") else 1


def caption(run, step: int) -> str:
    t = run.trace
    k = op_index_of(t, step)
    s = t.steps[step]
    marks = moments_at(t, step)
    tail = f"  [{', '.join(marks)}]" if marks else ""
    return f"{run.preset} · step {step}/{len(t.steps) - 1} · op {k} ({op_text(t, k)}) · {s.text}{tail}"


def _drawable(t) -> None:
    if not t.snapshots:
        raise SimcacheError("this run keeps no snapshots (it was simulated with snapshots=False); simulate it again "
                            "with snapshots=True to draw its frames")


def tree_dot(run, step: int, *, hide_host: bool = False, hide_mamba: bool = False, legend: bool = True) -> str:
    t = run.trace
    _drawable(t)
    prev = t.snapshots[t.ops[op_index_of(t, step)].first_step] if t.ops else None
    return snapshot_to_dot(t.snapshots[step], prev, highlight=highlight_at(t, step), hide_host=hide_host,
                           hide_mamba=hide_mamba, page_size=page_size(run), legend=legend)


def frame(run, step: int, *, hide_host: bool = False, hide_mamba: bool = False,
          legend: bool = True) -> Frame:
    """The frame of ``run`` at micro-step ``step``."""
    t = run.trace
    if not 0 <= step < len(t.steps):
        raise IndexError(f"step {step} is outside this run's 0..{len(t.steps) - 1}")
    _drawable(t)
    k = op_index_of(t, step)
    snap = t.snapshots[step]
    dot = tree_dot(run, step, hide_host=hide_host, hide_mamba=hide_mamba, legend=legend)
    # issue #13: the ledger lists the same ghosts (and all their holders) the tree draws
    ghosts = ghosts_at(t, step)
    panels = (lru_panel(snap), sets_panel(snap), pools_panel(snap), holders_panel(snap, ghosts=ghosts))
    label = getattr(run, "preset", "")  # issue #13: each panel names its run (a compare page shows one run's)
    return Frame(step, k, caption(run, step), dot, panels, invariants_panel(t, step, label),
                 stack_panel(t.steps[step], op_text(t, k), label), explain_html(t, step, label), t.steps[step].node,
                 moments_at(t, step))


def op_frames(trace) -> list[int]:
    """The micro-step shown for each operation: its last one (the state after the operation)."""
    return [o.last_step if o.last_step >= 0 else len(trace.steps) - 1 for o in trace.ops]


def focus_svg(svg: str, node_id: int | None) -> str:
    """``svg`` with the box of ``node_id`` given the CSS class ``focus`` (see ``FOCUS_CSS``)."""
    if node_id is None:
        return svg
    return svg.replace(f'<g id="n{node_id}" class="node', f'<g id="n{node_id}" class="focus node', 1)
