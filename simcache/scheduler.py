"""Schedules: the order in which actors take turns, as a short string a person can read and paste back.

Grammar (whitespace-separated turns)::

    schedule := turn*
    turn     := ACTOR            one operation of ACTOR
              | ACTOR*N          N operations of ACTOR in a row
              | ACTOR*           every remaining operation of ACTOR

Example: ``R1 R2*2 mem ctl R1*`` runs R1's first op, two of R2's, one of mem's, one of ctl's, then the rest of R1's.
Interleavings only happen between scheduler-level operations (a request's start and finish are separate
operations) and at asynchronous completions (acks are operations of a controller actor), as in the real system.
Without a schedule, actors take turns round-robin in the order the scenario lists them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ScheduleError, shown

_TURN = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)(?:\*([0-9]*))?")
MAX_TURNS = 10_000_000  # a schedule never has more turns than the scenario has operations; this bounds the count


@dataclass(frozen=True)
class Schedule:
    turns: tuple[str, ...]  # one actor name per operation

    def __post_init__(self) -> None:
        if not isinstance(self.turns, tuple) or not all(isinstance(t, str) for t in self.turns):
            raise ScheduleError(f"Schedule takes a tuple of actor names like ('R1', 'R2'), not {shown(self.turns)}")

    def __str__(self) -> str:
        return format_turns(self.turns)

    def __len__(self) -> int:
        return len(self.turns)

    @property
    def switches(self) -> int:
        """Context switches: how often the actor changes from one turn to the next."""
        return sum(1 for a, b in zip(self.turns, self.turns[1:], strict=False) if a != b)


def format_turns(turns) -> str:
    out, i = [], 0
    turns = list(turns)
    while i < len(turns):
        j = i
        while j < len(turns) and turns[j] == turns[i]:
            j += 1
        out.append(turns[i] if j - i == 1 else f"{turns[i]}*{j - i}")
        i = j
    return " ".join(out)


def parse_schedule(text: str, lengths: dict[str, int]) -> Schedule:
    """Parse ``text`` against actors with ``lengths`` operations each."""
    if not isinstance(text, str):
        raise ScheduleError("a schedule must be a string of actor names like 'R1 R2*2 ctl'")
    if not isinstance(lengths, dict) or not all(isinstance(a, str) and type(n) is int and n >= 0
                                                for a, n in lengths.items()):
        raise ScheduleError(f"parse_schedule needs the actors' operation counts, like {{'R1': 2, 'ctl': 1}}, not "
                            f"{shown(lengths)}")
    used = {a: 0 for a in lengths}
    turns: list[str] = []
    for tok in text.split():
        m = _TURN.fullmatch(tok)
        if not m:
            raise ScheduleError(f"schedule turn {shown(tok)} is not ACTOR, ACTOR*N or ACTOR*; "
                                f"write e.g. 'R1 R2*2 ctl*'")
        actor, count = m.group(1), m.group(2)
        if actor not in lengths:
            raise ScheduleError(f"schedule names unknown actor {shown(actor)}; the actors are {', '.join(lengths)}")
        left = lengths[actor] - used[actor]
        if count and len(count.lstrip("0")) > len(str(MAX_TURNS)):  # too long for int() to be sensible
            said = count if len(count) <= 30 else f"{count[:20]}... ({len(count):,} digits)"
            raise ScheduleError(f"schedule asks actor {actor!r} for {said} operations but it has {lengths[actor]}; "
                                f"shorten the schedule or add operations")
        n = left if count == "" else (1 if count is None else int(count))
        if n > left:
            raise ScheduleError(f"schedule asks actor {actor!r} for {used[actor] + n} operations but it has "
                                f"{lengths[actor]}; shorten the schedule or add operations")
        used[actor] += n
        turns += [actor] * n
    return Schedule(tuple(turns))


def round_robin(lengths: dict[str, int]) -> Schedule:
    left, turns = dict(lengths), []
    while any(left.values()):
        for a in lengths:
            if left[a]:
                turns.append(a)
                left[a] -= 1
    return Schedule(tuple(turns))


def complete(schedule: Schedule, lengths: dict[str, int]) -> bool:
    return all(schedule.turns.count(a) == n for a, n in lengths.items())
