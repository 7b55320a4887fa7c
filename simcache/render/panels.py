"""HTML panels beside the tree: pure functions of a snapshot (or a trace and a step) returning HTML strings.

Vocabulary
- *LRU lists* are shown most recently used first; the left end is what eviction reaches last.
- The two *leaf sets* are the candidates of device eviction (``evictable_full_device_leaves``) and host
  eviction (``evictable_full_host_leaves``). *In flight* lists the nodes with a copy or prefetch outstanding.
- A node chip reads ``1,2 #8``; a red chip is a node that is detached from the tree (a stale reference).
- *Pools*: one strip per pool, one cell per slot: free, used, **leaked** (allocated but nobody refers to it) or
  **double-freed** (freed while already free).
- The *holder ledger* of a stale node lists everything that still refers to it after it left the tree.
- The *invariant panel* is green per invariant until the step where its first violation began, then red.

All output uses the ``sc-`` CSS classes of ``PANEL_CSS``; include it once per page.
"""
from __future__ import annotations

from html import escape

from ..invariants import INVARIANTS
from ..snapshot import Snapshot
from .dot import abbreviate_key
from .words import sentence, short

PANEL_CSS = """
.sc-panel{font-family:Helvetica,Arial,sans-serif;font-size:14px;color:#111827;margin:0 0 10px 0}
.sc-panel h4{margin:4px 0 6px 0;font-size:15px}
.sc-row{margin:3px 0;line-height:1.9}
.sc-name{display:inline-block;min-width:15em;font-family:monospace;color:#374151}
.sc-chip{display:inline-block;padding:0 6px;margin:0 3px 2px 0;border:1px solid #9ca3af;border-radius:4px;
 background:#f9fafb;font-family:monospace}
.sc-chip.sc-stale{border:2px dashed #dc2626;background:#fee2e2;color:#7f1d1d;font-weight:bold}
.sc-empty{color:#9ca3af;font-style:italic}
.sc-slots{display:inline-flex;flex-wrap:wrap;gap:1px;vertical-align:middle;max-width:34em}
.sc-slot{display:inline-block;width:11px;height:14px;background:#e5e7eb;border:1px solid #d1d5db}
.sc-slot.used{background:#60a5fa;border-color:#1d4ed8}.sc-slot.leaked{background:#f59e0b;border-color:#92400e}
.sc-slot.double{background:#dc2626;border-color:#7f1d1d}
.sc-bad{color:#b91c1c;font-weight:bold}
.sc-table{border-collapse:collapse}.sc-table td,.sc-table th{border:1px solid #e5e7eb;padding:2px 8px;text-align:left}
.sc-ok{background:#dcfce7;color:#14532d}.sc-red{background:#fee2e2;color:#7f1d1d;font-weight:bold}
.sc-stack{font-family:monospace;font-size:13px;margin:0;padding:0;list-style:none}
.sc-stack li{white-space:normal;overflow-wrap:anywhere;text-indent:0;line-height:1.3;margin:0}
.sc-stack .sc-here{color:#1d4ed8;font-weight:bold}
.sc-kind{display:inline-block;padding:0 5px;border-radius:3px;background:#e0e7ff;color:#1e3a8a;font-size:12px}
.sc-explain{font-family:Helvetica,Arial,sans-serif;font-size:15px;line-height:1.45;max-width:60em}
.sc-of{color:#1e3a8a;font-weight:normal}
.sc-explain ol{margin:4px 0 4px 1.2em;padding:0}.sc-explain .sc-past{color:#9ca3af}
"""


def chip(snap: Snapshot, node_id: int) -> str:
    n = snap.nodes.get(node_id)
    if n is None:
        return f'<span class="sc-chip">#{node_id}</span>'
    stale = not n.attached and node_id != snap.root
    text = "root" if node_id == snap.root else abbreviate_key(n.key)
    title = " title=\"detached from the tree: a stale reference\"" if stale else ""
    return f'<span class="sc-chip{" sc-stale" if stale else ""}"{title}>{escape(text)} #{node_id}</span>'


