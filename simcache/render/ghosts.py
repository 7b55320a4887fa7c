"""Ghosts: the detached nodes a view keeps drawing, and everyone who still holds each one.

Vocabulary
- A *ghost* is a node that is no longer in the tree but still matters to the story at a micro-step. It is drawn
  beside the tree (red dashed while held, grey dashed otherwise) from the moment it leaves the tree until:
  * it is *cleaned up* by a stale guard (it stays drawn, green, until that operation ends), or
  * it is attached to the tree again (then the tree draws it), or
  * the run ends.
  A node went stale once stays a ghost through stretches where nothing happens to hold it (a write ack popped
  it, a storage ack released it): it is still the same object, and the next holder can pick it up again.
- A node *deleted in the current operation* (an ordinary eviction, the cascade) is also a ghost until that
  operation ends, so the box the micro-step works on never vanishes under the cursor.
- So that drawings of long runs stay small, ghosts that nothing holds are limited to the ``MAX_UNHELD`` most
  recent ones (plus the node the step touches and the one the assertion fired on); held ghosts are all drawn.
- The *holders* of a ghost: the snapshot's own (leaf sets, LRU lists, in-flight maps, the insert loop's node,
  calls that will resume using it), **every** simulated call on the stack whose argument it is (the cascade's
  ``_delete_tombstone_leaf(node)`` too, marked as deleting it), the call handling the current micro-step when
  that step touches it, and the parent pointer of a detached child that is itself held.
- A ghost's *state* is one line for its box: ``WENT STALE`` at the moment only; ``STALE since step N`` while
  held; ``detached (step N), held by nothing now`` between holders; ``deleted at step N``; ``CLEANED UP``.

Everything is a pure function of the trace's steps, moments and the snapshot at the step; nothing here changes
what the recorder records. Per-trace indexes are cached and rebuilt when the trace grows.
"""
from __future__ import annotations

import re
import weakref
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from ..trace import DELETERS, EVICTION_ENTRIES
from .moments import assertion_node, assertion_step, op_index_of
from .words import short_key


@dataclass(frozen=True)
class Ghost:
    node: int
    state: str  # "went-stale", "stale", "unheld", "deleted", "cleaned-up"
    since: int  # the micro-step it left the tree (or went stale)
    holders: tuple[str, ...]
    badge: str  # the one line its box shows

    @property
    def held(self) -> bool:
        return bool(self.holders)

    @property
    def stale(self) -> bool:
        """Drawn as STALE (red): held, and either it went stale or something holds it to use it (a structure, the
        insert loop, a call that resumes after an eviction); a node deleted in this operation and held only by the
        code deleting it (its frames' locals, a child's parent pointer) is drawn grey, its holders too."""
        return self.held and (self.state != "deleted" or any(uses(h) for h in self.holders))


@dataclass
class _Index:
    length: int
    frames: list[tuple[tuple[str, int | None], ...]]  # per step: (function, node argument) outermost first
    detaches: list[tuple[int, int]]  # (step, node) of every micro-step that detached a node from its parent


_INDEX: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MAX_UNHELD = 8  # ghosts nothing holds (deleted in this operation, or stale but unreferenced): the most recent


def _index(trace) -> _Index:
    """Per step, the simulated call stack with each frame's node argument, rebuilt from the ``call`` steps."""
    try:
        idx = _INDEX.get(trace)
    except TypeError:  # a trace type that cannot be weakly referenced: never cached (see below)
        idx = None
    if idx is not None and idx.length == len(trace.steps):
        return idx
    frames: list[tuple[tuple[str, int | None], ...]] = []
    detaches: list[tuple[int, int]] = []
    cur: list[tuple[str, int | None]] = []
    for s in trace.steps:
        depth = len(s.stack)
        cur = cur[:depth] + [(f, None) for f in s.stack[len(cur):depth]]
        if s.kind == "call" and depth:
            cur[depth - 1] = (s.stack[-1], s.node)  # a call step is emitted on entering the frame it names
        frames.append(tuple(cur))
        if s.kind == "detach" and s.node is not None and s.detail.get("popped") == s.node:
            detaches.append((s.index, s.node))
    idx = _Index(len(trace.steps), frames, detaches)
    try:
        _INDEX[trace] = idx
    except TypeError:  # a trace type that cannot be weakly referenced: just do not cache
        pass
    return idx


def uses(holder: str) -> bool:
    """Whether ``holder`` holds a node to use it later (a structure, the insert loop, a call that resumes after an
    eviction), rather than to delete it (the eviction's own frames, a detached child's parent pointer)."""
    if holder.startswith("parent pointer"):
        return False
    return "()" not in holder or "resumes after" in holder


