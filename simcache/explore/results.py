"""What a search reports: one run's result, the tally over runs, and the frozen ``ExploreResult``.

Vocabulary (see ``search``): a *switch* changes actor between two turns; a *preemption* switches away from an actor
that still has operations left. A run's *signature* is ``clean`` or its exception (``machine.signature``); a
*failure* is a run that raised, printed as the schedule up to the raising operation. *Damage* is a kind of
corruption an end state holds (``leaked:host_kv``, ``double_free:device_kv``), each with the first schedule that
left it. Ranks and "first" follow the order runs are added, which every strategy fixes (serial or parallel).
"""
from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from ..driver import Crash
from ..scheduler import format_turns
from .machine import Machine, Plan, signature

# one run's result, as plain data that crosses process boundaries: (turn indices, crash or None, end key, damage)
RunOut = tuple[tuple[int, ...], Crash | None, bytes, tuple]


@dataclass(frozen=True)
class Failure:
    schedule: str
    steps: int
    preemptions: int
    switches: int
    assertion: str  # "AssertionError: parent does not have child key, 1"
    raised_in: str
    signature: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExploreResult:
    scenario: str
    preset: str
    strategy: str
    bound: int | None
    seed: int | None
    budget: int | None
    schedules_run: int
    distinct_states: int
    failing: int
    failing_schedules: tuple[str, ...]
    outcomes: tuple[tuple[str, int], ...]  # signature -> schedules run with it, sorted
    first_failure: Failure | None  # fewest preemptions, then steps, switches, schedule; with until: the one asked for
    first_by_signature: tuple[tuple[str, Failure], ...]  # each failing signature -> the first run that showed it
    damage: tuple[tuple[str, str], ...]  # "leaked:host_kv" -> the first schedule whose end state has it
    pruned: int
    exhausted: bool  # every schedule within the bound was covered (no budget cut, no early stop)
    space_covered: bool  # every schedule of the scenario was covered (exhausted, and the bound cut nothing off)
    total_schedules: int  # complete interleavings of the scenario's actors
    time_s: float = field(default=0.0, compare=False)

    @property
    def signatures(self) -> set[str]:
        return {s for s, _ in self.outcomes}

    def failure_with(self, text: str) -> Failure | None:
        """The first failure whose signature contains ``text``."""
        return next((f for sig, f in self.first_by_signature if text in sig), None)

    @property
    def failing_fraction(self) -> float:
        return self.failing / self.schedules_run if self.schedules_run else 0.0

    @property
    def rate(self) -> float:
        return self.schedules_run / self.time_s if self.time_s else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["outcomes"] = dict(self.outcomes)
        d["damage"] = dict(self.damage)
        d["failing_schedules"] = list(self.failing_schedules)
        d["first_failure"] = self.first_failure.as_dict() if self.first_failure else None
        d["first_by_signature"] = {sig: f.as_dict() for sig, f in self.first_by_signature}
        if self.total_schedules >= EXACT:  # JSON cannot hold it usefully (nor can Python print it past 4,300 digits)
            d["total_schedules"] = count_text(self.total_schedules)
        return d


def count_preemptions(turns, lengths: dict[str, int]) -> int:
    left, n = dict(lengths), 0
    for i, a in enumerate(turns):
        left[a] -= 1
        if i + 1 < len(turns) and turns[i + 1] != a and left[a] > 0:
            n += 1
    return n


def count_schedules(lengths: Iterable[int]) -> int:
    lengths = list(lengths)
    out = math.factorial(sum(lengths))
    for n in lengths:
        if n > 1:  # (1! = 1: a thousand one-operation actors divide nothing)
            out //= math.factorial(n)
    return out


EXACT = 10**18  # counts below this are said exactly; above, in scientific form (a count may have 4,300+ digits)


def count_text(n: int) -> str:
    """A count as the summary prints it: ``1234567`` or, from ``EXACT`` up, ``2.88e+4740`` (never ``str(n)`` of a
    huge count, which Python refuses past 4,300 digits)."""
    if n < EXACT:
        return str(n)
    exponent = math.floor(math.log10(n))
    mantissa = 10 ** (math.log10(n) - exponent)
    if round(mantissa, 2) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.2f}e+{exponent}"


def switches(turns) -> int:
    return sum(1 for a, b in zip(turns, turns[1:], strict=False) if a != b)


class Tally:
    """Counts runs as they are added, in order; ``until``: the signature text a search is looking for."""

    def __init__(self, plan: Plan, budget: int | None, until: str | None = None) -> None:
        self.plan, self.budget, self.until = plan, budget, until
        self.found = False  # a failure matching ``until`` was seen
        self.lengths = dict(zip(plan.actors, plan.lengths, strict=True))
        self.runs = self.failing = 0
        self.outcomes: Counter = Counter()
        self.ends: set[bytes] = set()
        self.failing_schedules: list[str] = []
        self.best: Failure | None = None
        self._best_rank: tuple = ()
        self.damage: dict[str, str] = {}
        self.by_signature: dict[str, Failure] = {}

    @property
    def full(self) -> bool:
        return self.budget is not None and self.runs >= self.budget

    def add(self, out: RunOut) -> None:
        idx, crash, end, damage = out
        self.runs += 1
        sig = signature(crash)
        self.outcomes[sig] += 1
        self.ends.add(end)
        if crash is None and not damage:  # most runs: no schedule text to spell
            return
        turns = tuple(self.plan.actors[i] for i in idx)
        text = format_turns(turns)
        for tag, _ in damage:
            self.damage.setdefault(tag, text)
        if crash is None:
            return
        self.failing += 1
        if len(self.failing_schedules) < 5:
            self.failing_schedules.append(text)
        f = Failure(text, len(turns), count_preemptions(turns, self.lengths), switches(turns), crash.outcome,
                    crash.function, sig)
        self.by_signature.setdefault(sig, f)
        rank = (self.until is not None and self.until not in sig, f.preemptions, f.steps, f.switches, f.schedule)
        if self.best is None or rank < self._best_rank:
            self.best, self._best_rank = f, rank
        if self.until is not None and self.until in sig:
            self.found = True  # the failure asked for: it outranks every other one (its rank's first field)

    def result(self, strategy: str, preset: str, bound, seed, pruned: int, exhausted: bool, covered: bool,
               started: float, total: int | None = None) -> ExploreResult:
        return ExploreResult(
            self.plan.name, preset, strategy, bound, seed, self.budget, self.runs, len(self.ends), self.failing,
            tuple(self.failing_schedules), tuple(sorted(self.outcomes.items())), self.best,
            tuple(sorted(self.by_signature.items())), tuple(sorted(self.damage.items())), pruned, exhausted, covered,
            count_schedules(self.plan.lengths) if total is None else total, time.perf_counter() - started)


SEARCH_FIX = "give a smaller --budget or --bound, or raise $SIMCACHE_MEMORY_LIMIT_MB"


def search_watch():
    """What a search adds to the process's memory, against ``$SIMCACHE_MEMORY_LIMIT_MB`` (checked once a round)."""
    from ..trace.memory import MemoryWatch, memory_limit

    return MemoryWatch(memory_limit())


def finish(m: Machine, damage: dict) -> RunOut:
    """A terminal machine's result; ``damage`` memoises the pool accounting by end state."""
    end = m.key() + signature(m.crash).encode()
    got = damage.get(end)
    if got is None:
        got = damage[end] = m.damage()
    return tuple(m.idx), m.crash, end, got
