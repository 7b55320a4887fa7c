"""Shrinking a failing run to a minimal case that still fails the same way.

Vocabulary
- A *case* is a scenario document (config, flags, initial nodes, actors) plus a schedule (one actor name per turn).
- It *fails the same way* when its run raises with the same signature: exception type, message (node ids blanked:
  they are labels that change as soon as anything is dropped) and raising function (``machine.signature``).
- A *pass* proposes smaller candidates in a fixed order and keeps the first that still fails the same way and is a
  valid scenario (``scenario.from_doc`` accepts it). Passes: drop the operations after the crash; drop whole actors;
  drop single operations; drop injected nodes and their flags; shorten token lists; lower ``n`` of evictions and
  prefetch completions; shrink pool sizes; join two runs of one actor (local schedule moves); and re-schedule: a
  failing schedule of the current operations with fewer preemptions (``search.exhaustive`` with ``until`` = the
  signature and the bound one below the current count), until none exists.

Passes repeat until none changes the case. The order of the passes matters: shortening a token list can make an
operation necessary that the longer list did without (scenario C: with ``[1,3]`` for ``[1,2,3,4]`` the run needs
an ``events`` turn, so shrinking tokens early stopped at 7 operations where 6 fail the same way), and the other
way round elsewhere (scenario B). So the shrinker runs two strategies (``STRATEGIES``): every pass from the
start, and every pass but the token one until none applies, then every pass. It keeps the smaller result: fewer
operations first, then fewer switches, then fewer tokens. Each result is a fixpoint of every pass:
shrinking it again changes nothing (idempotent), and every choice is deterministic (same input, same minimal
case). ``tests/test_minimality.py`` checks the result by brute force, independently of these passes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..driver import Crash
from ..gcpace import fewer_collections
from ..scenario import Scenario, from_doc
from ..scheduler import Schedule, format_turns
from .machine import signature
from .results import count_preemptions, switches
from .search import ExploreError
from .shrink_passes import STRATEGIES, Case, Shrinker, truncate


@dataclass(frozen=True)
class Shrunk:
    scenario: Scenario  # the minimal case; its ``schedule`` is the minimal schedule, ``expect`` its outcome
    preset: str
    schedule: str
    crash: Crash
    signature: str
    steps: int  # operations in the schedule
    switches: int
    preemptions: int
    candidates: int = field(default=0, compare=False)  # cases tried
    rounds: int = field(default=0, compare=False)

    def case(self) -> dict:
        """What the case is made of (config, flags, initial nodes, actors, schedule), for comparisons."""
        sc = self.scenario
        return dict(config=sc.config, flags=sc.flags, initial=sc.initial, actors=sc.actors, schedule=self.schedule)

    def as_dict(self) -> dict:
        return dict(schedule=self.schedule, steps=self.steps, assertion=self.crash.outcome,
                    raised_in=self.crash.function, signature=self.signature, switches=self.switches,
                    preemptions=self.preemptions, actors={a: len(o) for a, o in self.scenario.actors.items()},
                    candidates=self.candidates)


def _size(case: Case) -> tuple[int, int, int]:
    """What "smaller" means, in order: fewer operations, fewer switches, fewer tokens."""
    tokens = sum(len(op.get("tokens", ())) for ops in case.doc["actors"].values() for op in ops)
    return len(case.turns), switches(case.turns), tokens


@fewer_collections()
def shrink(scenario: Scenario | str, preset: str | None = None, flags: dict | None = None,
           schedule: str | Schedule | None = None, max_rounds: int = 50) -> Shrunk:
    """Shrink the failing run of ``scenario`` under ``schedule`` (default: the scenario's) to a minimal case."""
    from ..scenario import load
    from ..simulate import resolve_flags, simulate

    sc = scenario if isinstance(scenario, Scenario) else load(scenario)
    name, fl = resolve_flags(sc, preset, flags)
    sched = schedule if isinstance(schedule, Schedule) else sc.parse_schedule(schedule)
    doc = sc.as_doc()
    for k in ("schedule", "expect", "title", "description", "reference", "preset"):
        doc.pop(k, None)
    doc["flags"] = {k: v for k, v in fl.as_dict().items() if k in {**sc.flags, **(flags or {})}}
    if not doc["flags"]:
        del doc["flags"]
    case = Case(doc, sched.turns)
    probe = Shrinker(name, fl, "")
    got = probe.run(case)
    if got is None or got[1].crash is None:
        raise ExploreError(f"{sc.name} does not fail under {name} with schedule '{sched}'; shrinking needs a "
                           f"failing run (find one with `simcache explore {sc.name}`)")
    sh = Shrinker(name, fl, signature(got[1].crash))
    case = truncate(sh, case)
    rounds, best = 0, None
    for stages in STRATEGIES:
        got = case
        for passes in stages:
            while rounds < max_rounds:
                rounds += 1
                moved = False
                for p in passes:
                    new = p(sh, got)
                    if new is not None:
                        got, moved = new, True
                if not moved:
                    break
        if best is None or _size(got) < _size(best):
            best = got
    case = best
    final_sc, m = sh.run(case)
    text = format_turns(case.turns)
    run = simulate(final_sc, name, flags=None, schedule=text, snapshots=False, invariants=False)
    crash = run.crash
    lengths = {a: len(o) for a, o in final_sc.actors.items()}
    expect = {name: dict(outcome="assertion", raised_in=crash.function, step=run.result["step"],
                         message=crash.message)}
    final_doc = dict(case.doc)
    base = sc.name if sc.name.endswith("_minimal") else f"{sc.name}_minimal"
    final_doc.update(name=base, preset=name, schedule=text, expect=expect,
                     title=f"Minimal failing case of {base[: -len('_minimal')]} under {name}",
                     description=f"Shrunk by `simcache explore --shrink` from {base[: -len('_minimal')]}: "
                                 f"{len(case.turns)} "
                                 f"operations, {switches(case.turns)} switches; raises {crash.outcome} in "
                                 f"{crash.function}.")
    minimal = from_doc(final_doc, name=final_doc["name"])
    return Shrunk(minimal, name, text, crash, sh.target, len(case.turns), switches(case.turns),
                  count_preemptions(case.turns, lengths), sh.tried, rounds)


def shrink_again(shrunk: Shrunk) -> Shrunk:
    """Shrink a shrunk case once more (for the idempotence check): the scenario as written, with its schedule."""
    return shrink(shrunk.scenario, shrunk.preset, None, shrunk.schedule)