def code_frames_at(trace, step: int):
    """The code pane's frames at ``step`` (``codepane.code_at``: Python locals read by replay), or None where the
    run cannot be replayed (driven by hand, hand-built traces): then the recorded stack is the source."""
    if not getattr(trace, "replayable", False) or not getattr(trace, "checkpoints", None):
        return None
    from ..codepane import code_at

    return code_at(trace, step)


def _frame_holders(frames, node: int) -> list[str]:
    """Every code frame whose locals hold ``node``, outermost first, named as the code pane names them:
    ``write_backup(): node (resumes after evict_host)``, ``_delete_tombstone_leaf(): node (deleting it)``."""
    out = []
    for i, f in enumerate(frames):
        names = [name for name, ids in f.locals if node in ids]
        if not names:
            continue
        suffix = ""
        if f.function in DELETERS and "node" in names:
            suffix = " (cleaning it up)" if f.function == "_cleanup_stale_node" else " (deleting it)"
        elif f.function not in DELETERS:
            entry = next((g.function for g in frames[i + 1 :] if g.function in EVICTION_ENTRIES), None)
            suffix = f" (resumes after {entry})" if entry else ""
        out.append(f"{f.function}(): {', '.join(names)}{suffix}")
    return out


def call_holders(trace, step: int, node: int) -> list[str]:
    """Every simulated call on the stack at ``step`` holding ``node``, outermost first. Where the run replays, the
    code pane's frames are the source (every local that holds it, so the ledger, the tree and the code pane agree;
    at the assertion, the frames the cache raised from); else the recorded stack: each call whose argument it is,
    plus the call handling ``step`` itself when that micro-step touches ``node``."""
    frames = code_frames_at(trace, step)
    if frames is not None:
        return _frame_holders(frames, node)
    stack = _index(trace).frames[step]
    out = [f"{f}()" + (" (cleaning it up)" if f == "_cleanup_stale_node" else " (deleting it)" if f in DELETERS
                       else "") for f, n in stack if n == node]
    s = trace.steps[step]
    if s.node == node and stack and s.kind != "call" and not (stack[-1][1] == node):
        out.append(f"{stack[-1][0]}() (this step: {s.kind.replace('_', ' ')})")
    return out


def _merge(names: list[str], more: list[str]) -> list[str]:
    """``names`` then those of ``more`` whose function is not already listed (the snapshot's names win)."""
    have = {n.split("(")[0] for n in names}
    for m in more:
        if m.split("(")[0] not in have:
            names.append(m)
            have.add(m.split("(")[0])
    return names


def holders_of(trace, step: int, node: int) -> tuple[str, ...]:
    """Everyone holding ``node`` at ``step`` (see the module doc), without the parent pointers: the snapshot's
    structures, then the calls (``call_holders``). Where the code pane's frames are the source they replace the
    snapshot's own call names (and its "insert loop's node", which is ``_insert_helper``'s local ``node``)."""
    snap = trace.snapshots[step]
    names = list(snap.holders.get(node, ()))
    if code_frames_at(trace, step) is not None:
        return tuple([n for n in names if "()" not in n and "loop" not in n] + call_holders(trace, step, node))
    return tuple(_merge(names, call_holders(trace, step, node)))


def holding_at(trace, step: int) -> dict[int, tuple[str, ...]]:
    """Node id -> everyone holding it at ``step``, for every node the ghosts of ``step`` draw: THE source of "who
    holds node X at this micro-step" for the tree's boxes, the holder ledger and the explanation (the code pane
    reads the same frames)."""
    return {nid: g.holders for nid, g in ghosts_at(trace, step).items()}