def _row(name: str, ids: tuple[int, ...], snap: Snapshot) -> str:
    body = " ".join(chip(snap, i) for i in ids) or '<span class="sc-empty">empty</span>'
    return f'<div class="sc-row"><span class="sc-name">{escape(name)}</span>{body}</div>'


def lru_panel(snap: Snapshot) -> str:
    rows = "".join(_row(name, ids, snap) for name, ids in snap.lrus.items())
    return f'<div class="sc-panel sc-lru"><h4>LRU lists (most recent first)</h4>{rows}</div>'


def sets_panel(snap: Snapshot) -> str:
    rows = "".join(_row(name, ids, snap) for name, ids in snap.sets.items())
    rows += "".join(_row(f"in flight: {name}", ids, snap) for name, ids in snap.ongoing.items() if ids)
    return f'<div class="sc-panel sc-sets"><h4>Evictable leaf sets</h4>{rows}</div>'


def pools_panel(snap: Snapshot) -> str:
    rows = []
    for name, p in snap.pools.items():
        leaked, double = set(p.leaked), set(p.double_freed)
        used = set(p.used)
        counts = f"used {len(used)} / {p.size}, free {len(p.free)}"
        if leaked:
            counts += f', <span class="sc-bad">leaked {sorted(leaked)}</span>'
        if double:
            counts += f', <span class="sc-bad">double-freed {sorted(double)}</span>'
        if p.size <= 128:
            cells = "".join(f'<i class="sc-slot {_slot_class(i, used, leaked, double)}"></i>' for i in range(p.size))
            strip = f'<span class="sc-slots">{cells}</span>'
        else:
            strip = f'<progress max="{p.size}" value="{len(used)}"></progress>'
        rows.append(f'<div class="sc-row"><span class="sc-name">{escape(name)}</span>{strip} {counts}</div>')
    counters = ", ".join(f"{k}={v}" for k, v in snap.counters.items())
    rows.append(f'<div class="sc-row"><span class="sc-name">size counters</span><code>{escape(counters)}</code></div>')
    return f'<div class="sc-panel sc-pools"><h4>Pools</h4>{"".join(rows)}</div>'


def _slot_class(i: int, used: set, leaked: set, double: set) -> str:
    return "double" if i in double else "leaked" if i in leaked else "used" if i in used else "free"


def holder_kind(name: str) -> str:
    """What kind of reference a holder name is: a call frame, the insert loop's variable, or a structure."""
    if "loop" in name:
        return "the insert loop's current node"
    if name.startswith("parent pointer"):
        return "a detached child's parent link (the cascade and eviction walk up through it)"
    if "deleting it" in name or "cleaning it up" in name:
        return "the call deleting or cleaning it up (it still holds the node)"
    if "this step" in name or "raised here" in name:
        return "the call working on it at this step"
    if "(" in name:
        return "a simulated call that will keep using it" if "resumes" in name else "a simulated call frame"
    if name.startswith("ongoing") or "prefetch" in name:
        return "an in-flight copy (its ack will touch it)"
    return "a cache structure (eviction can pick it)"


