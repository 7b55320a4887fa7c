"""The prefetch-refill race of ``UnifiedRadixCache`` (issue #39), as steps on the real cache.

The shape: an L3 prefetch of ``[1,2,9,9]`` from the root, a request ``[1,2,3,4]`` whose backup fails because the
prefetch holds every host slot, the prefetch completing under the never-backed-up ``[1,2]``, then three evictions.
Before #31902 (0.5.17) the cache hangs the host-only ``[9,9]`` under ``[1,2]``; ``evict(3)`` then unlinks
``[1,2]`` while ``[9,9]`` stays in the host leaf set; ``evict_host(2)`` puts the detached ``[1,2]`` back into the
device leaf set; ``evict(2)`` frees its device slots a second time and fails ``assert v == node``.

``run_race`` runs the steps and stops at the first exception; ``RaceResult`` says what happened.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..loader import Loaded
from .driver import Outcome, RealUnified, Sizes

PREFETCHED = [1, 2, 9, 9]
FINISHED = [1, 2, 3, 4]


@dataclass(frozen=True)
class RaceResult:
    version: str
    write_policy: str
    outcomes: tuple[Outcome, ...]
    stale: tuple[str, ...]  # "after <step>: <set> leaves hold detached <nodes>"
    double_frees: tuple[str, ...]
    snapshot: tuple[str, ...]  # the state after the last step run
    states: tuple[tuple[str, ...], ...] = ()  # the state after each step run
    refill: str = ""  # where the prefetched [9,9] went at step 3: "hung under [1,2]" or "dropped"

    @property
    def failed(self) -> Outcome | None:
        return next((o for o in self.outcomes if not o.ok), None)

    @property
    def verdict(self) -> str:
        """``clean``, or ``FAILS: <exception> in <the SGLang function that raised>``."""
        bad = self.failed
        if bad is None:
            return "clean"
        return f"FAILS: {bad.error} in {bad.chain[-1].function if bad.chain else 'the driver'}"

    def report(self, verbose: bool = False) -> str:
        lines = [f"UnifiedRadixCache @ {self.version}, {self.write_policy}, L3 storage on"]
        for o, state in zip(self.outcomes, self.states, strict=True):
            lines.append(f"  {o.text()}")
            if verbose:
                lines += [f"      | {s}" for s in state]
        bad = self.failed
        if bad is not None:
            lines.append("  call chain (outermost first):")
            lines += [f"    {f}" for f in bad.chain]
        lines.append(f"  the refill [9,9]: {self.refill}")
        lines += [f"  stale: {s}" for s in self.stale]
        lines += [f"  double free: {d}" for d in self.double_frees]
        lines.append("  state:")
        lines += [f"    {s}" for s in self.snapshot]
        lines.append(f"  result: {self.verdict}")
        return "\n".join(lines)


def race_steps(c: RealUnified):
    """The steps as (label, function, args)."""
    steps = [("1 prefetch [1,2,9,9] from the root", c.prefetch, "R1", PREFETCHED)]
    if c.target.late_host_alloc:
        steps.append(("1b its L3 hit count (4) arrives: host KV reserved", c.prefetch_hit, "R1", 4))
    steps += [
        ("2 request [1,2,3,4] finishes: its backup finds the host full", c.request, "R2", FINISHED),
        ("3 the prefetch completes: [9,9] arrives under [1,2]", c.prefetch_done, "R1", 4, True),
        ("4 evict(3)", c.evict, 3),
        ("5 evict_host(2)", c.evict_host, 2),
        ("6 evict(2)", c.evict, 2),
    ]
    return steps


def run_race(loaded: Loaded, write_policy: str = "write_through") -> RaceResult:
    c = RealUnified(loaded, write_policy=write_policy, sizes=Sizes())
    stale, states, refill = [], [], ""
    for label, fn, *args in race_steps(c):
        out = c.run(label, fn, *args)
        states.append(tuple(c.snapshot()))
        for which, nodes in c.stale_leaves().items():
            if nodes:
                stale.append(f"after step {label.split()[0]}: the {which} leaf set holds detached {', '.join(nodes)}")
        if label.startswith("3 "):
            s12 = c.root.children.get(1)
            hung = s12 is not None and 9 in s12.children
            refill = "hung under [1,2], which is not backed up" if hung and not s12.backuped else (
                "hung under [1,2]" if hung else "dropped")
        if not out.ok:
            break
    doubles = tuple(f"{d['pool']} slots {d['slots']} via {' <- '.join(d['chain'])}" for d in c.ledger.double_frees())
    return RaceResult(loaded.target.name, write_policy, tuple(c.outcomes), tuple(stale), doubles,
                      tuple(c.snapshot()), tuple(states), refill)
