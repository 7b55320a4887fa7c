"""``explore --confirm-real``: replay each failure the explorer reports on SGLang's own code, and say what it did.

A failure is *confirmed* when the real code raises the same exception (message with node ids blanked) in the same
function on the same schedule; otherwise it is *not reproduced*, shown with what the real code did instead: a
disagreement between the model and the real code, printed, never hidden.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..crash import Crash, said, signature
from ..scenario import Scenario
from .compare import loaded_for, parse_word
from .run import run_real

CONFIRMED, NOT_REPRODUCED = "confirmed", "not reproduced"


@dataclass(frozen=True)
class Confirmation:
    label: str  # "minimal (shrunk)", "first failure with ..."
    schedule: str
    model: str  # the model's signature
    real: str  # the real code's signature ("clean" if it ran clean)
    real_outcome: str  # the real exception text, or "clean"
    real_raised_in: str | None
    real_step: int | None

    @property
    def verdict(self) -> str:
        return CONFIRMED if self.model == self.real else NOT_REPRODUCED

    def as_dict(self) -> dict:
        return dict(label=self.label, schedule=self.schedule, verdict=self.verdict, model=self.model, real=self.real,
                    real_outcome=self.real_outcome, real_raised_in=self.real_raised_in, real_step=self.real_step)

    def line(self) -> str:
        if self.verdict == CONFIRMED:
            return f"  {CONFIRMED:<15} {self.label}: the real code raises {said(self.real_outcome)} in " \
                   f"{self.real_raised_in} at op {self.real_step}"
        return (f"  DISAGREEMENT    {self.label} ({self.schedule}): the model says {self.model}; the real code "
                f"says {self.real if self.real == 'clean' else self.real + f' at op {self.real_step}'} "
                f"({NOT_REPRODUCED})")


def real_signature(real: dict) -> str:
    """The explorer's signature of a real result (``crash.signature``'s format)."""
    if real["outcome"] == "clean":
        return "clean"
    typ, _, msg = real["outcome"].partition(": ")
    return signature(Crash(typ, msg, real["raised_in"], ()))


def confirm(cases: list[tuple[str, Scenario, str, str]], word: str) -> tuple[str, list[Confirmation]]:
    """Replay each (label, scenario, schedule, model signature) on the real code ``word`` names (a release version,
    a path or ``installed``) -> (the source's label, one ``Confirmation`` each)."""
    return replay(cases, loaded_for(*parse_word(word)), run_real)


def replay(cases: list[tuple[str, Scenario, str, str]], loaded, run) -> tuple[str, list[Confirmation]]:
    """Each case replayed with ``run(scenario, loaded, schedule)`` (either family's real runner) -> (the source's
    label, one ``Confirmation`` each)."""
    out = []
    for label, sc, sched, model_sig in cases:
        real = run(sc, loaded, sched)
        out.append(Confirmation(label, sched, model_sig, real_signature(real), real["outcome"], real["raised_in"],
                                real["step"]))
    return loaded.source.label, out
