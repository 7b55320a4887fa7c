"""A swim-lane timeline of a run, as an SVG string (pure function of the trace).

Vocabulary
- One *lane* per actor (the scheduler-level operations of ``trace.ops``, one block each, coloured by status:
  applied, nothing to do, refused, or raised) and one lane per *asynchronous source*: write acks, load acks and
  storage (L3) acks, each a tick at the micro-step where the completion was handled.
- Time runs left to right, one equal-width column per operation; a micro-step sits inside its operation's
  column in proportion to its offset, so the column of a long operation is not wider, only denser.
- The top lane holds the *moments*: went-stale (red triangle), cleaned-up (green circle), invariant violations
  (orange diamonds, the first one large) and the assertion (dark red cross). The blue *cursor* marks the step
  being shown; ``step_x`` gives its x so a page can move it without redrawing.
"""
from __future__ import annotations

from html import escape

from ..operations import describe_op
from .moments import moments, op_index_of
from .words import op_number, short

LEFT, LANE, TOP = 118, 26, 22
STATUS_FILL = {".": "#bfdbfe", "-": "#e5e7eb", "x": "#fca5a5"}
ACK_LANES = (("write_ack", "write acks"), ("load_ack", "load acks"), ("storage_ack", "storage acks"))


def _geometry(trace, width: int) -> tuple[float, int]:
    n = max(1, len(trace.ops))
    return (width - LEFT - 8) / n, n


def step_x(trace, step: int, width: int = 960) -> float:
    """x coordinate of micro-step ``step`` in ``timeline_svg(trace, width=width)``."""
    colw, _ = _geometry(trace, width)
    if not trace.ops:
        return float(LEFT)
    k = op_index_of(trace, step)
    op = trace.ops[k]
    last = op.last_step if op.last_step >= 0 else len(trace.steps) - 1
    frac = (step - op.first_step + 0.5) / max(1, last - op.first_step + 1)
    return round(LEFT + colw * (k + min(max(frac, 0.0), 1.0)), 1)


def _lanes(trace) -> list[tuple[str, str]]:
    actors = list(dict.fromkeys(o.actor or "main" for o in trace.ops))
    kinds = {s.kind for s in trace.steps}
    return [("moments", "moments")] + [("actor", a) for a in actors] + \
        [(kind, label) for kind, label in ACK_LANES if kind in kinds]


def _marker(kind: str, x: float, y: float, big: bool = False) -> str:
    if kind == "went-stale":
        return f'<path d="M{x - 7},{y - 7} L{x + 7},{y - 7} L{x},{y + 6} Z" fill="#dc2626"/>'
    if kind == "cleaned-up":
        return f'<circle cx="{x}" cy="{y}" r="6" fill="#16a34a"/>'
    if kind == "violation":
        r = 7 if big else 4
        return f'<path d="M{x},{y - r} L{x + r},{y} L{x},{y + r} L{x - r},{y} Z" fill="#f59e0b" stroke="#92400e"/>'
    if kind == "assertion":
        return (f'<path d="M{x - 6},{y - 6} L{x + 6},{y + 6} M{x - 6},{y + 6} L{x + 6},{y - 6}" stroke="#7f1d1d" '
                f'stroke-width="4"/>')
    return f'<circle cx="{x}" cy="{y}" r="3" fill="#6b7280"/>'


def timeline_svg(trace, cursor: int | None = None, *, width: int = 960, title: str = "",
                 hide_after: int | None = None) -> str:
    """The swim-lane SVG of ``trace`` with the cursor at micro-step ``cursor`` (none if None); ``hide_after``: a
    tour's open question, so the moments past that micro-step are left out and later operations drawn blank."""
    colw, n = _geometry(trace, width)
    lanes = _lanes(trace)
    height = TOP + LANE * len(lanes) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="sc-timeline" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" font-size="12">',
           f'<text x="4" y="14" font-weight="bold">{escape(title or "timeline")}</text>']
    lane_y = {}
    for i, (kind, label) in enumerate(lanes):
        y = TOP + i * LANE
        lane_y[(kind, label)] = y
        fill = "#f9fafb" if i % 2 else "#ffffff"
        out.append(f'<rect x="0" y="{y}" width="{width}" height="{LANE}" fill="{fill}"/>')
        out.append(f'<text x="4" y="{y + 17}" fill="#374151">{escape(label)}</text>')
    for k, op in enumerate(trace.ops):
        y = lane_y[("actor", op.actor or "main")]
        x = LEFT + k * colw
        fill = STATUS_FILL.get(op.status, "#fde68a")
        text = short(f"op {op_number(trace, k)} · {op.actor or 'main'}: {describe_op(op.op)} · "
                     f"status {op.status or '?'}")
        if hide_after is not None and op.first_step > hide_after:
            fill, text = "#f3f4f6", short(f"op {op_number(trace, k)} · {op.actor or 'main'}: {describe_op(op.op)}")
        out.append(f'<g class="tl-op" data-op="{k}" data-step="{op.first_step}"><title>{escape(text)}</title>'
                   f'<rect x="{x + 1:.1f}" y="{y + 3}" width="{max(colw - 2, 1):.1f}" height="{LANE - 6}" rx="3" '
                   f'fill="{fill}" stroke="#6b7280" stroke-width="0.6"/>')
        if colw >= 44:
            label = op.op.get("op", "?")[: int(colw / 7)]
            out.append(f'<text x="{x + colw / 2:.1f}" y="{y + 17}" text-anchor="middle">{escape(label)}</text>')
        out.append("</g>")
    for kind, label in lanes:
        if kind in dict(ACK_LANES):
            y = lane_y[(kind, label)] + LANE / 2
            out += [f'<circle class="tl-ack" cx="{step_x(trace, s.index, width)}" cy="{y}" r="4" fill="#0d9488">'
                    f"<title>step {s.index}: {escape(short(s.text))}</title></circle>"
                    for s in trace.steps if s.kind == kind]
    my = TOP + LANE / 2
    first_violation = min((v.step for v in trace.violations), default=None)
    bottom = TOP + LANE * len(lanes)
    for kind, steps in moments(trace).items():
        if kind == "readmitted":
            continue
        for s in steps:
            if hide_after is not None and s > hide_after:
                continue
            x = step_x(trace, s, width)
            out.append(f'<g class="tl-moment tl-{kind}" data-step="{s}"><title>step {s}: {kind}</title>'
                       f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{bottom}" stroke="#e5e7eb"/>'
                       f"{_marker(kind, x, my, big=(s == first_violation))}</g>")
    for k in range(0, n, max(1, round(60 / colw))):
        out.append(f'<text x="{LEFT + (k + 0.5) * colw:.1f}" y="{bottom + 14}" text-anchor="middle" '
                   f'fill="#6b7280" font-size="11">{op_number(trace, k)}</text>')
    out.append(f'<text x="4" y="{bottom + 14}" fill="#6b7280" font-size="11">operation</text>')
    keyx = LEFT
    for kind, text in (("went-stale", "went stale"), ("cleaned-up", "cleaned up"), ("violation", "violation"),
                       ("assertion", "assertion")):
        out.append(_marker(kind, keyx + 6, bottom + 30) + f'<text x="{keyx + 16}" y="{bottom + 34}">{text}</text>')
        keyx += 110
    cx = step_x(trace, cursor, width) if cursor is not None else -10
    out.append(f'<line class="tl-cursor" x1="{cx}" y1="{TOP - 4}" x2="{cx}" y2="{bottom + 2}" stroke="#2563eb" '
               f'stroke-width="3"/>')
    out.append("</svg>")
    return "".join(out)
