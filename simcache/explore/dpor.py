"""``--reduce dpor``: partial-order reduction, sleep sets (Godefroid) over the operations' footprints, with state
caching, in the manner of loom's and Nidhugg's explorers.

Vocabulary
- A *transition* at a state is an actor's next operation. Two transitions a, b enabled at a state s are
  *independent* there when running them in either order gives the same state: s·a·b = s·b·a (the same cache, the
  same statuses). A search then needs only one of the two orders; a *sleep set* carries the transitions a state
  need not run because an equivalent order was (or will be) searched from an earlier sibling.
- *Footprints.* An operation that ``Driver.apply`` turns away before it touches anything (status ``-``: ``l3_ack``
  with no backup pending, ``finish`` / ``finish_oldest`` with no such live request, ``prefetch`` while storage is
  off or a prefetch is in flight, ``prefetch_done`` with none in flight, ``prefetch_hit`` with none in flight or
  its host KV already reserved, ``write_ack`` / ``load_ack`` with no
  incomplete copy) reads only what its guard reads and writes nothing: it is *inert* there (``inert``). Every
  other operation is taken to read and write the whole state (conservative, hence sound; finer footprints would
  find more independence). So a and b are independent at s when a is inert at s and still inert at s·b (b wrote
  nothing a's guard reads): both orders end in s·b's state, a having done nothing; or the same with a and b
  swapped, when b's run from s is known (an earlier sibling) and did not crash. A crashing operation is never
  independent: its run ends there, so no other order reaches the same end.
- *State caching* (Godefroid's combination): a state key (``statekey``) reached again is skipped when the sleep
  set it was searched with is contained in the current one; otherwise only the transitions that slept then and
  not now are run, and the stored set shrinks to the intersection.

Scope: the whole schedule space (no preemption bound: sleep sets and preemption bounding do not compose soundly,
an equivalent order may need more preemptions than the bound allows; Coons et al., OOPSLA 2013). The verdict
(signatures, damage kinds, distinct end states) equals the unreduced search's; ``tests/test_dpor.py`` checks it on
gallery scenarios under several presets, and that every inert operation leaves the state untouched.
"""
from __future__ import annotations

import time

from ..gcpace import fewer_collections
from .machine import Machine, Plan, _prepared
from .results import ExploreResult, Tally, finish


def inert(op: dict, m: Machine) -> bool:
    """True when ``Driver.apply`` would turn ``op`` away at ``m``'s state (status ``-``) before touching anything:
    its footprint is then its guard's reads, and no writes."""
    kind = op["op"]
    if kind == "l3_ack":
        return not m.cache.controller.pending_backups
    if kind == "finish_oldest":
        return not m.driver.live
    if kind == "finish":
        live = m.driver.live
        return op.get("rid", next(iter(live), None)) not in live
    if kind == "prefetch":
        return not m.cache.enable_storage or bool(m.cache.ongoing_prefetch)
    if kind == "prefetch_done":
        return "pf" not in m.cache.ongoing_prefetch
    if kind == "prefetch_hit":
        pf = m.cache.ongoing_prefetch.get("pf")
        return pf is None or pf.operation.host_indices is not None
    if kind in ("write_ack", "load_ack"):
        cc = m.cache.controller
        queue = cc.ack_write_queue if kind == "write_ack" else cc.ack_load_queue
        return op.get("n", 1) <= 0 or all(a.done for a in queue)
    return False


def _order(cur: int, pos: list[int], lengths: tuple[int, ...]) -> list[int]:
    """Enabled actors, the current one first (so the first failures found have few preemptions)."""
    first = [cur] if cur >= 0 and pos[cur] < lengths[cur] else []
    return first + [i for i in range(len(lengths)) if i != cur and pos[i] < lengths[i]]


@fewer_collections()
def dpor(plan: Plan, preset: str, budget: int | None = None, until: str | None = None,
         progress=None) -> ExploreResult:
    """Depth-first search of every schedule with sleep sets and state caching; see the module doc."""
    started = time.perf_counter()
    tally = Tally(plan, budget, until)
    lengths, ops = plan.lengths, _prepared(plan)[2]
    damage: dict = {}
    stored: dict[bytes, frozenset] = {}  # state key -> the sleep set it has been searched with (intersected)
    pruned, stopped, popped = 0, False, 0
    # a stack entry: (machine, current actor, sleep set, the transitions to run: None = every one not asleep)
    stack: list[tuple[Machine, int, frozenset, frozenset | None]] = [(Machine(plan), -1, frozenset(), None)]
    while stack and not stopped:
        m, cur, sleep, only = stack.pop()
        enabled = _order(cur, m.pos, lengths)
        here = {i: inert(ops[i][m.pos[i]], m) for i in enabled}
        run = [i for i in enabled if i not in sleep and (only is None or i in only)]
        done: list[tuple[int, Machine]] = []  # siblings run so far (their machines, for the inert checks)
        asleep = [t for t in sleep if here.get(t)]  # only an inert sleeper can stay asleep (see the module doc)
        entries = []
        for j, i in enumerate(run):
            c = m.clone() if j < len(run) - 1 else m
            c.step(plan, i)
            if c.crash is not None or len(c.idx) == plan.total:
                tally.add(finish(c, damage))
                if tally.full or tally.found:
                    stopped = True
                    break
                if c.crash is None:
                    done.append((i, c))
                continue
            # the child's sleep set: earlier siblings and sleepers independent of i at this state
            z = {t for t in asleep if inert(ops[t][c.pos[t]], c)}
            for t, sib in done:
                if (here[t] and inert(ops[t][c.pos[t]], c)) or (here[i] and inert(ops[i][sib.pos[i]], sib)):
                    z.add(t)
            done.append((i, c))
            zs = frozenset(z)
            key = c.key()
            seen = stored.get(key)
            if seen is None:
                stored[key] = zs
                entries.append((c, i, zs, None))
            elif seen <= zs:
                pruned += 1
            else:  # searched before with a larger sleep set: run what slept then and not now
                stored[key] = seen & zs
                entries.append((c, i, zs, seen - zs))
        stack.extend(reversed(entries))
        popped += 1
        if progress is not None and popped % 64 == 0:
            progress(dict(runs=tally.runs, failing=tally.failing, pruned=pruned))
    return tally.result("exhaustive", preset, None, None, pruned, not stopped, not stopped, started)
