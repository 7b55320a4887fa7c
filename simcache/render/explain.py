"""Plain English for "why is this node stale?", built from the trace alone.

Vocabulary
- A node *went stale* at the micro-step that detached it from its parent while something still held it (a leaf
  set, an LRU list, an in-flight copy, or a simulated call that resumes after the eviction that detached it).
- The *story* of a stale node has three parts: which operation and which call chain detached it; who still held
  it at that moment; and what the trace does with it next, found by looking ahead for the next micro-steps that
  touch that node id: re-admission into a structure, a child attached under it, a lock, a cleanup by a stale
  guard, and finally the assertion, if the run ends in one.
"""
from __future__ import annotations

from dataclasses import dataclass
from html import escape

from ..operations import describe_op
from ..trace import EVICTION_ENTRIES
from .ghosts import ghosts_at
from .moments import assertion_node, assertion_step, op_index_of
from .words import op_number, short

_NEXT_KINDS = {"attach", "lock", "backup", "cleaned_up", "detach", "set_add", "lru_insert", "write_ack",
               "storage_ack", "load_ack"}


@dataclass(frozen=True)
class StaleStory:
    node: int
    key: str
    step: int
    op_index: int
    op_text: str
    chain: tuple[str, ...]  # call frames, outermost first, ending with the one that detached it
    holders: tuple[str, ...]
    reentrant: str | None  # the frame that was working on the node and called the eviction, if any
    next_events: tuple[tuple[int, str], ...]  # (step, sentence)


def op_text(trace, k: int) -> str:
    """Operation ``k`` of ``trace`` as views show it (``R1: request [1 2 3]``)."""
    op = trace.ops[k]
    return short(describe_op(op.op, op.actor))


def _look_ahead(trace, nid: int, after: int, limit: int = 8) -> list[tuple[int, str]]:
    """Later micro-steps that touch node ``nid``: the telling ones always, routine ones while there is room."""
    telling: list[tuple[int, str]] = []
    routine: list[tuple[int, str]] = []
    readmit = {e.step: e for e in trace.readmitted if e.node == nid}
    cleaned = {e.step: e for e in trace.cleaned_up if e.node == nid}
    for s in trace.steps[after + 1:]:
        if s.index in cleaned:
            e = cleaned[s.index]
            where = (f"removing it from {', '.join(e.removed)}" if e.removed
                     else "and skips it (it is in no LRU list or leaf set)")
            telling.append((s.index, f"a stale guard cleans it up ({e.reason}), {where}"))
        elif s.index in readmit:
            telling.append((s.index, f"it is re-admitted to {readmit[s.index].holders[0]} although it is not in "
                                     f"the tree ({s.text})"))
        elif s.kind == "attach" and s.detail.get("parent") == nid:
            telling.append((s.index, f"a new child is attached under it, into a subtree the tree can no longer "
                                     f"reach ({s.text})"))
        elif s.node == nid and s.kind == "detach" and s.detail.get("popped") != nid:
            telling.append((s.index, f"code tries to detach it again, but its old parent's slot no longer holds "
                                     f"it ({s.text})"))
        elif s.node == nid and s.kind in _NEXT_KINDS - {"set_add", "lru_insert", "attach", "detach"}:
            routine.append((s.index, s.text))
    crash = assertion_step(trace)
    if crash is not None and assertion_node(trace) == nid:
        c = trace.crashed
        telling.append((crash, f"the simulated cache raises {c.type}: {c.message} in {c.function}"))
    return sorted((st, short(text)) for st, text in telling + routine[: max(0, limit - len(telling))])


def stale_story(trace, node_id: int, at_step: int | None = None) -> StaleStory | None:
    """The story of the latest time ``node_id`` went stale at or before ``at_step`` (any time if None)."""
    events = [e for e in trace.went_stale if e.node == node_id and (at_step is None or e.step <= at_step)]
    if not events:
        return None
    ev = events[-1]
    step = trace.steps[ev.step]
    k = op_index_of(trace, ev.step)
    chain = step.stack
    entries = [i for i, f in enumerate(chain) if f in EVICTION_ENTRIES]
    reentrant = None
    if entries:
        callers = [h.split("(")[0] for h in ev.holders if "resumes after" in h]
        reentrant = callers[-1] if callers else None
    return StaleStory(node_id, short(f"[{ev.key}]")[1:-1], ev.step, op_number(trace, k), op_text(trace, k), chain,
                      tuple(map(short, ev.holders)), reentrant,
                      tuple(_look_ahead(trace, node_id, ev.step)))


