"""The game's levels and what the game says: the level table (D, A, B, C, then ``crash_pr``), the *reaction*
sentence built from a trace's own events, and the *points* inside write_backup / evict_host where a learner may
stop. ``game`` (the widgets) and ``game_map`` (the precomputed map of each level) both read them; see ``game``'s
module doc for the vocabulary.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .crash import STALE
from .errors import ScenarioError, shown

GOAL = STALE  # the assertion every level asks for
INSIDE = ("write_backup", "evict_host")  # the calls a learner may step inside (levels with ``inside``)
# the calls inside them worth stopping at (the re-entrant eviction and its cascade)
POINT_CALLS = frozenset({"write_backup", "evict_host", "_evict_host_leaf", "_iteratively_delete_tombstone_leaf",
                         "_delete_tombstone_leaf", "evict_mamba_host"})
POINT_KINDS = frozenset({"alloc_fail", "detach", "backup"})  # inside write_backup / evict_host
MAX_POINTS = 12  # points shown inside one operation (the first ones; the rest of the operation runs on)


@dataclass(frozen=True)
class Level:
    number: int
    scenario: str
    preset: str
    title: str
    goal: str
    hints: tuple[str, ...]
    solution: str  # a schedule that wins the level (tests play it)
    inside: bool  # the learner may step inside write_backup / evict_host
    why: str = ""  # two sentences a win ends with: why the cache reached the assertion


LEVELS: tuple[Level, ...] = (
    Level(1, "scenario_d", "pre_fix", "D: a host leaf that is not a leaf",
          "One actor, two moves: make the cache reach the assertion and watch which node is left behind.",
          ("`evict_host 2` evicts a host node that still has a child on the device: look at what it takes along.",
           "After the first move, node [3] is detached but still listed as a device leaf; what will `evict 1` "
           "pick?"),
          "mem*2", False,
          "Host eviction took node [2] off the host although its child [3] was still on the device, and deleting "
          "[2] detached [3] with it while the device leaf set still listed [3]. The next device eviction picked "
          "[3] from that set and asked its parent's slot for it: the slot no longer held it."),
    Level(2, "scenario_a", "pre_fix", "A: a tombstone kept alive by a host reference",
          "Two actors: memory pressure (mem) and the storage ack (l3). Find the order that crashes.",
          ("The first host eviction's cascade deletes [1,2] although an L3 backup still holds it.",
           "The L3 ack releases that reference and re-admits the detached node as a host leaf: evict after it."),
          "mem l3 mem", False,
          "The first host eviction's tombstone cascade deleted [1,2] although an L3 backup still held a host "
          "reference on it. The L3 ack then re-admitted the detached [1,2] as a host leaf, and the next host "
          "eviction popped a parent's slot that had not held it since."),
    Level(3, "scenario_b", "pre_fix", "B: write_backup deletes its own node",
          "Write-back policy. From this level on you may step inside write_backup and evict_host.",
          ("Both requests must insert before memory pressure: the split leaves a tombstone [1,2] over two leaves.",
           "The second `evict 2` demotes [1,2]: its write_backup finds the host full and calls evict_host, whose "
           "cascade deletes [1,2] itself. Step inside that move to watch it.",
           "The detached node ends up a host leaf; any later eviction that needs host space pops it."),
          "A B mem*2 C mem2", True,
          "Demoting [1,2], write_backup found the host full and called evict_host, whose cascade deleted [1,2] "
          "itself while write_backup still held it. Backed up anyway, the detached node became a host leaf, and "
          "the next eviction that needed host space popped it from a parent that no longer held it."),
    Level(4, "scenario_c", "pre_fix", "C: the insert loop's own node is deleted under it",
          "Six actors. A prefetch breaks backup continuity; an insert must find the host full at the wrong node.",
          ("The prefetch (pf) must complete after R2's insert, so its host-only tail hangs under a node that is "
           "not backed up.",
           "Fill the host (R4) and evict the device leaf (mem) before R6 inserts [1,2,7]: its write_backup will "
           "evict the prefetched tail and the cascade deletes the node the insert loop stands on.",
           "Let the controller (ctl) deliver its acks, then evict again."),
          "pf R2 pf R4 mem R6 ctl*3 mem", True,
          "The prefetch hung a host-only tail under a node with no host copy, so when R6's insert needed host room, "
          "evicting that tail cascaded into the very node the insert loop stood on. The insert went on with the "
          "detached node, the acks re-admitted it to the leaf sets, and the last eviction found its slot empty."),
    Level(5, "crash_pr", "pre_fix", "crash_pr: the crash reported in the PR",
          "Seven actors, the traceback of the PR. Reach `parent does not have child key` in _delete_tombstone_leaf.",
          ("The race is level 4's: a completed prefetch under an unbacked node, then an insert that re-enters "
           "eviction.",
           "After R6's insert, the controller has four acks to deliver, then memory pressure evicts again.",
           "The assertion comes in the PR's shape: a last request (R7) whose insert calls write_backup, which "
           "calls evict_host, whose cascade reaches the detached node. Step inside R7's move."),
          "pf R2 pf R4 mem R6 ctl*4 mem R7", True,
          "R6's insert deleted its own node [1,2] through write_backup, evict_host and the tombstone cascade, then "
          "carried on with it: the detached node was backed up, got a child and re-entered the leaf sets. R7's "
          "insert re-entered eviction the same way, and the cascade reached [1,2] a second time: parent does not "
          "have child key."),
)


def level(number) -> Level:
    """The level numbered ``number`` (1 .. len(LEVELS))."""
    if type(number) is not int or not 1 <= number <= len(LEVELS):
        raise ScenarioError(f"there is no level {shown(number, 20)}; the levels are 1 to {len(LEVELS)}")
    return LEVELS[number - 1]


def _holder(h: str) -> str:
    if h == "_insert_helper's loop node":
        return "the insert loop (_insert_helper's `node`)"
    m = re.fullmatch(r"(\w+)\(\) \(resumes after (\w+)\)", h)
    return f"{m.group(1)}(), which resumes after {m.group(2)}," if m else h


def _cause(cause: str, depth: int = 5) -> str:
    chain = cause.removeprefix("detached by ").split(" <- ")
    if len(chain) == 1:
        return f"by {chain[0]}"
    inner = chain[1 : depth + 1] + (["..."] if len(chain) > depth + 1 else [])
    return f"by {chain[0]}, called from {' <- '.join(inner)}"


def _join(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``; an item that ends in a comma (a clause) keeps it before "and"."""
    if len(items) == 1:
        return items[0]
    heads = [i.rstrip(",") for i in items[:-1]]
    return ", ".join(heads) + ("," if items[-2].endswith(",") else "") + " and " + items[-1]


