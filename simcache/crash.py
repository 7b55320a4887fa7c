"""Crashes: an exception of the simulated cache as a result, and every way simcache summarises one.

Vocabulary
- A ``Crash`` is what the simulated cache raised: SGLang's exception type and message, the simulated function that
  raised it and the simulated call stack (outermost first). It is data, reported, never raised out of the API.
- An ``InternalError`` is a bug of simcache's own observers (recorder, snapshots, invariants, views): never a result.
- ``STALE`` is the message of the race this project teaches, spelled here once.

The summaries, one line each (``crash`` may be None for a clean run where it says so):
- ``crash.outcome``: ``AssertionError: parent does not have child key, 1`` (the oracle's ``outcome``);
- ``crash.said``: the outcome, or ``AssertionError (no message)`` for a bare ``assert`` (what the views print);
- ``crash.located``: ``said`` and ``(in _delete_tombstone_leaf)`` (an export's header);
- ``crash.raised``: ``said`` and ``(raised in ...)`` (a transcript's ``outcome:`` line);
- ``short_sig(crash)``: the oracle's ``sig``: the message up to its first detail, ``in`` the function;
- ``signature(crash)``: the explorer's: the message with node ids blanked, ``@`` the function (``clean`` if None);
- ``cell(crash)``: the outcome table's: ``X in <function>`` for the stale-node assertion (``clean`` if None).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .trace_hooks import simulated_frames

STALE = "parent does not have child key"  # the stale-node race's assertion (SGLang's message)
_PACKAGE = __name__.rpartition(".")[0]
# simcache's observers: an exception raised in their code is a bug of simcache, not a result of the simulated cache
_OBSERVERS = frozenset(f"{_PACKAGE}.{m}" for m in ("trace", "trace_hooks", "snapshot", "invariants", "state"))
_VIEWS = f"{_PACKAGE}.render."
_IDS = re.compile(r"\b(node\.id|x\.id|self\.cache\[node\.id\]\.id)=\d+|(?<=evicted node )\d+")
_DETAIL = re.compile(r",| with | x\.id=| node\.id=")


@dataclass(frozen=True)
class Crash:
    """An exception raised by the simulated cache: SGLang's message, where it was raised, and the call stack."""
    type: str
    message: str
    function: str
    stack: tuple[str, ...]

    @property
    def outcome(self) -> str:
        return f"{self.type}: {self.message}"

    @property
    def said(self) -> str:
        """The outcome as a reader sees it: a bare ``assert v == node`` has no message, said so instead of ``': '``."""
        return said(self.outcome)

    @property
    def located(self) -> str:
        return f"{self.said} (in {self.function})"

    @property
    def raised(self) -> str:
        return f"{self.said}  (raised in {self.function})"

    def as_dict(self) -> dict:
        return dict(message=self.message, type=self.type, function=self.function, stack=list(self.stack))


def said(outcome: str) -> str:
    """An outcome text (``"AssertionError: x"``, ``"clean"``) as a reader sees it: ``"AssertionError: "`` (a bare
    ``assert``) becomes ``"AssertionError (no message)"``; anything else is unchanged."""
    kind, sep, message = outcome.partition(": ")
    return f"{kind} (no message)" if sep and not message.strip() else outcome


def crash_from(exc: BaseException) -> Crash:
    """The ``Crash`` of an exception the simulated cache raised (its stack read from the traceback)."""
    frames = simulated_frames(exc)
    typ = "AssertionError" if isinstance(exc, AssertionError) else type(exc).__name__
    return Crash(typ, str(exc), frames[-1] if frames else "driver", tuple(frames))


def short_sig(crash: Crash) -> str:
    """The oracle's ``sig``: ``AssertionError: parent does not have child key in _delete_tombstone_leaf``."""
    return f"{crash.type}: {_DETAIL.split(crash.message)[0]} in {crash.function}"


def signature(crash: Crash | None) -> str:
    """``"clean"`` or ``"AssertionError: <message> @ <function>"`` with node ids blanked (they are labels)."""
    if crash is None:
        return "clean"
    if not crash.message:
        return f"{crash.type} (no message) @ {crash.function}"
    return f"{crash.type}: {_IDS.sub(lambda m: (m.group(1) + '=#') if m.group(1) else '#', crash.message)} " \
           f"@ {crash.function}"


def cell(crash: Crash | None) -> str:
    """The outcome table's text: ``clean``, ``X in <function>`` (X: the stale-node assertion), or the message up to
    its first comma and the function."""
    if crash is None:
        return "clean"
    if STALE in crash.message:
        return f"X in {crash.function}"
    return f"{crash.message.split(',')[0]} in {crash.function}"


class InternalError(RuntimeError):
    """A bug in simcache's own observers (recorder, snapshots, invariants), never a result of the simulated cache."""


def raise_if_internal(exc: BaseException, where: str) -> None:
    """Re-raise ``exc`` as an ``InternalError`` when it was raised by simcache's observers rather than by the code
    that mirrors SGLang (whose exceptions, assertions or not, are results). The origin is the module whose code
    raised it (the innermost frame's), not the file it was loaded from."""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last, tb = tb.tb_frame, tb.tb_next
    module = last.f_globals.get("__name__", "") if last is not None else ""
    if module in _OBSERVERS or module.startswith(_VIEWS):
        raise InternalError(f"simcache bug while observing {where}: {type(exc).__name__}: {exc} "
                            f"(in {module.rpartition('.')[2]}.py:{last.f_lineno})") from exc