def _gloss(holder: str) -> str:
    if "(deleting it)" in holder or "(cleaning it up)" in holder or holder.startswith("parent pointer"):
        return holder
    if "()" in holder and "resumes after" not in holder:
        return f"{holder}, a call on the stack"
    if "resumes after" in holder:
        fn, _, rest = holder.partition(" (resumes after ")
        return f"{fn}, which will carry on using it when {rest.rstrip(')')} returns"
    if "loop" in holder:
        return "the insert loop's variable `node`, which the next loop iteration walks from"
    if holder.startswith("ongoing"):
        return f"{holder}, an in-flight copy whose ack will come back to it"
    return f"{holder}, from which a later eviction can pick it"


def _head(s: StaleStory) -> list[str]:
    out = [f"Node #{s.node} [{s.key}] went stale at step {s.step}, during operation {s.op_index} ({s.op_text}).",
           f"The call chain {' -> '.join(s.chain)} detached it from its parent, so the tree no longer reaches it."]
    if s.reentrant:
        out.append(f"This is re-entrancy: {s.reentrant}() was working on this very node, needed memory, and called "
                   f"an eviction; the eviction's tombstone cascade removed the node {s.reentrant}() resumes with.")
    return out


def explain_stale(trace, node_id: int, at_step: int | None = None) -> str:
    """Plain-text paragraphs: what detached the node, who still held it, what happens next."""
    s = stale_story(trace, node_id, at_step)
    if s is None:
        return f"Node #{node_id} never went stale in this run."
    lines = _head(s) + ["At that moment it was still held by:"] + [f"  - {_gloss(h)}" for h in s.holders]
    if s.next_events:
        lines += ["What happens next:"] + [f"  - step {st}: {text}" for st, text in s.next_events]
    else:
        lines.append("Nothing touches it again before the run ends.")
    end = _ending(trace, s)
    return "\n".join(lines + ([end] if end else []))


def _ending(trace, s: StaleStory) -> str:
    """How the run ends, when the story's own events do not already say it."""
    crash = assertion_step(trace)
    if crash is None or any(st == crash for st, _ in s.next_events):
        return ""
    c = trace.crashed
    return short(f"The run ends at step {crash} with {c.type}: {c.message} in {c.function}.")


def explain_html(trace, step: int, run: str = "") -> str:
    """HTML explanation of every node that went stale at or before ``step`` (latest first), or a short note."""
    nodes = list(dict.fromkeys(e.node for e in reversed(trace.went_stale) if e.step <= step))
    ghosts = ghosts_at(trace, step) if nodes and getattr(trace, "snapshots", None) else {}
    parts = []
    for nid in nodes:
        s = stale_story(trace, nid, step)
        parts += [f"<p>{escape(x)}</p>" for x in _head(s)]
        parts.append("<p>At that moment it was still held by:</p><ol>"
                     + "".join(f"<li>{escape(_gloss(h))}</li>" for h in s.holders) + "</ol>")
        if s.next_events:
            parts.append("<p>What happens next:</p><ol>" + "".join(
                f'<li data-step="{st}"{" class=sc-past" if st <= step else ""}><b>step {st}</b>: {escape(text)}</li>'
                for st, text in s.next_events) + "</ol>")
        else:
            parts.append("<p>Nothing touches it again before the run ends.</p>")
        end = _ending(trace, s)
        parts += [f"<p>{escape(end)}</p>"] if end else []
        g = ghosts.get(nid) if step > s.step else None
        if g is not None:  # who holds it now: the same list as the tree's box and the ledger (ghosts.holding_at)
            # no step number here: frames whose holders agree share one copy of this text in an export
            now = ("At this step it is still held by:" if g.stale else "At this step it is held by:") if g.held \
                else "At this step nothing holds it."
            parts.append(f'<p class="sc-now">{escape(now)}</p>' + (
                "<ol>" + "".join(f"<li>{escape(_gloss(h))}</li>" for h in g.holders) + "</ol>" if g.held else ""))
    if not nodes:
        later = [e for e in trace.went_stale if e.step > step]
        parts.append(f"<p>No node is stale yet; the first one goes stale at step {later[0].step}.</p>" if later
                     else "<p>No node goes stale in this run.</p>")
    of = f' <span class="sc-of">· {escape(run)}</span>' if run else ""  # which run, on a compare page
    return f'<div class="sc-explain"><h4>Why is this node stale?{of}</h4>{"".join(parts)}</div>'