def reaction(run, op_index: int, upto: int | None = None) -> str:
    """The sentence for what operation ``op_index`` of ``run`` broke (up to micro-step ``upto``), from the
    trace's own events: a node that went stale (who detached it, who still holds it), else the first invariant
    the operation began to violate; empty when it broke nothing."""
    t = run.trace
    if not 0 <= op_index < len(t.ops):
        return ""
    op = t.ops[op_index]
    last = op.last_step if op.last_step >= 0 else len(t.steps) - 1
    if upto is not None:
        last = min(last, upto)
    return sentence([e for e in t.went_stale if op.first_step <= e.step <= last],
                    [v for v in t.violations if v.op == op_index and v.step <= last])


def sentence(stale, violations) -> str:
    """``reaction``'s sentence from one operation's went-stale events and the violations it began, in order."""
    said = []
    for e in stale:
        by = _cause(e.cause)
        verb = "holds" if len(e.holders) == 1 else "hold"
        said.append(f"You just detached node #{e.node} [{e.key}] ({by}) while "
                    f"{_join([_holder(h) for h in e.holders])} still {verb} it.")
    if not said and violations:
        v = violations[0]
        said.append(f"That move broke the {v.invariant.replace('_', ' ')} invariant: {v.message}.")
    return " ".join(said)


def state_view(cache, driver, page_size: int = 1, legend: bool = True) -> tuple[str, tuple[int, ...]]:
    """(the DOT of the cache as the moves left it, the stale nodes in it): the tree and, beside it, every detached
    node something still holds. A pure function of the state (no history), so the game in the notebook and the
    levels page, which reaches a state by any order of moves, draw it alike."""
    from .render.dot import snapshot_to_dot
    from .snapshot import take

    snap = take(cache, list(driver.live.values()) if driver is not None else [], pools={})
    return snapshot_to_dot(snap, None, page_size=page_size, legend=legend), snap.stale


def points(run, op_index: int) -> list[int]:
    """The micro-steps of operation ``op_index`` where the learner may stop inside write_backup / evict_host
    (see the module doc), at most ``MAX_POINTS``; empty when the operation never enters them."""
    t = run.trace
    op = t.ops[op_index]
    last = op.last_step if op.last_step >= 0 else len(t.steps) - 1
    out = []
    for s in t.steps[op.first_step : last + 1]:
        if s.kind == "attach" and out:  # the insert loop attaching a child once the re-entry has run
            out.append(s.index)
        if not any(c in s.stack for c in INSIDE):
            continue
        if (s.kind == "call" and s.stack and s.stack[-1] in POINT_CALLS) or s.kind in POINT_KINDS \
                or s.kind == "assertion":
            out.append(s.index)
    return out[:MAX_POINTS]
