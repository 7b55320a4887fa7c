"""Programs that reach the stale-node race: the gallery's cases, perturbed a little, under nearby schedules.

A uniform random program of cache operations almost never reaches the race (it needs a prefetch or an L3 backup
in flight, a full host, and an insert or an eviction re-entering the cascade at the right moment), and more than
a third of such programs die first on an unrelated assertion. So these programs start from the gallery, where the
race's actors and schedules already are:

- a *seed*: one gallery scenario (its config, injected nodes, actors and schedule; ``hidden_needle`` with its
  ``minimal_schedule`` too);
- *perturbed operations*: per actor, sometimes one operation dropped, or an eviction's ``n`` moved by one, or one
  operation borrowed from another seed's actors (only those valid under this seed's config);
- a *nearby schedule*: the seed's order, kept turn by turn with probability 7/10, otherwise a turn of another
  actor that still has operations (one preemption); so most programs stay within a few preemptions of a schedule
  that is known to matter.

``observe(program, preset, flags)`` runs one program through ``simulate`` (the public entry point) and returns
what the properties look at: the crash, the went-stale and cleaned-up events, the invariant violations and the
final snapshot. Programs that crash on an assertion other than the race's are kept (their prefix still counts for
every property) and counted apart by ``kind``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache

import hypothesis.strategies as st

from simcache.scenario import load
from simcache.scheduler import format_turns
from simcache.simulate import simulate
from simcache.snapshot import take

X = "parent does not have child key"
SEEDS = ("scenario_a", "scenario_b", "scenario_c", "scenario_d", "crash_pr", "nonleaf_prefetch", "hidden_needle")
HOST_REF_HOLDERS = ("ongoing_backup", "prefetch anchor")  # the holders that stand for a host reference


@cache
def seeds() -> tuple[tuple[str, dict, tuple[str, ...]], ...]:
    """(name, document, schedule turns) per seed; ``hidden_needle`` also with its minimal schedule."""
    out = []
    for name in SEEDS:
        sc = load(name)
        doc = sc.as_doc()
        for k in ("expect", "title", "description", "reference", "schedule", "minimal_schedule"):
            doc.pop(k, None)
        out.append((name, doc, sc.parse_schedule().turns))
        if name == "hidden_needle":
            out.append((name + "@minimal", doc, sc.parse_schedule(sc.minimal_schedule).turns))
    return tuple(out)


@cache
def borrowable() -> tuple[dict, ...]:
    """Every operation of every seed, once (by value)."""
    seen, out = set(), []
    for _, doc, _ in seeds():
        for ops in doc["actors"].values():
            for op in ops:
                key = repr(sorted(op.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(op)
    return tuple(out)


@dataclass(frozen=True)
class Program:
    seed: str
    doc: dict
    schedule: str

    def __repr__(self) -> str:  # what a failing example prints: enough to paste into a scenario file
        return f"Program(seed={self.seed!r}, schedule={self.schedule!r}, actors={self.doc['actors']!r})"


def _valid_for(doc: dict, op: dict) -> bool:
    storage = doc["config"].get("storage", False)
    return storage or op["op"] not in ("prefetch", "prefetch_done", "l3_ack")


@st.composite
def programs(draw, seeds_=None) -> Program:
    pool = seeds() if seeds_ is None else tuple(s for s in seeds() if s[0] in seeds_)
    name, doc, turns = draw(st.sampled_from(pool))
    doc = copy.deepcopy(doc)
    actors = doc["actors"]
    turns = list(turns)
    for actor in sorted(actors):
        ops = actors[actor]
        change = draw(st.sampled_from(["keep"] * 5 + ["drop", "n", "borrow"]))
        if change == "drop" and len(ops) > 1:
            k = draw(st.integers(0, len(ops) - 1))
            del ops[k]
            if actor in turns:  # the actor's turns are positional: any one of them can go
                turns.remove(actor)
        elif change == "n":
            k = draw(st.integers(0, len(ops) - 1))
            if "n" in ops[k]:
                ops[k] = dict(ops[k], n=max(0, ops[k]["n"] + draw(st.sampled_from([-1, 1]))))
        elif change == "borrow":
            extra = [op for op in borrowable() if _valid_for(doc, op)]
            op = draw(st.sampled_from(extra))
            ops.insert(draw(st.integers(0, len(ops))), copy.deepcopy(op))
            turns.insert(draw(st.integers(0, len(turns))), actor)
    # a nearby schedule: follow the seed's order, sometimes let another actor preempt
    queue, out = list(turns), []
    left = {a: queue.count(a) for a in actors}
    while queue:
        if draw(st.integers(0, 9)) < 7:
            actor = queue[0]
        else:
            actor = draw(st.sampled_from(sorted(a for a, n in left.items() if n)))
        queue.remove(actor)
        left[actor] -= 1
        out.append(actor)
    return Program(name, doc, format_turns(tuple(out)))


@dataclass
class Observed:
    crash: object
    went_stale: list
    cleaned_up: list
    violations: list
    final: object  # the final snapshot

    @property
    def message(self) -> str:
        return "" if self.crash is None else self.crash.message

    @property
    def kind(self) -> str:
        """clean / race (the stale-node assertion) / other (an unrelated assertion; the prefix still counts)."""
        if self.crash is None:
            return "clean"
        return "race" if X in self.message else "other"


def observe(program: Program, preset: str, flags: dict | None = None) -> Observed:
    run = simulate(program.doc, preset, flags=flags, schedule=program.schedule, snapshots=False, invariants=True)
    t = run.trace
    return Observed(run.crash, list(t.went_stale), list(t.cleaned_up), list(t.violations), take(run.cache))


# --- the properties, one per fix flag; each returns the problem or None -------------------------------------------

def no_stale_assertion(o: Observed) -> str | None:
    """stale_guards: ``parent does not have child key`` never fires."""
    return f"{o.crash.function} raised {o.message!r}" if o.kind == "race" else None


def guard_runs_first(o: Observed) -> str | None:
    """guard_before_asserts: no entry assertion ever sees a stale node (the guard skips it before they run)."""
    if o.crash is None or "node.id=" not in o.message:
        return None
    nid = int(o.message.split("node.id=")[1].split()[0].rstrip(","))
    if nid in {e.node for e in o.went_stale}:
        return f"{o.crash.function} raised {o.message!r} on node {nid}, which went stale"
    return None


def cleanup_leaves_no_lru_entry(o: Observed) -> str | None:
    """unconditional_lru_cleanup: a cleaned-up stale node is in no LRU list afterwards."""
    for e in o.cleaned_up:
        lists = [name for name, ids in o.final.lrus.items() if e.node in ids]
        if lists:
            return f"cleaned-up node {e.node} is still in {', '.join(lists)}"
    return None


def host_leaves_have_no_children(o: Observed) -> str | None:
    """host_leaf_predicate == no_children: a node with attached children never becomes a host-leaf candidate."""
    for v in o.violations:
        if v.invariant == "leaf_sets" and "evictable_full_host_leaves" in v.message:
            return f"step {v.step}: {v.message}"
    return None


def cascade_spares_host_refs(o: Observed) -> str | None:
    """cascade_respects_host_refs: no node goes stale while a host reference (L3 backup, prefetch) holds it."""
    for e in o.went_stale:
        held = [h for h in e.holders if h in HOST_REF_HOLDERS]
        if held:
            return f"node {e.node} [{e.key}] went stale at step {e.step} while held by {', '.join(held)}"
    return None


# flag -> (the value that turns the fix on, the property it promises)
PROMISES = {
    "stale_guards": (True, no_stale_assertion),
    "guard_before_asserts": (True, guard_runs_first),
    "unconditional_lru_cleanup": (True, cleanup_leaves_no_lru_entry),
    "host_leaf_predicate": ("no_children", host_leaves_have_no_children),
    "cascade_respects_host_refs": (True, cascade_spares_host_refs),
}
OFF = {"stale_guards": False, "guard_before_asserts": False, "unconditional_lru_cleanup": False,
       "host_leaf_predicate": "loop_old", "cascade_respects_host_refs": False}