def holders_panel(snap: Snapshot, node_ids: tuple[int, ...] | None = None, ghosts: dict | None = None) -> str:
    """The holder ledger: each stale node and who still holds it. With ``ghosts`` (``ghosts.ghosts_at``), every
    detached node the drawing shows is listed with its state and *all* its holders (call frames included), so
    the ledger, the tree and the explanation tell the same story at every step."""
    if ghosts:
        order = sorted(ghosts.values(), key=lambda g: (g.state == "deleted", not g.held, g.node))
        parts = []
        for g in order:
            rows = "".join(f"<tr><td><code>{escape(short(h))}</code></td><td>{escape(holder_kind(h))}</td></tr>"
                           for h in g.holders)
            table = (f'<table class="sc-table"><tr><th>holder</th><th>kind</th></tr>{rows}</table>' if rows
                     else '<span class="sc-empty">nothing holds it at this step</span>')
            held = (", still held by:" if g.stale else ", held by (while it is deleted):") if rows else "."
            parts.append(f'<p data-node="{g.node}">{chip(snap, g.node)} is detached from the tree '
                         f"(<b>{escape(g.badge)}</b>){held}</p>{table}")
        return f'<div class="sc-panel sc-holders"><h4>Holder ledger</h4>{"".join(parts)}</div>'
    ids = snap.stale if node_ids is None else node_ids
    if not ids:
        return ('<div class="sc-panel sc-holders"><h4>Holder ledger</h4>'
                '<span class="sc-empty">no stale node</span></div>')
    parts = []
    for nid in ids:
        rows = "".join(f"<tr><td><code>{escape(h)}</code></td><td>{escape(holder_kind(h))}</td></tr>"
                       for h in snap.holders.get(nid, ()))
        parts.append(f"<p>{chip(snap, nid)} is detached, still held by:</p>"
                     f'<table class="sc-table"><tr><th>holder</th><th>kind</th></tr>{rows}</table>')
    return f'<div class="sc-panel sc-holders"><h4>Holder ledger</h4>{"".join(parts)}</div>'


def _of(run: str) -> str:
    """`` · pre_fix``: which run a panel belongs to (a compare page shows one run's panels)."""
    return f' <span class="sc-of">· {escape(run)}</span>' if run else ""


def invariants_panel(trace, step: int, run: str = "") -> str:
    seen = [v for v in trace.violations if v.step <= step]
    first: dict[str, object] = {}
    for v in seen:
        first.setdefault(v.invariant, v)
    rows = []
    for name in INVARIANTS:
        v = first.get(name)
        if v is None:
            rows.append(f'<tr class="sc-ok" data-invariant="{name}"><td>{name}</td><td>holds</td></tr>')
        else:
            rows.append(f'<tr class="sc-red" data-invariant="{name}"><td>{name}</td>'
                        f"<td>violated from step {v.step} (op {v.op})</td></tr>")
    head = ""
    if seen:
        v = min(seen, key=lambda v: v.step)
        head = (f'<p class="sc-bad">First violation: step {v.step}, {escape(v.invariant)}: '
                f"{escape(short(v.message))}</p>")
    return (f'<div class="sc-panel sc-invariants"><h4>Invariants{_of(run)}</h4>{head}'
            f'<table class="sc-table">{"".join(rows)}</table></div>')


def _words(step) -> str:
    """The micro-step as the stack panel names it: the trace's words, but a clean-up as a sentence (the trace says
    "removed from nothing" when the node was in no LRU list or leaf set)."""
    return sentence(step) if step.kind == "cleaned_up" else short(step.text)


def stack_panel(step, op_text: str = "", run: str = "") -> str:
    """The nested call stack of micro-step ``step`` (a ``MicroStep``), with the micro-step itself innermost. At the
    assertion the simulated stack has already unwound, so the frames the cache raised from are listed instead
    (for the PR's shape: nine frames, ``cache_finished_req`` down to ``_delete_tombstone_leaf``)."""
    frames = tuple(step.stack)
    if step.kind == "assertion" and not frames:
        frames = tuple(step.detail.get("stack", ()))
    items = [f'<li style="padding-left:{d * 0.9:.1f}em">{escape(f)}()</li>' for d, f in enumerate(frames)]
    items.append(f'<li class="sc-here" style="padding-left:{len(frames) * 0.9:.1f}em">'
                 f'<span class="sc-kind">{escape(step.kind)}</span> {escape(_words(step))}</li>')
    head = f"<div><b>op {step.op}</b> {escape(short(op_text))}</div>" if op_text else ""
    return (f'<div class="sc-panel sc-callstack"><h4>Call stack{_of(run)}</h4>{head}'
            f'<ul class="sc-stack">{"".join(items)}</ul></div>')


def state_panels(snap: Snapshot) -> str:
    """LRU lists, leaf sets, pools and the holder ledger, in one block."""
    return lru_panel(snap) + sets_panel(snap) + pools_panel(snap) + holders_panel(snap)
