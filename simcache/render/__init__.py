"""Views of a run: pure functions from snapshots and traces to DOT, SVG, HTML and matplotlib figures.

- ``dot``: snapshot -> Graphviz DOT (the tree, with tiers, Mamba, tombstones, locks, stale nodes and a legend),
  and DOT -> SVG / PNG.
- ``panels``: LRU lists, leaf sets, pools, the holder ledger, invariants and the call stack, as HTML.
- ``explain``: plain-English "why is this node stale".
- ``timeline``: the swim-lane SVG.
- ``plots``: matplotlib figures (imported on demand: ``from simcache.render.plots import pool_occupancy``).
- ``moments`` and ``frames``: the shared vocabulary (moments, lockstep, divergence) and the per-step assembly
  that the player and the HTML export both use.

Nothing here mutates a cache; every function takes plain data (``Snapshot``, ``Recorder``, ``Run``).
"""
from .dot import abbreviate_key, legend_dot, render_many, render_png, render_svg, snapshot_to_dot
from .explain import explain_html, explain_stale, stale_story
from .frames import Frame, frame, op_frames
from .ghosts import highlight_at
from .moments import MOMENT_KINDS, first_divergence, lockstep, moments, next_moment
from .panels import (
                     PANEL_CSS,
                     holders_panel,
                     invariants_panel,
                     lru_panel,
                     pools_panel,
                     sets_panel,
                     stack_panel,
                     state_panels,
)
from .timeline import step_x, timeline_svg

__all__ = [
    "MOMENT_KINDS", "PANEL_CSS", "Frame", "abbreviate_key", "explain_html", "explain_stale", "first_divergence",
    "frame", "highlight_at", "holders_panel", "invariants_panel", "legend_dot", "lockstep", "lru_panel", "moments",
    "next_moment", "op_frames", "pools_panel", "render_many", "render_png", "render_svg", "sets_panel",
    "snapshot_to_dot", "stack_panel", "stale_story", "state_panels", "step_x", "timeline_svg",
]