def ghosts_at(trace, step: int) -> dict[int, Ghost]:
    """node id -> ``Ghost`` for every detached node a view of ``step`` must draw."""
    snap = trace.snapshots[step]
    idx = _index(trace)
    ops = trace.ops
    first = ops[op_index_of(trace, step)].first_step if ops else 0
    stale_steps: dict[int, list[int]] = {}
    for e in trace.went_stale:
        if e.step <= step:
            stale_steps.setdefault(e.node, []).append(e.step)
    cleaned = {}
    for e in trace.cleaned_up:
        if e.step <= step:
            cleaned[e.node] = e.step
    candidates: dict[int, tuple[str, int]] = {}
    for nid, steps in stale_steps.items():
        went = max(steps)
        c = cleaned.get(nid)
        if c is not None and c >= went:  # cleaned after it last went stale: drawn until that operation ends
            if c >= first:
                candidates[nid] = ("cleaned-up", went)
            continue
        candidates[nid] = ("went-stale" if went == step else "stale", went)
    for nid in snap.stale:
        candidates.setdefault(nid, ("stale", step))
    lo = bisect_left(idx.detaches, (first, -1))
    hi = bisect_right(idx.detaches, (step, float("inf")))
    for s, nid in idx.detaches[lo:hi]:  # deleted during this operation, so far
        if nid not in candidates or candidates[nid][0] == "deleted":
            candidates[nid] = ("deleted", s)
    crash = assertion_step(trace)
    if crash is not None and step >= crash:
        node = assertion_node(trace)
        if node is not None and node not in candidates:
            candidates[node] = ("deleted", crash)
    out: dict[int, Ghost] = {}
    for nid, (state, since) in candidates.items():
        n = snap.nodes.get(nid)
        if n is None or n.attached or nid == snap.root:
            continue
        held = holders_of(trace, step, nid)
        if step == crash and nid == assertion_node(trace) and step > 0 and code_frames_at(trace, step) is None:
            # the assertion step is recorded after the simulated stack unwound: show who held the node as it raised
            held = tuple(_merge(list(held), [h.replace(" (this step:", " (raised here after:")
                                             for h in call_holders(trace, step - 1, nid)]))
        out[nid] = Ghost(nid, state, since, held, "")
    # a detached child that is held keeps its parent reachable through its parent pointer
    kids: dict[int, list] = {}
    for other in snap.nodes.values():
        if not other.attached and other.parent in out and other.id != other.parent:
            kids.setdefault(other.parent, []).append(other)
    for nid, children in kids.items():
        g = out[nid]
        for other in sorted(children, key=lambda v: v.id):
            if (other.id in out and out[other.id].held) or (other.id not in out and snap.holders.get(other.id)):
                g = Ghost(nid, g.state, g.since, g.holders + (f"parent pointer of [{short_key(other.key)}]#"
                                                                f"{other.id}",), "")
        out[nid] = g
    # bounded drawings on long runs: every held ghost, but only the most recent unheld ones (and the node this
    # step touches, and the one the assertion fired on)
    keep = {trace.steps[step].node, assertion_node(trace) if crash is not None and step >= crash else None}
    unheld = sorted((g for g in out.values() if not g.held and g.node not in keep and g.state != "cleaned-up"),
                    key=lambda g: -g.since)
    for g in unheld[MAX_UNHELD:]:
        del out[g.node]
    return {nid: _badged(g) for nid, g in sorted(out.items())}


def _badged(g: Ghost) -> Ghost:
    state = "unheld" if g.state == "stale" and not g.held else g.state
    badge = {"went-stale": "WENT STALE", "cleaned-up": "CLEANED UP", "deleted": f"deleted at step {g.since}",
             "stale": f"STALE since step {g.since}",
             "unheld": f"stale since step {g.since}; held by nothing now"}[state]
    return Ghost(g.node, state, g.since, g.holders, badge)


_NODE_RE = re.compile(r"node (\d+) \[")
_NODES_RE = re.compile(r"node\(s\) \[([\d, ]+)\]")


def violation_nodes(trace, step: int) -> dict[int, tuple[str, ...]]:
    """node id -> invariants whose violation names it, from the violation's first micro-step to the end of the
    operation where it was reported (the moment a learner is looking at it)."""
    out: dict[int, list[str]] = {}
    for v in trace.violations:
        end = ops_end(trace, v.op)
        if not v.step <= step <= end:
            continue
        ids = [int(x) for x in _NODE_RE.findall(v.message)]
        for group in _NODES_RE.findall(v.message):
            ids += [int(x) for x in group.split(",") if x.strip()]
        for nid in dict.fromkeys(ids):
            out.setdefault(nid, [])
            if v.invariant not in out[nid]:
                out[nid].append(v.invariant)
    return {k: tuple(v) for k, v in sorted(out.items())}


def ops_end(trace, op: int) -> int:
    rec = next((o for o in trace.ops if o.index == op), None)
    if rec is None:
        return len(trace.steps) - 1
    return rec.last_step if rec.last_step >= 0 else len(trace.steps) - 1


def highlight_at(trace, step: int) -> dict:
    """Node ids to mark when showing ``step``: ``{"went_stale": [...], "cleaned": [...], "assertion": [...],
    "ghosts": {id: Ghost}, "violations": {id: invariant names}}``."""
    first = trace.ops[op_index_of(trace, step)].first_step if trace.ops else 0
    out: dict = {
        "went_stale": sorted({e.node for e in trace.went_stale if e.step == step}),
        "cleaned": sorted({e.node for e in trace.cleaned_up if first <= e.step <= step}),
        "assertion": [],
    }
    crash = assertion_step(trace)
    if crash is not None and step >= crash:
        node = assertion_node(trace)
        out["assertion"] = [] if node is None else [node]
    if trace.snapshots:
        out["ghosts"] = ghosts_at(trace, step)
        out["violations"] = violation_nodes(trace, step)
    return out
