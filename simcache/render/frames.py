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
from .focus import FOCUS_LIMIT, subjects
from .ghosts import code_frames_at, ghosts_at, highlight_at
from .moments import moments_at, op_index_of
from .panels import holders_panel, invariants_panel, lru_panel, pools_panel, sets_panel, stack_panel
from .words import op_number, sentence

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
    dot_all: str | None = None  # every node, where ``dot`` is the focus view of a tree larger than a screen


def page_size(run) -> int:
    return int(run.scenario.config.get("page_size", 1)) if hasattr(run, "scenario") else 1


def caption(run, step: int) -> str:
    """One plain sentence for micro-step ``step`` under its operation: ``Op 5 (R6: request [1,2,7]): #8 [1,2] is
    detached from the root (slot 1): the tree no longer reaches it. #8 goes stale here.`` (the step number is the
    view's one counter, the run's name its heading)."""
    t = run.trace
    k = op_index_of(t, step)
    s = t.steps[step]
    return f"Op {op_number(t, k)} ({op_text(t, k)}): {sentence(s)}{moment_words(t, step)}"


def moment_words(trace, step: int) -> str:
    """`` #8 goes stale here.``: the moments of ``step`` in words (empty where there is none)."""
    out = []
    for e in trace.went_stale:
        if e.step == step:
            out.append(f"#{e.node} goes stale here: detached while still held.")
    for e in trace.readmitted:
        if e.step == step:
            out.append(f"Detached #{e.node} is re-admitted here.")
    if any(v.step == step for v in trace.violations):
        names = sorted({v.invariant for v in trace.violations if v.step == step})
        out.append(f"An invariant breaks here: {', '.join(names)}.")
    return "".join(" " + w for w in out)


def _drawable(t) -> None:
    if not t.snapshots:
        raise SimcacheError("this run keeps no snapshots (it was simulated with snapshots=False); simulate it again "
                            "with snapshots=True to draw its frames")


def is_large(run, step: int) -> bool:
    """Whether the tree at ``step`` has more nodes than a screen holds (then the focus view is the default)."""
    snap = run.trace.snapshots[step]
    return len(snap.order) + 1 > FOCUS_LIMIT


def tree_dot(run, step: int, *, hide_host: bool = False, hide_mamba: bool = False, legend: bool = True,
             view: str = "auto") -> str:
    """The tree at ``step`` as DOT. ``view``: ``"all"`` draws every node; ``"focus"`` the focus view
    (``focus.py``); ``"auto"`` the focus view when the tree is larger than a screen, else all."""
    if view not in ("auto", "focus", "all"):
        raise ValueError(f"view is 'auto', 'focus' or 'all', not {view!r}")
    t = run.trace
    _drawable(t)
    prev = t.snapshots[t.ops[op_index_of(t, step)].first_step] if t.ops else None
    hl = highlight_at(t, step)
    focus = None
    if view == "focus" or (view == "auto" and is_large(run, step)):
        frames = code_frames_at(t, step) or ()
        focus = subjects(t, step, hl, {n for f in frames for _, ids in f.locals for n in ids})
    return snapshot_to_dot(t.snapshots[step], prev, highlight=hl, hide_host=hide_host, hide_mamba=hide_mamba,
                           page_size=page_size(run), legend=legend, focus=focus)


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
    dot_all = tree_dot(run, step, hide_host=hide_host, hide_mamba=hide_mamba, legend=legend, view="all") \
        if is_large(run, step) else None
    # issue #13: the ledger lists the same ghosts (and all their holders) the tree draws
    ghosts = ghosts_at(t, step)
    panels = (lru_panel(snap), sets_panel(snap), pools_panel(snap), holders_panel(snap, ghosts=ghosts))
    label = getattr(run, "preset", "")  # issue #13: each panel names its run (a compare page shows one run's)
    return Frame(step, k, caption(run, step), dot, panels, invariants_panel(t, step, label),
                 stack_panel(t.steps[step], op_text(t, k), label), explain_html(t, step, label), t.steps[step].node,
                 moments_at(t, step), dot_all)


def op_frames(trace) -> list[int]:
    """The micro-step shown for each operation: its last one (the state after the operation)."""
    return [o.last_step if o.last_step >= 0 else len(trace.steps) - 1 for o in trace.ops]


def focus_svg(svg: str, node_id: int | None) -> str:
    """``svg`` with the box of ``node_id`` given the CSS class ``focus`` (see ``FOCUS_CSS``)."""
    if node_id is None:
        return svg
    return svg.replace(f'<g id="n{node_id}" class="node', f'<g id="n{node_id}" class="focus node', 1)
